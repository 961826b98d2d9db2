"""The 2026 fault presets' switches, as the runners resolve them (vLLM 0.30.0:
``vllm/v1/worker/gpu/pp_utils.py``, the file most of them switch; minispec's own idea:
vLLM ships each fix, never a switch).

``FaultPreset`` names each preset and the design it belongs to; ``resolve_faults`` checks
``EngineArgs.faults`` against ``model_runner``; a runner turns each switch into one
function when it is built (``pick``), as V1's runner resolves ``RunnerFixes``; the
functions below are the faults (each fix is the runner's own code). What each preset
reproduces, where it is documented, and where it bites: ``minispec/lab/faults/catalogue.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import numpy as np


class FaultPreset(StrEnum):
    """Each compares equal to its name and prints (and reprs) as it, as ``Preset`` does."""

    V2_STALE_DRAFTS = "v2-stale-drafts"
    V2_OPTIMISTIC_NUM_COMPUTED = "v2-optimistic-num-computed"
    V2_SLOT_REUSE = "v2-slot-reuse"
    V2_BROADCAST_WIDTH = "v2-broadcast-width"

    def __repr__(self) -> str:
        return repr(self.value)

    @property
    def design(self) -> str:
        """The runner it belongs to: every 2026 preset is Model Runner V2's."""
        return "v2"


LEFT_OUT = {
    "v1-num-tokens-no-spec": (
        "vLLM PR #41133 (merged; review 2026-04-30) moved the write offset of a non-last rank's relayed tokens "
        "from num_computed_tokens (0.17.0 vllm/v1/worker/gpu_model_runner.py 1153-1160) to num_tokens_no_spec "
        "(0.30.0 1496-1518, whose comment names the two cases where they differ: a chunked prefill, and async "
        "scheduling under PP, which relays no new_token_ids). minispec's V1 runner writes at num_computed_tokens, "
        "as 0.17.0 did (gpu_model_runner.py, _update_cached_request), and loses nothing by it: it has no async "
        "scheduling, a prefill chunk's prompt stays in its row, and after a verify step the positions between the "
        "two offsets hold the drafts the row was given and the scheduler accepted. Every hypothesis schedule of "
        "tests/test_properties.py (chunked prefill and preemption included) runs clean under fixes='all' with "
        "that offset, so no scenario bites; it is not a preset (from reading the code)."
    ),
}


def resolve_faults(faults: FaultPreset | str | None, model_runner: str) -> FaultPreset | None:
    if faults is None:
        return None
    if not isinstance(faults, str):
        raise ValueError(f"faults={faults!r}: expected None or a preset's name, one of {sorted(map(str, FaultPreset))}")
    if faults in LEFT_OUT:
        raise ValueError(f"faults={faults!r} is not a preset: {LEFT_OUT[faults]}")
    if faults not in set(FaultPreset):
        raise ValueError(f"faults={faults!r}: expected None or one of {sorted(map(str, FaultPreset))}")
    preset = FaultPreset(faults)
    design = preset.design
    if design != model_runner:
        raise ValueError(f"faults={str(preset)!r} is a fault of Model Runner {design.upper()}: expected "
                         f"model_runner={design!r} with it, got model_runner={model_runner!r}")
    return preset


def pick(faults: FaultPreset | None, preset: FaultPreset, fix: Callable, fault: Callable) -> Callable:
    """The one function a runner calls for a switch: the fault if ``faults`` is this preset, else the fix."""
    return fault if faults == preset else fix


# -- the faults (each fix is the runner's own code: model_runner.py, pp_utils.py) ----------
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
