"""Async scheduling watched: what the scheduler holds for a step it scheduled ahead (its
placeholders), and what stage 0 put in their place when it ran that step.

``run_ahead(schedule)`` runs a ``Schedule`` under Model Runner V2 with
``async_scheduling=True`` (minispec's ``AsyncScheduler``,
``minispec/v1/core/sched/async_scheduler.py``), one engine event at a time, and keeps, for
every request of every step scheduled:

* ``Scheduled``: the scheduler's side as it scheduled the step: which steps were in flight
  (scheduled, output not back yet), the request's tokens it holds, how many it scheduled,
  its ``num_output_placeholders``, and the drafts it scheduled;
* ``Embedded``: stage 0's slot for the request when it ran the step (listened to through
  ``PPHandler.subscribe``: the POSTED message comes right after stage 0's forward, while its
  slots still hold what the inputs were built from); None when the step samples nothing;
* ``returned``: the tokens the step's output appended to the request, at its update.

It reads the scheduler and stage 0 directly, at the moment each step is scheduled and run
(a trace keeps what the invariants need, not the scheduler's view before the outputs are
back); the run checks its outputs against plain greedy decoding, and the checked transport
(invariant 7) runs as always.

vLLM twin: none (a lab instrument; vLLM's scheduler is ``vllm/v1/core/sched/async_scheduler.py``).
Left out: the "mp" and torchrun executors, whose stages live in other processes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from minispec.instruments.events import EventKind
from minispec.lab.experiments.schedule import Schedule, build_llm, schedule_reference
from minispec.v1.worker.gpu.pp_utils import PPMessage, PPMessageKind


@dataclass(frozen=True)
class Scheduled:
    """The scheduler's side of one request in one step, as it scheduled it."""

    step: int
    in_flight: tuple[int, ...]  # steps whose output was not back, this one included
    known_tokens: tuple[int, ...]  # the request's tokens the scheduler holds (all_token_ids)
    num_scheduled_tokens: int
    num_output_placeholders: int  # tokens scheduled whose values it does not know yet
    drafts: tuple[int, ...]  # scheduled_spec_decode_tokens


@dataclass(frozen=True)
class Embedded:
    """Stage 0's slot for the request when it ran the step."""

    last_sampled_token: int
    draft_tokens: tuple[int, ...]


@dataclass(frozen=True)
class AheadStep:
    req_id: str
    scheduled: Scheduled
    embedded: Embedded | None  # None: the step samples nothing for it (a prefill chunk before the last)
    returned: tuple[int, ...]  # the tokens its output appended, at its update


@dataclass(frozen=True)
class AheadRun:
    steps: tuple[AheadStep, ...]  # in the order scheduled
    max_concurrent_batches: int
    outputs: dict[str, list[int]]
    equals_greedy: bool  # every output equals plain greedy decoding

    def step(self, step: int, req_id: str) -> AheadStep:
        for s in self.steps:
            if (s.scheduled.step, s.req_id) == (step, req_id):
                return s
        raise ValueError(f"AheadRun.step: request {req_id!r} was not scheduled at step {step}")

    def first_decode(self, req_id: str) -> AheadStep:
        """The first step that schedules drafts for ``req_id``."""
        return next(s for s in self.steps if s.req_id == req_id and s.scheduled.drafts)


def _listen_to_stage_0(llm, embedded: dict) -> None:
    runner = llm.stage_runners()[0]
    if runner.pp_handler is None:
        raise ValueError("run_ahead: expected a schedule with at least two stages: with one, nothing is broadcast")
    states = runner.req_states

    def heard(message: PPMessage) -> None:
        if message.kind is PPMessageKind.POSTED:
            for req_id, slot in zip(message.req_ids, message.slots):
                embedded[message.step, req_id] = Embedded(int(states.last_sampled_tokens[slot]),
                                                          tuple(states.draft_tokens[slot].tolist()))

    runner.pp_handler.subscribe(heard)


def run_ahead(schedule: Schedule, faults: str | None = None) -> AheadRun:
    """Run ``schedule`` with async scheduling, watched (``faults``: a Model Runner V2 preset, whose
    error propagates: the transport's ``MessageMismatch``, for one)."""
    if schedule.temperature != 0:
        raise ValueError(f"run_ahead: expected a greedy schedule (temperature=0), got {schedule.temperature}")
    llm = build_llm(replace(schedule, async_scheduling=True), model_runner="v2", faults=faults, record=False)
    engine, embedded = llm.engine, {}
    _listen_to_stage_0(llm, embedded)
    scheduled: list[tuple[str, Scheduled]] = []
    requests, returned, seen = {}, {}, {}  # seen: how many of its tokens each update had appended to
    for event in engine.iter_events():
        if event.kind is EventKind.SCHEDULE:
            out = engine.batch_queue[-1].scheduler_output
            in_flight = tuple(b.scheduler_output.step for b in engine.batch_queue)
            for req_id, n in out.num_scheduled_tokens.items():
                request = requests.setdefault(req_id, engine.scheduler.requests[req_id])
                seen.setdefault(req_id, request.num_tokens)
                scheduled.append((req_id, Scheduled(out.step, in_flight, tuple(request.all_token_ids), n,
                                                    request.num_output_placeholders,
                                                    tuple(out.scheduled_spec_decode_tokens.get(req_id, ())))))
        elif event.kind is EventKind.UPDATE:
            for req_id, step in ((r, s.step) for r, s in scheduled if s.step == event.step):
                tokens = requests[req_id].all_token_ids
                returned[step, req_id], seen[req_id] = tuple(tokens[seen[req_id]:]), len(tokens)
    steps = tuple(AheadStep(req_id, s, embedded.get((s.step, req_id)), returned[s.step, req_id])
                  for req_id, s in scheduled)
    outputs = {r: list(requests[r].output_token_ids) for r in sorted(requests)}
    return AheadRun(steps, engine.max_concurrent_batches, outputs, outputs == schedule_reference(schedule))
