"""Bisecting a fault across presets: where each invariant first breaks, one row per run.

Pure functions over the checker's ``Violation`` lists (``check_trace``), so a
notebook can line up the presets, or any mix of fix switches, and read off which
switch cures which invariant and where the first break was.
"""

from __future__ import annotations

from minispec.instruments.invariants import CHECKED, Invariant, Violation


def first_by_invariant(violations: list[Violation]) -> dict[int, Violation]:
    """The first violation of each invariant, in the order they were found."""
    first: dict[int, Violation] = {}
    for v in violations:
        first.setdefault(v.invariant, v)
    return first


def where(v: Violation | None) -> str:
    if v is None:
        return "holds"
    stage = "" if v.stage is None else f" stage {v.stage}"
    return f"step {v.step}{stage} {v.req_id}"


# Rule 8 reads no rows, only the taps an EAGLE-3 head is handed: a run without one never exercises
# it, and a column of "holds" would claim a check that did not happen. Ask for it by number.
ROW_RULES = tuple(i for i in CHECKED if i is not Invariant.HIDDEN_STATE_HANDOVER)


def render_bisect(runs: dict[str, list[Violation]], invariants=ROW_RULES) -> str:
    """A text table: one row per run, one column per invariant, each cell the
    first break ("step 4 stage 0 A") or "holds"."""
    firsts = {name: first_by_invariant(vs) for name, vs in runs.items()}
    headers = [f"{i} {Invariant(i).title}" for i in invariants]
    cells = {name: [where(f.get(i)) for i in invariants] for name, f in firsts.items()}
    widths = [max([len(h)] + [len(c[k]) for c in cells.values()]) for k, h in enumerate(headers)]
    name_width = max(len("run"), *(len(n) for n in runs))
    lines = [f"{'run':<{name_width}} | " + " | ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("-" * len(lines[0]))
    for name, row in cells.items():
        lines.append(f"{name:<{name_width}} | " + " | ".join(c.ljust(w) for c, w in zip(row, widths)))
    return "\n".join(line.rstrip() for line in lines)
