"""Plain-text renderings of trace records: pure functions, ``record -> str``.

Used by ``python -m minispec replay`` and by the notebooks' nbval-checked cells.
``decode`` turns one token id into a short label (a character for the shipped
tokenizer); by default ids are printed as numbers.
"""

from __future__ import annotations

from minispec.invariants import check_trace
from minispec.trace import StageRecord, StepRecord, Trace


def _tokens(ids, decode) -> str:
    if decode is None:
        return " ".join(str(t) for t in ids)
    return "".join(decode(t) for t in ids)


def render_schedule(step: StepRecord, decode=None) -> str:
    s = step.schedule
    parts = []
    for req_id, n in s.num_scheduled_tokens.items():
        drafts = s.scheduled_spec_decode_tokens.get(req_id)
        kind = "prefill" if s.num_computed_tokens[req_id] < s.num_prompt_tokens[req_id] else "decode"
        text = f"{req_id} {kind} +{n}"
        if drafts:
            text += f" drafts [{_tokens(drafts, decode)}]"
        parts.append(text)
    return f"step {s.step}: " + "; ".join(parts)


def render_stage(stage: StageRecord, step: StepRecord, decode=None) -> str:
    s = step.schedule
    lines = [f"  stage {stage.stage}{' (last)' if stage.is_last else ''}"]
    for row in stage.rows:
        expected = s.scheduled_spec_decode_tokens.get(row.req_id, [])
        mark = "" if not expected else ("  ok" if row.draft_slots == expected else "  STALE")
        history = row.token_ids[: row.num_tokens_no_spec]
        lines.append(
            f"    row {row.row} {row.req_id} {row.path:<8} computed={row.num_computed_tokens:<3} "
            f"no_spec={row.num_tokens_no_spec:<3} history=[{_tokens(history[-12:], decode)}] "
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


def char_decoder(tokenizer):
    """A ``decode`` for the shipped character tokenizer; shows newlines as ⏎."""

    def decode(token_id: int) -> str:
        text = tokenizer.id_to_token(token_id) or "?"
        return "⏎" if text == "\n" else text

    return decode
