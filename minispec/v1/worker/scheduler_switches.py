"""The scheduler's switch and its fault preset (minispec's own, as every switch is: vLLM ships
each fix and never a switch back to the fault; what a switch and a preset are:
``minispec.v1.worker.switches``).

* ``STALE_OUTPUT_V1``, ``STALE_OUTPUT_V2``: what ``Scheduler.update_from_output`` does with the
  output of a batch that was in flight when its request was preempted. The fix,
  ``deliver_stale_output``, delivers it as vLLM's scheduler does
  (``vllm/v1/core/sched/scheduler.py``, the file it switches); the fault, ``drop_stale_output``, discards
  it, so the token is sampled again after the recompute: output is not corrupted, the work is
  done twice (invariant 8 names it). Preset ``stale-output-dropped``.

The switch is declared once for each design whose greedy runs the preset was checked on (V1
and Model Runner V2; ``Design.stale_output``). It lives beside the runners' switches so the
engine's core imports no switch machinery: the scheduler takes the function as an argument.
Where the fix and the fault come from: ``docs/fidelity/designs.md``.
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
