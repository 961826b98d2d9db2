"""Renderers are pure functions of trace records: check what they show."""

import pytest
from matplotlib.figure import Figure

from minispec.config import DEFAULT_TARGET
from minispec.lab.scenarios import forum_thread
from minispec.transformers_utils.tokenizer import load_tokenizer
from minispec.lab.viz.plots import cell_roles, plot_presets, plot_stage_rows
from minispec.lab.viz.text import char_decoder, first_divergence, render_comparison, render_event, render_step


@pytest.fixture(scope="module")
def traces():
    return {p: forum_thread(p, max_tokens=8) for p in ("vllm-0.9.2", "all")}


def roles(trace, step=2, stage=0):
    s = trace.step(step)
    rec = s.stages[stage]
    return {row.req_id: [r for _, _, r in cell_roles(row, s.schedule.scheduled_spec_decode_tokens.get(row.req_id, []))]
            for row in rec.rows}


def test_cell_roles_mark_stale_and_good_drafts(traces):
    buggy = roles(traces["vllm-0.9.2"])
    assert buggy["A"][-4:] == ["computed now", "draft stale", "draft stale", "draft stale"]
    # B's middle stale slot happens to hold the scheduled draft (a space)
    assert buggy["B"][-3:] == ["draft stale", "draft ok", "draft stale"]
    assert roles(traces["all"])["A"][-3:] == ["draft ok"] * 3


def test_plots_return_figures(traces):
    decode = char_decoder(load_tokenizer(DEFAULT_TARGET), visible_spaces=True)
    fig = plot_stage_rows(traces["vllm-0.9.2"].step(2), 0, decode)
    assert isinstance(fig, Figure)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "row 0: A (re-added)" in texts and "␣" in texts
    assert len(fig.axes[0].patches) == sum(len(r) for r in roles(traces["vllm-0.9.2"]).values())
    lines = plot_presets(traces).axes[0].get_lines()
    assert [line.get_label().split(" ")[0] for line in lines] == ["vllm-0.9.2", "all"]


def test_text_renderings(traces):
    decode = char_decoder(load_tokenizer(DEFAULT_TARGET))
    text = render_step(traces["vllm-0.9.2"].step(2), decode)
    assert "row 0 A re-added" in text and "draft slots=[tem] scheduled=[ st]  STALE" in text
    kinds = [render_event(traces["all"], i, decode).split(": ", 1)[1][:6] for i in range(6)]
    assert kinds == ["schedu", "schedu", "step 0", "step 0", "step 1", "update"]


def test_comparison_table():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 5, 3], [1, 2, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    stats = {"acceptance_rate": 0.5, "tokens_per_forward": 2.0, "target_forwards": 7}
    table = render_comparison([("x", stats, {"A": [1, 5], "B": [2]})], {"A": [1, 2], "B": [2]})
    assert table.splitlines()[1].endswith("1/2 (A@1)")


def test_trace_stepper_widget(traces):
    from minispec.lab.viz.widgets import trace_stepper

    box = trace_stepper(traces["all"])
    slider = box.children[0]
    assert slider.max == len(traces["all"].events) - 1
    slider.value = 3  # re-renders without error
