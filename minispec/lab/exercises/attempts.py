"""Running a learner's fix on one schedule and saying what went wrong: the machinery
behind ``minispec.lab.exercises.checkers``.

A ``Schedule`` (``minispec.lab.experiments.schedule``) describes an engine and its requests,
recording and checking invariants live. ``run_attempt`` plugs the learner's function in through a
*contract* wrapper that compares each call with what the scheduler knows at that
moment, runs the engine to the end or to the first broken invariant, and compares
the outputs with plain one-stage greedy decoding without drafts. ``Attempt``
turns what it saw into sentences, most precise first: the learner's exception,
the first wrong call, the first broken invariant, the first diverging token.

A contract works out what a call should do before the call, on copies, so that a learner's
function cannot change the checker's own yardstick; an input the learner's function changed
(other than the buffer it is asked to write into) is a wrong call of its own, named as such
(``Inputs``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import re
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from minispec.instruments.invariants import InvariantViolation, Violation
from minispec.lab.experiments import scenarios
from minispec.lab.experiments.metrics import first_divergence
from minispec.lab.experiments.schedule import Schedule, build_llm, intra_op_threads, plural, schedule_reference

THREAD = scenarios.thread_schedule(check_invariants=True)


@functools.cache
def decoder(visible_spaces: bool = False):
    """Token id -> character(s), for the shipped tokenizer (spaces as ␣ for drawings)."""
    from minispec.config import DEFAULT_TARGET
    from minispec.lab.viz.text import char_decoder
    from minispec.transformers_utils.tokenizer import load_tokenizer

    return char_decoder(load_tokenizer(DEFAULT_TARGET), visible_spaces)


def text(ids) -> str:
    return "".join(decoder()(int(t)) for t in ids)


def shown(ids) -> str:
    """Token ids as the characters they decode to, or as numbers where one is padding (-1) or 0."""
    ids = [int(t) for t in np.atleast_1d(ids)]
    return f"`{text(ids)}`" if ids and all(t > 0 for t in ids) else str(ids)


# -- what the learner's code did ----------------------------------------------------
LEARNER_LIMIT_S = 10.0  # one call of the learner's function; a check takes a few seconds in all


class LearnerTimeout(BaseException):
    """Raised inside the learner's function when it has run ``LEARNER_LIMIT_S``. A
    ``BaseException``, like ``KeyboardInterrupt``, so that an ``except Exception`` in the
    learner's own loop cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None = None):
    """Stop the code in this block after ``seconds`` (``LEARNER_LIMIT_S`` unless given). Only a signal can stop running
    Python code (a thread cannot), and only the main thread receives signals: that
    is where a Jupyter kernel runs a cell. Elsewhere the block runs unlimited."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise LearnerTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, LEARNER_LIMIT_S if seconds is None else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def call_learner(attempt: "Attempt", fn, *args):
    """``fn(*args)`` within the time limit; if it is stopped, the attempt notes where it was called for."""
    try:
        with time_limit():
            return fn(*args)
    except (LearnerTimeout, KeyboardInterrupt):
        attempt.stopped_at = attempt.where_text()
        raise


def stopped_line(how: type, fn, where: str | None, check: str) -> str:
    """One line for a learner's function stopped by the time limit or by Interrupt Kernel."""
    name = getattr(fn, "__name__", "function")
    at = f" (called for {where})" if where else ""
    if how is LearnerTimeout:
        return (f"not quite: your {name} did not return within {LEARNER_LIMIT_S:g} s{at}, so the checker stopped it: "
                "is there a loop that never ends?")
    if where:
        return f"not yet: you interrupted {check} while your {name} ran{at}; run the cell again when ready"
    return f"not yet: you interrupted {check} before it finished; nothing was judged, run the cell again when ready"


def learner_error(exc: BaseException, fn, slice_example: str | None = None) -> list[str] | None:
    """The exception, with only the frames of the file the learner's function lives in.
    ``slice_example``: a slice in the exercise's own buffers, for numpy's shape error."""
    filename = getattr(getattr(fn, "__code__", None), "co_filename", None)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    if not frames:
        return None
    lines = [f"your {fn.__name__} raised {type(exc).__name__}: {exc}{_shape_hint(exc, slice_example)}"]
    return lines + [f"  line {f.lineno}: {(f.line or '').strip()}" for f in frames]


_NUMPY_SHAPES = re.compile(r"could not broadcast input array from shape (\(.*?\)) into shape (\(.*?\))")


def _shape_hint(exc: BaseException, slice_example: str | None) -> str:
    """numpy's broadcasting error in the buffers' terms: a whole array given where a slice was meant,
    with an example in the names of the exercise's own design (V1's batch or V2's slots)."""
    shapes = _NUMPY_SHAPES.search(str(exc)) if isinstance(exc, ValueError) else None
    if shapes is None:
        return ""
    example = f", e.g. {slice_example}" if slice_example else ""
    return (f" — you assigned {shapes[1]} values to a place that holds {shapes[2]}: a whole row or array where "
            f"a slice was meant; write only the new entries{example}")


# -- what the learner's function may not change ---------------------------------------
def same_value(a, b) -> bool:
    """Equal values: arrays and tensors by shape and contents, anything else by ==."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return a == b


def _value(v, tokens: bool = False) -> str:
    """An input's value in a sentence: token ids as characters (``tokens``), numbers rounded,
    long ones cut."""
    if isinstance(v, torch.Tensor):
        v = v.numpy()
    if isinstance(v, np.ndarray):
        v = v.round(3).tolist() if v.dtype.kind == "f" else v.tolist()
    said = shown(v) if tokens and isinstance(v, list) and np.ndim(v) == 1 else repr(v)
    return said if len(said) <= 48 else said[:45] + "…"


class Inputs:
    """Copies of what a learner's function is given and must leave as it is, taken before the
    call; ``changed`` then names the first one the call changed. ``tokens``: the names whose
    values are token ids (shown as characters)."""

    def __init__(self, values: dict, tokens: tuple[str, ...] = ()):
        self.now, self.tokens = values, tokens
        self.before = {name: copy.deepcopy(v) for name, v in values.items()}

    def changed(self, why: str, now: dict | None = None) -> str | None:
        """One sentence for the first input whose value differs from its copy, ``why`` it must not;
        ``now`` gives an input's value after the call where it is not the object itself (a field)."""
        now = {**self.now, **(now or {})}
        for name, was in self.before.items():
            if not same_value(was, now[name]):
                tokens = name in self.tokens
                return (f"your function changed its input `{name}` ({_value(was, tokens)} → "
                        f"{_value(now[name], tokens)}): {why}")
        return None


@dataclass
class Attempt:
    schedule: Schedule
    fn: Callable
    llm: object = None
    context: tuple | None = None  # (step, stage, request) of the call running now
    bad_call: tuple | None = None  # (step, stage, request, what was wrong)
    violation: Violation | None = None
    error: BaseException | None = None
    diverged: tuple | None = None  # (request, position, got, expected)
    stopped: type | None = None  # LearnerTimeout or KeyboardInterrupt
    stopped_at: str | None = None  # the call of the learner's function that was stopped, if it was one
    slice_example: str | None = None  # the contract's: a slice in the exercise's own buffers

    @property
    def trace(self):
        return self.llm.trace

    @property
    def passed(self) -> bool:
        return not (self.bad_call or self.violation or self.error or self.diverged or self.stopped)

    def where_text(self) -> str | None:
        return "step {}, stage {}, request {}".format(*self.context) if self.context else None

    def where(self, runner, req_id: str) -> tuple[int, int, str]:
        """The step a stage is running for a request: the first scheduled one it has not recorded yet."""
        stage = runner.pp_rank
        step = next(s.step for s in self.trace.steps
                    if req_id in s.schedule.num_scheduled_tokens and all(st.stage != stage for st in s.stages))
        return step, stage, req_id

    def where_sent(self, req_id: str, num_computed_tokens: int) -> tuple[int, int, str]:
        """The step and stage running for a request, from the trace alone: the latest step whose
        schedule sent this ``num_computed_tokens``, on the next stage to record it (a step's
        stages run in order). A request can be in two batches at once (two prefill chunks),
        never with the same ``num_computed_tokens``."""
        step = next(s for s in reversed(self.trace.steps)
                    if s.schedule.num_computed_tokens.get(req_id) == num_computed_tokens)
        return step.step, len(step.stages), req_id

    def report_lines(self, text, check: str) -> list[str]:
        """What went wrong, most precise first; the first line starts with the verdict."""
        if self.stopped is not None:
            return [stopped_line(self.stopped, self.fn, self.stopped_at, check)]
        return ["not quite: " + line if i == 0 else line for i, line in enumerate(self._problem_lines(text))]

    def _problem_lines(self, text) -> list[str]:
        prefix = "step {}, stage {}, request {}: ".format
        if self.error is not None:
            lines = learner_error(self.error, self.fn, self.slice_example)
            if lines is None and self.bad_call:  # a wrong call came first; the failure followed from it
                return [prefix(*self.bad_call[:3]) + self.bad_call[3],
                        f"the engine then failed: {type(self.error).__name__}: {self.error}"]
            if lines is None:
                lines = [f"the engine failed after your {self.fn.__name__} ran: {type(self.error).__name__}: "
                         f"{self.error}"]
            if self.context:
                lines[0] = prefix(*self.context) + lines[0]
            return lines
        lines = []
        if self.bad_call:
            lines.append(prefix(*self.bad_call[:3]) + self.bad_call[3])
        if self.violation:
            v = self.violation
            line = describe_violation(v, self.trace, text)
            lines.append(f"the invariant checker then stopped the run: {v.headline}" if lines else line)
        if self.diverged and not lines:
            r, i, got, want = self.diverged
            lines.append(f"request {r}'s output leaves plain greedy decoding at output token {i}: "
                         f"`{text(got)}` instead of `{text(want)}`")
        return lines

    def figure(self, decode):
        """The failing step's row strip, or None where it would show only sound rows: a call
        caught before its mistake reached ``token_ids_cpu`` (a count, a V2 slot's state) would
        put rows all marked ✓ under "not quite"."""
        from minispec.lab.viz.plots import plot_stage_rows
        from minispec.lab.viz.strip import stage_view

        where = self.bad_call or (self.violation and (self.violation.step, self.violation.stage))
        if not where or where[1] is None:
            return None
        step, stage = where[0], where[1]
        record = self.trace.step(step)
        if not any(st.stage == stage for st in record.stages):
            return None
        if not any(row.stale or row.wrong_history for row in stage_view(record, stage)):
            return None
        return plot_stage_rows(record, stage, decode)


def run_attempt(schedule: Schedule, make_fixes, fn, contract, model_runner: str | None = None) -> Attempt:
    """Run ``schedule`` with ``make_fixes(wrapped fn)`` (on ``model_runner``'s design, as ``LLM``'s
    option) and record everything that went wrong."""
    attempt = Attempt(schedule, fn)
    plugged = contract(attempt, fn) if contract else fn
    attempt.llm = build_llm(schedule, make_fixes(plugged), model_runner)
    try:
        with intra_op_threads():
            finished = {o.request_id: o for o in attempt.llm.wait_for_completion()}
    except InvariantViolation as exc:
        attempt.violation = exc.violation
        return attempt
    except (LearnerTimeout, KeyboardInterrupt) as exc:
        attempt.stopped = type(exc)
        return attempt
    except Exception as exc:  # the learner's bug, reported, never raised
        attempt.error = exc
        return attempt
    for req_id, want in schedule_reference(schedule).items():
        got = finished[req_id].outputs[0].token_ids
        if (i := first_divergence(got, want)) is not None:
            attempt.diverged = (req_id, i, got[i : i + 5], want[i : i + 5])
            break
    return attempt


def describe_violation(v: Violation, trace, text) -> str:
    """One sentence naming where the rule broke and what the buffers hold."""
    where = f"step {v.step}" + (f", stage {v.stage}" if v.stage is not None else "") + f", request {v.req_id}: "
    rule = f" (invariant {v.invariant}, {v.invariant.title})"
    step = trace.step(v.step)
    stage = next((st for st in step.stages if st.stage == v.stage), None)
    if stage is None or v.invariant not in (2, 3):
        return where + f"expected {v.expected}, got {v.actual}" + rule
    row, s = stage.row_of(v.req_id), step.schedule
    if v.invariant == 2:
        first = row.first_draft_pos
        drafts = s.scheduled_spec_decode_tokens.get(v.req_id, [])
        return (where + f"the draft slots {first}–{first + row.num_drafts - 1} hold `{text(row.draft_slots)}`, "
                f"the scheduler sent `{text(drafts)}` (row {row.row}, {row.path})" + rule)
    history = s.all_token_ids[v.req_id]
    mine = row.token_ids[: row.history_len]
    p = next((i for i, (a, b) in enumerate(zip(mine, history)) if a != b), min(len(mine), len(history)))
    missing = len(history) - row.num_tokens_no_spec
    short = f"the history misses {_tokens(missing)}; " if missing > 0 else ""
    return (where + short + f"from position {p} it holds `{text(mine[p:p + 6])}`, the scheduler's "
            f"all_token_ids `{text(history[p:p + 6])}`" + rule)


# -- contracts: each call of the learner's function against the scheduler ------------
@dataclass
class _RowState:
    tokens: np.ndarray
    num_tokens: int
    no_spec: int
    num_computed: int

    @classmethod
    def of(cls, batch, row: int) -> "_RowState":
        return cls(batch.token_ids_cpu[row].copy(), int(batch.num_tokens[row]), int(batch.num_tokens_no_spec[row]),
                   int(batch.num_computed_tokens_cpu[row]))


def fix1_problem(row: int, before: _RowState, after: _RowState, drafts: list[int], is_last: bool, text) -> str | None:
    s, k = before.no_spec, len(drafts)
    if after.no_spec != s:
        return (f"you changed num_tokens_no_spec[{row}] from {s} to {after.no_spec}: drafts are not history "
                "(they may be rejected); leave it and advance num_tokens")
    changed = np.flatnonzero(before.tokens != after.tokens)
    if len(changed) and changed[0] < s:
        p = int(changed[0])
        return (f"you overwrote position {p} of the history (`{text([before.tokens[p]])}` → "
                f"`{text([after.tokens[p]])}`): the drafts go after it, from num_tokens_no_spec = {s}")
    slots = after.tokens[s : s + k].tolist()
    if slots != drafts:
        said = f"your draft slots {s}–{s + k - 1} hold `{text(slots)}`, the scheduler sent `{text(drafts)}` — "
        at = next((int(p) for p in changed if after.tokens[p : p + k].tolist() == drafts), None)
        if at is not None and at == after.num_tokens:
            return said + (f"the drafts were written at num_tokens ({at}), which already counts them; "
                           f"write at num_tokens_no_spec ({s})")
        if at is not None:
            return said + f"the drafts were written at {at}–{at + k - 1}; they belong at num_tokens_no_spec = {s}"
        if not len(changed):
            counted = f" (you set num_tokens[{row}] to {after.num_tokens} but wrote no token)" \
                if after.num_tokens != before.num_tokens else ""
            return said + "your function wrote nothing into this row" + counted + (
                "" if is_last else "; every stage needs the drafts: stage 0 embeds them, the last stage verifies them")
        written = next((j for j in range(k - 1, 0, -1) if slots[:j] == drafts[:j]), 0)
        if written:
            return said + f"you wrote the first {written} of the {k} drafts; write all of spec_token_ids"
        if slots == drafts[::-1]:
            return said + "you wrote them in reverse order; slot num_tokens_no_spec + i holds spec_token_ids[i]"
        return said + "they are the scheduler's drafts in another order or mixed with other tokens"
    if after.num_tokens != s + k:
        if after.num_tokens == s:
            return (f"the draft slots are right, but num_tokens[{row}] is still {s}, not {s + k}: the row does "
                    "not own its drafts (condense moves only num_tokens slots, as vLLM's does); advance it by "
                    "len(spec_token_ids)")
        said = f"num_tokens[{row}] is {after.num_tokens} after your call; expected {s + k} (num_tokens_no_spec + drafts)"
        if k == 0 and after.num_tokens > s and before.num_computed >= s - 1:
            said += " — this row got no drafts (spec_token_ids is empty): count len(spec_token_ids), not k"
        if k == 0 and before.num_computed < s - 1:
            said += (f" — this row got no drafts: it is recomputing after a preemption (num_computed_tokens "
                     f"{before.num_computed}, history up to {s}); count from num_tokens_no_spec, not num_computed_tokens")
        return said
    return None


def returned_problem(result, row: int, before: _RowState, after: _RowState, drafts: list[int]) -> str | None:
    """A function that returns the drafts (or anything) instead of writing them: the runner ignores it."""
    untouched = after.num_tokens == before.num_tokens and (after.tokens == before.tokens).all()
    if result is None or not drafts or not untouched:
        return None
    return (f"your function returned {_value(result, tokens=True)} and wrote nothing into row {row}: the runner ignores what "
            "it returns; write the drafts into runner.input_batch.token_ids_cpu and count them in num_tokens")


def other_row_problem(batch, row: int, tokens_before, num_tokens_before) -> str | None:
    """The first row other than ``row`` whose tokens or count the call changed, named with its request."""
    changed = [r for r in range(len(num_tokens_before)) if r != row and (
        batch.num_tokens[r] != num_tokens_before[r] or (batch.token_ids_cpu[r] != tokens_before[r]).any())]
    if not changed:
        return None
    other = changed[0]
    held = batch._req_ids[other] if other < len(batch._req_ids) else None
    whose = f"request {held}'s" if held else "a free row"
    return (f"you wrote into row {other} ({whose}), not row {row}, the row add_request gave "
            f"{batch._req_ids[row]}: index token_ids_cpu and num_tokens with row")


FIX1_INPUTS = ("it is the scheduler's list of the drafts it sent; read it and write the drafts into "
               "runner.input_batch, leaving the list as it is")


def fix1_contract(attempt: Attempt, fn):
    attempt.slice_example = "token_ids_cpu[row, start : start + len(spec_token_ids)]"

    def write_spec_tokens(runner, row, spec_token_ids):
        batch = runner.input_batch
        attempt.context = attempt.where(runner, batch._req_ids[row])
        before, whole = _RowState.of(batch, row), (batch.token_ids_cpu.copy(), batch.num_tokens.copy())
        given = Inputs({"spec_token_ids": spec_token_ids}, tokens=("spec_token_ids",))
        drafts = list(given.before["spec_token_ids"])
        result = call_learner(attempt, fn, runner, row, spec_token_ids)
        if attempt.bad_call is None:
            after = _RowState.of(batch, row)
            problem = given.changed(FIX1_INPUTS) or other_row_problem(batch, row, *whole) or returned_problem(
                result, row, before, after, drafts) or fix1_problem(row, before, after, drafts,
                                                                   runner.is_last_rank, text)
            if problem:
                attempt.bad_call = attempt.context + (problem,)

    return write_spec_tokens


def fix2_problem(state_len: int, num_computed: int, new: list[int], spec: list[int], result, expected,
                 text) -> str | None:
    if not isinstance(result, (list, tuple)) or not all(isinstance(t, (int, np.integer)) for t in result):
        return f"your function returned {result!r}: return the list of token ids to append"
    result = [int(t) for t in result]
    if result == expected:
        return None
    behind = num_computed + len(new) - state_len
    accepted = behind - len(new)
    said = (f"you appended `{text(result)}` ({_tokens(len(result))}); the scheduler's history has "
            f"`{text(expected)}` ({_tokens(len(expected))}) at positions {state_len}–{state_len + len(expected) - 1} — ")
    if accepted < 0:
        return said + resumed_problem(state_len, num_computed, new)
    if accepted > 0 and result == new:
        return said + (f"the stage was {_tokens(behind)} behind (num_computed_tokens {num_computed} + {len(new)} "
                       f"relayed − num_tokens {state_len}): the {_tokens(accepted)} accepted last step "
                       f"{'is' if accepted == 1 else 'are'} missing; they are the first drafts in state.spec_token_ids")
    if result == spec + new and accepted < len(spec):
        return said + (f"you took all {len(spec)} drafts, but only {accepted} {'was' if accepted == 1 else 'were'} accepted "
                       f"(num_computed_tokens {num_computed} − num_tokens {state_len}): take the first {accepted}")
    if accepted > 0 and result == spec[-accepted:] + new:
        return said + (f"you took the last {plural(accepted, 'draft')}; the accepted ones are a prefix: "
                       f"take the first {accepted}")
    if result == expected[: len(result)]:
        return said + "the relayed new_token_ids are missing at the end"
    return said + (f"num_computed_tokens − state.num_tokens is {accepted}: that many of the drafts the stage was "
                   "given (a prefix of state.spec_token_ids) were accepted, then come the relayed new_token_ids")


def resumed_problem(state_len: int, num_computed: int, new: list[int]) -> str:
    """A request resumed after preemption: the scheduler recomputes it from num_computed_tokens,
    so new_token_ids is a recompute chunk, mostly tokens this stage already holds."""
    end = num_computed + len(new)
    return (f"this request was resumed after a preemption: the scheduler is recomputing it, so new_token_ids is a "
            f"recompute chunk, the {_tokens(len(new))} at positions {num_computed}–{end - 1}, and the stage already "
            f"holds {state_len} (num_computed_tokens − num_tokens is −{state_len - num_computed}: nothing was "
            f"accepted); compare where the chunk ends, num_computed_tokens + len(new_token_ids) = {end}, with "
            f"state.num_tokens = {state_len}, and append only what lies past it, new_token_ids[-{end - state_len}:]")


def _tokens(n: int) -> str:
    return plural(n, "token")


# The fields of a stage's CachedRequestState that fix 2 reads and the runner alone updates.
STATE_FIELDS = ("prompt_token_ids", "output_token_ids", "spec_token_ids", "num_computed_tokens", "block_ids")


def fix2_contract(attempt: Attempt, fn):
    def take_relayed_tokens(state, num_computed_tokens, new_token_ids):
        # the trace names the stage: the exercise never looks inside the executor (issue 16 §2)
        attempt.context = attempt.where_sent(state.req_id, num_computed_tokens)
        held, spec, n_out = state.num_tokens, list(state.spec_token_ids), len(state.output_token_ids)
        expected = attempt.llm.scheduler.requests[state.req_id].all_token_ids[
            held : num_computed_tokens + len(new_token_ids)]
        relayed = list(new_token_ids)
        given = Inputs({"new_token_ids": relayed, **{f"state.{f}": getattr(state, f) for f in STATE_FIELDS}},
                       tokens=("new_token_ids", "state.prompt_token_ids", "state.output_token_ids",
                               "state.spec_token_ids"))
        result = call_learner(attempt, fn, state, num_computed_tokens, relayed)
        if attempt.bad_call is None:
            if len(state.output_token_ids) != n_out:
                problem = ("you changed state.output_token_ids yourself: return the tokens instead; "
                           "the runner appends them")
            else:
                problem = given.changed(
                    "read the state and the relayed tokens, return a new list; the runner updates the state",
                    {f"state.{f}": getattr(state, f) for f in STATE_FIELDS}) or fix2_problem(
                    held, num_computed_tokens, list(given.before["new_token_ids"]), spec, result, expected, text)
            if problem:
                attempt.bad_call = attempt.context + (problem,)
        return result if isinstance(result, (list, tuple)) else []

    return take_relayed_tokens
