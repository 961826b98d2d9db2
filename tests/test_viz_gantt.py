"""The timeline the in-process pipeline records, and the Gantt drawn from it."""

import pytest
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

from minispec.instruments.timeline import StageSpan, Timeline
from minispec.lab.experiments.scenarios import forum_thread_llm
from minispec.lab.viz.gantt import IDLE, plot_gantt, plot_gantt_compare, span_label


def thread_timeline():
    llm = forum_thread_llm("vllm-0.9.2", max_tokens=4)
    llm.engine.run()
    return llm.timeline()


def test_thread_scenario_keeps_both_stages_busy_with_alternating_batches():
    t = thread_timeline()
    assert t.clock == "ticks" and t.num_stages == 2
    # tick 2: batch_0's first decode (step 2) enters stage 0 while batch_1's
    # prefill (step 1) is on stage 1 -- two batches in flight at once
    at_tick_2 = {(s.stage, s.step, s.req_ids) for s in t.spans if s.start == 2}
    assert at_tick_2 == {(0, 2, ("A", "B")), (1, 1, ("C", "D"))}
    for s in t.spans:  # a batch reaches stage 1 exactly one tick after stage 0
        if s.stage == 1:
            assert t.span(s.step, 0).end == s.start
    ticks = t.makespan
    # each stage idles for exactly one tick: stage 1 at the start, stage 0 at the end
    assert t.idle_fraction(0) == pytest.approx(1 / ticks) and t.idle_fraction(1) == pytest.approx(1 / ticks)


def test_idle_fraction_counts_bubbles():
    t = Timeline(2, "ticks", [StageSpan(0, 0, ("A",), 0, 1), StageSpan(1, 0, ("A",), 1, 2)])
    assert t.idle_fraction(0) == t.idle_fraction(1) == 0.5
    assert Timeline(2, "ticks").idle_fraction(0) == 0.0


def test_labels_shrink_to_fit_their_bar():
    span = StageSpan(0, 12, ("A", "B"), 0, 1)
    assert span_label(span, width=100, per_char=1) == "step 12 · A,B"
    assert span_label(span, width=9, per_char=1) == "12 · A,B"  # the requests matter more than the word
    assert span_label(span, width=8, per_char=1) == "step 12"
    assert span_label(span, width=3, per_char=1) == "12"
    assert span_label(span, width=1, per_char=1) == ""


def test_gantt_draws_one_bar_per_span_and_outlines_the_highlight():
    t = thread_timeline()
    fig = plot_gantt(t, title="thread", highlight=(2, 0), max_step=5)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_facecolor()[:3] != (0.933, 0.933, 0.933)]
    outlined = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(outlined) == 1 and outlined[0].get_x() == t.span(2, 0).start
    assert len(bars) - t.num_stages == sum(1 for s in t.spans if s.step <= 5)  # minus the idle tracks
    assert "stage 0 idle" in ax.get_title() and "stage 1 idle" in ax.get_title()
    assert ax.get_title().endswith("(over the whole run)")  # the drawn window is not the run its shares are of
    assert "whole run" not in plot_gantt(t, title="thread").axes[0].get_title()
    labels = {text.get_text() for text in ax.texts}
    assert "2 · A,B" in labels


def test_compared_runs_share_one_time_axis_and_each_idles_only_within_its_own_run():
    t = thread_timeline()
    fig = plot_gantt_compare({"long": (t, 7), "short": (t, 3)})
    long_ax, short_ax = fig.axes[:2]
    assert long_ax.get_xlim() == short_ax.get_xlim() == (0, t.span(7, 1).end)
    short_tracks = [p for p in short_ax.patches if p.get_facecolor() == to_rgba(IDLE)]
    assert [p.get_width() for p in short_tracks] == [t.span(3, 1).end] * 2
    assert "short: stage 0 idle" in short_ax.get_title()
    assert {x.get_text() for x in short_ax.texts} >= {"3 · C,D"}
    assert not any("step 4" in x.get_text() for x in short_ax.texts)
