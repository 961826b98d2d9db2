"""The family of faults as a timeline: a pure renderer, milestones -> Figure or Table.

``plot_timeline`` puts each milestone (``minispec.lab.faults.pp_sync.Milestone``) in its lane
(the runner or project), in order of date: the axis is the order, labelled with each
month, not a scale. The marker's shape says what it was (a square: a design built; a
triangle: a fault found) and its fill says whether the change was merged (filled) or
is still open (hollow), and every marker is labelled with its reference, so nothing
depends on colour. ``timeline_table`` is the same list as a table whose references
link to their GitHub threads.

No vLLM twin.
"""

from __future__ import annotations

import textwrap

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from minispec.lab.faults.pp_sync import Kind, Lane, Milestone, State
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.palette import EDGE, EDGE_LIGHT, SERIES, TEXT, WHITE
from minispec.lab.viz.table import Table

MARKERS = {Kind.DESIGN: "s", Kind.FAULT: "^"}
SIZE = 11
# Inches at 100 dpi: 880 x 540 pixels, shown at 848 (legible.SCREEN_PX) in JupyterLab at
# 1280 x 720 with the file browser open; type of 10.5 points is then 14.05 pixels.
WIDTH, HEIGHT = 8.8, 5.4
FONT, TITLE_FONT = 10.5, 12


def month(m: Milestone) -> str:
    return m.when.strftime("%b %Y")


def refs_label(m: Milestone) -> str:
    return "\n".join(r.label for r in m.refs)  # one a line: a label stays as narrow as a marker's room


def _style(kind: Kind, state: State, colour: str) -> dict:
    face = colour if state is State.MERGED else WHITE
    return dict(marker=MARKERS[kind], markersize=SIZE, markerfacecolor=face, markeredgecolor=colour,
                markeredgewidth=2, linestyle="none")


def plot_timeline(milestones: tuple[Milestone, ...] | list[Milestone], title: str) -> Figure:
    if not milestones:
        raise ValueError("plot_timeline: expected at least one milestone, got none")
    ordered = sorted(milestones, key=lambda m: m.when)
    lanes = [lane for lane in Lane if any(m.lane is lane for m in ordered)]
    y = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    colour = {lane: SERIES[i % len(SERIES)] for i, lane in enumerate(Lane)}
    fig = DescribedFigure(figsize=(WIDTH, HEIGHT))
    ax = fig.subplots()
    for lane in lanes:
        ax.axhline(y[lane], color=EDGE_LIGHT, linewidth=1, zorder=0)
    for x, m in enumerate(ordered):
        ax.plot([x], [y[m.lane]], **_style(m.kind, m.state, colour[m.lane]))
        # labels alternate above and below their marker, so neighbours in a lane stay apart
        above = x % 2 == 0
        ax.annotate(refs_label(m), (x, y[m.lane]), xytext=(0, 10 if above else -10), textcoords="offset points",
                    ha="center", va="bottom" if above else "top", fontsize=FONT, color=TEXT)
    ax.set_xticks(range(len(ordered)), [month(m) for m in ordered], rotation=40, ha="right", fontsize=FONT)
    ax.set_yticks([y[lane] for lane in lanes], [textwrap.fill(lane.value, 12) for lane in lanes], fontsize=FONT)
    ax.set_xlim(-0.7, len(ordered) - 0.3)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlabel("in order of date (not to scale)", color=TEXT, fontsize=FONT)
    ax.set_title(title, fontsize=TITLE_FONT, color=TEXT, pad=44)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    seen = sorted({(m.kind, m.state) for m in ordered}, key=lambda ks: (list(Kind).index(ks[0]), list(State).index(ks[1])))
    handles = [Line2D([], [], **_style(kind, state, EDGE), label=f"{kind.value} ({state.value})") for kind, state in seen]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.45, 1.0), ncol=2, fontsize=FONT, frameon=False,
              borderaxespad=0.2, columnspacing=1.2)
    fig.subplots_adjust(left=0.14, right=0.98, top=0.8, bottom=0.18)
    return fig


def timeline_table(milestones: tuple[Milestone, ...] | list[Milestone]) -> Table:
    """One row per milestone in order of date, each reference a link."""
    rows = tuple((month(m), m.lane.value, m.what, ", ".join(f"[{r.label}]({r.url})" for r in m.refs), m.state.value)
                 for m in sorted(milestones, key=lambda m: m.when))
    return Table(("when", "where", "what", "reference", "state"), rows)
