"""The pool of KV blocks under prefix caching (vLLM 0.30.0: ``vllm/v1/core/block_pool.py``, and
``hash_block_tokens`` from ``kv_cache_utils.py``). A full block's hash chains its tokens to its
parent's; a block no request holds (``ref_cnt`` 0) stays hittable in the free queue until it is
handed out again. Left out: several blocks under one hash, extra hash keys (LoRA, multimodal,
cache salt), KV events, the null block, metrics.
"""

from __future__ import annotations

import hashlib
from collections import deque

NONE_HASH = b""  # the first block's parent


def hash_block_tokens(parent_block_hash: bytes, block_token_ids) -> bytes:
    """The hash of a full block: its tokens and its parent's hash (a chain over the prefix)."""
    text = repr((parent_block_hash, tuple(int(t) for t in block_token_ids)))
    return hashlib.sha256(text.encode()).digest()


def block_hashes(token_ids, block_size: int, num_tokens: int) -> list[bytes]:
    """The hashes of the full blocks among the first ``num_tokens`` tokens."""
    hashes, parent = [], NONE_HASH
    for start in range(0, num_tokens - block_size + 1, block_size):
        parent = hash_block_tokens(parent, token_ids[start : start + block_size])
        hashes.append(parent)
    return hashes


class BlockPool:
    """Block ids, their reference counts and hashes, and the free queue (evictable blocks included)."""

    def __init__(self, num_blocks: int, enable_caching: bool = False):
        self.enable_caching = enable_caching
        self.free_block_queue: deque[int] = deque(range(num_blocks))
        self.ref_cnt = [0] * num_blocks
        self.block_hash: dict[int, bytes] = {}  # block id -> its hash, while cached
        self.cached_block_hash_to_block: dict[bytes, int] = {}

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_cached_block(self, block_hash: bytes) -> int | None:
        return self.cached_block_hash_to_block.get(block_hash)

    def touch(self, block_ids: list[int]) -> None:
        """Another request holds these blocks (a prefix hit): a free one leaves the free queue."""
        for block_id in block_ids:
            if self.ref_cnt[block_id] == 0:
                self.free_block_queue.remove(block_id)
            self.ref_cnt[block_id] += 1

    def get_new_blocks(self, n: int) -> list[int]:
        """``n`` blocks from the front of the free queue; a cached one loses its hash (evicted)."""
        blocks = [self.free_block_queue.popleft() for _ in range(n)]
        for block_id in blocks:
            block_hash = self.block_hash.pop(block_id, None)
            if block_hash is not None:
                del self.cached_block_hash_to_block[block_hash]
            self.ref_cnt[block_id] = 1
        return blocks

    def cache_full_block(self, block_id: int, block_hash: bytes) -> None:
        # A prefix already cached under another block keeps that one (vLLM keeps both).
        if block_hash in self.cached_block_hash_to_block or block_id in self.block_hash:
            return
        self.block_hash[block_id] = block_hash
        self.cached_block_hash_to_block[block_hash] = block_id

    def free_blocks(self, ordered_block_ids) -> None:
        """Drop one reference to each; a block now free goes to the front of the queue if it has no
        hash (never hit), else to the back (evicted last)."""
        evict_first, evict_last = [], []
        for block_id in ordered_block_ids:
            self.ref_cnt[block_id] -= 1
            # Without caching, every block goes to the back, as in vLLM 0.9.2 (whose block ids
            # minispec's schedules were checked against).
            if self.ref_cnt[block_id] == 0:
                keep = block_id in self.block_hash or not self.enable_caching
                (evict_last if keep else evict_first).append(block_id)
        self.free_block_queue.extendleft(reversed(evict_first))
        self.free_block_queue.extend(evict_last)
