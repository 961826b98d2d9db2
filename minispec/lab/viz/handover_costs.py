"""The designs' hand-over costs, measured (``minispec.lab.experiments.handover``), as one
table and one figure: pure renderers of ``DesignCost`` values.

``handover_table``: one row per design: messages per step, bytes per step on each channel,
who waits on whom, the "mp" step time and the batch queue's overlap, and the one invariant
the design must get right. ``plot_handover``: two panels, messages per step and bytes per
step, one bar per design, stacked by channel; each channel has its own hatch as well as its
colour, named in the legend below, so nothing depends on colour. Sized by
``minispec.lab.viz.legible``'s rule for a projected 1280×720 screen.

No vLLM twin.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, MAX_WIDTH_IN, SMALL, TITLE, legible_axes
from minispec.lab.viz.palette import EDGE, OKABE_ITO, TEXT
from minispec.lab.viz.table import Table

WIDTH, HEIGHT = MAX_WIDTH_IN, 5.2  # inches at 100 dpi
COLOURS = [OKABE_ITO[c] for c in ("blue", "vermillion", "green", "orange", "purple")]
HATCHES = ["", "//", "..", "xx", "\\\\"]  # a second cue beside the colour (five channels at PP 3)


def _check(costs) -> None:
    if not costs:
        raise ValueError("expected at least one DesignCost, got none")


def _measured(value: float | None, form: str) -> str:
    return "not measured" if value is None else form.format(value)


def handover_table(costs, load: float | None = None) -> Table:
    """One row per ``DesignCost``; ``load``: the machine's load the "mp" times were measured at,
    said in the step-time column's header (else the first cost's own)."""
    _check(costs)
    load = next((c.load for c in costs if c.load is not None), None) if load is None else load
    step = "step time over \"mp\", 2 in flight" + (f" (load {load:.1f})" if load is not None else "")
    header = ("design", "messages per step", "bytes per step, per channel", "who waits on whom", step,
              "batch-queue overlap (1 in flight / 2)", "must get right")
    rows = []
    for c in costs:
        channels = "; ".join(f"{ch}: {c.bytes_per_step(ch):.0f}" for ch in sorted(c.nbytes)) or "none"
        rows.append((f"`{c.design}`", f"{c.messages_per_step:.2f}", channels, "; ".join(c.waits) or "nobody",
                     _measured(c.step_ms, "{:.1f} ms"), _measured(c.overlap, "{:.2f}x"),
                     _must(c.must)))
    return Table(header, tuple(rows))


def _must(must) -> str:
    """A design's record may name no rule (``Design.must_keep``): said so, not guessed."""
    if must is None:
        return "not stated by its record"
    invariant, why = must
    return f"invariant {int(invariant)} ({invariant.title}): {why}"


def _stacked(ax, costs, per_step, ylabel: str) -> None:
    channels = sorted({ch for c in costs for ch in c.messages})
    x = range(len(costs))
    bottom = [0.0] * len(costs)
    for i, ch in enumerate(channels):
        heights = [per_step(c, ch) for c in costs]
        ax.bar(x, heights, bottom=bottom, color=COLOURS[i % len(COLOURS)], hatch=HATCHES[i % len(HATCHES)],
               edgecolor=EDGE, label=ch)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(list(x), [str(c.design) for c in costs])
    ax.set_ylabel(ylabel)
    ax.set_xlabel("design")


def plot_handover(costs, title: str) -> Figure:
    """Messages and bytes per engine step, per design, stacked by channel."""
    _check(costs)
    fig = DescribedFigure(figsize=(WIDTH, HEIGHT))
    messages, nbytes = fig.subplots(1, 2)
    _stacked(messages, costs, lambda c, ch: c.messages.get(ch, 0) / c.steps, "messages per step")
    _stacked(nbytes, costs, lambda c, ch: c.bytes_per_step(ch), "bytes per step")
    messages.set_title("messages per engine step", fontsize=BODY)
    nbytes.set_title("bytes per engine step", fontsize=BODY)
    legible_axes(messages, nbytes)
    handles, labels = messages.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=min(3, len(labels)) or 1, fontsize=SMALL,
               title="channel (colour and hatch)", title_fontsize=SMALL, frameon=False)
    fig.suptitle(title, fontsize=TITLE, color=TEXT)
    fig.tight_layout(rect=(0, 0.22, 1, 1))
    return fig
