"""Which batch's rows each relayed payload is applied to, one panel per pipeline depth: a
pure renderer, ``{pp_size: pairings} -> Figure`` (the data: ``minispec.lab.faults.relay_pairing``).

In each panel the bottom row is the batches a non-last stage ran, each in its micro-batch
slot, and the top row the payloads that come back around the ring, one per batch. An
arrow goes from each payload to the rows it is applied to: straight down and solid when
they are its own batch's (✓), slanted and dashed when another batch's (✗). Marks, line
style and words say it; colour only repeats it.

No vLLM twin.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch

from minispec.lab.faults.relay_pairing import Paired
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, SMALL, TITLE
from minispec.lab.viz.palette import EDGE, FILL_LIGHT, OKABE_ITO, TEXT, WHITE

WIDTH, PANEL_HEIGHT = 8.4, 2.3  # inches at 100 dpi: about 830 x 550 px, shown 1:1 at 1280 x 720
BOX_W, BOX_H = 0.86, 0.56
RIGHT, WRONG = OKABE_ITO["blue"], OKABE_ITO["vermillion"]


def _box(ax, x: float, y: float, text: str, fill: str) -> None:
    ax.add_patch(FancyBboxPatch((x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02",
                                facecolor=fill, edgecolor=EDGE, linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=SMALL, color=TEXT)


def _verdict(pairs: tuple[Paired, ...]) -> str:
    wrong = [p for p in pairs if not p.right]
    if not wrong:
        return "every payload meets its own batch: the fault is masked"
    shift = {p.applied_batch - p.batch for p in wrong if p.applied_batch is not None}
    return (f"batch c's payload lands on batch c + {shift.pop()}'s rows" if len(shift) == 1
            else f"{len(wrong)} of {len(pairs)} payloads land on another batch's rows")


def _panel(ax, pp_size: int, pairs: tuple[Paired, ...], width: int) -> None:
    for c in range(width):
        _box(ax, c, 0, f"batch {c}\nslot {c % pp_size}", FILL_LIGHT)
    for p in pairs:
        _box(ax, p.batch, 1, f"payload of {p.batch}\nto slot {p.applied_slot}", WHITE)
        if p.applied_batch is None:
            continue
        style = dict(color=RIGHT, linestyle="-") if p.right else dict(color=WRONG, linestyle="--")
        ax.annotate("", (p.applied_batch, BOX_H / 2), (p.batch, 1 - BOX_H / 2),
                    arrowprops=dict(arrowstyle="-|>", linewidth=2, mutation_scale=14, **style))
        mid = ((p.batch + p.applied_batch) / 2 + 0.18, 0.5)
        ax.text(*mid, "✓" if p.right else "✗", ha="left", va="center", fontsize=BODY, color=style["color"])
    ax.set_xlim(-0.55, width - 0.45)
    ax.set_ylim(-0.4, 1.4)
    ax.axis("off")
    ax.set_title(f"PP = {pp_size}: {_verdict(pairs)}", fontsize=BODY, color=TEXT, loc="left")


def plot_pairing(panels: dict[int, tuple[Paired, ...]], title: str) -> Figure:
    """One panel per ``pp_size`` (in its order), each with that depth's payloads."""
    if not panels or not all(panels.values()):
        raise ValueError("plot_pairing: expected at least one pipeline depth, each with at least one payload")
    width = max(max(p.batch, p.applied_batch or 0) for pairs in panels.values() for p in pairs) + 1
    fig = DescribedFigure(figsize=(WIDTH, PANEL_HEIGHT * len(panels) + 0.9))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (pp_size, pairs) in zip(axes, panels.items()):
        _panel(ax, pp_size, pairs, width)
    handles = [Line2D([], [], color=RIGHT, linewidth=2, label="✓ applied to its own batch's rows"),
               Line2D([], [], color=WRONG, linewidth=2, linestyle="--", label="✗ applied to another batch's rows")]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=SMALL, frameon=False)
    fig.suptitle(title, fontsize=TITLE, color=TEXT)
    fig.subplots_adjust(left=0.02, right=0.98, top=0.86, bottom=0.1, hspace=0.35)
    return fig
