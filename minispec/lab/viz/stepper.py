"""What the linked stepper shows at a (preset, step, stage): pure functions.

The widget (``widgets.py``) only reads its controls, calls ``stepper_view`` and
puts the result on screen, so everything it shows is decided (and tested) here
without ipywidgets. A stop is one (step, stage) that a stage recorded; stops go
in step order, each step's stages in pipeline order, so "next" follows one batch
down the pipeline before the next batch starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from minispec.instruments.invariants import Violation, check_trace
from minispec.instruments.timeline import Timeline
from minispec.instruments.trace import Trace
from minispec.lab.experiments.scenarios import batch_label, thread_schedule
from minispec.lab.experiments.schedule import Schedule, build_llm, run_recorded
from minispec.lab.viz.text import render_schedule
from minispec.v1.worker.runner_fixes import Preset


class Run(NamedTuple):
    trace: Trace
    timeline: Timeline | None = None


def thread_runs(presets=tuple(Preset), **kwargs) -> dict[str, Run]:
    """The forum thread's scenario run to completion under each preset, with its
    trace (outputs and stats filled in) and timeline."""
    return schedule_runs(thread_schedule(**kwargs), {preset: {"fixes": preset} for preset in presets})


def schedule_runs(schedule: Schedule, designs: dict[str, dict]) -> dict[str, Run]:
    """``schedule`` (e.g. the explorer's counterexample) run to completion under each design,
    ``{name: LLM's switches}``, checker off: the stepper marks every break, not just the first."""
    runs = {}
    for name, design in designs.items():
        llm = build_llm(replace(schedule, check_invariants=False), **design)
        runs[name] = Run(run_recorded(llm), llm.timeline())
    return runs


def stops(trace: Trace) -> list[tuple[int, int]]:
    """Every recorded (step, stage), in the order the stepper visits them."""
    return sorted((step.step, stage.stage) for step in trace.steps for stage in step.stages)


def nearest_stop(trace: Trace, step: int, stage: int) -> tuple[int, int]:
    """The recorded (step, stage) closest to the one asked for (a preset's run may
    have fewer steps than another's)."""
    all_stops = stops(trace)
    if not all_stops:
        raise ValueError(f"trace: the {trace.fixes} trace has no stage records to step through")
    return min(all_stops, key=lambda s: (abs(s[0] - step), abs(s[1] - stage)))


def move(trace: Trace, step: int, stage: int, delta: int) -> tuple[int, int]:
    """The stop ``delta`` stops after (or before) the nearest one to (step, stage), clamped."""
    all_stops = stops(trace)
    i = all_stops.index(nearest_stop(trace, step, stage)) + delta
    return all_stops[max(0, min(len(all_stops) - 1, i))]


@dataclass(frozen=True)
class StepperView:
    preset: str
    step: int
    stage: int
    index: int  # position among the stops
    count: int
    label: str  # "vllm-0.9.2 · step 2 · stage 0 · batch_0 = {A, B}"
    position: str  # "event 5 of 64 (32 steps × 2 stages)": where the stop sits in the run
    text: str  # the scheduler output, what update_from_output accepted, violations here
    highlight: tuple[int, int]  # (step, stage) for the Gantt


def violations_at(violations: list[Violation], step: int, stage: int) -> list[Violation]:
    return [v for v in violations if v.step == step and v.stage in (stage, None)]


def stepper_view(runs: dict[str, Run], preset: str, step: int, stage: int, decode=None,
                 violations: list[Violation] | None = None) -> StepperView:
    """What to show for ``preset`` at (step, stage), moved to the nearest recorded
    stop. ``violations`` (``check_trace`` of that run) can be passed in to save
    replaying the trace at every move."""
    if preset not in runs:
        raise ValueError(f"preset={preset!r}: expected one of {list(runs)}")
    trace = runs[preset].trace
    step, stage = nearest_stop(trace, step, stage)
    record = trace.step(step)
    all_stops = stops(trace)
    last = " (last)" if any(s.stage == stage and s.is_last for s in record.stages) else ""
    label = f"{preset} · step {step} · stage {stage}{last} · {batch_label(record.schedule.num_scheduled_tokens)}"
    lines = ["scheduler output: " + render_schedule(record, decode)]
    if record.num_accepted:
        accepted = ", ".join(f"{r}={n}" for r, n in record.num_accepted.items())
        lines.append(f"update_from_output (after the last stage): accepted drafts {accepted}")
    found = violations_at(check_trace(trace) if violations is None else violations, step, stage)
    # One line per headline: a violation found at several positions of one row has one headline.
    headlines = dict.fromkeys(v.headline for v in found)
    lines += [h + " (see the strip)" for h in headlines] or [f"no invariant violated at step {step}, stage {stage}"]
    index = all_stops.index((step, stage))
    return StepperView(preset, step, stage, index, len(all_stops), label, stop_position(all_stops, index),
                       "\n".join(lines), (step, stage))


def stop_position(all_stops: list[tuple[int, int]], index: int) -> str:
    """"event 5 of 64 (32 steps × 2 stages)": a stop is one stage working on one step,
    so the count is not the step the slider shows."""
    n_steps, n_stages = len({s for s, _ in all_stops}), len({st for _, st in all_stops})
    grid = f" ({n_steps} steps × {n_stages} stages)" if n_steps * n_stages == len(all_stops) else ""
    return f"event {index + 1} of {len(all_stops)}{grid}"
