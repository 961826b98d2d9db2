"""The relay payload around the pipeline's ring (SGLang: ``SchedulerPPMixin.event_loop_pp``
in ``python/sglang/srt/managers/scheduler_pp_mixin.py``; minispec's stand-in for V2's
``PPHandler``).

The last stage sends each batch's payload to stage 0, and each non-last stage applies it
and forwards it: last -> 0 -> 1 -> ... -> pp_size - 2. It holds the sampled tokens,
``[accept_lens; new_seq_lens]`` (a non-last stage *sets* its count from the latter) and
the next drafts (a tree's k nodes in breadth-first order). The ``c``-th batch a stage runs
gets micro-batch slot ``c % pp_size``; a payload goes to the slot of the batch it reports
(preset ``relay-pairing``: the previous forward's). Left out: SGLang's Python-object dicts
(``point_to_point_pyobj``), proxy tensors, the accepted node indices SGLang's fix for
trees relays (each stage derives the path from the sampled tokens, ``tree_kv.py``),
logprobs, overlap scheduling. SGLang's lines: ``docs/fidelity/relay.md``. (vLLM 0.30.0:
``vllm/v1/worker/gpu/pp_utils.py``, its nearest twin.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.distributed.parallel_state import InProcStageGroup, post_checked, send_checked
from minispec.v1.worker.gpu.pp_utils import compute_need_sampled_mask, same_occupant

# Its own tag, next to V2's broadcast (17); headers on CHECK_TAG + 18.
RELAY_TAG = 18


@dataclass
class MicroBatch:
    """What a stage remembers of a batch it ran, in the batch's micro-batch slot."""

    idx_mapping_np: np.ndarray
    need_sampled_mask: np.ndarray
    gen_at_receive_np: np.ndarray


@dataclass
class PendingRelay:
    """One batch's posted receives on a non-last stage, and which batch it was."""

    ordinal: int
    receives: list
    rows: MicroBatch
    step: int  # the engine step that scheduled it: its messages' headers say so (invariant 7)
    tensors: list = field(default_factory=list)  # what has been received so far: a retry never takes one twice


@dataclass
class RelayPayload:
    """One batch's payload as a non-last stage applies it: rows whose slot is -1 are skipped."""

    idx_mapping: np.ndarray
    sampled_tokens: np.ndarray
    accept_lens: np.ndarray
    new_seq_lens: np.ndarray
    draft_tokens: np.ndarray | None


def mb_slot(ordinal: int, pp_size: int) -> int:
    """The micro-batch slot a payload is applied to: the slot of the batch it reports."""
    return ordinal % pp_size


class RelayHandler:
    def __init__(self, group, pp_size: int, max_num_reqs: int, num_speculative_steps: int,
                 pairing: Callable[[int, int], int] = mb_slot, with_drafts: bool = True):
        """``pairing``: the micro-batch slot a payload is applied to, from the ordinal of the
        batch it reports (the relay's ``PAIRING`` switch, resolved by its runner); ``with_drafts``: False when every stage drafts for itself (``replicated.py``)."""
        self.group, self.pp_size, self.last_rank = group, pp_size, pp_size - 1
        self.num_speculative_steps = num_speculative_steps
        self.with_drafts = with_drafts and num_speculative_steps > 0
        self.src = self.last_rank if group.rank == 0 else group.rank - 1  # who this stage hears from
        self.dst = group.rank + 1 if group.rank + 1 < self.last_rank else None  # who it forwards to
        self.req_idx_gen_np = np.zeros(max_num_reqs, dtype=np.int64)
        self.pairing = pairing
        self.reset_queue()

    def reset_queue(self) -> None:
        self.queue: deque[PendingRelay] = deque()
        self.mbs: list[MicroBatch | None] = [None] * self.pp_size
        self.num_batches = 0  # batches this stage has run: the next one's ordinal
        self.held: list[torch.Tensor] = []  # the last stage's sampled part, until its drafts
        self.held_step = -1  # the step of the batch it belongs to

    def on_req_idx_freed(self, req_idx: int) -> None:
        self.req_idx_gen_np[req_idx] += 1

    def reset(self) -> None:
        """Forget every pending payload (the engine aborted every request)."""
        self.reset_queue()
        if isinstance(self.group, InProcStageGroup):
            self.group.reset()

    # -- the last stage (called where V2's runner calls its PPHandler) -----------
    def broadcast(self, batch, sampled_tokens: np.ndarray, num_sampled: np.ndarray,
                  num_rejected: np.ndarray) -> None:
        """The sampled part of the payload: sent at once without drafts, else with them
        (``broadcast_drafts``), as one payload: SGLang's last stage drafts before it relays."""
        if compute_need_sampled_mask(batch) is None:
            return
        sampled = [torch.from_numpy(np.ascontiguousarray(sampled_tokens, dtype=np.int64)),
                   torch.from_numpy(np.stack([num_sampled, batch.seq_lens - num_rejected]).astype(np.int32))]
        self.held, self.held_step = sampled, batch.step
        if not self.with_drafts:
            self._send_payload([])

    def broadcast_drafts(self, batch, draft_tokens: np.ndarray) -> None:
        """``draft_tokens``: ``[num_reqs, k]``, the rows' next drafts in batch order."""
        if not self.with_drafts or compute_need_sampled_mask(batch) is None:
            return
        self._send_payload([torch.from_numpy(np.ascontiguousarray(draft_tokens, dtype=np.int64))])

    def _send_payload(self, drafts: list[torch.Tensor]) -> None:
        """Start the payload around the ring: to stage 0 only."""
        for tensor in self.held + drafts:
            send_checked(self.group, tensor, 0, RELAY_TAG, self.held_step)
        self.held = []

    # -- a non-last stage -------------------------------------------------------
    def receive(self, batch) -> None:
        """After this stage's forward of ``batch``: remember it in its micro-batch slot and
        post the receives for its payload, from the stage behind on the ring."""
        ordinal, self.num_batches = self.num_batches, self.num_batches + 1
        mask = compute_need_sampled_mask(batch)
        idx = batch.idx_mapping_np.copy()
        rows = MicroBatch(idx, mask if mask is not None else np.zeros(len(idx), dtype=bool),
                          self.req_idx_gen_np[idx].copy())
        self.mbs[mb_slot(ordinal, self.pp_size)] = rows
        if mask is None:
            return
        n, k = batch.num_reqs, self.num_speculative_steps
        shapes = [((n, k + 1), torch.int64), ((2, n), torch.int32)] + ([((n, k), torch.int64)] if self.with_drafts else [])
        receives = [post_checked(self.group, torch.empty(s, dtype=d), self.src, RELAY_TAG, batch.step)
                    for s, d in shapes]
        self.queue.append(PendingRelay(ordinal, receives, rows, batch.step))

    def get_prev_sampled_outputs(self, scheduled_slots: set[int]) -> list[RelayPayload]:
        """Take, oldest first, every payload this batch needs (V2's handler's name and rule: up to the
        newest one holding a slot scheduled now) and every payload whose micro-batch slot
        this batch will take over; forward each one on."""
        due = self.num_batches - self.pp_size  # this batch's ordinal, less pp_size
        gen = self.req_idx_gen_np
        newest = max((i for i, e in enumerate(self.queue)
                      if e.ordinal <= due or self._needs(e.rows, scheduled_slots, gen)), default=-1)
        for entry in list(self.queue)[: newest + 1]:  # all received before any leaves the queue (NotSentYet)
            entry.tensors.extend(r.take() for r in entry.receives[len(entry.tensors):])
        return [self._take(self.queue.popleft()) for _ in range(newest + 1)]

    @staticmethod
    def _needs(rows: MicroBatch, slots: set[int], gen: np.ndarray) -> bool:
        live = rows.need_sampled_mask & same_occupant(gen[rows.idx_mapping_np], rows.gen_at_receive_np)
        return any(int(s) in slots for s in rows.idx_mapping_np[live])

    def _take(self, entry: PendingRelay) -> RelayPayload:
        tensors = entry.tensors
        if self.dst is not None:
            for tensor in tensors:
                send_checked(self.group, tensor.clone(), self.dst, RELAY_TAG, entry.step)
        arrays = [t.numpy() for t in tensors]
        rows = self.mbs[self.pairing(entry.ordinal, self.pp_size)] or MicroBatch(np.zeros(0, np.int64),
                                                                                np.zeros(0, bool), np.zeros(0, np.int64))
        n = min(len(rows.idx_mapping_np), arrays[0].shape[0])  # a wrong pairing may not even have as many rows
        freed = ~same_occupant(self.req_idx_gen_np[rows.idx_mapping_np[:n]], rows.gen_at_receive_np[:n])
        idx = np.where(freed | ~rows.need_sampled_mask[:n], -1, rows.idx_mapping_np[:n])
        drafts = arrays[2][:n] if len(arrays) > 2 else None
        return RelayPayload(idx, arrays[0][:n], arrays[1][0, :n], arrays[1][1, :n], drafts)
