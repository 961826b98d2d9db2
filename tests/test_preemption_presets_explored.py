"""The explorer (``minispec.lab.explorer.explorer``) finds each of the preemption family's presets
as a minimal counterexample on the stand-in model, and runs the fixed design clean over the same
scope (the schedule numbers are the explorer's order: plainest engine settings first):
``stale-output-dropped`` (the scheduler's, vllm-project/vllm-gaudi#1803) on V1 and V2, and
``v1-pp-async-stale-row`` (tenstorrent/vllm-tt-plugin#131's shape) on V1."""

import pytest

from minispec.instruments.invariants import Invariant
from minispec.lab.explorer.explorer import Scope, explore

# two requests, a KV pool of 3 or 4 blocks of 4 (requests are preempted, some in flight), with and
# without async scheduling
PREEMPTING = Scope(max_requests=2, prompt_lengths=(2, 5), max_tokens=(2, 4), arrival_steps=(0, 1, 2),
                   right_drafts=(0, 3), num_gpu_blocks=(3, 4), max_num_seqs=(4,), async_scheduling=(False, True))
ASYNC = Scope(max_requests=2, prompt_lengths=(2, 5), max_tokens=(2, 4), arrival_steps=(0, 1, 2),
              right_drafts=(0, 3), max_num_seqs=(4, 2), async_scheduling=(True,))


@pytest.mark.parametrize("runner,found", [
    ("v2", (23, Invariant.SAMPLED_ONCE, 4, 1, "B")),  # B's stale prefill output dropped: position 2 sampled again
    ("v1", (23, Invariant.TOKEN_HISTORY, 4, 1, "B")),  # the last stage's row holds the tokens the scheduler dropped
])
def test_the_dropped_stale_output_is_found(runner, found):
    result = explore({"model_runner": runner, "faults": "stale-output-dropped"}, PREEMPTING)
    v = result.counterexample.failure.violation
    assert (result.schedules_run, v.invariant, v.step, v.stage, v.req_id) == found
    assert [r.req_id for r in result.counterexample.schedule.requests] == ["A", "B"]
    assert result.counterexample.schedule.num_gpu_blocks == 3


@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_preempting_in_flight_is_clean_over_the_whole_scope(runner):
    result = explore({"model_runner": runner}, PREEMPTING)
    assert result.counterexample is None and result.exhausted and result.schedules_run == 368


def test_the_async_scope_is_clean_under_the_fix():
    result = explore({"model_runner": "v1"}, ASYNC)
    assert result.counterexample is None and result.exhausted and result.schedules_run == 184


def test_the_stale_row_is_found():
    """A finishes; B takes its row 0 on stage 0 before A's last broadcast entry is applied there."""
    result = explore({"model_runner": "v1", "faults": "v1-pp-async-stale-row"}, ASYNC)
    v = result.counterexample.failure.violation
    assert (result.schedules_run, v.invariant, v.step, v.stage, v.req_id) == (36, Invariant.TOKEN_HISTORY, 3, 0, "B")
    assert v.actual == [53, 85, 34, 12]  # A's token 34 between B's prompt and B's own sampled token
