"""A stage's KV under a tree of drafts: the accepted path compacted into committed positions.

Nearest twin (vLLM 0.17.0: ``vllm/v1/attention/backends/tree_attn.py``), which masks a tree and
compacts nothing: vLLM never verified a tree in its target (``minispec/token_tree.py``). SGLang's
last stage compacts the accepted nodes' KV into the committed prefix (``_finalize_accept_tree_path``);
its earlier stages did not, since its relay carried accept lengths and the next tree but no node
indices (SGLang PR #30775, comment of 2026-09-16: a path such as ``[0, 2, 3]`` leaves a rejected
sibling's KV committed). Here every stage compacts, when it next prepares the request: by then
its design's hand-over has brought the accepted tokens, from which ``TokenTree.path_of`` derives
the very path the last stage took (both take the eldest matching child). ``kv_tags`` is
minispec's probe (no twin): per cache slot, the token and position last stored there, moved with
the KV; invariant 10 reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.token_tree import TokenTree


@dataclass
class RanTree:
    """What a stage remembers of the tree a request ran, until it learns the accepted path."""

    root: int  # the root's position
    drafts: list[int]
    slots: list[int]  # where each node's KV went
    blocks: list[int]  # the request's blocks then: a request preempted since holds others


def compacts_on_every_rank(is_last_rank: bool) -> bool:
    """The fix: every stage moves the accepted path's KV into the committed positions."""
    return True


class TreeKV:
    def __init__(self, tree: TokenTree, layers: list, num_slots: int, block_size: int, compacts: bool):
        self.tree, self.layers, self.block_size, self.compacts = tree, layers, block_size, compacts
        self.kv_tags = torch.full((num_slots, 2), -1, dtype=torch.int64)  # per slot: (token, position)
        self.ran: dict[str, RanTree] = {}

    def write(self, slot_mapping: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor) -> None:
        """This forward's tokens and positions, at the slots its attention layers store them."""
        self.kv_tags[slot_mapping.cpu()] = torch.stack([input_ids.cpu(), positions.cpu()], dim=1)

    def remember(self, meta, i: int, req_id: str, drafts: list[int], blocks: list[int]) -> None:
        """Request ``i`` of this forward (``AttentionMetadata``) ran ``drafts`` as its tree's nodes."""
        if drafts and not self.tree.is_chain:
            end = meta.query_start_loc[i + 1]
            slots = meta.slot_mapping[end - len(drafts) : end].tolist()
            root = meta.seq_lens[i] - len(drafts) - 1
            self.ran[req_id] = RanTree(root, list(drafts), slots, list(blocks))

    def settle(self, req_id: str, num_computed: int, history: np.ndarray, blocks: list[int]) -> None:
        """Before the request's next forward: compact the path its count and tokens say was accepted."""
        ran = self.ran.pop(req_id, None)
        accepted = num_computed - 1 - ran.root if ran else -1
        if not (0 <= accepted <= len(ran.drafts)) or list(blocks[: len(ran.blocks)]) != ran.blocks:
            return  # none, or preempted since: recomputed from scratch
        tokens = [int(t) for t in history[ran.root + 1 : ran.root + 1 + accepted]]
        path = self.tree.path_of(ran.drafts, tokens)
        if self.compacts:
            self.compact([(ran.slots[node], self.slot(blocks, ran.root + 1 + d)) for d, node in enumerate(path)])

    def slot(self, blocks: list[int], position: int) -> int:
        return int(blocks[position // self.block_size]) * self.block_size + position % self.block_size

    def compact(self, moves: list[tuple[int, int]]) -> None:
        """Each (from, to) in order of depth: a node's slot is never below its depth's, so no
        move overwrites a node still to move."""
        for src, dst in moves:
            for layer in self.layers:
                cache = layer.kv_cache
                flat = cache.view(cache.shape[0], -1, *cache.shape[3:])
                flat[:, dst] = flat[:, src]
            self.kv_tags[dst] = self.kv_tags[src]

    def committed(self, blocks: list[int], n: int, writes: dict[int, tuple[int, int]] | None = None
                  ) -> tuple[list[int], list[int]]:
        """The tokens and positions stored at the request's first ``n`` positions, once this
        forward's ``writes`` (slot -> (token, position)) are in: a prefix-cache hit may read a
        block another row of the batch fills, stored before any row attends."""
        n = min(n, len(blocks) * self.block_size)  # a count run past its blocks is invariant 4's
        slots = [self.slot(blocks, p) for p in range(n)]
        tags = self.kv_tags[slots].tolist()
        writes = writes or {}
        tags = [list(writes.get(s, tag)) for s, tag in zip(slots, tags)]
        return [t for t, _ in tags], [p for _, p in tags]

    def prefill_writes(self, rows) -> dict[int, tuple[int, int]]:
        """The slots this forward stores with the rows' tokens before their drafts."""
        writes = {}
        for row in rows:
            if row.block_ids is None:
                continue
            end = min(row.num_computed_tokens + row.num_scheduled_tokens - row.num_drafts, len(row.token_ids),
                      len(row.block_ids) * self.block_size)
            writes.update({self.slot(row.block_ids, p): (row.token_ids[p], p)
                           for p in range(row.num_computed_tokens, end)})
        return writes
