"""What the tools that write committed files share: write the file, or check that it is current.

``tools/invariants_doc.py`` writes ``docs/invariants.md``; ``tools/twin_table.py`` writes the twin table
(``docs/package_map.md``) and ``tools/fault_table.py`` the fault-preset table (``docs/faults_and_designs.md``),
between their markers. Each test compares the committed file with what its tool would write.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def between(text: str, begin: str, end: str, body: str | None = None) -> str:
    """The text between the two marker lines, or (``body`` given) the whole text with it replaced."""
    head, found, rest = text.partition(begin + "\n")
    inside, found_end, tail = rest.partition(end)
    if not (found and found_end):
        raise ValueError(f"expected the markers {begin!r} and {end!r}, in that order")
    return inside if body is None else head + begin + "\n" + body + end + tail


def write_or_check(path: Path, text: str, check: bool, tool: str) -> int:
    """Write ``text`` to ``path`` (0), or with ``check`` only say whether it is there already (0 or 1)."""
    name = path.relative_to(ROOT)
    if check:
        current = path.exists() and path.read_text() == text
        print(f"{name} is current" if current else f"{name} is out of date: run python {tool}")
        return 0 if current else 1
    path.write_text(text)
    print(f"wrote {name}")
    return 0


def command(path: Path, text: Callable[[], str], tool: str, doc: str, argv=None) -> int:
    """The command line every writing tool has: write ``path`` from ``text()``, or ``--check`` it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {path.relative_to(ROOT)} is out of date")
    return write_or_check(path, text(), parser.parse_args(argv).check, tool)
