"""What the engine may ask of an executor (vLLM: ``vllm/v1/executor/abstract.py``).

An executor takes each scheduled batch (``execute_model``, returning a
``PendingBatch``), runs it through every stage and completes it when the engine waits
for it (``wait``, yielding an ``Event`` as each stage's forward is done, so a notebook
can step through it). It owns its stages and their recovery: ``abort_all`` forgets every
batch in flight and every request a stage holds; ``check_health`` raises if it cannot
take work; ``shutdown`` stops it; ``stage_runners`` hands over in-process stages for
``LLM.stage_runners``. ``Executor.get_class(vllm_config)`` picks the class from
``distributed_executor_backend``, as vLLM does. vLLM has no abort on the executor. Left
out: ``collective_rpc``, KV-cache sizing, profiling, LoRA, sleep mode. Fidelity to vLLM:
``docs/fidelity/engine_and_executors.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Iterator

from minispec.instruments.events import Event
from minispec.instruments.timeline import Timeline
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.outputs import ModelRunnerOutput


@dataclass(eq=False)  # compared by identity: executors find a batch in their queue
class PendingBatch:
    """A batch the executor has taken and not yet completed (vLLM: a ``Future``)."""

    scheduler_output: SchedulerOutput
    output: ModelRunnerOutput | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.output is not None


class Executor(ABC):
    timeline: Timeline  # when each stage worked on each batch
    backend: ClassVar[str]  # the distributed_executor_backend it serves ("uni", "mp", "torchrun")
    _classes: ClassVar[dict[str, type[Executor]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "backend" in cls.__dict__:
            Executor._classes[cls.backend] = cls

    @staticmethod
    def get_class(vllm_config) -> type[Executor]:
        """The executor class for ``vllm_config.parallel_config.distributed_executor_backend``."""
        backend = vllm_config.parallel_config.distributed_executor_backend
        if backend not in Executor._classes:
            raise ValueError(f"distributed_executor_backend={backend!r}: expected one of {sorted(Executor._classes)}")
        return Executor._classes[backend]

    @abstractmethod
    def execute_model(self, scheduler_output: SchedulerOutput) -> PendingBatch:
        """Take one batch; it is done once ``wait`` has run it through every stage."""

    @abstractmethod
    def wait(self, batch: PendingBatch) -> Iterator[Event]:
        """Run the pipeline until ``batch`` is done, yielding each stage forward as it ends."""

    @abstractmethod
    def abort_all(self) -> None:
        """Forget every batch in flight and every request any stage holds (the engine
        has aborted them all). Safe to call again if it was itself interrupted."""

    def stage_runners(self) -> list:
        """The stages' runners, first stage first, where they are objects in this process
        (the in-process executor's; vLLM reaches its workers through ``collective_rpc``)."""
        raise ValueError(f"stage_runners: {type(self).__name__}'s stages live in other processes: expected "
                         "the in-process executor (distributed_executor_backend='uni')")

    @abstractmethod
    def check_health(self) -> None:
        """Raise if this executor cannot take work."""

    @abstractmethod
    def shutdown(self) -> None:
        """Stop the stages that run in other processes (they refuse work from then on)."""
