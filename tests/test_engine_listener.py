"""The one way to observe the engine: the trace recorder's listeners (``minispec.instruments.trace``).

A listener hears what a recording engine's parts did, in order, and changes nothing; the
reference harness (``reference/capture.py``, ``reference/v2_capture.py``) captures all it
hands vLLM that way. No code outside the mutation harness (``minispec/lab/explorer/mutants.py``,
whose job is to change the engine) patches an engine internal: the scan below is planted
with the patches the harness used to make. What it does not see: a patch made by
assigning to a class attribute by hand, or through ``setattr``.
"""

import ast
from pathlib import Path

from minispec.instruments.trace import EngineListener, TraceRecorder, listening
from minispec.lab.experiments import forum_thread, run_schedule, thread_schedule

ROOT = Path(__file__).resolve().parents[1]
MUTATION_HARNESS = {"minispec/lab/explorer/mutants.py"}


def patches(source: str) -> list[tuple[int, str]]:
    """Every ``mock.patch(...)``, ``patch(...)`` or ``patch.object(...)`` call in ``source``: (its line, the call)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in ("patch", "mock.patch", "unittest.mock.patch") or name.endswith("patch.object"):
                found.append((node.lineno, name))
    return found


def test_the_scan_catches_the_patches_the_harness_used_to_make():
    planted = '''
from unittest import mock
with mock.patch("minispec.entrypoints.llm.TraceRecorder", make):
    stack.enter_context(mock.patch.object(GPUModelRunner, "describe_rows", wrapper))
    stack.enter_context(patch.object(Scheduler, name, wrapper))
'''
    assert patches(planted) == [(3, "mock.patch"), (4, "mock.patch.object"), (5, "patch.object")]


def test_nothing_outside_the_mutation_harness_patches_the_engine():
    files = [p for folder in ("minispec", "reference", "tools") for p in sorted((ROOT / folder).rglob("*.py"))]
    found = {rel: hits for p in files if (rel := p.relative_to(ROOT).as_posix()) not in MUTATION_HARNESS
             and (hits := patches(p.read_text()))}
    assert found == {}
    assert patches((ROOT / "minispec/lab/explorer/mutants.py").read_text()), "the harness's own patches, seen"


class Log(EngineListener):
    def __init__(self, recorder):
        self.heard = []

    def on_request_added(self, scheduler, request):
        self.heard.append(("add", request.request_id))

    def on_schedule(self, scheduler, out):
        self.heard.append(("schedule", out.step, out.total_num_scheduled_tokens > 0))

    def on_update(self, scheduler, out, output):
        self.heard.append(("update", out.step))

    def on_stage_start(self, runner, out):
        self.heard.append(("start", out.step, runner.pp_rank))

    def on_stage_inputs(self, runner, out):
        self.heard.append(("inputs", out.step, runner.pp_rank))

    def on_last_stage_sampled(self, runner, batch, sampled, num_sampled, num_rejected):
        self.heard.append(("last stage sampled", batch.step, runner.pp_rank))

    def on_pp_message(self, runner, message):
        self.heard.append((f"pp {message.kind.value}", message.step, message.rank))


def listened(run):
    logs = []
    with listening(lambda recorder: logs.append(Log(recorder)) or logs[-1]):
        result = run()
    return result, logs


def test_a_listener_hears_the_thread_in_order_and_changes_nothing():
    trace, logs = listened(lambda: forum_thread("vllm-0.9.2"))
    assert len(logs) == 1
    heard = logs[0].heard
    assert [h for h in heard if h[0] == "add"] == [("add", r) for r in "ABCD"]
    scheduled = [h[1] for h in heard if h[0] == "schedule" and h[2]]
    assert scheduled == [s.step for s in trace.steps]
    assert [h[1] for h in heard if h[0] == "update"] == sorted(scheduled)
    # every stage of every scheduled step gathered its inputs, after its schedule was made
    assert sorted((h[1], h[2]) for h in heard if h[0] == "inputs") == sorted(
        (s.step, st.stage) for s in trace.steps for st in s.stages)
    for step in scheduled:
        assert heard.index(("schedule", step, True)) < heard.index(("inputs", step, 0))
    assert str(trace.events) == str(forum_thread("vllm-0.9.2").events), "a listener changes nothing"
    assert TraceRecorder("all", 2).listeners == (), "outside ``listening`` no recorder asks for one"


def test_model_runner_v2_tells_its_stages_and_its_hand_over():
    _, logs = listened(lambda: run_schedule(thread_schedule(), "all", model_runner="v2"))
    heard = logs[0].heard
    starts = [h for h in heard if h[0] == "start"]
    assert {h[2] for h in starts} == {0, 1} and len(starts) == len([h for h in heard if h[0] == "inputs"])
    posted = [h for h in heard if h[0] == "pp posted"]
    sent = [h for h in heard if h[0] == "pp sampled"]
    sampled = [h for h in heard if h[0] == "last stage sampled"]
    assert posted and all(h[2] == 0 for h in posted), "stage 0 posts its receives"
    assert sent and all(h[2] == 1 for h in sent + sampled), "the last stage samples and sends"
    assert {h[1] for h in posted} == {h[1] for h in sent}, "a receive posted for each batch sent"
    for h in sent:
        assert heard.index(("last stage sampled", h[1], 1)) > heard.index(h), "sent, then told as sampled and drafted"
