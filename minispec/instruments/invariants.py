"""minispec's invariants, checked on trace records.

Live (``check_invariants=True``) the first violation raises
``InvariantViolation``; offline ``check_trace(trace)`` lists them all. Six rules
are numbered: 2-5 (``STATEMENTS``) are checked here on every stage-step; 1
(greedy output with drafts equals greedy output without, and transformers'
``generate``) and 6 (random sampling with drafts keeps the target distribution)
compare whole runs with references, so they live in the tests
(``test_greedy_equivalence.py``, ``test_sampling_distribution.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from minispec.instruments.trace import ScheduleRecord, StageRecord, StepRecord, Trace

NAMES = {
    2: "draft agreement",
    3: "token history",
    4: "shared accounting",
    5: "one in-flight batch per decode request",
}
STATEMENTS = {  # each rule as this module checks it (4 compares block tables too)
    2: "the drafts every stage embeds and the last stage verifies are the scheduler's "
       "scheduled_spec_decode_tokens",
    3: "on every stage, token_ids_cpu[row, :num_tokens_no_spec] is the scheduler's all_token_ids "
       "before inputs are gathered",
    4: "every stage's num_computed_tokens (and block table) is the scheduler's, and after rejection "
       "num_computed_tokens is old + scheduled - rejected",
    5: "a decode request is in at most one in-flight batch",
}


def samples(s: ScheduleRecord, req_id: str) -> bool:
    """Does this batch sample for the request (its chunk reaches the last token)?
    Prefill chunks that do not may be pipelined across batches; sampling ones may not."""
    return s.num_computed_tokens[req_id] + s.num_scheduled_tokens[req_id] >= len(s.all_token_ids[req_id])


@dataclass
class Violation:
    invariant: int
    step: int
    stage: int | None
    req_id: str
    expected: object
    actual: object

    @property
    def headline(self) -> str:
        where = f"step {self.step}" + (f", stage {self.stage}" if self.stage is not None else "")
        return f"invariant {self.invariant} ({NAMES[self.invariant]}) violated at {where}, request {self.req_id}"

    def __str__(self) -> str:
        return f"{self.headline}: expected {self.expected}, got {self.actual}"


class InvariantViolation(AssertionError):
    def __init__(self, violation: Violation):
        super().__init__(str(violation))
        self.violation = violation


class InvariantChecker:
    def __init__(self, raise_on_violation: bool = True):
        self.raise_on_violation = raise_on_violation
        self.violations: list[Violation] = []
        self.sampling_in_flight: dict[str, int] = {}  # request -> step of the batch that will sample it

    def _fail(self, *args) -> None:
        violation = Violation(*args)
        self.violations.append(violation)
        if self.raise_on_violation:
            raise InvariantViolation(violation)

    def check_schedule(self, s: ScheduleRecord) -> None:
        for req_id in s.num_scheduled_tokens:
            if not samples(s, req_id):
                continue
            if req_id in self.sampling_in_flight:
                self._fail(5, s.step, None, req_id, "not in another in-flight batch",
                           f"also in step {self.sampling_in_flight[req_id]}, still in flight")
            self.sampling_in_flight[req_id] = s.step

    def check_stage(self, s: ScheduleRecord, st: StageRecord) -> None:
        for row in st.rows:
            req_id = row.req_id
            if row.num_computed_tokens != s.num_computed_tokens[req_id]:
                self._fail(4, s.step, st.stage, req_id, f"num_computed_tokens={s.num_computed_tokens[req_id]}",
                           row.num_computed_tokens)
            # The blocks too: a stage that reads or writes KV through other
            # blocks than the scheduler gave computes other tokens while every
            # token id above is right.
            if row.block_ids is not None and req_id in s.block_ids and row.block_ids != s.block_ids[req_id]:
                self._fail(4, s.step, st.stage, req_id, f"block table {s.block_ids[req_id]}", row.block_ids)
            # The history is everything before the drafts: what this step
            # gathers, and what the row claims as its own (num_tokens_no_spec).
            n_history = row.history_len
            history = s.all_token_ids[req_id][:n_history]
            if row.token_ids[:n_history] != history:
                self._fail(3, s.step, st.stage, req_id, f"token_ids_cpu[{row.row}, :{n_history}]={history}",
                           row.token_ids[:n_history])
            drafts = s.scheduled_spec_decode_tokens.get(req_id, [])
            if row.draft_slots != drafts:
                self._fail(2, s.step, st.stage, req_id, f"draft slots {drafts}", row.draft_slots)
            if st.is_last and st.verified_drafts.get(req_id, []) != drafts:
                self._fail(2, s.step, st.stage, req_id, f"verified drafts {drafts}",
                           st.verified_drafts.get(req_id, []))

    def check_update(self, step: StepRecord) -> None:
        s = step.schedule
        for req_id in s.num_scheduled_tokens:
            if self.sampling_in_flight.get(req_id) == s.step:
                del self.sampling_in_flight[req_id]
            rejected = len(s.scheduled_spec_decode_tokens.get(req_id, [])) - step.num_accepted.get(req_id, 0)
            # "old + scheduled" is the value before the update: scheduling already added it
            expected = step.num_computed_before_update[req_id] - rejected
            if step.num_computed_after[req_id] != expected:
                self._fail(4, s.step, None, req_id, f"num_computed_tokens={expected} (old + scheduled - rejected)",
                           step.num_computed_after[req_id])


def check_trace(trace: Trace) -> list[Violation]:
    """Replay the trace's events in the order they happened and list every violation."""
    checker = InvariantChecker(raise_on_violation=False)
    steps = {s.step: s for s in trace.steps}
    for kind, step_id, stage_id in trace.events:
        step = steps[step_id]
        if kind == "schedule":
            checker.check_schedule(step.schedule)
        elif kind == "stage":
            checker.check_stage(step.schedule, next(st for st in step.stages if st.stage == stage_id))
        else:
            checker.check_update(step)
    return checker.violations
