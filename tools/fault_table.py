"""Write docs/faults_and_designs.md's table of fault presets (between its markers) from ``FAULTS``.

``minispec.lab.faults.catalogue.EVERY_FAULT`` says, for each preset, its reference, the
first invariant its scenario breaks (or the transport's error) and where;
``tests/test_fault_presets.py`` asserts each of those and that the fixed run is clean,
and checks that ``docs/faults_and_designs.md``'s copy is current, so the table cannot drift.

    python tools/fault_table.py          # rewrite the table in docs/faults_and_designs.md
    python tools/fault_table.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import sys

from generated import ROOT, between, command

sys.path.insert(0, str(ROOT))

from datetime import date  # noqa: E402

from minispec.lab.faults.catalogue import EVERY_FAULT, LEFT_OUT, FirstViolation  # noqa: E402
from minispec.lab.records.threads import VLLM, Citation, thread  # noqa: E402

PAGE = ROOT / "docs" / "faults_and_designs.md"
BEGIN = "<!-- fault presets: tools/fault_table.py writes it from FAULTS; edit minispec/lab/faults/catalogue.py -->"
END = "<!-- end of fault presets -->"
FIXED = "clean: no violation, greedy output = reference"


def first_broken(expected) -> str:
    if isinstance(expected, FirstViolation):
        return (f"invariant {int(expected.invariant)} ({expected.invariant.title}): step {expected.step}, "
                f"stage {expected.stage}, request {expected.req_id}")
    return f"the transport's MessageMismatch: step {expected.step}, stage {expected.stage}"


def render_table() -> str:
    lines = ["| preset | reference | where the fix is (from reading the code) | first broken (step, stage, request) "
             "| fixed run |", "|---|---|---|---|---|"]
    for name, fault in EVERY_FAULT.items():
        lines.append(f"| `{name}` | {fault.reference} | {fault.source} | {first_broken(fault.expected)} "
                     f"| {FIXED} |")
    left_out = Citation(thread(VLLM, 41133), date(2026, 4, 28)).render()  # LEFT_OUT's one entry
    for name in LEFT_OUT:
        lines.append(f"| `{name}` (not a preset) | {left_out} | see `LEFT_OUT` in `minispec/v1/worker/runner_fixes.py` "
                     "| does not bite synchronously; under PP + async scheduling: `v1-pp-async-num-tokens-no-spec` | — |")
    return "\n".join(lines) + "\n"


def render(readme: str) -> str:
    return between(readme, BEGIN, END, render_table())


def main(argv=None) -> int:
    return command(PAGE, lambda: render(PAGE.read_text()), "tools/fault_table.py", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
