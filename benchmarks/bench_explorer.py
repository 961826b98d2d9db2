"""What the explorer finds: each preset's minimal counterexample against the scenario the
project replays for it, and the fixed designs' default scope run whole (issue 27, section 3).

For every preset of the switchboard (V1's ``fixes=`` presets but ``all``, every Model Runner
V2 ``faults=`` preset), ``explore`` runs the default ``Scope`` smallest first and stops at the
first failure: its size (requests, total prompt tokens, steps = last arrival + max_tokens),
what broke first, the schedule's number and the time to it. The project's own scenario for
the preset (the forum thread's four requests for V1's and for three of V2's, the catalogue's
``scenario`` otherwise: ``minispec.lab.faults.catalogue.FAULTS``) is run with the invariant
checker on the shipped models, and its size and first break printed beside it. Then each
design (``sweep._designs()``), fixed, runs the whole default scope: schedules, time, result
(which must be nothing) and the conditions it never exercised.
Last, schedules and distinct trace states per second in one process, on a fixed design, on the
old default scope and on ``DEFAULT``, and per second of the process's own CPU time (what an idle
core would run: the machine's load does not move it).

Every row carries the load average (1 min) before it: the machine is shared. Run it under
``nice``; ``--workers`` processes share each exploration.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import time

from minispec.instruments.invariants import InvariantViolation
from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import Schedule, build_llm, intra_op_threads, plural, run_recorded
from minispec.lab.explorer.explorer import DEFAULT, Failure, Scope, explore, schedules
from minispec.lab.explorer.sweep import _designs, design_scope, never_exercised
from minispec.lab.faults.catalogue import FAULTS
from minispec.v1.worker.gpu.runner_fixes import FaultPreset
from minispec.v1.worker.runner_fixes import Preset


def presets() -> dict[str, dict]:
    """Every preset of the switchboard that puts a fault back, with the design it applies to."""
    v1 = {p.value: {"fixes": p.value} for p in Preset if p is not Preset.ALL}
    return v1 | {f.value: {"model_runner": "v2", "faults": f.value} for f in FaultPreset}


def project_scenario(name: str) -> Schedule:
    """The scenario the project replays the preset on today, checker on."""
    scenario = FAULTS[FaultPreset(name)].scenario if name in set(FaultPreset) else thread_schedule()
    return dataclasses.replace(scenario, check_invariants=True)


def size(schedule: Schedule, tokens) -> str:
    return (f"{len(schedule.requests)} req, {sum(map(len, tokens))} prompt tokens, "
            f"{max(schedule.arrival_steps) + schedule.max_tokens} steps")


def first_break(failure: Failure) -> str:
    v = failure.violation
    if v is not None:
        return f"invariant {int(v.invariant)}, step {v.step}, stage {v.stage}, {v.req_id}"
    return "output differs from PP 1" if failure.divergence is not None else f"raises {failure.error.split(':')[0]}"


def run_scenario(schedule: Schedule, design: dict) -> tuple[str, str]:
    llm = build_llm(schedule, **design)
    tokens = [llm.tokenizer.encode(r.prompt) if isinstance(r.prompt, str) else r.prompt for r in schedule.requests]
    try:
        run_recorded(llm)
        found = "nothing"
    except InvariantViolation as e:
        found = first_break(Failure(violation=e.violation))
    except Exception as e:  # the transport's mismatch, or the engine's own error
        found = first_break(Failure(error=f"{type(e).__name__}: {e}"))
    return size(schedule, tokens), found


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def preset_rows(scope: Scope, workers: int) -> None:
    print("| preset | minimal counterexample | first break | found after | the project's scenario "
          "| its first break | load |")
    print("|---|---|---|---|---|---|---|")
    for name, design in presets().items():
        before = load()
        result = explore(design, scope, workers=workers)
        found = result.counterexample
        scenario_size, scenario_break = run_scenario(project_scenario(name), design)
        minimal, broke = ((f"{size(found.schedule, found.schedule.prompts)}: {found.schedule.details}",
                           first_break(found.failure)) if found else ("nothing within the scope", "-"))
        print(f"| `{name}` | {minimal} | {broke} | schedule {result.schedules_run}, {result.seconds:.1f} s "
              f"| {scenario_size} | {scenario_break} | {before} |", flush=True)


def fixed_rows(scope: Scope, workers: int) -> None:
    """Every design, fixed, on ``scope`` as it can run it: schedules, time, result, and the
    conditions of ``coverage`` its runs never reached (with why, where known)."""
    print("\n| fixed design | scope | schedules | time | result | never exercised | load |")
    print("|---|---|---|---|---|---|---|")
    for name, design in _designs().items():
        before, cpu = load(), time.process_time()
        result = explore(design, design_scope(name, scope), workers=workers)
        cpu = time.process_time() - cpu
        verdict = "nothing breaks" if result.counterexample is None else f"BROKEN: {result.counterexample.failure}"
        never = "; ".join(f"{c}" + (f" ({why})" if why else "") for c, why in never_exercised(name, result).items())
        print(f"| {name} | {'whole' if result.exhausted else 'cut'}, {plural(scope.max_requests, 'request')} "
              f"| {result.schedules_run} | {result.seconds:.0f} s ({result.schedules_run / result.seconds:.0f}/s, "
              f"{cpu:.0f} s of this process's CPU, {workers} processes) | {verdict} | {never or 'none'} | {before} |",
              flush=True)


def state_keys(trace) -> set[int]:
    """One key per step boundary: the run's records so far (what the trace shows of its state)."""
    keys, key = set(), 0
    for step in trace.steps:
        key = hash((key, repr(step.schedule), repr(step.stages)))
        keys.add(key)
    return keys


def rate(name: str, scope: Scope, count: int) -> None:
    """Schedules and distinct trace states per second, one process, V1 with every fix: the
    first ``count`` schedules of ``scope``'s largest request count."""
    todo = list(itertools.islice((s for s in schedules(scope) if len(s.requests) == scope.max_requests), count))
    before, start, cpu, states = load(), time.perf_counter(), time.process_time(), set()
    with intra_op_threads():
        for s in todo:
            llm = build_llm(s)
            run_recorded(llm)
            states |= state_keys(llm.trace)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"\n{name}: {len(todo)} schedules in {seconds:.1f} s = {len(todo) / seconds:.0f}/s, "
          f"{len(states)} distinct states = {len(states) / seconds:.0f}/s (load {before}); {cpu:.1f} s of CPU "
          f"time = {len(todo) / cpu:.0f} schedules and {len(states) / cpu:.0f} states per CPU-second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="processes per exploration")
    parser.add_argument("--max-requests", type=int, default=2, help="the default scope's, or fewer")
    parser.add_argument("--rate-schedules", type=int, default=300, help="schedules timed for the rate")
    parser.add_argument("--skip-presets", action="store_true", help="leave out the presets' counterexamples")
    parser.add_argument("--skip-fixed", action="store_true", help="leave out the fixed designs' whole scope")
    parser.add_argument("--small", action="store_true",
                        help="a smoke run: PP 2, synchronous, no small cache or budget, max_tokens 2 or 4")
    args = parser.parse_args()
    scope = dataclasses.replace(DEFAULT, max_requests=args.max_requests)
    if args.small:
        scope = dataclasses.replace(scope, pipeline_parallel_size=(2,), async_scheduling=(False,), max_tokens=(2, 4),
                                    num_gpu_blocks=(None,), max_num_batched_tokens=(512,))
    print(f"scope: {scope}\nschedules in it: {sum(1 for _ in schedules(scope))}; cores: {os.cpu_count()}\n")
    if not args.skip_presets:
        preset_rows(scope, args.workers)
    if not args.skip_fixed:
        fixed_rows(scope, args.workers)
    rate("the default scope before issue 36 (Scope())", Scope(max_requests=min(3, args.max_requests)),
         args.rate_schedules)
    rate("the default scope (DEFAULT)", scope, args.rate_schedules)


if __name__ == "__main__":
    main()
