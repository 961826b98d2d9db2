"""Judging a learner's post-processing of Model Runner V2's broadcast (notebook 08's last
exercise), call by call, in the slots' own terms.

A non-last stage of V2 (``minispec/v1/worker/gpu/``) learns what the last stage decided
only from its broadcast: per batch row ``i``, the slot ``slots[i]`` (-1: skip), the
``num_sampled[i]`` tokens it sampled, ``num_rejected[i]`` drafts it rejected and the next
``draft_tokens[i]``. The learner's ``apply_broadcast`` takes the runner's own place
(V2's ``RunnerFixes(apply_broadcast=...)``, ``minispec.v1.worker.gpu.runner_fixes``).
Each call runs on the stage's real ``RequestState``; the
runner's own (``GPUModelRunner._apply_broadcast``) runs on a copy of the same state, and the two are compared slot by
slot: which slot, which field, what it holds, what the last stage holds for the same
request, and the likely reason. As for the V1 exercises (``attempts``), the first
wrong call is kept and the run goes on, so the invariant checker can show what it led to.

vLLM twin: none.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from minispec.lab.exercises.attempts import Attempt, Inputs, call_learner, shown
from minispec.lab.experiments.schedule import plural

# The fields the broadcast updates, in the order the checker looks at them, and the arrays they are.
FIELDS = ("last_sampled_tokens", "history", "num_computed_tokens", "draft_tokens")
SLOT_ARRAYS = ("last_sampled_tokens", "num_computed_tokens", "draft_tokens", "total_len", "all_token_ids")
BROADCAST_ARGS = ("slots", "sampled_tokens", "num_sampled", "num_rejected", "draft_tokens")


def history(states, slot: int) -> list[int]:
    return states.all_token_ids[slot, : states.total_len[slot]].tolist()


@dataclass
class Broadcast:
    """One call's inputs, and whose slot each row is."""

    slots: np.ndarray
    sampled_tokens: np.ndarray
    num_sampled: np.ndarray
    num_rejected: np.ndarray
    draft_tokens: np.ndarray | None
    req_ids: list[str | None]  # per row: the request in its slot, None for -1

    def args(self) -> tuple:
        """Fresh copies, so neither run of the call can change what the other gets."""
        drafts = None if self.draft_tokens is None else self.draft_tokens.copy()
        return (self.slots.copy(), self.sampled_tokens.copy(), self.num_sampled.copy(), self.num_rejected.copy(),
                drafts)

    def inputs(self) -> Inputs:
        """The arrays the learner's call is given (fresh copies), which it may read, not write."""
        return Inputs(dict(zip(BROADCAST_ARGS, self.args())), tokens=("sampled_tokens", "draft_tokens"))

    def tokens(self, i: int) -> list[int]:
        return self.sampled_tokens[i, : self.num_sampled[i]].tolist()

    @property
    def live(self) -> list[int]:
        return [i for i, s in enumerate(self.slots) if s >= 0]


class LastStage:
    """What the last stage holds for a request now: the values the broadcast was made from."""

    def __init__(self, states):
        self.states = states

    def value(self, field: str, req_id: str):
        slot = self.states.req_id_to_index.get(req_id)
        if slot is None:
            return None
        if field == "history":
            return history(self.states, slot)
        return getattr(self.states, field)[slot].tolist()

    def says(self, field: str, req_id: str, expected, shown_as: str, verb: str = "is") -> str:
        """ "the last stage's is 13" when it holds what this stage should (it may have run the
        request again since that batch), else "it should be 13"."""
        if self.value(field, req_id) == expected:
            return f"the last stage's {verb} {shown_as}"
        return f"it should {'be' if verb == 'is' else verb.removesuffix('s')} {shown_as}"


def owner_phrase(slot: int, states) -> str:
    req = states.index_to_req_id.get(slot)
    return f"request {req}'s" if req else "free"


def foreign_problem(call: Broadcast, before, after) -> tuple[str | None, str] | None:
    """A slot this broadcast does not cover was changed (a -1 used as an index, or rows taken for
    slots): whose slot, and what happened."""
    live = {int(call.slots[i]) for i in call.live}
    for name in SLOT_ARRAYS:
        changed = np.flatnonzero((getattr(before, name) != getattr(after, name)).reshape(before.max_num_reqs, -1)
                                 .any(axis=1))
        foreign = [int(s) for s in changed if int(s) not in live]
        if not foreign:
            continue
        f, whose = foreign[0], owner_phrase(foreign[0], after)
        req = after.index_to_req_id.get(f)
        skipped = [i for i, s in enumerate(call.slots) if s < 0]
        if skipped and f == before.max_num_reqs - 1:
            return req, (f"row {skipped[0]} of the broadcast has slot -1, which means skip it (its request left its "
                         f"slot after that batch ran, or it sampled nothing), but numpy reads index -1 as the last "
                         f"slot: you changed {name} of slot {f} ({whose})")
        if f < len(call.slots) and call.slots[f] != f:
            mine = f"slot {int(call.slots[f])} (request {call.req_ids[f]})" if call.slots[f] >= 0 else "slot -1 (skip)"
            return req, (f"you changed {name} of slot {f} ({whose}), a slot this broadcast does not cover: row {f} "
                         f"is for {mine}; index the state with slots[i], not with the row i")
        return req, (f"you changed {name} of slot {f} ({whose}), a slot this broadcast does not cover "
                     f"(its slots are {sorted(live)})")
    return None


def other_fields_problem(before, after) -> str | None:
    for name, value in vars(before).items():
        if name in SLOT_ARRAYS:
            continue
        mine = getattr(after, name)
        same = np.array_equal(value, mine) if isinstance(value, np.ndarray) else value == mine
        if not same:
            return (f"you changed states.{name}: the broadcast updates only last_sampled_tokens, draft_tokens, "
                    "num_computed_tokens and the history (all_token_ids, total_len)")
    return None


class Diagnosis:
    """The per-row checks, one method per field; each returns a sentence or None."""

    def __init__(self, call: Broadcast, before, after, expected, last: LastStage, owners: dict):
        self.call, self.before, self.after, self.expected, self.last = call, before, after, expected, last
        self.owners = owners  # slot -> the request whose token last_sampled_tokens holds

    def minus_one_hint(self, slot: int) -> str:
        skipped = [i for i, s in enumerate(self.call.slots) if s < 0]
        if skipped and slot == self.before.max_num_reqs - 1:
            return (f" (row {skipped[0]}'s slot is -1, which means skip it; numpy reads index -1 as the last "
                    f"slot, {slot})")
        return ""

    def last_sampled_tokens(self, i: int, s: int, req: str) -> str | None:
        b, g, w = (int(x.last_sampled_tokens[s]) for x in (self.before, self.after, self.expected))
        if g == w:
            return None
        tokens, n = self.call.tokens(i), int(self.call.num_sampled[i])
        sampled = f"the last stage sampled {shown(tokens)} for {req}"
        embeds = f"{req}'s next decode embeds " + ("it" if n == 1 else f"the last of them, {shown(w)},") + " first"
        if g == b:
            owner = self.owners.get(s)
            held = (f"request {owner}'s last sampled token, {shown(b)}" if owner not in (None, req)
                    else f"{req}'s token from the step before, {shown(b)}" if owner == req
                    else "0, as no broadcast has written it" if b == 0 else f"{shown(b)}, which no broadcast put there")
            return f"slot {s}'s last_sampled_tokens still holds {held}, but {sampled}: {embeds}"
        if g == -1:
            return (f"slot {s}'s last_sampled_tokens is -1, padding: {sampled}, and sampled_tokens[{i}] is padded "
                    f"with -1 after its num_sampled[{i}] = {n}; the last token is sampled_tokens[{i}, num_sampled[{i}] - 1]")
        if n > 1 and g == tokens[0]:
            return (f"slot {s}'s last_sampled_tokens is {shown(g)}, the first of the {n} tokens {shown(tokens)} the "
                    f"last stage sampled for {req}; its next decode embeds the last, {shown(w)}")
        return f"slot {s}'s last_sampled_tokens is {shown(g)}, but {sampled}: {embeds}"

    def history(self, i: int, s: int, req: str) -> str | None:
        tb, tg, te = (int(x.total_len[s]) for x in (self.before, self.after, self.expected))
        got, want = history(self.after, s), history(self.expected, s)
        if got == want:
            return None
        n, tokens = int(self.call.num_sampled[i]), self.call.tokens(i)
        says = self.last.says("history", req, want, str(te), "has")
        width = self.call.sampled_tokens.shape[1]
        if tg == tb:
            if self.after.all_token_ids[s, tb:te].tolist() == tokens:
                return (f"the {plural(n, 'sampled token')} {shown(tokens)} {'is' if n == 1 else 'are'} in "
                        f"all_token_ids[{s}, {tb}:{te}], but "
                        f"total_len[{s}] is still {tb}: advance it by num_sampled[{i}] = {n}")
            return (f"slot {s}'s history (request {req}) still has {tb} tokens where {says}: append the "
                    f"{plural(n, 'sampled token')} {shown(tokens)} at all_token_ids[{s}, total_len[{s}]:] and advance "
                    f"total_len[{s}] by num_sampled[{i}]")
        if tg < tb:
            return (f"slot {s}'s total_len went down from {tb} to {tg}: the history only grows; append the "
                    f"{plural(n, 'sampled token')} {shown(tokens)} after position {tb - 1}")
        p = next((k for k, (a, c) in enumerate(zip(got, want)) if a != c), min(len(got), len(want)))
        if p < tb:
            return (f"you overwrote position {p} of {req}'s history ({shown(want[p])} → {shown(got[p])}): the "
                    f"sampled tokens go after it, from total_len[{s}] = {tb}")
        if tg == tb + width and n < width:
            return (f"slot {s}'s history has {tg} tokens where {says}: you appended all {width} entries of "
                    f"sampled_tokens[{i}], {self.call.sampled_tokens[i].tolist()}; only the first num_sampled[{i}] = "
                    f"{n} are tokens, the rest is -1 padding")
        row = self.after.all_token_ids[s]
        at = next((tb + d for d in (1, -1, 2, -2) if tb + d >= 0 and row[tb + d : tb + d + n].tolist() == tokens), None)
        if at is not None:
            return (f"you wrote the {plural(n, 'sampled token')} {shown(tokens)} at all_token_ids[{s}, {at}:{at + n}], "
                    f"{plural(abs(at - tb), 'position')} {'past' if at > tb else 'before'} the end of {req}'s history: "
                    f"they go from total_len[{s}] = {tb}")
        if tg == te:
            return (f"slot {s}'s history holds {shown(got[tb:te])} at positions {tb}–{te - 1} where the last stage "
                    f"sampled {shown(tokens)} for {req}")
        return f"slot {s}'s total_len is {tg} where {says} (total_len {tb} + num_sampled[{i}] = {n})"

    def num_computed_tokens(self, i: int, s: int, req: str) -> str | None:
        b, g, e = (int(x.num_computed_tokens[s]) for x in (self.before, self.after, self.expected))
        if g == e:
            return None
        r = int(self.call.num_rejected[i])
        head = f"slot {s}'s num_computed_tokens is {g} where {self.last.says('num_computed_tokens', req, e, str(e))}"
        forward = "this stage counted the whole query, drafts included, at its own forward"
        if g == b:
            return head + f": the {plural(r, 'rejected draft')} {'was' if r == 1 else 'were'} not taken back ({forward})"
        if r and g == b + r:
            return head + f": you added num_rejected[{i}] = {r}; {forward} ({b}), so take the rejected drafts off"
        if g > b:
            rest = f"only the {plural(r, 'rejected draft')} {'is' if r == 1 else 'are'} left to take back" if r else \
                "nothing was rejected, so nothing is left to change"
            return head + f": {forward} ({b} already); {rest}"
        return head + f": this stage's optimistic {b} minus num_rejected[{i}] = {r}"

    def draft_tokens(self, i: int, s: int, req: str) -> str | None:
        if self.call.draft_tokens is None:
            return None
        b, g, e = (x.draft_tokens[s].tolist() for x in (self.before, self.after, self.expected))
        if g == e:
            return None
        said = (f"slot {s} holds drafts {shown(g)} but the last stage proposed {shown(e)} for {req}"
                + self.minus_one_hint(s))
        if g == b:
            left = " (the zeros add_request left)" if not any(b) else ""
            return said + f"{left}: this stage embeds the slot's draft_tokens at {req}'s next decode; copy " \
                f"draft_tokens[{i}] into it"
        return said

    def first(self) -> tuple[str, str] | None:
        """(request, sentence) for the first wrong field of the first row that has one."""
        for field in FIELDS:
            for i in self.call.live:
                s, req = int(self.call.slots[i]), self.call.req_ids[i]
                if (problem := getattr(self, field)(i, s, req)) is not None:
                    hint = self.minus_one_hint(s) if field != "draft_tokens" else ""
                    return req, problem + hint
        return None


def broadcast_problem(call: Broadcast, before, after, expected, last: LastStage, owners: dict
                      ) -> tuple[str | None, str] | None:
    """(request or None, what is wrong) for the learner's call, or None if it left the state as the runner's own."""
    if (problem := other_fields_problem(before, after)) is not None:
        return None, problem
    if (found := foreign_problem(call, before, after)) is not None:
        return found
    return Diagnosis(call, before, after, expected, last, owners).first()


def running_step(trace, stage: int) -> int | None:
    """The step a stage is running: the first with work scheduled that it has not recorded yet
    (it records its rows after applying the broadcast, and runs steps in order)."""
    return next((s.step for s in trace.steps
                 if s.schedule.num_scheduled_tokens and all(st.stage != stage for st in s.stages)), None)


def broadcast_contract(attempt: Attempt, fn):
    attempt.slice_example = "all_token_ids[slot, start : start + n]"
    owners: dict[int, dict[int, str]] = {}  # per stage: slot -> whose token its last_sampled_tokens holds

    def apply_broadcast(states, slots, sampled_tokens, num_sampled, num_rejected, draft_tokens):
        runners = attempt.llm.stage_runners()
        runner = next(r for r in runners if r.req_states is states)
        call = Broadcast(slots, sampled_tokens, num_sampled, num_rejected, draft_tokens,
                         [states.index_to_req_id.get(int(s)) if s >= 0 else None for s in slots])
        first = next((call.req_ids[i] for i in call.live), None)
        attempt.context = (running_step(attempt.trace, runner.pp_rank), runner.pp_rank, first)
        before, expected = copy.deepcopy(states), copy.deepcopy(states)
        runner._apply_broadcast(expected, *call.args())  # the runner's own, no fault preset in these runs
        given = call.inputs()
        call_learner(attempt, fn, states, *given.now.values())
        mine = owners.setdefault(runner.pp_rank, {})
        if attempt.bad_call is None:
            changed = given.changed("the broadcast is read, not written: update only states")
            found = (first, changed) if changed else broadcast_problem(
                call, before, states, expected, LastStage(runners[-1].req_states), mine)
            if found is not None:
                req, problem = found
                attempt.bad_call = attempt.context[:2] + (req or first, problem)
        for i in call.live:
            if states.last_sampled_tokens[slots[i]] == expected.last_sampled_tokens[slots[i]]:
                mine[int(slots[i])] = call.req_ids[i]

    return apply_broadcast
