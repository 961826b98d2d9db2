"""The aligned history strips, on a hand-made step whose stage 0 misses one accepted token."""

import pytest

from minispec.instruments.trace import RowRecord, ScheduleRecord, StageRecord, StepRecord
from minispec.lab.viz.history import DIFFERS, history_strips, plot_history, render_history

LETTERS = "_abcdefghijklmnopqrstuvwxyz"


def decode(token):
    return LETTERS[token]


def shifted_step() -> StepRecord:
    """Prompt abc, then d e f emitted; stage 0 was relayed only f, so it lacks e.
    The step computes f (position 5) and drafts g h i (positions 6-8)."""
    schedule = ScheduleRecord(
        step=4, num_scheduled_tokens={"A": 4}, scheduled_spec_decode_tokens={"A": [7, 8, 9]},
        new_token_ids={"A": [6]}, num_computed_tokens={"A": 5}, all_token_ids={"A": [1, 2, 3, 4, 5, 6]},
        new_req_ids=[], num_prompt_tokens={"A": 3},
    )

    def row(tokens, no_spec):
        return RowRecord(row=0, req_id="A", path="re-added", token_ids=tokens, num_tokens=no_spec + 3,
                         num_tokens_no_spec=no_spec, num_computed_tokens=5, num_scheduled_tokens=4, num_drafts=3)

    stage0 = StageRecord(4, 0, False, [row([1, 2, 3, 4, 6, 7, 8, 9, 0], 5)], input_ids=[7, 8, 9, 0],
                         verified_drafts={})
    stage1 = StageRecord(4, 1, True, [row([1, 2, 3, 4, 5, 6, 7, 8, 9], 6)], input_ids=[6, 7, 8, 9],
                         verified_drafts={"A": [7, 8, 9]})
    return StepRecord(schedule, [stage0, stage1])


def test_strips_align_by_position_and_mark_the_shift():
    scheduler, stage0, stage1 = history_strips(shifted_step(), "A", first=0, window=10)
    assert [c.expected for c in scheduler.cells] == [1, 2, 3, 4, 5, 6, 7, 8, 9, None]
    assert [c.position for c in scheduler.cells if c.gathered] == [5, 6, 7, 8]
    assert [c.position for c in scheduler.cells if c.draft] == [6, 7, 8]
    assert [c.position for c in stage0.cells if c.differs] == [4, 5, 6, 7, 8]
    assert not any(c.differs for c in stage1.cells)
    assert stage0.label == "stage 0, re-added" and stage1.label == "stage 1 (last), re-added"
    assert (stage0.num_computed_tokens, stage0.num_tokens_no_spec) == (5, 5)


def test_default_window_ends_at_the_last_gathered_position():
    cells = history_strips(shifted_step(), "A", window=4)[0].cells
    assert [c.position for c in cells] == [5, 6, 7, 8]


def test_render_history_text():
    assert render_history(shifted_step(), "A", decode, first=0, window=10) == "\n".join([
        "step 4, request A: positions 0..9",
        "                          0000000000",
        "                          0123456789",
        "scheduler                 abcdefghi·  computed=5 all_token_ids=6",
        "                               =ddd",
        "stage 0, re-added         abcdfghi_·  computed=5 no_spec=5",
        "                              ^^^^^",
        "stage 1 (last), re-added  abcdefghi·  computed=5 no_spec=6",
    ])


def test_unscheduled_request_is_a_clear_error():
    with pytest.raises(ValueError, match=r"req_id='Z': expected a request scheduled at step 4 \(\['A'\]\)"):
        history_strips(shifted_step(), "Z")


def test_plot_marks_exactly_the_differing_cells():
    fig = plot_history(shifted_step(), "A", decode, first=0, window=10)
    ax = fig.axes[0]
    orange = [p for p in ax.patches if p.get_facecolor()[:3] == pytest.approx(tuple(int(DIFFERS[i:i + 2], 16) / 255
                                                                                     for i in (1, 3, 5)))]
    assert len(orange) == 5
    assert sum(t.get_text() == "✗" for t in ax.texts) == 5
    assert tuple(fig.get_size_inches()) == tuple(plot_history(shifted_step(), "A", decode).get_size_inches())
