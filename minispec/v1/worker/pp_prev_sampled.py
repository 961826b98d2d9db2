"""V1 under pipeline parallelism with async scheduling: the last stage's broadcast of the
previous sampled tokens (vLLM 0.30.0: ``vllm/v1/worker/gpu_model_runner.py``,
``_pp_broadcast_prev_sampled_token_ids`` and
``_pp_receive_prev_sampled_token_ids_to_input_batch``).

A request is scheduled again before its output is back, so the scheduler cannot relay
what was sampled: the last stage broadcasts it, and each non-last stage applies it at
the start of a step, before ``_update_states``. ``PrevSampledLayout`` carries every
token sampled, the counts and the next drafts, where vLLM sends one column: **minispec's
fix where no release has one** (preset ``v1-pp-async-column-0`` puts the column back).
In one process a receive not sent yet raises ``NotSentYet`` and the executor retries.
Left out: CUDA streams and the GPU scatter of ``prev_sampled_token_ids`` into
``input_ids``, ``discard_request_mask``, torchrun's ``broadcast_pp_output`` mode.
Fidelity to vLLM: ``docs/fidelity/model_runner_v1.md``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.distributed.parallel_state import InProcStageGroup, post_checked, send_checked

# Its own tag (the executors use 1-4, Model Runner V2's broadcast 17).
PREV_SAMPLED_TAG = 19


@dataclass(frozen=True)
class PrevSampledLayout:
    """What the broadcast carries: the sampled tokens' width, and whether the counts and the
    next drafts travel too. Both sides build it from the same function (a switch)."""

    width: int
    counts: bool
    num_drafts: int  # the drafts message's width; 0: none sent

    def shapes(self, n: int) -> list[tuple[tuple[int, int], torch.dtype]]:
        shapes = [((n, self.width), torch.int64)]
        if self.counts:
            shapes.append(((2, n), torch.int32))
        if self.num_drafts:
            shapes.append(((n, self.num_drafts), torch.int64))
        return shapes


def full_layout(num_speculative_tokens: int) -> PrevSampledLayout:
    """minispec's fix: all ``k + 1`` columns, the valid counts and the next drafts."""
    return PrevSampledLayout(num_speculative_tokens + 1, True, num_speculative_tokens)


@dataclass
class PendingPrevSampled:
    """One batch's posted receives on a non-last stage."""

    req_ids: list[str]
    samples: np.ndarray  # per row: does the batch sample for it
    receives: list
    tensors: list[np.ndarray] = field(default_factory=list)  # once taken


@dataclass
class PrevSampled:
    """One batch's broadcast, per sampling row: the tokens to append, and the next drafts
    (None: the layout carries none)."""

    tokens: dict[str, list[int]]
    drafts: dict[str, list[int]] | None
    rows: dict[str, int] = field(default_factory=dict)  # each request's row when the receive was posted


class PrevSampledBroadcast:
    def __init__(self, group, pp_size: int, layout: PrevSampledLayout):
        self.group, self.last_rank, self.layout = group, pp_size - 1, layout
        self.queue: deque[PendingPrevSampled] = deque()

    def reset(self) -> None:
        self.queue.clear()
        if isinstance(self.group, InProcStageGroup):
            self.group.reset()

    # -- the last stage -------------------------------------------------------
    def broadcast(self, step: int, sampled: list[list[int]], drafts: list[list[int]]) -> None:
        """``sampled``: per row, what the last stage emitted; ``drafts``: per row, what it proposed."""
        if not any(sampled):
            return
        n, layout = len(sampled), self.layout
        tokens = np.full((n, max(layout.width, 1)), -1, dtype=np.int64)
        for row, t in enumerate(sampled):
            tokens[row, : min(len(t), layout.width)] = t[: layout.width]
        messages = [tokens]
        if layout.counts:
            messages.append(np.array([[len(t) for t in sampled], [len(d) for d in drafts or [[]] * n]], np.int32))
        if layout.num_drafts:
            next_drafts = np.full((n, layout.num_drafts), -1, dtype=np.int64)
            for row, d in enumerate(drafts):
                next_drafts[row, : len(d)] = d
            messages.append(next_drafts)
        for message in messages:
            for dst in range(self.last_rank):
                send_checked(self.group, torch.from_numpy(message), dst, PREV_SAMPLED_TAG, step)

    # -- a non-last stage -----------------------------------------------------
    def receive(self, step: int, req_ids: list[str], samples: np.ndarray) -> None:
        """Post this batch's receives, right after this stage's forward of it."""
        if not samples.any():
            return
        receives = [post_checked(self.group, torch.empty(shape, dtype=dtype), self.last_rank, PREV_SAMPLED_TAG, step)
                    for shape, dtype in self.layout.shapes(len(req_ids))]
        self.queue.append(PendingPrevSampled(list(req_ids), samples.copy(), receives))

    def take_needed(self, scheduled: set[str]) -> list[PrevSampled]:
        """Oldest first, every entry up to the newest that holds a request in ``scheduled``.
        Each entry is taken whole before any leaves the queue, so ``NotSentYet`` leaves the
        queue as it was."""
        newest = max((i for i, e in enumerate(self.queue) if scheduled & set(e.req_ids)), default=-1)
        for entry in list(self.queue)[: newest + 1]:
            entry.tensors = entry.tensors or [r.take().numpy() for r in entry.receives]
        return [self._unpack(self.queue.popleft()) for _ in range(newest + 1)]

    def _unpack(self, entry: PendingPrevSampled) -> PrevSampled:
        tokens_np = entry.tensors[0]
        counts = entry.tensors[1] if self.layout.counts else None
        tokens, drafts, rows = {}, {} if self.layout.num_drafts else None, {}
        for row in np.flatnonzero(entry.samples):
            req_id = entry.req_ids[row]
            rows[req_id] = int(row)
            num_sampled = int(counts[0, row]) if counts is not None else 1
            tokens[req_id] = tokens_np[row, :num_sampled].tolist()
            if drafts is not None:
                drafts[req_id] = entry.tensors[2][row, : int(counts[1, row])].tolist()
        return PrevSampled(tokens, drafts, rows)
