"""The explorer's stand-in model against the shipped model, on the same engine: stage-steps
per second (one stage running one batch is one stage-step), and where a step's time goes.

The forum thread's scenario (four requests, PP 2, k 3, the runs' own ``Schedule``) runs with
the shipped target and draft model, then with the stand-in (``minispec/checkpoints/standin``)
and its scripted drafts (all right, the draft model's best case). Each is timed over
``--repeats`` runs after one warm-up, engine construction excluded, on one torch thread;
``--profile`` prints the stand-in run's top functions by own time (the engine's Python).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import time

from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import build_llm, intra_op_threads, run_recorded
from minispec.lab.explorer.explorer import STANDIN


def stage_steps_per_second(schedule, repeats: int) -> tuple[float, int]:
    total_time, total_steps = 0.0, 0
    for i in range(repeats + 1):
        llm = build_llm(schedule, "all")
        start = time.perf_counter()
        trace = run_recorded(llm)
        if i:  # the first run warms up
            total_time += time.perf_counter() - start
            total_steps += sum(len(step.stages) for step in trace.steps)
    return total_steps / total_time, total_steps // repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    shipped = thread_schedule()
    standin = dataclasses.replace(shipped, method="scripted", model=str(STANDIN), block_size=4)
    with intra_op_threads():
        rates = {name: stage_steps_per_second(s, args.repeats) for name, s in
                 (("shipped model", shipped), ("stand-in", standin))}
        for name, (rate, steps) in rates.items():
            print(f"{name:14} {rate:8.0f} stage-steps/s ({steps} stage-steps a run)")
        print(f"stand-in / shipped: {rates['stand-in'][0] / rates['shipped model'][0]:.1f}x")
        if args.profile:
            profile = cProfile.Profile()
            llm = build_llm(standin, "all")
            profile.runcall(run_recorded, llm)
            pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
