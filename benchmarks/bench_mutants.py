"""Which kind of test catches which slip in a runner design: the mutation benchmark (``make mutants``).

Every mutant of ``minispec.lab.experiments.mutants.MUTANTS`` (one change to one design's
protocol, applied in a scoped monkeypatch) is run against four kinds of test:

* invariants: the explorer (``minispec.lab.experiments.explorer``) with the invariant checker,
  over the default scope cut to ``--max-requests`` (2 unless told, so that a mutant nothing
  catches costs seconds, not minutes): the size of its minimal counterexample (requests, last
  arrival + tokens), which schedule it was, and the time to find it;
* greedy equality alone: the same explorer with the checker off, outputs compared with the
  stand-in's greedy continuation (PP = 1 without drafts);
* vLLM's end-to-end rule (``tests/v1/e2e/spec_decode/eagle/test_eagle3_pp.py``): acceptance at
  PP 2 at least 95 % of PP 1's, on the forum thread's scenario with the shipped models;
* the project's own tests: ``SUITE[design]`` (a named subset, most relevant first, fast tier,
  ``-x``) with the mutant applied for the session (``mutant_plugin``); ``--no-suite`` skips it.

Prints the markdown table (``render_table``), then the findings: mutants nothing caught.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from minispec.lab.experiments.explorer import Scope
from minispec.lab.experiments.mutants import MUTANTS, measure, render_table, uncaught
from minispec.lab.experiments.schedule import intra_op_threads

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="mutant names")
    parser.add_argument("--max-requests", type=int, default=2)
    parser.add_argument("--no-suite", action="store_true", help="skip the project-suite column")
    args = parser.parse_args()
    scope = Scope(max_requests=args.max_requests)
    rows, start = [], time.perf_counter()
    with intra_op_threads():
        for m in MUTANTS:
            if args.only and m.name not in args.only:
                continue
            began = time.perf_counter()
            rows.append(measure(m, scope, None if args.no_suite else ROOT))
            print(f"{m.name}: {time.perf_counter() - began:.0f} s", flush=True)
    print(render_table(rows))
    for m in uncaught(rows):
        print(f"caught by nothing: {m.name} ({m.slip})")
    print(f"{len(rows)} mutants in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
