"""What a schedule exercised, read off its recorded trace: the explorer's coverage.

vLLM twin: none (vLLM's tests measure line coverage, not which interleavings ran). A clean
answer means little unless it says what it ran through: ``conditions(trace, k)`` lists the
situations where runner slips live that one run reached, from the trace recorder's records
alone (``minispec.instruments.trace``), so every design is measured the same way; ``goals``
lists those a scope should reach, each with why not where it cannot. Left out: conditions
inside a stage's forward that no record shows (which kernel ran, which buffer was copied).
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from minispec.instruments.events import EventKind
from minispec.instruments.trace import RowPath, StepRecord, Trace


class Kind(StrEnum):
    HANDOVER = "a row or slot changed hands"
    READD_WITH_DRAFTS = "a request re-added with drafts"
    NEW_WITH_DRAFTS = "a new request's first step a decode with drafts (a prefix-cache hit)"
    ACCEPTED = "drafts accepted, then a later step"  # detail: how many were accepted
    PREEMPT_RESUME = "a request preempted and resumed"
    PREEMPT_IN_FLIGHT = "a request preempted with a batch of it in flight"
    SHORT_CHUNK = "a prefill chunk shorter than k + 1"
    PLACEHOLDERS = "a request scheduled on placeholders, then resolved (async)"
    STAGE_PAIRING = "two stages running different batches at once"  # detail: (earlier stage, later stage)
    REUSE_BROADCAST_PENDING = "a buffer reused in the forward that takes its previous occupant's last broadcast"
    REPEATED_DRAFTS = "a request sent the same draft list twice in a row"
    REMOTE_TAPS = "the drafter handed a tap a stage before the last computed (EAGLE-3)"


class Condition(NamedTuple):
    kind: Kind
    detail: int | tuple[int, int] | None = None

    def __str__(self) -> str:
        if self.kind is Kind.ACCEPTED:
            return f"{self.detail} draft{'s' * (self.detail != 1)} accepted, then a later step"
        if self.kind is Kind.STAGE_PAIRING:
            return f"stages {self.detail[0]} and {self.detail[1]} running different batches at once"
        return str(self.kind)


def goals(ks, pps, async_flags, remote_taps: bool = False,
          padded_decodes: str | None = "the scope never enables prefix caching") -> dict[Condition, str | None]:
    """Every condition a scope of these k, pipeline sizes and async settings should reach,
    with None, or with why it cannot (``remote_taps``: whether its drafter reads a tap that a
    stage before the last owns; ``padded_decodes``: why no new request's first step can be a
    decode with drafts, None where it can)."""
    k, pp = max(ks), max(pps)
    wanted = [Condition(Kind.HANDOVER), Condition(Kind.READD_WITH_DRAFTS), Condition(Kind.PREEMPT_RESUME),
              Condition(Kind.PREEMPT_IN_FLIGHT), Condition(Kind.SHORT_CHUNK), Condition(Kind.REUSE_BROADCAST_PENDING), Condition(Kind.REPEATED_DRAFTS)]
    wanted += [Condition(Kind.ACCEPTED, n) for n in range(k + 1)]
    found: dict[Condition, str | None] = dict.fromkeys(wanted)
    found[Condition(Kind.PLACEHOLDERS)] = None if True in async_flags else "the scope never schedules asynchronously"
    found[Condition(Kind.NEW_WITH_DRAFTS)] = padded_decodes
    found[Condition(Kind.REMOTE_TAPS)] = None if remote_taps else ("the scope's drafter reads no tap that a stage "
                                                                    "before the last owns")
    pairs = [(i, j) for i in range(max(pp, 3)) for j in range(i + 1, max(pp, 3))]
    for pair in pairs:
        found[Condition(Kind.STAGE_PAIRING, pair)] = (None if pair[1] < pp else
                                                      f"the scope runs at most {pp} stages")
    return found


def conditions(trace: Trace, k: int) -> set[Condition]:
    """What this run reached."""
    found: set[Condition] = set()
    for i, step in enumerate(trace.steps):
        found |= _rows(step) | _schedule(step, trace.steps[:i], k) | _accepted(step, trace.steps[i + 1:])
    in_flight = {Condition(Kind.PREEMPT_IN_FLIGHT) for step in trace.steps if step.stale}
    return found | in_flight | _pairings(trace) | _reuse_pending(trace) | _repeated_drafts(trace) | _remote_taps(trace)


def _remote_taps(trace: Trace) -> set[Condition]:
    """A step where the last stage handed the drafter taps and an earlier stage computed one of them."""
    for step in trace.steps:
        handed = any(st.drafter_taps for st in step.stages if st.is_last)
        if handed and any(taps for st in step.stages if not st.is_last for taps in st.computed_taps.values()):
            return {Condition(Kind.REMOTE_TAPS)}
    return set()


def _rows(step: StepRecord) -> set[Condition]:
    found = set()
    for stage in step.stages:
        for row in stage.rows:
            if row.prev_req_id is not None and row.prev_req_id != row.req_id:
                found.add(Condition(Kind.HANDOVER))
            if row.path is RowPath.READDED and row.num_drafts:
                found.add(Condition(Kind.READD_WITH_DRAFTS))
            if row.path is RowPath.NEW and row.num_drafts:
                found.add(Condition(Kind.NEW_WITH_DRAFTS))
    return found


def _schedule(step: StepRecord, before: list[StepRecord], k: int) -> set[Condition]:
    s, found = step.schedule, set()
    for req, n in s.num_scheduled_tokens.items():
        computed, prompt = s.num_computed_tokens[req], s.num_prompt_tokens[req]
        if computed < prompt and n < k + 1 and (computed > 0 or computed + n < prompt):
            found.add(Condition(Kind.SHORT_CHUNK))
        drafts = s.scheduled_spec_decode_tokens.get(req, [])
        samples = computed + n >= prompt
        if s.num_output_placeholders.get(req, 0) > (1 + len(drafts)) * samples:
            found.add(Condition(Kind.PLACEHOLDERS))
        if req in s.resumed_req_ids or (computed == 0 and any(req in b.schedule.num_scheduled_tokens for b in before)):
            found.add(Condition(Kind.PREEMPT_RESUME))  # scheduled from scratch (or its cached prefix) again
    return found


def _repeated_drafts(trace: Trace) -> set[Condition]:
    """The last stage verified the same drafts for a request in two of its steps in a row
    (what it verifies: under async scheduling the scheduler sends only placeholders)."""
    last: dict[str, list[int]] = {}
    for step in trace.steps:
        for stage in step.stages:
            for req, drafts in stage.verified_drafts.items() if stage.is_last else ():
                if drafts and last.get(req) == drafts:
                    return {Condition(Kind.REPEATED_DRAFTS)}
                last[req] = drafts
    return set()


def _accepted(step: StepRecord, after: list[StepRecord]) -> set[Condition]:
    return {Condition(Kind.ACCEPTED, n) for req, n in step.num_accepted.items()
            if any(req in later.schedule.num_scheduled_tokens for later in after)}


def _stage_events(trace: Trace) -> list[tuple[int, int]]:
    return [(e.step, e.stage) for e in trace.events if e.kind is EventKind.STAGE]


def _pairings(trace: Trace) -> set[Condition]:
    """Stages that ran different batches in one pipeline tick. The in-process executor runs
    each tick's batches oldest first, so the furthest stage first: a tick's stage events are
    a run of falling stage numbers, ended by a stage that does not fall or by a schedule or
    an update (those happen between ticks)."""
    found, tick = set(), []
    for event in trace.events:
        if event.kind is not EventKind.STAGE or (tick and event.stage >= tick[-1][1]):
            tick = []
        if event.kind is EventKind.STAGE:
            found |= {Condition(Kind.STAGE_PAIRING, (event.stage, j)) for t, j in tick if t != event.step}
            tick.append((event.step, event.stage))
    return found


def _reuse_pending(trace: Trace) -> set[Condition]:
    """A stage reuses a buffer index in its first forward after the last stage sampled the
    previous occupant's last token: the forward that takes that broadcast."""
    events = _stage_events(trace)
    last = trace.pipeline_parallel_size - 1
    final_step = {}  # request -> the last step that scheduled it
    for step in trace.steps:
        final_step.update(dict.fromkeys(step.schedule.num_scheduled_tokens, step.step))
    for step in trace.steps:
        for stage in step.stages:
            if stage.is_last:
                continue
            here = events.index((step.step, stage.stage))
            for row in stage.rows:
                prev = row.prev_req_id
                if prev is None or prev == row.req_id or (final_step[prev], last) not in events:
                    continue
                sampled = events.index((final_step[prev], last))
                if sampled < here and all(s != stage.stage for _, s in events[sampled + 1:here]):
                    return {Condition(Kind.REUSE_BROADCAST_PENDING)}
    return set()
