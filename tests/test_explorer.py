"""The stand-in model reads its context through the paged KV cache, and the explorer finds
the July-2025 fault's minimal counterexample and nothing in a fixed design, in minispec's
designs and in one handed in from outside (``worker_cls``)."""

import dataclasses

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.attention import allocate_kv_cache, make_attention_metadata
from minispec.config import LlamaArchitecture
from minispec.instruments.invariants import Invariant, InvariantViolation, check_trace
from minispec.lab.experiments.schedule import run_schedule
from minispec.lab.explorer.explorer import DEFAULT, STANDIN, Scope, explore, schedules
from minispec.lab.viz.exploration import render_counterexample, render_exploration
from minispec.lab.viz.stepper import schedule_runs, stepper_view
from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.standin import StandInForCausalLM, greedy_continuation
from minispec.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2
from minispec.v1.worker.gpu_model_runner import GPUModelRunner
from minispec.v1.worker.worker_base import WorkerBase

ARCH = LlamaArchitecture.from_pretrained(STANDIN)
BLOCK = 4
PROMPT = [5, 17, 33, 8, 61, 2]


def _standin() -> StandInForCausalLM:
    model = get_model(STANDIN, arch=ARCH)
    for layer in model.attention_layers:
        layer.kv_cache = allocate_kv_cache(8, BLOCK, 1, 2, torch.float32, "cpu")
    return model


def _forward(model, ids, start, blocks, positions=None):
    """Run ``ids`` after ``start`` cached tokens; the predicted next token."""
    pos, meta = make_attention_metadata([start], [len(ids)], [blocks], BLOCK)
    hidden = model(torch.tensor(ids), pos if positions is None else torch.tensor(positions), meta)
    return int(model.compute_logits(hidden[-1:]).argmax())


def _decode_after_prefill(corrupt=None, positions=None, blocks=(3, 5)):
    """Prefill PROMPT[:-1] into blocks 3 and 5, optionally corrupt the cache, then decode
    PROMPT[-1]: what the model predicts after PROMPT."""
    model = _standin()
    _forward(model, PROMPT[:-1], 0, [3, 5])
    if corrupt is not None:
        corrupt(model)
    return _forward(model, PROMPT[-1:], len(PROMPT) - 1, list(blocks), positions)


def test_standin_is_built_from_its_config_and_matches_its_own_reference():
    model = _standin()
    assert isinstance(model, StandInForCausalLM) and len(model.attention_layers) == ARCH.num_hidden_layers
    assert _decode_after_prefill() == greedy_continuation(PROMPT, 1, ARCH)[0]


def _stale_slot(model):
    """What a stale draft slot does: the cache entry at position 2 holds another token's value."""
    first = model.attention_layers[0].kv_cache
    first[0, 3, 2, 0, 0] = 99.0


def test_standin_reads_its_context_back_through_the_kv_cache():
    right = _decode_after_prefill()
    assert _decode_after_prefill(corrupt=_stale_slot) != right  # a stale slot
    assert _decode_after_prefill(positions=[len(PROMPT)]) != right  # a wrong position
    assert _decode_after_prefill(blocks=(3, 6)) != right  # a wrong block


def test_standin_engine_equals_its_reference_for_both_designs_at_pp_1_to_4():
    prompts, params = ["A list is ", "Strings are "], SamplingParams(temperature=0, max_tokens=6)
    for model_runner in ("v1", "v2"):
        for pp, k in ((1, 0), (2, 3), (4, 2)):
            spec = {"method": "scripted", "num_speculative_tokens": k, "script": {"0": (0, 1)}} if k else None
            llm = LLM(STANDIN, pipeline_parallel_size=pp, speculative_config=spec, model_runner=model_runner,
                      block_size=4)
            for out in llm.generate(prompts, params):
                assert out.outputs[0].token_ids == greedy_continuation(out.prompt_token_ids, 6, ARCH)


def test_scripted_drafts_are_accepted_as_scripted():
    spec = {"method": "scripted", "num_speculative_tokens": 3, "script": {"A": (0, 2, 3)}}
    llm = LLM(STANDIN, speculative_config=spec, block_size=4, record=True)
    llm.add_request("A list is ", SamplingParams(temperature=0, max_tokens=12), request_id="A")
    llm.engine.run()
    accepted = [s.num_accepted["A"] for s in llm.trace.steps if s.schedule.scheduled_spec_decode_tokens]
    assert accepted == [0, 2, 3] + [3] * (len(accepted) - 3)  # then k right, past the script's end


def test_bad_explorer_input_is_refused_by_name():
    with pytest.raises(ValueError, match="max_requests=0"):
        Scope(max_requests=0)
    with pytest.raises(ValueError, match="right_drafts"):
        Scope(right_drafts=(4,))
    with pytest.raises(ValueError, match="engine_args"):
        explore({"pipeline_parallel_size": 3})
    with pytest.raises(ValueError, match="'scripted'"):
        LLM(speculative_config={"method": "scripted", "num_speculative_tokens": 2})
    with pytest.raises(ValueError, match="script"):
        LLM(STANDIN, speculative_config={"method": "ngram", "num_speculative_tokens": 2, "script": {"0": (1,)}})


def test_schedules_come_smallest_first_and_once_each():
    scope = Scope(max_requests=2)
    found = list(schedules(scope))
    # the plain engine (4 rows) first, then the one-row engine; requests first within each
    sizes = [(s.max_num_seqs != 4, len(s.requests)) for s in found]
    assert sizes == sorted(sizes) and len(set(found)) == len(found)
    assert all(s.requests[0].arrival_step == 0 for s in found)


def test_explorer_finds_the_july_2025_fault_and_its_minimal_counterexample():
    result = explore({"fixes": "vllm-0.9.2"})
    found = result.counterexample
    # the smallest: two requests of two prompt tokens, B one step after A; A's first decode
    # lands in the row B just used, and its draft slots hold what B left there
    assert [(r.req_id, len(r.prompt), r.arrival_step) for r in found.schedule.requests] == [("A", 2, 0), ("B", 2, 1)]
    v = found.failure.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.DRAFT_AGREEMENT, 2, 0, "A")
    assert "STALE (row held B before)" in render_counterexample(found)
    # what ran clean before it: one request alone, or all arriving at step 0 (one batch takes
    # them all, so nothing alternates and no row changes hands)
    before = list(schedules(DEFAULT))[: result.schedules_run - 1]
    assert before and all(len(s.requests) == 1 or set(s.arrival_steps) == {0} for s in before)
    with pytest.raises(InvariantViolation, match="draft agreement"):
        run_schedule(found.schedule, fixes="vllm-0.9.2")
    # it opens in the stepper, under its preset and under every fix (notebook 06)
    runs = schedule_runs(found.schedule, {preset: {"fixes": preset} for preset in ("vllm-0.9.2", "all")})
    view = stepper_view(runs, "vllm-0.9.2", 2, 0)
    assert view.label.startswith("vllm-0.9.2 · step 2 · stage 0") and "invariant 2 (draft agreement)" in view.text
    assert check_trace(runs["all"].trace) == [] and runs["all"].trace.outputs == runs["vllm-0.9.2"].trace.outputs


def test_a_fixed_design_is_clean_within_a_small_scope():
    scope = Scope(max_requests=2, max_tokens=(3,), arrival_steps=(0, 1))
    for design in ({"fixes": "all"}, {"model_runner": "v2"}):
        result = explore(design, scope)
        assert result.counterexample is None and result.exhausted
        assert result.schedules_run == sum(1 for _ in schedules(scope))
        assert "nothing breaks" in render_exploration(result)


def test_explore_command_prints_the_minimal_counterexample(capsys):
    from minispec.entrypoints.cli.main import main

    main(["explore", "--fixes", "vllm-0.9.2"])
    out = capsys.readouterr().out
    assert "minimal counterexample" in out and "A: 2 tokens at step 0" in out and "B: 2 tokens at step 1" in out
    main(["explore", "--worker-cls", f"{__name__}.DraftsOnLastStageOnly", "--max-requests", "1"])
    out = capsys.readouterr().out
    assert "DraftsOnLastStageOnly'" in out and "minimal counterexample, schedule 1 " in out
    with pytest.raises(ValueError, match="workers=0"):
        explore({}, workers=0)


@pytest.mark.slow
def test_search_shrinks_a_random_failure_to_a_small_one():
    from minispec.lab.explorer.explorer import search

    result = search({"fixes": "vllm-0.9.2"}, max_examples=30)
    found = result.counterexample
    assert found is not None and found.failure.violation is not None
    assert len(found.schedule.requests) <= 3 and found.schedule.requests[0].arrival_step == 0
    assert search({"fixes": "all"}, max_examples=10).counterexample is None


class OutsideRunner(WorkerBase):
    """A runner design from outside minispec, written against the runner contract alone: it
    wraps V1's runner and hands each stage's work to it."""

    drafts_reach_every_stage = True

    def __init__(self, vllm_config, rank, device, recorder=None):
        super().__init__(vllm_config, rank, device, recorder)
        self.inner = GPUModelRunner(vllm_config, rank, device, recorder)

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        if not (self.drafts_reach_every_stage or self.is_last_rank):
            scheduler_output = dataclasses.replace(scheduler_output, scheduled_spec_decode_tokens={})
        return self.inner.execute_model(scheduler_output, intermediate_tensors)

    def drop_all_requests(self):
        self.inner.drop_all_requests()

    def bind_pp_group(self, group):
        self.inner.bind_pp_group(group)

    def describe_rows(self, scheduler_output, inputs):
        return self.inner.describe_rows(scheduler_output, inputs)


class DraftsOnLastStageOnly(OutsideRunner):
    """The slip: only the last stage is handed the drafts, so every other stage embeds
    whatever its draft slots held (V2's 2026 fault ``v2-stale-drafts``, in a wrapper)."""

    drafts_reach_every_stage = False


def test_a_runner_from_outside_minispec_is_explored_through_the_contract():
    result = explore({"worker_cls": DraftsOnLastStageOnly})
    found = result.counterexample
    # the smallest: one request; its first decode's drafts never reach stage 0, which gathers
    # three empty slots past the history it holds
    assert [(r.req_id, len(r.prompt), r.arrival_step) for r in found.schedule.requests] == [("A", 2, 0)]
    v = found.failure.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.TOKEN_HISTORY, 2, 0, "A")
    assert "worker_cls=DraftsOnLastStageOnly: minimal counterexample, schedule 1" in render_exploration(result)
    assert "draft slots=[] scheduled=[" in render_counterexample(found)
    with pytest.raises(InvariantViolation, match="token history"):
        run_schedule(found.schedule, worker_cls=DraftsOnLastStageOnly)
    fixed = explore({"worker_cls": OutsideRunner}, Scope(max_requests=2, max_tokens=(3,), arrival_steps=(0, 1)))
    assert fixed.counterexample is None and fixed.exhausted and "nothing breaks" in render_exploration(fixed)


class Unfinished(WorkerBase):
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        return None


def test_a_class_that_does_not_implement_the_contract_is_refused_by_name():
    with pytest.raises(ValueError, match="worker_cls=Unfinished: does not implement bind_pp_group, describe_rows"):
        explore({"worker_cls": Unfinished})
    with pytest.raises(ValueError, match="worker_cls=<class 'int'>: expected a WorkerBase subclass"):
        LLM(STANDIN, worker_cls=int)
    with pytest.raises(ValueError, match="worker_cls='no_such_module.Runner': cannot import it"):
        LLM(STANDIN, worker_cls="no_such_module.Runner")
    with pytest.raises(ValueError, match="expected model_runner='v2'"):
        LLM(STANDIN, worker_cls=GPUModelRunnerV2)
    # by its qualified name, as vLLM's worker_cls, from the command line too
    assert LLM(STANDIN, worker_cls=f"{__name__}.OutsideRunner").config.parallel_config.worker_cls is OutsideRunner
