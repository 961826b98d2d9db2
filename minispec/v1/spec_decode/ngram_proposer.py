"""Prompt-lookup drafting (vLLM: ``vllm/v1/spec_decode/ngram_proposer.py``).

Take the last ``n`` tokens of the context, for ``n`` from ``prompt_lookup_max``
down to ``prompt_lookup_min``; find their earliest earlier occurrence; propose
the ``k`` tokens that followed it. No model, no probabilities: the rejection
sampler treats these drafts as one-hot. vLLM uses KMP in numba; minispec scans
with numpy, which is plenty for contexts of a few hundred tokens.
"""

from __future__ import annotations

import numpy as np


class NgramProposer:
    """Proposes ``k`` drafts by prompt lookup: what followed the earliest earlier occurrence of the
    context's last ``n`` tokens. No model, so drafts cost nothing and come without probabilities."""

    def __init__(self, min_n: int, max_n: int, k: int):
        self.min_n, self.max_n, self.k = min_n, max_n, k

    def propose_one(self, context: np.ndarray) -> list[int]:
        for n in range(min(self.max_n, len(context) - 1), self.min_n - 1, -1):
            pattern = context[-n:]
            windows = np.lib.stride_tricks.sliding_window_view(context[:-1], n)
            hits = np.flatnonzero((windows == pattern).all(axis=1))
            if len(hits):
                start = hits[0] + n
                return context[start : start + self.k].tolist()
        return []

    def propose(self, contexts, params=None, generators=None, req_ids=None):
        """One list of drafts per context; no draft probabilities."""
        return [self.propose_one(np.asarray(c)) for c in contexts], [None] * len(contexts)

    def remove(self, req_id: str) -> None:
        """Keeps no per-request state."""

    def reset(self) -> None:
        """Keeps no per-request state."""
