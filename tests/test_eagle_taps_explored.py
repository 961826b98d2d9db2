"""The explorer reaches EAGLE-3's taps (issue 37, deliverable 4): the stand-in model captures the
streams entering its tap layers and hands them over as the real model does (``EagleModelMixin``),
the scripted proposer reads them (``eagle_aux_hidden_state_layer_ids``), so ``explore`` finds
``v2-eagle3-taps-dropped`` (SGLang PR #39644) as a minimal counterexample by invariant 9, and runs
the designs that carry taps clean over the same scope."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from minispec.config import LlamaArchitecture
from minispec.instruments.invariants import Invariant
from minispec.lab.explorer.coverage import Condition, Kind
from minispec.lab.explorer.explorer import STANDIN, TAPS, Scope, Shape, _schedule, explore, run_covered
from minispec.model_executor.models.standin import StandInForCausalLM, layer_inputs

FAULT = {"model_runner": "v2", "faults": "v2-eagle3-taps-dropped"}
# two requests, arrivals 0 and 1, no draft or every draft right, two and three stages, sync and async
READING = Scope(max_requests=2, prompt_lengths=(2, 5), max_tokens=(2, 8), arrival_steps=(0, 1), right_drafts=(0, 3),
                pipeline_parallel_size=(2, 3), max_num_seqs=(4,), async_scheduling=(False, True),
                eagle_aux_hidden_state_layer_ids=TAPS)


def test_the_dropped_taps_are_found_at_the_first_schedule():
    result = explore(FAULT, READING)
    v = result.counterexample.failure.violation
    assert (result.schedules_run, v.invariant, v.step, v.stage, v.req_id) == (1, Invariant.HIDDEN_STATE_HANDOVER, 0, 1, "A")
    assert "tap 1 as stage 0 computed it" in v.expected  # stage 0's tap, zeros on arrival
    schedule = result.counterexample.schedule
    assert (len(schedule.requests), schedule.pipeline_parallel_size, schedule.max_tokens) == (1, 2, 2)


def test_one_stage_masks_the_fault():
    """At PP 1 the last stage owns every tap: nothing is dropped (and the explorer says it cannot reach the preset)."""
    with pytest.warns(UserWarning, match=r"2 stages, more than the scope's pipeline_parallel_size=\(1,\)"):
        result = explore(FAULT, Scope(max_requests=1, pipeline_parallel_size=(1,),
                                      eagle_aux_hidden_state_layer_ids=TAPS))
    assert result.counterexample is None and result.exhausted


@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_the_designs_that_carry_taps_run_clean(runner):
    result = explore({"model_runner": runner}, READING)
    assert result.counterexample is None and result.exhausted and result.schedules_run == 240
    assert Condition(Kind.REMOTE_TAPS) in result.covered


def test_the_proposer_reads_the_taps():
    """Every draft right by the script, yet none accepted once the taps it is handed are zeros:
    the drafts depend on the taps (output stays right, as the target verifies every draft)."""
    engine = Shape(2, 3, None, None, 512, 4)
    schedule = _schedule([(0, 5, (3,))], 8, engine, 4, "scripted", TAPS)
    _, clean = run_covered(schedule, {"model_runner": "v2"})
    found, faulty = run_covered(replace(schedule, check_invariants=False), FAULT)
    assert Condition(Kind.ACCEPTED, 3) in clean and Condition(Kind.ACCEPTED, 3) not in faulty
    assert found is None  # the same output


@pytest.mark.parametrize("pp", [1, 2, 4])
def test_the_stand_in_hands_over_each_tap_as_computed_on_a_token_list(pp):
    """The last stage returns taps 1, 2, 3 in layer order, each the stream ``layer_inputs`` gives,
    whichever stage computed it (a fake paged cache: one block per token)."""
    from minispec.attention import make_attention_metadata
    from minispec.v1.worker.utils import bind_kv_cache

    arch, tokens = LlamaArchitecture.from_pretrained(STANDIN), [5, 17, 3, 99]
    stages = [StandInForCausalLM(arch, rank, pp) for rank in range(pp)]
    positions, meta = make_attention_metadata([0], [len(tokens)], np.array([[0, 1, 2, 3]]), 1, "cpu")
    passed = None
    for stage in stages:
        stage.model.set_aux_hidden_state_layers(TAPS)
        bind_kv_cache(stage, 4, 1, torch.float32, "cpu")
        passed = stage(torch.tensor(tokens), positions, meta, passed)
    hidden, taps = passed
    for place in range(len(tokens)):
        want = layer_inputs(tokens[: place + 1], arch)
        assert [int(t[place, 0]) for t in taps] == [want[i] for i in TAPS]
        assert int(hidden[place, 0]) == want[-1]


def test_a_scope_reading_taps_is_checked():
    with pytest.raises(ValueError, match=r"eagle_aux_hidden_state_layer_ids=\(5,\): expected .* 0 to 4"):
        Scope(eagle_aux_hidden_state_layer_ids=(5,))
    with pytest.raises(ValueError, match=r"expected \(\) with method='ngram'"):
        Scope(method="ngram", eagle_aux_hidden_state_layer_ids=TAPS)
    with pytest.raises(ValueError, match=r"model_runner='relay'.*SGLang PR #39644"):
        explore({"model_runner": "relay"}, READING)  # refused before any run, with the design's reason


def test_a_scope_without_taps_warns_that_it_cannot_reach_the_preset():
    with pytest.warns(UserWarning, match="never reads"):
        result = explore(FAULT, Scope(max_requests=1), limit=2)
    assert result.counterexample is None
    assert result.never_exercised[Condition(Kind.REMOTE_TAPS)] == ("the scope's drafter reads no tap that a stage "
                                                                    "before the last owns")


def test_the_engine_takes_taps_for_the_scripted_proposer_only():
    from minispec.config import SpeculativeConfig

    with pytest.raises(ValueError, match=r"eagle_aux_hidden_state_layer_ids.*none unless method is 'scripted'"):
        SpeculativeConfig.from_dict({"method": "eagle3", "num_speculative_tokens": 3,
                                     "eagle_aux_hidden_state_layer_ids": [1]})
