"""A fault preset's run, caught, as text: a pure function, ``FaultRun -> str``.

What the room reads: the fault, what caught it, and the fixed run. The threads each preset
reproduces are ``FAULTS[name].reference`` (notebook 09 lists them under "Going deeper").

No vLLM twin.
"""

from __future__ import annotations

import textwrap

from minispec.instruments.invariants import Invariant
from minispec.lab.faults.reproduce import FaultRun

WIDTH = 100  # characters per line; longer expected/actual values are shortened with "…"
TAIL = 6  # tokens shown before where a history runs past the scheduler's


def _short(value, width: int) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _history_lines(run: FaultRun, decode) -> list[str]:
    """A broken token history: the ends of the scheduler's tokens and of the stage's, decoded."""
    v = run.violation
    scheduler = run.trace.step(v.step).schedule.all_token_ids[v.req_id]
    start = max(0, min(len(scheduler), len(v.actual)) - TAIL)
    return [f"    the scheduler's tokens end …{''.join(map(decode, scheduler[start:]))!r}",
            f"    stage {v.stage}'s end        …{''.join(map(decode, v.actual[start:]))!r}"]


def _draft_lines(run: FaultRun, decode) -> list[str]:
    """Drafts that disagree: the scheduler's and the stage's, decoded."""
    v = run.violation
    scheduler = run.trace.step(v.step).schedule.scheduled_spec_decode_tokens.get(v.req_id, [])
    return [f"    the scheduler's drafts {''.join(map(decode, scheduler))!r}",
            f"    stage {v.stage}'s drafts      {''.join(map(decode, v.actual))!r}"]


def render_fault_run(run: FaultRun, decode=None) -> str:
    """``decode`` (token id -> text) shows a broken token history or drafts as text; without
    it, as ids."""
    f = run.fault
    lines = [f"{f.preset}: {f.summary}"]
    if run.violation is not None:
        v = run.violation
        lines.append(f"  caught: {v.headline}")
        # Under async scheduling the scheduler's record holds placeholders where the checker held
        # the stage to what they stood for: the violation's own expected/got say that, as ids.
        as_text = decode is not None and run.trace is not None and not f.scenario.async_scheduling
        if v.invariant is Invariant.TOKEN_HISTORY and as_text:
            lines.extend(_history_lines(run, decode))
        elif v.invariant is Invariant.DRAFT_AGREEMENT and as_text:
            lines.extend(_draft_lines(run, decode))
        else:
            lines.append(f"    expected {_short(v.expected, WIDTH - 13)}")
            lines.append(f"    got      {_short(v.actual, WIDTH - 13)}")
    elif run.transport_error is not None:
        lines.extend(textwrap.wrap(f"caught by the transport: {run.transport_error}", WIDTH,
                                   initial_indent="  ", subsequent_indent="    "))
    else:
        lines.append("  nothing caught: the faulty run finished clean")
    if run.catalogued and not run.as_expected:  # a maintainer's warning: the catalogue is out of date
        lines.append("  where FAULTS says it bites: NO")
    lines.append("  fixed: " + ("clean, every output equals plain greedy decoding" if run.fixed_clean
                                else "NOT clean"))
    return "\n".join(lines)
