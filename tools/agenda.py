"""The workshop's agenda as data, and what each slot needs, computed from the notebooks.

    python tools/agenda.py            # both paths' tables: slot, minutes, need, slack

``docs/workshop.md`` prints these tables; ``tests/test_workshop.py`` fails when a slot's
need exceeds its minutes less the path's slack. A slot's need is its reading time (the
visible words of the cells it shows, fold titles and printed output included, at
:data:`WORDS_PER_MINUTE`), its pauses, and the measured Run All time of each notebook it opens.
The walk of ``tools/spoilers.py`` follows the same slots, in the same order.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workshop  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 60  # the guide's reading rate for a room, prose and printed output alike
# The pages the guide sends the room to, kept open all along: README's top and its install
# section, and the glossary (None: all of it).
OPEN_PAGES = (("README.md", ("", "Two commands")), ("notebooks/glossary.ipynb", None))
SUMMARY, DEEPER = 90, 99  # section numbers of "## Summary" and "## Going deeper"
# Run All of each notebook in seconds: nbconvert on the 2-core reference machine at load 2.5-5
# (docs/workshop.md, section 1). 04's includes its measured cell.
RUN_ALL_S = {"00": 34, "01": 28, "02": 46, "03": 15, "04": 41, "05": 11, "06": 29, "07": 17, "08": 0,
             "10": 37}  # 10's at load 8.4, above the range: an upper bound
_SECTION = re.compile(r"^##\s+(\d+)\.", re.M)
_CHECK_S = 10  # one check_* call at most (docs/workshop.md, section 2)
_CHECK_CALL = re.compile(r"\bcheck_\w+\(|\breveal\(\"08-")  # a cell whose output is the checker's
# What the guide asks beyond reading (docs/workshop.md, section 1), in minutes:
PREDICTION_PAUSE = 1.0   # each guess cell the slot shows: the room writes a guess, hands go up
SWITCH = 1.0             # opening a notebook the room did not have open (kernel start, first cell)
PROJECTION = 2.0         # putting the stepper on the projector and stepping it to step 2
# The checker's real output at a reveal or an exercise: its first lines (79 words at 08 §1 in the
# third dry run) and its figure, read by the room: the committed notebook stores only the stub's answer.
CHECKER_WORDS = 79
CHECKER_FIGURE = 0.5


class Run(str, Enum):
    """Which code cells of its notebook a slot runs."""

    ALL = "all"                    # Run All: every cell prints its output, Going deeper's too
    SECTIONS = "sections"          # the slot's sections only, a cell at a time
    HOLD_REVEALS = "hold reveals"  # the slot's sections, but the reveals of ``held`` ones run later
    REVEALS_ONLY = "reveals only"  # the reveals held back by an earlier slot


@dataclass(frozen=True)
class Slot:
    """One line of the agenda."""

    minutes: int
    label: str
    notebook: str | None = None  # "01"; None for a page or the wrap-up
    page: str | None = None      # a page put on screen, e.g. "docs/opening.md"
    sections: tuple[int, ...] | None = None  # None: the whole notebook but its Going deeper
    run: Run = Run.ALL
    held: tuple[int, ...] = ()  # with Run.HOLD_REVEALS: the sections whose reveals wait
    pauses: tuple[int, ...] = ()  # minutes of each pause
    extra_words: int = field(default=0)  # what is said without a page (the wrap-up)
    switch: bool = False      # the room opens this notebook now (it was not open)
    projects: bool = False    # the stepper goes on the projector
    handout: tuple[str, ...] | None = None  # the handout's sections the room reads now (None: none)
    checks: int = 0           # checker runs whose real output the room reads

    def runs(self, cell, section: int) -> bool:
        """Whether the room runs this code cell, of this section, in this slot."""
        held = is_reveal(cell) and section in self.held
        return {Run.ALL: True, Run.SECTIONS: True, Run.HOLD_REVEALS: not held, Run.REVEALS_ONLY: is_reveal(cell)}[self.run]


def is_reveal(cell) -> bool:
    tags = set(cell.get("metadata", {}).get("tags", []))
    return bool(tags & {"reveal", "solution"}) or bool(cell.get("metadata", {}).get("workshop", {}).get("reveals"))


def section_of_cells(nb) -> list[int]:
    """The section number of each cell: the last ``## N.`` heading at or above it."""
    sections, current = [], 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            numbers = _SECTION.findall(cell.source)
            if numbers:
                current = int(numbers[-1])
            elif cell.source.startswith("## Summary"):
                current = SUMMARY
            elif cell.source.startswith("## Going deeper"):
                current = DEEPER
        sections.append(current)
    return sections


def slot_cells(nb, slot: Slot) -> list[int]:
    """The indices of the cells a slot reads (its sections)."""
    wanted = slot.sections if slot.sections is not None else tuple(set(section_of_cells(nb)) - {DEEPER})
    chosen = [i for i, s in enumerate(section_of_cells(nb)) if s in wanted]
    if slot.run is Run.REVEALS_ONLY:
        chosen = [i for i in chosen if nb.cells[i].cell_type == "code" and is_reveal(nb.cells[i])]
    return chosen


def screen_cells(nb, slot: Slot) -> list[int]:
    """The indices of the cells on the room's screen: after Run All, every cell (a room scrolls)."""
    return list(range(len(nb.cells))) if slot.run is Run.ALL else slot_cells(nb, slot)


def notebook_path(number: str, root: Path = ROOT) -> Path:
    (path,) = sorted((root / "notebooks").glob(f"{number}_*.ipynb"))
    return path


# The handout (docs/handout.md), read where it is used: its opening and the four buffers as 08 §3
# starts, the invariants at 08 §5 (fix 2 is judged by invariant 3). Its answers slip goes home after
# the wrap-up, read afterwards.
HANDOUT_BUFFERS = ("", "The four buffers (one row per request, on every pipeline stage)")
HANDOUT_INVARIANTS = ("The invariants (`minispec/instruments/invariants.py`)",)
# 08 stays open from the first slot to the last: going back to it is a tab, not a switch. 08 §2 (the
# acceptance rates) is for afterwards: 01's Going deeper asks it too.
CORE = (
    Slot(5, "opening page, while laptops start", page="docs/opening.md"),
    Slot(8, "08 §1: predict", "08", sections=(0, 1), run=Run.HOLD_REVEALS, held=(1,), switch=True),
    Slot(26, "01 the thread, the stepper", "01", switch=True, projects=True),
    Slot(3, "08 §1: the reveal", "08", sections=(1,), run=Run.REVEALS_ONLY, checks=1),
    Slot(16, "08 §3: write fix 1", "08", sections=(3,), run=Run.SECTIONS, pauses=(6,), handout=HANDOUT_BUFFERS,
         checks=1),
    Slot(14, "05 the second fault", "05", switch=True),
    Slot(14, "08 §5: write fix 2", "08", sections=(5,), run=Run.SECTIONS, pauses=(6,), handout=HANDOUT_INVARIANTS,
         checks=1),
    Slot(4, "wrap-up: the answers slip", extra_words=120, pauses=(1,)),
)
# The 2-hour path adds the map and speculative decoding itself; 10 §3 (a 2026 fault that depends on
# the number of stages) and 08 §4 (which 05 answers) are for afterwards: counted with everything,
# no other 30 minutes fit.
FULL = (
    CORE[0],
    Slot(9, "00 the map", "00", sections=(0, 1), switch=True),
    *CORE[1:4],
    Slot(21, "02 speculative decoding", "02", sections=(0, 1, 2), pauses=(2,), switch=True),
    *CORE[4:],
)
PATHS = {"core": CORE, "full": FULL}
SLACK = 0.10  # the share of every slot kept free, on both paths


def path(name: str) -> tuple[Slot, ...]:
    if name not in PATHS:
        raise ValueError(f"path must be one of {sorted(PATHS)}, not {name!r}")
    return PATHS[name]


def afterwards(name: str, root: Path = ROOT) -> tuple[Slot, ...]:
    """What the room reads after the workshop: every notebook the path did not open (Run All),
    then the sections of ``08`` after the last it reached (one it skipped, such as §4 on the core
    path, whose answer ``05`` gives, stays skipped). Untimed; the spoiler walk goes on through it."""
    slots = path(name)
    opened = {s.notebook for s in slots if s.notebook}
    numbers = sorted(p.name[:2] for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    rest = [Slot(0, f"afterwards: {n}", n) for n in numbers if n not in opened]
    if "08" in opened:
        reached = {sec for s in slots if s.notebook == "08" for sec in (s.sections or ())}
        nb = nbformat.read(notebook_path("08", root), as_version=4)
        left = tuple(s for s in sorted(set(section_of_cells(nb))) if s > max(reached))  # a skipped one stays skipped
        rest.append(Slot(0, "afterwards: 08's other sections", "08", sections=left, run=Run.SECTIONS))
    return tuple(rest)


def _words(text: str) -> int:
    return len(text.split())


def _printed(cell) -> str:
    return "".join(workshop.output_text(o) for o in cell.get("outputs", []))


def slot_words(slot: Slot, root: Path = ROOT) -> int:
    """The words a slot puts on screen: prose with fold titles, and printed output of what it runs."""
    if slot.page:
        return _words(workshop.page_prose(root / slot.page))
    if slot.notebook is None:
        return slot.extra_words
    nb = nbformat.read(notebook_path(slot.notebook, root), as_version=4)
    words = 0
    sections = section_of_cells(nb)
    for i in slot_cells(nb, slot):
        cell = nb.cells[i]
        if cell.cell_type == "markdown":
            words += _words(workshop.closed_folds(cell.source))
        elif slot.runs(cell, sections[i]) and not (slot.checks and _CHECK_CALL.search(cell.source)):
            words += _words(_printed(cell))  # a check's stored output is the stub's: `checks` counts the real one
    return words + slot.extra_words


def run_seconds(slot: Slot) -> float:
    """The slot's Run All (its first slot of a notebook), or one check a cell at a time."""
    if slot.notebook is None:
        return 0
    if slot.notebook == "08":
        return _CHECK_S
    return RUN_ALL_S[slot.notebook]


def code_words(slot: Slot, root: Path = ROOT) -> int:
    """Words of the code cells the slot shows: the guide reads them aloud or the room reads them. The
    notebook's first code cell (its imports, "Run this cell first") is run, not read."""
    if slot.notebook is None:
        return 0
    nb = nbformat.read(notebook_path(slot.notebook, root), as_version=4)
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    return sum(_words(nb.cells[i].source) for i in slot_cells(nb, slot) if nb.cells[i].cell_type == "code" and i != first)


def guesses(slot: Slot, root: Path = ROOT) -> int:
    """The guess cells (tagged prediction) the slot shows: one pause each."""
    if slot.notebook is None or slot.run is Run.REVEALS_ONLY:
        return 0
    nb = nbformat.read(notebook_path(slot.notebook, root), as_version=4)
    return sum("prediction" in workshop.tags(nb.cells[i]) and nb.cells[i].cell_type == "code" for i in slot_cells(nb, slot))


HANDOUT = "docs/handout.md"


def needs(slot: Slot, root: Path = ROOT) -> dict[str, float]:
    """The slot's need in minutes, item by item."""
    handout = _words(workshop.page_prose(root / HANDOUT, slot.handout)) if slot.handout is not None else 0
    items = {
        "reading": slot_words(slot, root) / WORDS_PER_MINUTE,
        "code": code_words(slot, root) / WORDS_PER_MINUTE,
        "guess pauses": guesses(slot, root) * PREDICTION_PAUSE,
        "pauses": float(sum(slot.pauses)),
        "run": run_seconds(slot) / 60,
        "switch": SWITCH if slot.switch else 0.0,
        "projection": PROJECTION if slot.projects else 0.0,
        "handout": handout / WORDS_PER_MINUTE,
        "checker": slot.checks * (CHECKER_WORDS / WORDS_PER_MINUTE + CHECKER_FIGURE),
    }
    return {k: v for k, v in items.items() if v}


def need_minutes(slot: Slot, root: Path = ROOT) -> float:
    return sum(needs(slot, root).values())


def table(name: str, root: Path = ROOT) -> str:
    """The path's agenda as a markdown table: start, slot, minutes, need, slack."""
    rows = ["| start | slot | minutes | need | need by item | slack |", "|---|---|---|---|---|---|"]
    start = 0
    for slot in path(name):
        need = need_minutes(slot, root)
        items = ", ".join(f"{k} {v:.1f}" for k, v in needs(slot, root).items())
        rows.append(f"| {start // 60}:{start % 60:02d} | {slot.label} | {slot.minutes} | {need:.1f} | {items} | "
                    f"{(slot.minutes - need) / slot.minutes:.0%} |")
        start += slot.minutes
    rows.append(f"| {start // 60}:{start % 60:02d} | end | {start} | "
                f"{sum(need_minutes(s, root) for s in path(name)):.1f} | | |")
    return "\n".join(rows)


def main() -> int:
    for name in PATHS:
        print(f"{name} path (at least {SLACK:.0%} of each slot kept free)\n{table(name)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
