"""The lab's one run builder: a Schedule becomes the engine it describes, and the
greedy reference is plain one-stage decoding, cached without being shared."""

import dataclasses

from minispec import LLM, SamplingParams
from minispec.lab.experiments.scenarios import PROMPTS, exercise_schedule, random_config, thread_schedule
from minispec.lab.experiments.schedule import build_llm, greedy_reference, run_schedule
from reference.reference_schedules import reference_schedule


def test_build_llm_queues_the_schedule_as_described():
    schedule = thread_schedule(num_speculative_tokens=2, max_tokens=5)
    assert not build_llm(schedule, "all").trace.steps  # queued, not run
    trace = run_schedule(schedule, "all")
    assert (trace.fixes, trace.pipeline_parallel_size) == ("all", 2)
    assert {len(d) for s in trace.steps for d in s.schedule.scheduled_spec_decode_tokens.values()} == {2}
    assert sorted(trace.outputs) == ["A", "B", "C", "D"]
    assert trace.steps[0].schedule.new_req_ids == ["A", "B"]  # C and D arrive a step later
    assert trace.steps[1].schedule.new_req_ids == ["C", "D"]
    assert all(len(t) == 5 for t in trace.outputs.values())


def test_greedy_reference_is_plain_decoding_and_callers_cannot_change_it():
    params = SamplingParams(temperature=0, max_tokens=6)
    plain = {r: o.outputs[0].token_ids for r, o in zip(PROMPTS, LLM().generate(list(PROMPTS.values()), params))}
    first = greedy_reference(PROMPTS, 6)
    assert first == plain
    first["A"].append(-1)
    assert greedy_reference(PROMPTS, 6) == plain


def test_generators_keep_their_draws():
    # the vLLM check's schedules add stop tokens and a budget to random_config's, drawing apart from it
    for seed in range(20):
        ref, rc = reference_schedule(seed), random_config(seed)
        assert dataclasses.replace(ref, name=rc.name, stop_token_ids=(), max_num_batched_tokens=64) == rc
    s = exercise_schedule(0, 2, "ngram")
    assert [r.req_id for r in s.requests] == list("ABCDEF") and list(s.arrival_steps) == sorted(s.arrival_steps)
    assert s.describe() == "random schedule 0 (PP 2, ngram drafts)"
