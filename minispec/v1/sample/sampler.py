"""Turning logits into a token (vLLM: ``vllm/v1/sample/sampler.py``, ``Sampler``, and
``ops/topk_topp_sampler.py``). minispec's ``Sampler`` samples one request at a time so
each request keeps its own seeded ``torch.Generator``; vLLM batches this on the GPU.
Left out: penalties, logprobs, min_p, logits processors.
"""

from __future__ import annotations

import torch
from torch import nn

from minispec.sampling_params import SamplingParams


def compute_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Probabilities after temperature, top-k and top-p; rows are positions."""
    logits = logits.float() / max(params.temperature, 1e-5)
    if params.top_k and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (always the first token).
        drop = sorted_probs.cumsum(-1) - sorted_probs >= params.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample_from(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(probs, 1, generator=generator).item())


class Sampler(nn.Module):
    """No parameters: an ``nn.Module`` as vLLM's is, called as ``sampler(...)``."""

    def forward(self, logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
        """One token from one row of logits."""
        if params.greedy:
            return int(logits.argmax().item())
        return sample_from(compute_probs(logits, params), generator)
