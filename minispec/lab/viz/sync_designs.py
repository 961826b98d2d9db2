"""Three designs of the pipeline's hand-over side by side: a pure renderer,
``minispec.lab.faults.pp_sync.Design`` -> Figure or Table.

``plot_designs`` draws one panel per design: the scheduler above, three stages
below (the last one hatched: it samples and drafts), and one numbered arrow per
message sent after a step, listed under the panel. A solid arrow carries token
values, a dashed one counts only, so nothing depends on colour. ``designs_table``
is the same comparison as a table.

No vLLM twin.
"""

from __future__ import annotations

import textwrap

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from minispec.lab.faults.pp_sync import STAGES, Design
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.palette import EDGE, FILL_LIGHT, OKABE_ITO, PALE_BLUE, TEXT, WHITE
from minispec.lab.viz.table import Table

# Inches at 100 dpi: 880 x 720 pixels, shown at 848 (legible.SCREEN_PX) in JupyterLab at
# 1280 x 720 with the file browser open; type of 10.5 points is then 14.05 pixels.
WIDTH, HEIGHT = 8.8, 7.2
FONT, TITLE_FONT = 10.5, 12
BOX_W, BOX_H = 0.2, 0.09  # a stage's box; its name goes on two lines, so arrows fit between boxes
SCHEDULER_W = 0.34
POSITIONS = {"scheduler": (0.5, 0.94), STAGES[0]: (0.13, 0.75), STAGES[1]: (0.5, 0.75), STAGES[2]: (0.87, 0.75)}
VALUES, COUNTS = OKABE_ITO["blue"], OKABE_ITO["vermillion"]
WRAP = 33  # characters per line of a panel's message list (a third of the width at FONT)


def _box(ax, name: str) -> None:
    x, y = POSITIONS[name]
    last = name == STAGES[-1]
    w, h = (SCHEDULER_W, BOX_H * 0.7) if name == "scheduler" else (BOX_W, BOX_H)
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.01",
                                facecolor=PALE_BLUE if last else (FILL_LIGHT if name != "scheduler" else WHITE),
                                edgecolor=EDGE, hatch="//" if last else None, linewidth=1.2))
    ax.text(x, y, name.replace(" ", "\n"), ha="center", va="center", fontsize=FONT, color=TEXT, linespacing=1.0,
            bbox=dict(facecolor=WHITE, edgecolor="none", pad=1) if last else None)


def _bend(sender: str, receiver: str) -> float:
    """Stages two apart are joined by an arc below the middle one."""
    if sender in STAGES and receiver in STAGES and abs(STAGES.index(sender) - STAGES.index(receiver)) > 1:
        return -0.45  # negative: the arc bulges below a right-to-left arrow
    return 0.0


def _arrow(ax, number: int, message, count: int) -> None:
    (x0, y0), (x1, y1) = POSITIONS[message.sender], POSITIONS[message.receiver]
    shift = 0.03 * count  # a second message between the same two parties sits beside the first
    h0 = BOX_H * (0.7 if message.sender == "scheduler" else 1)
    h1 = BOX_H * (0.7 if message.receiver == "scheduler" else 1)
    start = (x0 + shift, y0 - (h0 / 2 if y0 > y1 else 0))
    end = (x1 + shift, y1 + (h1 / 2 if y0 > y1 else 0))
    if y0 < y1:
        start, end = (x0 + shift, y0 + h0 / 2), (x1 + shift, y1 - h1 / 2)
    rad = _bend(message.sender, message.receiver)
    if y0 == y1:
        side = BOX_W / 2 if x1 > x0 else -BOX_W / 2
        start, end = (x0 + side, y0), (x1 - side, y1)
        if rad:
            start, end = (x0, y0 - BOX_H / 2), (x1, y1 - BOX_H / 2)
    colour = VALUES if message.values else COUNTS
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, linewidth=1.8, color=colour,
                                 linestyle="-" if message.values else "--", connectionstyle=f"arc3,rad={rad}"))
    mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2 - (0.07 if rad else 0)
    ax.text(mx, my, str(number), ha="center", va="center", fontsize=FONT, color=TEXT,
            bbox=dict(boxstyle="circle,pad=0.2", facecolor=WHITE, edgecolor=colour))


def message_lines(design: Design) -> list[str]:
    """The numbered list under a panel, wrapped."""
    lines = []
    for i, m in enumerate(design.messages, 1):
        text = f"{i}. {m.sender} → {m.receiver}: {m.what}"
        lines.extend(textwrap.wrap(text, WRAP, subsequent_indent="    "))
    lines.extend(textwrap.wrap(f"Then each non-last stage {design.rebuild}.", WRAP))
    return lines


def _panel(ax, design: Design) -> None:
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(f"{design.name}\n({design.ref.label})", fontsize=FONT, color=TEXT)
    for name in POSITIONS:
        _box(ax, name)
    pairs: dict[frozenset, int] = {}
    for number, message in enumerate(design.messages, 1):
        pair = frozenset((message.sender, message.receiver))
        _arrow(ax, number, message, pairs.get(pair, 0))
        pairs[pair] = pairs.get(pair, 0) + 1
    ax.text(0.0, 0.6, "\n".join(message_lines(design)), ha="left", va="top", fontsize=FONT, color=TEXT,
            linespacing=1.25)


def plot_designs(designs: tuple[Design, ...] | list[Design], title: str) -> Figure:
    if not designs:
        raise ValueError("plot_designs: expected at least one design, got none")
    unknown = {p for d in designs for m in d.messages for p in (m.sender, m.receiver)} - set(POSITIONS)
    if unknown:
        raise ValueError(f"plot_designs: unknown parties {sorted(unknown)}; expected some of {list(POSITIONS)}")
    fig = DescribedFigure(figsize=(WIDTH, HEIGHT))
    axes = fig.subplots(1, len(designs))
    axes = list(axes) if len(designs) > 1 else [axes]
    for ax, design in zip(axes, designs):
        _panel(ax, design)
    fig.suptitle(title, fontsize=TITLE_FONT, color=TEXT)
    handles = [Line2D([], [], color=VALUES, linewidth=1.8, label="carries token values"),
               Line2D([], [], color=COUNTS, linewidth=1.8, linestyle="--", label="carries counts only"),
               Patch(facecolor=PALE_BLUE, edgecolor=EDGE, hatch="//", label="samples, verifies, drafts")]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.965), ncol=3, fontsize=FONT, frameon=False,
               columnspacing=1.0, handlelength=1.6)
    fig.subplots_adjust(left=0.01, right=0.99, top=0.86, bottom=0.0, wspace=0.06)
    return fig


def designs_table(designs: tuple[Design, ...] | list[Design]) -> Table:
    """One column per design: who drafts, where a stage keeps its state, who tells it what, what it does."""

    def told(d: Design) -> str:
        return "; ".join(f"{m.sender} → {m.receiver}: {m.what}" for m in d.messages if m.receiver != "scheduler")

    header = ("",) + tuple(f"{d.name} ([{d.ref.label}]({d.ref.url}))" for d in designs)
    rows = tuple((label,) + tuple(value(d) for d in designs) for label, value in (
        ("drafts made on", lambda d: d.drafts_on), ("a non-last stage keeps", lambda d: d.state),
        ("after each step it is told", told), ("and then it", lambda d: d.rebuild)))
    return Table(header, rows)
