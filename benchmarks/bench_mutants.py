"""Which kind of test catches which slip in a runner design: the mutation benchmark (``make mutants``).

Every mutant of ``minispec.lab.explorer.mutants.MUTANTS`` (one change to one design's
protocol, applied in a scoped monkeypatch) is run against four kinds of test:

* invariants: the explorer (``minispec.lab.explorer.explorer``) with the invariant checker,
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
import functools
import multiprocessing
import time
from dataclasses import replace
from pathlib import Path

from minispec.lab.experiments.schedule import intra_op_threads
from minispec.lab.explorer.explorer import DEFAULT, Scope
from minispec.lab.explorer.mutants import MUTANTS, Row, measure, mutant, render_row, render_table, uncaught

ROOT = Path(__file__).resolve().parent.parent


def _measure(name: str, scope: Scope, root: Path | None):
    """One mutant's columns, in a worker process (a Row holds modules, which do not pickle)."""
    began = time.perf_counter()
    with intra_op_threads():
        row = measure(mutant(name), scope, root)
    return name, (row.invariants, row.greedy, row.acceptance, row.suite), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="mutant names")
    parser.add_argument("--max-requests", type=int, default=2)
    parser.add_argument("--no-suite", action="store_true", help="skip the project-suite column")
    parser.add_argument("--jobs", type=int, default=1, help="mutants measured at once, one process each")
    args = parser.parse_args()
    scope = replace(DEFAULT, max_requests=args.max_requests)  # the explorer's default scope, cut to R requests
    names = [m.name for m in MUTANTS if not args.only or m.name in args.only]
    work = functools.partial(_measure, scope=scope, root=None if args.no_suite else ROOT)
    rows, start = [], time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for name, catches, seconds in pool.imap(work, names):
            rows.append(Row(mutant(name), *catches))
            print(f"{render_row(rows[-1])}  <!-- {seconds:.0f} s -->", flush=True)
    print(render_table(rows))
    for m in uncaught(rows):
        print(f"caught by nothing: {m.name} ({m.slip})")
    print(f"{len(rows)} mutants in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
