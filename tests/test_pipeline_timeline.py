"""The stage timeline both executors record, and the in-flight knob that
turns the batch queue off: same tokens, no overlap."""

import pytest

from minispec import LLM, SamplingParams

PROMPTS = ["The for statement ", "A class ", "Exceptions are raised ", "x = "]
PARAMS = SamplingParams(temperature=0, max_tokens=12)
STAGGERED = [0, 1, 0, 1]  # as in the thread: two sets of requests, one step apart


def busy_ticks(timeline):
    """tick -> the stages that worked in it (in-process clock: one span is one tick)."""
    ticks = {}
    for s in timeline.spans:
        assert s.end - s.start == 1
        ticks.setdefault(s.start, []).append(s.stage)
    return ticks


def test_batch_queue_overlaps_stages_and_one_in_flight_does_not():
    overlapped = LLM(pipeline_parallel_size=2)
    tokens = [o.outputs[0].token_ids for o in overlapped.generate(PROMPTS, PARAMS, arrival_steps=STAGGERED)]
    serial = LLM(pipeline_parallel_size=2, max_concurrent_batches=1)
    assert [o.outputs[0].token_ids for o in serial.generate(PROMPTS, PARAMS, arrival_steps=STAGGERED)] == tokens
    assert max(len(v) for v in busy_ticks(overlapped.timeline()).values()) == 2
    assert max(len(v) for v in busy_ticks(serial.timeline()).values()) == 1
    # Same work (a batch visits both stages) in fewer ticks when two are in flight.
    assert overlapped.timeline().makespan < serial.timeline().makespan
    assert overlapped.timeline().idle_fraction(0) < serial.timeline().idle_fraction(0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_max_concurrent_batches_is_validated(bad):
    with pytest.raises(ValueError, match=rf"max_concurrent_batches={bad!r}: expected an integer >= 1 or None"):
        LLM(max_concurrent_batches=bad)


@pytest.mark.slow
def test_mp_timeline_is_measured_and_causal():
    with LLM(pipeline_parallel_size=3, distributed_executor_backend="mp") as llm:
        llm.generate(PROMPTS, PARAMS, arrival_steps=STAGGERED)
        timeline = llm.timeline()
    assert timeline.clock == "seconds"
    steps = {s.step for s in timeline.spans}
    assert sorted((s.step, s.stage) for s in timeline.spans) == [(n, r) for n in sorted(steps) for r in range(3)]
    skew = 0.05  # each rank's clock starts at a barrier, not at the same instant
    for n in steps:
        spans = [timeline.span(n, r) for r in range(3)]
        assert all(s.start < s.end for s in spans)
        assert len({s.req_ids for s in spans}) == 1
        # A stage starts a batch only after the stage before has sent it on.
        assert all(b.start > a.end - skew for a, b in zip(spans, spans[1:]))
        assert all(s.wait >= 0 for s in spans)
    for r in range(3):  # one batch at a time on each stage
        mine = sorted((s for s in timeline.spans if s.stage == r), key=lambda s: s.start)
        assert all(b.start >= a.end for a, b in zip(mine, mine[1:]))
        assert 0 < timeline.idle_fraction(r) < 1
