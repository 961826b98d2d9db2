"""Plain-text renderings of trace records: pure functions, ``record -> str``.

Used by ``python -m minispec replay`` and by the notebooks' nbval-checked cells.
``decode`` turns one token id into a short label (a character for the shipped
tokenizer); by default ids are printed as numbers.
"""

from __future__ import annotations

from minispec.instruments.events import EventKind
from minispec.instruments.invariants import PLACEHOLDER, check_trace
from minispec.instruments.trace import StageRecord, StepRecord, Trace
from minispec.lab.experiments.metrics import first_divergence
from minispec.lab.viz.strip import CellRole, row_view

HISTORY = 12  # history tokens shown per row; "…" marks that earlier ones are cut


def _tokens(ids, decode) -> str:
    if decode is None:
        return " ".join(str(t) for t in ids)
    return "".join(decode(t) for t in ids)


def render_schedule(step: StepRecord, decode=None) -> str:
    s = step.schedule
    parts = []
    for req_id, n in s.num_scheduled_tokens.items():
        drafts = s.scheduled_spec_decode_tokens.get(req_id)
        computed = s.num_computed_tokens[req_id]
        if computed < s.num_prompt_tokens[req_id]:
            kind = "prefill"
        elif computed < len(s.all_token_ids[req_id]) - 1:
            kind = "recompute"  # resumed after preemption: its output is computed again
        else:
            kind = "decode"
        text = f"{req_id} {kind} +{n}"
        if drafts and PLACEHOLDER in drafts:  # async scheduling: the values are the stages' own
            text += f" {len(drafts)} draft placeholders"
        elif drafts:
            text += f" drafts [{_tokens(drafts, decode)}]"
        parts.append(text)
    return f"step {s.step}: " + "; ".join(parts)


def render_stage(stage: StageRecord, step: StepRecord, decode=None) -> str:
    s = step.schedule
    lines = [f"  stage {stage.stage}{' (last)' if stage.is_last else ''}"]
    for row in stage.rows:
        expected = s.scheduled_spec_decode_tokens.get(row.req_id, [])
        view = row_view(row, step)
        roles = [c.role for c in view.cells]
        if PLACEHOLDER in expected:  # async scheduling: nothing to compare the slots with yet
            expected = []
        mark = "" if not expected else ("  STALE" if view.stale else "  ok")
        if CellRole.DRAFT_SHIFTED in roles:  # fault 2: some slots hold a scheduled draft, in the wrong place
            counts = [f"{roles.count(r)} {name}" for r, name in ((CellRole.DRAFT_SHIFTED, "SHIFTED"), (CellRole.DRAFT_STALE, "STALE"))]
            mark = "  " + ", ".join(c for c in counts if not c.startswith("0 "))
        if "STALE" in mark and row.prev_req_id not in (None, row.req_id):
            mark += f" (row held {row.prev_req_id} before)"
        history = row.token_ids[: row.num_tokens_no_spec]
        cut = "…" if len(history) > HISTORY else ""
        lines.append(
            f"    row {row.row} {row.req_id} {row.path:<8} computed={row.num_computed_tokens:<3} "
            f"no_spec={row.num_tokens_no_spec:<3} history=[{cut}{_tokens(history[-HISTORY:], decode)}] "
            f"draft slots=[{_tokens(row.draft_slots, decode)}]"
            + (f" scheduled=[{_tokens(expected, decode)}]{mark}" if expected else "")
        )
    if stage.is_last and stage.sampled:
        emitted = "; ".join(f"{r} -> [{_tokens(t, decode)}]" for r, t in stage.sampled.items() if t)
        lines.append(f"    sampled: {emitted}")
    return "\n".join(lines)


def render_step(step: StepRecord, decode=None) -> str:
    lines = [render_schedule(step, decode)]
    lines += [render_stage(stage, step, decode) for stage in step.stages]
    if step.num_accepted:
        lines.append("  accepted: " + ", ".join(f"{r}={n}" for r, n in step.num_accepted.items()))
    return "\n".join(lines)


def render_trace(trace: Trace, decode=None, max_steps: int | None = None) -> str:
    steps = trace.steps[:max_steps] if max_steps else trace.steps
    blocks = [f"preset {trace.fixes}, {trace.pipeline_parallel_size} stages"]
    blocks += [render_step(step, decode) for step in steps]
    violations = check_trace(trace)
    blocks.append(f"invariant violations: {len(violations)}")
    if violations:
        blocks.append(f"first: {violations[0]}")
    return "\n".join(blocks)


def char_decoder(tokenizer, visible_spaces: bool = False):
    """A ``decode`` for the shipped character tokenizer; shows newlines as ⏎
    (and spaces as ␣ if asked, for drawings where a blank cell says nothing), and an id
    no token has as ? (a negative one too: -1 is Model Runner V2's padding, which a wrong
    post-processing can write where a token belongs)."""
    shown = {"\n": "⏎", " ": "␣" if visible_spaces else " "}

    def decode(token_id: int) -> str:
        text = (tokenizer.id_to_token(token_id) if token_id >= 0 else None) or "?"
        return shown.get(text, text)

    return decode


def output_step(trace: Trace, req_id: str, index: int) -> int:
    """The step whose last stage emitted ``req_id``'s output token ``index`` (0-based).
    A last step may emit more than ``max_tokens`` allows; the output keeps only
    what was asked for, and so does this."""
    kept = len(trace.outputs.get(req_id, ()))
    if trace.outputs and not 0 <= index < kept:
        raise ValueError(f"index={index!r}: request {req_id!r} has {kept} output tokens")
    emitted = 0
    for step in trace.steps:
        emitted += sum(len(st.sampled.get(req_id, [])) for st in step.stages if st.is_last)
        if emitted > index:
            return step.step
    raise ValueError(f"index={index!r}: request {req_id!r} has {emitted} output tokens in this trace")


def render_comparison(runs: list[tuple[str, dict, dict]], reference: dict) -> str:
    """One line per run: (name, stats, outputs by request) against reference outputs."""
    lines = [f"{'run':<26} {'acceptance':>10} {'tok/fwd':>8} {'forwards':>8}  diverged (request@position)"]
    for name, stats, outputs in runs:
        diverged = [f"{r}@{first_divergence(t, reference[r])}" for r, t in outputs.items()
                    if first_divergence(t, reference[r]) is not None]
        lines.append(
            f"{name:<26} {stats['acceptance_rate']:>10.1%} {stats['tokens_per_forward']:>8.2f} "
            f"{stats['target_forwards']:>8}  {len(diverged)}/{len(outputs)}"
            + (f" ({', '.join(diverged)})" if diverged else "")
        )
    return "\n".join(lines)


def render_event(trace: Trace, index: int, decode=None) -> str:
    """What happened at ``trace.events[index]``, with the records it left: a text log
    of a recorded run, one event at a time (tested, but no notebook calls it)."""
    event = trace.events[index]
    step = trace.step(event.step)
    header = f"event {index + 1}/{len(trace.events)}: "
    if event.kind is EventKind.SCHEDULE:
        return header + "scheduler -> " + render_schedule(step, decode)
    if event.kind is EventKind.STAGE:
        stage = next(s for s in step.stages if s.stage == event.stage)
        return header + f"step {event.step} runs on stage {event.stage}\n" + render_stage(stage, step, decode)
    accepted = ", ".join(f"{r}={n}" for r, n in step.num_accepted.items()) or "none (prefill)"
    return header + f"update_from_output for step {event.step}: accepted drafts {accepted}"
