"""Where EAGLE-3's taps live when the target is cut into stages, and what dropping them costs:
pure renderers over ``minispec.lab.experiments.beyond_tokens``' records.

``plot_tap_stages(layouts, title)``: one panel per pipeline size. Each layer is a box marked
with the stage that runs it (hatching and the words "stage s"; colour only repeats them). Each
tap is an arrow into the boundary before its layer, labelled with the stage that captures it:
a solid arrow when the last stage (where the drafter lives) captures it itself, a dashed one
when it must travel from an earlier stage. ``render_taps_acceptance(rows)``: acceptance with
the taps carried and dropped, per pipeline size, as a table.

No vLLM twin.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Patch

from minispec.lab.experiments.beyond_tokens import TapLayout, TapsAcceptance
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, SMALL, TITLE
from minispec.lab.viz.palette import EDGE, OKABE_ITO, SERIES, TEXT, WHITE

WIDTH, PANEL_HEIGHT = 8.4, 1.1  # inches at 100 dpi: four panels and the legend fit one screen at 1280 x 720
HATCHES = ("", "//", "..", "xx", "\\\\", "++")
OWN, CARRIED = OKABE_ITO["blue"], OKABE_ITO["vermillion"]
BOX_W, BOX_H = 0.84, 0.66


def _stage_fill(stage: int) -> str:
    return SERIES[(stage + 4) % len(SERIES)] + "55"  # a light tint: the words on it stay legible


def _verdict(layout: TapLayout) -> str:
    own = len(layout.tap_stages) - len(layout.carried)
    if not layout.carried:
        return f"PP = {layout.pp}: the last stage computes all {own} taps itself"
    sources = sorted({layout.tap_stages[t] for t in layout.carried})
    return (f"PP = {layout.pp}: the last stage computes {own} of {len(layout.tap_stages)} taps; "
            f"{len(layout.carried)} travel from stage{'s' * (len(sources) > 1)} {', '.join(map(str, sources))}")


def _panel(ax, layout: TapLayout) -> None:
    n = len(layout.layer_stages)
    for layer, stage in enumerate(layout.layer_stages):
        ax.add_patch(FancyBboxPatch((layer - BOX_W / 2, -BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02",
                                    facecolor=_stage_fill(stage), edgecolor=EDGE, hatch=HATCHES[stage % len(HATCHES)]))
        ax.text(layer, 0, f"layer {layer}\nstage {stage}", ha="center", va="center", fontsize=SMALL, color=TEXT,
                bbox=dict(facecolor=WHITE, edgecolor="none", alpha=0.8, pad=1))
    head = n + 0.35
    ax.add_patch(FancyBboxPatch((head - 0.5, -BOX_H / 2), 1.2, BOX_H, boxstyle="round,pad=0.02", facecolor=WHITE,
                                edgecolor=EDGE, linestyle="-"))
    ax.text(head + 0.1, 0, f"drafter\n(stage {layout.pp - 1})", ha="center", va="center", fontsize=SMALL, color=TEXT)
    for tap, stage in layout.tap_stages.items():
        own = stage == layout.pp - 1
        x = tap - 0.5
        ax.annotate("", (x, BOX_H / 2 - 0.02), (x, BOX_H / 2 + 0.36),
                    arrowprops=dict(arrowstyle="-|>", linewidth=2, mutation_scale=12, color=OWN if own else CARRIED,
                                    linestyle="-" if own else "--"))
        ax.text(x, BOX_H / 2 + 0.42, f"tap {tap}: stage {stage}" + ("" if own else " →"), ha="center", va="bottom",
                fontsize=SMALL, color=TEXT)
    ax.set_xlim(-0.6, head + 0.8)
    ax.set_ylim(-BOX_H / 2 - 0.05, BOX_H / 2 + 0.75)
    ax.axis("off")
    ax.set_title(_verdict(layout), fontsize=BODY, color=TEXT, loc="left")


def plot_tap_stages(layouts: list[TapLayout], title: str) -> Figure:
    """One panel per layout (a pipeline size), in the order given."""
    if not layouts or len({len(lay.layer_stages) for lay in layouts}) != 1:
        raise ValueError("plot_tap_stages: expected at least one layout, all of one model (the same layers)")
    fig = DescribedFigure(figsize=(WIDTH, PANEL_HEIGHT * len(layouts) + 1.05))
    axes = fig.subplots(len(layouts), 1, squeeze=False)[:, 0]
    for ax, layout in zip(axes, layouts):
        _panel(ax, layout)
    stages = max(layout.pp for layout in layouts)
    handles = [Patch(facecolor=_stage_fill(s), edgecolor=EDGE, hatch=HATCHES[s % len(HATCHES)], label=f"stage {s}")
               for s in range(stages)]
    handles += [Line2D([], [], color=OWN, linewidth=2, label="tap the last stage captures"),
                Line2D([], [], color=CARRIED, linewidth=2, linestyle="--", label="tap captured earlier: it must travel")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=SMALL, frameon=False)
    fig.suptitle(title, fontsize=TITLE, color=TEXT)
    fig.subplots_adjust(left=0.02, right=0.98, top=1 - 0.66 / fig.get_figheight(), bottom=0.62 / fig.get_figheight(),
                        hspace=0.5)
    return fig


def render_taps_acceptance(rows: list[TapsAcceptance]) -> str:
    """Acceptance per pipeline size, taps carried against dropped, and whether output changed."""
    lines = [f"{'PP':>2}  {'taps carried':>12}  {'taps dropped':>12}  output"]
    for r in rows:
        same = "the same" if r.same_output else "different"
        lines.append(f"{r.pp:>2}  {r.carried:>12.1%}  {r.dropped:>12.1%}  {same}")
    return "\n".join(lines)
