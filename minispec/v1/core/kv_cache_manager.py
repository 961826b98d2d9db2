"""Paged KV block bookkeeping (vLLM: ``vllm/v1/core/kv_cache_manager.py`` and
``block_pool.py``). A request owns a list of block ids; ``allocate_slots``
extends it to cover ``num_computed_tokens + num_new_tokens`` or returns ``None``
when the pool is short, which is the scheduler's cue to preempt.

Left out: prefix caching (block hashes, ref counts, eviction order), sliding windows,
several KV cache groups. Block ids are vLLM's minus one (no null block):
``docs/fidelity/scheduler.md``.
"""

from __future__ import annotations

from collections import deque

from minispec.v1.request import Request


class KVCacheManager:
    """Hands out and takes back KV-cache blocks: each request owns a list of block ids covering its
    computed and scheduled tokens; ``allocate_slots`` returns None when the pool is short, the
    scheduler's cue to preempt."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks, self.block_size = num_blocks, block_size
        self.free_block_queue: deque[int] = deque(range(num_blocks))
        self.req_to_blocks: dict[str, list[int]] = {}

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_block_ids(self, request_id: str) -> list[int]:
        return self.req_to_blocks.get(request_id, [])

    def allocate_slots(self, request: Request, num_new_tokens: int) -> list[int] | None:
        """Blocks newly added to the request, or None if the pool cannot cover it."""
        blocks = self.req_to_blocks.setdefault(request.request_id, [])
        needed = -(-(request.num_computed_tokens + num_new_tokens) // self.block_size) - len(blocks)
        if needed > self.num_free_blocks:
            return None
        start = len(blocks)
        for _ in range(max(0, needed)):
            # One statement per block, so an exception between blocks (Ctrl-C)
            # never leaves a block owned by nobody.
            blocks.append(self.free_block_queue.popleft())
        return blocks[start:]

    def free(self, request: Request) -> None:
        # Tail blocks first, as vLLM v0.9.2 frees them (single_type_kv_cache_manager.py
        # lines 168-171), so the next allocations get the same block ids as vLLM's.
        self.free_block_queue.extend(reversed(self.req_to_blocks.pop(request.request_id, [])))
