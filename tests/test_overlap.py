"""What the overlap benchmark and notebook 04 measure with: one PP=2 "mp" run
per in-flight setting, on the shipped target (the random 52M model is the
benchmark's, too slow to make in a test)."""

import os

import pytest
import torch

from minispec.config import DEFAULT_TARGET
from minispec.lab.overlap import first_batches, measure_in_flight, one_thread_per_stage, random_prompts


def overlapped(timeline) -> int:
    """How many batches stage 0 started while stage 1 was still on an earlier one."""
    last = {s.step: s for s in timeline.spans if s.stage == 1}
    return sum(1 for s in timeline.spans if s.stage == 0
               and any(other.step < s.step and other.end > s.start for other in last.values()))


@pytest.mark.slow
def test_stages_overlap_with_two_in_flight_and_never_with_one():
    prompts = random_prompts(4, 64)
    two, one = (measure_in_flight(DEFAULT_TARGET, n, prompts, max_tokens=8, repeat=2) for n in (2, 1))
    assert two.in_flight == 2 and len(two.seconds) == 2 and all(s > 0 for s in two.seconds)
    for run in (two, one):  # the timeline holds the last repeat only, both stages, in seconds
        tl = run.timeline
        assert tl.clock == "seconds" and {s.stage for s in tl.spans} == {0, 1}
        assert tl.makespan <= run.seconds[-1]
    assert overlapped(two.timeline) > 0  # how many depends on the load; one batch in flight can give none
    assert overlapped(one.timeline) == 0
    steps = sorted({s.step for s in two.timeline.spans})
    assert first_batches(two.timeline, 3) == steps[2]


def test_one_thread_per_stage_is_undone_afterwards(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    with one_thread_per_stage():
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    assert torch.get_num_threads() == before and "OMP_NUM_THREADS" not in os.environ
