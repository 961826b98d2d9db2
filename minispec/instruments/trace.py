"""Step traces: what the scheduler sent and what every stage saw, per engine step.

Opt-in (``LLM(..., record=True)`` or ``check_invariants=True``). The engine
calls ``on_schedule`` after each ``schedule()``, every stage calls ``on_stage`` once
its inputs are gathered (before its forward) and the last stage ``on_sampled`` once it
has sampled, and the engine calls ``on_update`` after ``update_from_output``; each call
except ``on_sampled`` also appends its ``Event`` (``minispec.instruments.events``, the
type the engine yields) to ``Trace.events``, in the order things happened. A stage
hands over data, never itself: its rows as ``RowRecord`` values, described by the
runner design from its own buffers (``WorkerBase.describe_rows``), so every design
is recorded, and checked, the same way. Records are plain data so renderers and the
invariant checker (``minispec.instruments.invariants``) work on them offline.

Beside the trace, a recorder tells its ``EngineListener``s what the engine's parts did,
in the order it happened: a request added, every ``schedule()`` (empty ones too), every
``update_from_output`` with its ``ModelRunnerOutput``, a stage starting a step, a stage's
inputs gathered, the last stage's samples, the pipeline hand-over's messages
(``PPMessage``). This is the one way to observe the engine from outside: code that needs
more than the trace (the reference harness beside the package, ``reference/``) builds its
listeners with ``listening(make)``, which every recorder built inside it asks for one, and
patches nothing. Listeners read what they are handed and change nothing.
Nothing here has a vLLM counterpart: it is minispec's window into the buffers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum

from minispec.instruments.events import Event, EventKind


class RowPath(StrEnum):
    """How a scheduled request got its row this step: the runners' trace bookkeeping (vLLM
    keeps no such record). A ``StrEnum``, so a recorded path prints as its word."""

    NEW = "new"  # first scheduled: added from scheduled_new_reqs
    STAYED = "stayed"  # kept its row from the step before
    MOVED = "moved"  # kept it, then condense moved it to a lower row, drafts and all
    READDED = "re-added"  # had no row (the other batch ran, or it was preempted): added again


@dataclass
class RowRecord:
    row: int  # the row's index in the stage's persistent batch (in a slot table: the batch row; see slot)
    req_id: str
    path: RowPath  # how the row was filled this step
    token_ids: list[int]  # token_ids_cpu[row, :end]: live region and every gathered slot
    num_tokens: int  # the stage's count, drafts included
    num_tokens_no_spec: int  # the stage's count of tokens it holds as its own (no drafts)
    num_computed_tokens: int  # the stage's count of tokens whose KV is computed, before this step's
    num_scheduled_tokens: int  # what this stage gathers for the request this step
    num_drafts: int  # how many of those are drafts (the last ones)
    # Who held this row index when this stage last recorded it, and its token_ids
    # then: where a re-added row's unwritten slots came from (remove_request
    # leaves tokens behind). None for a row index the stage had not used before.
    prev_req_id: str | None = None
    prev_token_ids: list[int] = field(default_factory=list)
    block_ids: list[int] | None = None  # block_table row: where this stage's KV for the request lives
    # Model Runner V2: the request's slot in its RequestState (``row`` is then the batch
    # row, and prev_req_id the slot's previous occupant); None for V1's persistent batch.
    slot: int | None = None
    # What the stage's KV holds at the request's first num_computed_tokens positions, per position:
    # the token and the position stored there (tree_kv.py's probe); None where the design keeps none
    kv_token_ids: list[int] | None = None
    kv_positions: list[int] | None = None

    @property
    def buffer_index(self) -> int:
        """Where the stage keeps the request between steps: its slot in a slot table (V2),
        else its row of the persistent batch (V1). ``prev_req_id`` is this index's previous
        occupant."""
        return self.row if self.slot is None else self.slot

    def history_name(self, n: int) -> str:
        """How the stage's own buffer spells the row's first ``n`` tokens, for messages."""
        if self.slot is None:
            return f"token_ids_cpu[{self.row}, :{n}]"
        return f"slot {self.slot}'s all_token_ids[:{n}]"

    @property
    def first_draft_pos(self) -> int:
        """Where this step's drafts start: its inputs end at num_computed + num_scheduled,
        and the last num_drafts of them are drafts."""
        return self.num_computed_tokens + self.num_scheduled_tokens - self.num_drafts

    @property
    def history_len(self) -> int:
        """How many leading slots are the request's history, not drafts: what this step
        gathers before its drafts, or what the row claims (num_tokens_no_spec), the longer."""
        return max(self.first_draft_pos, self.num_tokens_no_spec)

    @property
    def draft_slots(self) -> list[int]:
        """The slots this stage gathers as drafts (positions of the last num_drafts inputs)."""
        return self.token_ids[self.first_draft_pos : self.first_draft_pos + self.num_drafts]


@dataclass
class StageRecord:
    step: int
    stage: int
    is_last: bool  # the stage that samples and verifies
    rows: list[RowRecord]  # one per request the stage holds
    input_ids: list[int]  # what the stage's forward embeds
    verified_drafts: dict[str, list[int]]  # last stage: drafts the rejection sampler checks
    sampled: dict[str, list[int]] = field(default_factory=dict)  # last stage: tokens it emitted
    # EAGLE-3 taps, as a digest per position (``tap_digests``), per request and tapped layer: those
    # this stage computed at its own tap points, and (last stage) those it handed the drafter
    computed_taps: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    drafter_taps: dict[str, dict[int, list[str]]] = field(default_factory=dict)

    def row_of(self, req_id: str) -> RowRecord:
        return next(r for r in self.rows if r.req_id == req_id)


@dataclass
class ScheduleRecord:
    step: int
    num_scheduled_tokens: dict[str, int]  # per request, drafts included
    scheduled_spec_decode_tokens: dict[str, list[int]]  # the drafts sent with it
    new_token_ids: dict[str, list[int]]  # the tokens relayed to non-last stages
    num_computed_tokens: dict[str, int]  # before this schedule advanced them
    all_token_ids: dict[str, list[int]]  # the scheduler's prompt + output tokens (no drafts)
    new_req_ids: list[str]
    num_prompt_tokens: dict[str, int]
    block_ids: dict[str, list[int]] = field(default_factory=dict)  # the KV cache manager's, once scheduled
    # Async scheduling: per request, the tokens its batches in flight owe, this one's included
    # (vLLM's num_output_placeholders, once this schedule added 1 + drafts for a batch that
    # samples); always 0 when scheduling waits for every output
    num_output_placeholders: dict[str, int] = field(default_factory=dict)
    resumed_req_ids: list[str] = field(default_factory=list)  # resumed after preemption in this step


@dataclass
class StepRecord:
    schedule: ScheduleRecord
    stages: list[StageRecord] = field(default_factory=list)
    # around update_from_output: per request, accepted drafts and num_computed_tokens
    # just before and just after (later batches may already have advanced it); a
    # request aborted while the batch was in flight has no num_computed entries
    num_accepted: dict[str, int] = field(default_factory=dict)
    num_computed_before_update: dict[str, int] = field(default_factory=dict)  # the scheduler's, just before
    num_computed_after: dict[str, int] = field(default_factory=dict)  # the scheduler's, just after
    # the scheduler's all_token_ids just after, and the drafts the output brought for each
    # request's next step (the last stage's proposals): what a batch scheduled on this one's
    # placeholders must have run with (async scheduling)
    all_token_ids_after: dict[str, list[int]] = field(default_factory=dict)
    spec_token_ids: dict[str, list[int]] = field(default_factory=dict)
    # requests this update finished: a later batch still in flight for one is dropped unread
    finished: list[str] = field(default_factory=list)
    # requests preempted while this batch was in flight: its output was delivered stale, their
    # counts (reset by preemption) untouched (Scheduler's docstring); its drafts are recorded
    # all the same: the batches scheduled on its placeholders ran with them
    stale: list[str] = field(default_factory=list)

    @property
    def step(self) -> int:
        return self.schedule.step


@dataclass
class Trace:
    fixes: str
    pipeline_parallel_size: int
    steps: list[StepRecord] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # in the order they happened
    outputs: dict[str, list[int]] = field(default_factory=dict)  # filled by whoever ran it
    stats: dict = field(default_factory=dict)

    def step(self, step: int) -> StepRecord:
        return next(s for s in self.steps if s.step == step)


class MissingRecord(RuntimeError):
    """A stage ran a step and did not record it: a run the checker could only call clean by
    never looking. The runner contract's recording calls are a duty of every design
    (``WorkerBase._record_stage``, ``_record_sampled``; ``docs/adding_a_runner.md``)."""


class EngineListener:
    """What a recording engine tells a listener besides its trace; each method does nothing
    here, and a listener overrides the ones it needs. ``scheduler``, ``runner``, ``out``
    (a ``SchedulerOutput``), ``output`` (a ``ModelRunnerOutput``) and ``batch`` are the
    engine's own objects, handed over to be read, never changed."""

    def on_request_added(self, scheduler, request) -> None:
        """The engine handed ``request`` to the scheduler (``add_request``)."""

    def on_schedule(self, scheduler, out) -> None:
        """``schedule()`` returned ``out``: every schedule, empty ones too."""

    def on_update(self, scheduler, out, output) -> None:
        """``update_from_output(out, output)`` returned."""

    def on_stage_start(self, runner, out) -> None:
        """A stage's ``execute_model`` began, before it touched a row (Model Runner V2)."""

    def on_stage_inputs(self, runner, out) -> None:
        """A stage updated its rows and gathered its inputs, before its forward."""

    def on_message_mismatch(self, runner, out, error) -> None:
        """A message did not fit the receive posted for it (``error``, a ``MessageMismatch``,
        raised next): the run stops here."""

    def on_last_stage_sampled(self, runner, batch, sampled, num_sampled, num_rejected) -> None:
        """The last stage sampled and drafted (Model Runner V2: its padded ``sampled``,
        ``num_sampled``, ``num_rejected``; the drafts in its slots)."""

    def on_pp_message(self, runner, message) -> None:
        """``runner``'s pipeline hand-over sent a broadcast or posted its receives
        (a ``PPMessage``, Model Runner V2)."""


_LISTENING: list[Callable[["TraceRecorder"], EngineListener]] = []


@contextlib.contextmanager
def listening(make: Callable[["TraceRecorder"], EngineListener]) -> Iterator[None]:
    """Every ``TraceRecorder`` built inside (an ``LLM`` that records) asks ``make`` for a
    listener, so a scenario run inside can be observed without being changed."""
    _LISTENING.append(make)
    try:
        yield
    finally:
        _LISTENING.remove(make)


class TraceRecorder:
    def __init__(self, fixes_name: str, pp_size: int, checker=None):
        self.trace = Trace(fixes_name, pp_size)
        self.checker = checker
        self.listeners = tuple(make(self) for make in _LISTENING)
        self._by_step: dict[int, StepRecord] = {}
        self._sampled: set[int] = set()  # the steps whose last stage handed over what it sampled
        self._last_rows: dict[int, dict[int, RowRecord]] = {}  # per stage: row index -> its last record

    def on_schedule(self, out, scheduler) -> None:
        reqs = scheduler.requests
        cached = out.scheduled_cached_reqs
        record = ScheduleRecord(
            step=out.step,
            num_scheduled_tokens=dict(out.num_scheduled_tokens),
            scheduled_spec_decode_tokens={r: list(d) for r, d in out.scheduled_spec_decode_tokens.items()},
            new_token_ids=dict(zip(cached.req_ids, map(list, cached.new_token_ids))),
            num_computed_tokens={r: reqs[r].num_computed_tokens - n for r, n in out.num_scheduled_tokens.items()},
            all_token_ids={r: reqs[r].all_token_ids for r in out.num_scheduled_tokens},
            new_req_ids=[n.req_id for n in out.scheduled_new_reqs],
            num_prompt_tokens={r: len(reqs[r].prompt_token_ids) for r in out.num_scheduled_tokens},
            block_ids={r: list(scheduler.kv_cache_manager.get_block_ids(r)) for r in out.num_scheduled_tokens},
            # 0 for a request that keeps no such count (a test's stand-in)
            num_output_placeholders={r: getattr(reqs[r], "num_output_placeholders", 0) for r in out.num_scheduled_tokens},
            resumed_req_ids=[r for r, resumed in zip(cached.req_ids, getattr(cached, "resumed_from_preemption", ()))
                             if resumed],
        )
        step = StepRecord(record)
        self._by_step[out.step] = step
        self.trace.steps.append(step)
        self.trace.events.append(Event(EventKind.SCHEDULE, out.step))
        if self.checker:
            self.checker.check_schedule(record)

    def on_stage(self, step: int, stage: int, is_last: bool, rows: list[RowRecord], input_ids: list[int],
                 verified_drafts: dict[str, list[int]]) -> None:
        """A stage's rows (``WorkerBase.describe_rows``) and inputs, before its forward. The
        recorder adds each row's previous occupant from what it last saw at the same buffer
        index, and keeps its own copies: the caller's ``rows`` are left as they were."""
        last = self._last_rows.setdefault(stage, {})
        rows = [replace(r, token_ids=list(r.token_ids), block_ids=None if r.block_ids is None else list(r.block_ids),
                        prev_req_id=prev.req_id if (prev := last.get(r.buffer_index)) else None,
                        prev_token_ids=prev.token_ids if prev else []) for r in rows]
        last.update({r.buffer_index: r for r in rows})
        record = StageRecord(step=step, stage=stage, is_last=is_last, rows=rows, input_ids=list(input_ids),
                             verified_drafts={r: list(d) for r, d in verified_drafts.items()})
        self._by_step[step].stages.append(record)
        self.trace.events.append(Event(EventKind.STAGE, step, stage))
        if self.checker:
            self.checker.check_stage(self._by_step[step].schedule, record)

    def on_sampled(self, step: int, stage: int, sampled: dict[str, list[int]]) -> None:
        """What the last stage emitted per request this step (after ``on_stage``)."""
        record = next((st for st in self._by_step[step].stages if st.stage == stage), None)
        if record is None:
            raise MissingRecord(f"stage {stage} handed over what it sampled at step {step} but recorded no rows "
                                "for it: its runner must call _record_stage once its inputs are gathered, before "
                                "its forward (WorkerBase.execute_model)")
        record.sampled = {r: list(t) for r, t in sampled.items()}
        self._sampled.add(step)

    def on_hidden_states(self, step: int, stage: int, computed: dict[str, dict[int, list[str]]],
                         handed: dict[str, dict[int, list[str]]]) -> None:
        """After a stage's forward, when an EAGLE-3 head reads taps: the taps it computed and (last
        stage) those it handed the drafter, per request and layer (``tap_digests``)."""
        record = next(st for st in self._by_step[step].stages if st.stage == stage)
        record.computed_taps, record.drafter_taps = computed, handed
        if self.checker and record.is_last:
            self.checker.check_taps(self._by_step[step])

    def on_update(self, out, requests: dict, num_accepted: dict[str, int], num_computed_before: dict[str, int],
                  spec_token_ids: dict[str, list[int]], stale: set[str] = frozenset()) -> None:
        """``requests``: the batch's requests still in the scheduler before the update
        (one that finishes in it leaves the scheduler's dict; an aborted one is absent);
        ``spec_token_ids``: the drafts the output brought, per request; ``stale``: the
        requests preempted while the batch was in flight."""
        step = self._by_step[out.step]
        self._check_recorded(step)
        step.num_accepted = num_accepted
        step.num_computed_before_update = num_computed_before
        step.num_computed_after = {r: request.num_computed_tokens for r, request in requests.items()}
        step.all_token_ids_after = {r: list(request.all_token_ids) for r, request in requests.items()}
        step.spec_token_ids = {r: list(d) for r, d in spec_token_ids.items()}
        step.finished = [r for r, request in requests.items() if request.is_finished()]
        step.stale = sorted(stale)
        self.trace.events.append(Event(EventKind.UPDATE, out.step))
        if self.checker:
            self.checker.check_update(step)

    def _check_recorded(self, step: StepRecord) -> None:
        """The batch came back, so every stage ran it: each must have recorded its rows, and the
        last stage what it sampled. Refused otherwise, naming the stage, the step and the call."""
        recorded = {st.stage for st in step.stages}
        last = self.trace.pipeline_parallel_size - 1
        for stage in range(last + 1):
            if stage not in recorded:
                raise MissingRecord(f"stage {stage} ran step {step.step} and recorded nothing: its runner must call "
                                    "_record_stage once its inputs are gathered, before its forward "
                                    "(WorkerBase.execute_model); no invariant can be checked on a stage never seen")
        if step.step not in self._sampled:
            raise MissingRecord(f"stage {last} (the last) ran step {step.step} and did not record what it sampled: "
                                "its runner must call _record_sampled once it has sampled (WorkerBase.execute_model)")

    def tell(self, event: Callable[..., None], *args) -> None:
        """Call ``event`` (an ``EngineListener`` method, e.g. ``EngineListener.on_schedule``)
        on every listener, as that listener overrides it: the engine's side of the channel."""
        for listener in self.listeners:
            getattr(listener, event.__name__)(*args)

def tap_digests(tensor, counts: list[int], req_ids: list[str]) -> dict[str, list[str]]:
    """Per request, a digest of each of its rows of ``tensor`` (``counts[j]`` rows for
    ``req_ids[j]``, in order): equal digests, equal bits."""
    import hashlib

    rows = tensor.detach().cpu().contiguous().numpy()
    out, offset = {}, 0
    for req_id, n in zip(req_ids, counts):
        out[req_id] = [hashlib.blake2b(r.tobytes(), digest_size=8).hexdigest() for r in rows[offset : offset + n]]
        offset += n
    return out
