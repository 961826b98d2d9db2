"""Invariants 2-5 under async scheduling (issue 22): every fixed design's recorded run is
clean, the V2 fault presets are caught where they are caught synchronously, one short run is
worked out by hand, and a mutated async record is caught."""

from __future__ import annotations

import dataclasses

import pytest

from minispec.distributed.parallel_state import MessageMismatch
from minispec.instruments.invariants import (
    Expected,
    Invariant,
    InvariantViolation,
    check_trace,
    owed,
    resolved_view,
    samples,
)
from minispec.lab.experiments.scenarios import exercise_schedule
from minispec.lab.experiments.schedule import Request, Schedule, build_llm, run_recorded, schedule_reference
from minispec.lab.explorer.explorer import STANDIN
from minispec.lab.faults.catalogue import FAULTS, FirstViolation

# (design, stages, k, proposer): V2 at 1-4 stages, V1 at one (V1 with PP and async is another part)
GRID = [("v2", pp, k, m) for pp in (1, 2, 3, 4) for k in range(4) for m in ("ngram", "draft_model")] + [
    ("v1", 1, k, m) for k in range(4) for m in ("ngram", "draft_model")]
FAST = [("v2", 2, 3, "ngram"), ("v2", 3, 1, "draft_model"), ("v2", 4, 2, "ngram"), ("v1", 1, 3, "draft_model")]
RUNS = [c if c in FAST else pytest.param(*c, marks=pytest.mark.slow) for c in GRID]


def _scheduled_ahead(trace) -> bool:
    """Did any batch go out on placeholders, while one that samples the same request was in flight?"""
    return any(s.schedule.num_output_placeholders.get(r, 0) > owed(s.schedule, r)
               for s in trace.steps for r in s.schedule.num_scheduled_tokens if samples(s.schedule, r))


@pytest.mark.parametrize("design,pp,k,method", RUNS, ids=[f"{d}-pp{pp}-k{k}-{m}" for d, pp, k, m in GRID])
def test_every_fixed_design_s_async_run_is_clean(design, pp, k, method):
    """Invariants 2-5 checked live and again offline, on a schedule with preemption and chunked
    prefill, every batch in flight vLLM allows; outputs greedy. Twelve requests, so that even at
    four stages decodes go out on placeholders (with six, V2 at PP 4 never schedules ahead). At
    three and four stages V2 schedules a decode again only pp_size batches on, and whether
    pp_size + 1 batches are then in flight depends on how the requests fall into cohorts: the
    fast runs schedule ahead at every depth (asserted), some of the others do not."""
    schedule = dataclasses.replace(exercise_schedule(0, pp, method, num_requests=12), num_speculative_tokens=k,
                                   async_scheduling=True, num_gpu_blocks=16)
    trace = run_recorded(build_llm(schedule, model_runner=design))
    assert check_trace(trace) == [] and trace.outputs == schedule_reference(schedule)
    assert trace.stats["preemptions"] > 0
    assert any(not samples(s.schedule, r) for s in trace.steps for r in s.schedule.num_scheduled_tokens)  # chunked
    assert _scheduled_ahead(trace) or (design, pp, k, method) not in FAST


V2_FAULTS = list(FAULTS)


@pytest.mark.parametrize("preset", V2_FAULTS, ids=[str(p) for p in V2_FAULTS])
def test_each_v2_preset_under_async_is_caught_where_it_is_synchronously(preset):
    """The thread's scenario with async scheduling: the same invariant at the same step, stage and
    request (``FAULTS``), and the fixed run clean. The trace scenarios schedule ahead (A's step 2
    goes out on step 0's placeholders) but for the slot-reuse one: its one slot makes each request
    wait for its output, so only its drafts are placeholders there."""
    fault = FAULTS[preset]
    schedule = dataclasses.replace(fault.scenario, async_scheduling=True)
    fixed = run_recorded(build_llm(schedule, model_runner="v2"))
    assert check_trace(fixed) == [] and fixed.outputs == schedule_reference(schedule)
    assert _scheduled_ahead(fixed) == (schedule.max_num_seqs > 1)
    expected = fault.expected
    if isinstance(expected, FirstViolation):
        with pytest.raises(InvariantViolation) as caught:
            build_llm(schedule, model_runner="v2", faults=preset).engine.run()
        v = caught.value.violation
        assert (v.invariant, v.step, v.stage, v.req_id) == (expected.invariant, expected.step, expected.stage,
                                                            expected.req_id)
    else:  # invariant 7, by the transport: the first receive that gets another message
        with pytest.raises(MessageMismatch) as caught:
            build_llm(schedule, model_runner="v2", faults=preset).engine.run()
        assert str(caught.value).startswith(f"stage {expected.stage}, step {expected.step}, applying the last "
                                            f"stage's broadcast: {expected.message}")
        assert caught.value.violation.invariant is Invariant.MESSAGE_SCHEDULE


# -- worked by hand -----------------------------------------------------------------------
PROMPT = [10, 11, 12, 13, 14]
# The stand-in model's greedy continuation of PROMPT (greedy_continuation; the test checks it).
T = [29, 44, 73, 40, 18, 20, 55, 49]


def _hand_run():
    """V1, one stage, async (two batches in flight), k = 2, scripted drafts: A's proposals have
    1, 0, 2, 2 right drafts (a wrong draft is the right token plus one)."""
    schedule = Schedule("by hand", (Request(tuple(PROMPT), 0, "A"),), 1, "scripted", 2, 8, check_invariants=True,
                        model=str(STANDIN), script=(("A", (1, 0, 2, 2)),), async_scheduling=True)
    return run_recorded(build_llm(schedule, model_runner="v1"))


def test_what_stage_0_holds_at_step_3_worked_by_hand():
    """Step 0 prefills A and samples T0; its proposal drafts [T1, T2 + 1]. Step 1 goes out before
    step 0 is back: one token and two placeholder drafts. It runs T0 with [T1, T2 + 1], accepts T1
    and recovers T2; proposes [T3 + 1, T4 + 1]. Step 2 runs T2 with those, accepts none, recovers
    T3; proposes [T4, T5]. Step 3 was scheduled when steps 0 and 1 were back and step 2 was not:
    the scheduler then had prompt + T0..T2, counted 10 tokens computed (5 + 1 + 2, step 2's drafts
    assumed accepted) and owed 6 placeholders (1 + 2 for step 2, 1 + 2 for step 3).
    What stage 0 must hold at step 3: step 2 rejected both drafts, so 8 tokens are computed
    (prompt and T0..T2), its history is prompt + T0..T3, and its drafts are step 2's, [T4, T5]."""
    from minispec.config import LlamaArchitecture
    from minispec.model_executor.models.standin import greedy_continuation

    assert greedy_continuation(PROMPT, 8, LlamaArchitecture.from_pretrained(STANDIN)) == T
    trace = _hand_run()
    assert check_trace(trace) == [] and trace.outputs == {"A": T}
    s = trace.step(3).schedule
    assert (s.num_computed_tokens["A"], s.all_token_ids["A"], s.scheduled_spec_decode_tokens["A"],
            s.num_output_placeholders["A"]) == (10, PROMPT + T[:3], [-1, -1], 6)
    events = [str(e) for e in trace.events]
    assert events.index("update step 1") < events.index("schedule step 3") < events.index("update step 2")
    (stage,) = trace.step(3).stages
    row = stage.row_of("A")
    assert row.token_ids == PROMPT + T[:4] + T[4:6] == [10, 11, 12, 13, 14, 29, 44, 73, 40, 18, 20]
    assert (row.num_computed_tokens, row.num_scheduled_tokens, row.num_drafts) == (8, 3, 2)
    assert stage.input_ids == [40, 18, 20] and stage.verified_drafts == {"A": [18, 20]}
    # and the checker's view of what the placeholders stood for is that, once step 2 is back
    assert resolved_view(s, "A", [trace.step(2)]) == Expected(8, PROMPT + T[:4], [18, 20], (2,))


@pytest.mark.parametrize("mutate,invariant,where", [
    (lambda t: t.step(3).stages[0].rows[0].token_ids.__setitem__(9, -1), Invariant.DRAFT_AGREEMENT, (3, 0)),
    (lambda t: t.step(2).spec_token_ids.__setitem__("A", [18, 21]), Invariant.DRAFT_AGREEMENT, (3, 0)),
    (lambda t: t.step(3).stages[0].rows[0].token_ids.__setitem__(8, 41), Invariant.TOKEN_HISTORY, (3, 0)),
    (lambda t: setattr(t.step(3).stages[0].rows[0], "num_computed_tokens", 10), Invariant.SHARED_ACCOUNTING, (3, 0)),
    (lambda t: t.step(3).schedule.num_output_placeholders.__setitem__("A", 3), Invariant.ONE_IN_FLIGHT_BATCH,
     (3, None)),
], ids=["placeholder-left-in-a-draft-slot", "other-drafts-came-back", "wrong-recovered-token",
        "optimistic-count-kept", "placeholders-forgot-step-2"])
def test_a_mutated_async_record_is_caught(mutate, invariant, where):
    trace = _hand_run()
    mutate(trace)
    first = check_trace(trace)[0]
    assert (first.invariant, first.step, first.stage, first.req_id) == (invariant, *where, "A")
    if first.stage is not None:
        assert "(the scheduler's once step 2 came back)" in str(first)


def test_the_explorer_and_the_stepper_take_async_scheduling(capsys):
    """``minispec explore --async-scheduling`` runs its scope under async scheduling and finds
    V2's stale drafts at the step a decode first goes out on placeholders; the counterexample
    opens in the stepper, where the fault's run shows the break and the fixed one none, and no
    placeholder is taken for a stale draft."""
    from minispec.entrypoints.cli.main import main
    from minispec.lab.explorer.explorer import Scope, explore
    from minispec.lab.viz.stepper import schedule_runs, stepper_view
    from minispec.lab.viz.text import render_stage

    main(["explore", "--model-runner", "v2", "--faults", "v2-stale-drafts", "--async-scheduling"])
    printed = capsys.readouterr().out
    assert "async scheduling; A: 2 tokens at step 0" in printed and "3 draft placeholders" in printed
    found = explore({"model_runner": "v2", "faults": "v2-stale-drafts"}, Scope(async_scheduling=(True,)))
    assert found.counterexample.schedule.async_scheduling
    v = found.counterexample.failure.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.DRAFT_AGREEMENT, 2, 0, "A")
    runs = schedule_runs(found.counterexample.schedule, {"fault": {"model_runner": "v2", "faults": "v2-stale-drafts"},
                                                         "fixed": {"model_runner": "v2"}})
    assert "invariant 2 (draft agreement)" in stepper_view(runs, "fault", 2, 0).text
    assert "no invariant violated" in stepper_view(runs, "fixed", 2, 0).text
    fixed = runs["fixed"].trace.step(2)
    assert "STALE" not in render_stage(fixed.stages[0], fixed)
