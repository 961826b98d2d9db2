"""The in-flight family (issue 22 §3; minispec/lab/faults/in_flight.py): each candidate's
outcome agrees with the fault presets, its threads are in the thread table, and the preset
built without async scheduling, ``v2-drafts-posted-twice``, stops where ``FAULTS`` says at
every pipeline depth, clean without the fault. (``tests/test_fault_presets.py`` runs it on
its own scenario with the other presets.)"""

from __future__ import annotations

import dataclasses

import pytest

from minispec.distributed.parallel_state import MessageMismatch
from minispec.instruments.invariants import Invariant, check_trace
from minispec.lab.experiments.schedule import build_llm, run_recorded, schedule_reference
from minispec.lab.faults.catalogue import EVERY_FAULT, FAULTS, FaultPreset, TransportError, V1FaultPreset
from minispec.lab.faults.in_flight import FAMILY, Candidate, Outcome
from minispec.lab.records.threads import references, thread
from minispec.v1.worker.switches import ModelRunner

TWICE = FaultPreset.V2_DRAFTS_POSTED_TWICE


def test_each_candidate_agrees_with_the_presets_and_the_thread_table():
    for c in FAMILY:
        cited = references(c.reference)
        assert cited and all(thread(*ref) for ref in cited), c.reference
        if c.outcome in (Outcome.PRESET, Outcome.SAME_AS):
            fault = EVERY_FAULT[c.preset]
            assert fault.design in c.designs, c.reference
            # a candidate that needs async scheduling bites in a scenario that schedules asynchronously
            assert c.needs_async == fault.scenario.async_scheduling, c.reference
    built = {c.preset for c in FAMILY if c.outcome is Outcome.PRESET}
    assert built == {TWICE, *V1FaultPreset}
    assert {c.designs for c in FAMILY if c.preset in set(V1FaultPreset)} == {(ModelRunner.V1,)}
    with pytest.raises(ValueError, match="a preset is expected exactly for PRESET and SAME_AS"):
        Candidate("vLLM #56956", "", (), False, "", Outcome.NOT_HERE, TWICE)


def _at_depth(pp: int):
    return dataclasses.replace(FAULTS[TWICE].scenario, pipeline_parallel_size=pp)


def _first_decode(trace, req_id: str) -> int:
    """The step of ``req_id``'s first decode on stage 0: the second step that schedules it."""
    steps = [st.step for s in trace.steps for st in s.stages if st.stage == 0
             for r in st.rows if r.req_id == req_id and r.num_scheduled_tokens > 0]
    return steps[1]


@pytest.mark.parametrize("pp", [2, 3, 4])
def test_the_copy_is_paired_with_the_next_batchs_first_receive_at_every_depth(pp):
    """The last stage's second copy of batch_0's ``[n, k]`` drafts is the next message each
    non-last stage takes, into the ``[n, k + 1]`` receive it posted for batch_1's sampled
    tokens: stage 0 stops when it first applies batch_1's broadcast, at batch_1's first
    decode. Nothing masks it at PP = 2: every stage posts one drafts receive per batch
    whatever the depth, so the copy is always one too many."""
    expected = FAULTS[TWICE].expected
    assert isinstance(expected, TransportError)
    schedule = _at_depth(pp)
    fixed = run_recorded(build_llm(schedule, model_runner="v2"))  # invariants checked live: none fired
    assert fixed.outputs == schedule_reference(schedule)
    step = _first_decode(fixed, "C")
    assert pp > 2 or (step, 0) == (expected.step, expected.stage)
    with pytest.raises(MessageMismatch) as caught:
        build_llm(schedule, model_runner="v2", faults=TWICE).engine.run()
    k = schedule.num_speculative_tokens
    assert str(caught.value).startswith(
        f"stage 0, step {step}, applying the last stage's broadcast: rank {pp - 1} sent a [2, {k}] torch.int64 "
        f"message to rank 0 (tag 17), which posted a [2, {k + 1}] torch.int64 receive")
    assert (caught.value.sent, caught.value.posted) == ((2, k), (2, k + 1))
    # invariant 7 names it: on stage 0's channel from the last stage, the receive posted for
    # batch_1's step (1) got the copy of batch_0's drafts (step 0), at the same place on the channel
    v = caught.value.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.MESSAGE_SCHEDULE, 1, 0, f"rank {pp - 1} -> rank 0, "
                                                                                           "tag 17")
    assert (v.expected.step, v.actual.step, v.actual.seq) == (1, 0, v.expected.seq)


def test_a_request_is_preempted_with_a_batch_in_flight(monkeypatch):
    """vLLM PR #49620's late output arises here (``FAMILY``: HANDLED): on a preempting schedule
    with two batches in flight, some victims have one in flight, and the recorded run breaks no
    invariant (their outputs come back stale and are kept, as vLLM 0.30.0 keeps them)."""
    from minispec.lab.experiments.scenarios import exercise_schedule
    from minispec.v1.core.sched.scheduler import Scheduler

    victims = []
    preempt = Scheduler._preempt

    def checked(self, request):
        victims.append((request.request_id, request.num_inflight_batches))
        preempt(self, request)

    monkeypatch.setattr(Scheduler, "_preempt", checked)
    trace = run_recorded(build_llm(exercise_schedule(3, 2, "ngram")))
    assert any(n > 0 for _, n in victims), victims
    assert check_trace(trace) == []


def test_under_async_scheduling_too_the_copy_breaks_invariant_7_and_the_fix_is_greedy():
    """With async scheduling (pp_size + 1 batches in flight) the four requests run together;
    the receive posted for the next step with a sample (2) gets step 0's copy. ``generate``
    records nothing, so the fixed run is checked against greedy output (its recorded runs:
    ``tests/test_invariants_async.py``)."""
    from minispec import LLM, SamplingParams
    from minispec.lab.experiments.schedule import greedy_reference

    s = FAULTS[TWICE].scenario
    prompts = {r.req_id: r.prompt for r in s.requests}

    def generate(faults):
        llm = LLM(pipeline_parallel_size=2, model_runner="v2", faults=faults, async_scheduling=True, seed=0,
                  max_num_seqs=s.max_num_seqs, speculative_config={"method": s.method,
                                                                   "num_speculative_tokens": s.num_speculative_tokens})
        outs = llm.generate(list(prompts.values()), SamplingParams(temperature=0, max_tokens=s.max_tokens))
        return dict(zip(prompts, (o.outputs[0].token_ids for o in outs)))

    with pytest.raises(MessageMismatch) as caught:
        generate(TWICE)
    v = caught.value.violation
    assert (v.invariant, v.stage, v.req_id) == (Invariant.MESSAGE_SCHEDULE, 0, "rank 1 -> rank 0, tag 17")
    assert (v.expected.step, v.actual.step, v.actual.seq) == (2, 0, v.expected.seq)
    assert generate(None) == greedy_reference(prompts, s.max_tokens)
