"""vLLM 0.9.2's own ``Scheduler`` in minispec's loop: its ``SchedulerOutput`` objects
against minispec's, schedule by schedule.

``check_scheduler(run)`` replays each captured run's scheduler calls into vLLM's
``Scheduler`` (``scheduler_worker.py``, one subprocess for all runs): the same
requests added at the same moments, ``schedule()`` called as often, and
``update_from_output`` fed minispec's own ``ModelRunnerOutput`` objects. A run is
compared up to its first differing schedule, since after it minispec's model
outputs no longer answer what vLLM scheduled.

vLLM twin: none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from reference import environment
from reference.compare import buffer_difference

WORKER = Path(__file__).with_name("scheduler_worker.py")
RELEASE = "0.9.2"
# Compared field by field, in this order; "new" without sampling params, which
# vLLM's Scheduler passes through untouched.
FIELDS = ("num_scheduled_tokens", "scheduled_spec_decode_tokens", "new", "cached", "finished_req_ids")
# Both preempted the same requests (as sets: minispec may preempt one again where vLLM does
# not, which shows later), one of them with a batch in flight, and part after: 0.9.2's
# update_from_output walks only its running requests (0.9.2 vllm/v1/core/sched/scheduler.py 756-762),
# so the output in flight of a request it preempted is dropped and the request may resume before it
# is back; minispec delivers that output and resumes after it, as 0.30.0 does since PR #48245.
STALE_OUTPUT_DROPPED = "0.9.2 dropped the output in flight of a request both preempted"


@dataclass(frozen=True)
class ScheduleDifference:
    run: str
    step: int
    field: str
    where: str
    minispec: object
    vllm: object
    # (request, was in flight) vLLM preempted in this run up to here; a preemption
    # in an empty schedule shows in no output, so the difference can come later
    vllm_preempted: tuple[tuple[str, bool], ...] = ()
    vllm_drafted: tuple[str, ...] = ()  # requests vLLM scheduled drafts for in this schedule
    minispec_preempted: tuple[str, ...] = ()  # requests minispec preempted in this run up to here

    @property
    def kind(self) -> str:
        """The documented departure of minispec's scheduler (its module docstring)
        this difference comes from, or "undocumented"."""
        if any(in_flight for _, in_flight in self.vllm_preempted):
            if {r for r, _ in self.vllm_preempted} == set(self.minispec_preempted):
                return STALE_OUTPUT_DROPPED
            return "vLLM preempted a request in flight"
        preempted = {r for r, _ in self.vllm_preempted}
        if self.field == "num_scheduled_tokens" and self.where[len("request "):] in preempted & set(self.vllm_drafted):
            return "vLLM kept a preempted request's drafts"
        return "undocumented"

    def describe(self) -> str:
        at = f" {self.where}" if self.where else ""
        text = f"{self.run}, step {self.step}: {self.field}{at}: minispec {self.minispec} vs vLLM {self.vllm}"
        if self.vllm_preempted:
            text += " (vLLM preempted " + ", ".join(f"{r}{' in flight' if f else ''}" for r, f in self.vllm_preempted) + ")"
        return text


def comparable(output: dict) -> dict:
    """minispec's schedule as plain data, without what vLLM's Scheduler does not
    produce (sampling params it passes through, 0.14.0's num_output_tokens)."""
    out = json.loads(json.dumps(output))
    for n in out["new"]:
        n.pop("sampling_params")
    out["cached"].pop("num_output_tokens")
    return out


def schedule_difference(run: str, step: int, mine: dict, theirs: dict) -> ScheduleDifference | None:
    for name in FIELDS:
        if name == "cached":
            for column in mine["cached"]:
                d = buffer_difference(column, mine["cached"][column], theirs["cached"][column])
                if d is not None:
                    return ScheduleDifference(run, step, f"cached.{column}", *d)
            continue
        d = buffer_difference(name, mine[name], theirs[name])
        if d is not None:
            return ScheduleDifference(run, step, name, *d)
    return None


@dataclass
class SchedulerRow:
    preset: str
    scenario: str
    runs: int
    runs_equal: int
    equal: int  # schedules equal before each run's first difference, added up
    total: int  # minispec's schedule() calls, added up
    differences: list[ScheduleDifference]  # each run's first, if any
    dropped_finished: int = 0  # finished ids vLLM put in a schedule its engine does not execute

    @property
    def first(self) -> ScheduleDifference | None:
        return self.differences[0] if self.differences else None

    @property
    def kinds(self) -> dict[str, int]:
        kinds: dict[str, int] = {}
        for d in self.differences:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        return kinds

    @property
    def ok(self) -> bool:
        """Every run equal up to a documented departure."""
        return "undocumented" not in self.kinds


def _job(capture) -> dict:
    events = capture.scheduler_events
    longest = max((len(d) for e in events if e["kind"] == "schedule"
                   for d in e["output"]["scheduled_spec_decode_tokens"].values()), default=0)
    # vLLM's Scheduler reads num_speculative_tokens only for its statistics (off here)
    return {"config": dict(capture.scheduler_config, num_speculative_tokens=longest), "events": events}


def run_vllm_scheduler(captures: dict) -> dict[str, list[dict]]:
    return environment.run_worker(RELEASE, WORKER, {"jobs": {name: _job(c) for name, c in captures.items()}})


def check_scheduler(run) -> SchedulerRow:
    """``run`` is a ``run.ScenarioRun``."""
    results = run_vllm_scheduler(run.captures)
    row = SchedulerRow(run.preset, run.scenario, len(run.captures), 0, 0, 0, [])
    for name, capture in run.captures.items():
        mine = [e for e in capture.scheduler_events if e["kind"] == "schedule"]
        row.total += len(mine)
        difference, preempted, ours_preempted = None, (), ()
        for theirs, ours in zip(results[name], mine):
            row.dropped_finished += len(theirs["output"].pop("dropped_finished_req_ids", ()))
            preempted += tuple((p["req_id"], p["in_flight"]) for p in theirs["output"].pop("preempted"))
            ours_preempted += tuple(ours["preempted"])
            difference = schedule_difference(name, ours["step"], comparable(ours["output"]), theirs["output"])
            if difference:
                drafted = tuple(theirs["output"]["scheduled_spec_decode_tokens"])
                difference = replace(difference, vllm_preempted=preempted, vllm_drafted=drafted,
                                     minispec_preempted=ours_preempted)
                row.differences.append(difference)
                break
            row.equal += 1
        row.runs_equal += difference is None and len(results[name]) == len(mine)
    return row
