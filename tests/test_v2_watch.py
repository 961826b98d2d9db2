"""Watching Model Runner V2's broadcast and slots (minispec/lab/experiments/v2_watch.py) and their
text renderers (minispec/lab/viz/slots.py), on the forum thread's scenario."""

import numpy as np
import pytest

from minispec.instruments.invariants import check_trace
from minispec.lab.experiments.scenarios import FIRST_DECODE, thread_schedule
from minispec.lab.experiments.schedule import build_llm
from minispec.lab.experiments.v2_watch import (
    BroadcastRecord,
    SlotRow,
    SlotSnapshot,
    run_watched,
    watch_broadcasts,
    watch_slots,
)
from minispec.lab.viz.slots import render_broadcast, render_slots
from minispec.v1.worker.gpu import ENV_VAR


@pytest.fixture(scope="module")
def watched():
    run = run_watched(thread_schedule(max_tokens=8))
    return run.trace, run.broadcasts, run.slots


def test_one_broadcast_per_sampling_step_matching_what_the_scheduler_was_told(watched):
    trace, broadcasts, _ = watched
    assert [b.step for b in broadcasts] == [s.step for s in trace.steps]  # every step of the thread samples
    step = trace.step(FIRST_DECODE)
    sent = next(b for b in broadcasts if b.step == FIRST_DECODE)
    last = next(st for st in step.stages if st.is_last)
    for req_id in sent.req_ids:
        row = sent.row(req_id)
        n = int(sent.num_sampled[row])
        assert sent.sampled_tokens[row, :n].tolist() == last.sampled[req_id]
        assert (sent.sampled_tokens[row, n:] == -1).all()
        assert int(sent.num_rejected[row]) == len(step.schedule.scheduled_spec_decode_tokens[req_id]) + 1 - n
        assert n - 1 == step.num_accepted[req_id]
    # the drafts broadcast after step 2 are what the scheduler schedules at A's next turn, step 4
    a = sent.row("A")
    assert sent.draft_tokens[a].tolist() == trace.step(FIRST_DECODE + 2).schedule.scheduled_spec_decode_tokens["A"]


def test_stage_0s_slots_hold_what_the_scheduler_holds(watched):
    trace, _, slots = watched
    assert check_trace(trace) == []
    for step in trace.steps:
        for req_id, tokens in step.schedule.all_token_ids.items():
            slot = slots[step.step].slot_of(req_id)
            assert list(slot.token_ids) == tokens
            drafts = step.schedule.scheduled_spec_decode_tokens.get(req_id)
            if drafts:
                assert list(slot.draft_tokens) == drafts
                assert slot.last_sampled_token == tokens[-1]
            assert slot.num_computed_tokens == step.schedule.num_computed_tokens[req_id]


def test_watching_needs_an_in_process_v2_pipeline(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    llm = build_llm(thread_schedule(max_tokens=2), model_runner="v1")
    with pytest.raises(ValueError, match="Model Runner V2"):
        watch_broadcasts(llm)
    with pytest.raises(ValueError, match="stage=0: expected a stage of an in-process Model Runner V2"):
        watch_slots(llm, 0)
    with pytest.raises(ValueError, match="stage=5"):
        watch_slots(build_llm(thread_schedule(max_tokens=2), model_runner="v2"), 5)


def test_render_slots_by_hand():
    snap = SlotSnapshot(4, 0, (SlotRow(1, "B", tuple(range(3)), 2, 2, (7, 8)),
                               SlotRow(3, "A", tuple(range(10)), 9, 9, (5, 6))))
    assert render_slots(snap, req_ids=["A"]) == (
        "stage 0's slots at step 4, before its forward:\n"
        "  slot 3 A: history …'2 3 4 5 6 7 8 9' (total_len=10), num_computed_tokens=9, "
        "last_sampled_tokens='9', draft_tokens='5 6'")
    assert render_slots(snap, decode=chr).splitlines()[1].startswith("  slot 1 B: history '\\x00\\x01\\x02'")


def test_render_broadcast_by_hand():
    record = BroadcastRecord(2, ("A", "B"), (3, 2), np.array([[1, 2, -1], [4, -1, -1]]), np.array([2, 1]),
                             np.array([0, 1]), np.array([[5, 6], [7, 8]]))
    assert render_broadcast(record).splitlines() == [
        "the last stage's broadcast after step 2:",
        "  row 0 (slot 3, A): sampled_tokens='1 2' (+1 padding), num_sampled=2, num_rejected=0, draft_tokens='5 6'",
        "  row 1 (slot 2, B): sampled_tokens='4' (+2 padding), num_sampled=1, num_rejected=1, draft_tokens='7 8'",
    ]
