"""The three designs of the hand-over (minispec.lab.faults.pp_sync.DESIGNS) and their renderer."""

import pytest
from matplotlib.patches import FancyArrowPatch

from minispec.instruments.invariants import Invariant
from minispec.lab.faults.pp_sync import DESIGNS, STAGES, THE_INVARIANT, Design, Message
from minispec.lab.viz.sync_designs import WRAP, designs_table, message_lines, plot_designs

V1, V2, SGLANG = DESIGNS
NON_LAST = STAGES[:-1]


def senders_to(design, stage):
    return {m.sender for m in design.messages if m.receiver == stage}


def test_who_tells_the_non_last_stages():
    for stage in NON_LAST:
        # V1: the scheduler's relay, and since PR #32618 a broadcast under async scheduling
        assert senders_to(V1, stage) == {"scheduler", STAGES[-1]}
        assert any("async scheduling" in m.what for m in V1.messages if m.receiver == stage or m.sender == STAGES[-1])
        assert senders_to(V2, stage) == {"scheduler", STAGES[-1]}  # V2: the last stage's broadcast
        # V2 reads only counts from the scheduler (which still sends values it ignores)
        assert not any(m.values for m in V2.messages if m.sender == "scheduler")
    # SGLang: a ring, each stage told by the one before it, the first by the last
    assert [senders_to(SGLANG, s) for s in STAGES] == [{STAGES[-1]}, {STAGES[0]}, {STAGES[1]}]
    assert "accept_lens" in SGLANG.messages[0].what and "draft tree" in SGLANG.messages[0].what


def test_the_invariant_is_minispecs_three_stage_checks():
    assert THE_INVARIANT == (Invariant.TOKEN_HISTORY, Invariant.DRAFT_AGREEMENT, Invariant.SHARED_ACCOUNTING)
    assert all(i.on_trace for i in THE_INVARIANT)


def test_one_numbered_arrow_per_message_dashed_for_counts():
    fig = plot_designs(DESIGNS, "who tells whom")
    for ax, design in zip(fig.axes, DESIGNS):
        arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
        assert len(arrows) == len(design.messages)
        dashed = [a.get_linestyle() not in ("-", "solid") for a in arrows]
        assert dashed == [not m.values for m in design.messages]
        numbers = [t.get_text() for t in ax.texts if t.get_text().isdigit()]
        assert numbers == [str(i) for i in range(1, len(design.messages) + 1)]
        assert ax.get_title().startswith(design.name) and design.ref.label in ax.get_title()


def test_figure_has_a_title_legend_and_fits_the_screen():
    fig = plot_designs(DESIGNS, "who tells whom")
    assert fig._suptitle.get_text() == "who tells whom"
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {
        "carries token values", "carries counts only", "samples, verifies, drafts"}
    w, h = fig.get_size_inches() * 100
    assert w <= 1280 and h <= 720


def test_the_message_list_wraps_and_ends_with_what_a_stage_does():
    lines = message_lines(V2)
    assert lines[0].startswith("1. last stage → scheduler") and all(len(line) <= WRAP for line in lines)
    assert " ".join(lines).endswith(V2.rebuild + ".")


def test_the_table_has_one_column_per_design():
    rows = designs_table(DESIGNS).markdown().splitlines()
    assert all(row.count("|") == len(DESIGNS) + 2 for row in rows)
    assert "[#33960](https://github.com/vllm-project/vllm/pull/33960)" in rows[0]
    told = next(r for r in rows if r.startswith("| after each step"))
    assert "last stage → scheduler" not in told  # only what the non-last stages are told


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="at least one design"):
        plot_designs([], "t")
    odd = Design("x", V1.ref, "", "", "", (Message("stage 7", "scheduler", "?", True),))
    with pytest.raises(ValueError, match=r"unknown parties \['stage 7'\]"):
        plot_designs([odd], "t")
