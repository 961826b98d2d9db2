"""Notebook 06's first invariant, the one that compares copies: every stage gathers the same
``input_ids`` for a request. It misses every fault that corrupts all copies alike, which is the
lesson; the checker's invariants (``minispec.instruments.invariants``) compare each stage with the
scheduler instead.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations


def stage_inputs(stage) -> dict[str, list[int]]:
    """The input_ids this stage gathered, per request."""
    inputs, start = {}, 0
    for row in stage.rows:
        inputs[row.req_id] = stage.input_ids[start : start + row.num_scheduled_tokens]
        start += row.num_scheduled_tokens
    return inputs


def same_inputs_on_every_stage(trace) -> list[tuple[int, str, dict[int, list[int]]]]:
    """(step, request, {stage: input_ids}) wherever two stages gathered different input_ids."""
    broken = []
    for step in trace.steps:
        per_stage = {stage.stage: stage_inputs(stage) for stage in step.stages}
        for req_id in step.schedule.num_scheduled_tokens:
            seen = {s: inputs[req_id] for s, inputs in per_stage.items()}
            if len({tuple(ids) for ids in seen.values()}) > 1:
                broken.append((step.step, req_id, seen))
    return broken
