"""What a room does to a notebook's cells: each run twice, and a restart at any cell.

    python tools/rerun.py notebooks/03_persistent_batch.ipynb [--restarts 3]

Two checks, each on a fresh kernel started in the notebook's folder:

- **twice**: every code cell is run, then at once run again; the second run must print
  what the first printed (a learner presses Shift+Enter twice, or goes back up a cell).
- **restart**: at a few code cells spread over the notebook, a fresh kernel runs every cell
  above it (Run → Run All Above Selected Cell, the guide's one recovery action), then that
  cell; it must print what the cell printed in a run from the top.

Printed text is compared after the substitutions of ``tests/nbval_sanitize.cfg``; figures and
widgets by kind only. A cell whose output is a measurement declares it in its metadata,
``"workshop": {"varies": "why"}``, and is held only to raising no error.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import argparse
import configparser
import copy
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workshop  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
TIMEOUT_S = 900


def _substitutions() -> list[tuple[re.Pattern, str]]:
    config = configparser.ConfigParser()
    config.read(SANITIZE)
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


_SUBSTITUTIONS = _substitutions()


def printed(cell) -> str:
    """A code cell's outputs as comparable text: sanitized text, and the kind of anything else."""
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        elif kind == "stream":
            parts.append(output.get("text", ""))
        else:
            data = output.get("data", {})
            rich = [m for m in data if m.startswith("image/") or "widget" in m]
            parts.append(f"<{rich[0]}>" if rich else data.get("text/plain", ""))
    text = "".join(parts)
    for pattern, replacement in _SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    return text


def raised(cell) -> str | None:
    error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
    return None if error is None else f"{error.get('ename')}: {error.get('evalue')}"


def varies(cell) -> bool:
    return bool(cell.get("metadata", {}).get("workshop", {}).get("varies"))


@dataclass(frozen=True)
class Difference:
    """One cell that printed something else the second time, or after a restart."""

    check: str  # "twice" or "restart"
    index: int
    first: str
    then: str

    def __str__(self) -> str:
        return f"{self.check} cell {self.index}: {self.first[:200]!r} then {self.then[:200]!r}"


def _client(nb, folder: Path) -> NotebookClient:
    return NotebookClient(nb, timeout=TIMEOUT_S, allow_errors=True, kernel_name="python3",
                          resources={"metadata": {"path": str(folder)}})


def _same(cell, first: str, then_cell) -> bool:
    if varies(cell):
        return raised(then_cell) is None
    return printed(then_cell) == first


def twice(path: Path) -> tuple[list[Difference], nbformat.NotebookNode]:
    """Run every code cell twice in a row; the differences, and the notebook as run once from the top."""
    nb = nbformat.read(path, as_version=4)
    reference = copy.deepcopy(nb)
    client = _client(nb, path.parent)
    found = []
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, index)
            reference.cells[index].outputs = copy.deepcopy(cell.outputs)
            first = printed(cell)
            client.execute_cell(cell, index)
            if not _same(cell, first, cell):
                found.append(Difference("twice", index, first, printed(cell)))
    return found, reference


def restart_points(nb, count: int) -> list[int]:
    """``count`` code cells spread over the notebook, the first code cell excluded."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"][1:]
    if not code or count <= 0:
        return []
    step = max(len(code) // count, 1)
    return sorted({code[min(len(code) - 1, step * (k + 1) - 1)] for k in range(count)})


def restart_at(path: Path, index: int, reference) -> Difference | None:
    """A fresh kernel runs every cell above ``index`` (Run All Above), then that cell."""
    nb = nbformat.read(path, as_version=4)
    client = _client(nb, path.parent)
    with client.setup_kernel():
        for above, cell in enumerate(nb.cells[: index + 1]):
            if cell.cell_type == "code":
                client.execute_cell(cell, above)
    cell, expected = nb.cells[index], reference.cells[index]
    first = printed(expected)
    return None if _same(expected, first, cell) else Difference("restart", index, first, printed(cell))


def check(path: Path, restarts: int = 3) -> list[Difference]:
    found, reference = twice(path)
    for index in restart_points(reference, restarts):
        difference = restart_at(path, index, reference)
        if difference:
            found.append(difference)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--restarts", type=int, default=3, help="how many cells to restart at")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.notebooks:
        found = check(path, args.restarts)
        failed |= workshop.print_findings(f"{path.name}: {'ok' if not found else f'{len(found)} difference(s)'}", found)
    return failed


if __name__ == "__main__":
    sys.exit(main())
