"""Engine events: the steps of one engine step, typed, so code reads fields, not words.

The engine yields an ``Event`` when it schedules a batch and when it updates the
scheduler with a batch's output; the executors yield one each time a stage has
run its forward pass for a batch; the trace (``minispec.instruments.trace``)
records the same type in the order things happened. ``str(event)`` gives the
words a person reads ("schedule step 2", "stage 0 runs step 2", "update step 2").

vLLM has no such stream: its engine steps are not taken one event at a time. Its
nearest type, ``EngineCoreEvent`` (0.9.2 ``vllm/v1/engine/__init__.py`` 74-96),
timestamps a request being queued, scheduled or preempted, for metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventKind(StrEnum):
    """What an engine ``Event`` is: a batch scheduled, one stage's forward pass, or the update
    with its output; a field to compare, so code never matches an event's words."""

    SCHEDULE = "schedule"  # the scheduler made a batch and the executor took it
    STAGE = "stage"  # one stage ran its forward pass for a batch
    UPDATE = "update"  # the batch's output went back to the scheduler (update_from_output)


@dataclass(frozen=True)
class Event:
    """One thing the engine did, typed: its ``kind``, the scheduler ``step`` that made the batch,
    and for a stage's forward pass the ``stage``. ``str(event)`` says it in words."""

    kind: EventKind
    step: int  # the scheduler step that made the batch
    stage: int | None = None  # which stage, for STAGE events only

    def __post_init__(self):
        if (self.stage is None) == (self.kind is EventKind.STAGE):
            raise ValueError(f"Event({self.kind!s}, step={self.step}, stage={self.stage!r}): expected a stage "
                             "for a stage event and none for the others")

    def __str__(self) -> str:
        if self.kind is EventKind.STAGE:
            return f"stage {self.stage} runs step {self.step}"
        return f"{self.kind} step {self.step}"
