"""minispec's invariants, stated here and checked on trace records.

``Invariant`` numbers them 1-10, as the notebooks, the tests and
``docs/invariants.md`` cite them (``tools/invariants_doc.py`` writes that page
from this module). Each member carries a short ``title``, its ``rule`` and what it
``reads``; ``on_trace`` says whether the checker here can see it. 2-5 are checked
on every schedule, stage and update, 8 on every update, 9 on every step whose drafter reads taps, 10 on every
stage's committed KV: live (``check_invariants=True``) the first
violation raises ``InvariantViolation``; offline ``check_trace(trace)`` lists
them all. Under async scheduling (``AsyncScheduler``) the scheduler schedules a step
before the outputs it needs are back, on placeholders: 2-4 then hold a stage to what
those placeholders stood for, which the outputs bring (``resolved_view``), so a row
whose tokens are still in flight is checked when they come back. 1 and 6 compare whole runs with references, so they live in the tests
(``where``); 7 is checked by the transport on every message (``where``). Any runner that records the same snapshots can be checked the same
way: ``docs/invariants.md`` says what to record. No vLLM twin: vLLM has no such
checker, and its unit tests never look at a non-last stage's buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from minispec.instruments.events import EventKind
from minispec.instruments.trace import RowRecord, ScheduleRecord, StageRecord, StepRecord, Trace


class Invariant(IntEnum):
    """One rule; the member's value is the number everything cites."""

    title: str
    rule: str
    where: str
    reads: tuple[str, ...]

    def __new__(cls, number: int, title: str, rule: str, where: str, reads: tuple[str, ...] = ()):
        member = int.__new__(cls, number)
        member._value_ = number
        member.title, member.rule, member.where, member.reads = title, rule, where, reads
        return member

    @property
    def on_trace(self) -> bool:
        """Checked here, on the records of every step (else: by comparing whole runs)."""
        return bool(self.reads)

    GREEDY_EQUIVALENCE = (
        1, "greedy equivalence",
        "With temperature 0, a run emits the same tokens with draft tokens as without, whatever the number of "
        "stages, the proposer, the batch queue, chunked prefill or preemption, and those tokens are transformers' "
        "generate(do_sample=False).",
        "whole runs against references: tests/test_greedy_equivalence.py, tests/test_properties.py")
    DRAFT_AGREEMENT = (
        2, "draft agreement",
        "At every step, the drafts each stage gathers into its inputs (the last num_drafts slots of the row's "
        "scheduled region) are the scheduler's scheduled_spec_decode_tokens for the request, and so are the drafts "
        "the last stage's rejection sampler verifies. Under async scheduling the scheduler sends placeholders "
        "(-1) for them: they are then the drafts the request's last output brought (the last of the outputs "
        "the step was scheduled without, once it is back), cut to the number scheduled and padded with 0 where "
        "the proposer proposed fewer; on the first step of a request new or resumed, which no output has "
        "brought drafts since (a decode padded to 1 + k under prefix caching), 0s: a fresh slot's.",
        "InvariantChecker.check_stage, every stage of every step (under async scheduling, a row whose tokens "
        "are still in flight: once they are back, in check_update)",
        ("ScheduleRecord.scheduled_spec_decode_tokens", "RowRecord.draft_slots", "StageRecord.is_last",
         "StageRecord.verified_drafts", "StepRecord.spec_token_ids", "ScheduleRecord.new_req_ids",
         "ScheduleRecord.resumed_req_ids"))
    TOKEN_HISTORY = (
        3, "token history",
        "On every stage, before its inputs are gathered, the row's history (token_ids_cpu[row, :n], n the larger "
        "of num_computed_tokens + num_scheduled_tokens - num_drafts and num_tokens_no_spec) is the first n tokens "
        "of the scheduler's all_token_ids. Under async scheduling, a step scheduled while batches that sample "
        "the request were in flight is held to the scheduler's all_token_ids once they are back, unless one "
        "of them finished the request: the step is then dropped unread.",
        "InvariantChecker.check_stage, every stage of every step (under async scheduling, a row whose tokens "
        "are still in flight: once they are back, in check_update)",
        ("ScheduleRecord.all_token_ids", "RowRecord.token_ids", "RowRecord.num_computed_tokens",
         "RowRecord.num_scheduled_tokens", "RowRecord.num_drafts", "RowRecord.num_tokens_no_spec",
         "StepRecord.all_token_ids_after", "StepRecord.finished"))
    SHARED_ACCOUNTING = (
        4, "shared accounting",
        "Every stage's num_computed_tokens for a request is the scheduler's, and so is its block table row (a "
        "stage that reads or writes KV through other blocks computes other tokens while every token id is right); "
        "after update_from_output the scheduler's num_computed_tokens is old + scheduled - rejected (unchanged "
        "for a request preempted while the batch was in flight: preemption reset it). Under async scheduling the scheduler's count assumes every draft of the batches in flight accepted: a step "
        "scheduled while batches that sample the request were in flight holds that count less the drafts they "
        "rejected.",
        "InvariantChecker.check_stage (counts and block tables; under async scheduling, a count that waits "
        "for batches in flight once they are back) and check_update (the rollback)",
        ("ScheduleRecord.num_computed_tokens", "ScheduleRecord.block_ids", "RowRecord.num_computed_tokens",
         "RowRecord.block_ids", "StepRecord.num_accepted", "StepRecord.num_computed_before_update",
         "StepRecord.num_computed_after", "StepRecord.stale"))
    ONE_IN_FLIGHT_BATCH = (
        5, "one in-flight batch per decode request",
        "A request is in at most one in-flight batch that samples it (one whose chunk reaches the request's last "
        "token); prefill chunks that do not sample may be pipelined across batches. Under async scheduling a "
        "later one may go out while such batches are in flight, on their placeholders only: once it is "
        "scheduled, the scheduler's num_output_placeholders for the request is exactly 1 + d for it and for "
        "each of them (d: the drafts each was scheduled with).",
        "InvariantChecker.check_schedule and check_update, in the order of Trace.events",
        ("ScheduleRecord.num_scheduled_tokens", "ScheduleRecord.num_computed_tokens", "ScheduleRecord.all_token_ids",
         "ScheduleRecord.num_output_placeholders", "Trace.events"))
    LOSSLESS_SAMPLING = (
        6, "lossless sampling",
        "With random sampling, the tokens a run emits with draft tokens follow the target model's distribution, "
        "as sampling without drafts does: accepted, recovered and bonus tokens together lose nothing.",
        "whole runs against references, by chi-square: tests/test_sampling_distribution.py")
    MESSAGE_SCHEDULE = (
        7, "message-schedule agreement",
        "Every rank posts the same ordered sequence of messages per step, and every message a stage receives is "
        "the one the sender sent for that step: same channel (sender, receiver, tag), step, sequence number on "
        "the channel, shape and dtype.",
        "the checked transport, on every receive: CheckedReceive.take (minispec/distributed/parallel_state.py) "
        "raises MessageMismatch, whose violation names the channel (as req_id), the step and both headers")
    SAMPLED_ONCE = (
        8, "each position sampled once",
        "The last stage samples each position of a request at most once over the whole run, across "
        "preemptions: what a batch sampled is kept, even when the request was preempted while the batch was in "
        "flight, so the resumed request samples from the first position no batch has sampled (a batch emits its "
        "tokens from position num_computed_tokens + num_scheduled_tokens - num_drafts on).",
        "InvariantChecker.check_update, on the last stage's record of each batch",
        ("StageRecord.sampled", "StageRecord.is_last", "RowRecord.num_computed_tokens",
         "RowRecord.num_scheduled_tokens", "RowRecord.num_drafts", "StepRecord.finished"))
    HIDDEN_STATE_HANDOVER = (
        9, "hidden-state hand-over",
        "When a drafter reads the target's hidden states from other stages (EAGLE-3's taps), at every step the "
        "feature it is handed for each tapped layer and each computed position is, bit for bit, the stream the "
        "stage owning that tap point computed there: the hand-over between stages moves taps and computes none.",
        "InvariantChecker.check_taps, once the last stage has handed the drafter its features, every step",
        ("StageRecord.computed_taps", "StageRecord.drafter_taps"))
    COMMITTED_KV = (
        10, "committed KV is the accepted path",
        "On every stage, when its forward attends, the KV it holds for a request at each position below its "
        "num_computed_tokens was stored by the token the scheduler's all_token_ids has there, at that position "
        "(stored before the forward, or by it for another request: a prefix-cache hit on a block the same batch "
        "fills): "
        "after a tree of drafts, the accepted path's nodes, moved into the committed positions, and no rejected "
        "sibling (nor a draft the target rejected).",
        "InvariantChecker.check_stage, every stage of every step that records its KV (tree_kv.py's probe; under "
        "async scheduling, a row whose tokens are still in flight: once they are back, in check_update)",
        ("RowRecord.kv_token_ids", "RowRecord.kv_positions", "RowRecord.num_computed_tokens",
         "ScheduleRecord.all_token_ids", "StepRecord.all_token_ids_after"))


CHECKED = tuple(i for i in Invariant if i.on_trace)  # 2-5 and 8-10, what check_trace can see


def samples(s: ScheduleRecord, req_id: str) -> bool:
    """Does this batch sample for the request (its chunk reaches the last token)?
    Prefill chunks that do not may be pipelined across batches; sampling ones may not."""
    return s.num_computed_tokens[req_id] + s.num_scheduled_tokens[req_id] >= len(s.all_token_ids[req_id])


@dataclass
class Violation:
    invariant: Invariant  # a number is taken too, and checked
    step: int
    stage: int | None
    req_id: str
    expected: object
    actual: object

    def __post_init__(self):
        self.invariant = Invariant(self.invariant)

    @property
    def headline(self) -> str:
        where = f"step {self.step}" + (f", stage {self.stage}" if self.stage is not None else "")
        return f"invariant {self.invariant} ({self.invariant.title}) violated at {where}, request {self.req_id}"

    def __str__(self) -> str:
        return f"{self.headline}: expected {self.expected}, got {self.actual}"


class InvariantViolation(AssertionError):
    """Raised by the live checker (``check_invariants=True``) at the first broken invariant; its
    ``violation`` says which, where (step, stage, request) and what was expected. An
    ``AssertionError``, so a test run with invariants on fails at the step that broke one."""

    def __init__(self, violation: Violation):
        super().__init__(str(violation))
        self.violation = violation


# short names for the checks below
DRAFTS, HISTORY, ACCOUNTING, IN_FLIGHT, SAMPLED_ONCE = (
    Invariant.DRAFT_AGREEMENT, Invariant.TOKEN_HISTORY, Invariant.SHARED_ACCOUNTING, Invariant.ONE_IN_FLIGHT_BATCH,
    Invariant.SAMPLED_ONCE)


@dataclass(frozen=True)
class Expected:
    """What a stage must hold for one request at one step: the scheduler's view of it, taken
    when it scheduled the step or, under async scheduling, once the outputs it scheduled the
    step without are in (``resolved_by``: those steps)."""

    num_computed_tokens: int
    all_token_ids: list[int]
    drafts: list[int]
    resolved_by: tuple[int, ...] = ()

    def says(self, what: str) -> str:
        """``what``, and where the value comes from when it is not the schedule's own."""
        if not self.resolved_by:
            return what
        return f"{what} (the scheduler's once step {', '.join(map(str, self.resolved_by))} came back)"


# The async scheduler's stand-in for a draft it never learns (vLLM 0.30.0
# ``vllm/v1/core/sched/async_scheduler.py`` 16 and 44: ``[-1] * num_spec_tokens``).
PLACEHOLDER = -1


def fill(scheduled: list[int], proposed: list[int]) -> list[int]:
    """The drafts a step runs: the scheduled values, or where the scheduler sent placeholders, the
    last proposals for the request, cut to the number scheduled and padded with 0 where the
    proposer proposed fewer (as both runners' draft buffers are)."""
    if PLACEHOLDER not in scheduled:
        return scheduled
    n = len(scheduled)
    return (proposed[:n] + [0] * n)[:n]


def scheduled_view(s: ScheduleRecord, req_id: str, proposed: list[int]) -> Expected:
    """What the scheduler sent for the request (``proposed``: the last drafts an output brought it)."""
    return Expected(s.num_computed_tokens[req_id], s.all_token_ids[req_id],
                    fill(s.scheduled_spec_decode_tokens.get(req_id, []), proposed))


def resolved_view(s: ScheduleRecord, req_id: str, awaited: list[StepRecord]) -> Expected:
    """What the scheduler's placeholders stood for, once the ``awaited`` batches (in flight when
    it scheduled ``s``, oldest first) came back: its count less the drafts they rejected, its
    tokens after the last of them, and the drafts that one brought."""
    rejected = sum(len(u.schedule.scheduled_spec_decode_tokens.get(req_id, [])) - u.num_accepted.get(req_id, 0)
                   for u in awaited)
    last = awaited[-1]
    drafts = fill(s.scheduled_spec_decode_tokens.get(req_id, []), last.spec_token_ids.get(req_id, []))
    return Expected(s.num_computed_tokens[req_id] - rejected, last.all_token_ids_after[req_id], drafts,
                    tuple(u.step for u in awaited))


def owed(s: ScheduleRecord, req_id: str) -> int:
    """The tokens a batch that samples the request owes it: the bonus and one per draft."""
    return 1 + len(s.scheduled_spec_decode_tokens.get(req_id, []))


class InvariantChecker:
    def __init__(self, raise_on_violation: bool = True):
        self.raise_on_violation = raise_on_violation
        self.violations: list[Violation] = []
        # request -> the batches in flight that will sample it (oldest first): one at most,
        # unless the later ones were scheduled on the earlier ones' placeholders
        self.sampling_in_flight: dict[str, list[ScheduleRecord]] = {}
        # (step, request) -> the sampling batches in flight when it was scheduled: its stages
        # are checked against what their outputs bring (async scheduling)
        self.awaits: dict[tuple[int, str], list[int]] = {}
        self.came_back: dict[int, StepRecord] = {}  # the awaited batches whose outputs are in
        self.pending: dict[int, list[tuple[ScheduleRecord, StageRecord, RowRecord]]] = {}  # awaited step -> rows
        self.proposed: dict[str, list[int]] = {}  # request -> the drafts its last output brought
        self.sampled_at: dict[str, dict[int, int]] = {}  # request -> position -> the step that sampled it

    def _fail(self, invariant: Invariant, *args) -> None:
        violation = Violation(invariant, *args)
        self.violations.append(violation)
        if self.raise_on_violation:
            raise InvariantViolation(violation)

    def check_schedule(self, s: ScheduleRecord) -> None:
        # A request (re-)added has no proposal yet: its placeholders stand for a fresh slot's 0s.
        for req_id in [*s.new_req_ids, *s.resumed_req_ids]:
            self.proposed.pop(req_id, None)
        for req_id in s.num_scheduled_tokens:
            if not samples(s, req_id):
                continue
            in_flight = self.sampling_in_flight.setdefault(req_id, [])
            if in_flight:
                placeholders = s.num_output_placeholders.get(req_id, 0)
                owes = sum(owed(m, req_id) for m in [*in_flight, s])
                if placeholders != owes:
                    on_placeholders = f", or scheduled on its {owes} placeholders" if placeholders else ""
                    self._fail(IN_FLIGHT, s.step, None, req_id, f"not in another in-flight batch{on_placeholders}",
                               f"also in step {', '.join(str(m.step) for m in in_flight)}, still in flight"
                               + (f"; {placeholders} placeholders" if placeholders else ""))
                self.awaits[(s.step, req_id)] = [m.step for m in in_flight]
            in_flight.append(s)

    def check_stage(self, s: ScheduleRecord, st: StageRecord) -> None:
        for row in st.rows:
            awaited = self.awaits.get((s.step, row.req_id))
            if awaited is None:
                self._check_row(s, st, row, scheduled_view(s, row.req_id, self.proposed.get(row.req_id, [])))
            elif awaited[-1] in self.came_back:
                self._check_awaited(s, st, row, awaited)
            else:  # its tokens are still in flight: checked once they are back
                self.pending.setdefault(awaited[-1], []).append((s, st, row))

    def _check_awaited(self, s: ScheduleRecord, st: StageRecord, row: RowRecord, awaited: list[int]) -> None:
        outputs = [self.came_back[m] for m in awaited]
        # A request aborted meanwhile, or finished by an output it waited for, is dropped
        # with this batch: what its stages compute for it is never read.
        if all(row.req_id in u.all_token_ids_after and row.req_id not in u.finished for u in outputs):
            self._check_row(s, st, row, resolved_view(s, row.req_id, outputs))

    def _check_row(self, s: ScheduleRecord, st: StageRecord, row: RowRecord, want: Expected) -> None:
        req_id = row.req_id
        if row.num_computed_tokens != want.num_computed_tokens:
            self._fail(ACCOUNTING, s.step, st.stage, req_id, want.says(f"num_computed_tokens={want.num_computed_tokens}"),
                       row.num_computed_tokens)
        # The blocks too: a stage that reads or writes KV through other
        # blocks than the scheduler gave computes other tokens while every
        # token id above is right.
        if row.block_ids is not None and req_id in s.block_ids and row.block_ids != s.block_ids[req_id]:
            self._fail(ACCOUNTING, s.step, st.stage, req_id, f"block table {s.block_ids[req_id]}", row.block_ids)
        # The history is everything before the drafts: what this step
        # gathers, and what the row claims as its own (num_tokens_no_spec).
        n_history = row.history_len
        history = want.all_token_ids[:n_history]
        if row.token_ids[:n_history] != history:
            self._fail(HISTORY, s.step, st.stage, req_id, want.says(f"{row.history_name(n_history)}={history}"),
                       row.token_ids[:n_history])
        if row.draft_slots != want.drafts:
            self._fail(DRAFTS, s.step, st.stage, req_id, want.says(f"draft slots {want.drafts}"), row.draft_slots)
        if st.is_last and st.verified_drafts.get(req_id, []) != want.drafts:
            self._fail(DRAFTS, s.step, st.stage, req_id, want.says(f"verified drafts {want.drafts}"),
                       st.verified_drafts.get(req_id, []))
        self._check_committed_kv(s, st, row, want)

    def _check_committed_kv(self, s: ScheduleRecord, st: StageRecord, row: RowRecord, want: Expected) -> None:
        """Invariant 10: position p's KV holds (all_token_ids[p], p), for every committed p."""
        if row.kv_token_ids is None:
            return
        stored = list(zip(row.kv_token_ids, row.kv_positions))
        bad = next((p for p, entry in enumerate(stored[: len(want.all_token_ids)])
                    if entry != (want.all_token_ids[p], p)), None)
        if bad is not None:
            token, position = stored[bad]
            self._fail(Invariant.COMMITTED_KV, s.step, st.stage, row.req_id,
                       want.says(f"KV at position {bad}: token {want.all_token_ids[bad]} stored at {bad}"),
                       f"token {token} stored at {position}" + ("" if token >= 0 else " (never written)"))

    def check_taps(self, step: StepRecord) -> None:
        """Invariant 9: each tap the last stage handed the drafter is the one its owner computed."""
        last = next(st for st in step.stages if st.is_last)
        for req_id, handed in last.drafter_taps.items():
            for layer, digests in handed.items():
                owner = next((st for st in step.stages if layer in st.computed_taps.get(req_id, {})), None)
                computed = owner.computed_taps[req_id][layer] if owner is not None else None
                if digests != computed:
                    where = f"stage {owner.stage}" if owner is not None else "no stage"
                    self._fail(Invariant.HIDDEN_STATE_HANDOVER, step.step, last.stage, req_id,
                               f"tap {layer} as {where} computed it at {len(digests)} positions",
                               f"{sum(a != b for a, b in zip(digests, computed or []))} of them differ"
                               if computed else "a tap no stage computed")

    def check_update(self, step: StepRecord) -> None:
        s = step.schedule
        for req_id in s.num_scheduled_tokens:
            if req_id in self.sampling_in_flight:
                self.sampling_in_flight[req_id] = [m for m in self.sampling_in_flight[req_id] if m.step != s.step]
            if req_id not in step.num_computed_after:
                continue  # aborted while this batch was in flight: the scheduler dropped it
            rejected = len(s.scheduled_spec_decode_tokens.get(req_id, [])) - step.num_accepted.get(req_id, 0)
            if req_id in step.stale:  # preempted meanwhile: the reset count is not rolled back
                rejected = 0
            # "old + scheduled" is the value before the update: scheduling already added it
            expected = step.num_computed_before_update[req_id] - rejected
            if step.num_computed_after[req_id] != expected:
                self._fail(ACCOUNTING, s.step, None, req_id,
                           f"num_computed_tokens={expected} (old + scheduled - rejected)", step.num_computed_after[req_id])
        self.proposed.update(step.spec_token_ids)
        self._check_sampled_once(step)
        self._resolve(step)

    def _check_sampled_once(self, step: StepRecord) -> None:
        last = next((st for st in step.stages if st.is_last), None)
        for req_id, tokens in (last.sampled if last else {}).items():
            row = last.row_of(req_id)
            first = row.num_computed_tokens + row.num_scheduled_tokens - row.num_drafts
            seen = self.sampled_at.setdefault(req_id, {})
            again = [p for p in range(first, first + len(tokens)) if p in seen]
            if again:
                self._fail(SAMPLED_ONCE, step.step, last.stage, req_id,
                           f"position {again[0]} sampled once (at step {seen[again[0]]})", "sampled again")
            seen.update(dict.fromkeys(range(first, first + len(tokens)), step.step))
        for req_id in step.finished:
            self.sampled_at.pop(req_id, None)

    def _resolve(self, step: StepRecord) -> None:
        """Async scheduling: check the rows that waited for this output, and forget what no
        batch still in flight waits for."""
        for key in [key for key in self.awaits if key[0] == step.step]:
            del self.awaits[key]
        if any(step.step in awaited for awaited in self.awaits.values()):
            self.came_back[step.step] = step
        for s, st, row in self.pending.pop(step.step, []):
            self._check_awaited(s, st, row, self.awaits[(s.step, row.req_id)])
        waited_for = {m for awaited in self.awaits.values() for m in awaited}
        self.came_back = {m: u for m, u in self.came_back.items() if m in waited_for}


def check_trace(trace: Trace) -> list[Violation]:
    """Replay the trace's events in the order they happened and list every violation."""
    checker = InvariantChecker(raise_on_violation=False)
    steps = {s.step: s for s in trace.steps}
    for event in trace.events:  # typed events (minispec.instruments.events; issue 16 §3)
        step = steps[event.step]
        if event.kind is EventKind.SCHEDULE:
            checker.check_schedule(step.schedule)
        elif event.kind is EventKind.STAGE:
            stage = next(st for st in step.stages if st.stage == event.stage)
            checker.check_stage(step.schedule, stage)
            if stage.is_last:  # recorded after its forward, with every other stage's taps of the step
                checker.check_taps(step)
        else:
            checker.check_update(step)
    return checker.violations
