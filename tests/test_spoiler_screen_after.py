"""Notebook 11 under the spoiler screen's own machinery (``tools/spoiler_screen.py``). It is read
after the workshop, on neither path, and ``screen.check(path)`` executes only the paths' notebooks:
here its learner copy runs as a reader runs it (Run All, then a restart and Run All, no guess made)
and its site page is read folded. An answer planted before its reveal is found; the notebook as
committed shows none."""

import copy
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import agenda  # noqa: E402
import site_notebook  # noqa: E402
import spoiler_screen as screen  # noqa: E402

NOTEBOOK = "11"


def findings(plant: str | None = None) -> list:
    nb, indices = screen.slot_notebook(agenda.Slot(0, f"afterwards: {NOTEBOOK}", NOTEBOOK))
    if plant is not None:  # printed by the first guess cell, before any reveal
        nb = copy.deepcopy(nb)
        first_guess = next(i for i, c in enumerate(nb.cells) if "prediction" in c.metadata.get("tags", []))
        nb.cells[first_guess].source += f"\nprint({plant!r})"
    path = agenda.notebook_path(NOTEBOOK)
    room = [item for attempt in range(2)
            for index, cell in zip(indices, screen.execute(nb, ROOT / "notebooks").cells)
            for item in screen.cell_items(f"{path.name} run {attempt + 1}", index, cell, 1)]
    site = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        site_notebook.fold(cell)
        site += screen.site_cell_items(f"site {path.stem}.html cell {index}", cell, 1)
    answers = screen.tracked(ROOT)
    return screen.scan(room, answers) + screen.scan(site, answers)


@pytest.mark.slow
def test_an_answer_planted_before_its_reveal_is_found():
    found = findings("PP = 2: the last stage computes 1 of 3 taps")
    assert {(f.question, f.kind) for f in found} >= {("own-taps", "output"), ("own-taps", "source")}


@pytest.mark.slow
def test_notebook_11_shows_no_answer_before_its_reveal():
    found = findings()
    assert not found, "\n".join(map(str, found))
