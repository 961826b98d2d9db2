"""``python -m reference``: build vLLM's environment if needed,
run the check, print the tables (V1's, then Model Runner V2's); exit 1 if a
pairing is not as expected.

``--random N`` sets the number of random schedules (200), ``--random-v2 N`` Model
Runner V2's (``--random``'s unless given), ``--v2-first-seed S`` the first of
V2's seeds (0), so that a long V2 run can go in shards; ``--v2-only`` runs
Model Runner V2's check alone; ``--v2-mismatched`` adds V2's mismatched pairings
on the random schedules; ``--release R`` (repeatable) runs only release R's pairings
(V1's scheduler check, 0.9.2's, only with 0.9.2); ``--write-artifact`` rewrites
``minispec/lab/records/artifacts/thread.json`` from this run.

``python -m reference explore ...`` runs the explorer's schedules through vLLM's
own state code instead (``reference/explore.py``; ``--help`` lists its options).
"""

from __future__ import annotations

import argparse
import sys
import time

from minispec.config import DEFAULT_TARGET
from minispec.lab.records.artifact import render_provenance
from minispec.lab.viz.text import char_decoder
from minispec.transformers_utils.tokenizer import load_tokenizer
from reference import artifact, environment, report, run, v2_run


def _print_first_differences(result: run.CheckResult, decode) -> None:
    for row in result.rows:
        if row.first is None:
            continue
        capture = result.runs[(row.pairing.scenario, row.pairing.preset)].captures[row.first_run]
        step = capture.trace.step(row.first.step)
        mine = next(s for s in step.stages if s.stage == row.first.stage)
        p = row.pairing
        print(f"\n{p.release} x {p.preset} x {p.scenario} ({row.first_run}; expected to {'be equal' if p.expect_equal else 'differ'}: {p.why})")
        print(report.render_first_difference(p.release, row.first, step, mine, row.first_buffers, decode))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["explore"]:
        from reference import explore

        return explore.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m reference")
    parser.add_argument("--random", type=int, default=200, help="random schedules per pairing (default 200)")
    parser.add_argument("--random-v2", type=int, default=None,
                        help="random schedules per Model Runner V2 pairing (default: --random's)")
    parser.add_argument("--v2-first-seed", type=int, default=0, help="the first of V2's random seeds (default 0)")
    parser.add_argument("--v2-only", action="store_true", help="run Model Runner V2's check alone")
    parser.add_argument("--v2-mismatched", action="store_true",
                        help="run V2's mismatched pairings on the random schedules too, not only on the thread")
    parser.add_argument("--write-artifact", action="store_true", help="rewrite the stored artifact")
    parser.add_argument("--release", action="append", choices=sorted(set(environment.RELEASES + environment.V2_RELEASES)),
                        help="run only this release's pairings (repeatable; default: every release)")
    args = parser.parse_args(argv)
    args.random_v2 = args.random if args.random_v2 is None else args.random_v2
    for name, value in (("--random", args.random), ("--random-v2", args.random_v2),
                        ("--v2-first-seed", args.v2_first_seed)):
        if value < 0:
            parser.error(f"{name}={value}: expected a number >= 0")
    if args.v2_only and args.write_artifact:
        parser.error("--write-artifact writes V1's runs, which --v2-only leaves out")
    if args.release and args.write_artifact:
        parser.error("--write-artifact writes every release's V1 runs, which --release leaves out")
    ready = environment.ensure(tuple(args.release) if args.release else environment.RELEASES + environment.V2_RELEASES)
    built = ", ".join(ready.built) or "nothing (all cached)"
    print(f"vLLM environment in {environment.cache_dir()}: {ready.size_bytes / 2**20:.0f} MiB, "
          f"built {built} in {ready.seconds:.0f} s")
    v1_ok, v1_seconds = (True, 0.0) if args.v2_only else _check_v1(args)
    v2_ok, v2_seconds = _check_v2(args)
    ok = v1_ok and v2_ok
    print(f"check ran in {v1_seconds:.0f} s (V1) + {v2_seconds:.0f} s (V2): {'all as expected' if ok else 'FAILED'}")
    return 0 if ok else 1


def _check_v2(args) -> tuple[bool, float]:
    """Model Runner V2's check and its table; returns whether it was as expected, and its seconds."""
    start = time.monotonic()
    pairings = v2_run.PAIRINGS + (v2_run.MISMATCHED_RANDOM if args.v2_mismatched else ())
    pairings = tuple(p for p in pairings if not args.release or p.release in args.release)
    if not pairings:
        return True, 0.0
    v2 = v2_run.check(args.random_v2, pairings, first_seed=args.v2_first_seed)
    print("\nModel Runner V2: vLLM's RequestState, PPHandler and broadcast post-processing on minispec's V2 runs")
    print(report.render_v2_table(v2.rows))
    for row in v2.rows:
        p = row.pairing
        if row.first is not None:
            print(f"  {p.release} (sampler width {p.sampler_width}) x {p.preset} ({row.first_run}; {p.why}): "
                  f"{row.first.describe()}")
        if row.unwaited:
            print(f"  {p.release} (sampler width {p.sampler_width}) x {p.preset}: a broadcast that did not fit, "
                  f"which vLLM's code never waited on (every row freed): {', '.join(row.unwaited)}")
    for provenance in {r.pairing.release: r.provenance for r in v2.rows}.values():
        print(render_provenance(provenance))
    return v2.ok, time.monotonic() - start


def _check_v1(args) -> tuple[bool, float]:
    """V1's check and its tables; returns whether it was as expected, and its seconds."""
    start = time.monotonic()
    pairings = tuple(p for p in run.PAIRINGS if not args.release or p.release in args.release)
    if not pairings:
        return True, 0.0
    result = run.check(args.random, pairings)
    print(report.render_table(result.rows))
    if args.random and (run.RANDOM, "vllm-0.9.2") in result.runs:
        print(report.render_coverage(run.coverage(result.runs[(run.RANDOM, "vllm-0.9.2")])))
    _print_first_differences(result, char_decoder(load_tokenizer(DEFAULT_TARGET)))
    print("\n" + report.render_scheduler_table(result.scheduler_rows))
    for row in result.scheduler_rows:
        for kind in row.kinds:
            print(f"  first {kind}: " + next(d.describe() for d in row.differences if d.kind == kind))
        print(f"  {row.scenario}: vLLM put {row.dropped_finished} finished request ids in schedules its engine "
              f"does not execute (empty ones), so no worker dropped them; minispec carries them to the next")
    for provenance in {r.pairing.release: r.provenance for r in result.rows}.values():
        print(render_provenance(provenance))
    if args.write_artifact:
        print(f"wrote {artifact.write_artifact(result)}")
    return result.ok, time.monotonic() - start


if __name__ == "__main__":
    sys.exit(main())
