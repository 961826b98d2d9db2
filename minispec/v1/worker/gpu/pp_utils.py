"""Pipeline parallelism for Model Runner V2: the last stage's broadcast (vLLM 0.30.0:
``vllm/v1/worker/gpu/pp_utils.py``, ``PPHandler``).

Only the last stage samples and drafts. After each batch it sends every other stage the
sampled tokens ``[num_reqs, k + 1]``, the counts ``[2, num_reqs]`` (sampled, rejected)
and the next drafts ``[num_reqs, k]``, unless no row of the batch sampled. A non-last
stage posts its receives right after its own forward (``receive``) and applies entries
on first need, oldest first, up to the newest one that holds a request scheduled now
(``get_prev_sampled_outputs``); rows whose slot was freed since are skipped (a
generation counter per slot). ``live_rows`` and ``sample_width`` are handed in by V2's
runner (two fault presets), so this file imports no switch. ``subscribe`` (minispec's)
tells listeners what a handler did, as a ``PPMessage``. Left out: streams and events,
the aux-hidden-state relay (EAGLE 3), XPU.

Fidelity to vLLM: ``docs/fidelity/model_runner_v2.md``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch

from minispec.distributed.parallel_state import InProcStageGroup, post_checked, send_checked

# Its own tag: minispec's executors (``minispec/v1/executor/multiproc_executor.py``) use 1-4, and 1001-1004 for spills;
# its headers travel on 2017 (CHECK_TAG + 17).
SAMPLED_TAG = 17


@dataclass
class PendingRecv:
    """One batch's posted receives on a non-last stage (vLLM: ``PendingRecv``)."""

    receives: list  # sampled tokens, then [num_sampled; num_rejected], then drafts if k > 0
    idx_mapping_np: np.ndarray
    need_sampled_mask: np.ndarray
    gen_at_receive_np: np.ndarray

    def needs(self, slots: set[int], gen: np.ndarray, live_rows) -> bool:
        """Does it hold a sample for one of these slots' current occupants (``live_rows``: ``PPHandler``'s)?"""
        live = self.need_sampled_mask & live_rows(gen[self.idx_mapping_np], self.gen_at_receive_np)
        return any(int(s) in slots for s in self.idx_mapping_np[live])


@dataclass
class SampledOutputs:
    """What ``post_update`` applies: rows whose slot is -1 are skipped."""

    idx_mapping: np.ndarray
    sampled_tokens: np.ndarray
    num_sampled: np.ndarray
    num_rejected: np.ndarray
    draft_tokens: np.ndarray | None


class PPMessageKind(Enum):
    SAMPLED = "sampled"  # the last stage sent the sampled tokens, then [num_sampled; num_rejected]
    DRAFTS = "drafts"  # the last stage sent the next drafts
    POSTED = "posted"  # a non-last stage posted its receives, right after its forward of the batch


@dataclass(frozen=True)
class PPMessage:
    """One batch's broadcast as one stage handled it, for a listener (``PPHandler.subscribe``):
    ``tensors`` went on the wire, in order (SAMPLED: the padded tokens and the counts;
    DRAFTS: the drafts; POSTED: none, sent before the stage advances its slots' counts)."""

    kind: PPMessageKind
    rank: int
    step: int  # the scheduler step the batch was built for (``InputBatch.step``)
    req_ids: tuple[str, ...]  # the batch's rows
    slots: tuple[int, ...]  # each row's slot
    tensors: tuple[np.ndarray, ...]


def compute_need_sampled_mask(batch) -> np.ndarray | None:
    """Per row: does this batch sample for it? None if for no row. From the scheduler's
    counts, which every stage was given alike."""
    samples = batch.num_computed_tokens_np + batch.num_scheduled_tokens >= batch.prefill_len_np
    return samples if samples.any() else None


def same_occupant(gen_now: np.ndarray, gen_at_receive: np.ndarray) -> np.ndarray:
    """Per row: is its slot still held by the request it was received for?"""
    return gen_now == gen_at_receive


def padded_width(batch, max_sample_len: int) -> int:
    """The width the sampled tokens travel at: always the width every receive was posted
    for."""
    return max_sample_len


class PPHandler:
    def __init__(self, group, pp_size: int, max_num_reqs: int, num_speculative_steps: int,
                 live_rows: Callable = same_occupant, sample_width: Callable = padded_width):
        """``live_rows``, ``sample_width``: the functions V2's runner resolved its two switches of
        this file to (``gpu/runner_fixes.py``); by default their fixes."""
        self.group, self.last_rank = group, pp_size - 1
        self.is_last_rank = group.rank == self.last_rank
        self.num_speculative_steps = num_speculative_steps
        self.max_sample_len = num_speculative_steps + 1
        self.queue: deque[PendingRecv] = deque()
        self.req_idx_gen_np = np.zeros(max_num_reqs, dtype=np.int64)
        self.live_rows, self.sample_width = live_rows, sample_width
        self.listeners: list[Callable[[PPMessage], None]] = []

    def subscribe(self, listener: Callable[[PPMessage], None]) -> None:
        """Call ``listener`` with a ``PPMessage`` each time this stage sends a broadcast or posts
        its receives for one (never for a batch that samples nothing: nothing travels then)."""
        self.listeners.append(listener)

    def _tell(self, kind: PPMessageKind, batch, *tensors: np.ndarray) -> None:
        if not self.listeners:
            return
        message = PPMessage(kind, self.group.rank, batch.step, tuple(batch.req_ids),
                            tuple(int(s) for s in batch.idx_mapping_np), tensors)
        for listener in self.listeners:
            listener(message)

    def on_req_idx_freed(self, req_idx: int) -> None:
        self.req_idx_gen_np[req_idx] += 1

    def reset(self) -> None:
        """Forget every pending receive (the in-process executor discarded its batches)."""
        self.queue.clear()
        if isinstance(self.group, InProcStageGroup):
            self.group.reset()

    # -- the last stage ---------------------------------------------------------
    def _send(self, tensor: torch.Tensor, step: int) -> None:
        for dst in range(self.last_rank):
            send_checked(self.group, tensor, dst, SAMPLED_TAG, step)

    def broadcast(self, batch, sampled_tokens: np.ndarray, num_sampled: np.ndarray,
                  num_rejected: np.ndarray) -> None:
        if compute_need_sampled_mask(batch) is None:
            return
        width = self.sample_width(batch, self.max_sample_len)
        # -1 pads, as PR #46994's fix did; vLLM 0.30.0 pads with F.pad's default, 0
        # (pp_utils.py 257-260). Either way a receiver reads only num_sampled entries.
        tokens = np.full((batch.num_reqs, width), -1, dtype=np.int64)
        cols = min(width, sampled_tokens.shape[1])
        tokens[:, :cols] = sampled_tokens[:, :cols]
        counts = np.stack([num_sampled, num_rejected]).astype(np.int32)
        self._send(torch.from_numpy(tokens), batch.step)
        self._send(torch.from_numpy(counts), batch.step)
        self._tell(PPMessageKind.SAMPLED, batch, tokens.copy(), counts.copy())

    def broadcast_drafts(self, batch, draft_tokens: np.ndarray) -> None:
        """``draft_tokens``: ``[num_reqs, k]``, the rows' slots in batch order."""
        if compute_need_sampled_mask(batch) is None:
            return
        drafts = np.ascontiguousarray(draft_tokens, dtype=np.int64)
        self._send(torch.from_numpy(drafts), batch.step)
        self._tell(PPMessageKind.DRAFTS, batch, drafts.copy())

    # -- a non-last stage -------------------------------------------------------
    def receive(self, batch) -> None:
        mask = compute_need_sampled_mask(batch)
        if mask is None:
            return
        n = batch.num_reqs
        shapes = [((n, self.max_sample_len), torch.int64), ((2, n), torch.int32)]
        if self.num_speculative_steps > 0:
            shapes.append(((n, self.num_speculative_steps), torch.int64))
        receives = [post_checked(self.group, torch.empty(shape, dtype=dtype), self.last_rank, SAMPLED_TAG, batch.step)
                    for shape, dtype in shapes]
        idx = batch.idx_mapping_np.copy()
        self.queue.append(PendingRecv(receives, idx, mask, self.req_idx_gen_np[idx].copy()))
        self._tell(PPMessageKind.POSTED, batch)

    def get_prev_sampled_outputs(self, scheduled_slots: set[int]) -> list[SampledOutputs]:
        """Take, oldest first, every entry up to the newest one that holds a sample
        for a slot scheduled now (see the module docstring for why that is enough)."""
        gen, live = self.req_idx_gen_np, self.live_rows
        newest = max((i for i, e in enumerate(self.queue) if e.needs(scheduled_slots, gen, live)), default=-1)
        return [self._take(self.queue.popleft()) for _ in range(newest + 1)]

    def _take(self, entry: PendingRecv) -> SampledOutputs:
        tensors = [r.take().numpy() for r in entry.receives]
        freed = ~self.live_rows(self.req_idx_gen_np[entry.idx_mapping_np], entry.gen_at_receive_np)
        idx = np.where(freed | ~entry.need_sampled_mask, -1, entry.idx_mapping_np)
        drafts = tensors[2] if len(tensors) > 2 else None
        return SampledOutputs(idx, tensors[0], tensors[1][0], tensors[1][1], drafts)

