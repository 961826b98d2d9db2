"""Learner copies of the notebooks, and the visible-word count of each.

    python tools/workshop.py notebooks/*.ipynb --out workshop [--force]

A learner copy is the notebook with nbval's ``# NBVAL_`` marker lines removed and every
answer taken off the screen: the outputs of
code cells tagged ``prediction``, ``reveal``, ``answer`` or ``solution`` are cleared, and a markdown
cell tagged ``answer`` is folded behind an "Answer" ``<details>`` block (unless all of it is
folded already), so nothing answers a question before the learner has run the cell that
asks it. The committed notebooks keep every output (nbval compares them, the docs site
shows them).

A copy the learner has worked in (its cells differ from what this tool wrote, which the
copy's metadata records as a digest) is kept unless ``--force``; any other copy is
rewritten, so a pulled change to a notebook reaches the room.
Each notebook's *visible words* are printed beside the copy: whitespace-separated words of
the markdown cells not tagged ``deeper``, after removing every ``<details>...</details>``
block and HTML tag. What each agenda slot needs, printed output and fold titles included,
is ``tools/agenda.py``'s.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import nbformat


class Tag(str, Enum):
    """The notebook cell tags (``metadata.tags``) this tool reads."""

    PREDICTION = "prediction"
    REVEAL = "reveal"
    ANSWER = "answer"
    SOLUTION = "solution"
    DEEPER = "deeper"


SPOILERS = frozenset({Tag.PREDICTION, Tag.REVEAL, Tag.ANSWER, Tag.SOLUTION})
ANSWER_SUMMARY = "<b>Answer:</b> open it once you have tried"
# The innermost <details> block: its body holds no further <details> opening tag, so
# removing innermost blocks first, until none is left, handles nested folds too.
_INNERMOST_DETAILS = re.compile(r"<details\b[^>]*>(?:(?!<details\b).)*?</details\s*>", re.I | re.S)
_HTML_TAG = re.compile(r"<[^>]+>")
_DETAILS = re.compile(r"<details\b[^>]*>((?:(?!<details\b).)*?)</details\s*>", re.I | re.S)
_SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary\s*>", re.I | re.S)
_TEST_MARKER = "# NBVAL_"  # nbval's cell markers (NBVAL_CHECK_OUTPUT, NBVAL_SKIP, ...)
DIGEST_KEY = "minispec_learner_copy"  # notebook metadata: the digest of the cells as written
_FIRST_LINE = "# Run this cell first. After a kernel restart: Run > Run All Above Selected Cell."


def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def visible_text(markdown: str) -> str:
    """A markdown cell's text without its folds and HTML tags."""
    previous = None
    while previous != markdown:
        previous, markdown = markdown, _INNERMOST_DETAILS.sub(" ", markdown)
    return _HTML_TAG.sub(" ", markdown)


def closed_folds(markdown: str) -> str:
    """A markdown cell as rendered with its folds closed: each fold's title only, tags removed."""
    previous = None
    while previous != markdown:
        previous = markdown
        markdown = _DETAILS.sub(lambda m: " ".join(_SUMMARY.findall(m.group(1))) + " ", markdown)
    return _HTML_TAG.sub(" ", markdown)


def output_text(output) -> str:
    """What a printed output shows as text (figures and widgets show none)."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:
        return ""  # a widget: its text/plain is the widget's repr, not what the room sees
    if "image/png" in data:
        return ""  # a figure: its text/plain is the figure's repr (Figure, DescribedFigure), not what the room sees
    return data.get("text/markdown") or data.get("text/plain", "")


def page_prose(path: Path, sections: tuple[str, ...] | None = None) -> str:
    """A page's prose as rendered with its folds closed: a markdown file, or a notebook's markdown
    cells. ``sections``: only these ``## `` sections of a markdown file ("" is the text above the first)."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n".join(closed_folds(c.source) for c in nb.cells if c.cell_type == "markdown")
    text = path.read_text()
    if sections is not None:
        parts = re.split(r"^## ", text, flags=re.M)
        text = "\n".join(part for part in parts[1:] if part.split("\n", 1)[0].strip() in sections)
        text = (parts[0] if "" in sections else "") + "\n" + text
    return closed_folds(text)


def visible_words(nb) -> int:
    """Words of the workshop path: markdown cells not tagged ``deeper``, folds and tags removed."""
    return sum(len(visible_text(cell.source).split()) for cell in nb.cells
               if cell.cell_type == "markdown" and Tag.DEEPER.value not in tags(cell))


def first_code_line(nb) -> str | None:
    """The first line of the notebook's first code cell (None without code cells)."""
    code = next((cell for cell in nb.cells if cell.cell_type == "code"), None)
    return None if code is None else (code.source.splitlines() or [""])[0]


def starts_with_run_first(nb) -> bool:
    return first_code_line(nb) == _FIRST_LINE


def _is_spoiler(cell) -> bool:
    return bool(tags(cell) & {t.value for t in SPOILERS})


def learner_copy(nb):
    """A copy of ``nb`` with its spoilers off the screen (``nb`` itself is left as it was)."""
    learner = copy.deepcopy(nb)
    for cell in learner.cells:
        if cell.cell_type == "code":  # the test suite's markers mean nothing to a learner
            cell.source = "\n".join(line for line in cell.source.split("\n") if not line.startswith(_TEST_MARKER))
        if not _is_spoiler(cell):
            continue
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown" and Tag.ANSWER.value in tags(cell) and visible_text(cell.source).split():
            cell.source = f"<details>\n<summary>{ANSWER_SUMMARY}</summary>\n\n{cell.source}\n\n</details>"
    learner.metadata[DIGEST_KEY] = {"digest": digest(learner)}
    return learner


def digest(nb) -> str:
    """A digest of what a learner can change: each cell's type, source and outputs."""
    cells = [(c.cell_type, c.source, c.get("outputs", [])) for c in nb.cells]
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def worked_in(copy_path: Path) -> bool:
    """Whether the learner changed the copy at ``copy_path`` since this tool wrote it."""
    nb = nbformat.read(copy_path, as_version=4)
    return nb.metadata.get(DIGEST_KEY, {}).get("digest") != digest(nb)


def cleared_cells(nb) -> int:
    return sum(1 for cell in nb.cells if _is_spoiler(cell))


@dataclass(frozen=True)
class Written:
    """What happened to one notebook: its copy, whether it was (re)written, its counts."""

    source: Path
    copy: Path
    written: bool
    spoilers: int
    words: int


def write_copy(source: Path, out: Path, force: bool = False) -> Written:
    """Write ``out/<name>`` from ``source`` unless the learner has worked in the copy there."""
    nb = nbformat.read(source, as_version=4)
    target = out / source.name
    keep = target.exists() and not force and worked_in(target)
    if not keep:
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(learner_copy(nb), target)
    return Written(source, target, not keep, cleared_cells(nb), visible_words(nb))


def report(rows: list[Written]) -> str:
    lines = [f"{'notebook':<34} {'visible words':>13} {'spoiler cells':>13}  copy"]
    for row in rows:
        state = "written" if row.written else "kept: you have worked in it (--force to rewrite)"
        lines.append(f"{row.source.name:<34} {row.words:>13} {row.spoilers:>13}  {row.copy} {state}")
    return "\n".join(lines)


def print_findings(header: str, found: list) -> int:
    """A checking tool's report: its header, then each thing found, indented; the exit status."""
    print(header)
    for item in found:
        print(" ", item)
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("workshop"), help="folder for the learner copies")
    parser.add_argument("--force", action="store_true", help="rewrite copies the learner has changed")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.notebooks if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if any(p.resolve().parent == args.out.resolve() for p in args.notebooks):
        parser.error(f"--out {args.out} is where the notebooks are: choose another folder")
    print(report([write_copy(p, args.out, args.force) for p in args.notebooks]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
