"""Runs that never end, as findings: a deadlock or a scheduler making no progress.

vLLM twin: none. vLLM's hangs show as a stalled server: a stage waiting on a message no stage
will send (minispec's relay designs under async scheduling at three stages), or a scheduler
whose queues end every step as they began while work is pending (vLLM PR #57104: with a KV
connector and MTP under KV pressure, a request admitted and then refused its MTP block leaves
``waiting`` and ``skipped_waiting`` unchanged, step after step; from reading the thread).
``drive(engine, patience)`` runs an engine step by step, as ``EngineCore.run`` does, and
turns either into a ``Stall`` exception instead of an exception from deep inside or a loop
that never returns. Left out: the multi-process executor's hangs (a timeout there,
``minispec.v1.executor.multiproc_executor``), and livelocks slower than ``patience`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from minispec.distributed.parallel_state import NotSentYet


class StallKind(StrEnum):
    DEADLOCK = "deadlock"
    NO_PROGRESS = "no progress"


@dataclass
class Stall(Exception):
    kind: StallKind
    step: int  # the engine step where it showed
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} at engine step {self.step}: {self.detail}"


def patience_for(max_model_len: int, pp: int) -> int:
    """Steps without a token or a finish that no healthy run takes: a whole prompt recomputed
    one token a step, plus every stage's batch in flight, twice over."""
    return 2 * (max_model_len + 2 * pp) + 8


def drive(engine, patience: int) -> None:
    """Run ``engine`` until every request finishes; raise ``Stall`` if a stage waits on a
    message never sent (deadlock) or ``patience`` engine steps pass with requests unfinished
    and none generating a token or finishing (no progress)."""
    engine.finished, quiet, progress = [], 0, _progress(engine)
    while engine.has_work():
        try:
            engine.step_with_batch_queue()
        except NotSentYet as wait:
            raise Stall(StallKind.DEADLOCK, engine.engine_step, f"{wait}; no stage can run") from None
        now = _progress(engine)
        quiet = 0 if now > progress else quiet + 1
        progress = now
        if quiet >= patience:
            raise Stall(StallKind.NO_PROGRESS, engine.engine_step, _no_progress(engine, quiet))


def _progress(engine) -> int:
    """Tokens generated and requests finished so far: never falls, rises when anything is done."""
    live = sum(r.num_output_tokens for r in engine.scheduler.requests.values())
    return live + sum(r.num_output_tokens + 1 for r in engine.finished)


def _no_progress(engine, quiet: int) -> str:
    sched = engine.scheduler
    waiting = ", ".join(r.request_id for r in sched.waiting) or "none"
    running = ", ".join(r.request_id for r in sched.running) or "none"
    return (f"{quiet} engine steps without a token generated or a request finished, work pending "
            f"(waiting: {waiting}; running: {running}; {len(engine.batch_queue)} batches in flight; "
            f"{sched.kv_cache_manager.num_free_blocks} of {sched.kv_cache_manager.num_blocks} KV blocks free)")
