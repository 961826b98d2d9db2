"""Async scheduling watched (minispec/lab/experiments/async_scheduling.py) and its renderer
(minispec/lab/viz/placeholders.py): the scheduler's drafts for a step scheduled ahead are
placeholders, stage 0 embeds the drafts a synchronous run schedules, and the outputs are
plain greedy decoding's."""

from __future__ import annotations

import dataclasses

import pytest

from minispec.distributed.parallel_state import MessageMismatch
from minispec.instruments.invariants import Invariant
from minispec.lab.experiments.async_scheduling import run_ahead
from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import run_schedule
from minispec.lab.viz.placeholders import render_ahead

K = 3


@pytest.fixture(scope="module")
def ahead():
    return run_ahead(thread_schedule(max_tokens=8))


def test_the_scheduler_schedules_placeholders_and_stage_0_embeds_the_real_drafts(ahead):
    assert ahead.equals_greedy and ahead.max_concurrent_batches == 2 + 1  # pp_size + 1
    first = ahead.first_decode("A")
    assert first.scheduled.step == 2 and first.scheduled.in_flight == (0, 1, 2)
    assert first.scheduled.drafts == (-1,) * K and first.scheduled.num_scheduled_tokens == 1 + K
    # step 0's sampled token, then this step's bonus token and its k drafts
    assert first.scheduled.num_output_placeholders == 1 + 1 + K
    assert first.scheduled.known_tokens == ahead.step(0, "A").scheduled.known_tokens  # step 0 not back yet
    sync = run_schedule(thread_schedule(max_tokens=8), model_runner="v2")
    assert first.embedded.draft_tokens == tuple(sync.step(2).schedule.scheduled_spec_decode_tokens["A"])
    assert first.embedded.last_sampled_token == ahead.step(0, "A").returned[-1]


def test_what_comes_back_is_the_output(ahead):
    for req_id, output in ahead.outputs.items():
        returned = [t for s in ahead.steps if s.req_id == req_id for t in s.returned]
        assert returned == output


def test_the_render_names_the_placeholders(ahead):
    text = render_ahead(ahead.first_decode("A"), str, ahead.max_concurrent_batches).splitlines()
    assert text[0] == "step 2, request A: scheduled while steps 0, 1 were in flight (3 with it; at most 3)"
    assert text[2] == "  it schedules 4 tokens, drafts [-1, -1, -1]; num_output_placeholders=5"
    assert render_ahead(ahead.step(0, "A"), str, 3).startswith("step 0, request A: scheduled with no other step")
    with pytest.raises(ValueError, match="request 'A' was not scheduled at step 1"):
        ahead.step(1, "A")


def test_the_posted_twice_preset_under_async_breaks_invariant_7():
    with pytest.raises(MessageMismatch) as caught:
        run_ahead(thread_schedule(max_tokens=8), faults="v2-drafts-posted-twice")
    assert caught.value.violation.invariant is Invariant.MESSAGE_SCHEDULE


@pytest.mark.parametrize("change,message", [
    (dict(temperature=0.5), "expected a greedy schedule"), (dict(pipeline_parallel_size=1), "at least two stages"),
])
def test_bad_input_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        run_ahead(dataclasses.replace(thread_schedule(max_tokens=4), **change))
