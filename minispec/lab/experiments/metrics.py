"""The lab's measurements of runs: acceptance, the textbook prediction, a
goodness-of-fit test, where an output first leaves its reference. Pure
functions of recorded ``Trace`` objects and numbers; the figures and the checker read them.

* ``acceptance_per_step``, ``verifications``, ``acceptance_summary``,
  ``alpha_by_position`` count, per step or per verification (one request in one
  step that carried drafts), how many drafts were scheduled and how many the
  rejection sampler accepted;
* ``alpha_estimate`` and ``expected_tokens_per_forward``: the conditional α and
  ``(1 - α^(k+1)) / (1 - α)``;
* ``chi_square``: goodness of fit of sampled counts to a distribution;
* ``first_divergence``: the first output position that differs.

vLLM twin: ``vllm/v1/spec_decode/metrics.py`` (v0.9.2) counts drafted and
accepted tokens per position for its log line; nothing here logs.
"""

from __future__ import annotations

import numpy as np

from minispec.instruments.trace import Trace


def acceptance_per_step(trace: Trace) -> list[tuple[int, int, int, int]]:
    """(step, drafted, accepted, requests that verified drafts) for steps that verified any."""
    rows = []
    for step in trace.steps:
        drafts = step.schedule.scheduled_spec_decode_tokens
        drafted = sum(len(d) for d in drafts.values())
        if drafted:
            rows.append((step.step, drafted, sum(step.num_accepted.get(r, 0) for r in drafts), len(drafts)))
    return rows


def alpha_estimate(trace: Trace) -> tuple[float, int]:
    """(α, k): the chance a draft is accepted given those before it were
    (accepted / (accepted + first rejections)), and the most drafts per request."""
    accepted = rejections = k = 0
    for step in trace.steps:
        for req_id, drafts in step.schedule.scheduled_spec_decode_tokens.items():
            n = step.num_accepted.get(req_id, 0)
            accepted += n
            rejections += n < len(drafts)
            k = max(k, len(drafts))
    return (accepted / (accepted + rejections) if accepted + rejections else 0.0), k


def expected_tokens_per_forward(alpha: float, k: int) -> float:
    """(1 - α^(k+1)) / (1 - α): tokens one target forward emits when each draft is
    accepted with chance α, independently, until the first rejection."""
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


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


def chi_square(counts, probs, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Goodness of fit of observed ``counts`` to ``probs``: ``(statistic, dof, p-value)``.

    Bins expected to hold fewer than ``min_expected`` samples are pooled into one,
    so the chi-square approximation holds (``min_expected=0`` pools only the bins
    ``probs`` rules out).
    """
    from scipy.stats import chisquare

    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    if counts.shape != probs.shape:
        raise ValueError(f"counts has shape {counts.shape}: expected the shape of probs {probs.shape}")
    expected = probs / probs.sum() * counts.sum()
    keep = (expected >= min_expected) & (expected > 0)
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    result = chisquare(observed, expected)
    return float(result.statistic), len(observed) - 1, float(result.pvalue)


def first_divergence(tokens: list[int], reference: list[int]) -> int | None:
    """The first output position where ``tokens`` leaves ``reference``, or None."""
    if tokens == reference:
        return None
    return next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b), min(len(tokens), len(reference)))
