"""The persistent batch (vLLM: ``vllm/v1/worker/gpu_input_batch.py``).

Each pipeline stage keeps one. A request occupies a row of ``token_ids_cpu`` for as long
as it is scheduled step after step; only the tokens that change are written.
``remove_request`` frees the row but leaves its token ids in place, ``add_request``
takes the smallest free row and copies *prompt + output tokens only*, and ``condense``
moves the highest rows into the holes. A re-added row therefore shows its previous
occupant's tokens in every slot it does not overwrite -- including the draft slots,
unless something writes them (fix 1). The free rows are the batch's own (``removed``),
as in vLLM 0.9.2 (``docs/fidelity/model_runner_v1.md``). Left out: the
sampling-parameter tensors, logits processors, LoRA and multimodal state, the GPU
copies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.sampling_params import SamplingParams
from minispec.v1.worker.block_table import BlockTable


@dataclass
class CachedRequestState:
    """A stage's own record of a request (it outlives the request's row)."""

    req_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    generator: torch.Generator | None
    block_ids: list[int]
    num_computed_tokens: int
    output_token_ids: list[int]
    # minispec: the drafts this stage was last given for the request, kept so
    # that fix 2 can apply the accepted ones; and (last stage) their draft
    # probabilities for the rejection sampler.
    spec_token_ids: list[int] = field(default_factory=list)
    draft_probs: torch.Tensor | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)


class InputBatch:
    """A stage's persistent batch: one row per scheduled request, its tokens in
    ``token_ids_cpu`` with its counts and block table. Rows are reused step after step,
    so only what changed is written; a slot nobody writes keeps its previous occupant's
    token, as fault 1 shows."""

    def __init__(self, max_num_reqs: int, max_model_len: int, max_num_blocks_per_req: int,
                 move_row: Callable[[InputBatch, int, int], None] | None = None):
        """``move_row``: condense's row move, ``InputBatch._move_row`` unless the
        workshop plugs in a learner's (``RunnerFixes.move_row``)."""
        self.max_num_reqs, self.max_model_len = max_num_reqs, max_model_len
        self.move_row = move_row or InputBatch._move_row
        self.token_ids_cpu = np.zeros((max_num_reqs, max_model_len), dtype=np.int64)
        self.num_tokens = np.zeros(max_num_reqs, dtype=np.int64)
        self.num_tokens_no_spec = np.zeros(max_num_reqs, dtype=np.int64)
        self.num_prompt_tokens = np.zeros(max_num_reqs, dtype=np.int64)
        self.num_computed_tokens_cpu = np.zeros(max_num_reqs, dtype=np.int64)
        self.block_table = BlockTable(max_num_reqs, max_num_blocks_per_req)
        self._req_ids: list[str | None] = []
        self.req_id_to_index: dict[str, int] = {}
        # Free rows not yet refilled or condensed (vLLM 0.9.2: batch_update_builder.removed).
        self.removed: list[int] = []

    @property
    def num_reqs(self) -> int:
        return len(self.req_id_to_index)

    @property
    def req_ids(self) -> list[str]:
        """Row order after ``condense``: row i holds ``req_ids[i]``."""
        return [r for r in self._req_ids if r is not None]

    def add_request(self, request: CachedRequestState) -> int:
        if self.removed:
            row = min(self.removed)
            self.removed.remove(row)
            self._req_ids[row] = request.req_id
        else:
            row = len(self._req_ids)
            if row >= self.max_num_reqs:
                raise RuntimeError(f"InputBatch is full ({self.max_num_reqs} rows)")
            self._req_ids.append(request.req_id)
        self.req_id_to_index[request.req_id] = row
        n_prompt = len(request.prompt_token_ids)
        end = n_prompt + len(request.output_token_ids)
        self.token_ids_cpu[row, :n_prompt] = request.prompt_token_ids
        self.token_ids_cpu[row, n_prompt:end] = request.output_token_ids
        self.num_tokens[row] = self.num_tokens_no_spec[row] = end
        self.num_prompt_tokens[row] = n_prompt
        self.num_computed_tokens_cpu[row] = request.num_computed_tokens
        self.block_table.add_row(request.block_ids, row)
        return row

    def remove_request(self, req_id: str) -> int | None:
        """Free the row. Its token ids stay where they are (stale)."""
        row = self.req_id_to_index.pop(req_id, None)
        if row is not None:
            self._req_ids[row] = None
            self.removed.append(row)
        return row

    def condense(self) -> None:
        """Fill holes by moving the highest occupied rows down, smallest hole first."""
        holes = sorted(self.removed)
        self.removed = []
        last = len(self._req_ids) - 1
        for hole in holes:
            while last >= 0 and self._req_ids[last] is None:
                last -= 1
            if hole >= last:
                break
            self.move_row(self, last, hole)
            last -= 1
        while self._req_ids and self._req_ids[-1] is None:
            self._req_ids.pop()

    def _move_row(self, src: int, tgt: int) -> None:
        req_id = self._req_ids[src]
        self._req_ids[tgt], self._req_ids[src] = req_id, None
        self.req_id_to_index[req_id] = tgt
        n = self.num_tokens[src]
        # Only the first num_tokens slots travel, as in vLLM.
        self.token_ids_cpu[tgt, :n] = self.token_ids_cpu[src, :n]
        for array in (self.num_tokens, self.num_tokens_no_spec, self.num_prompt_tokens, self.num_computed_tokens_cpu):
            array[tgt] = array[src]
        self.block_table.move_row(src, tgt)
