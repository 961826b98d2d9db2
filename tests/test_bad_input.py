"""Bad input: a clear error naming the parameter and what was expected, and no
damage to the engine or to other requests."""

import pytest

from minispec import LLM, SamplingParams
from minispec.config import CacheConfig


@pytest.fixture(scope="module")
def llm():
    return LLM(speculative_config={"method": "ngram", "num_speculative_tokens": 2}, max_model_len=64)


@pytest.mark.parametrize("kwargs,match", [
    ({"speculative_config": {"method": "ngram", "num_speculative_tokens": -1}},
     r"num_speculative_tokens'\]=-1: expected an integer >= 0"),
    ({"speculative_config": {"method": "eagle", "num_speculative_tokens": 2}},
     r"method'\]='eagle': expected one of \('draft_model', 'ngram'\)"),
    ({"speculative_config": {"method": "ngram", "num_speculative_tokens": 2, "lookahead": 1}},
     r"speculative_config=\['lookahead'\]: expected keys among"),
    ({"pipeline_parallel_size": 0}, r"pipeline_parallel_size=0: expected an integer from 1 to the model's 4 layers"),
    ({"pipeline_parallel_size": 5}, r"pipeline_parallel_size=5: expected an integer from 1 to the model's 4 layers"),
    ({"fixes": "vllm-0.10"}, r"fixes='vllm-0.10': expected one of \['all', 'vllm-0.14', 'vllm-0.9.2'\]"),
    ({"block_size": 0}, r"block_size=0: expected an integer > 0"),
    ({"max_num_seqs": 0}, r"max_num_seqs=0: expected an integer > 0"),
    ({"num_gpu_blocks": 3, "max_model_len": 64}, r"num_gpu_blocks=3: expected at least max_model_len / block_size = 4"),
    ({"max_model_len": 100_000}, r"max_model_len=100000: expected at most the model's 1024 positions"),
    ({"speculative_config": {"method": "ngram", "num_speculative_tokens": True}},
     r"num_speculative_tokens'\]=True: expected an integer >= 0"),
])
def test_bad_engine_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LLM(**kwargs)


def test_bad_checkpoints(tmp_path):
    import json
    import shutil

    from minispec.config import DEFAULT_DRAFT

    with pytest.raises(FileNotFoundError, match="^model=.*missing.*expected a checkpoint directory"):
        LLM(model=tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"^speculative_config\['model'\]=.*nope.*expected a checkpoint directory"):
        LLM(speculative_config={"method": "draft_model", "num_speculative_tokens": 2, "model": tmp_path / "nope"})
    gelu = tmp_path / "gelu"
    shutil.copytree(DEFAULT_DRAFT, gelu)
    config = json.loads((gelu / "config.json").read_text())
    (gelu / "config.json").write_text(json.dumps({**config, "hidden_act": "gelu"}))
    with pytest.raises(ValueError, match="hidden_act='gelu' is not supported; expected 'silu'"):
        LLM(model=gelu)


@pytest.mark.parametrize("kwargs,match", [
    ({"max_tokens": 0}, r"SamplingParams.max_tokens=0: expected an integer > 0"),
    ({"temperature": -0.5}, r"SamplingParams.temperature=-0.5: expected a number >= 0"),
    ({"top_p": 0.0}, r"SamplingParams.top_p=0.0: expected a number in \(0, 1\]"),
    ({"top_p": 1.5}, r"SamplingParams.top_p=1.5: expected a number in \(0, 1\]"),
    ({"top_k": -1}, r"SamplingParams.top_k=-1: expected an integer >= 0"),
    ({"seed": 2**64}, r"SamplingParams.seed=18446744073709551616: expected None or an integer in \[0, 2\*\*63\)"),
])
def test_bad_sampling_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_block_size_in_cache_config():
    with pytest.raises(ValueError, match=r"block_size=-4: expected an integer > 0"):
        CacheConfig(block_size=-4)


def test_bad_prompts_leave_the_engine_untouched(llm):
    params = SamplingParams(temperature=0, max_tokens=8)
    good = "The for statement "
    before = llm.generate([good], params)[0].outputs[0].token_ids
    bad_batches = [
        ([good, ""], r"prompts\[1\] is empty: expected at least one token"),
        ([good, [3, 4, 500]], r"prompts\[1\] has token id 500: expected integers in \[0, 105\)"),
        ([good, [3, -1]], r"prompts\[1\] has token id -1"),
        ([good, "x" * 64], r"prompts\[1\] has 64 tokens: expected at most max_model_len - 1 = 63"),
    ]
    for prompts, match in bad_batches:
        with pytest.raises(ValueError, match=match):
            llm.generate(prompts, params)
    with pytest.raises(ValueError, match=r"sampling params for prompts\[1\]=None: expected a SamplingParams"):
        llm.generate([good, good], [params, None])
    with pytest.raises(ValueError, match=r"arrival step for prompts\[1\]='x': expected an integer >= 0"):
        llm.generate([good, good], params, arrival_steps=[0, "x"])
    assert not llm.scheduler.has_unfinished_requests() and not llm.engine.arrivals
    assert llm.generate([good], params)[0].outputs[0].token_ids == before


def test_numpy_token_ids_are_accepted(llm):
    import numpy as np

    params = SamplingParams(temperature=0, max_tokens=4)
    ids = [int(t) for t in llm.tokenizer.encode("The for ").ids]
    assert llm.generate([np.array(ids)], params)[0].outputs[0].token_ids == llm.generate([ids], params)[0].outputs[0].token_ids


def test_duplicate_request_id_is_refused(llm):
    params = SamplingParams(temperature=0, max_tokens=2)
    llm.add_request("abc", params, request_id="dup")
    with pytest.raises(ValueError, match="request_id='dup': expected an id not used before"):
        llm.add_request("abc", params, request_id="dup")  # still only queued
    llm.engine.run()
    with pytest.raises(ValueError, match="request_id='dup': expected an id not used before"):
        llm.add_request("abc", params, request_id="dup")  # finished


def test_explicit_ids_never_collide_with_automatic_ones():
    llm = LLM(max_model_len=64)
    params = SamplingParams(temperature=0, max_tokens=3)
    llm.add_request("The ", params, request_id="req-0")
    out = llm.generate(["A list "], params)
    assert out[0].request_id != "req-0" and len(out[0].outputs[0].token_ids) == 3
    assert len(llm.scheduler.requests["req-0"].output_token_ids) == 3
