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
    first = "# Run this cell first. After a kernel restart: Run > Run All Above Selected Cell."
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


def test_command_line_writes_copies_and_prints_words(tmp_path, capsys):
    a = write(tmp_path / "00_map.ipynb", markdown("three short words"), code("x", "reveal"))
    b = write(tmp_path / "glossary.ipynb", markdown("term: meaning"))
    out = tmp_path / "workshop"
    assert workshop.main([str(a), str(b), "--out", str(out)]) == 0
    rows = {line.split()[0]: line.split()[1:3] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows == {"00_map.ipynb": ["3", "1"], "glossary.ipynb": ["2", "0"]}
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


# -- issue 24 §2: no answer on screen before its reveal, walking the agenda's order ------------

import agenda  # noqa: E402
import spoilers  # noqa: E402


def seen(text, asks=(), reveals=(), unfolded=""):
    return spoilers.Seen("x", text, frozenset(asks), frozenset(reveals), unfolded)


QUESTION = {"q": spoilers.Question("q", (__import__("re").compile(r"\btem\b"),))}


def test_an_answer_before_its_reveal_is_found_and_after_it_is_not():
    walk = [seen("the README says tem"), seen("which three?", asks=["q"]), seen("still tem here"),
            seen("check", reveals=["q"]), seen("tem, as revealed")]
    assert [f.where for f in spoilers.scan(walk, QUESTION)] == ["x", "x"]
    assert [f.excerpt for f in spoilers.scan(walk, QUESTION)] == ["the README says tem", "still tem here"]


def test_word_boundaries_and_unasked_questions():
    assert spoilers.scan([seen("statement", asks=["q"])], QUESTION) == []
    assert spoilers.scan([seen("tem")], QUESTION) == []  # never asked on this path: nothing to spoil


def test_folds_count_as_open_between_a_question_and_its_reveal():
    folded = "<details>\n<summary>Going deeper: hints</summary>\n\nit is tem\n\n</details>"
    text = workshop.closed_folds(folded)
    assert "hints" in text and "tem" not in text
    before = [seen(text, unfolded=folded), seen("?", asks=["q"]), seen("check", reveals=["q"])]
    assert spoilers.scan(before, QUESTION) == []  # closed, and nobody was stuck on q yet
    between = [seen("?", asks=["q"]), seen(text, unfolded=folded), seen("check", reveals=["q"])]
    assert len(spoilers.scan(between, QUESTION)) == 1


def test_a_solution_names_its_code_lines():
    lines = spoilers.solution_lines("take_relayed_tokens")
    assert "behind = num_computed_tokens + len(new_token_ids) - state.num_tokens" in lines
    assert all(len(line) >= 24 and not line.startswith("def ") for line in lines[1:])


def test_solution_outputs_are_cleared_in_learner_copies():
    copy = workshop.learner_copy(new_notebook(cells=[code("show_solution('x')", "solution", text="def x(): ...")]))
    assert copy.cells[0].outputs == []


@pytest.mark.parametrize("name", sorted(agenda.PATHS))
def test_no_answer_on_screen_before_its_reveal(name):
    found, tracked = spoilers.findings(name)
    assert len(tracked) >= 15 and sum(len(q.patterns) for q in tracked.values()) >= 60
    assert found == [], "\n".join(map(str, found))


def _declared(path):
    nb = nbformat.read(path, as_version=4)
    return [(i, cell, cell.metadata.get("workshop", {})) for i, cell in enumerate(nb.cells)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_prediction_is_not_its_own_check(path):
    """The Shift+Enter reflex runs a cell as soon as it is filled in: a cell that asks holds no check."""
    for i, cell, spec in _declared(path):
        if "asks" in spec and cell.cell_type == "code":
            assert "check_" not in cell.source and "reveal" not in cell.metadata.get("tags", []), f"cell {i}"


def test_every_question_has_a_reveal():
    asked, revealed = set(), set()
    for path in NOTEBOOKS:
        for _, _, spec in _declared(path):
            asked |= {spec["asks"]} if "asks" in spec else set()
            revealed |= set(spec.get("reveals", []))
    assert asked and asked <= revealed, sorted(asked - revealed)


# -- issue 24 §1: an agenda that fits, computed from the notebooks ----------------------------


def test_a_slot_needs_its_words_at_the_reading_rate_its_pauses_and_its_run_all(tmp_path):
    (tmp_path / "notebooks").mkdir()
    folded = "<details>\n<summary>two words</summary>\n\n" + "hidden " * 50 + "\n</details>"
    write(tmp_path / "notebooks" / "07_x.ipynb", markdown("## 1. One\n\n" + "word " * 56 + folded),
          code("print()", text="out " * 60), markdown("## 2. Two\n\n" + "skipped " * 600))
    slot = agenda.Slot(5, "x", "07", sections=(1,), pauses=(2,))
    assert agenda.slot_words(slot, tmp_path) == 3 + 56 + 2 + 60  # heading, prose, fold title, printed
    assert agenda.need_minutes(slot, tmp_path) == pytest.approx(121 / 60 + 2 + agenda.RUN_ALL_S["07"] / 60)
    held = agenda.Slot(5, "x", "07", sections=(1,), run=agenda.Run.HOLD_REVEALS, held=(1,))
    assert agenda.slot_words(held, tmp_path) == 121  # an untagged cell is no reveal: it runs


def test_the_guides_asks_are_counted(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "handout.md").write_text("# H\n\n" + "w " * 60 + "\n\n## Faults\n\n" + "x " * 600)
    write(tmp_path / "notebooks" / "07_x.ipynb", code("import x  # run first: run, not read"), markdown("## 1. One"),
          code("guess = ...", "prediction"))
    slot = agenda.Slot(5, "x", "07", sections=(1,), switch=True, projects=True, handout=("",), checks=1)
    assert agenda.needs(slot, tmp_path) == pytest.approx({
        "reading": (3 + 1) / 60, "code": 3 / 60,  # the heading and the printed "out"; the guess cell's code
        "guess pauses": agenda.PREDICTION_PAUSE, "run": agenda.RUN_ALL_S["07"] / 60,
        "switch": agenda.SWITCH, "projection": agenda.PROJECTION, "handout": (2 + 60) / 60,
        "checker": agenda.CHECKER_WORDS / 60 + agenda.CHECKER_FIGURE})


@pytest.mark.parametrize("name", sorted(agenda.PATHS))
def test_every_slot_keeps_its_slack(name):
    over = [(s.label, s.minutes, round(agenda.need_minutes(s), 1)) for s in agenda.path(name)
            if agenda.need_minutes(s) > s.minutes * (1 - agenda.SLACK)]
    assert over == []


def test_the_paths_fit_their_length():
    assert sum(s.minutes for s in agenda.CORE) <= 90 and sum(s.minutes for s in agenda.FULL) <= 120


def test_the_guide_prints_the_computed_agenda():
    guide = (ROOT / "docs" / "workshop.md").read_text()
    for name in agenda.PATHS:
        assert agenda.table(name) in guide, f"docs/workshop.md: the {name} path's table is not the computed one"


def test_an_unknown_path_is_refused():
    with pytest.raises(ValueError, match="path must be one of \\['core', 'full'\\], not 'short'"):
        agenda.path("short")


# -- issue 24 §3: cells that survive a room (tools/rerun.py) ------------------------------------

import rerun  # noqa: E402


def test_printed_output_is_compared_as_the_room_reads_it():
    cell = code("x", text="took 4.36 s at 0x7f3a2c1b9d90\n")
    cell.outputs.append(new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure size 9x2>"}))
    cell.outputs.append(new_output("error", ename="NameError", evalue="name 'step4' is not defined", traceback=[]))
    assert rerun.printed(cell) == "took <DURATION> at <ADDRESS>\n<image/png>NameError: name 'step4' is not defined"
    assert rerun.raised(cell) == "NameError: name 'step4' is not defined" and rerun.raised(code("y")) is None


def test_restart_points_spread_over_the_code_cells_after_the_first():
    nb = new_notebook(cells=[code("first")] + [markdown("m"), code("c")] * 6)
    assert rerun.restart_points(nb, 3) == [4, 8, 12]
    assert rerun.restart_points(nb, 0) == [] and rerun.restart_points(new_notebook(cells=[code("x")]), 3) == []


def test_a_measurement_is_held_to_raising_nothing():
    measured = code("measure()", text="1.60x")
    measured.metadata["workshop"] = {"varies": "a wall-clock measurement"}
    assert rerun._same(measured, "1.60x", code("measure()", text="1.01x"))
    assert not rerun._same(code("x", text="a"), "a", code("x", text="b"))


def test_cells_run_twice_and_after_a_restart_give_the_same_output(tmp_path):
    """A notebook whose second cell appends to a list the first made: run twice, it prints more.
    The cheap version, in the default suite; every notebook is in the slow tier (`make rerun`)."""
    path = write(tmp_path / "07_x.ipynb", code("# first\nitems = []"), code("items.append(1)\nprint(items)"),
                 code("fresh = [1]\nprint(fresh)"))
    found = rerun.check(path, restarts=2)
    assert [(d.check, d.index) for d in found] == [("twice", 1)]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_survives_reruns_and_restarts(path):
    found = rerun.check(path, restarts=3)
    assert found == [], "\n".join(map(str, found))


# -- issue 24 §8: nothing internal in what learners see --------------------------------------


def test_learner_copies_drop_the_test_markers():
    copy = workshop.learner_copy(new_notebook(cells=[code("# NBVAL_CHECK_OUTPUT\nprint(1)\n# NBVAL_IGNORE_OUTPUT")]))
    assert copy.cells[0].source == "print(1)"


@pytest.mark.parametrize("path", NOTEBOOKS + [ROOT / "notebooks" / "glossary.ipynb"],
                         ids=[p.stem for p in NOTEBOOKS] + ["glossary"])
def test_what_learners_see_has_no_internal_references(path):
    learner = workshop.learner_copy(nbformat.read(path, as_version=4))
    for i, cell in enumerate(learner.cells):
        shown = cell.source if cell.cell_type == "code" else workshop.closed_folds(cell.source)
        assert "NBVAL" not in shown, f"cell {i}"
        assert not __import__("re").search(r"\bissue \d+|MINISPEC_PLUG_SOLUTIONS", shown), f"cell {i}: {shown[:200]}"


def test_the_guide_and_the_handout_agree_on_when_it_is_handed_out():
    guide, handout, slip = ((ROOT / "docs" / name).read_text() for name in ("workshop.md", "handout.md",
                                                                          "answers_slip.md"))
    assert "Handed out at `08_exercises` §3" in handout and "answers come on a separate slip" in handout
    assert "For the wrap-up, after `08_exercises` §5" in slip
    assert "**`08` §3, write fix 1.** Hand out `docs/handout.md` now" in guide


@pytest.mark.browser
def test_the_handout_prints_on_one_a4_page():
    import handout
    import lab_screenshots

    if why := lab_screenshots.missing_requirements():
        pytest.skip(why)
    assert handout.pages(handout.pdf(handout.HANDOUT.read_text())) == 1
    assert handout.pages(handout.pdf(handout.HANDOUT.read_text() * 2)) == 2  # the count can fail
    assert handout.pages(handout.pdf(handout.SLIP.read_text())) == 1


def test_the_handout_is_in_the_spoiler_walk_at_fix_1_and_the_slip_at_the_wrap_up():
    seen = [s for s in spoilers.walk("core") if s.where in ("handout.md (page)", "answers_slip.md (page)")]
    assert [s.where for s in seen] == ["handout.md (page)", "answers_slip.md (page)"]
    assert "num_tokens_no_spec" in seen[0].text and "Fault 2" not in seen[0].text
    assert "Fault 2" in seen[1].text


def test_the_handout_gives_no_answer_and_the_slip_gives_both_fixes():
    """Every answer the notebooks declare (their cells' "answers" and reference solutions' lines)
    and the fixes' answers declared once in minispec.lab.exercises.answers: none on the handout;
    the slip states fix 1's and fix 2's."""
    from minispec.lab.exercises.answers import gives_away

    handout, slip = ((ROOT / "docs" / name).read_text() for name in ("handout.md", "answers_slip.md"))
    assert gives_away(handout) == []
    assert {qid for qid, _ in gives_away(slip)} == {"fix1", "fix2"}
    tracked = spoilers.questions(sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    squeezed = " ".join(handout.split())
    assert not [(q.id, p.pattern) for q in tracked.values() for p in q.patterns if p.search(squeezed)]


@pytest.mark.parametrize("planted", [
    "Fix 1 writes the drafts at `num_tokens_no_spec` on re-add too.",  # the old handout's line
    "The accepted drafts are a prefix of `state.spec_token_ids`.",
    "    batch.num_tokens[row] = start + len(spec_token_ids)",
    "take `state.spec_token_ids[:accepted]`, then `new_token_ids`",
])
def test_an_answer_planted_in_the_handout_is_found(planted):
    from minispec.lab.exercises.answers import gives_away

    assert gives_away((ROOT / "docs" / "handout.md").read_text() + "\n" + planted)
