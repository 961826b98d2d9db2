"""Notebook 09's figures read on a laptop: at 1280 x 720 in JupyterLab, with the file browser
open, the notebook's output column is 848 pixels wide (measured in Chromium), and a
figure wider than that is scaled down. Every text they draw must then be at least 14 pixels."""

import pytest
from matplotlib.text import Text

from minispec.lab.faults.pp_sync import DESIGNS, TIMELINE
from minispec.lab.viz.designs import plot_designs
from minispec.lab.viz.sync_timeline import plot_timeline

COLUMN_PX = 848  # JupyterLab 4 output column at 1280 x 720, file browser open (measured: img clientWidth)
MIN_PX = 14
DPI = 100  # the inline backend's figure.dpi, the notebooks' (PNG pixels = inches x 100)


def texts(fig) -> list[Text]:
    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def smallest_px_on_screen(fig) -> float:
    shrink = min(1.0, COLUMN_PX / (fig.get_figwidth() * DPI))
    return min(t.get_fontsize() * DPI / 72 * shrink for t in texts(fig))


FIGURES = {"timeline": lambda: plot_timeline(TIMELINE, "family"), "designs": lambda: plot_designs(DESIGNS, "who")}


@pytest.mark.parametrize("name", FIGURES)
def test_every_text_is_at_least_14_px_in_the_notebook_column(name):
    assert smallest_px_on_screen(FIGURES[name]()) >= MIN_PX


def test_the_check_fails_on_a_figure_scaled_down():
    fig = plot_timeline(TIMELINE, "family")
    fig.set_figwidth(12.8)  # 1280 px wide, shown at 880: 10.5 points become 10 px
    assert smallest_px_on_screen(fig) < MIN_PX


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
