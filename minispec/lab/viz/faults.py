"""A fault preset's run, caught, as text: a pure function, ``FaultRun -> str``.

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


def render_fault_run(run: FaultRun, decode=None) -> str:
    """``decode`` (token id -> text) shows a broken token history as text; without it, as ids."""
    f = run.fault
    lines = [f"{f.preset}: {f.summary}", f"  reference: {f.reference}"]
    if run.violation is not None:
        v = run.violation
        lines.append(f"  caught: {v.headline}")
        if v.invariant is Invariant.TOKEN_HISTORY and decode is not None and run.trace is not None:
            lines.extend(_history_lines(run, decode))
        else:
            lines.append(f"    expected {_short(v.expected, WIDTH - 13)}")
            lines.append(f"    got      {_short(v.actual, WIDTH - 13)}")
    elif run.transport_error is not None:
        lines.extend(textwrap.wrap(f"caught by the transport: {run.transport_error}", WIDTH,
                                   initial_indent="  ", subsequent_indent="    "))
    else:
        lines.append("  nothing caught: the faulty run finished clean")
    lines.append(f"  where FAULTS says it bites: {'yes' if run.as_expected else 'NO'}")
    lines.append("  fixed: " + ("clean, every output equals plain greedy decoding" if run.fixed_clean
                                else "NOT clean"))
    return "\n".join(lines)
