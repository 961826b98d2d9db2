"""The workshop's checker: a gallery of plausible wrong solutions, each with the
diagnosis it must get (its first line, exactly), and the reference solutions passing.

Every wrong solution below is something a learner could well write; the expected
lines were read off the checker and checked by hand against the scenario (A's
prompt "A list is " is 10 tokens, so at batch_0's first decode A's history ends at
11 and its draft slots are 11-13; C's prompt left `tem` there).
"""

import re

import numpy as np
import pytest
import torch

from minispec.instruments.invariants import Invariant
from minispec.lab.exercises import checkers as ex
from minispec.lab.exercises import solutions

# -- fix 1: write_spec_tokens(runner, row, spec_token_ids) ---------------------------


def fix1_written_at_num_tokens(runner, row, spec_token_ids):
    batch = runner.input_batch
    batch.num_tokens[row] += len(spec_token_ids)
    start = batch.num_tokens[row]
    batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = spec_token_ids


def fix1_num_tokens_not_advanced(runner, row, spec_token_ids):
    batch = runner.input_batch
    start = batch.num_tokens_no_spec[row]
    batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = spec_token_ids


def fix1_only_last_stage(runner, row, spec_token_ids):
    if runner.is_last_rank:  # "only the last stage verifies drafts"
        solutions.write_spec_tokens(runner, row, spec_token_ids)


def fix1_written_at_num_computed(runner, row, spec_token_ids):
    batch = runner.input_batch
    start = batch.num_computed_tokens_cpu[row]
    batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = spec_token_ids
    batch.num_tokens[row] = batch.num_tokens_no_spec[row] + len(spec_token_ids)


def fix1_advances_no_spec(runner, row, spec_token_ids):
    solutions.write_spec_tokens(runner, row, spec_token_ids)
    runner.input_batch.num_tokens_no_spec[row] = runner.input_batch.num_tokens[row]


def fix1_after_computed_plus_one(runner, row, spec_token_ids):
    # right for a decode (one token computed now), wrong for a resumed request's prefill chunk
    batch = runner.input_batch
    start = batch.num_computed_tokens_cpu[row] + 1
    batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = spec_token_ids
    batch.num_tokens[row] = start + len(spec_token_ids)


def fix1_wrong_row(runner, row, spec_token_ids):
    batch = runner.input_batch
    other = 1 - row if row < 2 else 0  # the neighbour's row: a mix-up of row and request
    start = batch.num_tokens_no_spec[other]
    batch.token_ids_cpu[other, start : start + len(spec_token_ids)] = spec_token_ids
    batch.num_tokens[other] = start + len(spec_token_ids)


def fix1_typo(runner, row, spec_token_ids):
    runner.input_batch.token_ids[row, :3] = spec_token_ids


# -- fix 2: take_relayed_tokens(state, num_computed_tokens, new_token_ids) ------------


def fix2_relayed_only(state, num_computed_tokens, new_token_ids):
    return new_token_ids


def fix2_all_drafts(state, num_computed_tokens, new_token_ids):
    return state.spec_token_ids + new_token_ids


def fix2_last_drafts(state, num_computed_tokens, new_token_ids):
    accepted = num_computed_tokens - state.num_tokens
    return state.spec_token_ids[-accepted:] + new_token_ids if accepted > 0 else new_token_ids


def fix2_appends_itself(state, num_computed_tokens, new_token_ids):
    tokens = solutions.take_relayed_tokens(state, num_computed_tokens, new_token_ids)
    state.output_token_ids.extend(tokens)
    return tokens


def fix2_returns_nothing(state, num_computed_tokens, new_token_ids):
    state.spec_token_ids[: num_computed_tokens - state.num_tokens] + new_token_ids


def fix2_natural(state, num_computed_tokens, new_token_ids):
    # right whenever drafts were accepted; a resumed request relays a recompute chunk instead
    return state.spec_token_ids[: num_computed_tokens - state.num_tokens] + new_token_ids


# -- the recovered distribution: recovered_distribution(p, q) ------------------------


def recovered_not_normalised(p, q):
    return (p - q).clamp_min(0)


def recovered_from_p(p, q):
    return p


def recovered_not_clamped(p, q):
    return (p - q) / (p - q).sum()


def recovered_flipped(p, q):
    residual = (q - p).clamp_min(0)
    return residual / residual.sum()


# -- Model Runner V2: apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)


def broadcast_no_skip(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):  # "every row is a request"
        n, end = num_sampled[i], states.total_len[slot]
        states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]
        states.total_len[slot] = end + n
        states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
        states.num_computed_tokens[slot] -= num_rejected[i]
        states.draft_tokens[slot] = draft_tokens[i]


def broadcast_vectorised(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    states.draft_tokens[slots] = draft_tokens  # one line for the drafts, -1 rows included
    states.num_computed_tokens[slots[slots >= 0]] -= num_rejected[slots >= 0]
    for i, slot in enumerate(slots):
        if slot >= 0:
            n, end = num_sampled[i], states.total_len[slot]
            states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]
            states.total_len[slot] = end + n
            states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]


def broadcast_no_take_back(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):  # the shape of RFC #44697: the optimistic count stays
        if slot >= 0:
            n, end = num_sampled[i], states.total_len[slot]
            states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]
            states.total_len[slot] = end + n
            states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
            states.draft_tokens[slot] = draft_tokens[i]


def broadcast_advance_by_sampled(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    keep = slots >= 0  # "the scheduler advances by what was sampled": so does this stage, again
    states.num_computed_tokens[slots[keep]] += num_sampled[keep]


def broadcast_no_drafts(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):  # the shape of PR #52295: drafts never reach this stage
        if slot >= 0:
            n, end = num_sampled[i], states.total_len[slot]
            states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]
            states.total_len[slot] = end + n
            states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
            states.num_computed_tokens[slot] -= num_rejected[i]


def broadcast_first_token(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    keep = slots >= 0
    states.last_sampled_tokens[slots[keep]] = sampled_tokens[keep, 0]


def broadcast_off_by_one(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    for i, slot in enumerate(slots):
        if slot >= 0 and num_sampled[i] < sampled_tokens.shape[1]:
            states.last_sampled_tokens[slot] = sampled_tokens[i, num_sampled[i]]


def broadcast_no_last_sampled(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    kept = states.last_sampled_tokens.copy()  # "the history has it already"
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    states.last_sampled_tokens[:] = kept


def broadcast_no_history(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):
        if slot >= 0:
            states.last_sampled_tokens[slot] = sampled_tokens[i, num_sampled[i] - 1]
            states.num_computed_tokens[slot] -= num_rejected[i]
            states.draft_tokens[slot] = draft_tokens[i]


def broadcast_no_total_len(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):
        if slot >= 0:
            n, end = num_sampled[i], states.total_len[slot]
            states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]  # and total_len?
            states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
            states.num_computed_tokens[slot] -= num_rejected[i]
            states.draft_tokens[slot] = draft_tokens[i]


def broadcast_whole_rows(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    for i, slot in enumerate(slots):  # the padded row appended whole, -1s and all
        if slot >= 0:
            end, width = states.total_len[slot] - num_sampled[i], sampled_tokens.shape[1]
            states.all_token_ids[slot, end : end + width] = sampled_tokens[i]
            states.total_len[slot] = end + width


def broadcast_rows_for_slots(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    live = np.flatnonzero(slots >= 0)  # the batch's rows taken for slots
    solutions.apply_broadcast(states, np.where(slots >= 0, np.arange(len(slots)), -1), sampled_tokens,
                              num_sampled, num_rejected, draft_tokens) if len(live) else None


def broadcast_typo(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    states.last_sampled_token[slots] = sampled_tokens[:, 0]


def broadcast_whole_array(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):
        if slot < 0:
            continue
        n = num_sampled[i]
        states.all_token_ids[slot] = sampled_tokens[i]  # the whole row replaced
        states.total_len[slot] += n
        states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
        states.num_computed_tokens[slot] -= num_rejected[i]
        states.draft_tokens[slot] = draft_tokens[i]


def broadcast_one_past(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):
        if slot < 0:
            continue
        n, end = num_sampled[i], states.total_len[slot]
        states.all_token_ids[slot, end + 1 : end + 1 + n] = sampled_tokens[i, :n]  # one position too far
        states.total_len[slot] = end + n
        states.last_sampled_tokens[slot] = sampled_tokens[i, n - 1]
        states.num_computed_tokens[slot] -= num_rejected[i]
        states.draft_tokens[slot] = draft_tokens[i]


GALLERY = [
    (ex.check_fix1, fix1_written_at_num_tokens,
     'not quite: step 2, stage 0, request A: your draft slots 11–13 hold `tem`, the scheduler sent ` st` — the drafts were written at num_tokens (14), which already counts them; write at num_tokens_no_spec (11)'),
    (ex.check_fix1, fix1_num_tokens_not_advanced,
     "not quite: step 2, stage 0, request A: the draft slots are right, but num_tokens[0] is still 11, not 14: the row does not own its drafts (condense moves only num_tokens slots, as vLLM's does); advance it by len(spec_token_ids)"),
    (ex.check_fix1, fix1_only_last_stage,
     'not quite: step 2, stage 0, request A: your draft slots 11–13 hold `tem`, the scheduler sent ` st` — your function wrote nothing into this row; every stage needs the drafts: stage 0 embeds them, the last stage verifies them'),
    (ex.check_fix1, fix1_written_at_num_computed,
     'not quite: step 2, stage 0, request A: you overwrote position 10 of the history (`a` → ` `): the drafts go after it, from num_tokens_no_spec = 11'),
    (ex.check_fix1, fix1_advances_no_spec,
     'not quite: step 2, stage 0, request A: you changed num_tokens_no_spec[0] from 11 to 14: drafts are not history (they may be rejected); leave it and advance num_tokens'),
    (ex.check_fix1, fix1_after_computed_plus_one,
     'not quite: right on the thread scenario, but on random schedule 0 (PP 2, ngram drafts, 4 preemptions): step 33, stage 0, request B: num_tokens[1] is 1 after your call; expected 30 (num_tokens_no_spec + drafts) — this row got no drafts: it is recomputing after a preemption (num_computed_tokens 0, history up to 30); count from num_tokens_no_spec, not num_computed_tokens'),
    (ex.check_fix1, fix1_wrong_row,
     "not quite: step 2, stage 0, request A: you wrote into row 1 (a free row), not row 0, the row add_request gave A: index token_ids_cpu and num_tokens with row"),
    (ex.check_fix1, fix1_typo,
     "not quite: step 2, stage 0, request A: your fix1_typo raised AttributeError: 'InputBatch' object has no attribute 'token_ids'"),
    (ex.check_fix2, fix2_all_drafts,
     "not quite: step 4, stage 0, request A: you appended ` ste` (4 tokens); the scheduler's history has ` se` (3 tokens) at positions 11–13 — you took all 3 drafts, but only 2 were accepted (num_computed_tokens 13 − num_tokens 11): take the first 2"),
    (ex.check_fix2, fix2_relayed_only,
     "not quite: step 4, stage 0, request A: you appended `e` (1 token); the scheduler's history has ` se` (3 tokens) at positions 11–13 — the stage was 3 tokens behind (num_computed_tokens 13 + 1 relayed − num_tokens 11): the 2 tokens accepted last step are missing; they are the first drafts in state.spec_token_ids"),
    (ex.check_fix2, fix2_last_drafts,
     "not quite: step 4, stage 0, request A: you appended `ste` (3 tokens); the scheduler's history has ` se` (3 tokens) at positions 11–13 — you took the last 2 drafts; the accepted ones are a prefix: take the first 2"),
    (ex.check_fix2, fix2_appends_itself,
     'not quite: step 2, stage 0, request A: you changed state.output_token_ids yourself: return the tokens instead; the runner appends them'),
    (ex.check_fix2, fix2_returns_nothing,
     'not quite: step 2, stage 0, request A: your function returned None: return the list of token ids to append'),
    (ex.check_fix2, fix2_natural,
     "not quite: right on the thread scenario, but on random schedule 0 (PP 2, ngram drafts, 1 preemption): step 33, stage 0, request B: you appended `The return statement is a sequ` (30 tokens); the scheduler's history has `u` (1 token) at positions 29–29 — this request was resumed after a preemption: the scheduler is recomputing it, so new_token_ids is a recompute chunk, the 30 tokens at positions 0–29, and the stage already holds 29 (num_computed_tokens − num_tokens is −29: nothing was accepted); compare where the chunk ends, num_computed_tokens + len(new_token_ids) = 30, with state.num_tokens = 29, and append only what lies past it, new_token_ids[-1:]"),
    (ex.check_broadcast, broadcast_no_take_back,
     "not quite: step 4, stage 0, request A: slot 3's num_computed_tokens is 14 where the last stage's is 13: the 1 rejected draft was not taken back (this stage counted the whole query, drafts included, at its own forward)"),
    (ex.check_broadcast, broadcast_advance_by_sampled,
     "not quite: step 2, stage 0, request A: slot 3's num_computed_tokens is 11 where the last stage's is 10: this stage counted the whole query, drafts included, at its own forward (10 already); nothing was rejected, so nothing is left to change"),
    (ex.check_broadcast, broadcast_no_drafts,
     "not quite: step 2, stage 0, request A: slot 3 holds drafts [0, 0, 0] but the last stage proposed ` st` for A (the zeros add_request left): this stage embeds the slot's draft_tokens at A's next decode; copy draft_tokens[0] into it"),
    (ex.check_broadcast, broadcast_first_token,
     "not quite: step 4, stage 0, request A: slot 3's last_sampled_tokens is ` `, the first of the 3 tokens ` se` the last stage sampled for A; its next decode embeds the last, `e`"),
    (ex.check_broadcast, broadcast_off_by_one,
     "not quite: step 2, stage 0, request A: slot 3's last_sampled_tokens is -1, padding: the last stage sampled `a` for A, and sampled_tokens[0] is padded with -1 after its num_sampled[0] = 1; the last token is sampled_tokens[0, num_sampled[0] - 1]"),
    (ex.check_broadcast, broadcast_no_last_sampled,
     "not quite: step 2, stage 0, request A: slot 3's last_sampled_tokens still holds 0, as no broadcast has written it, but the last stage sampled `a` for A: A's next decode embeds it first"),
    (ex.check_broadcast, broadcast_no_history,
     "not quite: step 2, stage 0, request A: slot 3's history (request A) still has 10 tokens where the last stage's has 11: append the 1 sampled token `a` at all_token_ids[3, total_len[3]:] and advance total_len[3] by num_sampled[0]"),
    (ex.check_broadcast, broadcast_no_total_len,
     "not quite: step 2, stage 0, request A: the 1 sampled token `a` is in all_token_ids[3, 10:11], but total_len[3] "
     "is still 10: advance it by num_sampled[0] = 1"),
    (ex.check_broadcast, broadcast_whole_rows,
     "not quite: step 2, stage 0, request A: slot 3's history has 14 tokens where the last stage's has 11: you appended all 4 entries of sampled_tokens[0], [66, -1, -1, -1]; only the first num_sampled[0] = 1 are tokens, the rest is -1 padding"),
    (ex.check_broadcast, broadcast_rows_for_slots,
     "not quite: step 2, stage 0, request D: you changed last_sampled_tokens of slot 0 (request D's), a slot this broadcast does not cover: row 0 is for slot 3 (request A); index the state with slots[i], not with the row i"),
    (ex.check_broadcast, broadcast_no_skip,
     "not quite: right on the thread scenario, but on random schedule 0 (PP 2, ngram drafts, 1 preemption): step 35, stage 0, request C: row 0 of the broadcast has slot -1, which means skip it (its request left its slot after that batch ran, or it sampled nothing), but numpy reads index -1 as the last slot: you changed last_sampled_tokens of slot 15 (request C's)"),
    (ex.check_broadcast, broadcast_vectorised,
     "not quite: right on the thread scenario, but on random schedule 1 (PP 3, draft_model drafts, 1 preemption): step 18, stage 0, request C: row 0 of the broadcast has slot -1, which means skip it (its request left its slot after that batch ran, or it sampled nothing), but numpy reads index -1 as the last slot: you changed draft_tokens of slot 15 (request C's)"),
    (ex.check_broadcast, broadcast_whole_array,
     "not quite: step 2, stage 0, request A: your broadcast_whole_array raised ValueError: could not broadcast input "
     "array from shape (4,) into shape (512,) — you assigned (4,) values to a place that holds (512,): a whole row or "
     "array where a slice was meant; write only the new entries, e.g. all_token_ids[slot, start : start + n]"),
    (ex.check_broadcast, broadcast_one_past,
     "not quite: step 2, stage 0, request A: you wrote the 1 sampled token `a` at all_token_ids[3, 11:12], 1 position "
     "past the end of A's history: they go from total_len[3] = 10"),
    (ex.check_broadcast, broadcast_typo,
     "not quite: step 2, stage 0, request A: your broadcast_typo raised AttributeError: 'RequestState' object has no attribute 'last_sampled_token'"),
    (ex.check_recovered, recovered_not_normalised,
     'not quite: case 1 of 3: your distribution sums to 0.632, not 1'),
    (ex.check_recovered, recovered_from_p,
     'not quite: case 1 of 3: you resample from p itself: tokens the draft already proposes too often then come out too often; after a rejection only the part of p the draft did not cover may be drawn'),
    (ex.check_recovered, recovered_not_clamped,
     'not quite: case 1 of 3: your distribution has negative entries: p − q is negative where the draft likes a token more than the target does'),
    (ex.check_recovered, recovered_flipped,
     'not quite: case 1 of 3: you normalised the part of q above p: the residual is the part of the target the draft did not cover'),
]



@pytest.fixture(autouse=True)
def first_misses(monkeypatch):
    """Each test starts as a learner's first try: check_recovered's hints grow with the misses."""
    monkeypatch.setattr(ex, "_MISSES", {})


@pytest.mark.parametrize("check,wrong,first_line", GALLERY, ids=[w.__name__ for _, w, _ in GALLERY])
def test_wrong_solution_gets_its_diagnosis(check, wrong, first_line):
    report = check(wrong)
    assert not report.passed
    assert report.lines[0] == first_line


def test_the_formula_comes_with_the_second_miss_not_the_first():
    first, second = ex.check_recovered(recovered_not_normalised), ex.check_recovered(recovered_not_normalised)
    assert "max(0, p − q)" not in first.lines[0]
    assert second.lines[0] == "not quite: case 1 of 3: your distribution sums to 0.632, not 1; divide max(0, p − q) by its sum"


def test_a_wrong_distribution_prints_rounded_numbers():
    def recovered_sharpened(p, q):  # sums to 1, but squares the residual: the wrong tokens come out
        r = (p - q).clamp_min(0) ** 2
        return r / r.sum()

    ex.check_recovered(recovered_sharpened)
    line = ex.check_recovered(recovered_sharpened).lines[0]
    assert line.startswith("not quite: case 1 of 3: token ") and "; normalise max(0, p − q), here [" in line
    assert not re.search(r"\d\.\d{4,}", line), line  # no 16-digit floats


@pytest.mark.parametrize("invariant", [3, "3", "invariant 3", "token history", "Token History", "TOKEN_HISTORY",
                                       "3 (token history)", Invariant.TOKEN_HISTORY])
def test_fault2_takes_the_invariant_by_number_or_name(invariant):
    report = ex.check_fault2({"invariant": invariant, "step": 4, "stage": 0, "request": "A"})
    assert report.lines[0] == "correct: fix 1 alone first breaks invariant 3 (token history) at step 4, stage 0, request A"


def test_fault2_a_wrong_invariant_by_name_is_still_wrong():
    report = ex.check_fault2({"invariant": "shared accounting", "step": 4, "stage": 0, "request": "A"})
    assert report.lines[0].startswith("not quite: the invariant is wrong")


def test_a_learner_exception_shows_the_learner_line():
    report = ex.check_fix1(fix1_typo)
    line = fix1_typo.__code__.co_firstlineno + 1
    assert report.lines[1] == f"  line {line}: runner.input_batch.token_ids[row, :3] = spec_token_ids"
    assert len(report.lines) == 2  # no engine frames


def test_a_failing_fix_draws_the_failing_step():
    report = ex.check_fix1(fix1_only_last_stage)
    titles = " ".join(ax.get_title(loc) for ax in report.figure.axes for loc in ("left", "center", "right"))
    assert "step 2" in titles and "stage 0" in titles


@pytest.mark.parametrize("check,wrong", [(ex.check_broadcast, broadcast_no_total_len),
                                         (ex.check_broadcast, broadcast_one_past),
                                         (ex.check_fix1, fix1_num_tokens_not_advanced)])
def test_a_mistake_the_rows_do_not_show_comes_without_a_figure_of_sound_rows(check, wrong):
    # the call is caught before its mistake reaches token_ids_cpu: the step's strip would show
    # every row ✓ under "not quite" (the dry run's §8 finding); the first line says what is wrong
    report = check(wrong)
    assert report.lines[0] == dict((w, line) for _, w, line in GALLERY)[wrong]
    assert report.figure is None


def test_a_mistake_the_rows_show_keeps_its_figure():
    report = ex.check_broadcast(broadcast_off_by_one)
    verdicts = [t.get_text() for ax in report.figure.axes for t in ax.texts if t.get_text().startswith("✗ ")]
    assert verdicts == ["✗ history wrong", "✗ history wrong"]


@pytest.mark.parametrize("check,solution", [
    (ex.check_fix1, solutions.write_spec_tokens), (ex.check_fix2, solutions.take_relayed_tokens),
    (ex.check_recovered, solutions.recovered_distribution), (ex.check_draft_slots, solutions.draft_slots),
    (ex.check_acceptance, solutions.acceptance), (ex.check_fault2, solutions.fault2),
    (ex.check_broadcast, solutions.apply_broadcast),
])
def test_reference_solutions_pass(check, solution):
    report = check(solution)
    assert report.passed, str(report)
    assert report.lines[0].startswith("correct: ")


def test_the_broadcast_exercise_runs_model_runner_v2_and_calls_the_learner_on_non_last_stages():
    """The hook is called by every non-last stage (stages 0 and 1 with PP 3) and never by the
    last, which samples itself."""
    from minispec.lab.experiments.schedule import build_llm
    from minispec.v1.worker.gpu.model_runner import GPUModelRunner

    called = set()

    def counted(states, *args):
        called.add(id(states))
        solutions.apply_broadcast(states, *args)

    llm = build_llm(ex.SCHEDULES[1], ex.RunnerFixesV2(apply_broadcast=counted), model_runner="v2")
    runners = llm.engine.executor.runners
    assert {type(r) for r in runners} == {GPUModelRunner} and len(runners) == 3
    llm.engine.run()
    assert called == {id(r.req_states) for r in runners[:-1]}


def broadcast_counted_from_the_history(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    for i, slot in enumerate(slots):  # right too: after a sample, all but the newest token are computed
        if slot >= 0:
            n, end = num_sampled[i], states.total_len[slot]
            states.all_token_ids[slot, end : end + n] = sampled_tokens[i, :n]
            states.total_len[slot] = end + n
            states.last_sampled_tokens[slot] = states.all_token_ids[slot, end + n - 1]
            states.num_computed_tokens[slot] = states.total_len[slot] - 1
            states.draft_tokens[slot] = draft_tokens[i]


def test_another_right_answer_passes_the_broadcast_check():
    """The checker judges the slots, not the code: a count rebuilt from the history is right."""
    assert ex.check_broadcast(broadcast_counted_from_the_history).passed


def test_a_slot_reused_by_a_new_request_names_its_previous_occupant():
    """By hand: request C held slot 3 and sampled `x` there; A now holds it, and its first
    broadcast (its prefill's one sampled token) is applied without writing last_sampled_tokens."""
    import copy

    from minispec.lab.exercises.broadcast_checker import Broadcast, LastStage, broadcast_problem
    from minispec.v1.worker.gpu.states import RequestState

    ids = {ex.decoder()(i): i for i in range(256)}
    stage0, last = (RequestState(4, 32, 3) for _ in range(2))
    for states in (stage0, last):
        states.add_request("A", 4, [ids[c] for c in "abcd"], 0, 8)  # slot 3, as the stack hands it out
        states.last_sampled_tokens[3] = ids["x"]  # what C, the slot's previous occupant, left
        states.num_computed_tokens[3] = 4  # the prefill's forward
    call = Broadcast(np.array([3]), np.array([[ids["e"], -1, -1, -1]]), np.array([1]), np.array([0]),
                     np.array([[ids["f"], ids["g"], ids["h"]]]), ["A"])
    solutions.apply_broadcast(last, *call.args())
    expected, after = copy.deepcopy(stage0), copy.deepcopy(stage0)
    solutions.apply_broadcast(expected, *call.args())
    after.all_token_ids, after.total_len = expected.all_token_ids, expected.total_len  # all but the token
    after.draft_tokens = expected.draft_tokens
    req, problem = broadcast_problem(call, stage0, after, expected, LastStage(last), {3: "C"})
    assert (req, problem) == ("A", "slot 3's last_sampled_tokens still holds request C's last sampled token, `x`, "
                                   "but the last stage sampled `e` for A: A's next decode embeds it first")
    assert broadcast_problem(call, stage0, expected, expected, LastStage(last), {3: "C"}) is None


def test_reference_condense_is_noticed_by_draft_agreement():
    report = ex.check_condense(solutions.move_row_dropping_drafts, solutions.condense)
    assert report.passed, str(report)
    assert report.lines[0] == ("correct: your condense first breaks invariant 2 (draft agreement) at step 15, "
                               "stage 0, request C")
    assert "(row 1, moved)" in report.lines[1]


def test_a_wrong_condense_answer_says_which_parts_are_wrong():
    report = ex.check_condense(solutions.move_row_dropping_drafts,
                               {"invariant": 3, "step": 15, "stage": 1, "request": "C"})
    assert report.lines == ["not quite: the invariant and the stage are wrong (which rule does check_trace(trace)[0] "
                            "name?; the stage whose buffers disagree)"]


def test_fix_1_must_also_hold_on_the_schedules():
    """The thread scenario alone would pass fix1_after_computed_plus_one; the schedules
    really preempt, on PP 2 and 3, with both proposers."""
    assert {(s.details.split(",")[0], s.details.split(", ")[1]) for s in ex.SCHEDULES} == {
        (f"PP {pp}", f"{m} drafts") for pp in (2, 3) for m in ("ngram", "draft_model")}
    for schedule in ex.SCHEDULES:
        attempt = ex.run_attempt(schedule, lambda fn: ex.RunnerFixes(), None, None)
        assert attempt.passed and attempt.llm.stats()["preemptions"] > 0, schedule.describe(attempt.llm)


@pytest.mark.parametrize("prediction,first_line", [
    (" st", "not quite: ` st` is what the scheduler sent, and what the slots would hold if add_request copied drafts "
            "(the chatbot's claim in the thread); it does not"),
    ("e r", "not quite: `e r` is what B's draft slots hold, in row 1 (left there by D); A's draft slots 11–13 on "
            "stage 0 at step 2, in row 0, hold `tem`"),
    ("s t", "not quite: `s t` is the drafts the scheduler sent for B, in row 1; A's draft slots 11–13 on stage 0 at "
            "step 2, in row 0, hold `tem`"),
    ("xyz", "not quite: you said `xyz`; A's draft slots 11–13 on stage 0 at step 2 hold `tem` (the scheduler sent ` st`)"),
    (3, 'not yet: expected three characters as a string, e.g. "abc", got 3'),
])
def test_wrong_predictions(prediction, first_line):
    report = ex.check_draft_slots(prediction)
    assert not report.passed and report.lines[0] == first_line


def test_wrong_acceptance_and_fault_2_answers():
    report = ex.check_acceptance({"vllm-0.9.2": 0.02, "vllm-0.14": 0.45, "all": 0.5})
    assert report.lines[0] == "not quite: 1 of 3 off by more than 10% points: vllm-0.14"
    report = ex.check_acceptance({"vllm-0.9.2": 0.02, "vllm-0.14": 0.05})
    assert report.lines[0].startswith("not yet: expected a dict with one rate (0 to 1) per preset")
    report = ex.check_fault2({"invariant": 2, "step": 4, "stage": 1, "request": "A"})
    assert report.lines == ["not quite: the stage is wrong (the stage whose buffers disagree)"]
    report = ex.check_fault2({"invariant": 5, "step": 3, "stage": 1, "request": "A"})
    assert report.lines[0] == ("not quite: the invariant, the step and the stage are wrong (which rule does "
                               "check_trace(trace)[0] name?; the first step at which any stage breaks it; the stage "
                               "whose buffers disagree)")


def test_fault_2_accepts_the_draft_invariant_and_names_the_root():
    """At step 4, stage 0, A's history is 2 tokens short (invariant 3) and, because fix 1 writes
    the drafts right after that history, the slots the model reads are misplaced (invariant 2)."""
    report = ex.check_fault2({"invariant": 2, "step": 4, "stage": 0, "request": "A"})
    assert report.passed
    assert report.lines[0] == ("correct: fix 1 alone breaks invariant 2 (draft agreement) at step 4, stage 0, "
                               "request A, and invariant 3 (token history) there too, which is the root")
    assert report.lines[1].startswith("the drafts are misplaced because the history is short")
    trace = ex.thread_trace("vllm-0.14")
    row = trace.step(4).stages[0].row_of("A")
    assert (row.num_tokens_no_spec, len(trace.step(4).schedule.all_token_ids["A"])) == (12, 14)
    drafts = trace.step(4).schedule.scheduled_spec_decode_tokens["A"]
    assert row.token_ids[12:15] == drafts and row.draft_slots[0] == drafts[-1]  # written 2 early, read shifted
    report = ex.check_fault2({"invariant": 3, "step": 4, "stage": 0, "request": "A"})
    assert report.lines[0] == ("correct: fix 1 alone first breaks invariant 3 (token history) at step 4, stage 0, "
                               "request A")


@pytest.mark.parametrize("prediction", ["tem ", " tem", ["t", "e", "m"], ("t", "e", "m")])
def test_typed_slips_are_not_wrong_answers(prediction):
    report = ex.check_draft_slots(prediction)
    assert report.passed and report.lines[0].startswith("correct: A's draft slots 11–13")


def test_typed_slips_in_locations_and_rates():
    assert ex.check_fault2({"invariant": "3", "step": "4", "stage": "0", "request": "a"}).passed
    assert ex.check_fault2({"Invariant": 3, "step": 4, "stage": 0, "request": "A "}).passed
    report = ex.check_acceptance({"vllm-0.9.2": 2, "vllm-0.14": 5, "All": 49})
    assert report.passed and report.lines[0] == "correct: all three within 10% points"
    assert "(numbers above 1 read as percentages: rates run from 0 to 1, 45% is 0.45)" in report.lines


def test_token_ids_are_read_as_characters():
    from minispec.lab.exercises.attempts import decoder

    ids = {decoder()(i): i for i in range(256)}
    assert [ids[c] for c in "tem"] == [85, 70, 78]  # what a learner reads off row.draft_slots
    assert ex.check_draft_slots([85, 70, 78]).passed


def test_counts_take_singular_and_plural():
    from minispec.lab.experiments.schedule import plural

    class Stats:
        def __init__(self, n):
            self.n = n

        def stats(self):
            return {"preemptions": self.n}

    schedule = ex.SCHEDULES[0]
    assert schedule.describe(Stats(1)) == "random schedule 0 (PP 2, ngram drafts, 1 preemption)"
    assert schedule.describe(Stats(2)) == "random schedule 0 (PP 2, ngram drafts, 2 preemptions)"
    assert schedule.describe(Stats(0)) == "random schedule 0 (PP 2, ngram drafts)"
    assert (plural(1, "token"), plural(0, "token")) == ("1 token", "0 tokens")


def test_every_verdict_starts_with_one_of_three_words(monkeypatch):
    monkeypatch.delenv(ex.PLUG_ENV, raising=False)  # the notebooks' conftest sets it for the whole session
    first_lines = [ex.check_draft_slots("xyz"), ex.check_draft_slots("tem"), ex.check_acceptance({}),
                   ex.check_fix1(42), ex.check_fault2(...), ex.check_recovered(solutions.recovered_distribution)]
    assert [r.lines[0].split(":")[0] for r in first_lines] == [
        "not quite", "correct", "not yet", "not yet", "not yet", "correct"]


def test_stubs_wait_for_the_learner_unless_solutions_are_plugged(monkeypatch):
    def write_spec_tokens(runner, row, spec_token_ids):
        ...  # your code here

    monkeypatch.delenv(ex.PLUG_ENV, raising=False)
    assert ex.check_fix1(write_spec_tokens).lines[0].startswith("not yet: your function is still the empty stub")
    assert ex.check_fault2(...).lines[0].startswith("not yet: your answer")
    monkeypatch.setenv(ex.PLUG_ENV, "1")
    report = ex.check_fix1(write_spec_tokens)
    assert report.passed and report.plugged
    assert report.lines[1].startswith("correct")
    # a learner's own (wrong) code is never replaced
    assert not ex.check_fix1(fix1_only_last_stage).passed


def test_show_solution_prints_the_source(capsys):
    assert ex.show_solution("take_relayed_tokens") is None  # a notebook then shows no <function ...> echo
    out = capsys.readouterr().out
    assert out.startswith("def take_relayed_tokens") and "<function" not in out
    with pytest.raises(ValueError, match="show_solution\\('fix3'\\): expected one of"):
        ex.show_solution("fix3")


def test_the_notebook_does_not_import_the_solutions():
    import json
    from pathlib import Path

    notebook = json.loads((Path(__file__).parents[1] / "notebooks" / "08_exercises.ipynb").read_text())
    sources = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert not any("solutions" in src and "import" in src for src in sources)


# -- code that never returns, and Interrupt Kernel -----------------------------------


def fix1_never_returns(runner, row, spec_token_ids):
    while True:
        pass


def fix2_swallows_everything(state, num_computed_tokens, new_token_ids):
    while True:
        try:
            sum(range(1000))
        except Exception:  # the limit is not an Exception: this cannot keep the learner's loop alive
            pass


def recovered_never_returns(p, q):
    while True:
        pass


def move_row_never_returns(batch, src, tgt):
    while True:
        pass


def broadcast_never_returns(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    while True:
        pass


def broadcast_interrupted(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    raise KeyboardInterrupt


def fix2_interrupted(state, num_computed_tokens, new_token_ids):
    raise KeyboardInterrupt  # what Interrupt Kernel raises in the code running at that moment


@pytest.fixture
def short_limit(monkeypatch):
    from minispec.lab.exercises import attempts

    monkeypatch.setattr(attempts, "LEARNER_LIMIT_S", 0.5)


@pytest.mark.parametrize("check,wrong,first_line", [
    (ex.check_fix1, fix1_never_returns, "not quite: your fix1_never_returns did not return within 0.5 s (called for "
     "step 2, stage 0, request A), so the checker stopped it: is there a loop that never ends?"),
    (ex.check_fix2, fix2_swallows_everything, "not quite: your fix2_swallows_everything did not return within 0.5 s "
     "(called for step 2, stage 0, request A), so the checker stopped it: is there a loop that never ends?"),
    (ex.check_recovered, recovered_never_returns, "not quite: your recovered_never_returns did not return within "
     "0.5 s (called for case 1 of 3), so the checker stopped it: is there a loop that never ends?"),
    (ex.check_fix2, fix2_interrupted, "not yet: you interrupted check_fix2 while your fix2_interrupted ran (called "
     "for step 2, stage 0, request A); run the cell again when ready"),
    (ex.check_broadcast, broadcast_never_returns, "not quite: your broadcast_never_returns did not return within "
     "0.5 s (called for step 2, stage 0, request A), so the checker stopped it: is there a loop that never ends?"),
    (ex.check_broadcast, broadcast_interrupted, "not yet: you interrupted check_broadcast while your "
     "broadcast_interrupted ran (called for step 2, stage 0, request A); run the cell again when ready"),
], ids=["fix1", "fix2", "recovered", "interrupt", "broadcast", "broadcast-interrupt"])
def test_code_that_never_returns_is_stopped_in_one_line(short_limit, check, wrong, first_line):
    import time

    start = time.monotonic()
    report = check(wrong)
    assert report.lines == [first_line]
    assert time.monotonic() - start < 8
    assert check(getattr(solutions, check.__name__.replace("check_fix1", "write_spec_tokens")
                         .replace("check_fix2", "take_relayed_tokens")
                         .replace("check_recovered", "recovered_distribution")
                         .replace("check_broadcast", "apply_broadcast"))).passed  # no timer left behind


def test_a_condense_that_never_returns_is_stopped(short_limit):
    report = ex.check_condense(move_row_never_returns, solutions.condense)
    assert report.lines == ["not quite: your move_row_never_returns did not return within 0.5 s (called for step 13, "
                            "stage 0, request B), so the checker stopped it: is there a loop that never ends?"]


def test_interrupt_kernel_during_a_check_gives_one_line():
    """A real SIGINT (what Interrupt Kernel sends) lands wherever the check is: the engine,
    the learner's code, the greedy reference. Whichever, one line and no traceback."""
    import gc
    import os
    import signal
    import threading

    # A KeyboardInterrupt raised inside a finalizer (a weakref callback in a garbage
    # collection) is printed and dropped by Python itself; collect first and collect no more
    # until the check is over, so that the signal lands in the check, not in a collection
    # (on a loaded machine one ran during the check and the check then passed).
    gc.collect()
    gc.disable()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        report = ex.check_fix1(solutions.write_spec_tokens)
    finally:
        timer.cancel()
        gc.enable()
    assert len(report.lines) == 1 and report.lines[0].startswith("not yet: you interrupted check_fix1")
    assert ex.check_fix1(solutions.write_spec_tokens).passed  # and the next run is whole


def test_the_guide_quotes_the_broadcast_checks_first_lines():
    """docs/workshop.md's §8 wrong-turn table quotes the lines pinned above, word for word."""
    from pathlib import Path

    guide = (Path(__file__).parents[1] / "docs" / "workshop.md").read_text()
    section = guide[guide.index("**§8 Model Runner V2"):guide.index("**`04`'s measured cell.**")]
    quoted = [row.split(" | ")[1].rstrip(" |") for row in section.splitlines() if row.startswith("| ")
              and "not quite" in row]
    pinned = {line.replace(f"your {wrong.__name__} raised", "your apply_broadcast raised")  # the room's name
              for check, wrong, line in GALLERY if check is ex.check_broadcast}
    assert len(quoted) == 12 and set(quoted) <= pinned


# -- issue 24 §6: the checker's misses, each with its first line pinned ---------------------------


def move_row_counters_forgotten(batch, src, tgt):
    batch._req_ids[tgt], batch._req_ids[src] = batch._req_ids[src], None
    batch.req_id_to_index[batch._req_ids[tgt]] = tgt
    n = batch.num_tokens_no_spec[src]
    batch.token_ids_cpu[tgt, :n] = batch.token_ids_cpu[src, :n]
    batch.block_table.move_row(src, tgt)


def move_row_unbroken(batch, src, tgt):
    type(batch)._move_row(batch, src, tgt)  # condense's own move: drafts and all


@pytest.mark.parametrize("move_row,first_line", [
    (move_row_counters_forgotten,
     "not quite: step 13, stage 0, request B: after your move_row, num_tokens[0] is 23, not 39 (row 1's): move the "
     "counters too"),
    (move_row_unbroken,
     "not quite: step 15, stage 0, request C: your move_row copied C's drafts too (positions 24–26): the exercise "
     "breaks condense by leaving them behind, copying only the first num_tokens_no_spec slots"),
], ids=["counters-forgotten", "drafts-copied"])
def test_condense_checks_the_learners_move_row_itself(move_row, first_line):
    assert ex.check_condense(move_row, solutions.condense).lines[0] == first_line


def test_a_printed_report_breaks_its_lines_between_words():
    """The browser breaks an output line that is too wide in the middle of a word (``STAL`` /
    ``E`` in 08 §1 at 1280x720); the report folds its own lines between words, indented."""
    from minispec.lab.exercises.checkers import REPORT_WIDTH

    report = ex.check_draft_slots("abc")
    printed = str(report).split("\n")
    assert max(map(len, printed)) <= REPORT_WIDTH < max(len(row) for line in report.lines for row in line.split("\n"))
    assert " ".join(str(report).split()) == " ".join("\n".join(report.lines).split())  # the same words, in order
    assert printed[1] == "    (the scheduler sent ` st`)"  # the first line's end, under its start
    assert any(row.endswith(" scheduled=[ st]  STALE (row held C before)") for row in printed)


# -- issue 34 §4: the checker is never fooled --------------------------------------------------
# The dry run's four false passes: each was told "correct".


def fix1_pads_the_callers_list(runner, row, spec_token_ids):
    spec_token_ids += [0] * (3 - len(spec_token_ids))  # "a row always has k drafts"
    solutions.write_spec_tokens(runner, row, spec_token_ids)


def fix2_clears_the_drafts(state, num_computed_tokens, new_token_ids):
    tokens = solutions.take_relayed_tokens(state, num_computed_tokens, new_token_ids)
    state.spec_token_ids.clear()  # "used up"
    return tokens


def recovered_in_place(p, q):
    p -= q  # the residual, computed where p was
    p.clamp_(min=0)
    return p / p.sum()


def move_row_one_draft_too_many(batch, src, tgt):
    solutions.move_row_dropping_drafts(batch, src, tgt)
    n = batch.num_tokens_no_spec[tgt]
    batch.token_ids_cpu[tgt, : n + 1] = batch.token_ids_cpu[src, : n + 1]  # "the bonus token is history"


@pytest.mark.parametrize("check,wrong", [
    (ex.check_fix1, fix1_pads_the_callers_list), (ex.check_fix2, fix2_clears_the_drafts),
    (ex.check_recovered, recovered_in_place),
    (lambda move_row: ex.check_condense(move_row, solutions.condense), move_row_one_draft_too_many),
], ids=["fix1-pads", "fix2-clears-drafts", "recovered-in-place", "move-row-one-draft-too-many"])
def test_the_dry_runs_false_passes_fail(check, wrong):
    assert not check(wrong).passed


# Wrong attempts written for issue 34 §4, each a plausible slip; the false passes above are among them.


def fix1_clears_the_list(runner, row, spec_token_ids):
    solutions.write_spec_tokens(runner, row, spec_token_ids)
    spec_token_ids.clear()  # "written, so used up"


def fix1_whole_row(runner, row, spec_token_ids):
    runner.input_batch.token_ids_cpu[row] = spec_token_ids  # the row, not its draft slots
    runner.input_batch.num_tokens[row] += len(spec_token_ids)


def fix1_returns_the_drafts(runner, row, spec_token_ids):
    return spec_token_ids  # "the runner writes what I return"


def fix1_counts_without_writing(runner, row, spec_token_ids):
    batch = runner.input_batch
    batch.num_tokens[row] = batch.num_tokens_no_spec[row] + len(spec_token_ids)


def fix1_one_draft_short(runner, row, spec_token_ids):
    batch = runner.input_batch
    start = batch.num_tokens_no_spec[row]
    batch.token_ids_cpu[row, start : start + len(spec_token_ids) - 1] = spec_token_ids[:-1]  # off by one
    batch.num_tokens[row] = start + len(spec_token_ids)


def fix1_reversed(runner, row, spec_token_ids):
    solutions.write_spec_tokens(runner, row, spec_token_ids[::-1])


def fix1_always_k(runner, row, spec_token_ids):
    solutions.write_spec_tokens(runner, row, spec_token_ids)
    runner.input_batch.num_tokens[row] = runner.input_batch.num_tokens_no_spec[row] + 3  # "k is 3"


def fix2_extends_the_relay(state, num_computed_tokens, new_token_ids):
    accepted = num_computed_tokens - state.num_tokens
    if accepted > 0:
        new_token_ids[:0] = state.spec_token_ids[:accepted]  # put the accepted drafts in front, in place
        return new_token_ids
    return solutions.take_relayed_tokens(state, num_computed_tokens, new_token_ids)


def fix2_one_draft_too_many(state, num_computed_tokens, new_token_ids):
    accepted = num_computed_tokens - state.num_tokens + 1  # "and the bonus token"
    return state.spec_token_ids[:accepted] + new_token_ids if accepted > 1 else \
        solutions.take_relayed_tokens(state, num_computed_tokens, new_token_ids)


def fix2_drafts_only(state, num_computed_tokens, new_token_ids):
    accepted = num_computed_tokens - state.num_tokens
    return state.spec_token_ids[:accepted] if accepted > 0 else \
        solutions.take_relayed_tokens(state, num_computed_tokens, new_token_ids)


def fix2_keeps_count(state, num_computed_tokens, new_token_ids):
    state.num_computed_tokens = num_computed_tokens + len(new_token_ids)  # "now it has them all"
    return solutions.take_relayed_tokens(state, num_computed_tokens, new_token_ids)


def recovered_forgot_return(p, q):
    residual = (p - q).clamp_min(0)
    residual / residual.sum()


def recovered_clamps_q(p, q):
    residual = p - q.clamp_(max=p)  # max(0, p - q), with q clamped where it was
    return residual / residual.sum()


def recovered_argmax(p, q):
    return int(((p - q).clamp_min(0)).argmax())  # what vLLM's kernel does: pick the token


def recovered_softmax(p, q):
    return torch.softmax(p - q, -1)  # "softmax makes it a distribution"


def broadcast_zeroes_rejected(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    num_rejected[:] = 0  # "taken back, so none left"


def broadcast_marks_rows_done(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    slots[:] = -1  # "applied: skip them next time"


def broadcast_adds_rejected(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    keep = slots >= 0  # the count of a `+= num_rejected[i]` written for `-=`: the sign
    states.num_computed_tokens[slots[keep]] += 2 * num_rejected[keep]


def broadcast_counts_the_history(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
    solutions.apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
    keep = slots[slots >= 0]
    states.num_computed_tokens[keep] = states.total_len[keep]  # "everything it holds is computed"


def move_row_no_block_table(batch, src, tgt):
    solutions.move_row_dropping_drafts(batch, src, tgt)
    batch.block_table.add_row([], tgt)  # as if the blocks stayed with row src


def move_row_keeps_src(batch, src, tgt):
    solutions.move_row_dropping_drafts(batch, src, tgt)
    batch._req_ids[src] = batch._req_ids[tgt]  # a copy, "the source stays"


def move_row_whole_row(batch, src, tgt):
    solutions.move_row_dropping_drafts(batch, src, tgt)
    batch.token_ids_cpu[tgt] = batch.token_ids_cpu[src]  # the whole row, drafts and stale slots


def move_row_num_tokens_dropped(batch, src, tgt):
    solutions.move_row_dropping_drafts(batch, src, tgt)
    batch.num_tokens[tgt] = batch.num_tokens_no_spec[src]  # "no drafts, so count none"


def move_row_clears_src(batch, src, tgt):
    solutions.move_row_dropping_drafts(batch, src, tgt)
    batch.token_ids_cpu[src] = 0  # "tidy up the row it left"


def move_row_slice_mismatch(batch, src, tgt):
    n = batch.num_tokens_no_spec[src]
    batch.token_ids_cpu[tgt] = batch.token_ids_cpu[src, :n]  # the history, into the whole row
    solutions.move_row_dropping_drafts(batch, src, tgt)


NEW_WRONG = [
    (ex.check_fix1, fix1_pads_the_callers_list,
     "not quite: right on the thread scenario, but on random schedule 0 (PP 2, ngram drafts, 4 preemptions): step 6, stage 0, request B: your function changed its input `spec_token_ids` ([] → [0, 0, 0]): it is the scheduler's list of the drafts it sent; read it and write the drafts into runner.input_batch, leaving the list as it is"),
    (ex.check_fix1, fix1_clears_the_list,
     "not quite: step 2, stage 0, request A: your function changed its input `spec_token_ids` (` st` → []): it is the scheduler's list of the drafts it sent; read it and write the drafts into runner.input_batch, leaving the list as it is"),
    (ex.check_fix1, fix1_whole_row,
     'not quite: step 2, stage 0, request A: your fix1_whole_row raised ValueError: could not broadcast input array from shape (3,) into shape (512,) — you assigned (3,) values to a place that holds (512,): a whole row or array where a slice was meant; write only the new entries, e.g. token_ids_cpu[row, start : start + len(spec_token_ids)]'),
    (ex.check_fix1, fix1_returns_the_drafts,
     'not quite: step 2, stage 0, request A: your function returned ` st` and wrote nothing into row 0: the runner ignores what it returns; write the drafts into runner.input_batch.token_ids_cpu and count them in num_tokens'),
    (ex.check_fix1, fix1_counts_without_writing,
     'not quite: step 2, stage 0, request A: your draft slots 11–13 hold `tem`, the scheduler sent ` st` — your function wrote nothing into this row (you set num_tokens[0] to 14 but wrote no token); every stage needs the drafts: stage 0 embeds them, the last stage verifies them'),
    (ex.check_fix1, fix1_one_draft_short,
     'not quite: step 2, stage 0, request A: your draft slots 11–13 hold ` sm`, the scheduler sent ` st` — you wrote the first 2 of the 3 drafts; write all of spec_token_ids'),
    (ex.check_fix1, fix1_reversed,
     'not quite: step 2, stage 0, request A: your draft slots 11–13 hold `ts `, the scheduler sent ` st` — you wrote them in reverse order; slot num_tokens_no_spec + i holds spec_token_ids[i]'),
    (ex.check_fix1, fix1_always_k,
     'not quite: right on the thread scenario, but on random schedule 0 (PP 2, ngram drafts, 4 preemptions): step 6, stage 0, request B: num_tokens[0] is 25 after your call; expected 22 (num_tokens_no_spec + drafts) — this row got no drafts (spec_token_ids is empty): count len(spec_token_ids), not k'),
    (ex.check_fix2, fix2_clears_the_drafts,
     'not quite: step 4, stage 0, request A: your function changed its input `state.spec_token_ids` (` st` → []): read the state and the relayed tokens, return a new list; the runner updates the state'),
    (ex.check_fix2, fix2_extends_the_relay,
     'not quite: step 4, stage 0, request A: your function changed its input `new_token_ids` (`e` → ` se`): read the state and the relayed tokens, return a new list; the runner updates the state'),
    (ex.check_fix2, fix2_one_draft_too_many,
     "not quite: step 4, stage 0, request A: you appended ` ste` (4 tokens); the scheduler's history has ` se` (3 tokens) at positions 11–13 — you took all 3 drafts, but only 2 were accepted (num_computed_tokens 13 − num_tokens 11): take the first 2"),
    (ex.check_fix2, fix2_drafts_only,
     "not quite: step 4, stage 0, request A: you appended ` s` (2 tokens); the scheduler's history has ` se` (3 tokens) at positions 11–13 — the relayed new_token_ids are missing at the end"),
    (ex.check_fix2, fix2_keeps_count,
     'not quite: step 2, stage 0, request A: your function changed its input `state.num_computed_tokens` (10 → 11): read the state and the relayed tokens, return a new list; the runner updates the state'),
    (ex.check_recovered, recovered_in_place,
     'not quite: case 1 of 3: your function changed its input `p` ([0.017, 0.074, 0.379, 0.047, 0.28, 0.204] → [0.001, 0.0, 0.341, 0.04, 0.25, 0.0]): the sampler reads p and q again for its acceptance test; compute the result into a new tensor (p - q, not p -= q)'),
    (ex.check_recovered, recovered_forgot_return,
     'not quite: case 1 of 3: your function returned None: return a tensor of 6 probabilities (is a `return` missing?)'),
    (ex.check_recovered, recovered_clamps_q,
     'not quite: case 1 of 3: your function changed its input `q` ([0.016, 0.675, 0.037, 0.007, 0.03, 0.234] → [0.016, 0.074, 0.037, 0.007, 0.03, 0.204]): the sampler reads p and q again for its acceptance test; compute the result into a new tensor (p - q, not p -= q)'),
    (ex.check_recovered, recovered_argmax,
     'not quite: case 1 of 3: your function returned one number, 2: return a tensor of 6 probabilities, one per token; the checker draws the token from it'),
    (ex.check_recovered, recovered_softmax,
     'not quite: case 1 of 3: token 2 would come out with probability 0.180, the target gives it 0.379'),
    (ex.check_broadcast, broadcast_zeroes_rejected,
     'not quite: step 4, stage 0, request A: your function changed its input `num_rejected` ([1, 3] → [0, 0]): the broadcast is read, not written: update only states'),
    (ex.check_broadcast, broadcast_marks_rows_done,
     'not quite: step 2, stage 0, request A: your function changed its input `slots` ([3, 2] → [-1, -1]): the broadcast is read, not written: update only states'),
    (ex.check_broadcast, broadcast_adds_rejected,
     "not quite: step 4, stage 0, request A: slot 3's num_computed_tokens is 15 where the last stage's is 13: you added num_rejected[0] = 1; this stage counted the whole query, drafts included, at its own forward (14), so take the rejected drafts off"),
    (ex.check_broadcast, broadcast_counts_the_history,
     "not quite: step 2, stage 0, request A: slot 3's num_computed_tokens is 11 where the last stage's is 10: this stage counted the whole query, drafts included, at its own forward (10 already); nothing was rejected, so nothing is left to change"),
    (ex.check_condense, move_row_one_draft_too_many,
     "not quite: step 15, stage 0, request C: your move_row copied 1 of C's 3 drafts too (position 24, of 24–26): the exercise breaks condense by leaving them behind, copying only the first num_tokens_no_spec slots"),
    (ex.check_condense, move_row_no_block_table,
     "not quite: step 13, stage 0, request B: after your move_row, row 0's block table does not hold B's KV cache blocks: move it with the row, batch.block_table.move_row(1, 0)"),
    (ex.check_condense, move_row_keeps_src,
     "not quite: step 13, stage 0, request B: after your move_row, _req_ids[1] is still 'B': row 1 is free once its request has moved; set it to None as condense does"),
    (ex.check_condense, move_row_whole_row,
     "not quite: step 13, stage 0, request B: you changed token_ids_cpu[0, 39] (`s` → `<unk>`): the move copies row 1's first 36 slots into row 0 and leaves every other slot as it was"),
    (ex.check_condense, move_row_num_tokens_dropped,
     "not quite: step 13, stage 0, request B: after your move_row, num_tokens[0] is 36, row 1's num_tokens_no_spec, not its num_tokens, 39: the counters move as condense moves them; the exercise leaves only the draft slots behind"),
    (ex.check_condense, move_row_clears_src,
     "not quite: step 13, stage 0, request B: you changed token_ids_cpu[1, 0] (`T` → `<unk>`): the move copies row 1's first 36 slots into row 0 and leaves every other slot as it was"),
    (ex.check_condense, move_row_slice_mismatch,
     'not quite: step 13, stage 0, request B: your move_row_slice_mismatch raised ValueError: could not broadcast input array from shape (36,) into shape (64,) — you assigned (36,) values to a place that holds (64,): a whole row or array where a slice was meant; write only the new entries, e.g. token_ids_cpu[tgt, :n]'),
]


def _judge(check, wrong):
    """The condense check takes the right answer, so that only the learner's move_row can be wrong."""
    return check(wrong, solutions.condense) if check is ex.check_condense else check(wrong)


@pytest.mark.parametrize("check,wrong,first_line", NEW_WRONG, ids=[w.__name__ for _, w, _ in NEW_WRONG])
def test_new_wrong_attempt_gets_its_first_line(check, wrong, first_line):
    report = _judge(check, wrong)
    assert not report.passed
    assert report.lines[0] == first_line


def test_an_input_the_learner_changed_is_named_as_such():
    """Each kind of input, a list, a state's field, an array, a tensor, is named with its value before and after."""
    changed = [line for _, wrong, line in NEW_WRONG if "your function changed its input" in line]
    named = {line.split("`")[1] for line in changed}
    assert named == {"spec_token_ids", "state.spec_token_ids", "state.num_computed_tokens", "new_token_ids", "p", "q",
                     "num_rejected", "slots"}


def test_a_wrong_move_row_is_blamed_not_the_right_guess():
    """With the right answer given, every wrong move_row's first line is about the move_row: none
    says the invariant, step, stage or request is wrong."""
    lines = [line for check, _, line in NEW_WRONG if check is ex.check_condense]
    assert len(lines) == 7 and not any("is wrong" in line or "are wrong" in line for line in lines)


def test_v1_exercises_suggest_v1_names_and_v2_its_own():
    lines = dict((w, line) for _, w, line in NEW_WRONG + GALLERY)
    assert lines[fix1_whole_row].endswith("e.g. token_ids_cpu[row, start : start + len(spec_token_ids)]")
    assert lines[move_row_slice_mismatch].endswith("e.g. token_ids_cpu[tgt, :n]")
    assert lines[broadcast_whole_array].endswith("e.g. all_token_ids[slot, start : start + n]")
    v1 = [line for check, _, line in NEW_WRONG + GALLERY if check is not ex.check_broadcast]
    assert not any(name in line for line in v1 for name in ("all_token_ids", "total_len", "slots[", "RequestState"))


def test_none_returned_is_not_called_raised():
    assert ex.check_recovered(recovered_forgot_return).lines[0] == (
        "not quite: case 1 of 3: your function returned None: return a tensor of 6 probabilities (is a `return` "
        "missing?)")
    assert ex.check_fix2(fix2_returns_nothing).lines[0].endswith("your function returned None: return the list of "
                                                                 "token ids to append")


def test_expected_values_come_from_copies_taken_before_the_call():
    """A learner's function that changes the checker's own inputs cannot move the yardstick: the
    broadcast's expected state and condense's asked-for move are made before the call, and fix 1's
    drafts are read from a copy (a padding fix 1 would otherwise be judged against its padding)."""
    line = dict((w, line) for _, w, line in NEW_WRONG)[fix1_pads_the_callers_list]
    assert "([] → [0, 0, 0])" in line


# Right answers written another way: each passes.


def fix1_numpy(runner, row, spec_token_ids):
    batch = runner.input_batch
    start = int(batch.num_tokens_no_spec[row])
    batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = np.array(spec_token_ids, dtype=np.int64)
    batch.num_tokens[row] += len(spec_token_ids)  # add_request left it at num_tokens_no_spec


def fix2_copy_first(state, num_computed_tokens, new_token_ids):
    drafts = list(state.spec_token_ids)
    behind = num_computed_tokens + len(new_token_ids) - state.num_tokens
    if behind <= len(new_token_ids):
        return new_token_ids[-behind:]
    return drafts[: behind - len(new_token_ids)] + list(new_token_ids)


def recovered_as_list(p, q):
    r = torch.where(p > q, p - q, torch.zeros_like(p))
    return (r / r.sum()).tolist()


def recovered_numpy(p, q):
    r = np.maximum(p.numpy() - q.numpy(), 0)
    return r / r.sum()


def move_row_by_hand(batch, src, tgt):
    req = batch._req_ids[src]
    batch._req_ids[tgt], batch._req_ids[src] = req, None
    batch.req_id_to_index[req] = tgt
    for p in range(int(batch.num_tokens_no_spec[src])):
        batch.token_ids_cpu[tgt, p] = batch.token_ids_cpu[src, p]
    for name in ("num_computed_tokens_cpu", "num_prompt_tokens", "num_tokens_no_spec", "num_tokens"):
        getattr(batch, name)[tgt] = getattr(batch, name)[src]
    table = batch.block_table
    table.block_table_np[tgt] = table.block_table_np[src]  # the whole row: past num_blocks_per_row nothing is read
    table.num_blocks_per_row[tgt] = table.num_blocks_per_row[src]


@pytest.mark.parametrize("check,right", [
    (ex.check_fix1, fix1_numpy), (ex.check_fix2, fix2_copy_first), (ex.check_recovered, recovered_as_list),
    (ex.check_recovered, recovered_numpy), (ex.check_condense, move_row_by_hand),
], ids=["fix1-numpy", "fix2-copy-first", "recovered-list", "recovered-numpy", "move-row-by-hand"])
def test_right_answers_written_another_way_pass(check, right):
    report = _judge(check, right)
    assert report.passed, str(report)


def test_each_check_takes_at_most_two_seconds_of_cpu():
    """The room waits for each check: the slowest of the new wrong attempts, and the reference
    solutions, in CPU time, the better of two runs (wall time on a shared machine says more
    about the neighbours)."""
    import time

    def seconds(check, answer) -> float:
        start = time.process_time()
        _judge(check, answer)
        return time.process_time() - start

    for check, answer in [(ex.check_fix1, solutions.write_spec_tokens), (ex.check_fix2, solutions.take_relayed_tokens),
                          (ex.check_broadcast, solutions.apply_broadcast), (ex.check_recovered, recovered_numpy),
                          (ex.check_condense, solutions.move_row_dropping_drafts), (ex.check_fix1, fix1_always_k)]:
        assert min(seconds(check, answer) for _ in range(2)) <= 2, (check.__name__, answer.__name__)
