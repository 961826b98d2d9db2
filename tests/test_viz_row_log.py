"""The row log: what _update_states did to each stage's batch, read off the trace."""

import pytest

from minispec.lab.experiments.scenarios import batch_label, forum_thread
from minispec.lab.viz.row_log import render_row_log, row_changes


@pytest.fixture(scope="module")
def trace():
    return forum_thread("vllm-0.9.2", max_tokens=6)


def test_every_decode_request_is_removed_and_re_added_every_step(trace):
    for stage in (0, 1):
        changes = {c.step: c for c in row_changes(trace, stage)}
        assert changes[0].added == {"A": (0, "new"), "B": (1, "new")} and not changes[0].removed
        assert changes[1].removed == {"A": 0, "B": 1}
        assert changes[2].removed == {"C": 0, "D": 1}
        assert changes[2].added == {"A": (0, "re-added"), "B": (1, "re-added")}
        assert changes[3].added == {"C": (0, "re-added"), "D": (1, "re-added")}
        # no row ever stays: the persistent batch persists nothing under two batches in flight
        assert not any(c.stayed or c.moved for c in changes.values())


def test_finished_requests_are_told_apart(trace):
    last = {}
    for step in trace.steps:
        for req_id in step.schedule.num_scheduled_tokens:
            last[req_id] = step.step
    finished = {req for c in row_changes(trace, 0) for req in c.finished}
    # every request whose removal the trace saw after its last schedule
    assert finished and all(any(c.step > last[r] and r in c.removed for c in row_changes(trace, 0)) for r in finished)


def test_condense_moves_are_logged():
    # one stage; B finishes first, so condense moves a later row down into its hole
    from minispec import LLM, SamplingParams

    llm = LLM(record=True, max_num_seqs=3)
    short, long = SamplingParams(temperature=0, max_tokens=2), SamplingParams(temperature=0, max_tokens=5)
    for req_id, params in (("A", long), ("B", short), ("C", long)):
        llm.add_request("abc", params, request_id=req_id)
    llm.engine.run()
    moves = [c.moved for c in row_changes(llm.trace, 0) if c.moved]
    assert moves == [{"C": (2, 1)}]
    assert "condense C row 2 -> 1" in render_row_log(llm.trace)


def test_render_names_the_thread_batches(trace):
    text = render_row_log(trace, max_steps=3, label=batch_label)
    assert text.splitlines()[0] == "step 0 · batch_0 = {A, B}"
    assert "  stage 0: remove_request C (row 0), D (row 1) · add_request A -> row 0 (re-added), B -> row 1 (re-added)" \
        in text
