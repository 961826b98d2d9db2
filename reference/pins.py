"""What each cited range of release source holds, pinned: the symbol around it and a hash of its lines.

``cite_pins.tsv`` (beside this file) has one row per (release, file, range) the repository
cites: the innermost function or class whose lines hold the whole range (``Class.method``,
parsed with ``ast``, decorators included; ``<module>`` if none) and the first 12 hex digits
of the SHA-256 of the lines themselves. ``make cite-check`` fails a range with no row, a
range whose lines or symbol are not the row's, and a row no citation uses; so a range moved
by a few lines, even inside its function, fails, and the table changes only by
``tools/cite_check.py --repin``, which prints each row it adds, changes or drops.

vLLM twin: none (minispec's own tooling).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).with_name("cite_pins.tsv")
HEADER = "# release\tfile\tlines\tsymbol\tsha256[:12] of the lines (tools/cite_check.py --repin rewrites this table)"
MODULE = "<module>"

Key = tuple[str, str, int, int]  # release, path, first line, last line


@dataclass(frozen=True)
class Pin:
    symbol: str
    digest: str


def digest(lines: list[str], start: int, end: int) -> str:
    return hashlib.sha256("\n".join(lines[start - 1: end]).encode()).hexdigest()[:12]


@lru_cache(maxsize=64)
def _scopes(source: Path) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, qualified name) of every def and class in ``source``.
    A file that does not parse raises SyntaxError: its citations cannot be checked."""
    tree = ast.parse(source.read_text(encoding="utf-8", errors="replace"), filename=str(source))
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                name = f"{prefix}{child.name}"
                found.append((first, child.end_lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return tuple(found)


def enclosing(source: Path, start: int, end: int) -> list[str]:
    """The qualified names of the defs and classes holding lines ``start``-``end`` whole, innermost first."""
    around = [(first, name) for first, last, name in _scopes(source) if first <= start and end <= last]
    return [name for _, name in sorted(around, reverse=True)]


def pin(source: Path, lines: list[str], start: int, end: int) -> Pin:
    names = enclosing(source, start, end)
    return Pin(names[0] if names else MODULE, digest(lines, start, end))


def load(table: Path = TABLE) -> dict[Key, Pin]:
    pins = {}
    for number, row in enumerate(table.read_text(encoding="utf-8").splitlines(), 1) if table.exists() else ():
        if not row or row.startswith("#"):
            continue
        cells = row.split("\t")
        try:
            release, path, lines, symbol, hexdigest = cells
            start, end = (int(n) for n in lines.split("-"))
        except ValueError:
            raise ValueError(f"{table.name}:{number}: expected release, file, 'N-M', symbol, digest "
                             f"separated by tabs, got {row!r}") from None
        pins[(release, path, start, end)] = Pin(symbol, hexdigest)
    return pins


def save(pins: dict[Key, Pin], table: Path = TABLE) -> None:
    rows = [f"{r}\t{p}\t{a}-{b}\t{pin.symbol}\t{pin.digest}" for (r, p, a, b), pin in sorted(pins.items())]
    table.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
