"""When each stage worked on each batch: the picture behind the batch queue.

An executor appends one ``StageSpan`` per (batch, stage) as the stage finishes
it. The in-process executor uses a logical clock (``clock="ticks"``: one pipeline
tick is one slot, so a stage that has no batch in a tick shows a bubble); the
multi-process executor measures ``time.perf_counter_ns`` in each worker,
relative to a common origin (``clock="seconds"``). vLLM has no such record: its
profiler traces play this part.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StageSpan:
    stage: int
    step: int  # the scheduler step that made the batch
    req_ids: tuple[str, ...]  # the requests in the batch
    start: float  # ticks or seconds since the timeline's origin
    end: float
    wait: float = 0.0  # time spent waiting to receive the batch before ``start``


@dataclass
class Timeline:
    num_stages: int
    clock: str  # "ticks" or "seconds"
    spans: list[StageSpan] = field(default_factory=list)

    def span(self, step: int, stage: int) -> StageSpan:
        return next(s for s in self.spans if s.step == step and s.stage == stage)

    @property
    def makespan(self) -> float:
        if not self.spans:
            return 0.0
        return max(s.end for s in self.spans) - min(s.start for s in self.spans)

    def idle_fraction(self, stage: int) -> float:
        """Share of the makespan in which ``stage`` did no work (its bubbles)."""
        if not self.makespan:
            return 0.0
        busy = sum(s.end - s.start for s in self.spans if s.stage == stage)
        return 1.0 - busy / self.makespan
