"""The row strip's verdict line: a row's status is bold with ✗ only when the row is wrong."""

import pytest

from minispec.lab.viz.plots import plot_stage_rows
from minispec.lab.viz.stepper import thread_runs
from minispec.lab.viz.strip import stage_view


@pytest.fixture(scope="module")
def runs():
    return thread_runs(presets=("vllm-0.9.2",), max_tokens=8)


def verdicts(fig):
    """(text, weight) of every verdict line drawn ("✓ ..." or "✗ ...")."""
    return [(t.get_text(), t.get_fontweight()) for ax in fig.axes for t in ax.texts
            if t.get_text()[:2] in ("✓ ", "✗ ")]


def test_row_without_drafts_is_not_marked_wrong(runs, decode):
    # step 1 is batch_1 = {C, D}'s prefill: rows with no drafts, nothing wrong in them
    step = runs["vllm-0.9.2"].trace.step(1)
    assert {v.status for v in stage_view(step, 0)} == {"ok, no drafts"}
    drawn = verdicts(plot_stage_rows(step, 0, decode))
    assert drawn and all(text == "✓ ok, no drafts" and weight == "normal" for text, weight in drawn)


def test_stale_row_is_marked_wrong(runs, decode):
    # step 2: A re-added into C's row, its draft slots stale (fault 1)
    step = runs["vllm-0.9.2"].trace.step(2)
    drawn = dict(verdicts(plot_stage_rows(step, 0, decode)))
    assert drawn["✗ drafts stale"] == "bold"
