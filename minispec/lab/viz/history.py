"""One request's token history at one step, position by position, on every stage.

The scheduler's ``all_token_ids`` followed by the drafts it scheduled is what
every stage's ``token_ids_cpu`` row should hold; each stage's row is drawn under
it, aligned by position, with every cell that differs marked. This is how fault
2 shows: stage 0's row misses the drafts accepted the step before, so from there
on it is shifted against the scheduler's and the last stage's.

Pure functions: ``history_strips`` reads a ``StepRecord``; ``render_history``
returns text (for nbval-checked cells), ``plot_history`` a ``Figure``.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from minispec.instruments.trace import StepRecord
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, MAX_WIDTH_IN, SMALL
from minispec.lab.viz.palette import EDGE_SOFT, OKABE_ITO, PALE_BLUE, TEXT, WHITE

WINDOW = 16  # positions shown, ending with the last gathered one

# Okabe-Ito, with marks and hatching so colour is never the only cue.
AGREES = PALE_BLUE
DIFFERS = OKABE_ITO["orange"]
NEVER_WRITTEN = WHITE


@dataclass(frozen=True)
class HistoryCell:
    position: int
    token: int | None  # None: past the end of what the record holds
    expected: int | None  # the scheduler's token here: history, then scheduled drafts
    gathered: bool  # this step's input_ids read this position
    draft: bool  # a position the scheduler filled with a draft

    @property
    def differs(self) -> bool:
        return self.token != self.expected


@dataclass(frozen=True)
class HistoryStrip:
    label: str
    cells: list[HistoryCell]
    num_computed_tokens: int
    num_tokens_no_spec: int  # the scheduler's: len(all_token_ids)


def history_strips(step: StepRecord, req_id: str, first: int | None = None,
                   window: int = WINDOW) -> list[HistoryStrip]:
    """The scheduler's strip, then one per stage holding ``req_id`` at this step.
    Positions ``first .. first + window - 1``; by default the window ends with the
    last gathered position."""
    s = step.schedule
    if req_id not in s.num_scheduled_tokens:
        raise ValueError(f"req_id={req_id!r}: expected a request scheduled at step {s.step} "
                         f"({sorted(s.num_scheduled_tokens)})")
    drafts = s.scheduled_spec_decode_tokens.get(req_id, [])
    expected = s.all_token_ids[req_id] + drafts
    start, end = s.num_computed_tokens[req_id], s.num_computed_tokens[req_id] + s.num_scheduled_tokens[req_id]
    if first is None:
        first = max(0, end - window)
    positions = range(first, first + window)

    def cells(tokens, gather_start, gather_end, num_drafts):
        return [HistoryCell(p, tokens[p] if p < len(tokens) else None,
                            expected[p] if p < len(expected) else None,
                            gather_start <= p < gather_end, gather_end - num_drafts <= p < gather_end)
                for p in positions]

    strips = [HistoryStrip("scheduler", cells(expected, start, end, len(drafts)), start, len(s.all_token_ids[req_id]))]
    for stage in step.stages:
        row = next((r for r in stage.rows if r.req_id == req_id), None)
        if row is None:
            continue
        row_end = row.num_computed_tokens + row.num_scheduled_tokens
        label = f"stage {stage.stage}{' (last)' if stage.is_last else ''}, {row.path}"
        strips.append(HistoryStrip(label, cells(row.token_ids, row.num_computed_tokens, row_end, row.num_drafts),
                                   row.num_computed_tokens, row.num_tokens_no_spec))
    return strips


def _label(token: int | None, decode) -> str:
    """One character per cell: '·' past the row's end, '?' for a token whose label is not one character."""
    if token is None:
        return "·"
    text = decode(token)
    return text if len(text) == 1 else "?"


def render_history(step: StepRecord, req_id: str, decode=str, first: int | None = None,
                   window: int = WINDOW) -> str:
    """Text version: one character per position, ``^`` under every cell that
    differs from the scheduler's, ``=`` under the gathered history and ``d``
    under the gathered draft slots."""
    strips = history_strips(step, req_id, first, window)
    positions = [c.position for c in strips[0].cells]
    width = max(len(s.label) for s in strips) + 2
    lines = [f"step {step.step}, request {req_id}: positions {positions[0]}..{positions[-1]}",
             " " * width + "".join(str(p // 10 % 10) for p in positions),
             " " * width + "".join(str(p % 10) for p in positions)]
    for strip in strips:
        tokens = "".join(_label(c.token, decode) for c in strip.cells)
        if strip.label == "scheduler":
            counts = f"computed={strip.num_computed_tokens} all_token_ids={strip.num_tokens_no_spec}"
            marks = "".join("d" if c.draft else "=" if c.gathered else " " for c in strip.cells)
        else:
            counts = f"computed={strip.num_computed_tokens} no_spec={strip.num_tokens_no_spec}"
            marks = "".join("^" if c.differs else " " for c in strip.cells)
        lines.append(f"{strip.label:<{width}}{tokens}  {counts}")
        if marks.strip():
            lines.append(" " * width + marks)
    return "\n".join(line.rstrip() for line in lines)


def plot_history(step: StepRecord, req_id: str, decode=str, first: int | None = None,
                 window: int = WINDOW, title: str | None = None) -> Figure:
    """Figure version: a row of cells per strip, aligned by position. Cells that
    differ from the scheduler's token are orange, hatched and marked ✗; the
    gathered positions are outlined, drafts with a dashed line; ▼ marks each
    row's ``num_tokens_no_spec`` (where its own history ends)."""
    strips = history_strips(step, req_id, first, window)
    n = len(strips)
    height = 2.2 + 0.8 * n
    fig = DescribedFigure(figsize=(MAX_WIDTH_IN, height))
    ax = fig.subplots()
    for i, strip in enumerate(strips):
        y = n - 1 - i
        for x, c in enumerate(strip.cells):
            face = NEVER_WRITTEN if c.token is None else DIFFERS if c.differs else AGREES
            ax.add_patch(Rectangle((x + 0.04, y + 0.1), 0.92, 0.7, facecolor=face, edgecolor=EDGE_SOFT,
                                   linewidth=0.5, hatch="///" if c.differs and c.token is not None else None))
            box = dict(boxstyle="square,pad=0.1", facecolor="white", linewidth=0) if c.differs else None
            ax.text(x + 0.5, y + 0.5, _label(c.token, decode), ha="center", va="center", fontsize=BODY,
                    family="monospace", bbox=box)
            if c.differs and strip.label != "scheduler":
                ax.text(x + 0.5, y + 0.02, "✗", ha="center", va="center", fontsize=SMALL, color="black")
            if c.gathered:
                ax.add_patch(Rectangle((x + 0.04, y + 0.1), 0.92, 0.7, fill=False, edgecolor="black",
                                       linewidth=1.8, linestyle="--" if c.draft else "-"))
        no_spec = strip.num_tokens_no_spec - strip.cells[0].position
        if 0 <= no_spec <= window:
            ax.plot([no_spec], [y + 0.92], marker="v", color="black", markersize=6)
        counts = (f"computed={strip.num_computed_tokens}  "
                  + ("all_token_ids" if strip.label == "scheduler" else "no_spec") + f"={strip.num_tokens_no_spec}")
        ax.text(-0.3, y + 0.55, strip.label, ha="right", va="center", fontsize=BODY)
        ax.text(-0.3, y + 0.2, counts, ha="right", va="center", fontsize=SMALL, color=TEXT)
    ax.set_xticks([x + 0.5 for x in range(window)], [str(c.position) for c in strips[0].cells], fontsize=SMALL)
    ax.xaxis.tick_top()
    ax.set_xlabel("position in the request (token_ids_cpu column)", fontsize=SMALL)
    ax.xaxis.set_label_position("top")
    ax.tick_params(axis="x", length=0)
    ax.set_yticks([])
    for side in ("left", "right", "bottom", "top"):
        ax.spines[side].set_visible(False)
    ax.set_xlim(-0.02, window + 0.02)
    ax.set_ylim(-0.1, n)
    ax.set_title(title or f"step {step.step}, request {req_id}: the scheduler's tokens and each stage's row",
                 fontsize=BODY, pad=28)
    handles = [
        Patch(facecolor=AGREES, edgecolor=EDGE_SOFT, label="agrees with the scheduler"),
        Patch(facecolor=DIFFERS, edgecolor=EDGE_SOFT, hatch="///", label="differs ✗"),
        Patch(facecolor=NEVER_WRITTEN, edgecolor=EDGE_SOFT, label="· past the row's end"),
        Patch(fill=False, edgecolor="black", linewidth=1.8, label="gathered: history"),
        Patch(fill=False, edgecolor="black", linewidth=1.8, linestyle="--", label="gathered: draft slot"),
        Line2D([], [], marker="v", color="black", linestyle="none", label="end of the row's history (no_spec)"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.25, 0.0), ncol=2, fontsize=SMALL, frameon=False,
              labelspacing=0.3, columnspacing=1.0)
    fig.subplots_adjust(left=0.36, right=0.99, top=1 - 0.95 / height, bottom=1.2 / height)
    return fig
