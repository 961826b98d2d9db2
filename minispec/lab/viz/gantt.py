"""The pipeline as a Gantt chart: stages x time, one bar per (batch, stage).

A pure renderer, ``Timeline -> Figure``. Bars are coloured by batch (the
scheduler step that made it) *and* labelled with that step and its requests, with
hatching alternating from batch to batch, so nothing depends on colour alone.
The stage's idle time -- the pipeline's bubbles -- is the hatched grey track
behind the bars, and each stage's idle share of the whole run is in the title. With measured
times (the multi-process executor) the wait to receive a batch is drawn as a
thin line before its bar.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from minispec.instruments.timeline import StageSpan, Timeline
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, MAX_WIDTH_IN, SMALL, legible_axes
from minispec.lab.viz.palette import EDGE, EDGE_LIGHT, FILL_IDLE, SERIES

HATCHES = ["", "//"]
IDLE = FILL_IDLE


def span_label(span: StageSpan, width: float, per_char: float) -> str:
    """As much of "step N · A,B" as fits in a bar ``width`` wide (the requests before the word)."""
    ids = ",".join(span.req_ids)
    for text in (f"step {span.step} · {ids}", f"{span.step} · {ids}", f"step {span.step}", str(span.step)):
        if len(text) * per_char <= width * 0.9:
            return text
    return ""


def plot_gantt(timeline: Timeline, title: str | None = None, highlight: tuple[int, int] | None = None,
               max_step: int | None = None, width: float = MAX_WIDTH_IN) -> Figure:
    """``highlight`` = (step, stage) outlines one bar: the event a stepper is on.
    ``max_step`` draws only the batches of steps up to it; the idle shares in the
    title stay those of the whole run, and the title says so when bars are left out."""
    n = timeline.num_stages
    fig = DescribedFigure(figsize=(width, 1.5 + 0.6 * n))
    ax = fig.subplots()
    spans = _spans(timeline, max_step)
    _draw(ax, timeline, spans, _extent(timeline, spans), width, title, highlight)
    _legend(ax, highlight is not None, any(s.wait for s in spans), -0.45 - 0.2 / n)
    fig.subplots_adjust(left=0.12, right=0.98, top=0.88, bottom=0.45 if n < 3 else 0.36)
    return fig


def plot_gantt_compare(runs: dict[str, tuple[Timeline, int | None]], width: float = MAX_WIDTH_IN) -> Figure:
    """Runs stacked on one time axis, so equal work shows as equal length:
    ``{title: (timeline, max_step)}``, each drawn as ``plot_gantt`` would."""
    heights = [0.9 + 0.6 * tl.num_stages for tl, _ in runs.values()]
    fig = DescribedFigure(figsize=(width, 1.0 + sum(heights)))
    axes = fig.subplots(len(runs), 1, sharex=True, gridspec_kw={"height_ratios": heights})
    axes = list(axes) if len(runs) > 1 else [axes]
    drawn = [(title, tl, _spans(tl, max_step)) for title, (tl, max_step) in runs.items()]
    extent = max(_extent(tl, spans) for _, tl, spans in drawn)
    for ax, (title, tl, spans) in zip(axes, drawn):
        _draw(ax, tl, spans, extent, width, title, None)
    _legend(axes[-1], False, any(s.wait for _, _, spans in drawn for s in spans), -0.6)
    fig.subplots_adjust(left=0.12, right=0.98, top=1 - 0.35 / (1.0 + sum(heights)),
                        bottom=1.3 / (1.0 + sum(heights)), hspace=0.9)
    return fig


def _spans(timeline: Timeline, max_step: int | None) -> list[StageSpan]:
    return [s for s in timeline.spans if max_step is None or s.step <= max_step]


def _scale(timeline: Timeline) -> float:
    return 1e3 if timeline.clock == "seconds" else 1.0  # seconds are drawn in ms


def _origin(spans: list[StageSpan]) -> float:
    """Time zero of a drawing: the first wait or bar."""
    return min((s.start - s.wait for s in spans), default=0.0)


def _extent(timeline: Timeline, spans: list[StageSpan]) -> float:
    return (max((s.end for s in spans), default=1.0) - _origin(spans)) * _scale(timeline) or 1.0


def _draw(ax, timeline: Timeline, spans: list[StageSpan], extent: float, width: float, title: str | None,
          highlight: tuple[int, int] | None) -> None:
    """``extent`` is the axis's length; the idle track ends where this run's bars do."""
    n, scale, origin, own = timeline.num_stages, _scale(timeline), _origin(spans), _extent(timeline, spans)
    per_char = extent * SMALL * 0.62 / (width * 0.86 * 72)  # data units per character (~0.62 em wide)
    for stage in range(n):
        y = n - 1 - stage
        ax.add_patch(Rectangle((0, y + 0.1), own, 0.8, facecolor=IDLE, hatch="..", edgecolor=EDGE_LIGHT,
                               linewidth=0))
    for span in spans:
        y = n - 1 - span.stage
        x, w = (span.start - origin) * scale, (span.end - span.start) * scale
        colour = SERIES[span.step % len(SERIES)]
        ax.add_patch(Rectangle((x, y + 0.1), w, 0.8, facecolor=colour, edgecolor="white", linewidth=1,
                               hatch=HATCHES[span.step % 2]))
        label = span_label(span, w, per_char)
        if label:
            ax.text(x + w / 2, y + 0.5, label, ha="center", va="center", fontsize=SMALL, color="black",
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.8, linewidth=0))
        if span.wait:
            ax.plot([x - span.wait * scale, x], [y + 0.5, y + 0.5], color=EDGE, linewidth=1.2)
        if highlight == (span.step, span.stage):
            ax.add_patch(Rectangle((x, y + 0.05), w, 0.9, fill=False, edgecolor="black", linewidth=2.5))
    ax.set_xlim(0, extent)
    ax.set_ylim(0, n)
    ax.set_yticks([n - 1 - s + 0.5 for s in range(n)], [f"stage {s}" for s in range(n)])
    ax.set_xlabel("time (ms)" if timeline.clock == "seconds" else "pipeline tick (one slot per stage and batch)")
    ax.xaxis.set_tick_params(labelbottom=True)  # shared axes hide all but the last one's
    idle = ", ".join(f"stage {s} idle {timeline.idle_fraction(s):.0%}" for s in range(n))
    if len(spans) < len(timeline.spans):  # a window: its own idle share would differ from the run's
        idle += " (over the whole run)"
    ax.set_title(f"{title + ': ' if title else ''}{idle}", fontsize=BODY)
    legible_axes(ax)


def _legend(ax, highlight: bool, waits: bool, below: float) -> None:
    handles = [Patch(facecolor=SERIES[0], label="a stage working on a batch (label: its step)"),
               Patch(facecolor=IDLE, hatch="..", edgecolor=EDGE_LIGHT, label="idle (bubble)")]
    if highlight:
        handles.append(Patch(fill=False, edgecolor="black", linewidth=2.5, label="current event"))
    if waits:
        handles.append(Patch(facecolor=EDGE, label="waiting to receive"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, below), ncol=2,
              fontsize=SMALL, frameon=False, labelspacing=0.3, columnspacing=1.0)
