"""Per-row KV block ids of the persistent batch (vLLM: ``vllm/v1/worker/block_table.py``).

vLLM keeps a pinned CPU copy and a GPU copy and computes ``slot_mapping`` on the
device; minispec keeps one numpy array.
"""

from __future__ import annotations

import numpy as np


class BlockTable:
    def __init__(self, max_num_reqs: int, max_num_blocks_per_req: int):
        self.block_table_np = np.zeros((max_num_reqs, max_num_blocks_per_req), dtype=np.int64)
        self.num_blocks_per_row = np.zeros(max_num_reqs, dtype=np.int64)

    def append_row(self, block_ids: list[int], row: int) -> None:
        start = self.num_blocks_per_row[row]
        self.block_table_np[row, start : start + len(block_ids)] = block_ids
        self.num_blocks_per_row[row] += len(block_ids)

    def add_row(self, block_ids: list[int], row: int) -> None:
        self.num_blocks_per_row[row] = 0
        self.append_row(block_ids, row)

    def move_row(self, src: int, tgt: int) -> None:
        n = self.num_blocks_per_row[src]
        self.block_table_np[tgt, :n] = self.block_table_np[src, :n]
        self.num_blocks_per_row[tgt] = n
