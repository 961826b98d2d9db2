"""Predict, then reveal (``minispec.lab.prediction``): nothing before a guess, then the answer, its
explanation and evidence recomputed; the declared answers are what the evidence prints."""

import json
import re
import sys
import types
from pathlib import Path

import pytest

import minispec.lab.prediction as rv
from minispec.lab.predictions import PREDICTIONS, reveal

CALLS = []


def _evidence():
    CALLS.append(1)
    yield "the slots hold 'xyz'"


QUIZ = rv.Prediction("t-quiz", "quiz", "guess_quiz", "`xyz`", "because the row kept it",
                     answers=(r"\bxyz\b",), evidence=_evidence)


@pytest.fixture
def notebook(monkeypatch):
    """A stand-in for the notebook's namespace (``__main__``), with MINISPEC_REVEAL unset."""
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.delenv(rv.REVEAL_ENV, raising=False)
    return main


def _screen_text(items) -> str:
    return "\n".join(str(i) for i in items)


@pytest.mark.parametrize("guess", [..., None, {"a": ..., "b": 1}, [1, ...]])
def test_nothing_but_make_your_guess_until_a_guess_is_made(notebook, guess):
    CALLS.clear()
    notebook.guess_quiz = guess
    text = _screen_text(QUIZ.screen())
    assert text.startswith(rv.MAKE_YOUR_GUESS) and "xyz" not in text and "because" not in text
    assert not CALLS  # the evidence is not even computed


def test_a_guess_cell_that_never_ran_is_said_so_not_a_name_error(notebook):
    text = _screen_text(QUIZ.screen())
    assert text.startswith(rv.MAKE_YOUR_GUESS) and "guess_quiz is not set in this kernel" in text


def test_after_a_guess_the_answer_its_evidence_recomputed_and_why(notebook):
    CALLS.clear()
    notebook.guess_quiz = "abc"
    first = _screen_text(QUIZ.screen())
    second = _screen_text(QUIZ.screen())
    assert first == second and len(CALLS) == 2  # recomputed each time: nothing kept from earlier cells
    assert "your guess: 'abc'" in first and "the answer: `xyz`" in first and "why: because the row kept it" in first
    assert first.index("the answer") < first.index("why")
    assert [type(i) for i in QUIZ.screen()] == [str, str, str, str]  # one line of evidence: a sentence, it wraps
    table = rv.Prediction("t-table", "table", "guess_quiz", "a", "b", answers=("a",),
                          evidence=lambda: iter(["row 0  A\nrow 1  C"]))
    assert [type(i) for i in table.screen()] == [str, str, rv.Aligned, str]  # lines in columns are kept whole


def test_evidence_in_columns_is_html_that_keeps_its_lines_and_escapes_them():
    table = rv.Aligned("row 0  A<B\nrow 1  C")
    assert repr(table) == str(table) == "row 0  A<B\nrow 1  C"
    assert table._repr_html_() == '<pre class="minispec-aligned">row 0  A&lt;B\nrow 1  C</pre>'
    css = (Path(__file__).resolve().parents[1] / "tools" / "jupyterlab" / "custom" / "custom.css").read_text()
    assert f"pre.{rv.ALIGNED_CLASS} {{\n  white-space: pre;" in css


def test_the_authors_run_reveals_without_a_guess(notebook, monkeypatch):
    monkeypatch.setenv(rv.REVEAL_ENV, "1")
    assert "the answer: `xyz`" in _screen_text(QUIZ.screen())


def test_bad_declarations_and_unknown_ids_are_refused():
    with pytest.raises(ValueError, match="guess_name must be a Python name, not 'my guess'"):
        rv.Prediction("x", "x", "my guess", "a", "b")
    with pytest.raises(ValueError, match=r"reveal\('nope'\): expected one of"):
        reveal("nope")


def test_every_prediction_declares_an_answer_and_one_guess_per_question_in_a_notebook():
    names = {}
    for p in PREDICTIONS.values():
        assert p.answers, p.id
        notebook = p.id.split("-")[0]  # two reveals of one question may share its guess, two questions may not
        assert names.setdefault((notebook, p.guess_name), p.question) == p.question, f"{p.id} reuses {p.guess_name}"


REVEALED = ["01-draft-slots", "01-relay", "01-add-request", "05-relay", "05-fault2", "03-add-request", "03-condense",
            "03-prepare-inputs", "04-second-batch", "04-serial-idle", "04-rows-step2", "07-draft-slots", "09-v1-relay",
            "09-v2-broadcast", "09-v2-stale-drafts", "09-v2-optimistic-count", "10-placeholders", "10-posted-twice",
            "06-same-inputs", "06-fault2", "06-fix2-only", "06-smallest", "07-vllm-0.9.2", "10-placeholders-step4",
            "10-posted-twice-async"]  # 06-rule-misses: its evidence is a table object, checked under nbval


@pytest.mark.parametrize("pid", REVEALED)
def test_a_reveal_prints_what_its_declared_answers_match(notebook, pid):
    """The declared answers catch the reveal's own text: a check on them can see this answer."""
    notebook.__dict__[PREDICTIONS[pid].guess_name] = "my guess"
    text = " ".join(_screen_text(i for i in PREDICTIONS[pid].screen() if isinstance(i, (str, rv.Aligned))).split())
    assert any(re.search(p, text) for p in PREDICTIONS[pid].answers), text[:400]


REVEAL_CALL = re.compile(r'\breveal\("([\w.-]+)"\)')


def reveals_without_their_guess(cells: list[tuple[str, str]]) -> list[str]:
    """The ``reveal(id)`` calls of a notebook's (cell type, source) list with no code cell above them
    that sets the prediction's guess (``guess_name = ...``), or naming no declared prediction."""
    missing, sources = [], []
    for kind, source in cells:
        for pid in REVEAL_CALL.findall(source) if kind == "code" else ():
            prediction = PREDICTIONS.get(pid)
            assigns = prediction and re.compile(rf"^{prediction.guess_name}\s*=", re.M)
            if prediction is None or not any(assigns.search(s) for s in sources):
                missing.append(pid)
        sources += [source] if kind == "code" else []
    return missing


NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_reveal_has_its_guess_cell_above_it(path):
    cells = [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]
    assert reveals_without_their_guess(cells) == []


def test_a_reveal_with_no_guess_cell_above_it_is_caught():  # planted: the guess cell below, and an unknown id
    cells = [("markdown", "guess_slots = ..."), ("code", 'reveal("03-add-request")'), ("code", "guess_slots = 1"),
             ("code", 'reveal("03-nope")')]
    assert reveals_without_their_guess(cells) == ["03-add-request", "03-nope"]


def test_06s_stepper_waits_for_the_guess_and_is_the_stepper_the_site_draws(notebook):
    """06's smallest schedule: its stepper shows the two requests, so it is the reveal's evidence,
    absent (not even computed) before the guess; after it, the stepper whose frames the site draws."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import stepper_frames

    from minispec.lab.viz.static_stepper import stepper_manifest

    smallest = PREDICTIONS["06-smallest"]
    before = smallest.screen()
    assert len(before) == 1 and before[0].startswith(rv.MAKE_YOUR_GUESS)
    notebook.guess_requests = 2
    [stepper] = [i for i in smallest.screen() if type(i).__name__ == "StepperBox"]
    runs, decode, start = stepper_frames.explorer_stepper()
    assert f'data-stepper="{stepper_manifest(runs, decode, **start)["id"]}"' in stepper._repr_mimebundle_()["text/html"]
