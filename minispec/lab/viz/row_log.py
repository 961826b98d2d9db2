"""What ``_update_states`` did to each stage's persistent batch, step by step.

Derived from the trace alone: a request that held a row at this stage's
previous step and holds none now was removed (``remove_request``); every row now
says how it was filled (``new`` / ``re-added`` by ``add_request``, ``stayed``,
or ``moved`` by ``condense``). Pure functions, ``trace -> str``.
"""

from __future__ import annotations

from dataclasses import dataclass

from minispec.instruments.trace import RowPath, StageRecord, Trace


@dataclass
class RowChanges:
    step: int
    stage: int
    removed: dict[str, int]  # request -> the row it left
    added: dict[str, tuple[int, RowPath]]  # request -> (row, NEW or READDED)
    moved: dict[str, tuple[int, int]]  # request -> (from row, to row), by condense
    stayed: dict[str, int]
    finished: set[str]  # removed for good: never scheduled again


def _stage_records(trace: Trace, stage: int) -> list[StageRecord]:
    return [st for step in trace.steps for st in step.stages if st.stage == stage]


def row_changes(trace: Trace, stage: int) -> list[RowChanges]:
    later_scheduled: dict[str, int] = {}
    for step in trace.steps:
        for req_id in step.schedule.num_scheduled_tokens:
            later_scheduled[req_id] = step.step
    changes, before = [], {}
    for record in _stage_records(trace, stage):
        now = {r.req_id: r for r in record.rows}
        removed = {req: row for req, row in before.items() if req not in now}
        changes.append(RowChanges(
            step=record.step, stage=stage, removed=removed,
            added={r.req_id: (r.row, r.path) for r in record.rows if r.path in (RowPath.NEW, RowPath.READDED)},
            moved={r.req_id: (before[r.req_id], r.row) for r in record.rows if r.path == RowPath.MOVED},
            stayed={r.req_id: r.row for r in record.rows if r.path == RowPath.STAYED},
            finished={req for req in removed if later_scheduled.get(req, -1) < record.step},
        ))
        before = {r.req_id: r.row for r in record.rows}
    return changes


def render_changes(c: RowChanges) -> str:
    parts = []
    if c.removed:
        parts.append("remove_request " + ", ".join(
            f"{req} (row {row}{', finished' if req in c.finished else ''})" for req, row in sorted(c.removed.items())))
    if c.added:
        parts.append("add_request " + ", ".join(f"{req} -> row {row} ({path})" for req, (row, path) in c.added.items()))
    if c.moved:
        parts.append("condense " + ", ".join(f"{req} row {a} -> {b}" for req, (a, b) in c.moved.items()))
    if c.stayed:
        parts.append("kept " + ", ".join(f"{req} in row {row}" for req, row in c.stayed.items()))
    return " · ".join(parts) or "nothing"


def render_row_log(trace: Trace, max_steps: int | None = None, label=None) -> str:
    """One block per scheduler step: the batch, then each stage's row changes.
    ``label(req_ids) -> str`` names a batch (default: its requests)."""
    label = label or (lambda req_ids: "{" + ", ".join(req_ids) + "}")
    per_stage = {s: {c.step: c for c in row_changes(trace, s)} for s in range(trace.pipeline_parallel_size)}
    lines = []
    for step in trace.steps[:max_steps]:
        lines.append(f"step {step.step} · {label(list(step.schedule.num_scheduled_tokens))}")
        for s in range(trace.pipeline_parallel_size):
            if step.step in per_stage[s]:
                lines.append(f"  stage {s}: {render_changes(per_stage[s][step.step])}")
    return "\n".join(lines)
