"""The workshop's checker: runs a learner's code and says, in plain words, what is wrong.

Each ``check_*`` returns a ``Report`` (its first line is the verdict, shown with
the failing step's rows drawn by ``plot_stage_rows`` when there is one). Fixes
are plugged into the runner through ``RunnerFixes`` (``minispec.v1.worker.runner_fixes``)
and judged three ways: every call of the learner's function is compared with
what the scheduler knows at that moment; the invariant checker runs live; the
outputs are compared with plain one-stage greedy decoding without drafts. Runs
go over the forum thread's scenario first, then over ``SCHEDULES`` (PP 2 and 3,
both proposers, a KV cache small enough to preempt). The last exercise plugs into Model
Runner V2 the same way, through V2's own ``RunnerFixes``
(``minispec.v1.worker.gpu.runner_fixes``, ``apply_broadcast``), and is judged by
``minispec.lab.exercises.broadcast_checker`` in the slots' own terms. An exception in the
learner's code is reported with the learner's own line, never raised.

Solutions live in ``minispec.lab.exercises.solutions``; nothing here imports it unless
``show_solution`` is called or ``MINISPEC_PLUG_SOLUTIONS=1`` is set, in which
case an exercise cell that is still the empty stub gets the reference solution
(and a failing reference raises, so a notebook run under nbval checks them).
"""

from __future__ import annotations

import copy
import dis
import functools
import numbers
import os
import textwrap
from dataclasses import dataclass

import numpy as np

from minispec.instruments.invariants import Invariant, check_trace
from minispec.lab.exercises.attempts import (
    THREAD,
    Inputs,
    LearnerTimeout,
    call_learner,
    decoder,
    describe_violation,
    fix1_contract,
    fix2_contract,
    learner_error,
    run_attempt,
    same_value,
    stopped_line,
    text,
    time_limit,
)
from minispec.lab.exercises.broadcast_checker import broadcast_contract
from minispec.lab.experiments import scenarios
from minispec.lab.experiments.scenarios import FIRST_DECODE, exercise_schedule
from minispec.lab.experiments.schedule import intra_op_threads, plural
from minispec.lab.viz.text import render_stage
from minispec.v1.worker.gpu.runner_fixes import RunnerFixes as RunnerFixesV2
from minispec.v1.worker.runner_fixes import Preset, RunnerFixes

PLUG_ENV = "MINISPEC_PLUG_SOLUTIONS"
# Characters a printed report line may take: JupyterLab's output area holds about 100 at 1280x720
# with the file browser open at 100 % zoom, or closed at 125 %, and 84 closed at 150 % (screenshots
# of 08, 2026-12-02); past that the browser breaks words in two (``STAL`` / ``E``).
REPORT_WIDTH = 80


def _fold(row: str) -> str:
    """``row`` broken between words to ``REPORT_WIDTH``, each further line indented under its start."""
    indent = " " * (len(row) - len(row.lstrip(" ")) + 4)
    return textwrap.fill(row, REPORT_WIDTH, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False, drop_whitespace=True) if len(row) > REPORT_WIDTH else row


@dataclass
class Report:
    passed: bool
    lines: list[str]
    figure: object = None
    plugged: bool = False

    def __str__(self) -> str:
        return "\n".join(_fold(row) for line in self.lines for row in line.split("\n"))

    def _ipython_display_(self):
        from IPython.display import display

        print(self)
        if self.figure is not None:
            display(self.figure)


# -- solutions: out of sight unless asked for -----------------------------------
# The solutions whose exercise the learner's own answer (not the stub, not a plugged one) was
# checked for in this kernel: show_solution prints only these, so Run All prints no solution.
_ATTEMPTED: set[str] = set()


def show_solution(name: str, give_up: bool = False) -> None:
    """Print the reference solution ``name`` (see ``minispec.lab.exercises.solutions``) once the
    learner's own attempt at it was checked in this kernel, or with ``give_up=True``; it returns
    nothing, so a notebook shows the source and no ``<function …>`` after it."""
    import inspect

    from minispec.lab.exercises import solutions

    if name not in solutions.__all__:
        raise ValueError(f"show_solution({name!r}): expected one of {solutions.__all__}")
    if not (give_up or name in _ATTEMPTED):
        print(f"check your own attempt first (the check cell above), then run this again; "
              f"or, to see it without trying: show_solution({name!r}, give_up=True)")
        return
    value = getattr(solutions, name)
    print(inspect.getsource(value) if callable(value) else f"{name} = {value!r}")


def is_stub(answer) -> bool:
    """An exercise cell not yet filled in: ``...``, ``None``, or a function whose body does
    nothing but return None (only ``...``, ``pass``, a docstring, comments)."""
    if answer is None or answer is Ellipsis:
        return True
    code = getattr(answer, "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])


def _plug(answer, name: str):
    """The learner's answer, or the reference solution if plugging is on and the cell is a stub."""
    if os.environ.get(PLUG_ENV) == "1" and is_stub(answer):
        from minispec.lab.exercises import solutions

        return getattr(solutions, name), True
    if not is_stub(answer):
        _ATTEMPTED.add(name)
    return answer, False


def _finish(report: Report, plugged: bool) -> Report:
    if plugged:
        report.plugged = True
        report.lines.insert(0, f"(reference solution plugged in: {PLUG_ENV}=1 and this cell is still the stub)")
        if not report.passed:
            raise AssertionError(f"the reference solution failed its own check:\n{report}")
    return report


def interruptible(check):
    """Interrupt Kernel (or the time limit) inside a check gives one line, not a traceback
    through minispec; the line names where the learner's code was, when it was running."""
    @functools.wraps(check)
    def guarded(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except (KeyboardInterrupt, LearnerTimeout) as exc:
            return Report(False, [stopped_line(type(exc), None, None, check.__name__)])

    return guarded


def _not_yet(what: str, solution: str) -> Report:
    return Report(False, [f"not yet: {what} is still the empty stub; fill it in, run it again",
                          f"(stuck? show_solution({solution!r}, give_up=True) prints the reference solution)"])


# -- predict, then reveal ---------------------------------------------------------
@functools.cache
def thread_trace(fixes: str):
    """The thread scenario under a preset, run once per session."""
    with intra_op_threads():
        return scenarios.forum_thread(fixes)


def _stage_figure(trace, step: int, stage: int):
    from minispec.lab.viz.plots import plot_stage_rows

    return plot_stage_rows(trace.step(step), stage, decoder(visible_spaces=True))


def as_characters(prediction) -> str | None:
    """A prediction of characters however it was typed: a string, a list of one-character
    strings, or a list of token ids (one token per character); None if it is none of these."""
    if isinstance(prediction, str):
        return prediction
    if isinstance(prediction, (list, tuple)) and all(isinstance(c, str) for c in prediction):
        return "".join(prediction)
    if isinstance(prediction, (list, tuple)) and all(isinstance(t, numbers.Integral) for t in prediction):
        return text(prediction)
    return None


def _same(said: str, truth: str) -> bool:
    """Equal, or equal but for spaces typed at either end (a slip, not a wrong answer)."""
    return said == truth or (said.strip() == truth.strip() != "")


def _whose(said: str, stage, step) -> str | None:
    """When a prediction names another request's slots or drafts on this stage: whose, in words."""
    for r in stage.rows:
        if r.req_id != "A" and _same(said, text(r.draft_slots)):
            return f"what {r.req_id}'s draft slots hold, in row {r.row} (left there by {r.prev_req_id})"
    for r in stage.rows:
        if r.req_id != "A" and _same(said, text(step.schedule.scheduled_spec_decode_tokens.get(r.req_id, []))):
            return f"the drafts the scheduler sent for {r.req_id}, in row {r.row}"
    return None


@interruptible
def check_draft_slots(prediction) -> Report:
    """Predict A's three stage-0 draft slots at batch_0's first decode under "vllm-0.9.2"."""
    prediction, plugged = _plug(prediction, "draft_slots")
    if is_stub(prediction):
        return _not_yet("your prediction", "draft_slots")
    said = as_characters(prediction)
    if said is None:
        return Report(False, [f"not yet: expected three characters as a string, e.g. \"abc\", got {prediction!r}"])
    trace = thread_trace("vllm-0.9.2")
    step = trace.step(FIRST_DECODE)
    stage = step.stages[0]
    row = stage.row_of("A")
    held, sent = text(row.draft_slots), text(step.schedule.scheduled_spec_decode_tokens["A"])
    first = row.first_draft_pos
    where = f"A's draft slots {first}–{first + row.num_drafts - 1} on stage 0 at step {FIRST_DECODE}"
    whose = _whose(said, stage, step)
    if _same(said, held):
        lines = [f"correct: {where} hold `{held}`, while the scheduler sent `{sent}`",
                 f"`{held}` is what C's prompt left in row {row.row} (C[{first}:{first + 3}]); add_request copied "
                 "only A's prompt and output, so the draft slots kept it"]
    elif _same(said, sent):
        lines = [f"not quite: `{sent}` is what the scheduler sent, and what the slots would hold if add_request "
                 "copied drafts (the chatbot's claim in the thread); it does not",
                 f"{where} hold `{held}`: whatever the row's previous occupant left there"]
    elif whose is not None:
        lines = [f"not quite: `{said}` is {whose}; {where}, in row {row.row}, hold `{held}`",
                 f"A was re-added into row {row.row}, which C had just used: the slots keep C's prompt characters"]
    else:
        lines = [f"not quite: you said `{said}`; {where} hold `{held}` (the scheduler sent `{sent}`)",
                 f"A was re-added into row {row.row}, which C had just used: the slots keep C's prompt characters"]
    lines.append(render_stage(stage, step, decoder()))
    return _finish(Report(_same(said, held), lines, _stage_figure(trace, FIRST_DECODE, 0)), plugged)


ACCEPTANCE_TOLERANCE = 0.10


def as_rates(prediction) -> dict | None:
    """One rate per preset, with preset names typed loosely and percentages (any value
    above 1, e.g. 45 for 45%) read as such; None if it is not a dict of numbers per preset."""
    if not isinstance(prediction, dict) or not all(isinstance(v, numbers.Real) for v in prediction.values()):
        return None
    rates = {str(k).strip().lower(): float(v) for k, v in prediction.items()}
    if set(rates) != set(Preset) or any(not 0 <= v <= 100 for v in rates.values()):
        return None
    return {p: v / 100 if v > 1 else v for p, v in rates.items()}


@interruptible
def check_acceptance(prediction) -> Report:
    """Predict the acceptance rate (accepted / proposed drafts) of the thread scenario under each preset."""
    prediction, plugged = _plug(prediction, "acceptance")
    if is_stub(prediction):
        return _not_yet("your prediction", "acceptance")
    rates = as_rates(prediction)
    if rates is None:
        return Report(False, [f"not yet: expected a dict with one rate (0 to 1) per preset {list(map(str, Preset))}, "
                              f"got {prediction!r}"])
    measured = {p: thread_trace(p).stats["acceptance_rate"] for p in Preset}
    off = [p for p in Preset if abs(rates[p] - measured[p]) > ACCEPTANCE_TOLERANCE]
    head = (f"correct: all three within {ACCEPTANCE_TOLERANCE:.0%} points" if not off
            else f"not quite: {len(off)} of 3 off by more than {ACCEPTANCE_TOLERANCE:.0%} points: {', '.join(off)}")
    lines = [head] + [f"  {p:<11} you {rates[p]:>5.0%}   measured {measured[p]:>5.1%}" for p in Preset]
    if any(float(v) > 1 for v in prediction.values()):
        lines.append("(numbers above 1 read as percentages: rates run from 0 to 1, 45% is 0.45)")
    lines.append("fix 1 alone barely helps: from the first accepted draft on, stage 0's history misses the accepted "
                 "drafts, so the target computes on the wrong context and stops agreeing with drafts proposed from "
                 "the right one (the last stage's)")
    from minispec.lab.viz.plots import plot_presets

    return _finish(Report(not off, lines, plot_presets({p: thread_trace(p) for p in Preset})), plugged)


LOCATION = ("invariant", "step", "stage", "request")
HINTS = {"invariant": "which rule does check_trace(trace)[0] name?",
         "step": "the first step at which any stage breaks it",
         "stage": "the stage whose buffers disagree", "request": "the request whose row is wrong"}


def _locate(answer, truths: list, what: str, symptoms: dict[int, str] | None = None) -> Report:
    """Judge a located violation. ``truths`` are the violations at the first place anything
    broke, the root cause first; naming another of them is right too, and ``symptoms``
    says why it follows from the root."""
    if not isinstance(answer, dict) or {_loose(k) for k in answer} != set(LOCATION):
        return Report(False, [f"not yet: expected a dict with keys {list(LOCATION)}, got {answer!r}"])
    answer = {_loose(k): v for k, v in answer.items()}
    root = truths[0]
    answer["invariant"] = _invariant_number(answer["invariant"])
    named = next((t for t in truths if _loose(answer["invariant"]) == _loose(t.invariant)), root)
    actual = {"invariant": named.invariant, "step": named.step, "stage": named.stage, "request": named.req_id}
    wrong = [k for k in LOCATION if _loose(answer[k]) != _loose(actual[k])]
    if wrong:
        listed = " and ".join(filter(None, [", ".join(f"the {k}" for k in wrong[:-1]), f"the {wrong[-1]}"]))
        return Report(False, [f"not quite: {listed} {'is' if len(wrong) == 1 else 'are'} wrong "
                              f"({'; '.join(HINTS[k] for k in wrong)})"])
    at = f"at step {named.step}, stage {named.stage}, request {named.req_id}"
    if named is root:
        return Report(True, [f"correct: {what} first breaks invariant {root.invariant} ({root.invariant.title}) {at}"])
    return Report(True, [f"correct: {what} breaks invariant {named.invariant} ({named.invariant.title}) {at}, "
                         f"and invariant {root.invariant} ({root.invariant.title}) there too, which is the root",
                         (symptoms or {}).get(named.invariant, "")])


def _loose(value) -> str:
    """A typed slip is not a wrong answer: 3 and "3" name the same step, "a" and "A" the same request."""
    return str(value).strip().lower()


def _invariant_number(value):
    """An invariant named as the checker prints it is the invariant: 3, "invariant 3", "token history",
    "3 (token history)" and ``Invariant.TOKEN_HISTORY`` all mean 3. Anything else is left to be judged."""
    loose = _loose(value).replace("_", " ")
    for invariant in Invariant:
        number = int(invariant)
        if loose in {str(number), f"invariant {number}", invariant.title.lower(), invariant.name.lower().replace("_", " "),
                     f"{number} ({invariant.title.lower()})", f"invariant {number} ({invariant.title.lower()})"}:
            return number
    return value


def _name(fn) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def first_place(violations: list) -> list:
    """The violations at the first (step, stage, request) anything broke, in check_trace's order."""
    first = violations[0]
    return [v for v in violations if (v.step, v.stage, v.req_id) == (first.step, first.stage, first.req_id)]


FAULT2_SYMPTOM = {2: ("the drafts are misplaced because the history is short: fix 1 writes them right after the "
                      "history the stage holds (num_tokens_no_spec), which misses the drafts accepted last step, "
                      "so they land that many positions early and the slots the model reads hold one shifted "
                      "draft and stale characters; fix 2 repairs the history, and the drafts then land in place")}


@interruptible
def check_fault2(answer) -> Report:
    """Name the invariant that "vllm-0.14" breaks first on the thread scenario, with step,
    stage and request. Two break at the same place; either is right, and the checker says
    which is the root."""
    answer, plugged = _plug(answer, "fault2")
    if is_stub(answer):
        return _not_yet("your answer", "fault2")
    trace = thread_trace("vllm-0.14")
    truths = first_place(check_trace(trace))
    report = _locate(answer, truths, "fix 1 alone", FAULT2_SYMPTOM)
    if report.passed:
        report.lines += [describe_violation(v, trace, text) for v in truths]
        report.lines.append("the scheduler relayed only the last token: the drafts stage 0 accepted never reached it")
        report.figure = _stage_figure(trace, truths[0].step, truths[0].stage)
    return _finish(report, plugged)


# -- write the fixes ---------------------------------------------------------------
SCHEDULES = [exercise_schedule(seed, pp, method)
             for seed, (pp, method) in enumerate([(2, "ngram"), (3, "draft_model"), (2, "draft_model"), (3, "ngram")])]


def _check_fix(fn, name: str, make_fixes, contract, check: str, model_runner: str | None = None) -> Report:
    fn, plugged = _plug(fn, name)
    if is_stub(fn):
        return _not_yet("your function", name)
    if not callable(fn):
        return Report(False, [f"not yet: expected a function, got {fn!r}"])
    for i, schedule in enumerate([THREAD] + SCHEDULES):
        attempt = run_attempt(schedule, make_fixes, fn, contract, model_runner)
        if not attempt.passed:
            report = attempt.report_lines(text, check)
            if i and not attempt.stopped:
                verdict, _, rest = report[0].partition(": ")
                report[0] = f"{verdict}: right on the thread scenario, but on {schedule.describe(attempt.llm)}: {rest}"
            return _finish(Report(False, report, attempt.figure(decoder(visible_spaces=True))), plugged)
    lines = [f"correct: the thread scenario and {len(SCHEDULES)} schedules with preemption (PP 2 and 3, draft-model "
             f"and n-gram drafts{', Model Runner V2' if model_runner == 'v2' else ''}) keep every invariant and "
             "equal plain greedy decoding token for token"]
    return _finish(Report(True, lines), plugged)


@interruptible
def check_fix1(write_spec_tokens) -> Report:
    """Fix 1: ``write_spec_tokens(runner, row, spec_token_ids)``, called on every stage for
    each re-added row right after ``add_request``. Judged with the built-in fix 2."""
    return _check_fix(write_spec_tokens, "write_spec_tokens",
                      lambda fn: RunnerFixes(readd_spec_tokens=fn, sync_accepted_tokens=True), fix1_contract,
                      "check_fix1")


@interruptible
def check_fix2(take_relayed_tokens) -> Report:
    """Fix 2: ``take_relayed_tokens(state, num_computed_tokens, new_token_ids) -> tokens to append``,
    called on non-last stages when they are behind. Judged with the built-in fix 1."""
    return _check_fix(take_relayed_tokens, "take_relayed_tokens",
                      lambda fn: RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=fn), fix2_contract,
                      "check_fix2")


@interruptible
def check_broadcast(apply_broadcast) -> Report:
    """Model Runner V2: ``apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected,
    draft_tokens)``, called on non-last stages for each batch's broadcast they apply."""
    return _check_fix(apply_broadcast, "apply_broadcast", lambda fn: RunnerFixesV2(apply_broadcast=fn),
                      broadcast_contract, "check_broadcast", model_runner="v2")


# -- bonus: break condense -----------------------------------------------------------
CONDENSE_SCHEDULE = exercise_schedule(0, 1, "draft_model")  # one stage: rows stay, and move when one finishes


def move_row_contract(attempt, fn):
    """Each call of the learner's move_row, timed, placed, and compared with the move the exercise
    asks for (condense's, copying only the history), made first on a copy of the batch."""
    from minispec.lab.exercises.solutions import move_row_dropping_drafts

    attempt.slice_example = "token_ids_cpu[tgt, :n]"

    def move_row(batch, src, tgt):
        attempt.context = attempt.where(attempt.llm.stage_runners()[0], batch._req_ids[src])
        asked = copy.deepcopy(batch)
        drafts = batch.token_ids_cpu[src, batch.num_tokens_no_spec[src] : batch.num_tokens[src]].copy()
        move_row_dropping_drafts(asked, src, tgt)
        result = call_learner(attempt, fn, batch, src, tgt)
        if attempt.bad_call is None and attempt.error is None:
            problem = move_row_problem(batch, asked, src, tgt, drafts)
            if problem:
                attempt.bad_call = attempt.context + (problem,)
        return result

    return move_row


# What condense's move writes, besides the rows' tokens: the books, the counters, the block table.
BOOKS = ("_req_ids", "req_id_to_index")
COUNTERS = ("num_tokens", "num_tokens_no_spec", "num_prompt_tokens", "num_computed_tokens_cpu")


def move_row_problem(batch, asked, src: int, tgt: int, drafts) -> str | None:
    """How the learner's move differs from the one asked for (history copied, drafts left behind),
    anywhere in the batch: every slot it should copy, and no other."""
    req = asked._req_ids[tgt]
    return (_books_problem(batch, asked, src, tgt, req) or _counters_problem(batch, asked, src, tgt)
            or _tokens_problem(batch, asked, src, tgt, req, drafts) or _block_table_problem(batch, asked, src, tgt, req)
            or next((f"you changed batch.{name}: the move writes only the row's books, tokens, counters and block "
                     "table" for name, want in vars(asked).items()
                     if name not in (*BOOKS, *COUNTERS, "token_ids_cpu", "block_table")
                     and not same_value(getattr(batch, name), want)), None))


def _books_problem(batch, asked, src: int, tgt: int, req: str) -> str | None:
    if batch._req_ids[tgt] != req or batch.req_id_to_index.get(req) != tgt:
        return (f"after your move_row, row {tgt} is not {req}'s in the batch's books (_req_ids[{tgt}] is "
                f"{batch._req_ids[tgt]!r}, req_id_to_index[{req!r}] is {batch.req_id_to_index.get(req)!r}): "
                "move the request's id and index as condense does")
    if batch._req_ids[src] is not None:
        return (f"after your move_row, _req_ids[{src}] is still {batch._req_ids[src]!r}: row {src} is free once its "
                "request has moved; set it to None as condense does")
    if batch._req_ids != asked._req_ids or batch.req_id_to_index != asked.req_id_to_index:
        return (f"you changed the batch's books beyond rows {src} and {tgt} (_req_ids {batch._req_ids}, "
                f"expected {asked._req_ids}): the move concerns {req}'s row only")
    return None


def _counters_problem(batch, asked, src: int, tgt: int) -> str | None:
    for name in COUNTERS:
        got, want = getattr(batch, name), getattr(asked, name)
        wrong = np.flatnonzero(got != want)
        if not len(wrong):
            continue
        r = int(wrong[0])
        if r != tgt:
            return (f"after your move_row, {name}[{r}] is {got[r]}, not {want[r]}: the move writes the counters of "
                    f"row {tgt} only")
        if name == "num_tokens" and got[tgt] == asked.num_tokens_no_spec[tgt]:
            return (f"after your move_row, num_tokens[{tgt}] is {got[tgt]}, row {src}'s num_tokens_no_spec, not its "
                    f"num_tokens, {want[tgt]}: the counters move as condense moves them; the exercise leaves only "
                    "the draft slots behind")
        return f"after your move_row, {name}[{tgt}] is {got[tgt]}, not {want[tgt]} (row {src}'s): move the counters too"
    return None


def _tokens_problem(batch, asked, src: int, tgt: int, req: str, drafts) -> str | None:
    n = int(asked.num_tokens_no_spec[tgt])
    if (batch.token_ids_cpu[tgt, :n] != asked.token_ids_cpu[tgt, :n]).any():
        return (f"after your move_row, row {tgt} does not hold {req}'s history: copy token_ids_cpu[{src}, :{n}] "
                f"(num_tokens_no_spec = {n}) into row {tgt}")
    k = n + len(drafts)
    mine, left = batch.token_ids_cpu[tgt, n:k], asked.token_ids_cpu[tgt, n:k]
    copied = [n + i for i in np.flatnonzero((mine != left) & (mine == drafts))]
    if copied:
        which = (f"{req}'s drafts too (positions {n}–{k - 1})" if len(copied) == len(drafts) else
                 f"{len(copied)} of {req}'s {plural(len(drafts), 'draft')} too ({_positions(copied)}, of {n}–{k - 1})")
        return (f"your move_row copied {which}: the exercise breaks condense by leaving them behind, copying only "
                "the first num_tokens_no_spec slots")
    wrong = np.argwhere(batch.token_ids_cpu != asked.token_ids_cpu)
    if len(wrong):
        r, p = (int(x) for x in wrong[0])
        return (f"you changed token_ids_cpu[{r}, {p}] (`{text([asked.token_ids_cpu[r, p]])}` → "
                f"`{text([batch.token_ids_cpu[r, p]])}`): the move copies row {src}'s first {n} slots into row "
                f"{tgt} and leaves every other slot as it was")
    return None


def _positions(ps: list[int]) -> str:
    return f"position {ps[0]}" if len(ps) == 1 else f"positions {', '.join(map(str, ps))}"


def _block_table_problem(batch, asked, src: int, tgt: int, req: str) -> str | None:
    mine, want = batch.block_table, asked.block_table
    same = (mine.num_blocks_per_row == want.num_blocks_per_row).all() and all(
        (mine.block_table_np[r, :b] == want.block_table_np[r, :b]).all() for r, b in enumerate(want.num_blocks_per_row))
    if same:
        return None
    return (f"after your move_row, row {tgt}'s block table does not hold {req}'s KV cache blocks: move it with the "
            f"row, batch.block_table.move_row({src}, {tgt})")


def _run_with_move_row(move_row):
    """Plugged in as every other exercise is, through ``RunnerFixes`` (every fix on)."""
    return run_attempt(CONDENSE_SCHEDULE, lambda fn: RunnerFixes(move_row=fn), move_row, move_row_contract)


def condense_trace(move_row):
    """The bonus schedule run with condense's row move replaced by ``move_row(batch, src, tgt)``,
    every fix on: its trace, up to the first broken invariant (explore it with ``check_trace``)."""
    move_row, _ = _plug(move_row, "move_row_dropping_drafts")
    if is_stub(move_row):
        print(_not_yet("your move_row", "move_row_dropping_drafts"))
        return None
    return _run_with_move_row(move_row).trace


@interruptible
def check_condense(move_row, answer) -> Report:
    """Bonus: with condense's row move replaced by ``move_row``, name the invariant that
    notices first, and its step, stage and request."""
    move_row, plugged = _plug(move_row, "move_row_dropping_drafts")
    answer, plugged_answer = _plug(answer, "condense")
    if is_stub(move_row) or is_stub(answer):
        return (_not_yet("your move_row", "move_row_dropping_drafts") if is_stub(move_row)
                else _not_yet("your answer", "condense"))
    attempt = _run_with_move_row(move_row)
    if attempt.error is not None or attempt.stopped is not None or attempt.bad_call is not None:
        return _finish(Report(False, attempt.report_lines(text, "check_condense")), plugged)
    if attempt.violation is None:
        return _finish(Report(False, [f"not quite: nothing noticed: on {CONDENSE_SCHEDULE.describe()} every "
                                      "invariant held — does your move_row really leave the draft slots behind?"]),
                       plugged)
    report = _locate(answer, [attempt.violation], "your condense")
    if report.passed:
        report.lines.append(describe_violation(attempt.violation, attempt.trace, text))
        report.lines.append("condense moved a row that had stayed, drafts written; only num_tokens_no_spec slots "
                            "travelled, so the draft slots show what the target row held before")
        report.figure = attempt.figure(decoder(visible_spaces=True))
    return _finish(report, plugged or plugged_answer)


# -- rejection sampling: the recovered distribution ----------------------------------
RECOVERED_TRIALS = 20_000
RECOVERED_ALPHA = 0.001  # chi-square p-value below which the sampler is called lossy


def recovered_cases():
    """(p, q) pairs over a 6-token vocabulary: target and draft distributions that differ."""
    import torch

    g = torch.Generator().manual_seed(2025)
    cases = []
    for _ in range(3):
        p = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64) * 1.5, -1)
        q = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64) * 1.5, -1)
        cases.append((p, q))
    return cases


def emitted_distribution(p, q, r):
    """Exactly what one draft position emits: the draft, accepted with min(1, p/q), else a draw from r."""
    import torch

    accepted = torch.minimum(p, q)
    return accepted + (1 - accepted.sum()) * r


def simulate(p, q, r, trials: int, seed: int):
    """Counts of the emitted token over ``trials`` draws: draft d ~ q, accepted if u * q(d) <= p(d),
    else a draw from r by inverse CDF (which trusts that r sums to 1)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    drafts = torch.multinomial(q, trials, replacement=True, generator=g)
    u = torch.rand(trials, generator=g, dtype=p.dtype)
    accept = u * q[drafts] <= p[drafts]
    cdf = torch.cumsum(r, 0)
    recovered = torch.searchsorted(cdf, torch.rand(trials, generator=g, dtype=p.dtype), right=True)
    tokens = torch.where(accept, drafts, recovered.clamp_max(len(p) - 1))
    return torch.bincount(tokens, minlength=len(p)).double()


def recovered_problem(p, q, r, hint: bool = True) -> str | None:
    """What is wrong with r as the recovered distribution for (p, q), in words; None if nothing.
    ``hint``: also say how to build it, max(0, p − q) (from a learner's second miss on)."""
    import torch

    residual = (p - q).clamp_min(0)
    formula = (lambda how: f"; {how}" if hint else "")
    if r.shape != p.shape:
        return f"your distribution has shape {tuple(r.shape)}: expected one probability per token, {tuple(p.shape)}"
    if r.min() < -1e-6:
        return ("your distribution has negative entries: p − q is negative where the draft likes a token more "
                "than the target does" + formula("clamp it at 0, max(0, p − q)"))
    if abs(float(r.sum()) - 1) > 1e-4:
        return f"your distribution sums to {float(r.sum()):.3f}, not 1" + formula("divide max(0, p − q) by its sum")
    if torch.allclose(r, p, atol=1e-6):
        return ("you resample from p itself: tokens the draft already proposes too often then come out too often; "
                "after a rejection only the part of p the draft did not cover may be drawn"
                + (", max(0, p − q)" if hint else ""))
    flipped = (q - p).clamp_min(0)
    if flipped.sum() > 0 and torch.allclose(r, flipped / flipped.sum(), atol=1e-6):
        return ("you normalised the part of q above p: the residual is the part of the target the draft did not "
                "cover" + formula("max(0, p − q)"))
    emitted = emitted_distribution(p, q, r)
    worst = int((emitted - p).abs().argmax())
    if abs(float(emitted[worst] - p[worst])) > 1e-6:
        return (f"token {worst} would come out with probability {float(emitted[worst]):.3f}, the target gives it "
                f"{float(p[worst]):.3f}" + formula(f"normalise max(0, p − q), here {residual.numpy().round(3).tolist()}"))
    return None


def as_distribution(result):
    """The learner's result as a float64 tensor, or None where it is no sequence of numbers."""
    import torch

    if result is None or isinstance(result, (str, bytes, numbers.Number)):
        return None
    try:
        return torch.as_tensor(result, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return None


def returned_no_distribution(result, size: int) -> str:
    """What the learner returned instead of a distribution, in words."""
    if result is None:
        return f"your function returned None: return a tensor of {size} probabilities (is a `return` missing?)"
    if isinstance(result, numbers.Number):
        return (f"your function returned one number, {result!r}: return a tensor of {size} probabilities, one per "
                "token; the checker draws the token from it")
    return f"your function returned a {type(result).__name__}: return a tensor of {size} probabilities"


# Wrong answers so far in this kernel, per learner function: the first miss names the symptom, later
# ones also the formula, so that one wrong try does not give the exercise away.
_MISSES: dict[str, int] = {}


@interruptible
def check_recovered(recovered_distribution) -> Report:
    """Rejection sampling: ``recovered_distribution(p, q) -> probabilities`` for the token drawn
    after a rejection. Checked exactly, then by a chi-square test of 20,000 draws against p."""

    from minispec.lab.experiments.metrics import chi_square

    fn, plugged = _plug(recovered_distribution, "recovered_distribution")
    if is_stub(fn):
        return _not_yet("your function", "recovered_distribution")
    for i, (p, q) in enumerate(recovered_cases()):
        given = Inputs({"p": p.clone(), "q": q.clone()})
        try:
            with time_limit():
                result = fn(*given.now.values())
        except (LearnerTimeout, KeyboardInterrupt) as exc:
            return _finish(Report(False, [stopped_line(type(exc), fn, f"case {i + 1} of 3", "check_recovered")]),
                           plugged)
        except Exception as exc:  # the learner's bug, reported, never raised
            lines = learner_error(exc, fn) or [f"your function raised {type(exc).__name__}: {exc}"]
            lines[0] = "not quite: " + lines[0]
            return _finish(Report(False, lines), plugged)
        problem = given.changed("the sampler reads p and q again for its acceptance test; compute the result "
                                "into a new tensor (p - q, not p -= q)")
        r = as_distribution(result)
        if problem is None and r is None:
            problem = returned_no_distribution(result, len(p))
        if problem is not None:
            _MISSES[_name(fn)] = _MISSES.get(_name(fn), 0) + 1
            return _finish(Report(False, [f"not quite: case {i + 1} of 3: {problem}"]), plugged)
        problem = recovered_problem(p, q, r, hint=_MISSES.get(_name(fn), 0) > 0)
        counts = simulate(p, q, r.clamp_min(0), RECOVERED_TRIALS, seed=1000 + i)
        pvalue = chi_square(counts.numpy(), p.numpy(), min_expected=0)[2]  # over the tokens p allows
        verdict = "lossless" if pvalue > RECOVERED_ALPHA else "not lossless"
        stats = (f"chi-square over {RECOVERED_TRIALS:,} draws against the target p: p-value {pvalue:.3g} ({verdict}); "
                 f"emitted {(counts / RECOVERED_TRIALS).numpy().round(3).tolist()}, target {p.numpy().round(3).tolist()}")
        if problem or pvalue <= RECOVERED_ALPHA:
            _MISSES[_name(fn)] = _MISSES.get(_name(fn), 0) + 1
            lines = [f"not quite: case {i + 1} of 3: " + (problem or "the emitted tokens do not follow the target"),
                     stats]
            return _finish(Report(False, lines), plugged)
    return _finish(Report(True, ["correct: the sampler is lossless — accept with min(1, p/q), else draw from "
                                 "normalised max(0, p − q), and the emitted token follows p exactly", stats]), plugged)
