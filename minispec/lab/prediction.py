"""Predict, then reveal: one mechanism for every question the notebooks ask.

A :class:`Prediction` is a question the learner answers in a cell (``guess_rows = ...``) and a
reveal that shows nothing until that guess is made. Then it shows the answer, its explanation and
the evidence (printed lines, figures), recomputed on the spot from ``minispec.lab``, so a reveal run
in a notebook that was closed and reopened needs no variable of an earlier cell but the guess.

The reveal finds the guess by its name in the notebook's namespace (``__main__``), so a reveal
cell never raises ``NameError``: a guess cell that has not run in this kernel is said so in one
line. ``answers`` declares the strings that give the answer away, and ``figures`` the plotting
functions whose figure does: ``tools/spoilers.py`` fails when either is on screen before the
reveal. ``MINISPEC_REVEAL=1`` (set by ``make notebooks`` and by the test suite's nbval kernels)
reveals with the guess unset: the committed notebooks keep the answers as their stored outputs,
which learner copies clear and the website folds.

Sentences are printed one to a line: ``make lab``'s stylesheet (``tools/jupyterlab/custom/
custom.css``) and the website wrap them between words at whatever width the zoom leaves. Evidence in
columns (a string of several lines) is :class:`Aligned`, kept whole and scrolled sideways where it
is too wide; a one-line piece of evidence is a sentence, and wraps.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

REVEAL_ENV = "MINISPEC_REVEAL"
MAKE_YOUR_GUESS = "make your guess first"
_UNSET = object()
ALIGNED_CLASS = "minispec-aligned"  # custom.css keeps these lines whole


def is_made(guess) -> bool:
    """Whether ``guess`` is an answer: not ``...`` or ``None``, and no ``...`` inside a dict, list or tuple."""
    if guess is None or guess is Ellipsis:
        return False
    parts = guess.values() if isinstance(guess, dict) else guess if isinstance(guess, (list, tuple)) else ()
    return all(is_made(part) for part in parts)


@dataclass(frozen=True)
class Prediction:
    """One question: the guess's name, what gives the answer away, and what the reveal shows."""

    id: str            # unique, e.g. "01-draft-slots"
    question: str      # what the spoiler check tracks; two notebooks asking the same share it
    guess_name: str    # the notebook variable the learner sets, e.g. "guess_slots"
    answer: str        # the answer in one line
    explanation: str   # why, in a few sentences
    answers: tuple[str, ...] = ()   # regular expressions for the answer as prose or output states it
    figures: tuple[str, ...] = ()   # regular expressions for a plotting call (in a cell) whose figure gives it away
    evidence: Callable[[], Iterable[object]] | None = field(default=None, compare=False)
    judge: Callable[[object], object] | None = field(default=None, compare=False)  # 08's checker

    def __post_init__(self):
        if not self.guess_name.isidentifier():
            raise ValueError(f"Prediction {self.id!r}: guess_name must be a Python name, not {self.guess_name!r}")

    def screen(self, guess=_UNSET) -> list[object]:
        """What the reveal puts on screen for ``guess`` (looked up in the notebook when not given):
        one "make your guess first" line, or the answer, its explanation and its evidence."""
        if guess is _UNSET:
            guess = _notebook_guess(self.guess_name)
        if guess is _UNSET and not _reveal_all():
            return [f"{MAKE_YOUR_GUESS}: {self.guess_name} is not set in this kernel; run the cell with "
                    f"your guess ({self.guess_name} = ...) above, then this one"]
        if not is_made(guess) and not _reveal_all():
            return [f"{MAKE_YOUR_GUESS}: write it in the cell above ({self.guess_name} = ...), run that "
                    "cell, then this one"]
        if self.judge is not None:
            return [self.judge(guess if guess is not _UNSET else ...)]
        made = guess is not _UNSET and is_made(guess)  # revealed with no guess cell run: _UNSET
        said = f"your guess: {guess!r}" if made else "(revealed without a guess)"
        evidence = self.evidence() if self.evidence else ()
        return [said, f"the answer: {self.answer}", *(Aligned(e) if isinstance(e, str) and "\n" in e.strip() else e for e in evidence),
                f"why: {self.explanation}"]


@dataclass(frozen=True)
class Aligned:
    """Evidence printed in columns (a row table, a gather, a fault's report): shown with its lines
    kept whole, scrolling sideways where the output area is narrower (``tools/jupyterlab/custom/
    custom.css`` wraps other printed output between words, which would break the columns apart at
    125-150 % zoom)."""

    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:  # the notebook's text/plain: what nbval and the spoiler checks read
        return self.text

    def _repr_html_(self) -> str:
        import html

        return f'<pre class="{ALIGNED_CLASS}">{html.escape(self.text)}</pre>'



def _reveal_all() -> bool:
    return os.environ.get(REVEAL_ENV) == "1"


def _notebook_guess(name: str):
    main = sys.modules.get("__main__")
    return getattr(main, name, _UNSET)


def show(items: Iterable[object]) -> None:
    """Strings are printed; anything else (a figure, a checker's report) is displayed as the notebook shows it."""
    for item in items:
        if isinstance(item, str):
            print(item)
            continue
        try:
            from IPython.display import display
        except ImportError:  # outside IPython: its text form
            print(item)
        else:
            display(item)
