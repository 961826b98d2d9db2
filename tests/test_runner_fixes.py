"""The fault switches: presets by name, and each side of each fix as a function,
on a hand-worked request."""

import pytest

from minispec.sampling_params import SamplingParams
from minispec.v1.worker.gpu_input_batch import CachedRequestState
from minispec.v1.worker.runner_fixes import (
    READD_SPEC_TOKENS,
    SYNC_ACCEPTED_TOKENS,
    Preset,
    RunnerFixes,
    skip_spec_tokens,
    slice_relayed_tokens,
    take_accepted_drafts,
)


def test_presets_in_order_and_by_plain_name():
    assert list(Preset) == ["vllm-0.9.2", "vllm-0.14", "all"] and Preset("vllm-0.14") is Preset.VLLM_0_14
    assert f"{Preset.ALL}" == "all" and repr(list(Preset)) == "['vllm-0.9.2', 'vllm-0.14', 'all']"
    # each puts back the faults of the vLLM it is named after; "all" none
    assert Preset.VLLM_0_9_2.settings() == {READD_SPEC_TOKENS: skip_spec_tokens,
                                            SYNC_ACCEPTED_TOKENS: slice_relayed_tokens}
    assert Preset.VLLM_0_14.settings() == {SYNC_ACCEPTED_TOKENS: slice_relayed_tokens}
    assert Preset.ALL.settings() == {}
    assert RunnerFixes(readd_spec_tokens=False).settings() == {READD_SPEC_TOKENS: skip_spec_tokens}


def stage0_request():
    """Prompt 1 2 3, output 4; last step the stage was given drafts 7 8 9 and the last
    stage accepted 7 and 8, then emitted 10. The scheduler relays only [10]."""
    state = CachedRequestState("A", [1, 2, 3], SamplingParams(), None, [0], 4, [4])
    state.spec_token_ids = [7, 8, 9]
    return state


def test_the_fault_and_the_fix_for_relayed_tokens():
    state = stage0_request()
    num_computed = 6  # 4 tokens, then 7 and 8 accepted
    assert slice_relayed_tokens(state, num_computed, [10]) == [10]  # v0.9.2: 7 and 8 are lost
    assert take_accepted_drafts(state, num_computed, [10]) == [7, 8, 10]
    # nothing accepted: both take the relayed token
    assert slice_relayed_tokens(state, 4, [10]) == take_accepted_drafts(state, 4, [10]) == [10]
    with pytest.raises(RuntimeError, match=r"request A: 4 relayed tokens missing but only 3 drafts held"):
        take_accepted_drafts(state, 8, [10])
