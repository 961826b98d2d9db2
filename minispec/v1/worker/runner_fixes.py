"""The two runner faults of July 2025 as switches, their presets, and the workshop's
plug points (minispec's own; vLLM has no twin: it ships one behaviour per release of
the code they switch, ``_update_states`` in ``vllm/v1/worker/gpu_model_runner.py``).

* ``readd_spec_tokens`` (fix 1, vLLM v0.14.0, PR #31944): when a cached request is
  re-added to the persistent batch, write its scheduled draft tokens into its row,
  as the in-batch path does.
* ``sync_accepted_tokens`` (fix 2): under pipeline parallelism the scheduler sends
  a non-last stage only the last token emitted (the bonus token, or the recovered
  token after a rejection); the drafts accepted last step never reach it. With the
  fix, the stage takes the accepted ones from the drafts it was given last step,
  so its token history stays complete.
* ``move_row``: condense's row move, for the workshop's bonus exercise. ``None``
  is ``InputBatch``'s own, which moves a row's first ``num_tokens`` slots, as vLLM's
  ``condense`` does.

The presets (``Preset``): ``"vllm-0.9.2"`` has both faults. ``"vllm-0.14"`` is v0.9.2's
scheduler and engine plus fix 1: the runner's re-add and relay logic matches
0.14.0, but real 0.14.0 also clears a request's drafts at schedule time, hands
new drafts to the scheduler through ``take_draft_token_ids`` rather than in
``ModelRunnerOutput``, and marks resumed requests differently (a
``resumed_req_ids`` set, plus the full ``all_token_ids`` of any request not
scheduled the step before). ``"all"`` has both fixes.

A fix's field is ``True`` (the built-in fix), ``False`` (July 2025's fault) or a
function that takes the built-in's place (the workshop's exercises,
``minispec.lab.exercises.checkers``, plug learners' code in here). The runner turns each
field into one function when it is built (``resolve_fix``), and calls that:

* ``readd_spec_tokens(runner, row, spec_token_ids) -> None`` on every stage for
  each re-added row, right after ``add_request``, with the drafts the scheduler
  sent (possibly none). ``runner`` is the stage's ``GPUModelRunner``, ``self`` in
  vLLM's ``_update_states``: write into ``runner.input_batch``. The fix is the
  runner's own in-batch draft write, ``GPUModelRunner._write_spec_tokens``; the
  fault is ``skip_spec_tokens``.
* ``sync_accepted_tokens(state, num_computed_tokens, new_token_ids) -> list[int]``
  on non-last stages when the scheduler's ``num_computed_tokens`` plus the relayed
  ``new_token_ids`` run past the stage's ``state.num_tokens``; it returns the
  tokens to append to ``state.output_token_ids``. The fix is
  ``take_accepted_drafts``, the fault ``slice_relayed_tokens``.
* ``move_row(batch, src, tgt) -> None``, called by ``InputBatch.condense`` for each
  row it moves down.
* ``apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
  -> None``: Model Runner V2's plug point, the one field that design reads (V1 ignores it).
  A non-last stage calls it for each batch's broadcast it applies, to update its
  ``RequestState`` slots; ``None`` is the runner's own, ``GPUModelRunner._apply_broadcast`` in ``gpu/model_runner.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from minispec.v1.worker.gpu_input_batch import CachedRequestState


class Preset(StrEnum):
    """A ``StrEnum``, so each preset compares equal to its name and prints as it; its
    repr is the name's too, so lists of presets (argparse's choices, error messages,
    notebook outputs) read as they did when presets were plain strings."""

    VLLM_0_9_2 = "vllm-0.9.2"
    VLLM_0_14 = "vllm-0.14"
    ALL = "all"

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class RunnerFixes:
    readd_spec_tokens: bool | Callable = True
    sync_accepted_tokens: bool | Callable = True
    move_row: Callable | None = None
    apply_broadcast: Callable | None = None  # Model Runner V2 only (minispec/v1/worker/gpu/)


PRESETS = {
    Preset.VLLM_0_9_2: RunnerFixes(readd_spec_tokens=False, sync_accepted_tokens=False),
    Preset.VLLM_0_14: RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=False),
    Preset.ALL: RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=True),
}


def resolve_fixes(fixes: Preset | str | RunnerFixes) -> RunnerFixes:
    if isinstance(fixes, RunnerFixes):
        return fixes
    if fixes not in PRESETS:
        raise ValueError(f"fixes={fixes!r}: expected one of {sorted(map(str, PRESETS))} or a RunnerFixes")
    return PRESETS[fixes]


def resolve_fix(choice: bool | Callable, fix: Callable, fault: Callable) -> Callable:
    """The one function a runner calls for a fix: a learner's, the built-in fix or the fault."""
    if callable(choice):
        return choice
    return fix if choice else fault


def skip_spec_tokens(runner, row: int, spec_token_ids: list[int]) -> None:
    """Fault 1 (v0.9.2): a re-added row gets no drafts; its draft slots keep what they held."""


def slice_relayed_tokens(state: CachedRequestState, num_computed_tokens: int, new_token_ids: list[int]) -> list[int]:
    """Fault 2 (v0.9.2, still 0.14.0): a slice of the relayed tokens that is silently
    shorter than what is missing when drafts were accepted."""
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
