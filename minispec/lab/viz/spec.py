"""Speculative decoding, drawn: pure functions for notebook 02.

* ``verifications`` / ``acceptance_summary`` read a recorded ``Trace`` and count,
  per verification (one request in one step that carried drafts), how many drafts
  were scheduled and how many the rejection sampler accepted.
* ``alpha_by_position`` splits the conditional acceptance by draft position.
* the textbook prediction ``(1 - alpha^(k+1)) / (1 - alpha)`` and the conditional
  alpha come from ``minispec.lab.viz.plots`` (``expected_tokens_per_forward``,
  ``alpha_estimate``), which draws acceptance per step.
* ``plot_acceptance_vs_k``, ``plot_rejection_example`` and ``plot_sampled_vs_target``
  draw them; ``chi_square`` is the goodness-of-fit test the last one reports.

Colours are Okabe-Ito and every series also has its own marker or hatching.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from minispec.instruments.trace import Trace
from minispec.lab.viz.palette import OKABE_ITO
from minispec.lab.viz.plots import alpha_estimate, expected_tokens_per_forward



def verifications(trace: Trace) -> list[tuple[int, int]]:
    """``(drafted, accepted)`` for every request in every step that carried drafts."""
    return [(len(drafts), step.num_accepted.get(req_id, 0))
            for step in trace.steps
            for req_id, drafts in step.schedule.scheduled_spec_decode_tokens.items() if drafts]


def acceptance_summary(trace: Trace) -> dict:
    """Acceptance measured two ways, and the mean acceptance length: tokens
    emitted per verification, ``1 + accepted / verifications``, which is vLLM's
    "Mean acceptance length" (v0.9.2 ``vllm/v1/spec_decode/metrics.py``). It leaves
    the prefill passes out, so it is above ``LLM.stats()["tokens_per_forward"]``.

    ``accepted_per_drafted`` is what vLLM reports: every draft counts, including
    the ones after a rejection, which the sampler never looked at.
    ``conditional_alpha`` counts only the drafts the sampler examined (all the
    accepted ones, plus the one rejected if there was a rejection): an estimate of
    the chance a draft is accepted given that the drafts before it were.
    """
    pairs = verifications(trace)
    if not pairs:
        raise ValueError("trace has no verification steps: expected a run with num_speculative_tokens > 0")
    drafted = sum(d for d, _ in pairs)
    accepted = sum(a for _, a in pairs)
    return {
        "verifications": len(pairs),
        "drafted": drafted,
        "accepted": accepted,
        "accepted_per_drafted": accepted / drafted,
        "conditional_alpha": alpha_estimate(trace)[0],
        # each verification emits its accepted drafts and one more token
        "mean_acceptance_length": (accepted + len(pairs)) / len(pairs),
    }


def alpha_by_position(trace: Trace) -> list[float]:
    """Per draft position i: of the verifications that reached draft i (drafts
    1 .. i-1 all accepted), the share that accepted it. The mean acceptance length is
    exactly ``1 + a1 + a1*a2 + ...`` of these when
    every verification had the same number of drafts."""
    pairs = verifications(trace)
    alphas = []
    for i in range(max((d for d, _ in pairs), default=0)):
        reached = [a for d, a in pairs if d > i and a >= i]
        alphas.append(sum(a > i for a in reached) / len(reached) if reached else float("nan"))
    return alphas


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
    fig = Figure(figsize=(10, 4))
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
    left.set_title("Mean acceptance length", fontsize=10)
    left.legend(fontsize=8)
    right.plot(ks, [r["accepted_per_drafted"] for r in rows], "s--", color=OKABE_ITO["vermillion"],
               label="accepted / drafted")
    right.plot(ks, [r["conditional_alpha"] for r in rows], "^:", color=OKABE_ITO["green"],
               label="conditional α (accepted / examined)")
    right.set_ylim(0, 1)
    right.set_xlabel("k (drafts per step)")
    right.set_ylabel("acceptance")
    right.set_title("Two ways to count acceptance", fontsize=10)
    right.legend(fontsize=8, loc="lower left")
    for ax in (left, right):
        ax.set_xticks(ks)
        ax.grid(alpha=0.3)
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
    fig = Figure(figsize=(11, 3.6))
    axes = fig.subplots(1, 3)
    _bars(axes[0], x, p, -0.2, 0.4, OKABE_ITO["blue"], "", "p (target)")
    _bars(axes[0], x, q, 0.2, 0.4, OKABE_ITO["orange"], "//", "q (draft)")
    axes[0].set_title("Target p and draft q", fontsize=10)
    axes[0].set_ylabel("probability")
    _bars(axes[1], x, np.nan_to_num(accept), 0, 0.6, OKABE_ITO["green"], "..", "min(1, p/q)")
    for xi, a in zip(x, accept):
        axes[1].text(xi, (0 if np.isnan(a) else a) + 0.02, "—" if np.isnan(a) else f"{a:.2f}", ha="center",
                     fontsize=8)
    axes[1].set_title("P(accept | this token was drafted)", fontsize=10)
    axes[1].set_ylabel("probability")
    _bars(axes[2], x, residual, 0, 0.6, OKABE_ITO["purple"], "xx", "residual")  # not its formula: 08 §6 asks learners for it
    if recovered_freq is not None:
        axes[2].plot(x, recovered_freq, "D", color="black", ms=6, label="observed recovered tokens")
    axes[2].set_title("Recovered token after a rejection", fontsize=10)
    axes[2].set_ylabel("probability")
    for ax in axes:
        ax.set_xticks(x, labels)
        ax.set_xlabel("token")
        ax.set_ylim(0, 1.12)
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def chi_square(counts, probs, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Goodness of fit of observed ``counts`` to ``probs``: ``(statistic, dof, p-value)``.

    Bins expected to hold fewer than ``min_expected`` samples are pooled into one,
    so the chi-square approximation holds.
    """
    from scipy.stats import chisquare

    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    if counts.shape != probs.shape:
        raise ValueError(f"counts has shape {counts.shape}: expected the shape of probs {probs.shape}")
    expected = probs / probs.sum() * counts.sum()
    keep = expected >= min_expected
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    result = chisquare(observed, expected)
    return float(result.statistic), len(observed) - 1, float(result.pvalue)


def plot_sampled_vs_target(counts, probs, labels: list[str], top: int = 16, title: str = "") -> Figure:
    """Observed frequencies of the ``top`` most likely tokens against the exact
    distribution, with the ±2 standard-error band a fair sampler stays in."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    n = counts.sum()
    order = np.argsort(-probs)[:top]
    x = np.arange(len(order))
    expected = probs[order]
    band = 2 * np.sqrt(expected * (1 - expected) / n)
    fig = Figure(figsize=(10, 3.8))
    ax = fig.subplots()
    _bars(ax, x, counts[order] / n, 0, 0.6, OKABE_ITO["sky"], "//", f"sampled with drafts (n = {int(n)})")
    ax.errorbar(x, expected, yerr=band, fmt="o", color="black", ms=5, capsize=3,
                label="exact target probability ± 2 s.e.")
    ax.set_xticks(x, [labels[i] for i in order], family="monospace")
    ax.set_xlabel("token (the most likely first)")
    ax.set_ylabel("frequency")
    ax.set_title(title or "Sampled tokens against the target distribution", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
