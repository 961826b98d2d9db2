"""Buffer by buffer: minispec's stage-steps against vLLM's own, as plain data.

Both sides are snapshots shaped by ``worker.snapshot`` / ``capture.stage_buffers``
(the key names are vLLM's). A difference names the stage-step, the buffer, the
row (or request) and both values; the first one is what ``report`` draws.

Handled, not hidden:

* ``num_tokens``: vLLM 0.14.0 has no such array; its row length is
  ``num_tokens_no_spec`` plus the row's ``spec_token_ids`` (``gpu_input_batch.py``
  lines 130 and 254), which ``worker.snapshot`` adds up, row by row.
* ``drafts``: vLLM 0.14.0's per-row ``spec_token_ids``; for vLLM 0.9.2 and
  minispec, the slots ``token_ids_cpu[row, num_tokens_no_spec:num_tokens]``.
* ``token_ids_cpu`` is int32 in vLLM, int64 in minispec: compared as integers,
  the whole array, freed rows included.

vLLM twin: none.
"""

from __future__ import annotations

from dataclasses import dataclass

# Every buffer compared, in the order a difference is looked for.
BUFFERS = ("req_ids", "req_id_to_index", "num_tokens", "num_tokens_no_spec", "num_computed_tokens_cpu",
           "num_prompt_tokens", "block_table", "drafts", "token_ids_cpu", "output_token_ids")
# Model Runner V2's: a broadcast that did not fit its receive (it ends the run),
# then the live request slots, each per request (v2_capture.slot_buffers).
V2_BUFFERS = ("broadcast_mismatch", "req_id_to_index", "prefill_len", "total_len", "all_token_ids",
              "num_computed_tokens", "num_computed_tokens_np", "last_sampled_tokens", "draft_tokens")


@dataclass(frozen=True)
class Difference:
    step: int
    stage: int
    buffer: str
    where: str  # "row 2", "request A" or "" for a whole-batch value
    minispec: object
    vllm: object

    def describe(self) -> str:
        at = f" {self.where}" if self.where else ""
        return f"step {self.step} stage {self.stage}: {self.buffer}{at}: minispec {self.minispec} vs vLLM {self.vllm}"


def _first_token_difference(mine: list[list[int]], theirs: list[list[int]]) -> tuple[str, object, object] | None:
    for row, (a, b) in enumerate(zip(mine, theirs)):
        if a != b:
            first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            last = max(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            return f"row {row} slots {first}-{last}", a[first : last + 1], b[first : last + 1]
    return None


def buffer_difference(buffer: str, mine, theirs) -> tuple[str, object, object] | None:
    """Where ``mine`` and ``theirs`` of ``buffer`` first differ, or None."""
    if mine == theirs:
        return None
    if buffer == "token_ids_cpu":
        return _first_token_difference(mine, theirs)
    if isinstance(mine, dict) and isinstance(theirs, dict):
        key = next(k for k in sorted(mine.keys() | theirs.keys()) if mine.get(k) != theirs.get(k))
        return f"request {key}", mine.get(key), theirs.get(key)
    if isinstance(mine, list) and len(mine) == len(theirs) and buffer != "req_ids":
        row = next(i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b)
        return f"row {row}", mine[row], theirs[row]
    return "", mine, theirs


def stage_step_differences(step: int, stage: int, mine: dict, theirs: dict, buffers=BUFFERS) -> list[Difference]:
    found = []
    for buffer in buffers:
        d = buffer_difference(buffer, mine[buffer], theirs[buffer])
        if d is not None:
            found.append(Difference(step, stage, buffer, *d))
    return found


@dataclass(frozen=True)
class Comparison:
    total: int  # stage-steps compared
    equal: int
    differences: list[Difference]  # every one, stage-steps in the order they ran

    @property
    def first(self) -> Difference | None:
        return self.differences[0] if self.differences else None


def compare(minispec_steps: list[dict], vllm_steps: list[dict]) -> Comparison:
    """Both lists hold {"stage", "step", "buffers"}; every stage-step of one must
    be in the other."""
    theirs = {(r["stage"], r["step"]): r["buffers"] for r in vllm_steps}
    if len(theirs) != len(minispec_steps):
        raise ValueError(f"vllm_steps: expected the {len(minispec_steps)} stage-steps minispec ran, got {len(theirs)}")
    differences, equal = [], 0
    for r in minispec_steps:
        found = stage_step_differences(r["step"], r["stage"], r["buffers"], theirs[(r["stage"], r["step"])])
        equal += not found
        differences += found
    return Comparison(len(minispec_steps), equal, differences)


def compare_until_stopped(minispec_steps: list[dict], vllm_steps: list[dict], buffers=V2_BUFFERS) -> Comparison:
    """As ``compare``, for runs that may stop early (a broadcast that does not
    fit ends a V2 run): a stage-step only one side ran is a difference in ``ran``."""
    theirs = {(r["stage"], r["step"]): r["buffers"] for r in vllm_steps}
    ours = {(r["stage"], r["step"]) for r in minispec_steps}
    differences, equal = [], 0
    for r in minispec_steps:
        key = (r["stage"], r["step"])
        if key not in theirs:
            differences.append(Difference(r["step"], r["stage"], "ran", "", True, False))
            continue
        found = stage_step_differences(r["step"], r["stage"], r["buffers"], theirs[key], buffers)
        equal += not found
        differences += found
    differences += [Difference(r["step"], r["stage"], "ran", "", False, True)
                    for r in vllm_steps if (r["stage"], r["step"]) not in ours]
    return Comparison(len(ours | theirs.keys()), equal, differences)
