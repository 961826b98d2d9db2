"""Learner copies (tools/workshop.py): spoilers off the screen, words counted as issue 13 defines them."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import workshop  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def code(source, *tags, text="out"):
    cell = new_code_cell(source, execution_count=3, outputs=[new_output("stream", name="stdout", text=text)])
    cell.metadata["tags"] = list(tags)
    return cell


def markdown(source, *tags):
    cell = new_markdown_cell(source)
    cell.metadata["tags"] = list(tags)
    return cell


def write(path, *cells):
    nbformat.write(new_notebook(cells=list(cells)), path)
    return path


def test_spoiler_outputs_are_cleared_and_nothing_else():
    nb = new_notebook(cells=[code("setup()"), code("guess = ...", "prediction"), code("check()", "reveal", text="tem"),
                             code("show()", "answer"), code("plot()", "deeper"), markdown("Why?", "answer")])
    copy = workshop.learner_copy(nb)
    kept, *spoilers, deeper, answer = copy.cells
    assert [c.outputs for c in spoilers] == [[], [], []] and {c.execution_count for c in spoilers} == {None}
    assert kept.outputs[0].text == "out" and kept.execution_count == 3 and deeper.outputs[0].text == "out"
    assert [c.source for c in copy.cells[:5]] == [c.source for c in nb.cells[:5]]
    assert answer.source.startswith("<details>\n<summary><b>Answer:</b>") and "\n\nWhy?\n\n</details>" in answer.source
    assert nb.cells[2].outputs[0].text == "tem" and nb.cells[5].source == "Why?"  # the original is untouched


def test_the_answer_fold_hides_its_words_from_the_count():
    nb = new_notebook(cells=[markdown("one two three", "answer")])
    assert workshop.visible_words(nb) == 3 and workshop.visible_words(workshop.learner_copy(nb)) == 0


def test_an_answer_folded_already_is_not_folded_twice():
    folded = "<details>\n<summary><b>Going deeper:</b> the answers</summary>\n\nfix 1 writes...\n\n</details>"
    assert workshop.learner_copy(new_notebook(cells=[markdown(folded, "answer")])).cells[0].source == folded


@pytest.mark.parametrize("source,words", [
    ("Two words", 2),
    ("  spaced\n\nout\tacross   lines ", 4),
    ("<b>bold</b> text", 2),                          # tags go, their words stay
    ("a<br>b", 2),                                    # a tag separates words
    ("before\n<details>\n<summary><b>Going deeper:</b> title</summary>\n\nfolded words here\n\n</details>\nafter", 2),
    ("x <DETAILS open><summary>s</summary>y</DETAILS> z", 2),
    ("a <details><summary>o</summary><details><summary>i</summary>in</details> out</details> b", 2),  # nested
    ("`code` and **markdown** count", 4),
    ("", 0),
])
def test_visible_words_of_one_cell(source, words):
    assert workshop.visible_words(new_notebook(cells=[markdown(source)])) == words


def test_only_visible_markdown_counts():
    nb = new_notebook(cells=[markdown("one two"), markdown("deeper words here", "deeper"),
                             code("# many words in a code cell are not prose"), new_markdown_cell("three")])
    assert workshop.visible_words(nb) == 3


def test_first_code_line():
    first = "# Run this cell first, and again after any kernel restart."
    assert workshop.starts_with_run_first(new_notebook(cells=[markdown("x"), code(first + "\nimport x")]))
    assert not workshop.starts_with_run_first(new_notebook(cells=[code("import x\n" + first)]))
    assert not workshop.starts_with_run_first(new_notebook(cells=[code("")]))
    assert workshop.first_code_line(new_notebook(cells=[markdown("x")])) is None


def test_a_copy_the_learner_worked_in_is_kept_unless_forced(tmp_path):
    source = write(tmp_path / "07_x.ipynb", code("check()", "reveal", text="answer"))
    out = tmp_path / "workshop"
    assert workshop.write_copy(source, out).written
    assert workshop.write_copy(source, out).written  # untouched: rewritten, so pulled changes arrive
    learner = nbformat.read(out / source.name, as_version=4)
    learner.cells[0].source = "my attempt"
    nbformat.write(learner, out / source.name)
    kept = workshop.write_copy(source, out)
    assert not kept.written and nbformat.read(out / source.name, as_version=4).cells[0].source == "my attempt"
    assert workshop.write_copy(source, out, force=True).written
    assert nbformat.read(out / source.name, as_version=4).cells[0].source == "check()"


def test_command_line_writes_copies_and_prints_words_and_budgets(tmp_path, capsys):
    a = write(tmp_path / "00_map.ipynb", markdown("three short words"), code("x", "reveal"))
    b = write(tmp_path / "glossary.ipynb", markdown("term: meaning"))
    out = tmp_path / "workshop"
    assert workshop.main([str(a), str(b), "--out", str(out)]) == 0
    rows = {line.split()[0]: line.split()[1:4] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows == {"00_map.ipynb": ["3", "350", "1"], "glossary.ipynb": ["2", "-", "0"]}
    assert json.loads((out / "00_map.ipynb").read_text())["cells"][1]["outputs"] == []


@pytest.mark.parametrize("args,message", [
    (["{dir}/missing.ipynb"], "no such notebook: {dir}/missing.ipynb"),
    (["{nb}", "--out", "{dir}"], "--out {dir} is where the notebooks are: choose another folder"),
])
def test_command_line_refuses_bad_input(tmp_path, capsys, args, message):
    nb = write(tmp_path / "01_x.ipynb", markdown("x"))
    with pytest.raises(SystemExit) as exit_:
        workshop.main([a.format(nb=nb, dir=tmp_path) for a in args])
    assert exit_.value.code == 2 and capsys.readouterr().err.strip().endswith(message.format(dir=tmp_path))
    assert nbformat.read(nb, as_version=4).cells[0].source == "x"


def test_every_numbered_notebook_has_a_budget():
    assert [p.name[:2] for p in NOTEBOOKS] == sorted(workshop.BUDGETS)


# Issue 13's targets: each notebook's workshop path fits its agenda slot.
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_visible_words_within_the_agenda_budget(path):
    words = workshop.visible_words(nbformat.read(path, as_version=4))
    assert words <= workshop.budget(path), f"{path.name}: {words} visible words, budget {workshop.budget(path)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_first_code_cell_says_run_me_first(path):
    assert workshop.starts_with_run_first(nbformat.read(path, as_version=4))


@pytest.mark.slow
def test_nbval_plugs_the_solutions_into_notebook_kernels_only(tmp_path):
    """tests/nbval_solutions.py sets MINISPEC_PLUG_SOLUTIONS=1 for a notebook's kernel, and
    a test that runs after the notebook in the same session does not see it."""
    cell = code("# NBVAL_CHECK_OUTPUT\nimport os\nprint(os.environ.get('MINISPEC_PLUG_SOLUTIONS'))", text="1\n")
    write(tmp_path / "plugged.ipynb", cell)
    (tmp_path / "test_after.py").write_text(
        "import os\n\ndef test_env():\n    assert 'MINISPEC_PLUG_SOLUTIONS' not in os.environ\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                             str(tmp_path / "plugged.ipynb"), str(tmp_path / "test_after.py")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout[-2000:]
