"""V1 under pipeline parallelism with async scheduling (``minispec/v1/worker/pp_prev_sampled.py``):
the last stage's broadcast of the previous sampled tokens, over the checked transport, in
process and over "mp" (torchrun: ``tests/test_torchrun.py``); greedy output equals transformers'
(the whole grid is in ``tests/test_greedy_equivalence.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from test_greedy_equivalence import MAX_TOKENS, NUM_REQUESTS, PROMPTS, reference  # noqa: F401 (a fixture)

from minispec import LLM, SamplingParams
from minispec.distributed.parallel_state import InProcStageGroup, MessageMismatch, NotSentYet
from minispec.instruments.invariants import Invariant
from minispec.v1.worker.pp_prev_sampled import PREV_SAMPLED_TAG, PrevSampledBroadcast, full_layout
from minispec.v1.worker.runner_fixes import column_zero_layout


def engine(pp: int, k: int, method: str | None, **kwargs) -> LLM:
    spec = {"method": method, "num_speculative_tokens": k} if k else None
    args = dict(max_num_seqs=16, max_num_batched_tokens=96, block_size=8, num_gpu_blocks=64)
    return LLM(pipeline_parallel_size=pp, speculative_config=spec, model_runner="v1", async_scheduling=True,
               **(args | kwargs))


def generate(llm: LLM) -> list[list[int]]:
    arrivals = [i // 4 for i in range(NUM_REQUESTS)]
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=MAX_TOKENS), arrival_steps=arrivals)
    return [o.outputs[0].token_ids for o in outputs]


def test_v1_pp_async_is_built_with_pp_batches_in_flight(reference):
    """What the refusal of V1 + PP + async scheduling became: the engine is built, with
    ``pp_size`` batches in flight as vLLM 0.30.0 sets them for V1 (``config/vllm.py`` 589-599),
    the scheduler relays no tokens, and greedy output equals transformers'."""
    llm = engine(3, 3, "draft_model")
    assert llm.engine.max_concurrent_batches == 3
    assert all(r.pp_prev_sampled is not None for r in llm.engine.executor.runners)
    assert generate(llm) == reference
    assert llm.stats()["accepted_tokens"] > 0


def test_stage_0_waits_for_the_last_stage_to_sample_the_batch_before():
    """vLLM's stage 0 waits for the broadcast before it builds its next inputs
    (``_prepare_input_ids``); in one process the executor runs it only once the last stage has
    run the batch before: on the tick timeline, every batch but the first starts on stage 0
    no earlier than the tick the previous batch runs on the last stage (later in that tick: a
    tick runs the oldest batch first), never a tick before (the requests are in every batch)."""
    llm = engine(3, 2, "ngram")
    llm.generate(PROMPTS[:4], SamplingParams(temperature=0, max_tokens=8))
    spans = llm.engine.executor.timeline.spans
    first = {s.step: s.start for s in spans if s.stage == 0}
    last = {s.step: s.start for s in spans if s.stage == 2}
    steps = sorted(first)
    assert len(steps) > 4
    assert all(first[b] >= last[a] for a, b in zip(steps, steps[1:])), (first, last)


def _pair(layout, k: int):
    group = InProcStageGroup(0)
    return (PrevSampledBroadcast(group.for_rank(1), 2, layout(k)),
            PrevSampledBroadcast(group.for_rank(0), 2, layout(k)))


def test_the_broadcast_carries_every_accepted_token_and_the_next_drafts():
    """minispec's fix: all k + 1 columns with their counts, and the drafts, per sampling row;
    a row that samples nothing (a prefill chunk) is skipped."""
    last, first = _pair(full_layout, 3)
    first.receive(7, ["a", "b", "c"], np.array([True, True, False]))
    with pytest.raises(NotSentYet, match="never sent"):
        first.take_needed({"a"})
    assert len(first.queue) == 1  # a retry finds its entry where it was
    last.broadcast(7, [[5, 6, 9], [4], []], [[1, 2, 3], [8], []])
    (entry,) = first.take_needed({"a"})
    assert entry.tokens == {"a": [5, 6, 9], "b": [4]} and entry.drafts == {"a": [1, 2, 3], "b": [8]}


def test_the_column_zero_patch_carries_one_token_and_no_drafts():
    """vLLM #57755's patch: width 1, column 0, and nothing else: two accepted drafts and the
    bonus token arrive as the first draft alone."""
    last, first = _pair(column_zero_layout, 3)
    first.receive(0, ["a"], np.array([True]))
    last.broadcast(0, [[5, 6, 9]], [[1, 2, 3]])
    (entry,) = first.take_needed({"a"})
    assert entry.tokens == {"a": [5]} and entry.drafts is None


def test_invariant_7_checks_the_broadcast():
    """The broadcast goes over the checked transport: a receive posted for another step than
    the message's is named as invariant 7, with the channel and both steps."""
    last, first = _pair(full_layout, 2)
    first.receive(4, ["a"], np.array([True]))
    last.broadcast(3, [[1]], [[2, 3]])
    with pytest.raises(MessageMismatch) as caught:
        first.take_needed({"a"})
    v = caught.value.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.MESSAGE_SCHEDULE, 4, 0,
                                                        f"rank 1 -> rank 0, tag {PREV_SAMPLED_TAG}")
    assert (v.expected.step, v.actual.step) == (4, 3)


@pytest.mark.slow
def test_multiproc_v1_pp_async_equals_transformers(reference):
    llm = engine(2, 3, "draft_model", distributed_executor_backend="mp")
    try:
        assert generate(llm) == reference
    finally:
        llm.shutdown()
