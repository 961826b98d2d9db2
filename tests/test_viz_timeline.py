"""The family's timeline (minispec.lab.faults.pp_sync.TIMELINE) and its renderer (lab/viz/sync_timeline.py)."""

import re

import pytest
from matplotlib.lines import Line2D

from minispec.lab.faults.pp_sync import TIMELINE, Kind, Lane, Milestone, State, vllm
from minispec.lab.records.threads import thread
from minispec.lab.viz.sync_timeline import MARKERS, plot_timeline, refs_label, timeline_table

URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(pull|issues)/\d+$")


def test_every_milestone_links_to_its_thread():
    for m in TIMELINE:
        assert m.refs and all(URL.match(r.url) for r in m.refs), m
    assert vllm(44697).url == "https://github.com/vllm-project/vllm/issues/44697"
    assert thread("sgl-project/sglang", 30775).label == "sglang #30775"
    with pytest.raises(KeyError, match="is cited but not in"):
        vllm(1)  # a milestone can only cite a thread of the table


def test_the_timeline_is_in_order_and_spans_each_lane():
    dates = [m.when for m in TIMELINE]
    assert dates == sorted(dates) and dates[0].year == 2025
    assert {m.lane for m in TIMELINE} == set(Lane)


def test_the_table_has_one_linked_row_per_milestone_in_order():
    shuffled = list(reversed(TIMELINE))
    table = timeline_table(shuffled)
    rows = table.markdown().splitlines()[2:]
    assert len(rows) == len(TIMELINE)
    assert rows[0].startswith("| Feb 2025 | vLLM V1 runner |") and "[#13339](https://github.com/vllm-project/vllm/pull/13339)" in rows[0]
    assert all(row.count("|") == 6 for row in rows)  # no cell breaks the table
    page = table.html()
    assert page.count("<tr>") == len(TIMELINE) + 1
    assert '<a href="https://github.com/vllm-project/vllm/pull/13339">#13339</a>' in page
    assert "<code>new_token_ids</code>" in page and "`" not in page


def _markers(fig):
    return [line for line in fig.axes[0].get_lines() if line.get_marker() in MARKERS.values()]


def test_one_marker_per_milestone_shaped_by_kind_and_filled_by_state():
    fig = plot_timeline(TIMELINE, "family")
    markers = _markers(fig)
    assert len(markers) == len(TIMELINE)
    for line, m in zip(markers, sorted(TIMELINE, key=lambda m: m.when)):
        assert line.get_marker() == MARKERS[m.kind]
        hollow = line.get_markerfacecolor() in ("#ffffff", (1.0, 1.0, 1.0, 1.0))
        assert hollow == (m.state is State.OPEN)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == [refs_label(m) for m in sorted(TIMELINE, key=lambda m: m.when)]
    assert "#44697\n#44698" in labels  # one reference a line


def test_figure_has_title_axis_labels_legend_and_fits_the_screen():
    fig = plot_timeline(TIMELINE, "family")
    ax = fig.axes[0]
    assert ax.get_title() == "family" and "not to scale" in ax.get_xlabel()
    assert [" ".join(t.get_text().split()) for t in ax.get_yticklabels()] == [lane.value for lane in Lane]
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert legend == {f"{Kind.DESIGN} (merged)", f"{Kind.FAULT} (merged)", f"{Kind.FAULT} ({State.OPEN})"}
    assert all(isinstance(h, Line2D) for h in ax.get_legend().legend_handles)
    w, h = fig.get_size_inches() * 100
    assert w <= 1280 and h <= 720


def test_lanes_without_milestones_are_left_out_and_empty_input_is_refused():
    one = (Milestone(TIMELINE[0].when, Lane.SGLANG, Kind.DESIGN, "x", (vllm(13339),)),)
    assert [t.get_text() for t in plot_timeline(one, "t").axes[0].get_yticklabels()] == [Lane.SGLANG.value]
    with pytest.raises(ValueError, match="at least one milestone"):
        plot_timeline([], "t")
