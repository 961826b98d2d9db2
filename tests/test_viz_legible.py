"""Notebook 09's figures read on a laptop, by ``minispec.lab.viz.legible``'s rule (every text
at least 14 px where JupyterLab shows it at 1280 x 720 with the file browser open), and the
timeline's labels do not run into each other."""

import pytest
from matplotlib.text import Text

from minispec.lab.faults.pp_sync import DESIGNS, TIMELINE
from minispec.lab.viz.legible import too_small
from minispec.lab.viz.sync_designs import plot_designs
from minispec.lab.viz.sync_timeline import plot_timeline


def texts(fig) -> list[Text]:
    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


FIGURES = {"timeline": lambda: plot_timeline(TIMELINE, "family"), "designs": lambda: plot_designs(DESIGNS, "who")}


@pytest.mark.parametrize("name", FIGURES)
def test_every_text_is_at_least_14_px_in_the_notebook_column(name):
    assert too_small(FIGURES[name]()) == []


def test_the_check_fails_on_a_figure_scaled_down():
    fig = plot_timeline(TIMELINE, "family")
    fig.set_figwidth(12.8)  # about 1280 px wide, shown at 848: 10.5 points become 10 px
    assert too_small(fig)


def test_the_timeline_labels_do_not_overlap():
    fig = plot_timeline(TIMELINE, "family")
    ax = fig.axes[0]
    # the month labels are rotated: their upright boxes overlap while the words do not
    labels = [t for t in texts(fig) if t in ax.texts + ax.get_yticklabels()]
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else fig._get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    overlapping = [(labels[i].get_text(), labels[j].get_text()) for i in range(len(boxes)) for j in range(i)
                   if boxes[i].overlaps(boxes[j])]
    assert len(labels) == len(TIMELINE) + 4 and not overlapping, overlapping
