"""Verifying draft tokens (vLLM: ``vllm/v1/sample/rejection_sampler.py``).

Given ``k`` draft tokens and the target's logits at the ``k + 1`` positions
that end at them, emit the accepted drafts, then one more token:

* greedy: a draft is accepted while it equals the target's argmax; the first
  mismatch is replaced by the argmax (the *recovered* token); if all ``k`` are
  accepted, the argmax after the last one is the *bonus* token.
* random: draft ``d`` at position ``i`` is accepted with probability
  ``min(1, p_i(d) / q_i(d))``; on rejection the recovered token is drawn from
  ``normalise(max(0, p_i - q_i))``; the bonus token from ``p_k``. This keeps the
  target distribution exactly. Drafts without probabilities (n-gram) count as
  one-hot ``q``.

July-2025 V1 never passed draft probabilities: v0.9.2's runner calls its
rejection sampler with ``draft_probs=None`` for every proposer (n-gram and the
learned heads alike; ``vllm/v1/worker/gpu_model_runner.py``), so random drafts
were verified as one-hot ``q``. minispec's draft model returns its ``q`` and
the runner passes it here.

vLLM's ``RejectionSampler`` does this for the whole batch in Triton kernels and pads
the output with ``PLACEHOLDER_TOKEN_ID``; minispec's handles one request at a time
and returns the emitted tokens as a list. Left out: the batched metadata
(``SpecDecodeMetadata``), the Triton kernels, logprobs.
"""

from __future__ import annotations

import torch
from torch import nn

from minispec.sampling_params import SamplingParams
from minispec.token_tree import TokenTree
from minispec.v1.sample.sampler import compute_probs, sample_from


class RejectionSampler(nn.Module):
    """Verifies one request's drafts against the target's logits and emits the accepted ones, then
    one more token. No parameters: an ``nn.Module`` as vLLM's is, called as ``rejection_sampler(...)``."""

    def forward(
        self,
        draft_token_ids: list[int],
        target_logits: torch.Tensor,
        params: SamplingParams,
        draft_probs: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        tree: TokenTree | None = None,
    ) -> list[int]:
        """target_logits: ``[k + 1, vocab]``; draft_probs: ``[k, vocab]`` or None. With a branching
        ``tree`` the drafts are its nodes: the longest path the target agrees with, then the bonus
        (greedy only; ``EngineCore.add_request`` refuses the rest)."""
        k = len(draft_token_ids)
        if target_logits.shape[0] != k + 1:
            raise ValueError(f"target_logits has {target_logits.shape[0]} rows: expected {k + 1} (drafts + 1)")
        if tree is not None and not tree.is_chain:
            return tree.verify_greedy(draft_token_ids, target_logits.argmax(-1).tolist())[1]
        if params.greedy:
            return _greedy(draft_token_ids, target_logits)
        return _random(draft_token_ids, compute_probs(target_logits, params), draft_probs, generator)


def _greedy(draft_token_ids: list[int], target_logits: torch.Tensor) -> list[int]:
    best = target_logits.argmax(-1).tolist()
    out = []
    for i, draft in enumerate(draft_token_ids):
        out.append(best[i])
        if draft != best[i]:
            return out  # recovered token
    return out + [best[len(draft_token_ids)]]  # bonus token


def _random(draft_token_ids: list[int], p: torch.Tensor, draft_probs: torch.Tensor | None,
            generator: torch.Generator | None) -> list[int]:
    out = []
    for i, draft in enumerate(draft_token_ids):
        if draft_probs is None:
            q = torch.zeros_like(p[i])
            q[draft] = 1.0
        else:
            q = draft_probs[i].to(p.dtype)
        u = torch.rand((), generator=generator, dtype=p.dtype)
        if u * q[draft] <= p[i, draft] and p[i, draft] > 0:
            out.append(draft)
            continue
        residual = (p[i] - q).clamp_min(0)
        if residual.sum() <= 0:  # p == q: rejection had probability 0
            residual = p[i]
        out.append(sample_from(residual / residual.sum(), generator))
        return out
    return out + [sample_from(p[len(draft_token_ids)], generator)]
