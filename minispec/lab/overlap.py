"""What the batch queue buys, measured: the same work through PP=2 "mp" with two
batches in flight and with one. Shared by ``benchmarks/bench_pipeline.py`` and
notebook 04.

The shipped target computes a stage in a millisecond or two, about what moving
a batch between processes costs, so on it overlapping compute saves little.
``random_llama`` makes a model where compute dominates: a random-weight Llama
of a few tens of millions of parameters, written to a directory the caller
owns (nothing large is committed; transformers is imported only here).
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from minispec import LLM, SamplingParams
from minispec.instruments.timeline import Timeline
from minispec.lab.exercise_runs import one_thread

HEAVY = dict(vocab_size=2048, hidden_size=640, intermediate_size=1792, num_hidden_layers=10,
             num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=1024,
             tie_word_embeddings=True)


def random_llama(directory: Path, **overrides) -> Path:
    """Save a random-weight ``LlamaForCausalLM`` (``HEAVY``, 52M parameters, unless overridden) in ``directory``."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**{**HEAVY, **overrides})).save_pretrained(directory, safe_serialization=True)
    return Path(directory)


def num_params(model_dir: Path) -> int:
    from safetensors import safe_open

    with safe_open(Path(model_dir) / "model.safetensors", "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def random_prompts(n: int, vocab_size: int, length: int = 12) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(3, vocab_size, (length,), generator=g).tolist() for _ in range(n)]


@contextmanager
def one_thread_per_stage():
    """Each stage one thread: this process (stage 0) with ``one_thread``, the spawned
    stages through the environment they inherit."""
    env = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        with one_thread():
            yield
    finally:
        if env is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = env


@dataclass
class OverlapRun:
    in_flight: int
    seconds: list[float]  # wall time of each repeat
    timeline: Timeline  # the last repeat's


def measure_in_flight(model: Path, in_flight: int, prompts: list[list[int]], max_tokens: int,
                      repeat: int = 1, together: bool = False) -> OverlapRun:
    """Generate ``prompts`` ``repeat`` times on PP=2 "mp" with ``in_flight`` batches in flight.

    Half the requests arrive one engine step later, as in the forum thread, so
    decode batches alternate between the halves (``together`` puts them all at
    step 0: then one batch takes everything and nothing overlaps). The token
    budget is half the requests, so a batch holds the same number of tokens
    with one batch in flight as with two: on a CPU a small decode batch costs
    about the same whatever its size, and one batch of 16 against two of 8
    would measure batch size, not overlap."""
    arrivals = [0 if together else i % 2 for i in range(len(prompts))]
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    with one_thread_per_stage(), LLM(model=model, pipeline_parallel_size=2, distributed_executor_backend="mp",
                                     max_concurrent_batches=in_flight, max_num_seqs=len(prompts),
                                     max_num_batched_tokens=max(1, len(prompts) // 2)) as llm:
        llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))  # warm-up
        seconds = []
        for _ in range(repeat):
            llm.timeline().spans.clear()
            start = time.perf_counter()
            llm.generate(prompts, params, arrival_steps=arrivals)
            seconds.append(time.perf_counter() - start)
        return OverlapRun(in_flight, seconds, llm.timeline())


def first_batches(timeline: Timeline, n: int) -> int:
    """The last scheduler step among a run's first ``n`` batches (for ``plot_gantt``'s ``max_step``)."""
    return sorted({s.step for s in timeline.spans})[:n][-1]
