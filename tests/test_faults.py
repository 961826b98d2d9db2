"""The July-2025 faults on the forum thread's scenario, pinned to hand-worked values.

Hand-worked, stage 0 (the first pipeline stage), k = 3:
  step 0  batch_0 prefills: A -> row 0, B -> row 1.
  step 1  batch_1 prefills: A, B are not scheduled, so they are removed; C takes
          row 0 and D row 1, and their prompts overwrite the rows' first slots.
  step 2  batch_0 decodes: C, D are removed; A is re-added into row 0 and B into
          row 1. add_request copies prompt + the one output token, so A's history
          ends at position len(A) + 1 and its three draft slots keep what C's
          prompt left there: C[11:14] = "tem". Likewise B's slots hold D[13:16] = "e r".
"""

import pytest

from minispec.config import DEFAULT_TARGET
from minispec.instruments.invariants import check_trace
from minispec.lab.experiments.scenarios import FIRST_DECODE, PROMPTS, forum_thread, forum_thread_reference
from minispec.transformers_utils.tokenizer import load_tokenizer
from minispec.v1.worker.runner_fixes import Preset


@pytest.fixture(scope="module")
def traces():
    return {preset: forum_thread(preset) for preset in Preset}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(DEFAULT_TARGET)


def stage0_row(trace, req_id, step=FIRST_DECODE):
    return trace.step(step).stages[0].row_of(req_id)


def test_hand_worked_stale_slots(traces, tok):
    assert PROMPTS["C"][11:14] == "tem" and PROMPTS["D"][13:16] == "e r"
    trace = traces["vllm-0.9.2"]
    a, b = stage0_row(trace, "A"), stage0_row(trace, "B")
    assert (a.row, a.path, b.row, b.path) == (0, "re-added", 1, "re-added")
    assert a.draft_slots == tok.encode("tem").ids
    assert b.draft_slots == tok.encode("e r").ids
    scheduled = trace.step(FIRST_DECODE).schedule.scheduled_spec_decode_tokens
    assert a.draft_slots != scheduled["A"]
    # The last stage verifies exactly those stale tokens, read from its input_ids.
    last = trace.step(FIRST_DECODE).stages[-1]
    assert last.verified_drafts["A"] == tok.encode("tem").ids


def test_first_violation_is_draft_agreement_at_first_decode(traces):
    first = check_trace(traces["vllm-0.9.2"])[0]
    assert (first.invariant, first.step, first.stage, first.req_id) == (2, FIRST_DECODE, 0, "A")


def test_fix_1_writes_the_scheduled_drafts(traces):
    for preset in ("vllm-0.14", "all"):
        trace = traces[preset]
        scheduled = trace.step(FIRST_DECODE).schedule.scheduled_spec_decode_tokens
        for req_id in ("A", "B"):
            assert stage0_row(trace, req_id).draft_slots == scheduled[req_id]


def test_vllm_0_14_breaks_token_history_once_drafts_are_accepted(traces):
    trace = traces["vllm-0.14"]
    history = [v for v in check_trace(trace) if v.invariant == 3]
    assert history, "fix 1 alone should expose fault 2"
    first = history[0]
    assert first.stage == 0  # the last stage samples itself and keeps a true history
    # Before that step, the same request had drafts accepted, and no earlier
    # step broke any invariant for it.
    earlier = [s for s in trace.steps if s.step < first.step and first.req_id in s.num_accepted]
    assert any(s.num_accepted[first.req_id] > 0 for s in earlier)
    assert not [v for v in check_trace(trace) if v.step < first.step]


def test_all_fixes_hold_every_invariant_and_accept_more(traces):
    assert check_trace(traces["all"]) == []
    assert traces["all"].stats["acceptance_rate"] > 5 * traces["vllm-0.9.2"].stats["acceptance_rate"]
    assert traces["all"].stats["target_forwards"] < traces["vllm-0.9.2"].stats["target_forwards"]


def test_all_fixes_equal_plain_greedy(traces):
    reference = forum_thread_reference(max_tokens=16)
    assert traces["all"].outputs == reference
    assert traces["vllm-0.14"].outputs != reference
