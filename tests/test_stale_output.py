"""The scheduler's ``stale-output-dropped`` preset (vllm-project/vllm-gaudi#1794, vllm-project/vllm-gaudi#1803): the output of a
batch in flight when its request was preempted is discarded instead of delivered (vLLM 0.30.0,
PR #48245). The schedule is a random one whose KV pool preempts requests in flight (PP 2, n-gram
drafts, k = 3): with Model Runner V2, which rebuilds a resumed request from the scheduler's
tokens, output stays right and invariant 8 (each position sampled once) names the work done
twice; with V1, whose last stage keeps what it sampled, invariant 3 (token history) breaks first."""

import dataclasses

import pytest

from minispec.instruments.invariants import Invariant, InvariantViolation, check_trace
from minispec.lab.experiments.scenarios import exercise_schedule
from minispec.lab.experiments.schedule import build_llm, run_recorded

PRESET = "stale-output-dropped"


def schedule(check_invariants: bool):
    return dataclasses.replace(exercise_schedule(3, 2, "ngram"), check_invariants=check_invariants)


@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_the_fixed_run_preempts_in_flight_and_is_clean(runner):
    trace = run_recorded(build_llm(schedule(False), model_runner=runner))
    assert any(step.stale for step in trace.steps)  # some outputs came back stale
    assert check_trace(trace) == []


def test_v2_samples_a_position_twice():
    trace = run_recorded(build_llm(schedule(False), model_runner="v2", faults=PRESET))
    first = check_trace(trace)[0]
    assert (first.invariant, first.step, first.stage, first.req_id) == (Invariant.SAMPLED_ONCE, 30, 1, "B")
    assert first.expected == "position 25 sampled once (at step 27)"
    assert {v.invariant for v in check_trace(trace)} == {Invariant.SAMPLED_ONCE}


def test_v1_last_stage_keeps_the_dropped_token():
    with pytest.raises(InvariantViolation) as caught:
        run_recorded(build_llm(schedule(True), model_runner="v1", faults=PRESET))
    v = caught.value.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.TOKEN_HISTORY, 30, 1, "B")
    # the row holds 26 tokens, the last the one its last stage sampled and the scheduler dropped
    assert len(v.actual) == 26 and v.actual[-1] == 88
