"""What the explorer finds: each preset's minimal counterexample against the scenario the
project replays for it, and the fixed designs' default scope run whole (issue 27, section 3).

For every preset of the switchboard (V1's ``fixes=`` presets but ``all``, every Model Runner
V2 ``faults=`` preset), ``explore`` runs the default ``Scope`` smallest first and stops at the
first failure: its size (requests, total prompt tokens, steps = last arrival + max_tokens),
what broke first, the schedule's number and the time to it. The project's own scenario for
the preset (the forum thread's four requests for V1's and for three of V2's, the catalogue's
``scenario`` otherwise: ``minispec.lab.faults.catalogue.FAULTS``) is run with the invariant
checker on the shipped models, and its size and first break printed beside it. Then each
fixed design runs the whole default scope: schedules, time, result (which must be nothing).
Last, 3-request schedules per second in one process, on a fixed design, and per second of
the process's own CPU time (what an idle core would run: the machine's load does not move it).

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
from minispec.lab.experiments.explorer import Failure, Scope, explore, run_one, schedules
from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import Schedule, build_llm, intra_op_threads, plural, run_recorded
from minispec.lab.faults.catalogue import FAULTS
from minispec.v1.worker.gpu.runner_fixes import FaultPreset
from minispec.v1.worker.runner_fixes import Preset

FIXED = {"V1 (`fixes='all'`)": {"fixes": "all"}, "V2 (`model_runner='v2'`)": {"model_runner": "v2"}}


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
    print("\n| fixed design | scope | schedules | time | result | load |")
    print("|---|---|---|---|---|---|")
    for name, design in FIXED.items():
        before = load()
        result = explore(design, scope, workers=workers)
        verdict = "nothing breaks" if result.counterexample is None else f"BROKEN: {result.counterexample.failure}"
        named = "default" if scope == Scope() else f"default, at most {plural(scope.max_requests, 'request')}"
        print(f"| {name} | {named}, {'whole' if result.exhausted else 'cut'} | {result.schedules_run} | {result.seconds:.0f} s "
              f"({result.schedules_run / result.seconds:.0f}/s, {workers} processes) | {verdict} | {before} |",
              flush=True)


def three_request_rate(scope: Scope, count: int) -> None:
    """3-request schedules at PP 2 per second, one process, V1 with every fix."""
    todo = list(itertools.islice((s for s in schedules(scope) if len(s.requests) == 3), count))
    before, start, cpu = load(), time.perf_counter(), time.process_time()
    with intra_op_threads():
        broken = sum(run_one(s, {}) is not None for s in todo)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"\n3-request schedules, PP 2, one process: {len(todo)} in {seconds:.1f} s = "
          f"{len(todo) / seconds:.0f}/s ({broken} broken; load {before}); {cpu:.1f} s of CPU time = "
          f"{len(todo) / cpu:.0f} per CPU-second (what one idle core would run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="processes per exploration")
    parser.add_argument("--max-requests", type=int, default=3, help="the default scope's, or fewer")
    parser.add_argument("--rate-schedules", type=int, default=300, help="3-request schedules timed")
    parser.add_argument("--skip-fixed", action="store_true", help="leave out the fixed designs' whole scope")
    args = parser.parse_args()
    scope = Scope(max_requests=args.max_requests)
    print(f"scope: {scope}\nschedules in it: {sum(1 for _ in schedules(scope))}; cores: {os.cpu_count()}\n")
    preset_rows(scope, args.workers)
    if not args.skip_fixed:
        fixed_rows(scope, args.workers)
    if args.max_requests >= 3:
        three_request_rate(scope, args.rate_schedules)


if __name__ == "__main__":
    main()
