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
    ({"speculative_config": {"method": "medusa", "num_speculative_tokens": 2}},
     r"method'\]='medusa': expected one of \('draft_model', 'ngram', 'scripted', 'eagle', 'eagle3'\)"),
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
    explicit = llm.add_request("The ", params, request_id="req-0")
    out = llm.generate(["A list "], params)
    assert out[0].request_id != "req-0" and len(out[0].outputs[0].token_ids) == 3
    assert len(explicit.output_token_ids) == 3


# -- issue 9: inputs that used to get a raw error, a late one, or none --------------------------

def _checkpoint_with(tmp_path, name, edit_config=None, config_text=None):
    """A copy of the shipped draft checkpoint with its config.json changed."""
    import json
    import shutil

    from minispec.config import DEFAULT_DRAFT

    path = tmp_path / name
    shutil.copytree(DEFAULT_DRAFT, path)
    if config_text is None:
        config = json.loads((path / "config.json").read_text())
        config_text = json.dumps(edit_config(config))
    (path / "config.json").write_text(config_text)
    return path


@pytest.mark.parametrize("model,error,match", [
    (None, TypeError, r"^model=None: expected a path \(str or pathlib.Path\) to a checkpoint directory"),
    (123, TypeError, r"^model=123: expected a path"),
])
def test_model_of_the_wrong_type(model, error, match):
    with pytest.raises(error, match=match):
        LLM(model=model)


def test_broken_config_json(tmp_path):
    not_json = _checkpoint_with(tmp_path, "not-json", config_text="{'vocab_size': 105")
    with pytest.raises(ValueError, match=r"model=.*not-json.*: config.json is not valid JSON .*expected a transformers config"):
        LLM(model=not_json)
    no_vocab = _checkpoint_with(tmp_path, "no-vocab", lambda c: {k: v for k, v in c.items() if k != "vocab_size"})
    with pytest.raises(ValueError, match=r"config.json has no 'vocab_size': expected a Llama config with"):
        LLM(model=no_vocab)
    text_size = _checkpoint_with(tmp_path, "text-size", lambda c: {**c, "hidden_size": "64"})
    with pytest.raises(ValueError, match=r"config.json hidden_size='64': expected an integer > 0"):
        LLM(model=text_size)
    float_size = _checkpoint_with(tmp_path, "float-size", lambda c: {**c, "hidden_size": 64.5})
    with pytest.raises(ValueError, match=r"config.json hidden_size=64.5: expected an integer > 0"):
        LLM(model=float_size)


def test_config_that_disagrees_with_the_weights(tmp_path):
    wider = _checkpoint_with(tmp_path, "wider", lambda c: {**c, "intermediate_size": c["intermediate_size"] * 2})
    with pytest.raises(ValueError, match=r"model=.*wider.*: tensor 'model.layers.0.mlp.\w+_proj.weight' has shape "
                                         r"\(\d+, \d+\): expected \(\d+, \d+\) from config.json"):
        LLM(model=wider)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda():
    with pytest.raises(ValueError, match=r"device='cuda': this machine has 0 CUDA device\(s\): expected None or 'cpu'"):
        LLM(device="cuda")
    with pytest.raises(ValueError, match=r"device='tpu9': expected None, 'cpu' or 'cuda\[:N\]'"):
        LLM(device="tpu9")


def test_dtype_by_name_is_accepted_and_bad_ones_are_named():
    import torch

    assert LLM(dtype="float32", max_model_len=32).config.dtype is torch.float32
    with pytest.raises(ValueError, match=r"dtype='float64': expected torch.float32, torch.float16 or torch.bfloat16, "
                                         r"or one of \('float32', 'float16', 'bfloat16'\)"):
        LLM(dtype="float64")


@pytest.mark.parametrize("kwargs,match", [
    ({"max_num_seqs": 10**7}, r"^num_gpu_blocks=320000000 \(max_num_seqs=10000000 x 32 blocks of max_model_len=512\) "
                              r"x block_size=16 \(the target's KV cache\) asks for [\d.]+ GiB \([\d.]+ GiB in all\): "
                              r"expected at most the [\d.]+ GiB of memory available"),
    ({"max_num_seqs": 10**7, "num_gpu_blocks": 64},
     r"^max_num_seqs=10000000 x max_model_len=512 \(every stage's persistent batch\) asks for"),
    ({"block_size": 10**9}, r"^num_gpu_blocks=16 \(max_num_seqs=16 x 1 blocks of max_model_len=512\) "
                            r"x block_size=1000000000 \(the target's KV cache\) asks for"),
    ({"num_gpu_blocks": 10**10}, r"^num_gpu_blocks=10000000000 x block_size=16 \(the target's KV cache\) asks for"),
])
def test_sizes_the_machine_cannot_hold_are_refused_before_allocating(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LLM(**kwargs)


def test_memory_plan_counts_what_is_allocated():
    """The plan's KV figure is what the runners really allocate."""
    import torch

    from minispec.config import memory_plan

    llm = LLM(pipeline_parallel_size=2, max_model_len=64, max_num_seqs=3,
              speculative_config={"method": "draft_model", "num_speculative_tokens": 2})
    plan = dict((what.split(" (")[1], n) for what, n in memory_plan(llm.config, 4))
    runners = llm.engine.executor.runners
    target_kv = sum(a.kv_cache.numel() * 4 for r in runners for a in r.model.attention_layers)
    draft_kv = sum(a.kv_cache.numel() * 4 for a in runners[-1].drafter.model.attention_layers)
    batches = sum(r.input_batch.token_ids_cpu.nbytes + r.input_batch.block_table.block_table_np.nbytes for r in runners)
    assert plan == {"the target's KV cache)": target_kv, "the draft model's KV cache)": draft_kv,
                    "every stage's persistent batch)": batches}
    assert torch.float32.itemsize == 4


@pytest.mark.parametrize("kwargs,match", [
    ({"speculative_config": {"method": "ngram"}},
     r"speculative_config=\{'method': 'ngram'\}: expected a 'num_speculative_tokens' key"),
    ({"speculative_config": "ngram"}, r"speculative_config='ngram': expected None or a dict"),
    ({"seed": "x"}, r"^seed='x': expected an integer in \[0, 2\*\*63\)"),
    ({"seed": True}, r"^seed=True: expected an integer"),
    ({"check_invariants": "yes"}, r"^check_invariants='yes': expected True or False"),
    ({"record": 1}, r"^record=1: expected True or False"),
    ({"max_model_len": 0}, r"^max_model_len=0: expected an integer > 0"),
])
def test_values_that_were_accepted_silently(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LLM(**kwargs)


def test_ignore_eos_and_stop_token_ids_types():
    with pytest.raises(ValueError, match=r"SamplingParams.ignore_eos='no': expected True or False"):
        SamplingParams(ignore_eos="no")
    with pytest.raises(ValueError, match=r"SamplingParams.stop_token_ids=5: expected None or a list of integers"):
        SamplingParams(stop_token_ids=5)
    with pytest.raises(ValueError, match=r"SamplingParams.stop_token_ids=\[True\]: expected None or a list"):
        SamplingParams(stop_token_ids=[True])
    assert SamplingParams(stop_token_ids=None).stop_token_ids == []  # vLLM's meaning of None
    assert SamplingParams(stop_token_ids=(3, 4)).stop_token_ids == [3, 4]


def test_draft_with_another_vocabulary_or_tokenizer(tmp_path):
    import json

    from minispec.config import DEFAULT_DRAFT

    bigger = _checkpoint_with(tmp_path, "bigger", lambda c: {**c, "vocab_size": c["vocab_size"] + 1})
    with pytest.raises(ValueError, match=r"speculative_config\['model'\]=.*bigger.*: expected the target's vocabulary "
                                         r"\(105 tokens\), got 106"):
        LLM(speculative_config={"method": "draft_model", "num_speculative_tokens": 2, "model": bigger})
    swapped = _checkpoint_with(tmp_path, "swapped", lambda c: c)
    tok = json.loads((DEFAULT_DRAFT / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = vocab["a"], vocab["b"]
    vocab["a"], vocab["b"] = b, a
    (swapped / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(ValueError, match=r"speculative_config\['model'\]=.*swapped.*: its tokenizer.json maps tokens "
                                         r"to other ids than the target's: expected the target's tokenizer"):
        LLM(speculative_config={"method": "draft_model", "num_speculative_tokens": 2, "model": swapped})


def test_prompt_shapes(llm):
    import numpy as np
    import torch

    params = SamplingParams(temperature=0, max_tokens=3)
    ids = llm.tokenizer.encode("The for ").ids
    want = llm.generate([ids], params)[0].outputs[0].token_ids
    same = [torch.tensor(ids), np.array(ids), (t for t in ids), tuple(ids), [np.int64(t) for t in ids]]
    for prompt in same:  # one prompt of ids, in any of these shapes
        assert llm.generate(prompt, params)[0].outputs[0].token_ids == want
    two = llm.generate((p for p in ["The for ", ids]), params)  # a generator of prompts
    assert [o.outputs[0].token_ids for o in two] == [want, want]
    assert [o.outputs[0].token_ids for o in llm.generate(torch.tensor([ids, ids]), params)] == [want, want]
    bad = [
        (None, r"^prompts=None: expected text \(str\), a sequence of token ids, or a list of those"),
        ({"prompt": "x"}, r"^prompts=\{'prompt': 'x'\}: expected text"),
        (b"abc", r"^prompts=b'abc': expected text"),
        (5, r"^prompts=5: expected text"),
        (torch.zeros(1, 1, 1, dtype=torch.long), r"^prompts=tensor\(.*\): expected text"),
        ([b"abc"], r"^prompts\[0\]=b'abc': expected text \(str\) or a sequence of token ids"),
        ([None], r"^prompts\[0\]=None: expected text"),
        ([True, 3], r"^prompts\[0\] has token id True: expected integers in \[0, 105\)"),
        (torch.tensor([1.0, 2.0]), r"^prompts\[0\] has token id 1.0: expected integers"),
    ]
    for prompts, match in bad:
        with pytest.raises(ValueError, match=match):
            llm.generate(prompts, params)
    assert not llm.scheduler.has_unfinished_requests()
    assert llm.generate([ids], params)[0].outputs[0].token_ids == want


def test_special_and_unknown_text(llm):
    params = SamplingParams(temperature=0, max_tokens=2)
    with pytest.raises(ValueError, match=r"^prompts\[0\] contains the text '<eos>', which the tokenizer reads as a "
                                         r"special token: expected plain text \(pass token ids"):
        llm.generate("stop <eos> here", params)
    with pytest.raises(ValueError, match=r"^prompts\[0\] contains the text '<unk>'"):
        llm.generate("a <unk> b", params)
    with pytest.warns(UserWarning, match=r"prompts\[0\] has characters the tokenizer does not know, '日本語€': each "
                                         r"becomes <unk> \(id 0\)"):
        out = llm.generate("日本語€ ok", params)
    assert out[0].prompt_token_ids[:4] == [0, 0, 0, 0]


def test_stop_tokens_and_arrivals_per_call(llm):
    params = SamplingParams(temperature=0, max_tokens=2)
    with pytest.raises(ValueError, match=r"^SamplingParams.stop_token_ids=\[105\] for prompts\[0\]: expected token "
                                         r"ids in \[0, 105\)"):
        llm.generate("abc", SamplingParams(stop_token_ids=[105]))
    with pytest.raises(ValueError, match=r"^arrival_steps=5: expected a list of integers >= 0, one per prompt"):
        llm.generate("abc", params, arrival_steps=5)
    with pytest.raises(ValueError, match=r"^arrival step for prompts\[0\]=True: expected an integer >= 0"):
        llm.generate("abc", params, arrival_steps=[True])
    assert not llm.scheduler.has_unfinished_requests() and not llm.engine.arrivals


def test_a_far_arrival_skips_the_idle_steps(llm):
    """Nothing runs before the arrival, so the engine jumps to it instead of stepping 10**9 times."""
    params = SamplingParams(temperature=0, max_tokens=3)
    want = llm.generate("abc", params)[0].outputs[0].token_ids
    before = llm.engine.engine_step
    out = llm.generate(["abc", "abc"], params, arrival_steps=[0, 10**9])
    assert [o.outputs[0].token_ids for o in out] == [want, want]
    assert 10**9 <= llm.engine.engine_step - before < 10**9 + 20
