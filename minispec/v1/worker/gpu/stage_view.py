"""What the trace recorder reads of a Model Runner V2 stage, in the shape it reads
V1's (minispec's window into the state, like ``minispec/instruments/trace.py``; vLLM
has no twin).

The recorder (``TraceRecorder.on_stage``) and the invariant checker know V1's
persistent batch: ``token_ids_cpu[row]``, ``num_tokens_no_spec``, ``num_computed_tokens_cpu``,
a block table and the drafts read back from ``input_ids``. Here each batch row is
rebuilt from its slot in those terms, so invariants 2-4 check V2's own state:

* the row's tokens are what the slot holds and what this step embeds:
  ``all_token_ids[slot, :num_computed_tokens]``, then the step's ``input_ids`` (for a
  decode, ``last_sampled_tokens`` and the ``draft_tokens`` it embedded), then the rest
  of a prompt still to prefill. Invariant 3 (token history) compares them with the
  scheduler's tokens: a stale ``last_sampled_tokens`` or a lost broadcast shows there.
* ``num_computed_tokens_cpu`` is the runner's own ``num_computed_tokens`` (V2 builds
  positions from it), not the scheduler's mirror: invariant 4 sees a count the
  broadcast failed to correct.
* the draft slots are the drafts embedded: invariant 2 sees stale or zero drafts.

A row's ``path`` is "new" for a request added this step, "re-added" for one resumed
into a fresh slot, and "stayed" otherwise: V2 never moves a request between slots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.v1.worker.block_table import BlockTable
from minispec.v1.worker.gpu_model_runner import RowPath


@dataclass
class BatchView:
    """V1's ``InputBatch`` fields the recorder reads, one row per batch row."""

    req_ids: list[str]
    token_ids_cpu: np.ndarray
    num_tokens: np.ndarray
    num_tokens_no_spec: np.ndarray
    num_computed_tokens_cpu: np.ndarray
    block_table: BlockTable


@dataclass
class StageView:
    """The runner as the recorder sees it."""

    input_batch: BatchView
    row_paths: dict[str, RowPath]
    pp_rank: int
    is_last_rank: bool


@dataclass
class InputsView:
    num_scheduled: np.ndarray
    verified_drafts: list[list[int]]
    input_ids: torch.Tensor


def stage_view(runner, batch, row_paths: dict[str, RowPath]) -> tuple[StageView, InputsView]:
    states, n = runner.req_states, batch.num_reqs
    width = max(int(states.total_len[batch.idx_mapping_np].max()), int(batch.seq_lens.max())) + 1
    rows = BatchView(list(batch.req_ids), np.zeros((n, width), dtype=np.int64), np.zeros(n, dtype=np.int64),
                     np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), BlockTable(n, runner.block_tables
                                                                                          .block_table_np.shape[1]))
    drafts = []
    for i, slot in enumerate(batch.idx_mapping_np):
        start, end = batch.query_start_loc_np[i], batch.query_start_loc_np[i + 1]
        num_computed, d = int(states.num_computed_tokens[slot]), int(batch.num_draft_tokens_per_req[i])
        embedded = batch.input_ids_np[start:end]
        history_end = max(int(states.total_len[slot]), num_computed + len(embedded) - d)
        tokens = np.concatenate([states.all_token_ids[slot, :num_computed], embedded[: len(embedded) - d],
                                 states.all_token_ids[slot, num_computed + len(embedded) - d : history_end],
                                 embedded[len(embedded) - d :]])
        rows.token_ids_cpu[i, : len(tokens)] = tokens
        rows.num_tokens_no_spec[i], rows.num_tokens[i] = history_end, history_end + d
        rows.num_computed_tokens_cpu[i] = num_computed
        table = runner.block_tables
        rows.block_table.add_row(table.block_table_np[slot, : table.num_blocks_per_row[slot]].tolist(), i)
        drafts.append(embedded[len(embedded) - d :].tolist())
    view = StageView(rows, row_paths, runner.pp_rank, runner.is_last_rank)
    return view, InputsView(batch.num_scheduled_tokens, drafts, torch.as_tensor(batch.input_ids_np))
