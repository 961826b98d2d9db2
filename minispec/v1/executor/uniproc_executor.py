"""An in-process pipeline: one ``GPUModelRunner`` per stage, one Python process.

vLLM runs each stage in its own worker process (``vllm/v1/executor/
multiproc_executor.py``) and sends hidden states between them with
``torch.distributed``. Here a stage is an object and the hand-off is a
function argument, which makes every stage event deterministic and steppable.

Time advances in *ticks*: in one tick every stage that has a batch waiting runs
it, oldest batch (the one furthest along) first, so a batch moves one stage per
tick and two batches can be on two stages at once -- the overlap a real
pipeline has. ``wait(batch)`` ticks until that batch has left the last stage.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

from minispec.instruments.timeline import StageSpan, Timeline
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.worker.gpu.pp_utils import bind_pp_groups
from minispec.v1.worker.gpu_worker import make_runner


@dataclass
class PipelineBatch:
    """A scheduled batch travelling through the stages (vLLM returns a Future)."""

    scheduler_output: SchedulerOutput
    executor: "UniProcExecutor"
    next_stage: int = 0
    carry: object = None  # IntermediateTensors between stages
    output: ModelRunnerOutput | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.output is not None


class UniProcExecutor:
    def __init__(self, config, recorder=None):
        self.runners = [make_runner(config, rank, recorder) for rank in range(config.pipeline_parallel_size)]
        # Model Runner V2's stages message each other (the last stage's broadcast); V1's ignore it.
        bind_pp_groups(self.runners)
        self.in_flight: deque[PipelineBatch] = deque()
        self.timeline = Timeline(config.pipeline_parallel_size, clock="ticks")
        self.num_ticks = 0

    def execute_model(self, scheduler_output: SchedulerOutput) -> PipelineBatch:
        batch = PipelineBatch(scheduler_output, self)
        self.in_flight.append(batch)
        return batch

    def wait(self, batch: PipelineBatch) -> Iterator[str]:
        """Advance the pipeline until ``batch`` is done, one event at a time."""
        while not batch.done:
            for stage, step in self.tick():
                yield f"stage {stage} runs step {step}"

    def discard_in_flight(self) -> None:
        """Forget the batches in the pipeline and every request each stage holds
        (after the engine aborted them all: see ``GPUModelRunner.drop_all_requests``)."""
        self.in_flight.clear()
        for runner in self.runners:
            runner.drop_all_requests()

    def shutdown(self) -> None:
        """Nothing to stop: every stage lives in this process."""

    def tick(self) -> list[tuple[int, int]]:
        """Run one pipeline tick; return the (stage, step) events it ran."""
        events, busy = [], set()
        for batch in list(self.in_flight):  # oldest first: FIFO on every stage
            stage = batch.next_stage
            if stage in busy:
                continue
            busy.add(stage)
            events.append(self._run_stage(batch, stage))
        self.num_ticks += 1
        return events

    def _run_stage(self, batch: PipelineBatch, stage: int) -> tuple[int, int]:
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
        return stage, out.step
