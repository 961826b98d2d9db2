"""The 2026 fault presets (switches: ``minispec/v1/worker/gpu/runner_fixes.py`` and
``minispec/v1/worker/relay/runner_fixes.py``; catalogue: ``minispec/lab/faults/catalogue.py``;
issues 17 §2 and 25 §3) and the ``model_runner=`` option that selects the design they belong to.

For each preset, on its own scenario: the first thing that goes wrong is what ``EVERY_FAULT``
says (the invariant, at its step, stage and request, for the reason its ``why`` gives,
checked on the violation's expected/actual; or the transport's error), and the same
scenario without the fault is clean and emits the greedy reference.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import numpy as np
import pytest
import torch

from minispec import LLM
from minispec.distributed.parallel_state import InProcStageGroup, MessageMismatch, post_checked, send_checked
from minispec.instruments.invariants import Invariant, InvariantViolation
from minispec.lab.experiments.schedule import build_llm, greedy_reference, run_recorded, schedule_reference
from minispec.lab.faults.catalogue import (
    BEYOND_TOKENS_FAULTS,
    EVERY_FAULT,
    FAULTS,
    LEFT_OUT,
    RELAY_FAULTS,
    TREE_FAULTS,
    V1_FAULTS,
    FaultPreset,
    FirstViolation,
    RelayFaultPreset,
    TransportError,
    V1FaultPreset,
)
from minispec.lab.faults.reproduce import run_fault
from minispec.v1.worker.gpu import ENV_VAR
from minispec.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2
from minispec.v1.worker.gpu.pp_utils import SAMPLED_TAG
from minispec.v1.worker.gpu.runner_fixes import BeyondTokensFaultPreset
from minispec.v1.worker.gpu_model_runner import GPUModelRunner as GPUModelRunnerV1
from minispec.v1.worker.tree_switches import TreeFaultPreset


# -- selection ---------------------------------------------------------------------
def _runner_types(**kwargs) -> set[type]:
    return {type(r) for r in LLM(pipeline_parallel_size=2, **kwargs).engine.executor.runners}


def test_model_runner_selects_the_design_and_the_variable_sets_its_default(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert _runner_types() == {GPUModelRunnerV1}
    assert _runner_types(model_runner="v2") == {GPUModelRunnerV2}
    monkeypatch.setenv(ENV_VAR, "1")
    assert _runner_types() == {GPUModelRunnerV2}
    assert _runner_types(model_runner="v1") == {GPUModelRunnerV1}  # the argument wins
    assert LLM(model_runner="v1").config.model_runner == "v1"


@pytest.mark.parametrize("kwargs,message", [
    (dict(model_runner="v3"), r"model_runner='v3': expected one of \['v1', 'v2', 'relay', 'replicated'\]"),
    (dict(model_runner=2), r"model_runner=2: expected one of \['v1', 'v2', 'relay', 'replicated'\]"),
    (dict(faults="v2-stale-drafts"), r"^faults='v2-stale-drafts' applies to model_runner='v2'; got model_runner='v1'$"),
    (dict(faults="stale"), r"faults='stale': expected None or one of \['relay-no-seq-lens', 'relay-pairing', "
                           r"'stale-output-dropped', 'tree-path-not-compacted', 'v1-pp-async-column-0'"),
    (dict(faults=["v2-slot-reuse"]), r"faults=\['v2-slot-reuse'\]: expected None or one of \['relay-no-seq-lens'"),
    (dict(faults="relay-pairing"), r"^faults='relay-pairing' applies to model_runner='relay'; got model_runner='v1'$"),
    (dict(model_runner="replicated", speculative_config={"method": "draft_model", "num_speculative_tokens": 2}),
     r"^speculative_config method='draft_model': model_runner='replicated' drafts on every stage from the "
     r"history alone, so it expects one of \['ngram'\]$"),
    (dict(faults="v1-num-tokens-no-spec"), r"faults='v1-num-tokens-no-spec' is not a preset: vLLM PR #41133"),
])
def test_bad_selection_names_the_parameter(monkeypatch, kwargs, message):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(ValueError, match=message):
        LLM(**kwargs)


def test_every_preset_is_described():
    assert set(FAULTS) == set(FaultPreset) and set(RELAY_FAULTS) == set(RelayFaultPreset)
    assert set(V1_FAULTS) == set(V1FaultPreset)
    for preset, fault in EVERY_FAULT.items():
        design = ("v2" if preset in FAULTS or preset in BEYOND_TOKENS_FAULTS
                  else "relay" if preset in RELAY_FAULTS or preset in TREE_FAULTS else "v1")
        assert fault.preset is preset and fault.design == design
        assert fault.scenario.check_invariants  # every preset is caught live, async scheduling or not
        assert "#" in fault.reference and fault.summary and fault.fix
        assert ("vllm/v1/worker/gpu/" in fault.source or "model_runner.py" in fault.source
                or "minispec/v1/worker/relay/" in fault.source or "EagleModelMixin" in fault.source
                or "tree_kv.py" in fault.source)
    assert set(LEFT_OUT).isdisjoint(map(str, EVERY_FAULT))


# -- each preset bites where FAULTS says, and its fix is clean -------------------------
def _first_violation(name: str):
    fault = EVERY_FAULT[name]
    llm = build_llm(fault.scenario, model_runner=fault.design, faults=name)
    with pytest.raises(InvariantViolation) as caught:
        llm.engine.run()
    return caught.value.violation


def _fixed_run_is_clean(name: str) -> None:
    schedule = EVERY_FAULT[name].scenario
    trace = run_recorded(build_llm(schedule, model_runner=EVERY_FAULT[name].design))  # invariants checked live: none fired
    assert trace.outputs == schedule_reference(schedule)


@pytest.mark.parametrize("name", [p for p, f in EVERY_FAULT.items() if isinstance(f.expected, FirstViolation)])
def test_the_first_violation_is_the_expected_one_and_the_fix_is_clean(name):
    expected = EVERY_FAULT[name].expected
    v = _first_violation(name)
    assert (v.invariant, v.step, v.stage, v.req_id) == (expected.invariant, expected.step, expected.stage,
                                                        expected.req_id), str(v)
    REASONS[name](v)
    _fixed_run_is_clean(name)


def _zero_drafts(v):
    """The slot's zeroed drafts were embedded, where the scheduler scheduled real ones."""
    assert v.actual == [0] * len(v.actual) and v.expected.startswith("draft slots [") and "[0, 0, 0]" not in v.expected


def _not_taken_back(v):
    """The stage's count runs ahead of the scheduler's by what was rejected."""
    scheduler = int(v.expected.split("=")[1].split()[0])  # under async: "13 (the scheduler's once ...)"
    assert v.actual > scheduler


def _last_token_overwritten(v):
    """Stage 0's row holds every token but the last sampled one, which was written over."""
    want = ast.literal_eval(v.expected.split("=", 1)[1].split("]")[0] + "]")
    assert v.actual[:-1] == want[:-1] and v.actual[-1] != want[-1]


def _previous_occupant(v):
    """E's history (named by its slot) runs on past what the scheduler has: after E's
    prompt come the tokens A's last batch sampled: the end of A's greedy continuation (that
    batch sampled past A's max_tokens; the scheduler trimmed the output, not the broadcast)."""
    assert v.expected.startswith("slot 0's all_token_ids[:")
    scheduler = ast.literal_eval(v.expected.split("=", 1)[1])
    assert v.actual[: len(scheduler)] == scheduler and len(v.actual) > len(scheduler)
    schedule = FAULTS[FaultPreset.V2_SLOT_REUSE].scenario
    k, n = schedule.num_speculative_tokens, schedule.max_tokens
    a_longer = greedy_reference({"A": schedule.requests[0].prompt}, n + k + 1)["A"]
    leaked = v.actual[len(scheduler):]
    assert 0 < len(leaked) <= k + 1
    assert any(a_longer[i : i + len(leaked)] == leaked for i in range(n - len(leaked) + 1, n))


def _paired_with_another_micro_batch(v):
    """A's last sampled token never reached stage 0's slot: its payload was applied to the
    rows of another micro-batch, so the slot holds the zero it was filled with."""
    assert v.expected.startswith("slot ") and v.actual[:-1] == ast.literal_eval(v.expected.split("=", 1)[1])[:-1]
    assert v.actual[-1] == 0 != ast.literal_eval(v.expected.split("=", 1)[1])[-1]


def _foreign_token(v):
    """The row holds one token more than the scheduler's history: another request's broadcast entry
    wrote it at the row's end, and the request's own last token came after it."""
    want = ast.literal_eval(v.expected.split("=", 1)[1].split(" (")[0])
    assert len(v.actual) == len(want) + 1 and v.actual[:-2] == want[:-1] and v.actual[-1] == want[-1]


def _tap_handed_as_zeros(v):
    """Every position of a tap an earlier stage owns reached the drafter changed (as zeros)."""
    n = int(v.expected.split(" at ")[1].split()[0])
    assert v.expected.startswith("tap 1 as stage 0 computed it") and v.actual == f"{n} of them differ"


def _rejected_sibling(v):
    """The committed position holds a node of the tree one level up: the root's second child, left
    in the slot the path's second node was compacted into on the last stage only."""
    position = int(v.expected.split("position ")[1].split(":")[0])
    token, stored = (int(w) for w in v.actual.removeprefix("token ").split(" stored at "))
    assert stored == position - 1 and f"token {token} " not in v.expected


REASONS = {
    FaultPreset.V2_STALE_DRAFTS: _zero_drafts,
    FaultPreset.V2_OPTIMISTIC_NUM_COMPUTED: _not_taken_back,
    FaultPreset.V2_SLOT_REUSE: _previous_occupant,
    RelayFaultPreset.RELAY_PAIRING: _paired_with_another_micro_batch,
    RelayFaultPreset.RELAY_NO_SEQ_LENS: _not_taken_back,  # without new_seq_lens the optimistic count stays
    V1FaultPreset.V1_PP_ASYNC_COLUMN_0: _zero_drafts,
    V1FaultPreset.V1_PP_ASYNC_TRIM_LAST_RANK: _not_taken_back,
    V1FaultPreset.V1_PP_ASYNC_NUM_TOKENS_NO_SPEC: _last_token_overwritten,
    V1FaultPreset.V1_PP_ASYNC_STALE_ROW: _foreign_token,
    BeyondTokensFaultPreset.V2_EAGLE3_TAPS_DROPPED: _tap_handed_as_zeros,
    TreeFaultPreset.TREE_PATH_NOT_COMPACTED: _rejected_sibling,
}


@pytest.mark.parametrize("pp", [2, 4])
def test_the_relay_pairing_fault_needs_three_stages(pp):
    """At pp_size = 2 the faulty slot (c - 2) % 2 *is* the right one, c % 2 (SGLang's
    (i - 1) % 2 == (i + 1) % 2): the same preset on the thread's requests runs clean and greedy,
    which is why a two-stage test never caught it. At four stages it bites where it does at three."""
    schedule = replace(RELAY_FAULTS[RelayFaultPreset.RELAY_PAIRING].scenario, pipeline_parallel_size=pp)
    llm = build_llm(schedule, model_runner="relay", faults="relay-pairing")
    if pp == 2:
        assert run_recorded(llm).outputs == schedule_reference(schedule)  # checked live: nothing fired
        return
    with pytest.raises(InvariantViolation) as caught:
        llm.engine.run()
    expected = RELAY_FAULTS[RelayFaultPreset.RELAY_PAIRING].expected
    assert (caught.value.violation.step, caught.value.violation.stage) == (expected.step, expected.stage)


@pytest.mark.parametrize("name", [p for p, f in FAULTS.items() if isinstance(f.expected, TransportError)])
def test_the_transport_names_the_mismatch_and_the_fix_is_clean(name):
    expected = FAULTS[name].expected
    llm = build_llm(FAULTS[name].scenario, model_runner="v2", faults=name)
    with pytest.raises(MessageMismatch) as caught:
        llm.engine.run()
    assert str(caught.value).startswith(f"stage {expected.stage}, step {expected.step}, applying the last stage's "
                                        f"broadcast: {expected.message}")
    _fixed_run_is_clean(name)


# -- V1 under PP + async scheduling: caught by invariants 2-5 as stated for async -----------
@pytest.mark.parametrize("name", list(V1FaultPreset))
def test_v1_pp_async_preset_is_caught_where_faults_says_and_the_fix_is_clean(name):
    """No message goes out of schedule (each stage decides from its own rows and the scheduler's
    counts whether a broadcast comes, alike on every stage); the checker, holding stage 0 to what
    the scheduler's placeholders stood for, catches each at the step, stage and request
    ``V1_FAULTS`` names, and the fixed run is clean and greedy."""
    run = run_fault(name)
    assert run.transport_error is None and run.as_expected, run.violation
    assert run.fixed_clean


def _async_outputs(schedule, faults=None) -> tuple[dict[str, list[int]], float]:
    """The outputs and acceptance of a run that nothing stops (no invariant checked)."""
    llm = build_llm(replace(schedule, check_invariants=False), model_runner="v1", faults=faults, record=False)
    outputs = {o.request_id: list(o.outputs[0].token_ids) for o in llm.wait_for_completion()}
    return outputs, llm.stats()["acceptance_rate"]


def test_the_column_zero_patch_collapses_acceptance_as_the_thread_reports():
    """vLLM #57755's author measured MTP acceptance 45.6 % -> 8 % under PP 2; here, with the
    draft model on the thread's requests, about 49 % -> 12 %: stage 0 embeds zeros for the drafts
    and a history that lacks every accepted one."""
    schedule = V1_FAULTS[V1FaultPreset.V1_PP_ASYNC_COLUMN_0].scenario
    _, fixed = _async_outputs(schedule)
    _, faulty = _async_outputs(schedule, "v1-pp-async-column-0")
    assert fixed > 0.45 and faulty < 0.15, (fixed, faulty)


@pytest.mark.parametrize("name,bites", [("v1-pp-async-column-0", False), ("v1-pp-async-trim-last-rank", False),
                                        ("v1-pp-async-num-tokens-no-spec", True)])
def test_without_drafts_only_the_token_loss_bites(name, bites):
    """At k = 0 the column-0 layout is the full one (one column, nothing else to carry) and no
    count is optimistic, so two presets run greedy; PR #41133's token loss is not about drafts
    (its own report has none) and bites there too."""
    schedule = replace(V1_FAULTS[V1FaultPreset(name)].scenario, num_speculative_tokens=0)
    outputs, _ = _async_outputs(schedule, name)
    assert (outputs != schedule_reference(schedule)) == bites


@pytest.mark.parametrize("name", [p for p in V1FaultPreset if p is not V1FaultPreset.V1_PP_ASYNC_STALE_ROW])
def test_none_of_v1_s_presets_is_masked_at_two_stages(name):
    """At three stages each is caught where it is at two (same invariant, step, stage and
    request): stage 0 is wrong either way, and what it gets wrong does not depend on the depth."""
    e, v = V1_FAULTS[name].expected, run_fault(name, pipeline_parallel_size=3).violation
    assert v is not None and (v.invariant, v.step, v.stage, v.req_id) == (e.invariant, e.step, e.stage, e.req_id)


def test_the_stale_row_bites_at_three_stages_too():
    """Which row another request takes, and when, depends on the depth: at three stages the same
    request's row on stage 0 takes a foreign token three steps later."""
    v = run_fault(V1FaultPreset.V1_PP_ASYNC_STALE_ROW, pipeline_parallel_size=3).violation
    assert v is not None and (v.invariant, v.step, v.stage, v.req_id) == (Invariant.TOKEN_HISTORY, 30, 0, "C")


def test_v2_records_name_slots_and_their_previous_occupants():
    """V2's records carry the slot (V1's do not: their messages stay as the notebooks print them)."""
    schedule = FAULTS[FaultPreset.V2_SLOT_REUSE].scenario
    trace = run_recorded(build_llm(schedule, model_runner="v2"))
    rows = [r for s in trace.steps for st in s.stages for r in st.rows if r.req_id == "E"]
    assert {r.slot for r in rows} == {0} and {r.row for r in rows} == {0}
    assert rows[0].prev_req_id == "A"  # the slot's previous occupant
    v1 = run_recorded(build_llm(schedule, model_runner="v1"))
    assert {r.slot for s in v1.steps for st in s.stages for r in st.rows} == {None}


# -- the broadcast-width mismatch on the wire (PR #46994) --------------------------------
def _checked_exchange(sender, receiver, sent_shape, posted_shape):
    """A checked message of ``sent_shape`` into a checked receive posted for ``posted_shape``."""
    receive = post_checked(receiver, torch.full(posted_shape, -1, dtype=torch.int64), 1, SAMPLED_TAG)
    send_checked(sender, torch.arange(1, 1 + int(np.prod(sent_shape))).reshape(sent_shape), 0, SAMPLED_TAG)
    return receive.take()


def _groups(kind: str):
    if kind == "gloo":
        from test_parallel_state import pair

        rank0, rank1 = pair()
        return rank1, rank0
    local = InProcStageGroup(1)
    return local, local.for_rank(0)


@pytest.mark.parametrize("kind", ["in-process", "gloo"])
@pytest.mark.parametrize("sent", [(3, 1), (3, 5)], ids=["narrower", "wider"])
def test_a_checked_receive_names_the_mismatch(kind, sent):
    """Narrower: raw gloo packs the rows into the buffer's front (test_v2_runner.py); wider:
    it aborts the process (below). Checked, both raise, naming both shapes; matching
    shapes are delivered whole."""
    sender, receiver = _groups(kind)
    with pytest.raises(MessageMismatch, match=rf"rank 1 sent a \[{sent[0]}, {sent[1]}\] torch.int64 message to "
                                              rf"rank 0 \(tag {SAMPLED_TAG}\), which posted a \[3, 4\] torch.int64"):
        _checked_exchange(sender, receiver, sent, (3, 4))
    sender, receiver = _groups(kind)  # the refused message still sits on its tag: a fresh pair
    assert _checked_exchange(sender, receiver, (3, 4), (3, 4)).tolist() == [[1, 2, 3, 4], [5, 6, 7, 8],
                                                                            [9, 10, 11, 12]]


RAW_WIDER = """
import sys, torch
sys.path.insert(0, {tests!r})
from test_parallel_state import pair
rank0, rank1 = pair()
receive = rank0.post(torch.zeros(3, 4, dtype=torch.int64), 1, 17)
rank1.send(torch.zeros(3, 5, dtype=torch.int64), 0, 17)
receive.take()
print("delivered")
"""


def test_raw_gloo_aborts_the_process_on_a_wider_message(tmp_path):
    """What the checked receive spares: gloo's receiving side does not raise, it aborts."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "wider.py"
    script.write_text(RAW_WIDER.format(tests=str(Path(__file__).parent)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "delivered" not in done.stdout
    assert "EnforceNotMet" in done.stderr or "op.preamble.length <= op.nbytes" in done.stderr, done.stderr[-2000:]


def test_the_readme_table_is_written_from_faults():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
    import fault_table

    readme = fault_table.PAGE.read_text()
    assert readme == fault_table.render(readme), "docs/faults_and_designs.md's fault presets are out of date: run python tools/fault_table.py"
    for name in EVERY_FAULT:
        assert f"| `{name}` |" in readme


@pytest.mark.slow
def test_over_mp_the_config_carries_the_design_and_gloo_names_the_mismatch(monkeypatch):
    """"mp" workers build what the pickled VllmConfig says (the variable unset), and the
    width fault stops on real gloo with the same named mismatch, from stage 0's process."""
    from minispec import SamplingParams
    from minispec.v1.executor.multiproc_executor import WorkerError

    monkeypatch.delenv(ENV_VAR, raising=False)
    args = dict(pipeline_parallel_size=2, model_runner="v2", speculative_config={"method": "ngram",
                "num_speculative_tokens": 3})
    prompts, params = ["A list is ", "Strings are "], SamplingParams(temperature=0, max_tokens=8)
    want = [o.outputs[0].token_ids for o in LLM(**args).generate(prompts, params)]
    with LLM(distributed_executor_backend="mp", **args) as llm:
        assert [o.outputs[0].token_ids for o in llm.generate(prompts, params)] == want
    with pytest.raises(WorkerError, match=r"stage 0, step 2, applying the last stage's broadcast: rank 1 sent a "
                                          r"\[2, 1\] torch.int64 message to rank 0 \(tag 17\)"):
        with LLM(distributed_executor_backend="mp", faults="v2-broadcast-width", **args) as llm:
            llm.generate(prompts, params)


def test_each_switch_is_resolved_once_when_the_runner_is_built(monkeypatch):
    """The hot paths call one function; which one is decided by ``Switches.pick`` at construction."""
    from minispec.v1.worker.gpu import model_runner, pp_utils
    from minispec.v1.worker.gpu import runner_fixes as switches

    monkeypatch.delenv(ENV_VAR, raising=False)
    spec = {"method": "ngram", "num_speculative_tokens": 2}
    fixed = LLM(pipeline_parallel_size=2, model_runner="v2", speculative_config=spec).engine.executor.runners[0]
    assert (fixed.apply_drafts, fixed.num_rejected_on_apply) == (model_runner.apply_broadcast_drafts,
                                                                 model_runner.broadcast_rejected)
    assert (fixed.pp_handler.live_rows, fixed.pp_handler.sample_width) == (pp_utils.same_occupant,
                                                                           pp_utils.padded_width)
    assert fixed.post_drafts is pp_utils.PPHandler.broadcast_drafts
    chosen = {
        "v2-stale-drafts": lambda r: r.apply_drafts is switches.keep_stale_drafts,
        "v2-optimistic-num-computed": lambda r: r.num_rejected_on_apply is switches.ignore_rejected,
        "v2-slot-reuse": lambda r: r.pp_handler.live_rows is switches.every_row_live,
        "v2-broadcast-width": lambda r: r.pp_handler.sample_width is switches.natural_width,
        "v2-drafts-posted-twice": lambda r: r.post_drafts is switches.post_drafts_twice,
    }
    assert set(chosen) == set(map(str, FaultPreset))
    for name, is_fault in chosen.items():
        runner = LLM(pipeline_parallel_size=2, model_runner="v2", speculative_config=spec,
                     faults=name).engine.executor.runners[0]
        assert is_fault(runner) and [n for n, f in chosen.items() if f(runner)] == [name]
