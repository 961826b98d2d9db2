"""The two runner faults of July 2025 as switches, and their presets. vLLM ships one
behaviour per release; these switch between the releases of ``vllm/v1/worker/gpu_model_runner.py``
(0.9.2, 0.14.0). They live beside the runner, not in ``instruments/``, because they change what it does.

* ``readd_spec_tokens`` (fix 1, vLLM v0.14.0, PR #31944): when a cached request is
  re-added to the persistent batch, write its scheduled draft tokens into its row,
  as the in-batch path does.
* ``sync_accepted_tokens`` (fix 2): under pipeline parallelism the scheduler sends
  a non-last stage only the last token emitted (the bonus token, or the recovered
  token after a rejection); the drafts accepted last step never reach it. With the
  fix, the stage takes the accepted ones from the drafts it was given last step,
  so its token history stays complete.

The presets: ``"vllm-0.9.2"`` has both faults. ``"vllm-0.14"`` is v0.9.2's
scheduler and engine plus fix 1: the runner's re-add and relay logic matches
0.14.0, but real 0.14.0 also clears a request's drafts at schedule time, hands
new drafts to the scheduler through ``take_draft_token_ids`` rather than in
``ModelRunnerOutput``, and marks resumed requests differently (a
``resumed_req_ids`` set, plus the full ``all_token_ids`` of any request not
scheduled the step before). ``"all"`` has both fixes.

Each field also takes a function, which then replaces the built-in fix (the
workshop's exercises, ``minispec.lab.exercises``, plug learners' code in here):

* ``readd_spec_tokens(runner, row, spec_token_ids) -> None`` is called on every
  stage for each re-added row, right after ``add_request``, with the drafts the
  scheduler sent (possibly none). ``runner`` is the stage's ``GPUModelRunner``,
  ``self`` in vLLM's ``_update_states``: write into ``runner.input_batch``.
* ``sync_accepted_tokens(state, num_computed_tokens, new_token_ids) -> list[int]``
  is called on non-last stages when the scheduler's ``num_computed_tokens`` plus
  the relayed ``new_token_ids`` run past the stage's ``state.num_tokens``; it
  returns the tokens to append to ``state.output_token_ids``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RunnerFixes:
    readd_spec_tokens: bool | Callable = True
    sync_accepted_tokens: bool | Callable = True


PRESETS = {
    "vllm-0.9.2": RunnerFixes(readd_spec_tokens=False, sync_accepted_tokens=False),
    "vllm-0.14": RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=False),
    "all": RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=True),
}


def resolve_fixes(fixes: str | RunnerFixes) -> RunnerFixes:
    if isinstance(fixes, RunnerFixes):
        return fixes
    if fixes not in PRESETS:
        raise ValueError(f"fixes={fixes!r}: expected one of {sorted(PRESETS)} or a RunnerFixes")
    return PRESETS[fixes]
