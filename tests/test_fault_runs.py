"""A fault preset run and caught for the notebook (minispec/lab/faults/reproduce.py), and its
text (minispec/lab/viz/faults.py). Whether each preset bites where FAULTS says is
tests/test_fault_presets.py's; here: that run_fault reports what happened, and says so
when it is not what FAULTS expects."""

import dataclasses

import pytest

from minispec.instruments.invariants import Invariant, Violation
from minispec.lab.faults.catalogue import FAULTS, FaultPreset
from minispec.lab.faults.reproduce import FaultRun, run_fault
from minispec.lab.viz.faults import render_fault_run


@pytest.fixture(scope="module")
def stale():
    return run_fault("v2-stale-drafts")


def test_a_preset_run_is_caught_where_faults_says_and_its_fix_is_clean(stale):
    v = stale.violation
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.DRAFT_AGREEMENT, 2, 0, "A")
    assert stale.transport_error is None and stale.as_expected and stale.fixed_clean
    assert stale.trace.steps[-1].step == 2  # stopped at the first violation


def test_another_violation_is_not_as_expected(stale):
    moved = dataclasses.replace(stale, violation=dataclasses.replace(stale.violation, step=4))
    assert not moved.as_expected
    assert not dataclasses.replace(stale, violation=None).as_expected
    assert "where FAULTS says it bites: NO" in render_fault_run(moved)


def test_the_transport_error_is_compared_with_what_faults_expects():
    fault = FAULTS[FaultPreset.V2_BROADCAST_WIDTH]
    e = fault.expected
    said = f"stage {e.stage}, step {e.step}, applying the last stage's broadcast: {e.message}: expected ..."
    assert FaultRun(fault, None, said, True).as_expected
    assert not FaultRun(fault, None, said.replace("step 2", "step 3"), True).as_expected
    assert not FaultRun(fault, None, None, True).as_expected


def test_render_by_hand(stale):
    v = Violation(Invariant.SHARED_ACCOUNTING, 4, 0, "A", "num_computed_tokens=13", 14)
    run = FaultRun(FAULTS[FaultPreset.V2_OPTIMISTIC_NUM_COMPUTED], v, None, False)
    lines = render_fault_run(run).splitlines()
    assert lines[0].startswith("v2-optimistic-num-computed: non-last ranks keep the optimistic")
    assert lines[1:] == [
        "  caught: invariant 4 (shared accounting) violated at step 4, stage 0, request A",
        "    expected num_computed_tokens=13",
        "    got      14",
        "  fixed: NOT clean",
    ]
    assert "#" not in render_fault_run(run)  # the threads are the catalogue's, not the room's


def test_a_broken_history_is_shown_as_the_ends_of_both_histories(stale):
    schedule = stale.trace.step(2).schedule.all_token_ids["A"]
    v = Violation(Invariant.TOKEN_HISTORY, 2, 0, "A", "…", schedule + [7, 8])
    text = render_fault_run(dataclasses.replace(stale, violation=v), decode=lambda t: chr(ord("a") + t % 26))
    sched_line, stage_line = text.splitlines()[2:4]
    assert sched_line.startswith("    the scheduler's tokens end …") and stage_line.startswith("    stage 0's end")
    assert stage_line.endswith("hi'") and stage_line[:-3].endswith(sched_line[-7:-1])


def test_drafts_that_disagree_are_shown_decoded(stale):
    decode = {0: "?"}.get
    lines = render_fault_run(stale, decode=lambda t: decode(t, chr(ord("a") + t % 26))).splitlines()
    drafts = stale.trace.step(2).schedule.scheduled_spec_decode_tokens["A"]
    assert lines[2] == "    the scheduler's drafts " + repr("".join(chr(ord("a") + t % 26) for t in drafts))
    assert lines[3] == "    stage 0's drafts      '???'"  # the zeroed slots the stage embedded


def test_under_async_scheduling_the_resolved_values_are_shown_not_the_placeholders(stale):
    """An async run's schedule holds placeholders (-1) where the checker held the stage to what
    they stood for: decoding the schedule's drafts would print placeholders, so the violation's
    own expected (the resolved drafts, and the step they came back with) is shown."""
    async_fault = dataclasses.replace(stale.fault, scenario=dataclasses.replace(stale.fault.scenario,
                                                                                 async_scheduling=True))
    v = Violation(Invariant.DRAFT_AGREEMENT, 2, 0, "A", "draft slots [3, 84, 85] (the scheduler's once step 0 came "
                  "back)", [0, 0, 0])
    lines = render_fault_run(dataclasses.replace(stale, fault=async_fault, violation=v), decode=chr).splitlines()
    assert lines[2:4] == ["    expected draft slots [3, 84, 85] (the scheduler's once step 0 came back)",
                          "    got      [0, 0, 0]"]


def test_an_unknown_preset_is_named():
    with pytest.raises(ValueError, match=r"run_fault: 'stale': expected one of \['relay-no-seq-lens', 'relay-pairing', "
                                         r"'tree-path-not-compacted', 'v1-pp-async-column-0'"):
        run_fault("stale")
