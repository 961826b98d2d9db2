"""Construction the vLLM way: ``LLM(model, **kwargs)`` -> ``EngineArgs`` ->
``create_engine_config()`` -> ``VllmConfig`` -> one ``GPUModelRunner(vllm_config, rank,
device)`` per stage, which picks its own drafter and resolves each fix to one function."""

from collections import Counter

import pytest
import torch

import minispec.config
from minispec import LLM
from minispec.config import DEFAULT_DRAFT, DEFAULT_TARGET, VllmConfig
from minispec.engine.arg_utils import EngineArgs
from minispec.v1.spec_decode.draft_model import DraftModelProposer
from minispec.v1.spec_decode.ngram_proposer import NgramProposer
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.gpu_model_runner import GPUModelRunner
from minispec.v1.worker.runner_fixes import (
    SYNC_ACCEPTED_TOKENS,
    Preset,
    RunnerFixes,
    skip_spec_tokens,
    slice_relayed_tokens,
    take_accepted_drafts,
)
from minispec.v1.worker.switches import EVERY_FIX

DRAFT = {"method": "draft_model", "num_speculative_tokens": 2}


def test_engine_args_give_the_config_llm_is_built_from():
    config = EngineArgs(pipeline_parallel_size=2, speculative_config=DRAFT, max_model_len=64,
                        dtype="float32").create_engine_config()
    assert isinstance(config, VllmConfig)
    # one source, as in vLLM 0.30.0: the config's property, one batch per stage unless set
    assert config.max_concurrent_batches == 2 and config.parallel_config.max_concurrent_batches is None
    assert config.cache_config.num_gpu_blocks == 16 * 4  # sized for max_num_seqs full-length requests
    assert config.dtype is torch.float32 and config.switches == EVERY_FIX
    assert config.speculative_config.draft_arch.num_hidden_layers == 1  # the shipped draft
    llm = LLM(pipeline_parallel_size=2, speculative_config=DRAFT, max_model_len=64)
    assert llm.config == config


@pytest.mark.parametrize("model_runner", list(DESIGNS))
@pytest.mark.parametrize("pp", [1, 2, 3])
def test_each_config_json_is_read_once(monkeypatch, model_runner, pp):
    """Once by create_engine_config, whatever the design and the number of stages: every
    stage and the drafter reuse what it read (``load_stage_model``, ``make_drafter``)."""
    reads = Counter()
    read = minispec.config.read_config_json

    def counting(path, param="model"):
        reads[str(path)] += 1
        return read(path, param)

    monkeypatch.setattr(minispec.config, "read_config_json", counting)
    with_model = DESIGNS[model_runner].accepts("draft_model")  # replicated drafting: n-grams, no draft model
    spec = DRAFT if with_model else {"method": "ngram", "num_speculative_tokens": 3}
    llm = LLM(pipeline_parallel_size=pp, speculative_config=spec, max_model_len=64, model_runner=model_runner)
    assert len(llm.engine.executor.runners) == pp and llm.config.model_runner == model_runner
    assert reads == {str(DEFAULT_TARGET): 1} | ({str(DEFAULT_DRAFT): 1} if with_model else {})


def test_bad_arguments_are_refused_by_create_engine_config_with_llm_s_words():
    with pytest.raises(ValueError, match=r"^pipeline_parallel_size=5: expected an integer from 1 to the model's 4"):
        EngineArgs(pipeline_parallel_size=5).create_engine_config()
    with pytest.raises(ValueError, match=r"^distributed_executor_backend='ray': expected 'uni', 'mp' or 'torchrun'"):
        LLM(distributed_executor_backend="ray")
    with pytest.raises(ValueError, match=r"^max_concurrent_batches=0: expected an integer >= 1 or None"):
        LLM(max_concurrent_batches=0)
    with pytest.raises(ValueError, match=r"^record/check_invariants: expected distributed_executor_backend='uni'"):
        LLM(record=True, distributed_executor_backend="mp")
    with pytest.raises(TypeError, match="pipeline_paralel_size"):
        LLM(pipeline_paralel_size=2)


def test_a_preset_labels_the_trace_by_its_name():
    assert LLM(fixes=Preset.VLLM_0_14, record=True, max_model_len=64).trace.fixes == "vllm-0.14"
    assert LLM(fixes="vllm-0.14", max_model_len=64).config.switches.chosen == {SYNC_ACCEPTED_TOKENS: slice_relayed_tokens}


@pytest.mark.parametrize("spec,drafter", [(None, type(None)), ({"method": "ngram", "num_speculative_tokens": 2},
                                                                NgramProposer), (DRAFT, DraftModelProposer)])
def test_the_runner_picks_its_drafter_on_the_last_stage_only(spec, drafter):
    config = EngineArgs(pipeline_parallel_size=2, speculative_config=spec, max_model_len=64).create_engine_config()
    first, last = (GPUModelRunner(config, rank, torch.device("cpu")) for rank in range(2))
    assert first.drafter is None and type(last.drafter) is drafter
    assert last.is_last_rank and not first.is_last_rank and first.pp_size == 2


def test_each_fix_is_resolved_to_one_function():
    def mine(runner, row, spec_token_ids):
        pass

    def runner(fixes):
        return GPUModelRunner(EngineArgs(fixes=fixes, max_model_len=64).create_engine_config(), 0, torch.device("cpu"))

    old, new, learner = runner("vllm-0.9.2"), runner("all"), runner(RunnerFixes(readd_spec_tokens=mine))
    assert (old.readd_spec_tokens, old.sync_accepted_tokens) == (skip_spec_tokens, slice_relayed_tokens)
    assert (new.readd_spec_tokens, new.sync_accepted_tokens) == (GPUModelRunner._write_spec_tokens,
                                                                 take_accepted_drafts)
    assert learner.readd_spec_tokens is mine and learner.sync_accepted_tokens is take_accepted_drafts


def test_a_plugged_move_row_survives_dropping_every_request():
    def move_row(batch, src, tgt):
        pass

    llm = LLM(fixes=RunnerFixes(move_row=move_row), max_model_len=64)
    runner = llm.engine.executor.runners[0]
    assert runner.input_batch.move_row is move_row
    runner.drop_all_requests()
    assert runner.input_batch.move_row is move_row


def test_llm_s_docstring_names_every_engine_argument():
    """``LLM(model, **kwargs)`` passes kwargs on; its docstring is where a learner sees them."""
    from dataclasses import fields

    named = {f.name for f in fields(EngineArgs)} - {"model"}
    assert {name for name in named if f"``{name}``" in LLM.__init__.__doc__} == named


def test_an_engine_is_built_and_run_without_llm():
    """``EngineCore(vllm_config, executor_class)`` builds its own executor, KV-cache manager and
    scheduler, as vLLM 0.30.0's does; its tokens are ``LLM``'s."""
    from minispec.sampling_params import SamplingParams
    from minispec.v1.engine.core import EngineCore
    from minispec.v1.executor import Executor, UniProcExecutor
    from minispec.v1.request import Request

    kwargs = dict(pipeline_parallel_size=2, speculative_config=DRAFT, max_model_len=64, num_gpu_blocks=40)
    config = EngineArgs(**kwargs).create_engine_config()
    engine = EngineCore(config, Executor.get_class(config))
    assert type(engine.executor) is UniProcExecutor and len(engine.executor.runners) == 2
    assert engine.scheduler.kv_cache_manager.num_blocks == 40 and engine.max_concurrent_batches == 2
    params, prompts = SamplingParams(temperature=0, max_tokens=10), [[5, 17, 33, 2], [40, 41, 7]]
    requests = [Request(f"r{i}", ids, params, config.arch.eos_token_id) for i, ids in enumerate(prompts)]
    for step, request in enumerate(requests):
        engine.add_request(request, arrival_step=step)
    engine.run()
    expected = LLM(**kwargs).generate(prompts, params, arrival_steps=[0, 1])
    assert [r.output_token_ids for r in requests] == [o.outputs[0].token_ids for o in expected]
    assert engine.num_batches > 0 and not engine.has_work()


def test_max_concurrent_batches_has_one_source():
    config = EngineArgs(pipeline_parallel_size=3, max_model_len=64).create_engine_config()
    assert config.max_concurrent_batches == 3
    serial = EngineArgs(pipeline_parallel_size=3, max_concurrent_batches=1, max_model_len=64).create_engine_config()
    assert serial.max_concurrent_batches == 1 and LLM(max_concurrent_batches=1, max_model_len=64,
                                                       pipeline_parallel_size=3).engine.max_concurrent_batches == 1


def test_executor_get_class_picks_by_backend():
    from minispec.v1.executor import Executor, MultiprocExecutor, TorchrunExecutor, UniProcExecutor

    def picked(backend):
        return Executor.get_class(EngineArgs(distributed_executor_backend=backend, max_model_len=64)
                                  .create_engine_config())

    assert (picked("uni"), picked("mp"), picked("torchrun")) == (UniProcExecutor, MultiprocExecutor, TorchrunExecutor)


def test_a_recorder_is_refused_by_the_multiprocess_executor():
    from minispec.instruments.trace import TraceRecorder
    from minispec.v1.engine.core import EngineCore
    from minispec.v1.executor import MultiprocExecutor

    config = EngineArgs(distributed_executor_backend="mp", max_model_len=64).create_engine_config()
    with pytest.raises(ValueError, match=r"^recorder: expected None under distributed_executor_backend='mp'"):
        EngineCore(config, MultiprocExecutor, TraceRecorder("all", 1, None))


def test_torchrun_worker_ranks_are_served_by_an_explicit_call(monkeypatch):
    """Rank 0 builds the LLM; the other ranks call ``run_headless``. Each refuses the other's
    rank with what to call instead, and nothing exits the process (the serving itself runs
    under torchrun in tests/test_torchrun.py)."""
    from minispec.entrypoints.cli.serve import run_headless

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ValueError, match=r"^distributed_executor_backend='torchrun' on rank 1: the LLM runs on rank 0; "
                                         r"call minispec\.entrypoints\.cli\.serve\.run_headless"):
        LLM(pipeline_parallel_size=2, distributed_executor_backend="torchrun")
    with pytest.raises(ValueError, match=r"^run_headless with distributed_executor_backend='mp': expected 'torchrun'"):
        run_headless(pipeline_parallel_size=2, distributed_executor_backend="mp")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match=r"^run_headless on rank 0: expected a rank > 0"):
        run_headless(pipeline_parallel_size=2, distributed_executor_backend="torchrun")
