"""Watching Model Runner V2 under pipeline parallelism: what the last stage broadcast
after each step, and what a stage's slots hold at a chosen moment.

Both listen to the stages' ``PPHandler`` (``PPHandler.subscribe``, the engine's listener
on its broadcast; the engine's own code runs unchanged). ``watch_broadcasts(llm)`` keeps
each message the last stage sends as a ``BroadcastRecord``. ``watch_slots(llm, stage)``
copies a stage's slots (``RequestState``) once per step at the moment its handler has
the batch in hand (the last stage as it sends; any other stage as it posts its receives,
right after its forward): the stage has applied earlier broadcasts and built its inputs,
and its slots hold what that step's inputs were built from. A step is the one the stage
last recorded in the trace: every stage records its rows before its forward and runs
steps in order. ``run_watched(schedule)`` does both on a run of a
``lab.experiments.schedule.Schedule`` under Model Runner V2. The renderers are in
``minispec.lab.viz.slots``.

vLLM twin: none (a lab instrument; vLLM's broadcast is in ``vllm/v1/worker/gpu/pp_utils.py``).
Left out: the "mp" and torchrun executors, whose stages live in other processes; a batch
that samples nothing (a prefill chunk before the last), for which nothing is broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from minispec.lab.experiments.schedule import Schedule, build_llm, run_recorded
from minispec.v1.worker.gpu.model_runner import GPUModelRunner
from minispec.v1.worker.gpu.pp_utils import PPMessage, PPMessageKind


@dataclass(frozen=True)
class BroadcastRecord:
    """What the last stage sent the other stages after one step's batch, rows in batch order."""

    step: int
    req_ids: tuple[str, ...]
    slots: tuple[int, ...]  # the last stage's slot (req_idx) for each row
    sampled_tokens: np.ndarray  # [n, k + 1], padded with -1
    num_sampled: np.ndarray
    num_rejected: np.ndarray
    draft_tokens: np.ndarray | None = None  # [n, k]; None without drafts

    def row(self, req_id: str) -> int:
        return self.req_ids.index(req_id)


def _handler(llm, stage: int, caller: str, what: str):
    """``stage``'s ``PPHandler`` in an in-process Model Runner V2 pipeline, or a clear error."""
    runners = llm.stage_runners()
    if not 0 <= stage < len(runners) or not isinstance(runners[stage], GPUModelRunner):
        raise ValueError(f"{caller}: {what}: expected a stage of an in-process Model Runner V2 engine "
                         f"(model_runner='v2') with {len(runners)} stage(s)")
    if llm.trace is None:
        raise ValueError(f"{caller}: expected an LLM that records (record=True): steps are read from its trace")
    if runners[stage].pp_handler is None:
        raise ValueError(f"{caller}: this engine has one stage, so nothing is broadcast")
    return runners[stage], runners[stage].pp_handler


def recorded_step(trace, stage: int) -> int:
    """The step ``stage`` is running: the last it recorded (it records before its forward)."""
    return max(s.step for s in trace.steps if any(st.stage == stage for st in s.stages))


def watch_broadcasts(llm) -> list[BroadcastRecord]:
    """A list that fills with one record per broadcast of ``llm``'s last stage, as the engine runs."""
    last = len(llm.stage_runners()) - 1
    _, handler = _handler(llm, last, "watch_broadcasts", "the last stage")
    records: list[BroadcastRecord] = []

    def heard(message: PPMessage) -> None:
        if message.kind is PPMessageKind.SAMPLED:
            tokens, counts = message.tensors
            records.append(BroadcastRecord(recorded_step(llm.trace, last), message.req_ids, message.slots, tokens,
                                           counts[0], counts[1]))
        elif message.kind is PPMessageKind.DRAFTS:
            records[-1] = replace(records[-1], draft_tokens=message.tensors[0])

    handler.subscribe(heard)
    return records


@dataclass(frozen=True)
class SlotRow:
    """One occupied slot of a stage's ``RequestState``."""

    slot: int
    req_id: str
    token_ids: tuple[int, ...]  # all_token_ids[slot, :total_len]
    num_computed_tokens: int  # the runner's own count
    last_sampled_token: int
    draft_tokens: tuple[int, ...]


@dataclass(frozen=True)
class SlotSnapshot:
    step: int
    stage: int
    rows: tuple[SlotRow, ...]  # by slot

    def slot_of(self, req_id: str) -> SlotRow:
        return next(r for r in self.rows if r.req_id == req_id)


def snapshot(states, step: int, stage: int) -> SlotSnapshot:
    """A copy of every occupied slot of ``states`` (a ``RequestState``)."""
    rows = tuple(SlotRow(slot, req_id, tuple(states.token_ids(slot)), int(states.num_computed_tokens[slot]),
                         int(states.last_sampled_tokens[slot]), tuple(states.draft_tokens[slot].tolist()))
                 for slot, req_id in sorted(states.index_to_req_id.items()))
    return SlotSnapshot(step, stage, rows)


def watch_slots(llm, stage: int) -> dict[int, SlotSnapshot]:
    """Step -> ``stage``'s slots as that step's inputs were built, filled as the engine runs."""
    runner, handler = _handler(llm, stage, "watch_slots", f"stage={stage}")
    snapshots: dict[int, SlotSnapshot] = {}

    def heard(message: PPMessage) -> None:
        if message.kind is not PPMessageKind.DRAFTS:  # SAMPLED on the last stage, POSTED on the others
            step = recorded_step(llm.trace, stage)
            snapshots[step] = snapshot(runner.req_states, step, stage)

    handler.subscribe(heard)
    return snapshots


@dataclass
class Watched:
    """A finished V2 run: its ``Trace``, every broadcast, and one stage's slots per step."""

    trace: object
    broadcasts: list[BroadcastRecord]
    slots: dict[int, SlotSnapshot]

    def broadcast(self, step: int) -> BroadcastRecord:
        return next(b for b in self.broadcasts if b.step == step)


def run_watched(schedule: Schedule, stage: int = 0) -> Watched:
    """Run ``schedule`` under Model Runner V2 with its broadcasts and ``stage``'s slots watched."""
    llm = build_llm(schedule, model_runner="v2")
    broadcasts, slots = watch_broadcasts(llm), watch_slots(llm, stage)
    return Watched(run_recorded(llm), broadcasts, slots)
