"""Every pipeline stage in one process: one ``GPUModelRunner`` per stage (vLLM 0.13.0:
``vllm/v1/executor/uniproc_executor.py``, ``UniProcExecutor``).

vLLM's ``UniProcExecutor`` runs one worker and has no pipeline; minispec's runs every
stage here, each an object handing the next a function argument, so every stage event is
deterministic and steppable (``runners`` for the notebooks). Time advances in *ticks*:
each stage with a batch waiting runs it, oldest batch first, so a batch moves one stage
per tick and two batches can be on two stages at once, as in a real pipeline.
``wait(batch)`` ticks until it has left the last stage; a stage waiting for a message
not sent yet sits a tick out. Recovery is plain: ``abort_all`` gives every stage a fresh
start, and ``check_health`` has nothing to check. Left out: vLLM's worker wrapper and
its RPCs (``collective_rpc``): the executor calls each runner directly. Fidelity to
vLLM: ``docs/fidelity/engine_and_executors.md``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterator

from minispec.distributed.parallel_state import InProcStageGroup, NotSentYet
from minispec.instruments.events import Event, EventKind
from minispec.instruments.timeline import StageSpan, Timeline
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.executor.abstract import Executor, PendingBatch
from minispec.v1.worker.gpu_worker import make_runner


@dataclass(eq=False)
class PipelineBatch(PendingBatch):
    """A scheduled batch travelling through the stages."""

    next_stage: int = 0
    carry: object = None  # IntermediateTensors between stages


class UniProcExecutor(Executor):
    backend = "uni"

    def __init__(self, config, recorder=None):
        self.runners = [make_runner(config, rank, recorder) for rank in range(config.pipeline_parallel_size)]
        # Every design takes its view of one in-process group (WorkerBase.bind_pp_group):
        # the last stage's broadcast goes over it (Model Runner V2; V1 under async scheduling).
        group = InProcStageGroup(0)
        for rank, runner in enumerate(self.runners):
            runner.bind_pp_group(group.for_rank(rank))
        self.in_flight: deque[PipelineBatch] = deque()
        self.timeline = Timeline(config.pipeline_parallel_size, clock="ticks")
        self.num_ticks = 0

    def execute_model(self, scheduler_output: SchedulerOutput) -> PipelineBatch:
        batch = PipelineBatch(scheduler_output)
        self.in_flight.append(batch)
        return batch

    def wait(self, batch: PipelineBatch) -> Iterator[Event]:
        while not batch.done:
            yield from self.tick()

    def abort_all(self) -> None:
        self.in_flight.clear()
        for runner in self.runners:
            runner.drop_all_requests()

    def stage_runners(self) -> list:
        return list(self.runners)

    def check_health(self) -> None:
        """Every stage lives in this process: if it runs, they do."""

    def shutdown(self) -> None:
        """Nothing to stop: every stage lives in this process."""

    def tick(self) -> list[Event]:
        """Run one pipeline tick; return the stage events it ran. A stage waiting for a
        message not sent yet (``NotSentYet``) sits this tick out, as it would wait on
        gloo; if no stage could run, nothing ever will, and the wait is raised."""
        events, busy, waiting = [], set(), None
        for batch in list(self.in_flight):  # oldest first: FIFO on every stage
            stage = batch.next_stage
            if stage in busy:
                continue
            busy.add(stage)
            try:
                self._run_stage(batch, stage)
            except NotSentYet as wait:
                waiting = wait
                continue
            events.append(Event(EventKind.STAGE, batch.scheduler_output.step, stage))
        if waiting is not None and not events:
            raise waiting
        self.num_ticks += 1
        return events

    def _run_stage(self, batch: PipelineBatch, stage: int) -> None:
        runner = self.runners[stage]
        carry = batch.carry.to(runner.device) if batch.carry is not None else None
        out = batch.scheduler_output
        result = runner.execute_model(out, carry)
        self.timeline.spans.append(StageSpan(stage, out.step, tuple(out.num_scheduled_tokens), self.num_ticks,
                                             self.num_ticks + 1))
        batch.next_stage += 1
        if runner.is_last_rank:
            batch.output, batch.carry = result, None
            self.in_flight.remove(batch)
        else:
            batch.carry = result
