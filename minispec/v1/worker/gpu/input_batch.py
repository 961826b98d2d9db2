"""The input batch, built from the request slots each step (vLLM 0.30.0:
``vllm/v1/worker/gpu/input_batch.py``).

V1's persistent batch rows *were* the state; V2's ``InputBatch`` is a throw-away view:
``idx_mapping`` maps batch row ``i`` to its slot, and every array is gathered from the
slots. The functions below are that file's Triton kernels in numpy, one request at a
time: ``prepare_prefill_inputs`` (ids from ``all_token_ids``),
``combine_sampled_and_draft_tokens`` (``last_sampled_tokens``, then the slot's drafts,
never a token list from the scheduler) and ``post_update`` (the sampled tokens, and the
count advanced by ``query_len - num_rejected``). Left out: padding for CUDA graphs,
``expanded_idx_mapping`` (per-logit slots for the batched sampler), adaptive
verification, prompt logprobs, context parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.v1.worker.gpu.states import RequestState


@dataclass
class InputBatch:
    req_ids: list[str]  # batch row -> request
    idx_mapping_np: np.ndarray  # batch row -> slot
    num_scheduled_tokens: np.ndarray  # per row: the query length
    num_draft_tokens_per_req: np.ndarray  # per row: how many drafts the scheduler scheduled
    num_computed_tokens_np: np.ndarray  # per row: the scheduler's count (its mirror)
    prefill_len_np: np.ndarray
    query_start_loc_np: np.ndarray  # [num_reqs + 1]
    seq_lens: np.ndarray  # per row: the slot's num_computed_tokens + query length
    input_ids_np: np.ndarray  # filled by the two functions below
    positions: torch.Tensor | None  # None until the runner attends (after recording the rows)
    attn_metadata: object | None
    logits_indices: list[list[int]]  # per row: the 1 + d positions sampled
    step: int = -1  # the scheduler step it was built for (minispec's: the broadcast's headers carry it)

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @property
    def num_tokens(self) -> int:
        return int(self.num_scheduled_tokens.sum())


def prepare_prefill_inputs(input_ids: np.ndarray, batch: InputBatch, states: RequestState) -> None:
    for i, slot in enumerate(batch.idx_mapping_np):
        num_computed, prefill_len = states.num_computed_tokens[slot], states.prefill_len[slot]
        if num_computed >= prefill_len:
            continue  # not a prefill
        start, n = batch.query_start_loc_np[i], batch.num_scheduled_tokens[i]
        input_ids[start : start + n] = states.all_token_ids[slot, num_computed : num_computed + n]


def combine_sampled_and_draft_tokens(input_ids: np.ndarray, batch: InputBatch, states: RequestState) -> None:
    """Write each decode row's last sampled token and drafts into ``input_ids``."""
    for i, slot in enumerate(batch.idx_mapping_np):
        num_drafts = int(batch.num_draft_tokens_per_req[i])
        query_end, seq_len = batch.query_start_loc_np[i + 1], batch.seq_lens[i]
        if seq_len <= states.prefill_len[slot]:
            continue  # a prefill chunk: no sampled or draft tokens
        if seq_len - (1 + num_drafts) >= states.prefill_len[slot]:
            input_ids[query_end - 1 - num_drafts] = states.last_sampled_tokens[slot]
        if num_drafts:
            input_ids[query_end - num_drafts : query_end] = states.draft_tokens[slot, :num_drafts]


def post_update(idx_mapping: np.ndarray, states: RequestState, sampled_tokens: np.ndarray, num_sampled: np.ndarray,
                num_rejected: np.ndarray, query_lens: np.ndarray | None) -> None:
    """Apply one batch's sampling to its slots; a slot of -1 is skipped (vLLM: its
    request was freed since, or it did not sample). ``query_lens`` is None on a
    non-last stage, which advanced ``num_computed_tokens`` at its own forward."""
    for i, slot in enumerate(idx_mapping):
        if slot < 0:
            continue
        n, total = int(num_sampled[i]), states.total_len[slot]
        if n > 0:
            states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
            states.all_token_ids[slot, total : total + n] = sampled_tokens[i, :n]
            states.total_len[slot] = total + n
        query_len = 0 if query_lens is None else int(query_lens[i])
        states.num_computed_tokens[slot] += query_len - int(num_rejected[i])


def post_update_num_computed_tokens(batch: InputBatch, states: RequestState) -> None:
    """A non-last stage's optimistic advance by the whole query, drafts included."""
    states.num_computed_tokens[batch.idx_mapping_np] += batch.num_scheduled_tokens
