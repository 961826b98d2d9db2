"""Model Runner V2's switches: its 2026 faults, their presets, and the workshop's plug
point in V2's runner (vLLM 0.30.0: ``vllm/v1/worker/gpu/pp_utils.py``, the file most of
them switch; minispec's own idea: vLLM ships each fix, never a switch). Every switch
here belongs to ``ModelRunner.V2``; what a switch is: ``minispec.v1.worker.switches``.

Each is resolved once when the runner is built; the fix is the runner's own code, the
fault is below: ``APPLY_DRAFTS``, ``NUM_REJECTED_ON_APPLY``, ``LIVE_ROWS``,
``SAMPLE_WIDTH``, ``POST_DRAFTS`` and, with an EAGLE-3 head, ``CAPTURES_TAPS``.
``APPLY_BROADCAST`` is notebook 08's last exercise, a non-last stage's whole
post-processing of one batch's broadcast, ``apply_broadcast(states, slots,
sampled_tokens, num_sampled, num_rejected, draft_tokens)``; it replaces ``apply_drafts``
and ``num_rejected_on_apply`` (``Switch.within``). Where each preset bites: ``FAULTS``
in ``minispec/lab/faults/catalogue.py``. Fidelity to vLLM:
``docs/fidelity/model_runner_v2.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minispec.v1.worker.switches import ModelRunner, Switch, SwitchPreset, SwitchSettings


def keep_stale_drafts(states, sampled) -> None:
    """v2-stale-drafts: the broadcast's drafts are dropped; the slots keep what they held."""


def ignore_rejected(sampled) -> np.ndarray:
    """v2-optimistic-num-computed: nothing is taken back from the optimistic advance."""
    return np.zeros_like(sampled.num_rejected)


def every_row_live(gen_now: np.ndarray, gen_at_receive: np.ndarray) -> np.ndarray:
    """v2-slot-reuse: every row is applied, whoever holds its slot now."""
    return np.ones(len(gen_now), dtype=bool)


def natural_width(batch, max_sample_len: int) -> int:
    """v2-broadcast-width: 1 for a batch without drafts (the plain sampler's), else k + 1."""
    return max_sample_len if batch.num_draft_tokens_per_req.any() else 1


def post_drafts_twice(pp_handler, batch, draft_tokens: np.ndarray) -> None:
    """v2-drafts-posted-twice: a second call site on the last stage posts the drafts again;
    no stage posted a receive for the second copy, so it waits for the next batch's first."""
    pp_handler.broadcast_drafts(batch, draft_tokens)
    pp_handler.broadcast_drafts(batch, draft_tokens)


def capture_on_last_rank_only(is_last_rank: bool) -> bool:
    """v2-eagle3-taps-dropped: only the last stage fills its EAGLE-3 taps' slots; the others' travel as zeros."""
    return is_last_rank


APPLY_BROADCAST = Switch("apply_broadcast", ModelRunner.V2)
APPLY_DRAFTS = Switch("apply_drafts", ModelRunner.V2, keep_stale_drafts, within=APPLY_BROADCAST)
NUM_REJECTED_ON_APPLY = Switch("num_rejected_on_apply", ModelRunner.V2, ignore_rejected, within=APPLY_BROADCAST)
LIVE_ROWS = Switch("live_rows", ModelRunner.V2, every_row_live)
SAMPLE_WIDTH = Switch("sample_width", ModelRunner.V2, natural_width)
POST_DRAFTS = Switch("post_drafts", ModelRunner.V2, post_drafts_twice)
CAPTURES_TAPS = Switch("captures_taps", ModelRunner.V2, capture_on_last_rank_only)


class FaultPreset(SwitchPreset):
    """The ``faults=`` presets: one 2026 fault of Model Runner V2 each."""

    V2_STALE_DRAFTS = "v2-stale-drafts", (APPLY_DRAFTS,)
    V2_OPTIMISTIC_NUM_COMPUTED = "v2-optimistic-num-computed", (NUM_REJECTED_ON_APPLY,)
    V2_SLOT_REUSE = "v2-slot-reuse", (LIVE_ROWS,)
    V2_BROADCAST_WIDTH = "v2-broadcast-width", (SAMPLE_WIDTH,)
    V2_DRAFTS_POSTED_TWICE = "v2-drafts-posted-twice", (POST_DRAFTS,)


class BeyondTokensFaultPreset(SwitchPreset):
    """The ``faults=`` presets of state that is not tokens (issue 37): kept apart from ``FaultPreset``,
    so that what iterates the token faults (notebook 09) is unchanged."""

    V2_EAGLE3_TAPS_DROPPED = "v2-eagle3-taps-dropped", (CAPTURES_TAPS,)


@dataclass(frozen=True, repr=False)
class RunnerFixes(SwitchSettings):
    """A learner's setting of Model Runner V2's plug point (``fixes=RunnerFixes(...)``)."""

    SWITCHES = (APPLY_BROADCAST,)

    apply_broadcast: Callable | None = None
