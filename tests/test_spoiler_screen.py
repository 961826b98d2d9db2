"""The spoiler check that looks at the screen (``tools/spoiler_screen.py``): one planted spoiler
of each kind (an output, a figure, a widget, a prose line, a handout line, a site paragraph) is caught, and
the same text where it is allowed (folded, after the reveal's section) is not."""

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import spoiler_screen as screen  # noqa: E402

ANSWERS = {"q": screen.Answer("q", (re.compile(r"\btem\b"),), ("plot_step_rows",))}


def asks(source):
    cell = new_markdown_cell(source)
    cell.metadata["workshop"] = {"asks": "q"}
    return cell


def reveal_cell():
    cell = new_code_cell('reveal_it()')
    cell.metadata["tags"] = ["reveal"]
    cell.metadata["workshop"] = {"reveals": ["q"]}
    return cell


def items(nb, slot=1):
    return [item for i, cell in enumerate(nb.cells) for item in screen.cell_items("nb", i, cell, slot)]


def test_a_planted_output_is_caught_when_run_all_prints_it(tmp_path):
    nb = new_notebook(cells=[asks("## 1. Which three characters?"), new_code_cell('print("the slots hold tem")'),
                             new_code_cell("def reveal_it():\n    print('make your guess first')"), reveal_cell()])
    found = screen.scan(items(screen.execute(nb, tmp_path)), ANSWERS)
    assert [(f.kind, f.where) for f in found] == [("source", "nb cell 1"), ("output", "nb cell 1")]
    assert "tem" in found[1].excerpt
    nb.cells[1].source = 'print("the slots hold abc")'
    assert screen.scan(items(screen.execute(nb, tmp_path)), ANSWERS) == []


def test_a_planted_figure_is_caught_by_the_function_that_drew_it():
    cell = new_code_cell("plot_step_rows(step)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"})]
    nb = new_notebook(cells=[asks("## 1. Which?"), cell, reveal_cell()])
    assert [(f.kind, f.excerpt) for f in screen.scan(items(nb), ANSWERS)] == [("figure", "a figure drawn by plot_step_rows")]


STEPPER = {"q": screen.Answer("q", (re.compile(r"B: 2 tokens at step 1"),), (r"trace_stepper\(",))}


def test_a_planted_stepper_shown_before_a_guess_is_caught(tmp_path):
    """A widget prints nothing the check can read (its text is the widget's repr): it is read by the
    call that drew it. Run All draws it before anyone guesses, above the reveal or below it."""
    stub = new_code_cell("import ipywidgets\n\ndef trace_stepper(runs, step):  # the stepper, drawing A and B\n"
                         "    return ipywidgets.HTML('A, B')\n\ndef reveal_it():\n    print('make your guess first')")
    planted = new_code_cell("trace_stepper(runs=None, step=2)")
    guess = new_code_cell("guess_requests = ...")
    nb = screen.execute(new_notebook(cells=[asks("## 6. How many requests?"), stub, planted, guess, reveal_cell()]),
                        tmp_path)
    assert screen.WIDGET_VIEW in nb.cells[2].outputs[0]["data"], "nbclient stores the widget's view, no text"
    found = screen.scan(items(nb), STEPPER)
    assert [(f.kind, f.where, f.excerpt) for f in found] == [("widget", "nb cell 2", r"a widget drawn by trace_stepper\(")]
    below = new_notebook(cells=[nb.cells[0], nb.cells[1], guess, reveal_cell(), nb.cells[2]])
    assert [f.where for f in screen.scan(items(below), STEPPER)] == ["nb cell 4"]  # same Run All: still before a guess
    later = [*items(new_notebook(cells=nb.cells[:1] + [guess, reveal_cell()]), slot=1),
             *items(new_notebook(cells=[nb.cells[2]]), slot=2)]
    assert screen.scan(later, STEPPER) == []  # a slot after the one that revealed it


def test_a_planted_prose_line_is_caught_before_the_next_section_and_not_in_a_closed_fold():
    prose = new_markdown_cell("**Reveal.** `tem`, C's leftovers")
    nb = new_notebook(cells=[asks("## 1. Which?"), reveal_cell(), prose])
    assert [(f.kind, f.where) for f in screen.scan(items(nb), ANSWERS)] == [("prose", "nb cell 2")]
    prose.source = "<details>\n<summary>Why, once you have guessed</summary>\n\n`tem`, C's leftovers\n</details>"
    assert screen.scan(items(nb), ANSWERS) == []
    prose.source = "## Summary\n\n- A verifies `tem`"  # a later section: after the reveal
    assert screen.scan(items(nb), ANSWERS) == []


def test_a_planted_handout_line_is_caught_in_the_half_handed_out(tmp_path):
    handout = tmp_path / "handout.md"
    handout.write_text("# Handout\n\n## The four buffers\n\nthe slots hold tem\n\n## The two faults\n\nfix 2: tem\n")
    top = screen.Item("handout at 08 §3", "page", screen.workshop.page_prose(handout, ("", "The four buffers")), slot=1)
    nb = new_notebook(cells=[asks("## 1. Which?"), reveal_cell()])
    assert [f.where for f in screen.scan([top, *items(nb, slot=2)], ANSWERS)] == ["handout at 08 §3"]
    handout.write_text("# Handout\n\n## The four buffers\n\nrows\n\n## The two faults\n\nfix 2: tem\n")
    top = screen.Item("handout at 08 §3", "page", screen.workshop.page_prose(handout, ("", "The four buffers")), slot=1)
    assert screen.scan([top, *items(nb, slot=2)], ANSWERS) == []  # the half folded under is not read


def _site_notebook():
    """The site's folding (``docs/_ext/site_notebook.py``), which needs Sphinx's docutils: the docs
    extra, which ``make docs`` installs (``.ci/run`` does, and requires it)."""
    import importlib.util
    import os

    if importlib.util.find_spec("docutils") is None:
        if os.environ.get("MINISPEC_REQUIRE_DOCS") == "1":
            pytest.fail("MINISPEC_REQUIRE_DOCS=1 but the docs extra is not installed")
        pytest.skip("the docs extra is not installed (make docs installs it)")
    import site_notebook

    return site_notebook


@pytest.mark.docs
def test_a_planted_site_paragraph_is_caught_and_a_folded_one_is_not():
    site_notebook = _site_notebook()

    paragraph = new_markdown_cell("The slots hold `tem`.")
    nb = new_notebook(cells=[asks("## 1. Which?"), reveal_cell(), paragraph])

    def site(nb):
        for cell in nb.cells:
            site_notebook.fold(cell)
        return [item for i, c in enumerate(nb.cells) for item in screen.site_cell_items(f"site cell {i}", c, 1)]

    found = screen.scan(site(nb), ANSWERS)
    assert [(f.kind, f.where) for f in found] == [("site", "site cell 2")]
    paragraph.metadata["tags"] = ["answer"]  # the site folds it
    assert screen.scan(site(nb), ANSWERS) == []


@pytest.mark.docs
def test_site_folds_say_what_is_behind_them_and_fold_going_deeper():
    site_notebook = _site_notebook()

    cell = new_code_cell('reveal("01-draft-slots")')
    cell.metadata["tags"] = ["reveal"]
    site_notebook.fold(cell)
    assert cell.metadata["mystnb"]["code_prompt_show"] == site_notebook.PREDICTION_FOLD
    deeper = new_markdown_cell("## Going deeper\n\n### What the stale slots cost\n\nlong notes")
    deeper.metadata["tags"] = ["deeper"]
    site_notebook.fold(deeper)
    assert deeper.source.startswith("## Going deeper\n")  # the anchor stays outside the fold
    assert "<summary>Going deeper: What the stale slots cost</summary>" in deeper.source
    code = new_code_cell("# NBVAL_CHECK_OUTPUT\nfrom minispec.lab.viz import render_row_log\n\nprint(render_row_log(trace))")
    code.metadata["tags"] = ["deeper"]
    site_notebook.fold(code)
    assert code.metadata["mystnb"]["code_prompt_show"] == "Going deeper: print(render_row_log(trace)) and what it prints"


def generic_reveal_folds(nb, site_notebook) -> list[int]:
    """The reveal cells whose site fold would carry the generic title, saying nothing of what is behind it."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and site_notebook.REVEAL in c.metadata.get("tags", [])
            and site_notebook.fold_label(c, site_notebook.REVEAL) == site_notebook.FOLDED[site_notebook.REVEAL]]


@pytest.mark.docs
def test_every_reveal_fold_says_what_is_behind_it():
    """A reveal cell either calls reveal(id) or names its fold (``workshop.fold``); planted: one that does neither."""
    site_notebook = _site_notebook()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert generic_reveal_folds(nbformat.read(path, as_version=4), site_notebook) == [], path.name
    named = new_code_cell("print(run())")
    named.metadata = {"tags": ["reveal"], "workshop": {"fold": "The four runs' tokens (predict first)"}}
    planted = new_code_cell("print(run())")
    planted.metadata["tags"] = ["reveal"]
    assert generic_reveal_folds(new_notebook(cells=[named, planted]), site_notebook) == [1]
    site_notebook.fold(named)
    assert named.metadata["mystnb"]["code_prompt_show"] == "The four runs' tokens (predict first)"


@pytest.mark.slow
@pytest.mark.parametrize("path", ["core", "full"])
def test_no_answer_on_the_room_screen_or_the_site(path):
    found, asked = screen.check(path)
    assert asked and not found, "\n".join(map(str, found))


@pytest.mark.docs
def test_a_notebook_off_the_paths_is_read_alone_and_a_planted_answer_in_it_caught(tmp_path):
    """--notebooks: 04 alone, its page as the site shows it; rows-step2 (revealed in 01 on the paths)
    counts as unrevealed here, so an intro that states it is caught."""
    _site_notebook()
    (tmp_path / "notebooks").mkdir()
    for name in ("04_pipeline_and_batch_queue.ipynb", "glossary.ipynb"):
        (tmp_path / "notebooks" / name).write_text((ROOT / "notebooks" / name).read_text())
    assert screen.check("core", tmp_path, execute_notebooks=False, notebooks=("04",))[0] == []
    path = tmp_path / "notebooks" / "04_pipeline_and_batch_queue.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nHence every decode is re-added every step."  # planted
    nbformat.write(nb, path)
    found, asked = screen.check("core", tmp_path, execute_notebooks=False, notebooks=("04",))
    assert [(f.question, f.where) for f in found] == [("rows-step2", "site 04_pipeline_and_batch_queue.html cell 0")]
    assert {"second-batch", "serial-idle", "overlap-cost", "rows-step2"} <= set(asked)


@pytest.mark.docs
def test_06s_stepper_is_in_its_reveal_and_a_planted_one_before_the_guess_is_caught(tmp_path):
    """06's smallest-schedule stepper: its page shows it only inside the reveal's fold. A copy of it
    planted above the guess (the cell that stood under the reveal, with its stored stepper) is caught."""
    _site_notebook()
    (tmp_path / "notebooks").mkdir()
    for name in ("06_invariants_as_a_debugger.ipynb", "glossary.ipynb"):
        (tmp_path / "notebooks" / name).write_text((ROOT / "notebooks" / name).read_text())
    path = tmp_path / "notebooks" / "06_invariants_as_a_debugger.ipynb"
    nb = nbformat.read(path, as_version=4)
    [reveal] = [i for i, c in enumerate(nb.cells) if 'reveal("06-smallest")' in c.source]
    assert any(screen.WIDGET_VIEW in o.get("data", {}) for o in nb.cells[reveal].outputs), "the reveal stores the stepper"
    assert not [c for c in nb.cells if c.cell_type == "code" and "trace_stepper(" in c.source]
    assert screen.check("core", tmp_path, execute_notebooks=False, notebooks=("06",))[0] == []
    stepper = next(o for o in nb.cells[reveal].outputs if screen.WIDGET_VIEW in o.get("data", {}))
    planted = new_code_cell("trace_stepper(runs, decode=decode, step=2)", outputs=[stepper])
    nb.cells.insert(reveal - 1, planted)  # above the guess cell
    nbformat.write(nb, path)
    found, asked = screen.check("core", tmp_path, execute_notebooks=False, notebooks=("06",))
    assert [(f.question, f.kind, f.where) for f in found] == [
        ("smallest", "widget", f"site 06_invariants_as_a_debugger.html cell {reveal - 1}")]
    assert "smallest" in asked


@pytest.mark.slow
@pytest.mark.parametrize("notebooks", [("03", "04", "06", "07", "09", "10")])
def test_no_answer_on_the_screen_or_the_site_of_the_notebooks_off_the_paths(notebooks):
    found, asked = screen.check("core", notebooks=notebooks)
    assert asked and not found, "\n".join(map(str, found))
