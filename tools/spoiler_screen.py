"""The spoiler check that looks at the screen: every declared answer readable before its reveal.

    python tools/spoiler_screen.py [--path core|full] [--no-execute]
    python tools/spoiler_screen.py --notebooks 03 04 [--no-execute]

``tools/spoilers.py`` reads the notebooks' sources in the agenda's order; this one looks at what
the room and the reader see. For each slot of the agenda it executes the learner copy
(``tools/workshop.py``) of the slot's notebook as the room runs it (Run All for a whole notebook,
else the slot's sections after the first cell), with no guess made, twice: Run All, then a
restart and Run All again. It reads every printed output, every figure and widget (the
stepper) by the call that drew it, and the prose outside closed folds; then it reads the website's pages of
the same notebooks, converted as ``docs/_ext/site_notebook.py`` converts them (its folds
closed), and the pages the room keeps open or is handed.

What gives an answer away is declared: ``minispec.lab.predictions`` (each prediction's
``answers`` and ``figures``), and for the questions not yet moved there, the cell metadata that
``tools/spoilers.py`` reads. A finding is:

- an output, figure or widget that matches a question the room has not had revealed in an earlier slot
  (Run All prints every output before anyone guesses, whatever its place on the page);
- prose, code or a page that matches a question before its reveal cell, in reading order.

``--notebooks`` checks notebooks off both paths (read afterwards, alone): each is its own room, run
on its own (Run All, then restart and Run All) and read as its own page, so nothing revealed in
another notebook counts as revealed there.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
import agenda  # noqa: E402
import spoilers  # noqa: E402
import workshop  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_REVEAL_CALL = re.compile(r'\breveal\("([\w.-]+)"\)')
_NBVAL_LINE = re.compile(r"^[ \t]*# NBVAL_\w+[^\n]*(\n|$)", re.M)  # nbval markers the site drops
# The kernel sees no author's switch: each reveal waits for a guess, each check for an attempt.
_AUTHOR_ENV = ("MINISPEC_REVEAL", "MINISPEC_PLUG_SOLUTIONS")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DRAWN = ("figure", "widget")  # read by the call that drew them (Answer.figures), shown as Run All leaves them


@dataclass(frozen=True)
class Answer:
    """One question: the patterns of its answer and the plotting functions whose figure shows it."""

    question: str
    patterns: tuple[re.Pattern, ...]
    figures: tuple[str, ...] = ()  # regular expressions for the call, in a cell's source, that draws it
    # (a figure, or a widget such as the stepper: what it shows is drawn, not printed)


@dataclass(frozen=True)
class Item:
    """One thing on screen, in reading order."""

    where: str
    kind: str   # "output", "figure", "widget", "prose", "source", "page", "site"
    text: str
    reveals: frozenset[str] = frozenset()
    slot: int = 0  # the agenda slot it belongs to (pages kept open: 0)
    asks: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Finding:
    question: str
    where: str
    kind: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.question}: {self.where} ({self.kind}): {self.excerpt!r}"


def tracked(root: Path = ROOT) -> dict[str, Answer]:
    """Every declared answer: the predictions' and the cell metadata's, merged by question."""
    from minispec.lab.predictions import PREDICTIONS

    patterns: dict[str, list[re.Pattern]] = {}
    figures: dict[str, set[str]] = {}
    for q in spoilers.questions(sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))).values():
        patterns.setdefault(q.id, []).extend(q.patterns)
    for p in PREDICTIONS.values():
        patterns.setdefault(p.question, []).extend(re.compile(a) for a in p.answers)
        figures.setdefault(p.question, set()).update(p.figures)
    return {q: Answer(q, tuple(ps), tuple(sorted(figures.get(q, ())))) for q, ps in patterns.items()}


def reveals_of(cell) -> frozenset[str]:
    """The questions a cell reveals: its metadata's, and the question of each reveal(id) it calls."""
    from minispec.lab.predictions import PREDICTIONS

    ids = _REVEAL_CALL.findall(cell.source) if cell.cell_type == "code" else []
    return frozenset(spoilers.declaration(cell).get("reveals", [])) | {PREDICTIONS[i].question for i in ids if i in PREDICTIONS}


def asks_of(cell) -> frozenset[str]:
    asks = spoilers.declaration(cell).get("asks")
    return frozenset([asks]) if asks else frozenset()


def execute(nb, cwd: Path, timeout: int = 600):
    """``nb`` run in a fresh kernel (Run All), without the author's switches; returns the run copy."""
    from nbclient import NotebookClient

    saved = {name: os.environ.pop(name, None) for name in _AUTHOR_ENV}
    try:
        run = copy.deepcopy(nb)
        NotebookClient(run, timeout=timeout, kernel_name="python3", allow_errors=False,
                       resources={"metadata": {"path": str(cwd)}}).execute()
        return run
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def slot_notebook(slot: agenda.Slot, root: Path = ROOT):
    """The learner copy as this slot runs it: all cells (Run All), or the first cell and the slot's cells."""
    committed = nbformat.read(agenda.notebook_path(slot.notebook, root), as_version=4)
    learner = workshop.learner_copy(committed)
    if slot.run is agenda.Run.ALL:
        return learner, list(range(len(learner.cells)))
    keep = sorted({1} | set(agenda.slot_cells(committed, slot)))  # cell 1: "Run this cell first"
    trimmed = copy.deepcopy(learner)
    trimmed.cells = [learner.cells[i] for i in keep]
    return trimmed, keep


_STEPPER_HTML = re.compile(r'class="minispec-stepper"')  # a stepper stored, or on the site, without its widget


def drawn_items(where: str, cell, slot: int) -> Iterator[Item]:
    """A cell's figures and widgets, each read by the call in its source that drew it: a widget's
    text is its repr, not what it shows (the stepper's figures and lines are drawn in the browser)."""
    outputs = [o.get("data", {}) for o in cell.get("outputs", [])]
    if any("image/png" in data for data in outputs):
        yield Item(where, "figure", cell.source, frozenset(), slot)
    if any(WIDGET_VIEW in data or _STEPPER_HTML.search(data.get("text/html", "")) for data in outputs):
        yield Item(where, "widget", cell.source, frozenset(), slot)


def cell_items(name: str, index: int, cell, slot: int) -> Iterator[Item]:
    """What one executed cell puts on screen."""
    where = f"{name} cell {index}"
    reveals = reveals_of(cell)
    if cell.cell_type == "markdown":
        yield Item(f"{where}", "prose", workshop.closed_folds(cell.source), reveals, slot, asks_of(cell))
        return
    yield Item(where, "source", cell.source, reveals, slot, asks_of(cell))
    printed = "".join(workshop.output_text(o) for o in cell.get("outputs", []))
    yield Item(where, "output", printed, frozenset(), slot)
    yield from drawn_items(where, cell, slot)


def room_items(path_name: str, root: Path = ROOT, runs: int = 2,
               slots: tuple[agenda.Slot, ...] | None = None) -> Iterator[Item]:
    """The room's screen on the path (or on ``slots``): pages kept open, then each slot's executed
    learner copy (``runs`` times: Run All, then restart and Run All), with the handout where it is
    handed out."""
    for page, sections in agenda.OPEN_PAGES:
        yield Item(f"{Path(page).name} (kept open)", "page", workshop.page_prose(root / page, sections))
    for number, slot in enumerate(slots or agenda.path(path_name), start=1):
        if slot.page:
            yield Item(slot.page, "page", workshop.page_prose(root / slot.page), slot=number)
        if slot.label in spoilers.HANDOUT_AT:
            page, sections = spoilers.HANDOUT_AT[slot.label]
            yield Item(f"{page} at {slot.label}", "page", workshop.page_prose(root / page, sections), slot=number)
        if slot.notebook is None:
            continue
        nb, indices = slot_notebook(slot, root)
        name = agenda.notebook_path(slot.notebook, root).name
        for attempt in range(runs):
            run = execute(nb, root / "notebooks")
            label = name if attempt == 0 else f"{name} after a restart"
            for index, cell in zip(indices, run.cells):
                yield from cell_items(label, index, cell, number)


def site_items(path_name: str, root: Path = ROOT, notebooks: tuple[str, ...] | None = None) -> Iterator[Item]:
    """The website's pages of the path's notebooks (or of ``notebooks``) and the glossary, as
    ``site_notebook`` folds them: a folded output or cell is not on screen; a markdown fold shows its
    title only."""
    import site_notebook

    numbers = notebooks or [s.notebook for s in agenda.path(path_name) if s.notebook]
    pages = [agenda.notebook_path(n, root) for n in dict.fromkeys(numbers)] + [root / "notebooks" / "glossary.ipynb"]
    for number, page in enumerate(pages, start=1):
        nb = nbformat.read(page, as_version=4)
        for index, cell in enumerate(nb.cells):
            site_notebook.fold(cell)
            yield from site_cell_items(f"site {page.stem}.html cell {index}", cell, number)


def site_cell_items(where: str, cell, page: int) -> Iterator[Item]:
    tags = workshop.tags(cell)
    if cell.cell_type == "markdown":
        yield Item(where, "site", workshop.closed_folds(cell.source), reveals_of(cell), page, asks_of(cell))
        return
    if "hide-cell" in tags:  # folded whole: its title only
        yield Item(where, "site", cell.metadata.get("mystnb", {}).get("code_prompt_show", ""), reveals_of(cell), page,
                   asks_of(cell))
        return
    yield Item(where, "site", _NBVAL_LINE.sub("", cell.source), reveals_of(cell), page, asks_of(cell))
    if "hide-output" not in tags:
        yield Item(where, "site", "".join(workshop.output_text(o) for o in cell.get("outputs", [])), frozenset(), page)
        yield from drawn_items(where, cell, page)


_SECTION = re.compile(r"^###? ", re.M)  # a section or a subsection: the reader meets a new part


def scan(items: list[Item], answers: dict[str, Answer]) -> list[Finding]:
    """Every answer on screen before its reveal: outputs, figures and widgets before the slot after the one
    that reveals it; prose, code and pages before the (sub)section after the reveal (text just under a
    reveal is on screen with it, open or not). Only the questions ``items`` ask count: a question
    never asked there cannot be spoiled there."""
    asked = {q for item in items for q in item.asks | item.reveals}
    revealed: set[str] = set()       # by a reveal in an earlier section
    pending: set[str] = set()        # by a reveal in this section
    before_slot: set[str] = set()    # by a reveal in an earlier slot (or page)
    slot, found = 0, []
    for item in items:
        if item.slot != slot:
            revealed |= pending
            slot, before_slot, pending = item.slot, set(revealed), set()
        if item.kind in ("prose", "site") and _SECTION.match(item.text.lstrip()):  # a new part starts here
            revealed |= pending
            pending = set()
        done = before_slot if item.kind in DRAWN + ("output",) else revealed
        for answer in answers.values():
            if answer.question not in asked or answer.question in done or answer.question in item.reveals:
                continue
            if item.kind in DRAWN:
                hit = next((f for f in answer.figures if re.search(f, item.text)), None)
                if hit:
                    found.append(Finding(answer.question, item.where, item.kind, f"a {item.kind} drawn by {hit}"))
                continue
            text = " ".join(item.text.split())
            match = next((m for m in (p.search(text) for p in answer.patterns) if m), None)
            if match:
                found.append(Finding(answer.question, item.where, item.kind,
                                     text[max(match.start() - 40, 0):match.end() + 40]))
        pending |= item.reveals
        if item.kind in ("prose", "site") and _SECTION.search(item.text):
            revealed |= pending
            pending = set()
    return found


def check(path_name: str, root: Path = ROOT, execute_notebooks: bool = True,
          notebooks: tuple[str, ...] = ()) -> tuple[list[Finding], dict[str, Answer]]:
    """Findings and the questions asked, on the path; with ``notebooks``, on each of them alone."""
    answers = tracked(root)
    rooms = ([list(room_items(path_name, root, slots=(agenda.Slot(0, f"notebook {n}", n),))) for n in notebooks]
             if notebooks else [list(room_items(path_name, root))]) if execute_notebooks else []
    site = list(site_items(path_name, root, notebooks or None))
    asked = {q for item in [i for room in rooms for i in room] + site for q in item.asks | item.reveals}
    pages = {item.slot for item in site}  # a reader may land on any page: each is read on its own
    site_found = [f for page in sorted(pages) for f in scan([i for i in site if i.slot == page], answers)]
    return [f for room in rooms for f in scan(room, answers)] + site_found, {q: a for q, a in answers.items() if q in asked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", choices=sorted(agenda.PATHS), default="core")
    parser.add_argument("--no-execute", action="store_true", help="the website's pages only")
    parser.add_argument("--notebooks", nargs="+", default=(), metavar="NN",
                        help="check these notebooks (e.g. 03 04), each alone, instead of a path")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    found, asked = check(args.path, execute_notebooks=not args.no_execute, notebooks=tuple(args.notebooks))
    patterns = sum(len(a.patterns) + len(a.figures) for a in asked.values())
    where = f"notebooks {', '.join(args.notebooks)}" if args.notebooks else f"{args.path} path"
    return workshop.print_findings(
        f"{where}, screen and site: {len(asked)} questions tracked ({patterns} answer patterns and figures), "
        f"{len(found)} findings ({time.perf_counter() - start:.0f} s)", found)


if __name__ == "__main__":
    sys.exit(main())
