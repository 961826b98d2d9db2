"""Notebook 11's lab pieces (issue 37, deliverable 5): where EAGLE-3's taps live per stage, what
dropping them costs, the KV each stage commits after a tree, and the pure renderers of each."""

import pytest
import torch

from minispec.instruments.invariants import Invariant
from minispec.lab.experiments.beyond_tokens import (
    KVCell,
    TapsAcceptance,
    TreeKVRun,
    tap_layout,
    taps_acceptance,
    tree_kv_run,
)
from minispec.lab.viz.figure import describe
from minispec.lab.viz.legible import too_small
from minispec.lab.viz.taps import plot_tap_stages, render_taps_acceptance
from minispec.lab.viz.tree_figure import plot_tree_kv, render_tree
from minispec.token_tree import TokenTree


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- taps -------------------------------------------------------------------------------------

@pytest.mark.parametrize("pp,layers,taps,carried", [
    (1, (0, 0, 0, 0), {1: 0, 2: 0, 3: 0}, ()),
    (2, (0, 0, 1, 1), {1: 0, 2: 0, 3: 1}, (1, 2)),  # tap 2 enters layer 2: stage 0's last output
    (3, (0, 1, 1, 2), {1: 0, 2: 1, 3: 1}, (1, 2, 3)),
    (4, (0, 1, 2, 3), {1: 0, 2: 1, 3: 2}, (1, 2, 3)),
])
def test_each_tap_is_captured_by_the_stage_running_the_layer_before_it(pp, layers, taps, carried):
    layout = tap_layout(4, (1, 2, 3), pp)
    assert (layout.layer_stages, layout.tap_stages, layout.carried) == (layers, taps, carried)


def test_tap_0_is_the_embedding_s_output_on_the_first_stage():
    assert tap_layout(4, (0, 4), 2).tap_stages == {0: 0, 4: 1}  # 4: the stream after the last layer


def test_the_tap_figure_says_it_in_words_and_is_legible():
    fig = plot_tap_stages([tap_layout(4, (1, 2, 3), pp) for pp in (1, 2, 4)], "taps")
    titles = [ax.get_title("left") for ax in fig.axes]
    assert titles == ["PP = 1: the last stage computes all 3 taps itself",
                      "PP = 2: the last stage computes 1 of 3 taps; 2 travel from stage 0",
                      "PP = 4: the last stage computes 0 of 3 taps; 3 travel from stages 0, 1, 2"]
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "tap 3: stage 1" in texts and "tap 2: stage 1 →" in texts and "layer 2\nstage 2" in texts
    assert too_small(fig) == [] and "PP = 4" in describe(fig)


def test_the_tap_figure_refuses_nothing_or_two_models():
    with pytest.raises(ValueError, match="plot_tap_stages: expected at least one layout"):
        plot_tap_stages([], "x")
    with pytest.raises(ValueError, match="all of one model"):
        plot_tap_stages([tap_layout(4, (1,), 2), tap_layout(6, (1,), 2)], "x")


def test_the_acceptance_table():
    rows = [TapsAcceptance(1, 0.5, 0.5, True), TapsAcceptance(2, 0.5, 0.25, False)]
    assert render_taps_acceptance(rows) == ("PP  taps carried  taps dropped  output\n"
                                            " 1         50.0%         50.0%  the same\n"
                                            " 2         50.0%         25.0%  different")


def test_dropped_taps_cost_acceptance_and_never_output():
    (one, two) = taps_acceptance((1, 2))
    assert one.carried == one.dropped  # masked: the last stage owns every tap
    assert two.dropped < two.carried and two.same_output


# -- the tree's KV ------------------------------------------------------------------------------

def _hand_worked() -> TreeKVRun:
    """tests/test_tree.py's invariant-10 case: prompt [5, 9, 3], the tree [(0,), (1,)] as drafts
    [7, 8], the target took (1,): position 3 must hold 8; a stage that did not compact holds 7."""
    cells = {"tokens": (KVCell(3, 2), KVCell(8, 3)), "stage 0": (KVCell(3, 2), KVCell(7, 3)),
             "stage 1": (KVCell(3, 2), KVCell(8, 3))}
    return TreeKVRun(TokenTree.parse("[(0,), (1,)]"), "A", 1, 2, (7, 8), (1,), cells, violation=None,
                     outputs={}, acceptance={})


def test_the_tree_table_lists_each_node_where_it_was_computed_and_written():
    text = render_tree(_hand_worked(), str)
    assert text.splitlines()[2:] == ["node     draft  parent  position  KV place",
                                     "(0,)       '7'  root           3         3",
                                     "(1,)       '8'  root           3         4",
                                     "the target accepted (1,): '8', then its own next token"]


def test_the_tree_figure_crosses_only_the_wrong_entry_and_the_rejected_node():
    fig = plot_tree_kv(_hand_worked(), str, "tree")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("'7' ✗\nat 3") == 1 and texts.count("'8'\nat 3") == 2
    assert texts.count("✓") == 1 and texts.count("✗") == 1  # node (1,) accepted, (0,) rejected
    assert "stage 1's KV (last stage)" in texts and too_small(fig) == []


def test_a_stage_that_does_not_compact_keeps_a_rejected_sibling():
    run = tree_kv_run()
    v = run.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.COMMITTED_KV, 4, 0, "A")
    assert run.path == (0, 2) and run.root == 10  # (0,), then (0, 0)
    assert run.committed["stage 0"][-1] == KVCell(run.drafts[1], 11)  # node (1,), left where (0, 0) belongs
    assert run.committed["stage 1"] == run.committed["tokens"]  # the last stage compacts
    assert run.outputs["fixed"] != run.outputs["faulty"] and run.acceptance["faulty"] < run.acceptance["fixed"]
