"""Which kind of test catches which slip in a runner design: the mutation benchmark (``make mutants``).

Every mutant of ``minispec.lab.explorer.mutants.MUTANTS`` (one change to one design's
protocol, applied in a scoped monkeypatch) is run against four kinds of test:

* invariants: the explorer (``minispec.lab.explorer.explorer``) with the invariant checker,
  over ``DEFAULT`` (``--max-requests`` cuts it; no search pass after it): the size of its
  minimal counterexample (requests, last arrival + tokens), which schedule it was, and the
  time to find it;
* greedy equality alone: the same explorer with the checker off, outputs compared with the
  stand-in's greedy continuation (PP = 1 without drafts);
* vLLM's end-to-end rule (``tests/v1/e2e/spec_decode/eagle/test_eagle3_pp.py``): acceptance at
  PP 2 at least 95 % of PP 1's, on the forum thread's scenario with the shipped models;
* the project's own tests: ``SUITE[design]`` (a named subset, most relevant first, fast tier,
  ``-x``) with the mutant applied for the session (``mutant_plugin``); ``--no-suite`` skips it.

``--explorer-only`` measures the first column alone.

Prints the markdown table (``render_table``), then the findings: mutants nothing caught. The
table, the suite column and its pytest plugin (``mutant_plugin.py``, beside this file) live here,
outside the installed package, which keeps what notebook 06 runs (``minispec.lab.explorer.mutants``).
vLLM twin: none.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from minispec.lab.experiments.schedule import intra_op_threads
from minispec.lab.explorer.explorer import DEFAULT, Scope
from minispec.lab.explorer.mutants import (
    MUTANTS,
    V1,
    V2,
    Catch,
    Mutant,
    acceptance_catch,
    explorer_catch,
    mutant,
)

HERE = Path(__file__).resolve().parent  # mutant_plugin.py is here
ROOT = HERE.parent


@dataclass(frozen=True)
class Row:
    mutant: Mutant
    invariants: Catch
    greedy: Catch
    acceptance: Catch
    suite: Catch


COLUMNS = ("mutant", "design", "reference", "invariants (explorer)", "greedy equality alone",
           "vLLM's 95 % acceptance rule", "project suite (subset)")


def _cell(c: Catch) -> str:
    return f"{'**yes**' if c.caught else 'no'}: {c.detail}"


def render_row(r: Row) -> str:
    """One mutant's line of the table."""
    m = r.mutant
    return (f"| {m.name} | {m.design.value} | {m.reference or '(a slip)'} | {_cell(r.invariants)} | "
            f"{_cell(r.greedy)} | {_cell(r.acceptance)} | {_cell(r.suite)} |")


def render_table(rows: list[Row]) -> str:
    """The mutation table in markdown, one row per mutant, and a last row counting catches."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)] + [render_row(r) for r in rows]
    counts = [sum(getattr(r, c).caught for r in rows) for c in ("invariants", "greedy", "acceptance", "suite")]
    lines.append("| caught | | | " + " | ".join(f"{n} of {len(rows)}" for n in counts) + " |")
    return "\n".join(lines)


def uncaught(rows: list[Row]) -> list[Mutant]:
    """The findings: mutants no kind of test catches."""
    return [r.mutant for r in rows if not any(c.caught for c in (r.invariants, r.greedy, r.acceptance, r.suite))]


# -- measuring one mutant ---------------------------------------------------------------
# The project's own tests run per mutant, most relevant first (``-x`` stops at the first
# failure): a subset, so a mutant it misses may still be caught by the rest of the suite.
SUITE = {
    V1: ("tests/test_runner_fixes.py", "tests/test_engine.py", "tests/test_fault_runs.py", "tests/test_invariants.py",
         "tests/test_explorer.py"),
    V2: ("tests/test_v2_runner.py", "tests/test_explorer.py"),
}
FAST_TIER = "not browser and not torchrun and not slow and not docs and not vllm"  # the Makefile's FAST


def suite_catch(m: Mutant, root: Path, timeout: float = 900) -> Catch:
    """``SUITE[m.design]`` with ``m`` applied for the session (``mutant_plugin``), stopping at the
    first failure: the first failing test, or how many passed."""
    command = [sys.executable, "-m", "pytest", "-p", "mutant_plugin", "--mutant", m.name,
               "-x", "-q", "-n", "0", "-m", FAST_TIER, "-p", "no:cacheprovider", "-W", "ignore",
               *SUITE[m.design]]
    start = time.perf_counter()
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Catch(False, f"not finished in {timeout:.0f} s")
    seconds = time.perf_counter() - start
    failed = re.search(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.MULTILINE)
    if failed:
        return Catch(True, f"`{failed.group(1).split('/')[-1]}`, {seconds:.0f} s")
    passed = re.search(r"(\d+) passed", done.stdout)
    if done.returncode != 0 or passed is None:
        raise RuntimeError(f"pytest under mutant {m.name} exited {done.returncode} with no failed test:\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return Catch(False, f"{passed.group(1)} passed, {seconds:.0f} s")


def measure(m: Mutant, scope=None, root: Path | None = None) -> Row:
    """Every column for ``m`` (``root``: the checkout whose tests run; None: the suite is not run)."""
    suite = suite_catch(m, root) if root is not None else Catch(False, "not run")
    return Row(m, explorer_catch(m, scope), explorer_catch(m, scope, invariants=False), acceptance_catch(m), suite)


def _measure(name: str, scope: Scope, root: Path | None, explorer_only: bool = False):
    """One mutant's columns, in a worker process (a Row holds modules, which do not pickle).
    ``explorer_only``: the invariants column alone, the others marked not run."""
    began = time.perf_counter()
    with intra_op_threads():
        if explorer_only:
            skipped = Catch(False, "not run")
            catches = (explorer_catch(mutant(name), scope), skipped, skipped, skipped)
        else:
            row = measure(mutant(name), scope, root)
            catches = (row.invariants, row.greedy, row.acceptance, row.suite)
    return name, catches, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="mutant names")
    parser.add_argument("--max-requests", type=int, default=DEFAULT.max_requests)
    parser.add_argument("--no-suite", action="store_true", help="skip the project-suite column")
    parser.add_argument("--explorer-only", action="store_true", help="the invariants (explorer) column alone")
    parser.add_argument("--jobs", type=int, default=1, help="mutants measured at once, one process each")
    args = parser.parse_args()
    scope = replace(DEFAULT, max_requests=args.max_requests)  # DEFAULT, or cut to fewer requests
    names = [m.name for m in MUTANTS if not args.only or m.name in args.only]
    work = functools.partial(_measure, scope=scope, root=None if args.no_suite else ROOT,
                             explorer_only=args.explorer_only)
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
