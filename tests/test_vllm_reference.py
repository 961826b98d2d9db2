"""The reference harness (reference, beside minispec): vLLM's own code on minispec's schedules.

The first tests need only minispec: the capture, the comparison, the renderers
and the stored artifact. The tests marked ``vllm`` run vLLM's code; they
skip without the vLLM environment (``make vllm-check`` builds it in a cache
outside the repository), unless ``MINISPEC_REQUIRE_VLLM=1`` (set by
``make vllm-check``) makes that a failure.
"""

import json
import os
import sys
import zipfile
from dataclasses import replace

import pytest

from minispec.lab.exercises.attempts import decoder
from minispec.lab.experiments.scenarios import forum_thread
from minispec.lab.records import artifact as stored
from reference import artifact, environment, report
from reference.capture import capturing
from reference.compare import BUFFERS, buffer_difference, compare, stage_step_differences
from reference.reference_schedules import reference_schedule

DECODE = decoder()


@pytest.fixture(scope="module")
def thread_capture():
    with capturing() as captures:
        trace = forum_thread("vllm-0.9.2")
    assert len(captures) == 1 and captures[0].trace is trace
    return captures[0]


# -- minispec's side -------------------------------------------------------

def test_capture_records_every_stage_step_and_schedule(thread_capture):
    c = thread_capture
    assert len(c.stage_steps) == 64  # 32 steps x 2 stages, as the stepper counts them
    assert set(c.schedules) == {s.step for s in c.trace.steps}
    assert c.config == {"max_num_batched_tokens": 512, "max_num_reqs": 4, "max_model_len": 512,
                        "block_size": 16, "vocab_size": 105}


def test_captured_buffers_are_the_traced_rows(thread_capture):
    """The snapshot holds what the trace's row records hold (and more: whole rows)."""
    for ss in thread_capture.stage_steps:
        record = next(s for s in thread_capture.trace.step(ss.step).stages if s.stage == ss.stage)
        b = ss.buffers
        assert b["req_ids"] == [r.req_id for r in record.rows]
        for row in record.rows:
            assert b["token_ids_cpu"][row.row][: len(row.token_ids)] == row.token_ids
            assert b["num_tokens"][row.row] == row.num_tokens
            assert b["block_table"][row.row] == row.block_ids


def test_stale_tem_is_in_minispecs_snapshot(thread_capture):
    step2 = next(ss.buffers for ss in thread_capture.stage_steps if (ss.step, ss.stage) == (2, 0))
    row = step2["req_id_to_index"]["A"]
    assert "".join(DECODE(t) for t in step2["token_ids_cpu"][row][11:14]) == "tem"


def test_job_gives_each_stage_its_own_schedules_in_order(thread_capture):
    job = thread_capture.job()
    assert [s["stage"] for s in job["stages"]] == [0, 1] and [s["is_last"] for s in job["stages"]] == [False, True]
    for stage in job["stages"]:
        steps = [e["step"] for e in stage["steps"]]
        assert steps == sorted(steps) and len(steps) == 32
    last = job["stages"][1]["steps"]
    assert last[1]["sampled"] == thread_capture.trace.step(last[1]["step"]).stages[1].sampled


def test_scheduler_output_data_keeps_resumed_and_output_lengths():
    from minispec.lab.experiments.schedule import run_schedule

    seed = next(s for s in range(40) if reference_schedule(s).num_gpu_blocks)
    with capturing() as captures:
        run_schedule(reference_schedule(seed), "all")
    cached = [o["cached"] for o in captures[0].schedules.values()]
    assert all(len(c["num_output_tokens"]) == len(c["req_ids"]) == len(c["resumed_from_preemption"]) for c in cached)


# -- the comparison --------------------------------------------------------

def _buffers(**changes):
    b = {"req_ids": ["A", "B"], "req_id_to_index": {"A": 0, "B": 1}, "token_ids_cpu": [[1, 2, 3, 4], [5, 6, 0, 0]],
         "num_tokens": [4, 2], "num_tokens_no_spec": [3, 2], "num_computed_tokens_cpu": [2, 1],
         "num_prompt_tokens": [2, 2], "block_table": [[0], [1]], "drafts": [[4], []],
         "output_token_ids": {"A": [3], "B": []}}
    b.update(changes)
    return b


def test_equal_buffers_have_no_difference():
    assert stage_step_differences(1, 0, _buffers(), _buffers()) == []
    assert set(_buffers()) == set(BUFFERS)


def test_a_stale_slot_is_named_by_row_and_slots():
    theirs = _buffers(token_ids_cpu=[[1, 2, 3, 9], [5, 6, 0, 0]])
    (d,) = stage_step_differences(2, 1, _buffers(), theirs)
    assert (d.step, d.stage, d.buffer, d.where, d.minispec, d.vllm) == (2, 1, "token_ids_cpu", "row 0 slots 3-3", [4], [9])


def test_a_freed_rows_leftovers_count_too():
    """The whole array is compared: a row no request holds still has to match."""
    assert buffer_difference("token_ids_cpu", [[1], [2], [3]], [[1], [2], [4]])[0] == "row 2 slots 0-0"


def test_differences_in_requests_and_row_order():
    assert buffer_difference("output_token_ids", {"A": [1, 2]}, {"A": [2]}) == ("request A", [1, 2], [2])
    assert buffer_difference("req_ids", ["A", "B"], ["B", "A"]) == ("", ["A", "B"], ["B", "A"])
    assert buffer_difference("num_tokens", [4, 2], [4, 3]) == ("row 1", 2, 3)


def test_compare_counts_equal_stage_steps_and_refuses_missing_ones():
    mine = [{"stage": 0, "step": 1, "buffers": _buffers()}, {"stage": 0, "step": 2, "buffers": _buffers()}]
    theirs = [dict(mine[0]), {"stage": 0, "step": 2, "buffers": _buffers(num_computed_tokens_cpu=[2, 2])}]
    c = compare(mine, theirs)
    assert (c.equal, c.total, c.first.buffer) == (1, 2, "num_computed_tokens_cpu")
    with pytest.raises(ValueError, match="vllm_steps: expected the 2 stage-steps"):
        compare(mine, theirs[:1])


# -- renderers and the stored artifact --------------------------------------

def test_vllm_stage_record_draws_vllms_tokens_in_minispecs_rows(thread_capture):
    step = thread_capture.trace.step(2)
    mine = step.stages[0]
    b = next(ss.buffers for ss in thread_capture.stage_steps if (ss.step, ss.stage) == (2, 0))
    row = b["req_id_to_index"]["A"]
    b["token_ids_cpu"][row][11:14] = [3, 84, 85]  # as 0.14.0 holds them: the scheduled " st"
    b["num_tokens"][row] = 14
    text = report.render_first_difference("0.14.0", _fake_difference(), step, mine, b, DECODE)
    minispec_part, vllm_part = text.split("  vLLM 0.14.0:")
    assert "draft slots=[tem]" in minispec_part and "STALE (row held C before)" in minispec_part
    assert "draft slots=[ st] scheduled=[ st]  ok" in vllm_part


def _fake_difference():
    from reference.compare import Difference

    return Difference(2, 0, "token_ids_cpu", "row 0 slots 11-13", [85, 70, 78], [3, 84, 85])


def _capture(steps: dict[int, tuple[list[str], list[tuple[str, bool]]]]):
    """A stand-in capture: per executed step, who was scheduled and the cached requests with their
    resumed flag (what resumes_holding_a_row reads)."""
    from types import SimpleNamespace

    schedules = {step: {"num_scheduled_tokens": dict.fromkeys(ids, 1),
                        "cached": {"req_ids": [r for r, _ in cached], "resumed_from_preemption": [f for _, f in cached]}}
                 for step, (ids, cached) in steps.items()}
    return SimpleNamespace(schedules=schedules, stage_steps=[SimpleNamespace(step=s, stage=0) for s in steps])


def test_a_request_resumed_while_it_held_a_row_is_a_documented_departure():
    """Planted: B in step 3's batch, preempted by a schedule nothing executed, resumed at step 5 (no
    stage removed its row); and the same with step 4 executed between (its row was removed)."""
    from reference.run import PAIRINGS, resumes_holding_a_row

    held = _capture({3: (["A", "B"], []), 5: (["A", "B"], [("A", False), ("B", True)])})
    removed = _capture({3: (["A", "B"], []), 4: (["A"], [("A", False)]), 5: (["A", "B"], [("A", False), ("B", True)])})
    assert resumes_holding_a_row(held) and not resumes_holding_a_row(removed)
    assert [p.departs for p in PAIRINGS if p.departs] == [resumes_holding_a_row]  # 0.9.2's random pairing only


def test_render_table_marks_each_pairing():
    from reference.compare import Comparison
    from reference.run import PAIRINGS, CheckRow

    rows = [CheckRow(PAIRINGS[0], 1, 1, Comparison(64, 64, []), None, None, {}, {}),
            CheckRow(PAIRINGS[4], 1, 0, Comparison(58, 58, []), None, None, {}, {})]
    lines = report.render_table(rows).splitlines()
    assert lines[0].split()[:3] == ["vLLM", "preset", "scenario"]
    assert lines[2].split() == ["0.9.2", "vllm-0.9.2", "thread", "1/1", "64/64", "equal", "ok"]
    assert lines[3].split() == ["0.9.2", "vllm-0.14", "thread", "0/1", "58/58", "differ", "FAILED"]


def test_stored_artifact_shows_tem_in_vllm_092_and_a_short_history_in_0140():
    a = stored.load_artifact()
    stale, short = a["moments"]["stale_drafts"], a["moments"]["short_history"]
    assert stale["provenance"]["vllm_version"] == "0.9.2" and short["provenance"]["vllm_version"] == "0.14.0"
    row = stale["vllm"]["token_ids_cpu_row"]
    assert "".join(DECODE(t) for t in row[-3:]) == "tem" and row == stale["minispec"]["token_ids_cpu_row"]
    assert "".join(DECODE(t) for t in stale["scheduled_drafts"]) == " st"
    assert len(short["vllm"]["output_token_ids"]) < len(short["minispec"]["output_token_ids"])
    for m in (stale, short):
        assert all(len(h) == 64 for h in m["provenance"]["sha256"].values())
        assert "GPUModelRunner._update_states" in m["provenance"]["executed"]
    text = stored.render_artifact(a, DECODE)
    assert "vLLM 0.9.2" in text and "|tem]" in text and "make vllm-check" in text


# -- the environment --------------------------------------------------------

def test_cache_lives_outside_the_repository(monkeypatch, tmp_path):
    monkeypatch.delenv("MINISPEC_VLLM_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert environment.cache_dir() == tmp_path / "minispec-vllm"
    monkeypatch.setenv("MINISPEC_VLLM_CACHE", str(tmp_path / "elsewhere"))
    assert environment.cache_dir() == tmp_path / "elsewhere"
    assert environment.missing() is not None  # nothing built there


def _toy_wheel(folder) -> str:
    """A wheel built on the spot (package ``toy``: two Python files and a data file), so the
    fetch path runs without a network."""
    wheel = folder / "toy-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in (("toy/__init__.py", ""), ("toy/core.py", "X = 1\n"), ("toy/data.bin", "x"),
                           ("toy-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: toy\nVersion: 0.1\n"),
                           ("toy-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                       "Tag: py3-none-any\n"), ("toy-0.1.dist-info/RECORD", "")):
            z.writestr(name, text)
    return str(wheel)


def test_a_cold_cache_fetches_a_wheels_sources_and_stamps_only_a_success(monkeypatch, tmp_path):
    """The one fetch path (``environment.fetch_wheel_sources`` in ``cached_or_fetched``) that
    the environment, ``release_sources`` and ``sglang_sources`` share, on an empty cache: pip
    downloads the wheel into a temporary folder in the cache, only the package's Python files
    are kept, the wheel is gone, and the stamp is written once that succeeded. A fetch that
    fails raises, naming what it could not download, and leaves no stamp, so the next run
    fetches again."""
    monkeypatch.setenv("MINISPEC_VLLM_CACHE", str(tmp_path / "cache"))
    wheel, into = _toy_wheel(tmp_path), tmp_path / "cache" / "toy-0.1"
    got = environment.cached_or_fetched(
        None, into, lambda f: environment.fetch_wheel_sources(wheel, f, "toy", python=sys.executable), ".stamp", "0.1")
    assert got == into and (into / ".stamp").read_text() == "0.1"
    assert sorted(str(p.relative_to(tmp_path / "cache")) for p in (tmp_path / "cache").rglob("*") if p.is_file()) == [
        "toy-0.1/.stamp", "toy-0.1/toy/__init__.py", "toy-0.1/toy/core.py"]
    assert environment.cached_or_fetched(into, into, lambda f: pytest.fail("fetched again"), ".stamp", "0.1") == into
    missing = tmp_path / "cache" / "absent"
    with pytest.raises(RuntimeError, match="could not download .*absent-0.1-py3-none-any.whl's wheel"):
        environment.cached_or_fetched(None, missing, lambda f: environment.fetch_wheel_sources(
            str(tmp_path / "absent-0.1-py3-none-any.whl"), f, "absent", python=sys.executable), ".stamp", "0.1")
    assert not (missing / ".stamp").exists()


@pytest.mark.vllm
def test_a_release_fetched_into_an_empty_cache_is_read_as_cached(monkeypatch, tmp_path):
    """CI's cold cache, for one release: vLLM 0.9.2's sources fetched from the package index into
    an empty cache (``$MINISPEC_VLLM_CACHE``), then found there without a fetch. It needs the
    network, as make vllm-check does."""
    from reference.sources import STAMP, cached_sources, release_sources, vllm_files

    monkeypatch.setenv("MINISPEC_VLLM_CACHE", str(tmp_path))
    assert cached_sources("0.9.2") is None
    folder = release_sources("0.9.2")
    assert folder == tmp_path / "vllm-0.9.2" and (folder / STAMP).read_text() == "0.9.2"
    assert "vllm/v1/worker/gpu_model_runner.py" in vllm_files("0.9.2") and not list(tmp_path.glob("*/*.whl"))
    assert cached_sources("0.9.2") == folder


def test_each_release_pins_its_own_transformers():
    common = [p.split("==")[0].lower() for p in environment._pinned(environment.CONSTRAINTS)]
    assert "transformers" not in common and "torch" in common and "vllm" not in common
    for release, below in (("0.9.2", (4, 54)), ("0.14.0", (5, 0))):
        pins = dict(p.split("==") for p in environment._pinned(environment.release_constraints(release)))
        assert tuple(int(x) for x in pins["transformers"].split(".")[:2]) < below
    with pytest.raises(ValueError, match="release='0.10.0': expected one of"):
        environment.release_constraints("0.10.0")


# -- vLLM's own code --------------------------------------------------------

@pytest.fixture(scope="module")
def thread_check():
    if why := environment.missing():
        if os.environ.get("MINISPEC_REQUIRE_VLLM") == "1":
            pytest.fail(f"MINISPEC_REQUIRE_VLLM=1 but {why}")
        pytest.skip(why)
    from reference import run

    return run.check(0, [p for p in run.PAIRINGS if p.scenario == run.THREAD])


@pytest.mark.vllm
def test_thread_pairings_as_expected(thread_check):
    counts = {(r.pairing.release, r.pairing.preset): (r.comparison.equal, r.comparison.total) for r in thread_check.rows}
    assert counts[("0.9.2", "vllm-0.9.2")] == (64, 64)
    assert counts[("0.14.0", "vllm-0.14")] == (58, 58)
    assert counts[("0.9.2", "vllm-0.14")][0] < 58 and counts[("0.14.0", "vllm-0.9.2")][0] < 64
    assert thread_check.ok


@pytest.mark.vllm
def test_vllm_0140_is_short_on_stage_0_from_step_4(thread_check):
    row = next(r for r in thread_check.rows if r.pairing.preset == "all")
    assert (row.first.step, row.first.stage) == (4, 0)
    (outputs,) = [d for d in row.comparison.differences
                  if (d.step, d.stage, d.buffer, d.where) == (4, 0, "output_token_ids", "request A")]
    assert len(outputs.vllm) < len(outputs.minispec)


@pytest.mark.vllm
def test_stored_artifact_is_what_vllm_produces_now(thread_check):
    """Rebuilt from this run; if this fails, vLLM's code, minispec or the
    artifact changed: rerun ``python -m reference --write-artifact``."""
    assert artifact.dumps(artifact.build_artifact(thread_check)) == stored.ARTIFACT.read_text()


# -- departures, and the engine change the comparison brought ----------------

def test_freed_blocks_return_tail_first_as_in_vllm():
    """vLLM v0.9.2 frees a request's blocks in reverse (single_type_kv_cache_manager.py
    lines 168-171), so the next request gets the tail block first; its Scheduler's
    block ids matched minispec's only once minispec did the same."""
    from minispec.sampling_params import SamplingParams
    from minispec.v1.core.kv_cache_manager import KVCacheManager
    from minispec.v1.request import Request

    kv = KVCacheManager(num_blocks=4, block_size=2)
    a, b = Request("a", [1, 2, 3, 4, 5], SamplingParams()), Request("b", [1, 2, 3], SamplingParams())
    assert kv.allocate_slots(a, 5) == [0, 1, 2]
    kv.free(a)
    assert kv.allocate_slots(b, 3) == [3, 2]


def test_no_recorded_run_resumes_a_request_that_still_holds_a_row():
    """vLLM 0.14.0 evicts such a request first (gpu_model_runner.py line 878), and so does
    minispec under every preset, where 0.9.2 did not (docs/fidelity/model_runner_v1.md). Only a
    request preempted by a schedule that holds nothing reaches the path; these runs, which do
    resume requests, do not, so vLLM 0.9.2's runner agrees with minispec's on them."""
    from minispec.lab.experiments.schedule import run_schedule

    seeds = [s for s in range(60) if reference_schedule(s).num_gpu_blocks][:8]
    resumed_rows = 0
    with capturing() as captures:
        for seed in seeds:
            run_schedule(reference_schedule(seed), "vllm-0.14")
    for c in captures:
        held: dict[int, set] = {}
        for ss in c.stage_steps:
            cached = c.schedules[ss.step]["cached"]
            resumed = {r for r, flag in zip(cached["req_ids"], cached["resumed_from_preemption"]) if flag}
            resumed_rows += len(resumed)
            assert not resumed & held.get(ss.stage, set()), (ss.step, ss.stage, resumed)
            held[ss.stage] = set(ss.buffers["req_ids"])
    assert resumed_rows > 0  # the runs do resume requests


def test_schedule_differences_are_named_by_departure():
    from reference.scheduler_check import STALE_OUTPUT_DROPPED, ScheduleDifference, schedule_difference

    d = ScheduleDifference("r", 3, "num_scheduled_tokens", "request x", None, 2)
    assert d.kind == "undocumented"
    assert replace(d, vllm_preempted=(("y", True),)).kind == "vLLM preempted a request in flight"
    both = replace(d, vllm_preempted=(("y", False), ("y", True)), minispec_preempted=("y",))
    assert both.kind == STALE_OUTPUT_DROPPED  # the same request preempted by both: 0.9.2 dropped its output
    assert replace(both, minispec_preempted=("x",)).kind == "vLLM preempted a request in flight"
    assert replace(d, vllm_preempted=(("x", False),), vllm_drafted=("x",)).kind == "vLLM kept a preempted request's drafts"
    mine = {"new": [], "cached": {"req_ids": ["x"], "new_block_ids": [[1]]}, "num_scheduled_tokens": {"x": 1},
            "scheduled_spec_decode_tokens": {}, "finished_req_ids": []}
    theirs = json_copy(mine)
    theirs["cached"]["new_block_ids"] = [[2]]
    found = schedule_difference("r", 3, mine, theirs)
    assert (found.field, found.where, found.minispec, found.vllm) == ("cached.new_block_ids", "row 0", [1], [2])
    assert schedule_difference("r", 3, mine, json_copy(mine)) is None


def json_copy(data):
    return json.loads(json.dumps(data))


@pytest.mark.vllm
def test_thread_schedules_equal_in_vllm_092s_own_scheduler(thread_check):
    (row,) = [r for r in thread_check.scheduler_rows if r.scenario == "thread"]
    assert (row.runs_equal, row.equal, row.total, row.differences) == (1, 33, 33, [])


@pytest.mark.vllm
def test_0140_evicts_a_resumed_request_that_still_holds_a_row(thread_check):
    """The path, reached by hand: request R is scheduled, then resumed in the next step while
    it still holds its row. vLLM 0.14.0 evicts and re-adds it (gpu_model_runner.py line 878),
    so its block-table row is the new blocks alone, and so does minispec (its scheduler reaches
    the path since it preempts requests in flight); vLLM 0.9.2 keeps the row and appends the
    new blocks to it."""
    from types import SimpleNamespace

    from minispec.entrypoints.llm import LLM
    from minispec.instruments.trace import Trace
    from minispec.sampling_params import SamplingParams
    from minispec.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
    from reference.capture import Capture, StageStep, scheduler_output_data, stage_buffers
    from reference.run import ScenarioRun, run_vllm

    runner = LLM(pipeline_parallel_size=2, max_num_seqs=4, max_model_len=32, block_size=4).engine.executor.runners[0]
    prompt = [40, 41, 42, 43, 44]
    outputs = [
        SchedulerOutput([NewRequestData("R", prompt, SamplingParams(temperature=0), [0, 1], 0)], CachedRequestData(),
                        {"R": 5}, 5, {}, set(), step=0),
        SchedulerOutput([], CachedRequestData(["R"], [True], [prompt], [[6, 7]], [0]), {"R": 5}, 5, {}, set(), step=1),
    ]
    scheduler = SimpleNamespace(requests={"R": SimpleNamespace(num_output_tokens=0)})
    capture = Capture(Trace("vllm-0.14", 2), {"max_num_reqs": 4, "max_model_len": 32, "max_num_batched_tokens": 64,
                                              "block_size": 4, "vocab_size": runner.model.arch.vocab_size})
    for out in outputs:
        runner._update_states(out)
        capture.schedules[out.step] = scheduler_output_data(out, scheduler)
        capture.stage_steps.append(StageStep(0, out.step, stage_buffers(runner)))
    assert capture.stage_steps[1].buffers["block_table"] == [[6, 7]]
    run = ScenarioRun("by hand", "vllm-0.14", {"resumed in place": capture})
    for release, expected in (("0.9.2", [0, 1, 6, 7]), ("0.14.0", [6, 7])):
        _, results = run_vllm(release, [run])
        (theirs,) = [r["buffers"] for r in results[("by hand", "vllm-0.14", "resumed in place")] if r["step"] == 1]
        assert theirs["block_table"] == [expected]


@pytest.mark.vllm
def test_vllm_092_puts_finished_ids_in_schedules_it_never_runs(thread_check):
    """Seed 95: two requests finish while the other batch is in flight, so the
    next schedules are empty. vLLM 0.9.2's Scheduler clears finished_req_ids in
    them anyway (vllm/v1/core/sched/scheduler.py line 609) and its engine does not execute an empty
    schedule; minispec keeps them for the next one (docs/fidelity/scheduler.md).
    With that carried over, every schedule of the run is equal."""
    from minispec.lab.experiments.schedule import run_schedule
    from reference.run import ScenarioRun
    from reference.scheduler_check import check_scheduler

    with capturing() as captures:
        run_schedule(reference_schedule(95), "vllm-0.9.2")
    row = check_scheduler(ScenarioRun("random", "vllm-0.9.2", {"random seed 95": captures[0]}))
    assert row.dropped_finished == 2 and (row.runs_equal, row.differences) == (1, [])
