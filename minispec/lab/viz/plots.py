"""Matplotlib renderings of trace records: pure functions, ``record -> Figure``.

``plot_stage_rows`` draws the row strip: one stage's persistent batch at one
step, a strip of token cells per row (what each cell is comes from
``strip.py``). Above each cell its position; in its corner a mark (✓ scheduled
draft, ✗ wrong, ≈ right by chance, ↔ a scheduled draft in the wrong slot) and,
faintly, the request that left the token there; under each draft slot the draft the scheduler sent (and under a
history cell that differs from the request's tokens, the right one); a band
under the positions the step gathers. Colours are Okabe-Ito and every role
also has its own hatching or mark.
``plot_step_rows`` stacks every stage, ``plot_strip_diff`` puts two presets
one above the other and outlines the cells that differ, ``plot_acceptance``
compares acceptance per step with (1 - α^(k+1)) / (1 - α) (the counting is
``minispec.lab.experiments.metrics``'s), and
``plot_presets`` compares runs.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from minispec.instruments.trace import StepRecord, Trace
from minispec.lab.experiments.metrics import acceptance_per_step, alpha_estimate, expected_tokens_per_forward
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, MAX_WIDTH_IN, SMALL, legible_axes
from minispec.lab.viz.palette import EDGE, FILL_LIGHT, OKABE_ITO, SERIES, TEXT, TEXT_FAINT
from minispec.lab.viz.strip import ROLES, WINDOW, CellRole, RowView, diff_cells, stage_view

# role -> (face colour, hatch, mark); Okabe-Ito hues, marks and hatches so colour is never alone
STYLE = {
    CellRole.HISTORY: (FILL_LIGHT, "", ""),
    CellRole.COMPUTED_NOW: (OKABE_ITO["sky"], "", ""),
    CellRole.WRONG_HISTORY: (OKABE_ITO["purple"], "xx", "✗"),
    CellRole.DRAFT_OK: (OKABE_ITO["green"], "", "✓"),
    CellRole.DRAFT_STALE: (OKABE_ITO["vermillion"], "///", "✗"),
    CellRole.DRAFT_SHIFTED: (OKABE_ITO["yellow"], "\\\\", "↔"),
    CellRole.DRAFT_BY_CHANCE: (OKABE_ITO["orange"], "..", "≈"),
}
MARKERS = ["o", "s", "^", "D", "v", "P"]
GATHERED = OKABE_ITO["blue"]
SHOWN = {"\n": "⏎", " ": "␣"}
CELL_IN = 0.44  # inches per cell, both ways: a 14-cell strip and its labels fit MAX_WIDTH_IN
LABEL_COLS = 4.6  # cells' worth of room for the row labels on the left
BLOCK = 2.0  # height of one row in cells: position, token cell, scheduled drafts


def fit_label(text: str) -> tuple[str, float]:
    """A token's label and a font size at which it fits in one cell."""
    text = SHOWN.get(text, text)
    if len(text) > 1 and text.startswith("<") and text.endswith(">"):
        text = text[1:-1]  # <unk> -> unk
    if len(text) > 4:
        text = text[:3] + "…"
    return text, {1: 13, 2: 12}.get(len(text), SMALL)  # four SMALL monospace characters fill a cell


def _draw_cell(ax, x: float, y: float, label: str, role: str, outline: bool = False) -> None:
    face, hatch, _mark = STYLE[role]
    ax.add_patch(Rectangle((x, y), 0.92, 0.9, facecolor=face, alpha=0.55 if role != CellRole.HISTORY else 1,
                           hatch=hatch, edgecolor=EDGE, linewidth=0))
    ax.add_patch(Rectangle((x, y), 0.92, 0.9, fill=False, edgecolor="black" if outline else OKABE_ITO["grey"],
                           linewidth=2.6 if outline else 0.6))
    text, size = fit_label(label)
    ax.text(x + 0.46, y + 0.47, text, ha="center", va="center", fontsize=size, family="monospace",
            bbox=dict(boxstyle="square,pad=0.05", facecolor="white", alpha=0.75, linewidth=0) if hatch else None)


def _draw_row(ax, view: RowView, y: float, end: int, ncols: int, decode, differs) -> None:
    """One row's block, its top at ``y`` (axes run downwards); ``end`` right-aligns it."""
    col = {c.pos: ncols - (end - c.pos) for c in view.cells}
    for cell in view.cells:
        x = col[cell.pos]
        ax.text(x + 0.46, y + 0.18, str(cell.pos), ha="center", va="center", fontsize=SMALL, color=TEXT_FAINT)
        _draw_cell(ax, x, y + 0.35, decode(cell.token), cell.role, (view.req_id, cell.pos) in differs)
        mark = STYLE[cell.role][2]
        if mark:
            ax.text(x + 0.9, y + 1.25, mark, ha="right", va="bottom", fontsize=SMALL, fontweight="bold")
        if cell.left_by:
            ax.text(x + 0.04, y + 0.36, cell.left_by, ha="left", va="top", fontsize=SMALL, color=TEXT,
                    style="italic")
    gathered = [col[c.pos] for c in view.cells if c.pos >= view.num_computed]
    if gathered:  # the positions this step feeds the model: computed now and drafts
        ax.plot([min(gathered) + 0.02, max(gathered) + 0.9], [y + 1.32] * 2, color=GATHERED, linewidth=2.2,
                solid_capstyle="butt")
    first = min(col.values(), default=ncols)
    if view.cut:
        ax.text(first - 0.3, y + 0.8, "…", ha="center", va="center", fontsize=11, color=EDGE)
    # under each draft slot the scheduled draft; under a wrong history cell the request's token
    due = [c for c in view.cells if c.role == CellRole.WRONG_HISTORY]
    due += [c for c, _ in zip((c for c in view.cells if c.role.is_draft), view.scheduled)]
    for cell in due:
        text, size = fit_label(decode(cell.expected))
        ax.text(col[cell.pos] + 0.46, y + 1.62, text, ha="center", va="center", fontsize=min(size, BODY),
                family="monospace", color=TEXT)
    if due:
        ax.text(col[due[0].pos] - 0.12, y + 1.62, "should be:" if view.wrong_history else "scheduled:",
                ha="right", va="center", fontsize=SMALL, color=TEXT)
    ax.text(-LABEL_COLS, y + 0.45, view.label, ha="left", va="center", fontsize=BODY)
    if view.prev_req_id:
        ax.text(-LABEL_COLS, y + 0.95, f"row held {view.prev_req_id} before", ha="left", va="center", fontsize=SMALL,
                color=TEXT_FAINT)
    bad = view.stale or view.wrong_history  # "ok, no drafts" is a good row too
    ax.text(-LABEL_COLS, y + 1.4, ("✗ " if bad else "✓ ") + view.status, ha="left", va="center", fontsize=SMALL,
            fontweight="bold" if bad else "normal")


def _draw_stage(ax, views: list[RowView], decode, ncols: int, n_rows: int, title: str,
                ends: dict[str, int] | None = None, differs=frozenset()) -> None:
    for i, view in enumerate(views):
        _draw_row(ax, view, i * BLOCK, (ends or {}).get(view.req_id, view.end), ncols, decode, differs)
    if not views:
        ax.text(ncols / 2, 1, "no rows", ha="center", va="center", fontsize=BODY, color=EDGE)
    ax.set_xlim(-LABEL_COLS - 0.1, ncols + 0.1)
    ax.set_ylim(n_rows * BLOCK, 0)
    ax.axis("off")
    ax.set_title(title, fontsize=BODY, loc="left")


def _legend(fig: Figure, height: float, views: list[RowView], diff_label: str | None = None) -> None:
    # a shifted draft is fault 2's alone: listed only where one is drawn
    shown = {c.role for v in views for c in v.cells}
    handles = [Patch(facecolor=STYLE[r][0], hatch=STYLE[r][1], edgecolor=EDGE, alpha=0.55 if r != CellRole.HISTORY else 1,
                     label=f"{STYLE[r][2] + ' ' if STYLE[r][2] else ''}{text}") for r, text in ROLES.items()
               if r != CellRole.DRAFT_SHIFTED or r in shown]
    handles.append(Line2D([], [], color=GATHERED, linewidth=2.2, label="gathered this step (input_ids)"))
    if diff_label:
        handles.append(Patch(fill=False, edgecolor="black", linewidth=2.6, label=diff_label))
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.72 / height), ncol=2, fontsize=SMALL,
               frameon=False, borderpad=0, handletextpad=0.4, columnspacing=1.0, labelspacing=0.3)
    fig.text(0.5, 0.04 / height, "small number above a cell: its position · …: earlier positions not shown\n"
             "italic letter in a cell: the request that left that token there\n"
             "unk: token 0 (the tokenizer's unknown token), a slot no request has written yet",
             ha="center", va="bottom", fontsize=SMALL, color=TEXT_FAINT)


PANEL_GAP, TOP, BOTTOM = 0.45, 0.1, 2.1  # inches: title room per panel, top margin, legend room


def _figure(ncols: int, n_rows: int, n_panels: int, legend: bool = True) -> tuple[Figure, list]:
    """A figure of fixed size for ``n_panels`` stacked strips of ``n_rows`` rows, and their axes."""
    width = (ncols + LABEL_COLS + 0.4) * CELL_IN
    panel = n_rows * BLOCK * CELL_IN
    height = TOP + n_panels * (PANEL_GAP + panel) + (BOTTOM if legend else TOP)
    fig = DescribedFigure(figsize=(width, height))
    axes = [fig.add_axes((0.01, (height - TOP - (i + 1) * (PANEL_GAP + panel)) / height, 0.98, panel / height))
            for i in range(n_panels)]
    return fig, axes


def _ncols(views: list[RowView], window: int) -> int:
    return max([len(v.cells) for v in views] + [window + 4])


def plot_step_rows(step: StepRecord, decode=str, stages: list[int] | None = None, selected: int | None = None,
                   max_rows: int | None = None, ncols: int | None = None, window: int = WINDOW,
                   name: str | None = None, legend: bool = True) -> Figure:
    """The row strip of every stage (or of ``stages``) at ``step``, one panel each,
    ``selected``'s title marked ▶ and prefixed with ``name`` (e.g. the preset).
    ``max_rows`` and ``ncols`` (cells per row) fix the figure's size whatever the
    step, for steppers. ``legend=False`` leaves out the legend and its small print
    (the projector's stepper: at a legible size they would push it past 720 px)."""
    stages = [s.stage for s in step.stages] if stages is None else stages
    views = {stage: stage_view(step, stage, window) for stage in stages}
    n_rows = max([len(v) for v in views.values()] + [max_rows or 1])
    ncols = max(_ncols([r for v in views.values() for r in v], window), ncols or 0)
    fig, axes = _figure(ncols, n_rows, len(stages), legend)
    for ax, stage in zip(axes, stages):
        last = " (last)" if any(s.stage == stage and s.is_last for s in step.stages) else ""
        marker = "▶ " if stage == selected else ""
        _draw_stage(ax, views[stage], decode, ncols, n_rows,
                    f"{marker}{name + ': ' if name else ''}step {step.step} · stage {stage}{last}: "
                    "token_ids_cpu around the gathered positions")
    if legend:
        _legend(fig, fig.get_figheight(), [r for v in views.values() for r in v])
    return fig


def plot_stage_rows(step: StepRecord, stage: int, decode=str, window: int = WINDOW, name: str | None = None) -> Figure:
    """The row strip of one stage at one step, its title prefixed with ``name``."""
    return plot_step_rows(step, decode, [stage], window=window, name=name)


def plot_strip_diff(steps: dict[str, StepRecord], stage: int, decode=str, window: int = WINDOW) -> Figure:
    """The same step and stage under two runs (e.g. two presets), one strip above
    the other on shared columns; cells whose token differs are outlined."""
    if len(steps) != 2:
        raise ValueError(f"steps: expected two runs to compare, got {len(steps)} ({list(steps)})")
    (name_a, step_a), (name_b, step_b) = steps.items()
    if step_a.step != step_b.step:
        raise ValueError(f"steps: expected the same step in both runs, got {step_a.step} and {step_b.step}")
    views = {name: stage_view(step, stage, window) for name, step in steps.items()}
    differs = diff_cells(views[name_a], views[name_b])
    ends: dict[str, int] = {}
    for view in (r for v in views.values() for r in v):
        ends[view.req_id] = max(ends.get(view.req_id, 0), view.end)
    every = [r for v in views.values() for r in v]
    ncols = max(_ncols(every, window), *(len({c.pos for r in every if r.req_id == q for c in r.cells}) for q in ends))
    n_rows = max(len(v) for v in views.values())
    fig, axes = _figure(ncols, n_rows, 2)
    for ax, name in zip(axes, steps):
        _draw_stage(ax, views[name], decode, ncols, n_rows, f"{name}: step {step_a.step} · stage {stage}",
                    ends, differs)
    axes[0].text(1.0, 1.0, f"{len(differs)} cells differ (outlined)", transform=axes[0].transAxes, ha="right",
                 va="bottom", fontsize=BODY, fontweight="bold")
    _legend(fig, fig.get_figheight(), every, f"differs between {name_a} and {name_b}")
    return fig


FORMULA_STYLES = ["--", ":", "-."]  # with a hollow marker: formula lines differ by more than colour


def plot_acceptance(traces: dict[str, Trace]) -> Figure:
    """Per scheduler step and run (preset, or k): acceptance (accepted / drafted),
    and acceptance length (tokens emitted per verification, 1 + accepted / verifying
    requests) against (1 - α^(k+1)) / (1 - α) at the run's α. The legend's mean is
    over the whole run, (accepted + verifications) / verifications, as vLLM's
    "Mean acceptance length" (v0.9.2 ``vllm/v1/spec_decode/metrics.py``)."""
    fig = DescribedFigure(figsize=(MAX_WIDTH_IN, 5.2))
    ax_rate, ax_tpf = fig.subplots(1, 2)
    for i, (name, trace) in enumerate(traces.items()):
        rows = acceptance_per_step(trace)
        steps = [r[0] for r in rows]
        style = dict(color=SERIES[i % len(SERIES)], marker=MARKERS[i % len(MARKERS)], linewidth=0.8,
                     markersize=4)
        ax_rate.plot(steps, [a / d for _, d, a, _ in rows], label=name, **style)
        verifications = sum(n for *_, n in rows)
        mean = 1 + sum(a for _, _, a, _ in rows) / verifications if verifications else 0.0
        ax_tpf.plot(steps, [1 + a / n for _, _, a, n in rows], label=f"{name}: per step (mean {mean:.2f})",
                    **style)
        alpha, k = alpha_estimate(trace)
        formula = expected_tokens_per_forward(alpha, k)
        # the run's own marker, hollow, every few steps: lines close together stay apart
        ax_tpf.plot(steps, [formula] * len(steps), color=style["color"], marker=style["marker"], markersize=6,
                    markerfacecolor="white", markevery=(i, 4), linestyle=FORMULA_STYLES[i % len(FORMULA_STYLES)],
                    linewidth=1.4, label=f"{name}: formula {formula:.2f} (α={alpha:.2f}, k={k})")
    ax_rate.set_ylim(-0.05, 1.05)
    ax_rate.set_title("acceptance per step", fontsize=BODY)
    ax_rate.set_ylabel("accepted drafts / drafted")
    ax_tpf.set_title(r"acceptance length vs $\frac{1-\alpha^{k+1}}{1-\alpha}$", fontsize=BODY)
    ax_tpf.set_ylabel("tokens emitted per verification")
    ax_tpf.set_ylim(0.8, max(4.2, ax_tpf.get_ylim()[1]))
    for ax in (ax_rate, ax_tpf):
        ax.set_xlabel("scheduler step")
        ax.grid(alpha=0.3)
        legible_axes(ax)
    # one legend under both panels: the runs' colours once, then each run's two lines
    handles, labels = ax_tpf.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=SMALL, loc="lower center", bbox_to_anchor=(0.5, 0.11), ncol=1,
               frameon=False, labelspacing=0.25)
    fig.text(0.5, 0.005, "verification: one request's forward that checks drafts.\nα: chance a draft is accepted "
             "when the ones before it were\n(accepted / (accepted + rejections)), over the whole run",
             ha="center", fontsize=SMALL, color=TEXT_FAINT)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.93, bottom=0.48, wspace=0.35)
    return fig


def plot_presets(traces: dict[str, Trace]) -> Figure:
    """Accepted drafts per step, cumulative, one line per preset."""
    fig = DescribedFigure(figsize=(7, 4))
    ax = fig.subplots()
    for i, (name, trace) in enumerate(traces.items()):
        total, xs, ys = 0, [], []
        for step in trace.steps:
            total += sum(step.num_accepted.values())
            xs.append(step.step)
            ys.append(total)
        ax.plot(xs, ys, color=SERIES[i % len(SERIES)], marker=MARKERS[i % len(MARKERS)], markersize=4,
                label=f"{name} ({trace.stats.get('target_forwards', len(xs))} forwards)")
    ax.set_xlabel("scheduler step")
    ax.set_ylabel("accepted draft tokens (cumulative)")
    ax.legend(fontsize=SMALL)
    legible_axes(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
