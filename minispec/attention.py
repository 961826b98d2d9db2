"""Paged attention over a block table, in plain PyTorch.

Mirrors ``vllm/attention/layer.py`` (the ``Attention`` module that writes this
step's keys and values into the paged KV cache, then attends) and the metadata
of ``vllm/v1/attention/backends/flash_attn.py``. vLLM calls a fused kernel; minispec
loops over requests and calls ``scaled_dot_product_attention``, so a reader can
see every index. Left out: sliding windows, cascade attention, CUDA graphs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from minispec.token_tree import TokenTree


@dataclass
class AttentionMetadata:
    """How the flat token batch of one forward splits into requests.

    Request ``i`` owns query rows ``query_start_loc[i]:query_start_loc[i+1]``; its
    context after this step is ``seq_lens[i]`` tokens, stored in the KV blocks
    listed in ``block_table[i]``. ``slot_mapping[t]`` is the cache slot
    (``block_id * block_size + offset``) that token ``t`` writes its key/value to.
    """

    query_start_loc: list[int]
    seq_lens: list[int]
    block_table: torch.Tensor
    slot_mapping: torch.Tensor
    block_size: int
    tree: TokenTree | None = None  # a branching tree of drafts, else None (a chain is causal)
    num_tree_nodes: list[int] | None = None  # per request: the drafts that are tree nodes this step

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens)

    def visible(self, i: int, q_len: int, device) -> torch.Tensor:
        """``[q_len, seq_len]``: which context entries each of request ``i``'s queries attends."""
        seq_len = self.seq_lens[i]
        q_pos = torch.arange(seq_len - q_len, seq_len, device=device)
        mask = q_pos[:, None] >= torch.arange(seq_len, device=device)[None, :]
        n = self.num_tree_nodes[i] if self.num_tree_nodes else 0
        if n:  # the root and its n nodes end the context: each node sees its ancestors only
            mask[-n - 1 :, -n - 1 :] = self.tree.ancestor_mask(n).to(device)
        return mask


def allocate_kv_cache(num_blocks, block_size, num_kv_heads, head_dim, dtype, device) -> torch.Tensor:
    """One layer's cache: ``[2 (key, value), num_blocks, block_size, kv_heads, head_dim]``."""
    return torch.zeros(2, num_blocks, block_size, num_kv_heads, head_dim, dtype=dtype, device=device)


class Attention(torch.nn.Module):
    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.kv_cache: torch.Tensor | None = None  # bound by the model runner

    def forward(self, q, k, v, meta: AttentionMetadata) -> torch.Tensor:
        """q: ``[tokens, heads, head_dim]``; k, v: ``[tokens, kv_heads, head_dim]``."""
        if self.kv_cache is None:
            raise RuntimeError("Attention.kv_cache is not bound; the model runner allocates it")
        key_cache = self.kv_cache[0].view(-1, self.num_kv_heads, self.head_dim)
        value_cache = self.kv_cache[1].view(-1, self.num_kv_heads, self.head_dim)
        key_cache[meta.slot_mapping] = k
        value_cache[meta.slot_mapping] = v
        out = torch.empty_like(q)
        group = self.num_heads // self.num_kv_heads
        for i in range(meta.num_reqs):
            start, end, seq_len = meta.query_start_loc[i], meta.query_start_loc[i + 1], meta.seq_lens[i]
            n_blocks = -(-seq_len // meta.block_size)
            blocks = meta.block_table[i, :n_blocks]
            keys = self.kv_cache[0, blocks].reshape(-1, self.num_kv_heads, self.head_dim)[:seq_len]
            values = self.kv_cache[1, blocks].reshape(-1, self.num_kv_heads, self.head_dim)[:seq_len]
            # The queries are the last (end - start) entries of the context.
            mask = meta.visible(i, end - start, q.device)
            out[start:end] = F.scaled_dot_product_attention(
                q[start:end].transpose(0, 1),
                keys.repeat_interleave(group, dim=1).transpose(0, 1),
                values.repeat_interleave(group, dim=1).transpose(0, 1),
                attn_mask=mask,
            ).transpose(0, 1)
        return out


def make_attention_metadata(num_computed, num_scheduled, block_table, block_size, device="cpu",
                            tree: TokenTree | None = None, num_drafts=None):
    """Positions and metadata for requests that each add ``num_scheduled[i]`` tokens
    after ``num_computed[i]`` cached ones; ``block_table`` is ``[num_reqs, max_blocks]``.
    With a branching ``tree``, a request's ``num_drafts[i]`` drafts are its nodes: each is
    stored in the next slot, in the tree's order, and placed at its root's position plus its depth."""
    branching = tree is not None and not tree.is_chain
    nodes = [int(d) for d in num_drafts] if branching else None
    positions, slots, query_start_loc, seq_lens = [], [], [0], []
    for i, (start, n) in enumerate(zip(num_computed, num_scheduled)):
        flat = range(int(start), int(start) + int(n))
        slots.extend(int(block_table[i][p // block_size]) * block_size + p % block_size for p in flat)
        pos = list(flat)
        if nodes and nodes[i]:
            root = pos[-nodes[i] - 1]
            pos[-nodes[i] :] = [root + tree.depth(j) for j in range(nodes[i])]
        positions.extend(pos)
        query_start_loc.append(query_start_loc[-1] + int(n))
        seq_lens.append(int(start) + int(n))
    meta = AttentionMetadata(
        query_start_loc=query_start_loc,
        seq_lens=seq_lens,
        block_table=torch.as_tensor(block_table, dtype=torch.int64, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        block_size=block_size,
        tree=tree if branching else None,
        num_tree_nodes=nodes,
    )
    return torch.tensor(positions, dtype=torch.int64, device=device), meta
