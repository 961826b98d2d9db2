"""Paged KV block bookkeeping (vLLM: ``vllm/v1/core/kv_cache_manager.py``). A request owns
a list of block ids; ``allocate_slots`` extends it to cover ``num_computed_tokens +
num_new_tokens`` or returns ``None`` when the pool is short, which is the scheduler's cue to
preempt.

With ``enable_caching`` (vLLM's ``enable_prefix_caching``) ``get_computed_blocks`` finds a
waiting request's longest cached prefix, never its last token, and ``allocate_slots`` names
the full blocks it schedules; block ids, and so hits, are every stage's. Left out: sliding
windows, several KV cache groups, KV connectors, the watermark. Block ids are vLLM's minus one
(no null block): ``docs/fidelity/scheduler.md``.
"""

from __future__ import annotations

from minispec.v1.core.block_pool import BlockPool, block_hashes
from minispec.v1.request import Request


class KVCacheManager:
    """Hands out and takes back KV-cache blocks: each request owns a list of block ids covering its
    computed and scheduled tokens; ``allocate_slots`` returns None when the pool is short, the
    scheduler's cue to preempt."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = False):
        self.num_blocks, self.block_size, self.enable_caching = num_blocks, block_size, enable_caching
        self.block_pool = BlockPool(num_blocks, enable_caching)
        self.req_to_blocks: dict[str, list[int]] = {}
        self.num_cached_block: dict[str, int] = {}  # request -> how many of its blocks are named

    @property
    def num_free_blocks(self) -> int:
        return self.block_pool.num_free_blocks

    def get_block_ids(self, request_id: str) -> list[int]:
        return self.req_to_blocks.get(request_id, [])

    def get_computed_blocks(self, request: Request) -> list[int]:
        """The cached blocks of the request's longest cached prefix ([] without caching). The
        prefix stops short of the last token, which the request must compute to sample."""
        if not self.enable_caching:
            return []
        hits = []
        for block_hash in block_hashes(request.all_token_ids, self.block_size, request.num_tokens - 1):
            block_id = self.block_pool.get_cached_block(block_hash)
            if block_id is None:
                break
            hits.append(block_id)
        return hits

    def allocate_slots(self, request: Request, num_new_tokens: int,
                       new_computed_blocks: list[int] = ()) -> list[int] | None:
        """Blocks newly added to the request (prefix hits ``new_computed_blocks`` first, computed
        on top of ``num_computed_tokens``), or None if the pool cannot cover it."""
        blocks = self.req_to_blocks.setdefault(request.request_id, [])
        num_computed = request.num_computed_tokens + len(new_computed_blocks) * self.block_size
        needed = -(-(num_computed + num_new_tokens) // self.block_size) - len(blocks) - len(new_computed_blocks)
        # A hit no request holds sits in the free queue: taking it takes a free block too.
        evictable = sum(self.block_pool.ref_cnt[b] == 0 for b in new_computed_blocks)
        if max(0, needed) + evictable > self.num_free_blocks:
            return None
        start = len(blocks)
        self.block_pool.touch(list(new_computed_blocks))
        blocks.extend(new_computed_blocks)
        for _ in range(max(0, needed)):
            # One block at a time, so an exception between blocks (Ctrl-C) never leaves a
            # block owned by nobody.
            blocks.extend(self.block_pool.get_new_blocks(1))
        if self.enable_caching:
            self._cache_blocks(request, min(num_computed + num_new_tokens, request.num_tokens))
        return blocks[start:]

    def _cache_blocks(self, request: Request, num_tokens: int) -> None:
        """Name the request's full blocks among its first ``num_tokens`` known tokens."""
        req_id, blocks = request.request_id, self.req_to_blocks[request.request_id]
        hashes = block_hashes(request.all_token_ids, self.block_size, num_tokens)
        for i in range(self.num_cached_block.get(req_id, 0), len(hashes)):
            self.block_pool.cache_full_block(blocks[i], hashes[i])
        self.num_cached_block[req_id] = max(len(hashes), self.num_cached_block.get(req_id, 0))

    def free(self, request: Request) -> None:
        # Tail blocks first, as vLLM v0.9.2 frees them (single_type_kv_cache_manager.py
        # lines 168-171), so the next allocations get the same block ids as vLLM's.
        self.num_cached_block.pop(request.request_id, None)
        self.block_pool.free_blocks(reversed(self.req_to_blocks.pop(request.request_id, [])))
