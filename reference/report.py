"""Pure renderers for the check: the table, and the first difference drawn as rows.

The first difference of a pairing is drawn with minispec's own row renderer
(``minispec.lab.viz.text.render_stage``) twice: once for minispec's stage
record and once for the same stage-step rebuilt from vLLM's buffers, so the two
persistent batches read side by side, draft slots and all.

vLLM twin: none.
"""

from __future__ import annotations

from dataclasses import replace

from minispec.instruments.trace import RowRecord, StageRecord, StepRecord
from minispec.lab.viz.text import render_stage

COLUMNS = ("vLLM", "preset", "scenario", "runs equal", "equal stage-steps", "expected", "verdict")


def vllm_stage_record(mine: StageRecord, step: StepRecord, buffers: dict) -> StageRecord:
    """``mine`` with its rows rebuilt from vLLM's buffers at the same stage-step.
    How each row got there (path) and who held it before are minispec's: vLLM
    does not record them."""
    s = step.schedule
    by_row = {r.row: r for r in mine.rows}
    rows = []
    for i, req_id in enumerate(buffers["req_ids"]):
        n_sched = s.num_scheduled_tokens[req_id]
        computed, num_tokens = buffers["num_computed_tokens_cpu"][i], buffers["num_tokens"][i]
        ours = by_row.get(i)
        same = ours is not None and ours.req_id == req_id
        rows.append(RowRecord(
            row=i, req_id=req_id, path=ours.path if same else "?",
            token_ids=buffers["token_ids_cpu"][i][: max(num_tokens, computed + n_sched)],
            num_tokens=num_tokens, num_tokens_no_spec=buffers["num_tokens_no_spec"][i],
            num_computed_tokens=computed, num_scheduled_tokens=n_sched,
            num_drafts=len(s.scheduled_spec_decode_tokens.get(req_id, ())),
            prev_req_id=ours.prev_req_id if same else None, prev_token_ids=ours.prev_token_ids if same else [],
            block_ids=buffers["block_table"][i],
        ))
    return replace(mine, rows=rows, sampled={})


def render_first_difference(release: str, difference, step: StepRecord, mine: StageRecord, buffers: dict,
                            decode=None) -> str:
    theirs = vllm_stage_record(mine, step, buffers)
    return "\n".join([
        f"first difference: {difference.describe()}",
        "  minispec:", render_stage(replace(mine, sampled={}), step, decode),
        f"  vLLM {release}:", render_stage(theirs, step, decode),
    ])


def _grid(cells: list[tuple[str, ...]]) -> str:
    """Left-aligned columns, a rule under the header."""
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _verdict(row) -> str:
    return "ok" if row.ok else "FAILED"


def render_table(rows) -> str:
    """One line per ``run.CheckRow``."""
    cells = [COLUMNS] + [
        (r.pairing.release, r.pairing.preset, r.pairing.scenario, f"{r.runs_equal}/{r.runs}",
         f"{r.comparison.equal}/{r.comparison.total}", "equal" if r.pairing.expect_equal else "differ",
         _verdict(r))
        for r in rows
    ]
    left_out = [f"{r.pairing.release} x {r.pairing.preset} x {r.pairing.scenario}: {len(r.departing)} runs left out "
                f"({r.pairing.departure}), e.g. {r.departing[0]}" for r in rows if r.departing]
    return "\n".join([_grid(cells), *left_out])


SCHEDULER_COLUMNS = ("vLLM Scheduler", "preset", "scenario", "runs equal", "equal schedules", "first differences",
                     "verdict")


def render_scheduler_table(rows) -> str:
    """One line per ``scheduler_check.SchedulerRow``; a run's schedules count as
    equal up to its first difference, and each first difference by its kind."""
    cells = [SCHEDULER_COLUMNS] + [
        ("0.9.2", r.preset, r.scenario, f"{r.runs_equal}/{r.runs}", f"{r.equal}/{r.total}",
         "; ".join(f"{n}: {k}" for k, n in r.kinds.items()) or "none", "ok" if r.ok else "FAILED")
        for r in rows
    ]
    return _grid(cells)


def render_coverage(coverage: dict) -> str:
    return "random schedules covered: " + ", ".join(f"{k} {v}" for k, v in coverage.items())


V2_COLUMNS = ("vLLM", "sampler width", "preset", "scenario", "runs equal", "equal stage-steps", "timing departs",
              "unwaited", "expected", "first difference", "verdict")


def render_v2_table(rows) -> str:
    """One line per ``v2_run.V2Row``; "timing departs": runs where minispec took a
    broadcast entry at another step than vLLM's FIFO would; "unwaited": runs whose
    one difference is a broadcast that did not fit, which minispec names and
    vLLM's code took off its FIFO without waiting on it (``v2_run.unwaited_mismatch``)."""
    cells = [V2_COLUMNS] + [
        (r.pairing.release, r.pairing.sampler_width, r.pairing.preset, r.pairing.scenario, f"{r.runs_equal}/{r.runs}",
         f"{r.comparison.equal}/{r.comparison.total}", f"{len(r.timing_departs)}/{r.runs}",
         f"{len(r.unwaited)}/{r.runs}", "equal" if r.pairing.expect_equal else "differ",
         f"step {r.first.step} stage {r.first.stage} {r.first.buffer} {r.first.where}".rstrip() if r.first else "-",
         _verdict(r))
        for r in rows
    ]
    return _grid(cells)
