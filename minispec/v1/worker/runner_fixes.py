"""V1's switches: the two runner faults of July 2025, their presets, and the workshop's
plug points in V1's runner (minispec's own; vLLM has no twin: it ships one behaviour per
release of the code they switch, ``_update_states`` in
``vllm/v1/worker/gpu_model_runner.py``). Every switch here belongs to
``ModelRunner.V1``.

``READD_SPEC_TOKENS`` (fix 1: a re-added row gets its drafts written),
``SYNC_ACCEPTED_TOKENS`` (fix 2: a non-last stage takes the drafts accepted last step)
and ``MOVE_ROW`` (condense's row move, the bonus exercise); under PP with async
scheduling, ``PREV_SAMPLED_LAYOUT``, ``TRIM_OPTIMISTIC`` and ``NUM_TOKENS_NO_SPEC``.
Each fault is a function below, named for it; a learner's function takes its signature.
The ``fixes=`` presets: ``"vllm-0.9.2"``, ``"vllm-0.14"`` (fix 1 only) and ``"all"``.
``LEFT_OUT`` names a fault that is not a preset. Fidelity to vLLM:
``docs/fidelity/model_runner_v1.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minispec.v1.worker.gpu_input_batch import CachedRequestState
from minispec.v1.worker.pp_prev_sampled import PrevSampledLayout
from minispec.v1.worker.switches import ModelRunner, Switch, SwitchPreset, SwitchSettings


def skip_spec_tokens(runner, row: int, spec_token_ids: list[int]) -> None:
    """Fault 1 (v0.9.2): a re-added row gets no drafts; its draft slots keep what they held."""


def slice_relayed_tokens(state: CachedRequestState, num_computed_tokens: int, new_token_ids: list[int]) -> list[int]:
    """Fault 2: a slice of the relayed tokens, silently shorter than what is missing when
    drafts were accepted."""
    num_new = num_computed_tokens + len(new_token_ids) - state.num_tokens
    return new_token_ids[-num_new:]


def take_accepted_drafts(state: CachedRequestState, num_computed_tokens: int, new_token_ids: list[int]) -> list[int]:
    """Fix 2: the drafts accepted last step were never relayed; they are the first
    ``missing`` of the drafts this stage was given. (A request scheduled without
    drafts keeps its older ones: a resumed request's last recompute chunk may still
    need them.)"""
    missing = num_computed_tokens - state.num_tokens  # before the relayed tokens
    if missing <= 0:  # nothing was accepted: the slice is right
        return slice_relayed_tokens(state, num_computed_tokens, new_token_ids)
    if missing > len(state.spec_token_ids):
        raise RuntimeError(f"request {state.req_id}: {missing} relayed tokens missing but only "
                           f"{len(state.spec_token_ids)} drafts held")
    return state.spec_token_ids[:missing] + list(new_token_ids)


def column_zero_layout(num_speculative_tokens: int) -> PrevSampledLayout:
    """v1-pp-async-column-0: vLLM's ``[num_reqs, 1]`` broadcast, fed column 0 of the
    sampled tokens so its width assertion passes; no counts, no drafts."""
    return PrevSampledLayout(1, False, 0)


def take_back_rejected(state: CachedRequestState, num_computed_tokens: int, is_last_rank: bool) -> int:
    """The scheduler's ``num_computed_tokens`` assumes every draft of the batches in flight
    is accepted; this stage has applied them all, so a request that sampled has computed
    all but its last token. On every stage."""
    if not state.output_token_ids:
        return num_computed_tokens
    return min(num_computed_tokens, state.num_tokens - 1)


def trim_on_last_rank_only(state: CachedRequestState, num_computed_tokens: int, is_last_rank: bool) -> int:
    """v1-pp-async-trim-last-rank: the take-back sits in a branch only the last stage
    takes; every other stage keeps the optimistic count."""
    return take_back_rejected(state, num_computed_tokens, is_last_rank) if is_last_rank else num_computed_tokens


def end_of_history(start: int, num_computed_tokens: int, num_new: int) -> int:
    """Where a non-last stage's row ends: never before what it already holds, which under
    async scheduling is the broadcast's tokens."""
    return max(start, num_computed_tokens + num_new)


def end_from_num_computed(start: int, num_computed_tokens: int, num_new: int) -> int:
    """v1-pp-async-num-tokens-no-spec: the scheduler's count plus the relayed tokens, of
    which async scheduling relays none: the row ends before the last sampled token."""
    return num_computed_tokens + num_new


def row_now(batch, req_id: str, received_row: int) -> int | None:
    """Where a broadcast entry's tokens go on a non-last stage: the request's row now, looked up by
    its id (``req_id_to_index``), or None if it has none (the tokens stay in its history only)."""
    return batch.req_id_to_index.get(req_id)


def row_at_receive(batch, req_id: str, received_row: int) -> int | None:
    """v1-pp-async-stale-row: the row the request had when the receive was posted. Since
    then ``condense`` may have moved the request, or it left the batch and another
    request took the row: that row's history and length take the tokens."""
    return received_row


READD_SPEC_TOKENS = Switch("readd_spec_tokens", ModelRunner.V1, skip_spec_tokens)
SYNC_ACCEPTED_TOKENS = Switch("sync_accepted_tokens", ModelRunner.V1, slice_relayed_tokens)
MOVE_ROW = Switch("move_row", ModelRunner.V1)
PREV_SAMPLED_LAYOUT = Switch("prev_sampled_layout", ModelRunner.V1, column_zero_layout)
TRIM_OPTIMISTIC = Switch("trim_optimistic", ModelRunner.V1, trim_on_last_rank_only)
NUM_TOKENS_NO_SPEC = Switch("num_tokens_no_spec", ModelRunner.V1, end_from_num_computed)
COMMIT_ROW = Switch("commit_row", ModelRunner.V1, row_at_receive)


class Preset(SwitchPreset):
    """The ``fixes=`` presets, each named after the vLLM it behaves like."""

    VLLM_0_9_2 = "vllm-0.9.2", (READD_SPEC_TOKENS, SYNC_ACCEPTED_TOKENS)
    VLLM_0_14 = "vllm-0.14", (SYNC_ACCEPTED_TOKENS,)
    ALL = "all"


class V1FaultPreset(SwitchPreset):
    """The ``faults=`` presets of V1 under pipeline parallelism with async scheduling: one fault
    of the in-flight family each."""

    V1_PP_ASYNC_COLUMN_0 = "v1-pp-async-column-0", (PREV_SAMPLED_LAYOUT,)
    V1_PP_ASYNC_TRIM_LAST_RANK = "v1-pp-async-trim-last-rank", (TRIM_OPTIMISTIC,)
    V1_PP_ASYNC_NUM_TOKENS_NO_SPEC = "v1-pp-async-num-tokens-no-spec", (NUM_TOKENS_NO_SPEC,)
    V1_PP_ASYNC_STALE_ROW = "v1-pp-async-stale-row", (COMMIT_ROW,)


@dataclass(frozen=True, repr=False)
class RunnerFixes(SwitchSettings):
    """A learner's setting of each of V1's switches (``fixes=RunnerFixes(...)``)."""

    SWITCHES = (READD_SPEC_TOKENS, SYNC_ACCEPTED_TOKENS, MOVE_ROW)

    readd_spec_tokens: bool | Callable = True
    sync_accepted_tokens: bool | Callable = True
    move_row: Callable | None = None


LEFT_OUT = {
    "v1-num-tokens-no-spec": (
        "vLLM PR #41133 (merged; its description of 2026-04-28) moved the write offset of a non-last rank's relayed tokens "
        "from num_computed_tokens (0.17.0 vllm/v1/worker/gpu_model_runner.py 1153-1160) to num_tokens_no_spec "
        "(0.30.0 1496-1518, whose comment names the two cases where they differ: a chunked prefill, and async "
        "scheduling under PP, which relays no new_token_ids). Synchronously, minispec's V1 runner writes at "
        "num_computed_tokens, as 0.17.0 did (gpu_model_runner.py, _write_relayed_tokens), and loses nothing by "
        "it: a prefill chunk's prompt stays in its row, and after a verify step the positions between the two "
        "offsets hold the drafts the row was given and the scheduler accepted. Every hypothesis schedule of "
        "tests/test_properties.py (chunked prefill and preemption included) runs clean under fixes='all' with "
        "that offset, so no synchronous scenario bites, and this name is not a preset. Under pipeline "
        "parallelism with async scheduling it bites: faults='v1-pp-async-num-tokens-no-spec' puts it back there."
    ),
}
