"""The workshop's checker: runs a learner's code and says, in plain words, what is wrong.

Each ``check_*`` returns a ``Report`` (its first line is the verdict, shown with
the failing step's rows drawn by ``plot_stage_rows`` when there is one). Fixes
are plugged into the runner through ``RunnerFixes`` (``minispec.instruments.fixes``)
and judged three ways: every call of the learner's function is compared with
what the scheduler knows at that moment; the invariant checker runs live; the
outputs are compared with plain one-stage greedy decoding without drafts. Runs
go over the forum thread's scenario first, then over ``SCHEDULES`` (PP 2 and 3,
both proposers, a KV cache small enough to preempt). An exception in the
learner's code is reported with the learner's own line, never raised.

Solutions live in ``minispec.lab.solutions``; nothing here imports it unless
``show_solution`` is called or ``MINISPEC_PLUG_SOLUTIONS=1`` is set, in which
case an exercise cell that is still the empty stub gets the reference solution
(and a failing reference raises, so a notebook run under nbval checks them).
"""

from __future__ import annotations

import dis
import functools
import numbers
import os
from dataclasses import dataclass

from minispec.instruments.fixes import RunnerFixes
from minispec.instruments.invariants import NAMES, check_trace
from minispec.lab import scenarios
from minispec.lab.exercise_runs import (
    THREAD,
    decoder,
    describe_violation,
    fix1_contract,
    fix2_contract,
    learner_error,
    one_thread,
    random_schedule,
    run_attempt,
    text,
)
from minispec.lab.viz.text import render_stage

PLUG_ENV = "MINISPEC_PLUG_SOLUTIONS"
THREAD_FIRST_DECODE = 2  # scheduler step of batch_0's first decode in the thread scenario


@dataclass
class Report:
    passed: bool
    lines: list[str]
    figure: object = None
    plugged: bool = False

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def _ipython_display_(self):
        from IPython.display import display

        print(self)
        if self.figure is not None:
            display(self.figure)


# -- solutions: out of sight unless asked for -----------------------------------
def show_solution(name: str):
    """Print the reference solution ``name`` (see ``minispec.lab.solutions``) and return it."""
    import inspect

    from minispec.lab import solutions

    if name not in solutions.__all__:
        raise ValueError(f"show_solution({name!r}): expected one of {solutions.__all__}")
    value = getattr(solutions, name)
    print(inspect.getsource(value) if callable(value) else f"{name} = {value!r}")
    return value


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
        from minispec.lab import solutions

        return getattr(solutions, name), True
    return answer, False


def _finish(report: Report, plugged: bool) -> Report:
    if plugged:
        report.plugged = True
        report.lines.insert(0, f"(reference solution plugged in: {PLUG_ENV}=1 and this cell is still the stub)")
        if not report.passed:
            raise AssertionError(f"the reference solution failed its own check:\n{report}")
    return report


def _not_yet(what: str, solution: str) -> Report:
    return Report(False, [f"not yet: {what} is still the empty stub; fill it in and run the cell again",
                          f"(stuck? show_solution({solution!r}) prints the reference solution)"])


# -- predict, then reveal ---------------------------------------------------------
@functools.cache
def thread_trace(fixes: str):
    """The thread scenario under a preset, run once per session."""
    with one_thread():
        return scenarios.forum_thread(fixes)


def _stage_figure(trace, step: int, stage: int):
    from minispec.lab.viz.plots import plot_stage_rows

    return plot_stage_rows(trace.step(step), stage, decoder(visible_spaces=True))


def check_draft_slots(prediction) -> Report:
    """Predict A's three stage-0 draft slots at batch_0's first decode under "vllm-0.9.2"."""
    prediction, plugged = _plug(prediction, "draft_slots")
    if is_stub(prediction):
        return _not_yet("your prediction", "draft_slots")
    trace = thread_trace("vllm-0.9.2")
    step = trace.step(THREAD_FIRST_DECODE)
    row = step.stages[0].row_of("A")
    held, sent = text(row.draft_slots), text(step.schedule.scheduled_spec_decode_tokens["A"])
    first = row.num_computed_tokens + row.num_scheduled_tokens - row.num_drafts
    where = f"A's draft slots {first}–{first + row.num_drafts - 1} on stage 0 at step {THREAD_FIRST_DECODE}"
    if prediction == held:
        lines = [f"correct: {where} hold `{held}`, while the scheduler sent `{sent}`",
                 f"`{held}` is what C's prompt left in row {row.row} (C[{first}:{first + 3}]); add_request copied "
                 "only A's prompt and output, so the draft slots kept it"]
    elif prediction == sent:
        lines = [f"not quite: `{sent}` is what the scheduler sent, and what the slots would hold if add_request "
                 "copied drafts (the chatbot's claim in the thread); it does not",
                 f"{where} hold `{held}`: whatever the row's previous occupant left there"]
    else:
        lines = [f"not quite: you said `{prediction}`; {where} hold `{held}` (the scheduler sent `{sent}`)",
                 f"A was re-added into row {row.row}, which C had just used: the slots keep C's prompt characters"]
    lines.append(render_stage(step.stages[0], step, decoder()))
    return _finish(Report(prediction == held, lines, _stage_figure(trace, THREAD_FIRST_DECODE, 0)), plugged)


ACCEPTANCE_TOLERANCE = 0.10


def check_acceptance(prediction) -> Report:
    """Predict the acceptance rate (accepted / proposed drafts) of the thread scenario under each preset."""
    prediction, plugged = _plug(prediction, "acceptance")
    if is_stub(prediction):
        return _not_yet("your prediction", "acceptance")
    presets = ("vllm-0.9.2", "vllm-0.14", "all")
    if (not isinstance(prediction, dict) or set(prediction) != set(presets)
            or not all(isinstance(v, numbers.Real) for v in prediction.values())):
        return Report(False, [f"expected a dict with one rate (0 to 1) per preset {list(presets)}, got {prediction!r}"])
    if any(v > 1 for v in prediction.values()):
        return Report(False, [f"rates run from 0 to 1 (accepted / proposed), got {prediction!r}: "
                              "for 45% write 0.45"])
    measured = {p: thread_trace(p).stats["acceptance_rate"] for p in presets}
    off = [p for p in presets if abs(float(prediction[p]) - measured[p]) > ACCEPTANCE_TOLERANCE]
    head = (f"all three within {ACCEPTANCE_TOLERANCE:.0%} points" if not off
            else f"{len(off)} of 3 off by more than {ACCEPTANCE_TOLERANCE:.0%} points: {', '.join(off)}")
    lines = [head] + [f"  {p:<11} you {float(prediction[p]):>5.0%}   measured {measured[p]:>5.1%}"
                      for p in presets]
    lines.append("fix 1 alone barely helps: from the first accepted draft on, stage 0's history misses the accepted "
                 "drafts, so the target computes on the wrong context and stops agreeing with drafts proposed from "
                 "the right one (the last stage's)")
    from minispec.lab.viz.plots import plot_presets

    return _finish(Report(not off, lines, plot_presets({p: thread_trace(p) for p in presets})), plugged)


def _locate(answer: dict, truth, what: str) -> Report:
    keys = ("invariant", "step", "stage", "request")
    if not isinstance(answer, dict) or set(answer) != set(keys):
        return Report(False, [f"expected a dict with keys {list(keys)}, got {answer!r}"])
    actual = {"invariant": truth.invariant, "step": truth.step, "stage": truth.stage, "request": truth.req_id}
    wrong = [k for k in keys if _loose(answer[k]) != _loose(actual[k])]
    if wrong:
        hints = {"invariant": "which rule does check_trace(trace)[0] name?",
                 "step": "the first step at which any stage breaks it",
                 "stage": "the stage whose buffers disagree", "request": "the request whose row is wrong"}
        return Report(False, [f"not quite: {', '.join(wrong)} wrong ({'; '.join(hints[k] for k in wrong)})"])
    return Report(True, [f"correct: {what} first breaks invariant {truth.invariant} ({NAMES[truth.invariant]}) at "
                         f"step {truth.step}, stage {truth.stage}, request {truth.req_id}"])


def _loose(value) -> str:
    """A typed slip is not a wrong answer: 3 and "3" name the same step, "a" and "A" the same request."""
    return str(value).strip().lower()


def check_fault2(answer) -> Report:
    """Name the invariant that "vllm-0.14" breaks first on the thread scenario, with step, stage and request."""
    answer, plugged = _plug(answer, "fault2")
    if is_stub(answer):
        return _not_yet("your answer", "fault2")
    trace = thread_trace("vllm-0.14")
    first = check_trace(trace)[0]
    report = _locate(answer, first, "fix 1 alone")
    if report.passed:
        report.lines.append(describe_violation(first, trace, text))
        report.lines.append("the scheduler relayed only the last token: the drafts stage 0 accepted never reached it")
        report.figure = _stage_figure(trace, first.step, first.stage)
    return _finish(report, plugged)


# -- write the fixes ---------------------------------------------------------------
SCHEDULES = [random_schedule(seed, pp, method)
             for seed, (pp, method) in enumerate([(2, "ngram"), (3, "draft_model"), (2, "draft_model"), (3, "ngram")])]


def _check_fix(fn, name: str, make_fixes, contract) -> Report:
    fn, plugged = _plug(fn, name)
    if is_stub(fn):
        return _not_yet("your function", name)
    if not callable(fn):
        return Report(False, [f"expected a function, got {fn!r}"])
    for i, schedule in enumerate([THREAD] + SCHEDULES):
        attempt = run_attempt(schedule, make_fixes, fn, contract)
        if not attempt.passed:
            report = attempt.report_lines(text)
            if i:
                report[0] = f"correct on the thread scenario, but on {schedule.describe(attempt.llm)}: {report[0]}"
            return _finish(Report(False, report, attempt.figure(decoder(visible_spaces=True))), plugged)
    lines = [f"correct: the thread scenario and {len(SCHEDULES)} schedules with preemption (PP 2 and 3, draft-model "
             "and n-gram drafts) keep every invariant and equal plain greedy decoding token for token"]
    return _finish(Report(True, lines), plugged)


def check_fix1(write_spec_tokens) -> Report:
    """Fix 1: ``write_spec_tokens(runner, row, spec_token_ids)``, called on every stage for
    each re-added row right after ``add_request``. Judged with the built-in fix 2."""
    return _check_fix(write_spec_tokens, "write_spec_tokens",
                      lambda fn: RunnerFixes(readd_spec_tokens=fn, sync_accepted_tokens=True), fix1_contract)


def check_fix2(take_relayed_tokens) -> Report:
    """Fix 2: ``take_relayed_tokens(state, num_computed_tokens, new_token_ids) -> tokens to append``,
    called on non-last stages when they are behind. Judged with the built-in fix 1."""
    return _check_fix(take_relayed_tokens, "take_relayed_tokens",
                      lambda fn: RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=fn), fix2_contract)


# -- bonus: break condense -----------------------------------------------------------
CONDENSE_SCHEDULE = random_schedule(0, 1, "draft_model")  # one stage: rows stay, and move when one finishes


def _run_with_move_row(move_row):
    from minispec.v1.worker.gpu_input_batch import InputBatch

    original = InputBatch._move_row
    InputBatch._move_row = move_row
    try:
        return run_attempt(CONDENSE_SCHEDULE, lambda _: RunnerFixes(), move_row, None)
    finally:
        InputBatch._move_row = original


def condense_trace(move_row):
    """The bonus schedule run with ``InputBatch._move_row`` replaced by ``move_row(batch, src, tgt)``,
    every fix on: its trace, up to the first broken invariant (explore it with ``check_trace``)."""
    move_row, _ = _plug(move_row, "move_row_dropping_drafts")
    if is_stub(move_row):
        print(_not_yet("your move_row", "move_row_dropping_drafts"))
        return None
    return _run_with_move_row(move_row).trace


def check_condense(move_row, answer) -> Report:
    """Bonus: with condense's row move replaced by ``move_row``, name the invariant that
    notices first, and its step, stage and request."""
    move_row, plugged = _plug(move_row, "move_row_dropping_drafts")
    answer, plugged_answer = _plug(answer, "condense")
    if is_stub(move_row) or is_stub(answer):
        return (_not_yet("your move_row", "move_row_dropping_drafts") if is_stub(move_row)
                else _not_yet("your answer", "condense"))
    attempt = _run_with_move_row(move_row)
    if attempt.error is not None:
        return _finish(Report(False, attempt.report_lines(text)), plugged)
    if attempt.violation is None:
        return _finish(Report(False, [f"nothing noticed: on {CONDENSE_SCHEDULE.describe()} every invariant held — "
                                      "does your move_row really leave the draft slots behind?"]), plugged)
    report = _locate(answer, attempt.violation, "your condense")
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


def recovered_problem(p, q, r) -> str | None:
    """What is wrong with r as the recovered distribution for (p, q), in words; None if nothing."""
    import torch

    residual = (p - q).clamp_min(0)
    if r.shape != p.shape:
        return f"your distribution has shape {tuple(r.shape)}: expected one probability per token, {tuple(p.shape)}"
    if r.min() < -1e-6:
        return ("your distribution has negative entries: p − q is negative where the draft likes a token more "
                "than the target does; clamp it at 0, max(0, p − q)")
    if abs(float(r.sum()) - 1) > 1e-4:
        return (f"your distribution sums to {float(r.sum()):.3f}, not 1: divide max(0, p − q) by its sum")
    if torch.allclose(r, p, atol=1e-6):
        return ("you resample from p itself: tokens the draft already proposes too often then come out too often; "
                "after a rejection only the part of p the draft did not cover may be drawn, max(0, p − q)")
    flipped = (q - p).clamp_min(0)
    if flipped.sum() > 0 and torch.allclose(r, flipped / flipped.sum(), atol=1e-6):
        return "you normalised max(0, q − p): the residual is the target minus the draft, max(0, p − q)"
    emitted = emitted_distribution(p, q, r)
    worst = int((emitted - p).abs().argmax())
    if abs(float(emitted[worst] - p[worst])) > 1e-6:
        return (f"token {worst} would come out with probability {float(emitted[worst]):.3f}, the target gives it "
                f"{float(p[worst]):.3f}; normalise max(0, p − q) (residual {residual.tolist()})")
    return None


def check_recovered(recovered_distribution) -> Report:
    """Rejection sampling: ``recovered_distribution(p, q) -> probabilities`` for the token drawn
    after a rejection. Checked exactly, then by a chi-square test of 20,000 draws against p."""
    import torch
    from scipy.stats import chisquare

    fn, plugged = _plug(recovered_distribution, "recovered_distribution")
    if is_stub(fn):
        return _not_yet("your function", "recovered_distribution")
    for i, (p, q) in enumerate(recovered_cases()):
        try:
            r = torch.as_tensor(fn(p.clone(), q.clone()), dtype=torch.float64)
        except Exception as exc:  # the learner's bug, reported, never raised
            lines = learner_error(exc, fn) or [f"your function raised {type(exc).__name__}: {exc}"]
            return _finish(Report(False, lines), plugged)
        problem = recovered_problem(p, q, r)
        counts = simulate(p, q, r.clamp_min(0), RECOVERED_TRIALS, seed=1000 + i)
        support = p > 0
        pvalue = float(chisquare(counts[support].numpy(), (p[support] * RECOVERED_TRIALS).numpy()).pvalue)
        verdict = "lossless" if pvalue > RECOVERED_ALPHA else "not lossless"
        stats = (f"chi-square over {RECOVERED_TRIALS:,} draws against the target p: p-value {pvalue:.3g} ({verdict}); "
                 f"emitted {(counts / RECOVERED_TRIALS).numpy().round(3).tolist()}, target {p.numpy().round(3).tolist()}")
        if problem or pvalue <= RECOVERED_ALPHA:
            lines = [f"case {i + 1} of 3: " + (problem or "the emitted tokens do not follow the target"), stats]
            return _finish(Report(False, lines), plugged)
    return _finish(Report(True, ["correct: the sampler is lossless — accept with min(1, p/q), else draw from "
                                 "normalised max(0, p − q), and the emitted token follows p exactly", stats]), plugged)
