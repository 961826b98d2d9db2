"""What the row strip shows, as plain data: pure functions of trace records.

One stage's persistent batch at one step, row by row: for each cell near the
gathered positions, its position, the token the stage holds there, what should
be there (the request's own token, or the scheduled draft for a draft slot), and
who left it there if it is not the request's own. The drawing (``plots.py``)
and the tests read these, so what a cell is called is decided once, here.

A row's drafts are judged as a whole: if any draft slot differs from the
scheduled draft the row is stale, and a slot that happens to hold the right
token is "draft by chance", never "draft ok". A wrong draft slot is "draft
shifted" when it holds one of this step's scheduled drafts that the stage wrote
after its own, shorter or longer, history (fault 2), and "draft stale" when it
holds anything else, e.g. a leftover of the row's previous occupant (fault 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from minispec.instruments.invariants import PLACEHOLDER
from minispec.instruments.trace import RowRecord, StepRecord

WINDOW = 10  # cells shown before the first input of a decode row


class CellRole(StrEnum):
    """What a cell of the strip is; a ``StrEnum``, so a role prints as its name."""

    HISTORY = "history"
    COMPUTED_NOW = "computed now"
    WRONG_HISTORY = "wrong history"
    DRAFT_OK = "draft ok"
    DRAFT_STALE = "draft stale"
    DRAFT_SHIFTED = "draft shifted"
    DRAFT_BY_CHANCE = "draft by chance"

    @property
    def is_draft(self) -> bool:
        """A draft slot's role, whatever it holds."""
        return self in (CellRole.DRAFT_OK, CellRole.DRAFT_STALE, CellRole.DRAFT_SHIFTED, CellRole.DRAFT_BY_CHANCE)


ROLES = {  # role -> what the legend says
    CellRole.HISTORY: "history (seen before)",
    CellRole.COMPUTED_NOW: "computed now",
    CellRole.WRONG_HISTORY: "history differs from the request's tokens",
    CellRole.DRAFT_OK: "draft slot = scheduled draft",
    CellRole.DRAFT_STALE: "draft slot ≠ scheduled draft (stale)",
    CellRole.DRAFT_SHIFTED: "draft slot holds a scheduled draft, shifted",
    CellRole.DRAFT_BY_CHANCE: "matches by chance (row is stale)",
}


@dataclass(frozen=True)
class Cell:
    pos: int
    token: int
    role: CellRole
    expected: int | None  # the request's token at pos, or the scheduled draft; None if unknown
    left_by: str | None = None  # the previous occupant, if the cell holds what it had at pos


@dataclass(frozen=True)
class RowView:
    row: int
    req_id: str
    path: str
    num_computed: int  # positions before this are history; from here on the step's inputs
    prev_req_id: str | None  # who held the row before, if someone else
    stale: bool  # some draft slot differs from the scheduled draft
    wrong_history: bool  # some slot before the drafts differs from the request's own tokens
    cells: list[Cell]
    scheduled: list[int]  # the drafts the scheduler sent for this request
    cut: bool  # history before the first cell is not shown

    @property
    def label(self) -> str:
        return f"row {self.row}: {self.req_id} ({self.path})"

    @property
    def status(self) -> str:
        roles = {c.role for c in self.cells}
        shifted = CellRole.DRAFT_SHIFTED in roles
        problems = [text for bad, text in ((self.wrong_history, "history wrong"), (shifted, "drafts shifted"),
                                           (self.stale and (not shifted or CellRole.DRAFT_STALE in roles),
                                            "drafts stale"))
                    if bad]
        return ", ".join(problems) or ("ok" if self.scheduled else "ok, no drafts")

    @property
    def end(self) -> int:
        """One past the last gathered position."""
        return self.cells[-1].pos + 1 if self.cells else 0


def _expected(row: RowRecord, all_token_ids: list[int], scheduled: list[int], pos: int) -> int | None:
    """The scheduler's token at ``pos``, or None where it does not know it: past its history, or a
    draft it sent as a placeholder (async scheduling: the checker compares those once known)."""
    if pos >= row.first_draft_pos:
        i = pos - row.first_draft_pos
        return scheduled[i] if i < len(scheduled) and scheduled[i] != PLACEHOLDER else None
    return all_token_ids[pos] if pos < len(all_token_ids) else None


def _written_draft(row: RowRecord, scheduled: list[int], pos: int) -> int | None:
    """The scheduled draft the stage wrote at ``pos``, if it wrote drafts: they
    follow the stage's own history (``num_tokens_no_spec``), which is not where
    the step gathers them when that history is short (fault 2)."""
    i = pos - row.num_tokens_no_spec
    written = row.num_tokens - row.num_tokens_no_spec
    return scheduled[i] if 0 <= i < min(written, len(scheduled)) else None


def row_view(row: RowRecord, step: StepRecord, window: int = WINDOW) -> RowView:
    s = step.schedule
    scheduled = s.scheduled_spec_decode_tokens.get(row.req_id, [])
    first_draft = row.first_draft_pos
    end = first_draft + row.num_drafts
    # a decode row: `window` history cells, then its 1 + k inputs; a prefill
    # chunk: its last window + 1 positions
    positions = range(max(0, end - window - 1 - row.num_drafts), end)
    expected = [_expected(row, s.all_token_ids[row.req_id], scheduled, p) for p in positions]
    stale = PLACEHOLDER not in scheduled and row.draft_slots != scheduled
    # the whole history counts, as in invariant 3, not just the cells shown
    n = min(first_draft, len(s.all_token_ids[row.req_id]))
    wrong = row.token_ids[:n] != s.all_token_ids[row.req_id][:n]
    other = row.prev_req_id if row.prev_req_id != row.req_id else None
    cells = []
    for pos, exp in zip(positions, expected):
        token = row.token_ids[pos]
        matches = exp is None or token == exp
        if pos < first_draft:
            role = (CellRole.HISTORY if pos < row.num_computed_tokens else CellRole.COMPUTED_NOW) if matches \
                else CellRole.WRONG_HISTORY
        elif matches:
            role = CellRole.DRAFT_BY_CHANCE if stale else CellRole.DRAFT_OK
        else:
            role = CellRole.DRAFT_SHIFTED if token == _written_draft(row, scheduled, pos) else CellRole.DRAFT_STALE
        left_by = None
        if role in (CellRole.DRAFT_STALE, CellRole.DRAFT_BY_CHANCE, CellRole.WRONG_HISTORY) and other is not None:
            if pos < len(row.prev_token_ids) and row.prev_token_ids[pos] == token:
                left_by = other
        cells.append(Cell(pos, token, role, exp, left_by))
    return RowView(row.row, row.req_id, row.path, row.num_computed_tokens, other, stale, wrong, cells, list(scheduled), positions.start > 0)


def stage_view(step: StepRecord, stage: int, window: int = WINDOW) -> list[RowView]:
    """The rows of ``stage``'s persistent batch at ``step``."""
    record = next((s for s in step.stages if s.stage == stage), None)
    if record is None:
        raise ValueError(f"stage={stage!r}: step {step.step} has records for stages "
                         f"{[s.stage for s in step.stages]}")
    return [row_view(row, step, window) for row in record.rows]


def diff_cells(a: list[RowView], b: list[RowView]) -> set[tuple[str, int]]:
    """(request, position) of every cell whose token differs between two views of
    the same step and stage, or that only one of them shows."""
    tokens_a = {(r.req_id, c.pos): c.token for r in a for c in r.cells}
    tokens_b = {(r.req_id, c.pos): c.token for r in b for c in r.cells}
    return {key for key in tokens_a.keys() | tokens_b.keys() if tokens_a.get(key) != tokens_b.get(key)}
