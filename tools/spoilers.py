"""The room's walk through the learner copies, and every answer it meets before its reveal.

    python tools/spoilers.py [--path core|full]

A prediction or exercise declares in its cell's metadata what answers it::

    "workshop": {"asks": "draft-slots", "answers": ["\\\\btem\\\\b"], "solution": "draft_slots"}

``answers`` are regular expressions for the answer as prose or printed output would state
it; ``solution`` names a reference solution in ``minispec/lab/solutions.py``, whose code lines
count as answers too. A cell that gives an answer away on purpose declares
``"workshop": {"reveals": ["draft-slots"]}``.

The walk follows the agenda of ``docs/workshop.md`` (``tools/agenda.py``): first the pages the
room keeps open (the README, the glossary) and the opening page, then each slot's cells of
the learner copy as the room sees them: markdown with its ``<details>`` folds closed (their
titles show), code cells' source, and the printed output of every cell the room runs there.
A code cell the slot does not run shows its source only. An answer seen before the first
cell that reveals it is a :class:`Finding`; between a question and its reveal the folds count
as open, since a learner stuck on a question opens the folds around it.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agenda  # noqa: E402
import workshop  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
META = "workshop"  # the cell metadata key of a question's declaration
# A solution's lines shorter than this are too generic to count as giving it away.
_SOLUTION_LINE_MIN = 24


@dataclass(frozen=True)
class Question:
    """One prediction or exercise: its id and the patterns that would answer it."""

    id: str
    patterns: tuple[re.Pattern, ...]


@dataclass(frozen=True)
class Seen:
    """One piece of text on the room's screen, and where it is."""

    where: str  # e.g. "05_the_second_fault.ipynb cell 9 (prose)"
    text: str
    asks: frozenset[str] = frozenset()
    reveals: frozenset[str] = frozenset()
    unfolded: str = ""  # the same with its folds open: what a learner stuck on a question reads


@dataclass(frozen=True)
class Finding:
    """An answer on screen before the cell that reveals it."""

    question: str
    where: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.question}: {self.where}: {self.excerpt!r}"


def declaration(cell) -> dict:
    return cell.get("metadata", {}).get(META, {})


def solution_lines(name: str) -> list[str]:
    """The code lines of a reference solution long enough to identify it, blanks squeezed."""
    from minispec.lab.exercises import solutions

    value = getattr(solutions, name)
    if not callable(value):
        return []
    body = inspect.getsource(value).splitlines()[1:]
    lines = [" ".join(line.split("#")[0].split()) for line in body]
    return [line for line in lines if len(line) >= _SOLUTION_LINE_MIN and not line.startswith(('"""', "'''"))]


def questions(notebooks: list[Path]) -> dict[str, Question]:
    """Every declared question of ``notebooks``, its patterns merged over the cells that ask it."""
    found: dict[str, list[re.Pattern]] = {}
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            spec = declaration(cell)
            if "asks" not in spec:
                continue
            patterns = [re.compile(p) for p in spec.get("answers", [])]
            if "solution" in spec:
                patterns += [re.compile(re.escape(line).replace(r"\ ", r"\s*")) for line in solution_lines(spec["solution"])]
            found.setdefault(spec["asks"], []).extend(patterns)
    from minispec.lab.predictions import PREDICTIONS  # the predictions declare theirs in one place

    for prediction in PREDICTIONS.values():
        if prediction.question in found:
            found[prediction.question].extend(re.compile(a) for a in prediction.answers)
    from minispec.lab.exercises.answers import ANSWERS  # what gives fix 1 and fix 2 away (the handout's test)

    for qid, answers in ANSWERS.items():
        if qid in found:
            found[qid].extend(re.compile(a) if isinstance(a, str) else a for a in answers)
    return {qid: Question(qid, tuple(patterns)) for qid, patterns in found.items()}


def cell_texts(nb_name: str, index: int, cell, run: bool) -> Iterator[Seen]:
    """What the room sees of one learner-copy cell; ``run``: its committed output is printed."""
    spec = declaration(cell)
    asks = frozenset([spec["asks"]]) if "asks" in spec else frozenset()
    reveals = frozenset(spec.get("reveals", []))
    where = f"{nb_name} cell {index}"
    if cell.cell_type == "markdown":
        yield Seen(f"{where} (prose)", workshop.closed_folds(cell.source), asks, reveals, cell.source)
        return
    yield Seen(f"{where} (source)", cell.source, asks)
    if run:
        printed = "".join(workshop.output_text(o) for o in cell.get("outputs", []))
        yield Seen(f"{where} (output)", printed, frozenset(), reveals)


def page_text(path: Path, sections: tuple[str, ...] | None = None) -> Seen:
    """A page the room keeps open or is shown (README, glossary, opening page)."""
    return Seen(f"{path.name} (page)", workshop.page_prose(path, sections))


# The handout (docs/workshop.md, section 1) goes round as 08 §3 starts and holds no answer; the
# answers slip is read at the wrap-up (minispec.lab.exercises.answers: what gives them away).
# Each slot that hands a page round: (the page, its sections shown; None: all of it).
HANDOUT = agenda.HANDOUT
HANDOUT_AT = {next(s.label for s in agenda.CORE if s.handout == agenda.HANDOUT_BUFFERS): (HANDOUT, None),
              agenda.CORE[-1].label: ("docs/answers_slip.md", None)}


def walk(path_name: str, root: Path = ROOT) -> Iterator[Seen]:
    """Everything the room sees, in the order it sees it, on the agenda's ``path_name`` path."""
    for page, sections in agenda.OPEN_PAGES:
        yield page_text(root / page, sections)
    for slot in agenda.path(path_name) + agenda.afterwards(path_name, root):
        if slot.page:
            yield page_text(root / slot.page)
        if slot.label in HANDOUT_AT:
            page, sections = HANDOUT_AT[slot.label]
            yield page_text(root / page, sections)
        if slot.notebook is None:
            continue
        source = agenda.notebook_path(slot.notebook, root)
        committed = nbformat.read(source, as_version=4)
        learner = workshop.learner_copy(committed)
        sections = agenda.section_of_cells(committed)
        for index in agenda.screen_cells(committed, slot):
            cell = learner.cells[index]
            run = cell.cell_type == "code" and slot.runs(committed.cells[index], sections[index])
            # The copy cleared its spoilers' outputs; running the cell prints the committed ones.
            yield from cell_texts(source.name, index, committed.cells[index] if run else cell, run)


def scan(seen: list[Seen], tracked: dict[str, Question]) -> list[Finding]:
    """Every answer in ``seen`` (in the room's order) before the first item that reveals it."""
    asked = {qid for s in seen for qid in s.asks}
    revealed: set[str] = set()
    open_questions: set[str] = set()  # asked, not yet revealed: their askers open every fold nearby
    found = []
    for item in seen:
        open_questions |= item.asks
        for qid in sorted(asked - revealed - item.reveals):
            text = item.unfolded if qid in open_questions and item.unfolded else item.text
            text = " ".join(text.split())
            match = next((m for m in (p.search(text) for p in tracked[qid].patterns) if m), None)
            if match:
                start = max(match.start() - 40, 0)
                found.append(Finding(qid, item.where, text[start:match.end() + 40]))
        revealed |= item.reveals
        open_questions -= item.reveals
    return found


def findings(path_name: str, root: Path = ROOT) -> tuple[list[Finding], dict[str, Question]]:
    """Every answer seen before its reveal on the path, and the questions the path asks."""
    tracked = questions(sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    seen = list(walk(path_name, root))
    asked = sorted({qid for s in seen for qid in s.asks})
    return scan(seen, tracked), {qid: tracked[qid] for qid in asked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", choices=sorted(agenda.PATHS), default="full")
    args = parser.parse_args(argv)
    found, tracked = findings(args.path)
    patterns = sum(len(q.patterns) for q in tracked.values())
    return workshop.print_findings(
        f"{args.path} path: {len(tracked)} questions tracked ({patterns} answer patterns), {len(found)} findings", found)


if __name__ == "__main__":
    sys.exit(main())
