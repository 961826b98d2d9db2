"""The scheduler's switch and its fault preset (minispec's own, as every switch is: vLLM
ships each fix and never a switch back to the fault; what a switch is:
``minispec.v1.worker.switches``).

``STALE_OUTPUT_V1``, ``STALE_OUTPUT_V2``: what ``Scheduler.update_from_output`` does
with the output of a batch in flight when its request was preempted. The fix,
``deliver_stale_output``, delivers it as vLLM's scheduler does
(``vllm/v1/core/sched/scheduler.py``, the file it switches); the fault,
``drop_stale_output`` (preset ``stale-output-dropped``), discards it, so the token is
sampled again: the work is done twice (invariant 8 names it). Declared for each design
the preset was checked on (``Design.stale_output``); it lives here so the engine's core
imports no switch. Fidelity to vLLM: ``docs/fidelity/designs.md``.
"""

from __future__ import annotations

from minispec.v1.core.sched.scheduler import deliver_stale_output
from minispec.v1.worker.switches import ModelRunner, Switch, SwitchPreset

__all__ = ["STALE_OUTPUT_V1", "STALE_OUTPUT_V2", "SchedulerFaultPreset", "deliver_stale_output", "drop_stale_output"]


def drop_stale_output(generated: list[int]) -> list[int]:
    """stale-output-dropped (vllm-project/vllm-gaudi#1803): nothing of it is kept."""
    return []


STALE_OUTPUT_V1 = Switch("stale_output", ModelRunner.V1, drop_stale_output)
STALE_OUTPUT_V2 = Switch("stale_output", ModelRunner.V2, drop_stale_output)


class SchedulerFaultPreset(SwitchPreset):
    """The ``faults=`` preset of the scheduler, for V1 and Model Runner V2."""

    STALE_OUTPUT_DROPPED = "stale-output-dropped", (STALE_OUTPUT_V1, STALE_OUTPUT_V2)
