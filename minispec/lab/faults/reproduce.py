"""Each fault preset run on its own scenario and caught: the first thing that goes wrong (the
live invariant checker's first violation or the checked transport's error), and the same
scenario without the fault.

``run_fault(name)`` returns a ``FaultRun``: what stopped the faulty run, whether that is
what ``FAULTS[name].expected`` says, and whether the fixed run is clean (no invariant
fired and every request's output equals plain greedy decoding). ``run_fault(name,
pipeline_parallel_size=n)`` runs the same scenario on ``n`` stages instead, where the
catalogue says nothing (``FaultRun.catalogued`` is False): how a fault masked at one depth
shows at another. The renderer is ``minispec.lab.viz.faults``.

vLLM twin: none (the presets: ``minispec/lab/faults/catalogue.py`` and ``minispec/v1/worker/fault_presets.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from minispec.distributed.parallel_state import MessageMismatch
from minispec.instruments.invariants import InvariantViolation, Violation
from minispec.lab.experiments.schedule import build_llm, run_recorded, schedule_reference
from minispec.lab.faults.catalogue import (
    EVERY_FAULT,
    Fault,
    FaultPreset,
    FirstViolation,
    RelayFaultPreset,
    V1FaultPreset,
)


@dataclass(frozen=True)
class FaultRun:
    fault: Fault
    violation: Violation | None  # the first invariant broken, if the checker stopped the run
    transport_error: str | None  # the transport's message, if it stopped the run instead
    fixed_clean: bool  # without the fault: no invariant fired, and the outputs are greedy's
    trace: object = None  # the faulty run's Trace, up to where it stopped
    catalogued: bool = True  # run on the catalogue's own scenario, where ``expected`` applies

    @property
    def as_expected(self) -> bool:
        """Did the run stop where and why ``FAULTS`` says it does?"""
        e, v = self.fault.expected, self.violation
        if isinstance(e, FirstViolation):
            return v is not None and (v.invariant, v.step, v.stage, v.req_id) == (e.invariant, e.step, e.stage,
                                                                                  e.req_id)
        return self.transport_error is not None and self.transport_error.startswith(
            f"stage {e.stage}, step {e.step}, applying the last stage's broadcast: {e.message}")


def _faulty(fault: Fault):
    """(violation, transport error, trace) of the run with the fault."""
    llm = build_llm(fault.scenario, model_runner=fault.design, faults=str(fault.preset))
    try:
        llm.wait_for_completion()
    except InvariantViolation as caught:
        return caught.violation, None, llm.trace
    except MessageMismatch as caught:
        return None, str(caught), llm.trace
    return None, None, llm.trace


def _fixed_clean(fault: Fault) -> bool:
    try:
        trace = run_recorded(build_llm(fault.scenario, model_runner=fault.design))
    except InvariantViolation:
        return False
    return trace.outputs == schedule_reference(fault.scenario)


def run_fault(name: FaultPreset | RelayFaultPreset | V1FaultPreset | str,
              pipeline_parallel_size: int | None = None) -> FaultRun:
    """``pipeline_parallel_size``: the scenario's stages; None: the catalogue's."""
    if name not in EVERY_FAULT:
        raise ValueError(f"run_fault: {name!r}: expected one of {sorted(map(str, EVERY_FAULT))}")
    fault = next(f for preset, f in EVERY_FAULT.items() if preset == name)
    catalogued = pipeline_parallel_size in (None, fault.scenario.pipeline_parallel_size)
    if not catalogued:
        fault = replace(fault, scenario=replace(fault.scenario, pipeline_parallel_size=pipeline_parallel_size))
    if not fault.scenario.check_invariants:
        raise ValueError(f"run_fault: {name!r}'s scenario must check invariants live (check_invariants=True)")
    violation, transport_error, trace = _faulty(fault)
    return FaultRun(fault, violation, transport_error, _fixed_clean(fault), trace, catalogued)
