"""Reference solutions to the workshop's exercises (``notebooks/08_exercises.ipynb``).

The notebook never imports this module. A learner who is stuck loads one
solution on purpose, with ``minispec.lab.exercises.show_solution(name)``, which
prints its source. The checker plugs these in for the empty exercise cells only
when ``MINISPEC_PLUG_SOLUTIONS=1`` (how the test suite executes the notebook).
"""

from __future__ import annotations

import torch

__all__ = ["draft_slots", "acceptance", "fault2", "condense", "write_spec_tokens", "take_relayed_tokens",
           "recovered_distribution", "move_row_dropping_drafts", "apply_broadcast"]

# Predict, then reveal: A's three draft slots on stage 0 at batch_0's first
# decode (step 2) under "vllm-0.9.2", and the acceptance rate under each preset.
draft_slots = "tem"
acceptance = {"vllm-0.9.2": 0.02, "vllm-0.14": 0.05, "all": 0.49}

# Find fault 2: the first invariant "vllm-0.14" breaks on the thread scenario.
fault2 = {"invariant": 3, "step": 4, "stage": 0, "request": "A"}

# Bonus: the first invariant a condense that drops the drafts breaks.
condense = {"invariant": 2, "step": 15, "stage": 0, "request": "C"}


def write_spec_tokens(runner, row: int, spec_token_ids: list[int]) -> None:
    """Fix 1: what the in-batch path does, for a row ``add_request`` just rebuilt."""
    batch = runner.input_batch
    start = batch.num_tokens_no_spec[row]
    batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = spec_token_ids
    batch.num_tokens[row] = start + len(spec_token_ids)


def take_relayed_tokens(state, num_computed_tokens: int, new_token_ids: list[int]) -> list[int]:
    """Fix 2: the stage is behind the scheduler by the drafts accepted last step
    (a prefix of the drafts it was given), then the relayed token(s)."""
    behind = num_computed_tokens + len(new_token_ids) - state.num_tokens
    accepted = behind - len(new_token_ids)
    return state.spec_token_ids[: max(accepted, 0)] + new_token_ids[-behind:]


def recovered_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """After a rejection: the part of the target the draft did not cover."""
    residual = (p - q).clamp_min(0)
    return residual / residual.sum()


def move_row_dropping_drafts(batch, src: int, tgt: int) -> None:
    """Bonus: condense's row move, copying only the history (not the drafts)."""
    batch._req_ids[tgt], batch._req_ids[src] = batch._req_ids[src], None
    batch.req_id_to_index[batch._req_ids[tgt]] = tgt
    n = batch.num_tokens_no_spec[src]
    batch.token_ids_cpu[tgt, :n] = batch.token_ids_cpu[src, :n]
    for array in (batch.num_tokens, batch.num_tokens_no_spec, batch.num_prompt_tokens, batch.num_computed_tokens_cpu):
        array[tgt] = array[src]
    batch.block_table.move_row(src, tgt)


def apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens) -> None:
    """Model Runner V2, a non-last stage: what the last stage decided for each row's slot."""
    for i, slot in enumerate(slots):
        if slot < 0:
            continue  # its request left the slot since, or it sampled nothing
        n, end = num_sampled[i], states.total_len[slot]
        states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]
        states.total_len[slot] = end + n
        states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
        states.num_computed_tokens[slot] -= num_rejected[i]  # it counted every draft at its forward
        states.draft_tokens[slot] = draft_tokens[i]
