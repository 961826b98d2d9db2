"""The invariant checker must fire when an invariant breaks, live and offline."""

import pytest

from minispec.instruments.invariants import InvariantChecker, InvariantViolation
from minispec.instruments.trace import RowRecord, ScheduleRecord, StageRecord, StepRecord
from minispec.lab.experiments.scenarios import forum_thread_llm
from minispec.v1.worker.designs import DESIGNS


def schedule(step=0, nc=4, n=4, drafts=(7, 8, 9), tokens=(1, 2, 3, 4, 5)):
    return ScheduleRecord(
        step=step, num_scheduled_tokens={"A": n}, scheduled_spec_decode_tokens={"A": list(drafts)},
        new_token_ids={"A": [5]}, num_computed_tokens={"A": nc}, all_token_ids={"A": list(tokens)},
        new_req_ids=[], num_prompt_tokens={"A": 3},
    )


def stage(row_tokens, nc=4, n=4, no_spec=5, drafts=3):
    row = RowRecord(0, "A", "stayed", list(row_tokens), len(row_tokens), no_spec, nc, n, drafts)
    return StageRecord(0, 0, False, [row], [], {})


def test_live_check_raises_at_the_thread_fault():
    llm = forum_thread_llm("vllm-0.9.2", check_invariants=True)
    with pytest.raises(InvariantViolation, match="invariant 2 .* step 2, stage 0, request A") as info:
        llm.engine.run()
    assert info.value.violation.actual == llm.tokenizer.encode("tem").ids


def test_a_correct_row_passes():
    checker = InvariantChecker()
    checker.check_stage(schedule(), stage([1, 2, 3, 4, 5, 7, 8, 9]))


@pytest.mark.parametrize("row_tokens,nc,invariant", [
    ([1, 2, 3, 4, 5, 7, 0, 9], 4, 2),   # a stale draft slot
    ([1, 2, 6, 4, 5, 7, 8, 9], 4, 3),   # a wrong history token
    ([1, 2, 3, 4, 5, 7, 8, 9], 3, 4),   # the stage computes from another position
])
def test_stage_violations(row_tokens, nc, invariant):
    checker = InvariantChecker(raise_on_violation=False)
    checker.check_stage(schedule(), stage(row_tokens, nc=nc))
    assert invariant in {v.invariant for v in checker.violations}


def test_accounting_after_rejection():
    step = StepRecord(schedule(), num_accepted={"A": 1}, num_computed_before_update={"A": 8},
                      num_computed_after={"A": 8})  # two rejected drafts were not rolled back
    checker = InvariantChecker(raise_on_violation=False)
    checker.check_schedule(step.schedule)
    checker.check_update(step)
    assert [(v.invariant, v.expected) for v in checker.violations] == [
        (4, "num_computed_tokens=6 (old + scheduled - rejected)")]


def test_decode_request_in_two_batches():
    checker = InvariantChecker(raise_on_violation=False)
    checker.check_schedule(schedule(step=0))
    checker.check_schedule(schedule(step=1))  # scheduled again before step 0 came back
    assert [(v.invariant, v.step) for v in checker.violations] == [(5, 1)]
    # a prefill chunk that does not reach the end may be pipelined
    chunked = InvariantChecker(raise_on_violation=False)
    chunked.check_schedule(schedule(step=0, nc=0, n=2, drafts=()))
    chunked.check_schedule(schedule(step=1, nc=2, n=2, drafts=()))
    assert chunked.violations == []


def test_a_stage_reading_kv_through_other_blocks():
    """Issue 9's silent case: a stage whose block table has a block twice reads and
    writes KV in the wrong place while every token id it holds is right."""
    from dataclasses import replace

    sched = replace(schedule(), block_ids={"A": [3, 7]})
    good, doubled = stage([1, 2, 3, 4, 5, 7, 8, 9]), stage([1, 2, 3, 4, 5, 7, 8, 9])
    good.rows[0].block_ids, doubled.rows[0].block_ids = [3, 7], [3, 7, 7]
    checker = InvariantChecker(raise_on_violation=False)
    checker.check_stage(sched, good)
    assert checker.violations == []
    checker.check_stage(sched, doubled)
    assert [(v.invariant, v.expected, v.actual) for v in checker.violations] == [(4, "block table [3, 7]", [3, 7, 7])]


# -- conformance: one checker for every design (docs/invariants.md) --------------------
def test_the_checker_names_no_design():
    """No branch on which runner recorded the trace: the checker's source names none of the
    designs, their runners or the engine argument that selects one."""
    from pathlib import Path

    import minispec.instruments.invariants as checker

    source = Path(checker.__file__).read_text()
    names = ["model_runner", "ModelRunner", "GPUModelRunner", "RelayModelRunner", "ReplicatedDraftRunner",
             "isinstance"] + [f'"{design}"' for design in DESIGNS]
    assert [n for n in names if n in source] == []


@pytest.mark.parametrize("design", list(DESIGNS))
def test_the_same_checker_finds_every_design_s_recorded_run_clean(design):
    """The thread's requests on three stages, recorded, then checked offline by the one
    checker: every fix is clean on every design (replicated drafting with n-grams)."""
    from dataclasses import replace

    from minispec.instruments.invariants import check_trace
    from minispec.lab.experiments.scenarios import thread_schedule
    from minispec.lab.experiments.schedule import build_llm, run_recorded, schedule_reference

    method = "draft_model" if DESIGNS[design].accepts("draft_model") else "ngram"  # replicated drafting: n-grams
    schedule = replace(thread_schedule(method=method), pipeline_parallel_size=3)
    trace = run_recorded(build_llm(schedule, model_runner=design))
    assert check_trace(trace) == [] and trace.outputs == schedule_reference(schedule)
