"""Type a projected room can read: the sizes every figure's text is drawn at, and
the rule that measures them.

The rule: on a 1280×720 screen at 100 % zoom with JupyterLab's file browser open,
a notebook's output area is ``SCREEN_PX`` pixels wide (measured in Chromium with
JupyterLab 4.6: 1280 less the 250-px file browser, the side bar, the prompt column
and padding). JupyterLab shows an image at its natural width when it fits and
scales it down to that width when it does not, so a text of ``p`` points in a
figure ``w`` pixels wide, drawn at ``DPI``, is ``p × DPI / 72 × min(1, SCREEN_PX / w)``
pixels high on screen. Every text must be at least ``MIN_PX`` high. At 125 % and
150 % zoom the output area is wider than ``SCREEN_PX`` in screen pixels only with the
file browser closed (1055 and 1010 px; open, 740 and 632), which is why
docs/workshop.md has the projector close it.

A renderer stays within the rule by being at most ``MAX_WIDTH_IN`` wide and drawing
no text smaller than ``SMALL``. No vLLM twin: vLLM has no pictures.
"""

from __future__ import annotations

from io import BytesIO

from matplotlib.figure import Figure
from matplotlib.text import Text

SCREEN_PX = 848  # the output area's width at 1280×720, 100 % zoom, file browser open
DPI = 100  # matplotlib's default, which the inline backend and the stepper draw at
MIN_PX = 14
MAX_WIDTH_IN = 8.4  # inches: at DPI, shown 1:1 (8.48 would just fit; the tight box adds a margin)
SMALL = 10.5  # points: the least any text gets (14.6 px shown 1:1)
BODY = 11.5  # labels, titles of panels
TITLE = 12.5


def shown_px(points: float, width_px: float, dpi: float = DPI) -> float:
    """Screen height of ``points``-pt type in a figure drawn ``width_px`` wide at ``dpi``."""
    return points * dpi / 72 * min(1.0, SCREEN_PX / width_px)


def drawn_width_px(fig: Figure, dpi: float = DPI) -> float:
    """The width of the PNG the inline backend makes of ``fig`` (its tight box)."""
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    png = buffer.getvalue()
    return int.from_bytes(png[16:20], "big")  # the IHDR chunk: width, then height


def too_small(fig: Figure, dpi: float = DPI) -> list[tuple[str, float]]:
    """(text, screen px) of every visible text in ``fig`` shown under ``MIN_PX`` high."""
    width = drawn_width_px(fig, dpi)  # draws the figure, which makes its tick labels
    ticks = {id(t): _in_view(ax, t, axis) for ax in fig.axes for axis in "xy"
             for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())}
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and ticks.get(id(t), True)]
    small = [(t.get_text(), round(shown_px(t.get_fontsize(), width, dpi), 1)) for t in texts]
    return [(text, px) for text, px in small if px < MIN_PX]


def _in_view(ax, label: Text, axis: str) -> bool:
    """Tick labels exist for ticks outside the view and on hidden axes too; only those
    of a shown axis inside its view are drawn."""
    low, high = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    x, y = label.get_position()
    return ax.axison and low <= (x if axis == "x" else y) <= high


def legible_axes(*axes) -> None:
    """Tick labels at ``SMALL`` and axis labels at ``BODY`` (matplotlib's 10 pt is 13.9 px)."""
    for ax in axes:
        ax.tick_params(labelsize=SMALL)
        ax.xaxis.label.set_fontsize(BODY)
        ax.yaxis.label.set_fontsize(BODY)
