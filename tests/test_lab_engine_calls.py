"""The engine calls the lab uses instead of reaching into the engine (issue 21 §5):
``LLM.wait_for_completion`` (queued requests run as ``generate`` runs them, aborted cleanly on an
exception; its outputs are tested in ``test_interrupt.py``), ``LLM.stage_runners`` (the in-process stages) and ``PPHandler.subscribe``
(a listener on Model Runner V2's broadcast)."""

from __future__ import annotations

import pytest

from minispec import LLM, SamplingParams
from minispec.v1.worker.gpu.pp_utils import PPMessageKind

PROMPTS = ["The for statement ", "A class ", "Exceptions are raised ", "The import "]
ARRIVALS = [0, 0, 1, 1]  # two batches in flight under PP=2
PARAMS = SamplingParams(temperature=0, max_tokens=8)
SPEC = {"method": "draft_model", "num_speculative_tokens": 3}


def make_llm(**kwargs) -> LLM:
    return LLM(pipeline_parallel_size=2, speculative_config=SPEC, max_num_seqs=4, **kwargs)


def queue(llm: LLM, prompts=PROMPTS) -> None:
    for i, (prompt, arrival) in enumerate(zip(prompts, ARRIVALS)):
        llm.add_request(prompt, PARAMS, arrival_step=arrival, request_id=f"req-{i}")  # generate's ids


def generated(llm: LLM) -> dict[str, list[int]]:
    """Outputs under the ids a fresh ``LLM`` gives (a used one numbers on)."""
    outs = llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)
    return {f"req-{i}": o.outputs[0].token_ids for i, o in enumerate(outs)}


def test_an_exception_inside_wait_for_completion_empties_every_stage_and_frees_every_block(monkeypatch):
    llm = make_llm()
    queue(llm)
    update, calls = llm.engine._update, []

    def interrupted_update(*args):
        calls.append(1)
        if len(calls) == 3:  # batches in flight on both stages, requests half done
            raise KeyboardInterrupt
        return update(*args)

    monkeypatch.setattr(llm.engine, "_update", interrupted_update)
    with pytest.raises(KeyboardInterrupt):
        llm.wait_for_completion()
    monkeypatch.undo()
    assert llm.scheduler.requests == {} and not (llm.engine.arrivals or llm.engine.batch_queue)
    assert all(r.input_batch.num_reqs == 0 for r in llm.stage_runners())
    assert llm.scheduler.kv_cache_manager.num_free_blocks == llm.scheduler.kv_cache_manager.num_blocks
    assert generated(llm) == generated(make_llm())  # as a fresh engine generates


def test_stage_runners_are_the_in_process_stages_first_to_last():
    llm = make_llm()
    runners = llm.stage_runners()
    assert [r.pp_rank for r in runners] == [0, 1] and runners[-1].is_last_rank
    runners.clear()  # the caller's list, not the executor's
    assert len(llm.stage_runners()) == 2


@pytest.mark.slow
def test_stage_runners_are_refused_for_stages_in_other_processes():
    with LLM(pipeline_parallel_size=2, distributed_executor_backend="mp") as llm:
        with pytest.raises(ValueError, match="MultiprocExecutor's stages live in other processes"):
            llm.stage_runners()


def heard(llm: LLM) -> list[list]:
    """Per stage, every message its ``PPHandler`` tells a listener, in order."""
    messages = [[] for _ in llm.stage_runners()]
    for runner, mine in zip(llm.stage_runners(), messages):
        runner.pp_handler.subscribe(mine.append)
    return messages


def test_a_listener_hears_the_broadcast_as_sent_and_each_receive_posted():
    llm = make_llm(model_runner="v2")
    first, last = heard(llm)
    out = {o.request_id: o.outputs[0].token_ids for o in llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)}
    kinds = [m.kind for m in last]
    assert kinds == [PPMessageKind.SAMPLED, PPMessageKind.DRAFTS] * (len(kinds) // 2) and kinds
    assert [m.kind for m in first] == [PPMessageKind.POSTED] * len(first)
    sampled = [m for m in last if m.kind is PPMessageKind.SAMPLED]
    # stage 0 posts a receive for each batch the last stage broadcasts, in the same order
    assert [m.req_ids for m in first] == [m.req_ids for m in sampled]
    assert all(m.rank == 1 for m in last) and all(m.rank == 0 and m.tensors == () for m in first)
    tokens: dict[str, list[int]] = {r: [] for r in out}
    for m in sampled:
        padded, (num_sampled, num_rejected) = m.tensors
        assert padded.shape == (len(m.req_ids), SPEC["num_speculative_tokens"] + 1)
        for row, req_id in enumerate(m.req_ids):
            n = int(num_sampled[row])
            assert (padded[row, n:] == -1).all()
            tokens[req_id] += padded[row, :n].tolist()
    # what was broadcast is what was generated (the last batch may sample past max_tokens)
    assert {r: t[: len(out[r])] for r, t in tokens.items()} == out


def test_nothing_is_heard_for_a_batch_that_samples_nothing():
    # a 6-token budget prefills the prompts in chunks: the chunks before the last sample nothing
    llm = make_llm(model_runner="v2", max_num_batched_tokens=6)
    first, last = heard(llm)
    generated(llm)
    sampled = [m for m in last if m.kind is PPMessageKind.SAMPLED]
    assert len(first) == len(sampled) < llm.stats()["target_forwards"]
