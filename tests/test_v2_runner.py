"""Model Runner V2 (``minispec/v1/worker/gpu/``, issue 17 §1): the second runner design.

* Greedy output equals transformers' ``generate`` for 1-3 stages, k 0-5, both
  proposers, with preemption (the fixture and prompts of ``test_greedy_equivalence.py``).
* Under the same hypothesis schedules as V1 (``test_properties.py``'s strategy and
  reference) every run finishes with the greedy tokens and no invariant fires.
* Non-last stages build their inputs from the last stage's broadcast only: with the
  scheduler's relay and draft values replaced by garbage, V2's output is unchanged
  (V1's is not), and without the broadcast it diverges.
* The transport and the broadcast's bookkeeping, by hand.

The default run takes a few configurations and examples; ``slow`` runs the whole grid,
the full hypothesis profile and the "mp" executor, ``torchrun`` three torchrun ranks.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from test_greedy_equivalence import MAX_TOKENS, NUM_REQUESTS, PROMPTS, reference  # noqa: F401 (a fixture)
from test_properties import _forum_like, configurations, expected

from minispec import LLM, SamplingParams
from minispec.config import DEFAULT_TARGET
from minispec.distributed.parallel_state import InProcStageGroup
from minispec.transformers_utils.tokenizer import load_tokenizer
from minispec.v1.worker.gpu import ENV_VAR, use_v2_model_runner
from minispec.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2
from minispec.v1.worker.gpu.pp_utils import SAMPLED_TAG, PPHandler
from minispec.v1.worker.gpu_model_runner import GPUModelRunner as GPUModelRunnerV1

V2 = {ENV_VAR: "1"}
TOKENIZER = load_tokenizer(DEFAULT_TARGET)


@pytest.fixture
def v2(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "1")


def engine(pp: int, k: int, method: str | None, **kwargs) -> LLM:
    spec = {"method": method, "num_speculative_tokens": k} if k else None
    args = dict(max_num_seqs=16, max_num_batched_tokens=96, block_size=8, num_gpu_blocks=64)
    return LLM(pipeline_parallel_size=pp, speculative_config=spec, **(args | kwargs))


def generate(llm: LLM) -> list[list[int]]:
    arrivals = [i // 4 for i in range(NUM_REQUESTS)]  # waves: two batches really are in flight
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=MAX_TOKENS), arrival_steps=arrivals)
    return [o.outputs[0].token_ids for o in outputs]


# -- selection ---------------------------------------------------------------
def test_the_environment_variable_selects_the_runner(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert not use_v2_model_runner()
    assert isinstance(engine(2, 0, None).engine.executor.runners[0], GPUModelRunnerV1)
    monkeypatch.setenv(ENV_VAR, "1")
    assert use_v2_model_runner()
    assert {type(r) for r in engine(2, 0, None).engine.executor.runners} == {GPUModelRunnerV2}
    monkeypatch.setenv(ENV_VAR, "yes")
    with pytest.raises(ValueError, match=f"{ENV_VAR}='yes': expected 1 or 0"):
        use_v2_model_runner()


# -- greedy equals transformers ---------------------------------------------------
GRID = [(pp, k, m) for pp in (1, 2, 3) for k in range(6) for m in (("ngram", "draft_model") if k else (None,))]
FAST = [(1, 0, None), (2, 3, "ngram"), (3, 5, "draft_model"), (2, 1, "draft_model"), (3, 2, "ngram")]


def _check_greedy(reference, pp, k, method):
    llm = engine(pp, k, method, check_invariants=True)
    for i, (got, want) in enumerate(zip(generate(llm), reference)):
        assert got == want, f"request {i} diverged"
    stats = llm.stats()
    assert stats["preemptions"] > 0, "the KV budget was meant to force preemption"
    if k:
        assert stats["accepted_tokens"] > 0


@pytest.mark.parametrize("pp,k,method", FAST, ids=[f"pp{p}-k{k}-{m}" for p, k, m in FAST])
def test_greedy_equals_transformers_generate(v2, reference, pp, k, method):
    _check_greedy(reference, pp, k, method)


SLOW = [c for c in GRID if c not in FAST]


@pytest.mark.slow
@pytest.mark.parametrize("pp,k,method", SLOW, ids=[f"pp{p}-k{k}-{m}" for p, k, m in SLOW])
def test_greedy_equals_transformers_generate_whole_grid(v2, reference, pp, k, method):
    _check_greedy(reference, pp, k, method)


@pytest.mark.parametrize("in_flight", [1, 3])
def test_any_number_of_batches_in_flight(v2, reference, in_flight):
    """No batch queue, or pp_size + 1 batches in flight (vLLM's depth for V2 with async
    scheduling, vLLM 0.30.0 ``vllm/config/vllm.py`` 588-599): entries are still applied on first need."""
    assert generate(engine(2, 3, "ngram", max_concurrent_batches=in_flight, check_invariants=True)) == reference


def test_chunked_prefill_and_preemption(v2, reference):
    """A token budget smaller than the prompts splits them into chunks, some pipelined
    across the two batches in flight; the small KV pool preempts."""
    llm = engine(2, 3, "draft_model", max_num_batched_tokens=24, num_gpu_blocks=24, max_model_len=128, record=True)
    assert generate(llm) == reference
    chunks = [(r, c) for s in llm.trace.steps for r, c in s.schedule.num_computed_tokens.items()
              if 0 < c < s.schedule.num_prompt_tokens[r] and r not in s.schedule.new_req_ids]
    assert chunks, "expected prefill chunks after the first"
    assert llm.stats()["preemptions"] > 0


def test_a_preempted_requests_slot_is_freed_in_the_step_that_preempts_it(v2, reference):
    """As vLLM 0.30.0's ``finish_requests`` (``vllm/v1/worker/gpu/model_runner.py`` 1091-1103): every stage frees it
    with the finished ones, and when it resumes it is added again from the tokens the
    scheduler sends (``CachedRequestData.all_token_ids``)."""
    seen, original = [], GPUModelRunnerV2.finish_requests

    def finish(runner, out):
        original(runner, out)
        seen.append((runner.pp_rank, set(out.preempted_req_ids), set(runner.req_states.req_id_to_index),
                     set(runner.preempted)))

    with mock.patch.object(GPUModelRunnerV2, "finish_requests", finish):
        llm = engine(2, 3, "draft_model", max_num_batched_tokens=24, num_gpu_blocks=24, max_model_len=128)
        assert generate(llm) == reference
    preempted = [(rank, ids, live, kept) for rank, ids, live, kept in seen if ids]
    assert {rank for rank, *_ in preempted} == {0, 1}, "the small KV pool was meant to preempt"
    assert all(not (ids & live) and ids <= kept for _, ids, live, kept in preempted)
    assert all(not runner.preempted for runner in llm.stage_runners())


# -- random sampling: the same tokens as V1 ------------------------------------------
@pytest.mark.parametrize("pp,method", [(2, "draft_model"), (3, "ngram")])
def test_random_sampling_equals_v1_token_for_token(monkeypatch, pp, method):
    """Seeded random requests draw from their generators in the same order in both
    runners (verify, then draft), so V2 emits V1's tokens exactly; V1's draws are
    checked against the target distribution in ``test_sampling_distribution.py``."""
    params = SamplingParams(temperature=0.8, top_p=0.9, max_tokens=30)
    runs = []
    for flag in ("0", "1"):
        monkeypatch.setenv(ENV_VAR, flag)
        llm = engine(pp, 3, method, max_num_batched_tokens=64, num_gpu_blocks=24, max_model_len=128, seed=3)
        outputs = llm.generate(PROMPTS[:8], params, arrival_steps=[i // 2 for i in range(8)])
        runs.append(([o.outputs[0].token_ids for o in outputs], llm.stats()))
    (v1, stats), (v2, _) = runs
    assert v2 == v1
    assert stats["preemptions"] > 0 and 0 < stats["acceptance_rate"] < 1


# -- the broadcast, not the relay -------------------------------------------------
def _garbage_relay(schedule):
    """The scheduler's token relay and draft values replaced by -1 (vLLM's async
    scheduler sends -1 placeholders for drafts too); only the counts stay true."""

    def scrambled(self):
        out = schedule(self)
        cached = out.scheduled_cached_reqs
        cached.new_token_ids = [[-1] * len(t) for t in cached.new_token_ids]
        out.scheduled_spec_decode_tokens = {r: [-1] * len(d) for r, d in out.scheduled_spec_decode_tokens.items()}
        return out

    return scrambled


def test_non_last_stages_never_read_the_scheduler_relay(monkeypatch, reference):
    from minispec.v1.core.sched.scheduler import Scheduler

    monkeypatch.setattr(Scheduler, "schedule", _garbage_relay(Scheduler.schedule))
    monkeypatch.setenv(ENV_VAR, "1")
    assert generate(engine(3, 3, "ngram")) == reference
    monkeypatch.setenv(ENV_VAR, "0")  # V1 embeds what it is sent: the same garbage breaks it
    try:
        v1 = generate(engine(3, 3, "ngram"))
    except IndexError:  # embedding token id -1
        v1 = None
    assert v1 != reference


def test_without_the_broadcast_non_last_stages_diverge(v2, monkeypatch, reference):
    """The property above can fail: a stage that never applies the broadcast embeds stale tokens."""
    monkeypatch.setattr(PPHandler, "get_prev_sampled_outputs", lambda self, slots: [])
    assert generate(engine(2, 3, "ngram")) != reference


def test_while_batches_alternate_a_broadcast_is_applied_pp_size_steps_later(v2, monkeypatch):
    """vLLM 0.30.0 applies step T's broadcast at step T + pp_size by construction (a FIFO
    and a scheduler that waits exactly pp_size steps); minispec applies it on first need.
    In the forum thread's schedule, where the two batches alternate, the two agree: stage
    0 applies step T's at step T + 2. When requests finish, the cadence breaks, and an
    entry nobody needs waits until a newer one is needed."""
    from minispec.lab.experiments.scenarios import forum_thread_llm
    from minispec.v1.worker.gpu.model_runner import GPUModelRunner as Runner

    applied, received, step = [], [], {}
    execute, receive, take = Runner.execute_model, PPHandler.receive, PPHandler.get_prev_sampled_outputs

    def execute_model(self, out, intermediate_tensors=None):
        step[self.pp_rank] = out.step
        return execute(self, out, intermediate_tensors)

    def receiving(self, batch):
        before = len(self.queue)
        receive(self, batch)
        received.extend([step[0]] * (len(self.queue) - before))

    def taking(self, slots):
        entries = take(self, slots)
        applied.extend((received.pop(0), step[0]) for _ in entries)
        return entries

    monkeypatch.setattr(Runner, "execute_model", execute_model)
    monkeypatch.setattr(PPHandler, "receive", receiving)
    monkeypatch.setattr(PPHandler, "get_prev_sampled_outputs", taking)
    llm = forum_thread_llm("all", max_tokens=10)
    llm.engine.run()
    assert applied[:7] == [(t, t + 2) for t in range(7)]
    assert any(later - t > 2 for t, later in applied[7:])


# -- hypothesis: the same schedules as V1 ----------------------------------------------
def run_v2(config) -> None:
    """One configuration of ``test_properties`` on V2's own code: it must finish with the
    reference's tokens and no invariant may fire. The configuration's ``fixes`` preset is
    V1's; V2 refuses V1's faulty ones (``tests/test_switchboard.py``), so it runs under "all"."""
    engine_args, requests = config
    engine_args = dict(engine_args, fixes="all")
    ids = [TOKENIZER.encode(r["prompt"]).ids for r in requests]
    with mock.patch.dict(os.environ):  # the reference is V1's one-stage engine
        os.environ.pop(ENV_VAR, None)
        want = [expected(p, r["max_tokens"], engine_args["max_model_len"], r["stop"]) for p, r in zip(ids, requests)]
    params = [SamplingParams(temperature=0, max_tokens=r["max_tokens"], stop_token_ids=r["stop"]) for r in requests]
    with mock.patch.dict(os.environ, V2):
        llm = LLM(check_invariants=True, **engine_args)
        outputs = llm.generate(ids, params, arrival_steps=[r["arrival"] for r in requests])
    assert [o.outputs[0].token_ids for o in outputs] == want


@settings(max_examples=12)
@given(configurations())
def test_any_configuration_is_greedy(config):
    run_v2(config)


@pytest.mark.slow
@given(configurations())
def test_any_configuration_is_greedy_full_profile(config):
    run_v2(config)


def test_the_forum_thread_schedule_is_greedy():
    run_v2(_forum_like("all"))


# -- the "mp" executor: the same broadcast over gloo -------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("pp,k,method", [(2, 3, "draft_model"), (3, 2, "ngram")])
def test_multiproc_v2_equals_transformers(v2, reference, pp, k, method):
    with engine(pp, k, method, distributed_executor_backend="mp") as llm:
        assert generate(llm) == reference


TORCHRUN_SCRIPT = """
import json, os, sys
from minispec import LLM, SamplingParams
from minispec.entrypoints.cli.serve import run_headless

engine = dict(pipeline_parallel_size=3, distributed_executor_backend="torchrun",
              speculative_config={{"method": "draft_model", "num_speculative_tokens": 3}},
              max_num_seqs=16, max_num_batched_tokens=96, block_size=8, num_gpu_blocks=64)
if int(os.environ["RANK"]) > 0:
    run_headless(**engine)  # serves this rank's stage until rank 0 shuts the pipeline down
    sys.exit(0)
llm = LLM(**engine)
outs = llm.generate({prompts!r}, SamplingParams(temperature=0, max_tokens={max_tokens}), arrival_steps={arrivals})
llm.shutdown()
with open(sys.argv[1], "w") as f:
    json.dump([o.outputs[0].token_ids for o in outs], f)
"""


@pytest.mark.torchrun
def test_torchrun_v2_equals_transformers(v2, reference, tmp_path):
    """Three ranks started by torchrun, one process each, as across machines: the broadcast goes over gloo."""
    import json
    import subprocess
    import sys

    from test_torchrun import ROOT, free_port

    script, result = tmp_path / "pipeline.py", tmp_path / "tokens.json"
    script.write_text(TORCHRUN_SCRIPT.format(prompts=PROMPTS, max_tokens=MAX_TOKENS,
                                             arrivals=[i // 4 for i in range(NUM_REQUESTS)]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "3",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(script), str(result)]
    env = dict(os.environ, PYTHONPATH=ROOT, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(result.read_text()) == reference


# -- the transport and the bookkeeping, by hand -----------------------------------
def test_in_process_group_matches_like_gloo():
    sender = InProcStageGroup(1)
    receiver = sender.for_rank(0)
    first = receiver.post(torch.full((2, 3), 9, dtype=torch.int64), 1, SAMPLED_TAG)
    sender.send(torch.tensor([[1, 2]]), 0, SAMPLED_TAG)  # to the oldest receive posted
    sender.send(torch.tensor([5, 6, 7]), 0, SAMPLED_TAG)  # kept until a receive is posted
    assert first.take().tolist() == [[1, 2, 9], [9, 9, 9]]  # a shorter message fills the front
    assert receiver.post(torch.zeros(3, dtype=torch.int64), 1, SAMPLED_TAG).take().tolist() == [5, 6, 7]
    sender.send(torch.arange(4), 0, SAMPLED_TAG)
    with pytest.raises(RuntimeError, match=r"rank 1 sent \(4,\) to rank 0 \(tag 17\), larger than the \(2,\)"):
        receiver.post(torch.zeros(2, dtype=torch.int64), 1, SAMPLED_TAG)
    with pytest.raises(RuntimeError, match="never sent"):
        receiver.post(torch.zeros(2, dtype=torch.int64), 1, SAMPLED_TAG).take()


def _exchange(sender, receiver) -> list[list[list[int]]]:
    """A receive posted before its message and one after, both for a narrower
    message than the buffer: a ``[3, 1]`` sampled-token block into a posted
    ``[3, 4]`` one (the width mismatch of PR #46994)."""
    early = receiver.post(torch.full((3, 4), -1, dtype=torch.int64), 1, SAMPLED_TAG)
    sender.send(torch.tensor([[11], [12], [13]]), 0, SAMPLED_TAG)
    sender.send(torch.tensor([[21], [22], [23]]), 0, SAMPLED_TAG)
    late = receiver.post(torch.full((3, 4), -1, dtype=torch.int64), 1, SAMPLED_TAG)
    return [early.take().tolist(), late.take().tolist()]


def test_in_process_group_delivers_what_gloo_delivers():
    """The same messages over two real gloo ranks and over ``InProcStageGroup``: the
    same buffers, a narrow message packed into the front, not spread over rows."""
    from test_parallel_state import pair

    rank0, rank1 = pair()
    gloo = _exchange(rank1, rank0)
    local = InProcStageGroup(1)
    assert _exchange(local, local.for_rank(0)) == gloo
    assert gloo[0] == [[11, 12, 13, -1], [-1] * 4, [-1] * 4]


def _batch(slots, num_computed, num_scheduled, prefill_len):
    return SimpleNamespace(idx_mapping_np=np.array(slots), num_computed_tokens_np=np.array(num_computed),
                           num_scheduled_tokens=np.array(num_scheduled), prefill_len_np=np.array(prefill_len),
                           num_reqs=len(slots), step=-1)  # the step: both sides read it off one batch


def test_a_freed_slot_never_takes_its_previous_requests_tokens():
    group = InProcStageGroup(0)
    first, last = (PPHandler(group.for_rank(r), 2, max_num_reqs=4, num_speculative_steps=2) for r in (0, 1))
    # slot 3 decodes with 2 drafts, slot 1 is a prefill chunk that does not sample, slot 0 decodes
    batch = _batch(slots=[3, 1, 0], num_computed=[7, 0, 4], num_scheduled=[3, 4, 1], prefill_len=[5, 9, 4])
    first.receive(batch)
    last.broadcast(batch, np.array([[11, 12, 13], [-1, -1, -1], [31, -1, -1]]), np.array([3, 0, 1]),
                   np.array([0, 0, 0]))
    last.broadcast_drafts(batch, np.array([[21, 22], [0, 0], [23, 24]]))
    first.on_req_idx_freed(3)  # slot 3's request finished; a new one may take the slot
    assert first.get_prev_sampled_outputs({3}) == []  # nothing for the slot's new occupant
    (out,) = first.get_prev_sampled_outputs({0})
    assert out.idx_mapping.tolist() == [-1, -1, 0]  # freed since; did not sample; applied
    assert out.sampled_tokens[2, 0] == 31 and out.draft_tokens[2].tolist() == [23, 24]
    assert out.num_sampled.tolist() == [3, 0, 1]


def test_an_entry_is_applied_when_its_request_is_next_scheduled():
    group = InProcStageGroup(0)
    first, last = (PPHandler(group.for_rank(r), 2, max_num_reqs=4, num_speculative_steps=0) for r in (0, 1))
    for slot, token in ((0, 40), (2, 41)):  # two batches, one request each
        batch = _batch(slots=[slot], num_computed=[5], num_scheduled=[1], prefill_len=[5])
        first.receive(batch)
        last.broadcast(batch, np.array([[token]]), np.array([1]), np.array([0]))
    assert first.get_prev_sampled_outputs({1}) == []  # slot 1 has nothing pending: nothing taken
    taken = first.get_prev_sampled_outputs({2})  # the newer entry, and the older one before it
    assert [o.sampled_tokens[0, 0] for o in taken] == [40, 41] and not first.queue


# -- the invariant checker on V2's state (describe_rows) --------------------------------
def _drop(field):
    """Apply the broadcast with one of its parts lost on the way."""
    get = PPHandler.get_prev_sampled_outputs

    def lossy(self, slots):
        outputs = get(self, slots)
        for o in outputs:
            if field == "everything":
                o.idx_mapping = np.full_like(o.idx_mapping, -1)
            elif field == "draft_tokens":
                o.draft_tokens = None
            else:
                o.num_rejected = np.zeros_like(o.num_rejected)
        return outputs

    return lossy


@pytest.mark.parametrize("lost,invariant,step,req", [
    ("everything", 3, 2, "req-0"),  # last_sampled_tokens never arrives: the history's last token is stale
    ("draft_tokens", 2, 2, "req-1"),  # the slot's drafts stay zero (the shape of PR #52295)
    ("num_rejected", 4, 5, "req-2"),  # the optimistic num_computed_tokens is never taken back (RFC #44697)
])
def test_the_checker_names_a_lost_part_of_the_broadcast(v2, monkeypatch, lost, invariant, step, req):
    from minispec.instruments.invariants import InvariantViolation

    llm = LLM(pipeline_parallel_size=2, speculative_config={"method": "ngram", "num_speculative_tokens": 3},
              check_invariants=True)
    prompts = PROMPTS[:4]
    with pytest.raises(InvariantViolation) as caught:
        monkeypatch.setattr(PPHandler, "get_prev_sampled_outputs", _drop(lost))
        llm.generate(prompts, SamplingParams(temperature=0, max_tokens=20), arrival_steps=[0, 0, 1, 1])
    v = caught.value.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (invariant, step, 0, req)


def test_a_v2_trace_checks_clean_offline(v2, reference):
    from minispec.instruments.invariants import check_trace

    llm = engine(3, 2, "draft_model", record=True, max_num_batched_tokens=24, num_gpu_blocks=24, max_model_len=128)
    assert generate(llm) == reference
    stages = [st for s in llm.trace.steps for st in s.stages]
    assert {st.stage for st in stages} == {0, 1, 2} and all(st.rows for st in stages)
    assert check_trace(llm.trace) == []


# -- an interrupted generate leaves nothing behind (test_interrupt.py's sweep) --------
def _interrupt_sweep(n: int):
    import test_interrupt

    test_interrupt.reference.cache_clear()  # its cached run may be V1's: the line counts differ
    try:
        outcomes = test_interrupt.sweep("all", n, check=True)
    finally:
        test_interrupt.reference.cache_clear()
    assert all(o.where for o in outcomes), "every point lies inside the run"
    assert [o for o in outcomes if o.kind != "ok"] == []


def test_an_interrupted_generate_recovers(v2):
    _interrupt_sweep(3)


@pytest.mark.slow
def test_an_interrupted_generate_recovers_anywhere(v2):
    _interrupt_sweep(14)
