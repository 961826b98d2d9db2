"""The rejection sampler at one position, drawn many times: 02's example of a target ``p`` and a draft
``q`` over five tokens, and what its draws emit (02 §2.2, its prediction's reveal, its Going deeper).

vLLM twin: none; it drives ``minispec.v1.sample.rejection_sampler.RejectionSampler`` (vLLM's
``vllm/v1/sample/rejection_sampler.py``, v0.9.2) with one draft token per draw.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

VOCAB = tuple("abcde")
P_TARGET = (0.40, 0.30, 0.15, 0.10, 0.05)
Q_DRAFT = (0.10, 0.50, 0.10, 0.20, 0.10)


@dataclass(frozen=True)
class Draws:
    """``n`` draws: how many were accepted (then a bonus token), the first token each emitted, and
    the token each rejection recovered."""

    n: int
    accepted: int
    first: Counter
    recovered: Counter

    def table(self) -> str:
        n_rec = max(sum(self.recovered.values()), 1)
        lines = ["token  p(target)  first emitted  recovered share"]
        lines += [f"  {name}      {P_TARGET[t]:.3f}      {self.first[t] / self.n:.3f}          {self.recovered[t] / n_rec:.3f}"
                  for t, name in enumerate(VOCAB)]
        return "\n".join(lines)

    def recovered_shares(self) -> list[float]:
        n_rec = max(sum(self.recovered.values()), 1)
        return [self.recovered[t] / n_rec for t in range(len(VOCAB))]


def rejection_draws(n: int = 20_000, seed: int = 0, with_draft_probs: bool = True) -> Draws:
    """Draw a draft from ``q`` and run the sampler, ``n`` times (``with_draft_probs=False``: the sampler
    is not given q, as vLLM v0.9.2's runner under the draft-model path did not give it)."""
    import torch

    from minispec.sampling_params import SamplingParams
    from minispec.v1.sample.rejection_sampler import RejectionSampler

    if not (isinstance(n, int) and n > 0):
        raise ValueError(f"rejection_draws: n must be a positive int, not {n!r}")
    p, q = torch.tensor(P_TARGET), torch.tensor(Q_DRAFT)
    sampler, params = RejectionSampler(), SamplingParams(temperature=1.0)
    logits = torch.stack([p.log(), torch.full((len(VOCAB),), 1 / len(VOCAB)).log()])  # position 1, bonus position
    gen = torch.Generator().manual_seed(seed)
    runs = []
    for _ in range(n):
        draft = int(torch.multinomial(q, 1, generator=gen))
        runs.append(sampler([draft], logits, params, q[None] if with_draft_probs else None, gen))
    return Draws(n, sum(len(out) == 2 for out in runs), Counter(out[0] for out in runs),
                 Counter(out[0] for out in runs if len(out) == 1))
