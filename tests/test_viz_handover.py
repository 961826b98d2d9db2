"""The designs' hand-over compared (issue 25 §4): the measurement
(``minispec.lab.experiments.handover``) on the relay designs and V2, and its pure renderers
(``minispec.lab.viz.handover_costs``) on hand-made costs."""

import pytest

from minispec.instruments.invariants import Invariant
from minispec.lab.experiments import Workload, count_handover
from minispec.lab.experiments.handover import DesignCost
from minispec.lab.viz import handover_table, plot_handover
from minispec.lab.viz.figure import describe
from minispec.lab.viz.legible import too_small
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.switches import ModelRunner

SMALL = Workload(pipeline_parallel_size=3, num_speculative_tokens=2, requests=4, max_tokens=6)


def test_every_design_says_what_it_must_get_right():
    """Each built-in design's record names its rule (a registered design whose record names none
    gets a row that says so: tests/test_fifth_design.py)."""
    assert all(DESIGNS[d].must_keep for d in ModelRunner)
    assert DesignCost(ModelRunner.RELAY, 1).must[0] is Invariant.TOKEN_HISTORY


@pytest.mark.parametrize("design,channels", [
    ("v2", {"stage 2 -> stage 0", "stage 2 -> stage 1"}),  # the last stage tells each stage itself
    ("relay", {"stage 2 -> stage 0", "stage 0 -> stage 1"}),  # around the ring
])
def test_the_channels_are_the_design_s_path(design, channels):
    cost = count_handover(design, SMALL)
    assert set(cost.messages) == channels and cost.steps > 0
    assert set(cost.waits) == {f"{c.split(' -> ')[1]} waits on {c.split(' -> ')[0]}" for c in channels}


def test_replicated_drafting_sends_no_drafts():
    """Three tensors per batch with drafts (tokens, counts, drafts), two without: replicated
    drafting relays a third fewer messages than the relay on the same workload."""
    relay, replicated = count_handover("relay", SMALL), count_handover("replicated", SMALL)
    first = "stage 2 -> stage 0"
    assert relay.messages[first] == 3 * replicated.messages[first] // 2
    assert replicated.nbytes[first] < relay.nbytes[first]


def _costs():
    v2 = DesignCost(ModelRunner.V2, 10, {"stage 2 -> stage 0": 30, "stage 2 -> stage 1": 30},
                    {"stage 2 -> stage 0": 1200, "stage 2 -> stage 1": 1200}, seconds=0.5, overlap=1.4, load=3.0)
    relay = DesignCost(ModelRunner.RELAY, 10, {"stage 2 -> stage 0": 30, "stage 0 -> stage 1": 30},
                       {"stage 2 -> stage 0": 1200, "stage 0 -> stage 1": 1100})
    return [v2, relay]


def test_the_table_has_one_row_per_design_with_its_numbers():
    table = handover_table(_costs())
    assert table.header[4] == 'step time over "mp", 2 in flight (load 3.0)'
    v2, relay = table.rows
    assert v2[:6] == ("`v2`", "6.00", "stage 2 -> stage 0: 120; stage 2 -> stage 1: 120",
                      "stage 0 waits on stage 2; stage 1 waits on stage 2", "50.0 ms", "1.40x")
    assert relay[3] == "stage 1 waits on stage 0; stage 0 waits on stage 2" and relay[4:6] == ("not measured",) * 2
    assert relay[6].startswith("invariant 3 (")


def test_the_figure_stacks_each_channel_and_names_it():
    fig = plot_handover(_costs(), "hand-over per step")
    messages, nbytes = fig.axes
    assert [t.get_text() for t in messages.get_xticklabels()] == ["v2", "relay"]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["stage 0 -> stage 1", "stage 2 -> stage 0",
                                                          "stage 2 -> stage 1"]
    assert len({p.get_hatch() for p in messages.patches}) == 3  # a hatch per channel, not colour alone
    assert too_small(fig) == []
    heights = sorted(round(p.get_height(), 2) for p in nbytes.patches if p.get_height())
    assert heights == [110.0, 120.0, 120.0, 120.0]
    assert "messages per engine step" in describe(fig)


def test_no_costs_is_refused():
    with pytest.raises(ValueError, match="expected at least one DesignCost"):
        handover_table([])
    with pytest.raises(ValueError, match="expected at least one DesignCost"):
        plot_handover([], "t")
