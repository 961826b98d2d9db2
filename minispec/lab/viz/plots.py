"""Matplotlib renderings of trace records: pure functions, ``record -> Figure``.

``plot_stage_rows`` draws one stage's persistent batch at one step as a strip of
token cells per row, coloured by what the cell is: history the model has seen,
tokens it computes now, draft slots that hold the scheduled drafts, and draft
slots that hold something else (stale). ``plot_presets`` compares runs.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from minispec.instruments.trace import StepRecord, Trace

COLORS = {"history": "#d9d9d9", "computed now": "#9ecae1", "draft ok": "#74c476", "draft stale": "#fb6a4a"}
WINDOW = 10  # history cells shown before the first computed position


def cell_roles(row, scheduled_drafts: list[int]) -> list[tuple[int, int, str]]:
    """(position, token, role) for the cells worth drawing in one row."""
    end = row.num_computed_tokens + row.num_scheduled_tokens
    first_draft = end - row.num_drafts
    cells = []
    for pos in range(max(0, row.num_computed_tokens - WINDOW), end):
        token = row.token_ids[pos]
        if pos < row.num_computed_tokens:
            role = "history"
        elif pos < first_draft:
            role = "computed now"
        else:
            ok = pos - first_draft < len(scheduled_drafts) and scheduled_drafts[pos - first_draft] == token
            role = "draft ok" if ok else "draft stale"
        cells.append((pos, token, role))
    return cells


def plot_stage_rows(step: StepRecord, stage: int, decode=str) -> Figure:
    record = next(s for s in step.stages if s.stage == stage)
    fig = Figure(figsize=(9, 0.6 + 0.55 * len(record.rows)))
    ax = fig.subplots()
    for y, row in enumerate(reversed(record.rows)):
        drafts = step.schedule.scheduled_spec_decode_tokens.get(row.req_id, [])
        cells = cell_roles(row, drafts)
        for x, (_pos, token, role) in enumerate(cells):
            ax.add_patch(Rectangle((x, y), 0.95, 0.8, color=COLORS[role]))
            ax.text(x + 0.47, y + 0.4, decode(token), ha="center", va="center", fontsize=9, family="monospace")
        ax.text(-0.3, y + 0.4, f"row {row.row}: {row.req_id} ({row.path})", ha="right", va="center", fontsize=9)
    width = max((len(cell_roles(r, [])) for r in record.rows), default=1)
    ax.set_xlim(-0.2, width)
    ax.set_ylim(-0.2, len(record.rows))
    ax.axis("off")
    ax.set_title(f"step {step.step}, stage {stage}: token_ids_cpu around the gathered positions", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()], loc="upper center",
              bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.25, bottom=0.25)
    return fig


def plot_presets(traces: dict[str, Trace]) -> Figure:
    """Accepted drafts per step, cumulative, one line per preset."""
    fig = Figure(figsize=(7, 3.5))
    ax = fig.subplots()
    for name, trace in traces.items():
        total, xs, ys = 0, [], []
        for step in trace.steps:
            total += sum(step.num_accepted.values())
            xs.append(step.step)
            ys.append(total)
        ax.plot(xs, ys, marker=".", label=f"{name} ({trace.stats.get('target_forwards', len(xs))} forwards)")
    ax.set_xlabel("scheduler step")
    ax.set_ylabel("accepted draft tokens (cumulative)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
