"""Coverage as part of the answer (issue 36, deliverable 1): each condition is read off a run's
trace where a schedule reaches it, and not where none does; a clean answer lists what it never
exercised, with why where the scope or the engine rules it out."""

import pytest

from minispec.config import SCRIPT_REPEAT
from minispec.lab.experiments.schedule import build_llm, run_recorded
from minispec.lab.explorer.coverage import Condition, Kind, conditions
from minispec.lab.explorer.explorer import Scope, Shape, _schedule, explore, run_covered
from minispec.lab.viz.exploration import render_exploration


def shape(pp=2, blocks=None, budget=512, seqs=4, async_scheduling=False, prefix_caching=False) -> Shape:
    return Shape(pp, 3, None, blocks, budget, seqs, async_scheduling, prefix_caching)


def reached(reqs, max_tokens, engine: Shape, design=None) -> set[Condition]:
    found, covered = run_covered(_schedule(reqs, max_tokens, engine, 4), design or {})
    assert found is None, found and found.failure
    return covered


ALONE = [(0, 2, (3,))]
# two requests in a cache of 4 blocks at PP 2: the victim's batch is still in flight (an output
# delivered stale, StepRecord.stale)
PREEMPTS_IN_FLIGHT = ([(0, 5, (3,)), (1, 5, (3,))], 8, shape(blocks=4), None)
REACHING = {
    Condition(Kind.HANDOVER): ([(0, 2, (0,)), (1, 2, (0,))], 2, shape(), None),
    Condition(Kind.READD_WITH_DRAFTS): ([(0, 2, (0,)), (1, 2, (0,))], 2, shape(), None),
    Condition(Kind.PREEMPT_RESUME): ([(0, 5, (3,)), (0, 5, (3,))], 8, shape(blocks=4), None),
    Condition(Kind.PREEMPT_IN_FLIGHT): PREEMPTS_IN_FLIGHT,
    Condition(Kind.SHORT_CHUNK): ([(0, 5, (0,))], 2, shape(budget=3), None),
    Condition(Kind.PLACEHOLDERS): ([(0, 2, (3,))], 8, shape(async_scheduling=True), None),
    Condition(Kind.STAGE_PAIRING, (0, 1)): ([(0, 2, (0,)), (1, 2, (0,))], 2, shape(), None),
    Condition(Kind.STAGE_PAIRING, (0, 2)): ([(0, 2, (0,)), (1, 2, (0,)), (2, 2, (0,))], 4, shape(pp=3), None),
    Condition(Kind.REUSE_BROADCAST_PENDING): ([(0, 2, (0,)), (0, 2, (0,))], 2, shape(seqs=1), {"model_runner": "v2"}),
    Condition(Kind.REPEATED_DRAFTS): ([(0, 2, (SCRIPT_REPEAT,))], 8, shape(), None),
    # B's prompt is A's (prefix caching cuts every prompt from one text): a full hit, one token left
    Condition(Kind.NEW_WITH_DRAFTS): ([(0, 5, (0,)), (0, 5, (0,))], 2, shape(prefix_caching=True), {"model_runner": "v2"}),
    **{Condition(Kind.ACCEPTED, n): ([(0, 2, (n,))], 8, shape(), None) for n in range(4)},
}


@pytest.mark.parametrize("condition", REACHING, ids=str)
def test_each_condition_is_read_off_a_run_that_reaches_it(condition):
    reqs, max_tokens, engine, design = REACHING[condition]
    assert condition in reached(reqs, max_tokens, engine, design)


def test_one_request_alone_on_a_plain_engine_reaches_none_of_the_hard_ones():
    plain = reached(ALONE, 2, shape())
    hard = {Kind.HANDOVER, Kind.READD_WITH_DRAFTS, Kind.PREEMPT_RESUME, Kind.PREEMPT_IN_FLIGHT, Kind.SHORT_CHUNK, Kind.PLACEHOLDERS,
            Kind.STAGE_PAIRING, Kind.REUSE_BROADCAST_PENDING, Kind.REPEATED_DRAFTS, Kind.REMOTE_TAPS,
            Kind.NEW_WITH_DRAFTS}
    assert not {c for c in plain if c.kind in hard}
    # max_tokens 2: the one proposal is verified by the last step, nothing follows it
    assert not {c for c in plain if c.kind is Kind.ACCEPTED}


def test_a_finished_request_counts_no_acceptance_without_a_later_step():
    llm = build_llm(_schedule([(0, 2, (3,))], 5, shape(), 4))
    trace = run_recorded(llm)  # prefill, then one step accepts all three, and the request is done
    assert Condition(Kind.ACCEPTED, 3) not in conditions(trace, 3)


def test_nothing_breaks_says_what_it_never_exercised():
    result = explore({}, Scope(max_requests=1, max_tokens=(2,), max_num_seqs=(4,)))
    assert result.counterexample is None
    never = result.never_exercised
    assert never[Condition(Kind.PLACEHOLDERS)] == "the scope never schedules asynchronously"
    assert never[Condition(Kind.STAGE_PAIRING, (0, 2))] == "the scope runs at most 2 stages"
    assert never[Condition(Kind.HANDOVER)] is None  # reachable, not reached: one request never hands over
    assert never[Condition(Kind.PREEMPT_IN_FLIGHT)] is None  # the scheduler can (issue 37); this scope never does
    assert never[Condition(Kind.NEW_WITH_DRAFTS)] == "the scope never enables prefix caching"
    report = render_exploration(result)
    assert "never exercised: a row or slot changed hands;" in report
    assert "a request preempted with a batch of it in flight;" in report


@pytest.mark.parametrize("design,why", [("v2", None), ("v1", "model_runner='v1' takes a new request's drafts")])
def test_a_padded_first_decode_is_aimed_at_only_where_the_design_takes_one(design, why):
    scope = Scope(max_requests=2, prompt_lengths=(5,), max_tokens=(2,), arrival_steps=(0,), right_drafts=(0,),
                  max_num_seqs=(4,), enable_prefix_caching=(True,))
    result = explore({"model_runner": design}, scope)
    assert result.counterexample is None
    reached_it = Condition(Kind.NEW_WITH_DRAFTS) in result.covered
    assert reached_it == (why is None)
    if why:
        assert result.never_exercised[Condition(Kind.NEW_WITH_DRAFTS)].startswith(why)


def test_an_accepted_count_reads_as_english():
    assert [str(Condition(Kind.ACCEPTED, n)) for n in (0, 1, 2)] == [
        "0 drafts accepted, then a later step", "1 draft accepted, then a later step",
        "2 drafts accepted, then a later step"]


@pytest.mark.parametrize("scope, why", [
    (Scope(enable_prefix_caching=(True,), prompt_lengths=(2, 4)), "no two of the scope's prompts share a full block"),
    (Scope(enable_prefix_caching=(True,), max_requests=1), "no two of the scope's prompts share a full block"),
    (Scope(enable_prefix_caching=(True,)), None),
    (Scope(), "the scope never enables prefix caching"),
])
def test_why_no_first_step_is_a_padded_decode(scope, why):
    from minispec.lab.explorer.explorer import _padded_decodes

    assert _padded_decodes(scope, {"model_runner": "v2"}) == why
