"""Speculative decoding, drawn: pure functions for notebook 02.

* ``render_acceptance_table``, ``plot_acceptance_vs_k``, ``plot_rejection_example``
  and ``plot_sampled_vs_target`` draw what ``minispec.lab.experiments.metrics`` measures
  (``acceptance_summary`` per k, the textbook ``(1 - alpha^(k+1)) / (1 - alpha)``,
  and the ``chi_square`` test the last one reports).

Colours are Okabe-Ito and every series also has its own marker or hatching.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from minispec.lab.experiments.metrics import expected_tokens_per_forward
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, MAX_WIDTH_IN, SMALL, legible_axes
from minispec.lab.viz.palette import OKABE_ITO


def render_acceptance_table(rows: list[dict]) -> str:
    """One line per k: rows are ``acceptance_summary`` dicts with a ``k`` key."""
    lines = [f"{'k':>2} {'accepted/drafted':>17} {'cond. alpha':>12} {'acc. len':>9} "
             f"{'formula(acc/dr)':>16} {'formula(cond.)':>15}"]
    for r in rows:
        lines.append(
            f"{r['k']:>2} {r['accepted_per_drafted']:>17.3f} {r['conditional_alpha']:>12.3f} "
            f"{r['mean_acceptance_length']:>9.2f} {expected_tokens_per_forward(r['accepted_per_drafted'], r['k']):>16.2f} "
            f"{expected_tokens_per_forward(r['conditional_alpha'], r['k']):>15.2f}"
        )
    return "\n".join(lines)


def plot_acceptance_vs_k(rows: list[dict]) -> Figure:
    """Left: mean acceptance length (tokens per verification), measured and predicted;
    right: the two acceptance rates."""
    ks = [r["k"] for r in rows]
    fig = DescribedFigure(figsize=(MAX_WIDTH_IN, 4.6))
    left, right = fig.subplots(1, 2)
    left.plot(ks, [r["mean_acceptance_length"] for r in rows], "o-", color=OKABE_ITO["blue"], lw=2, ms=8,
              label="measured")
    left.plot(ks, [expected_tokens_per_forward(r["accepted_per_drafted"], r["k"]) for r in rows], "s--",
              color=OKABE_ITO["vermillion"], label="formula, α = accepted/drafted")
    left.plot(ks, [expected_tokens_per_forward(r["conditional_alpha"], r["k"]) for r in rows], "^:",
              color=OKABE_ITO["green"], label="formula, α = conditional")
    left.plot(ks, [k + 1 for k in ks], color=OKABE_ITO["grey"], lw=1, label="ceiling k + 1 (all accepted)")
    left.set_xlabel("k (drafts per step)")
    left.set_ylabel("tokens emitted per verification")
    left.set_title("Mean acceptance length", fontsize=BODY)
    left.legend(fontsize=SMALL)
    right.plot(ks, [r["accepted_per_drafted"] for r in rows], "s--", color=OKABE_ITO["vermillion"],
               label="accepted / drafted")
    right.plot(ks, [r["conditional_alpha"] for r in rows], "^:", color=OKABE_ITO["green"],
               label="conditional α (accepted / examined)")
    right.set_ylim(0, 1)
    right.set_xlabel("k (drafts per step)")
    right.set_ylabel("acceptance")
    right.set_title("Two ways to count acceptance", fontsize=BODY)
    right.legend(fontsize=SMALL, loc="lower left")
    for ax in (left, right):
        ax.set_xticks(ks)
        ax.grid(alpha=0.3)
        legible_axes(ax)
    fig.tight_layout()
    return fig


def _bars(ax, x, heights, offset, width, color, hatch, label):
    ax.bar(x + offset, heights, width, color=color, hatch=hatch, edgecolor="black", linewidth=0.6, label=label)


def plot_rejection_example(p, q, labels: list[str], recovered_freq=None) -> Figure:
    """The rejection sampler at one position, for a hand-made target ``p`` and draft ``q``.

    Left: p and q. Middle: the chance ``min(1, p/q)`` that each draft token is
    accepted. Right: where a rejected draft is resampled from, the residual
    ``max(0, p - q)`` normalised, with observed frequencies if given.
    """
    p, q = np.asarray(p, float), np.asarray(q, float)
    x = np.arange(len(p))
    with np.errstate(divide="ignore", invalid="ignore"):
        accept = np.where(q > 0, np.minimum(1.0, p / q), np.nan)
    residual = np.maximum(p - q, 0)
    residual = residual / residual.sum()
    fig = DescribedFigure(figsize=(MAX_WIDTH_IN, 4.2))
    axes = fig.subplots(1, 3)
    _bars(axes[0], x, p, -0.2, 0.4, OKABE_ITO["blue"], "", "p (target)")
    _bars(axes[0], x, q, 0.2, 0.4, OKABE_ITO["orange"], "//", "q (draft)")
    axes[0].set_title("Target p\nand draft q", fontsize=BODY)
    axes[0].set_ylabel("probability")
    _bars(axes[1], x, np.nan_to_num(accept), 0, 0.6, OKABE_ITO["green"], "..", "min(1, p/q)")
    for xi, a in zip(x, accept):
        axes[1].text(xi, (0 if np.isnan(a) else a) + 0.02, "—" if np.isnan(a) else f"{a:.2f}", ha="center",
                     fontsize=SMALL)
    axes[1].set_title("P(accept | this\ntoken was drafted)", fontsize=BODY)
    _bars(axes[2], x, residual, 0, 0.6, OKABE_ITO["purple"], "xx", "residual")  # not its formula: 08 §6 asks learners for it
    if recovered_freq is not None:
        axes[2].plot(x, recovered_freq, "D", color="black", ms=6, label="observed")
    axes[2].set_title("Recovered token\nafter a rejection", fontsize=BODY)
    for ax in axes:
        ax.set_xticks(x, labels)
        ax.set_xlabel("token")
        ax.set_ylim(0, 1.3)
        ax.legend(fontsize=SMALL, loc="upper right", handlelength=1.2, borderaxespad=0.2)
        legible_axes(ax)
    fig.tight_layout()
    return fig


def plot_sampled_vs_target(counts, probs, labels: list[str], top: int = 16, title: str = "") -> Figure:
    """Observed frequencies of the ``top`` most likely tokens against the exact
    distribution, with the ±2 standard-error band a fair sampler stays in."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    n = counts.sum()
    order = np.argsort(-probs)[:top]
    x = np.arange(len(order))
    expected = probs[order]
    band = 2 * np.sqrt(expected * (1 - expected) / n)
    fig = DescribedFigure(figsize=(MAX_WIDTH_IN, 4.2))
    ax = fig.subplots()
    _bars(ax, x, counts[order] / n, 0, 0.6, OKABE_ITO["sky"], "//", f"sampled with drafts (n = {int(n)})")
    ax.errorbar(x, expected, yerr=band, fmt="o", color="black", ms=5, capsize=3,
                label="exact target probability ± 2 s.e.")
    ax.set_xticks(x, [labels[i] for i in order], family="monospace")
    ax.set_xlabel("token (the most likely first)")
    ax.set_ylabel("frequency")
    ax.set_title(title or "Sampled tokens against the target distribution", fontsize=BODY)
    ax.legend(fontsize=SMALL)
    legible_axes(ax)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
