"""Watching Model Runner V2 under pipeline parallelism: what the last stage broadcast
after each step, and what a stage's slots hold at a chosen moment.

``watch_broadcasts(llm)`` wraps, on the in-process engine's last stage only, the two
``PPHandler`` methods that send (``broadcast``, ``broadcast_drafts``) so each message is
also kept as a ``BroadcastRecord``. ``watch_slots(llm, stage)`` copies a stage's slots
(``RequestState``) once per step, after the stage has applied earlier broadcasts and
built its inputs, before its forward: what that step's inputs were built from. The
engine's own code runs unchanged. ``run_watched(schedule)`` does both on a run of a
``lab.runs.Schedule`` under Model Runner V2. The renderers are in
``minispec.lab.viz.slots``.

vLLM twin: none (a lab instrument; vLLM's broadcast is in ``vllm/v1/worker/gpu/pp_utils.py``).
Left out: the "mp" and torchrun executors, whose stages live in other processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minispec.lab.runs import Schedule, build_llm, run_recorded


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


def _last_runner(llm):
    runners = getattr(llm.engine.executor, "runners", None)
    if not runners or not hasattr(runners[-1], "pp_handler"):
        raise ValueError("watch_broadcasts: expected an in-process engine built with Model Runner V2 "
                         "(model_runner='v2') and pipeline_parallel_size > 1")
    if runners[-1].pp_handler is None:
        raise ValueError("watch_broadcasts: this engine has one stage, so nothing is broadcast")
    return runners[-1]


def watch_broadcasts(llm) -> list[BroadcastRecord]:
    """A list that fills with one record per broadcast of ``llm``'s last stage, as the engine runs."""
    runner = _last_runner(llm)
    handler, records, step = runner.pp_handler, [], {}
    execute, broadcast, broadcast_drafts = runner.execute_model, handler.broadcast, handler.broadcast_drafts

    def execute_model(scheduler_output, intermediate_tensors=None):
        step["now"] = scheduler_output.step
        return execute(scheduler_output, intermediate_tensors)

    def sent(batch, sampled_tokens, num_sampled, num_rejected):
        broadcast(batch, sampled_tokens, num_sampled, num_rejected)
        records.append(BroadcastRecord(step["now"], tuple(batch.req_ids), tuple(int(s) for s in batch.idx_mapping_np),
                                       sampled_tokens.copy(), num_sampled.copy(), num_rejected.copy()))

    def sent_drafts(batch, draft_tokens):
        broadcast_drafts(batch, draft_tokens)
        last = records[-1]
        records[-1] = BroadcastRecord(last.step, last.req_ids, last.slots, last.sampled_tokens, last.num_sampled,
                                      last.num_rejected, np.array(draft_tokens, copy=True))

    runner.execute_model, handler.broadcast, handler.broadcast_drafts = execute_model, sent, sent_drafts
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
    runners = getattr(llm.engine.executor, "runners", [])
    if not 0 <= stage < len(runners) or not hasattr(runners[stage], "req_states"):
        raise ValueError(f"watch_slots: stage={stage}: expected a stage of an in-process Model Runner V2 "
                         f"engine with {len(runners)} stage(s)")
    runner, snapshots = runners[stage], {}
    prepare = runner.prepare_inputs

    def prepare_inputs(scheduler_output):
        batch = prepare(scheduler_output)
        snapshots[scheduler_output.step] = snapshot(runner.req_states, scheduler_output.step, stage)
        return batch

    runner.prepare_inputs = prepare_inputs
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
