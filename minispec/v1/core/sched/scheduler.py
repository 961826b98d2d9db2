"""The v1 scheduler (vLLM: ``vllm/v1/core/sched/scheduler.py``, July 2025 logic).

There are no separate prefill and decode phases: every request has
``num_tokens_with_spec - num_computed_tokens`` tokens left to compute, within one shared
token budget; running requests first (FCFS), then waiting ones. ``num_computed_tokens``
advances at schedule time, drafts included, so a request whose batch is in flight has
nothing left to schedule: that is why, with a batch queue, decode batches alternate
between two sets of requests. Preemption takes the last of ``running`` and frees its
blocks at once; its output still in flight is *stale*: appended when it returns, but it
moves no counter preemption reset, and the request is not resumed before it is back. A
preempted request loses its drafts. Under prefix caching a waiting request starts from its
cached prefix; one left with a single token to compute is a decode on its first step, padded
to ``1 + k`` with placeholder drafts where the design's slots take them
(``pad_spec_decode``). Left out: priorities, encoder inputs, structured output, LoRA, KV
connectors. Fidelity to vLLM: ``docs/fidelity/scheduler.md``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields

from minispec.config import SchedulerConfig
from minispec.v1.core.kv_cache_manager import KVCacheManager
from minispec.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.request import Request, RequestStatus


@dataclass
class RequestTotals:
    """Per-request counts added up (``Request`` has a field of each name)."""

    num_output_tokens: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_sampling_steps: int = 0

    def add(self, request: Request) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(request, f.name))


def deliver_stale_output(generated: list[int]) -> list[int]:
    """What a preempted request keeps of its batch in flight: all of it. The switch that
    puts the fault back is ``minispec/v1/worker/scheduler_switches.py``."""
    return generated


class Scheduler:
    """Decides each step which requests run and how many tokens each computes, drafts included,
    within one token budget; allocates their KV blocks, preempts when the pool runs short, and
    turns each batch's output into the requests' new tokens (``update_from_output``)."""

    def __init__(self, config: SchedulerConfig, kv_cache_manager: KVCacheManager, use_pp: bool,
                 stale_output=deliver_stale_output, num_spec_tokens: int = 0, pad_spec_decode: bool = False):
        """``stale_output``: the function the design's stale-output switch picked
        (``minispec/v1/worker/scheduler_switches.py``); ``num_spec_tokens``: k;
        ``pad_spec_decode``: pad a waiting request's first step to ``1 + k`` when it is a decode
        (``_pads``)."""
        self.config = config
        self.num_spec_tokens, self.pad_spec_decode = num_spec_tokens, pad_spec_decode
        self.stale_output = stale_output
        self.kv_cache_manager = kv_cache_manager
        self.use_pp = use_pp
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()
        # preempted since the last schedule sent (vLLM 0.30.0: reset_preempted_req_ids, scheduler.py 214)
        self.preempted_req_ids: set[str] = set()
        self.finished_totals = RequestTotals()  # of the requests that have left self.requests
        self.num_preemptions = 0
        self.step_counter = 0
        self.num_scheduled_batches = 0  # schedules that held work: the engine executes only those

    def skip_idle_steps(self, n: int) -> None:
        """Number the next schedule as if ``n`` had found nothing to do (the engine skips the idle
        engine steps before a far arrival; minispec's step numbers name steps in traces)."""
        self.step_counter += n

    # -- requests ---------------------------------------------------------
    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            # Two requests under one id would share one entry in every stage's batch.
            raise ValueError(f"request_id={request.request_id!r}: expected an id not used before")
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def finish_requests(self, request_ids: str | Iterable[str], finished_status: RequestStatus) -> None:
        """Finish requests from outside the scheduler (vLLM: an abort): their blocks are
        freed and ``finished_req_ids`` tells every stage. One id or an iterable of ids
        (a bare string is one id)."""
        assert finished_status.is_finished
        if isinstance(request_ids, str):
            request_ids = (request_ids,)
        for req_id in request_ids:
            request = self.requests.get(req_id)
            if request is None:
                continue
            # Looked up in both queues: an exception in schedule() can leave a
            # request between them, in neither or (status already finished) in running.
            if request in self.running:
                self.running.remove(request)
            if request in self.waiting:
                self.waiting.remove(request)
            request.status = finished_status
            self._free_request(request)

    def _free_request(self, request: Request) -> None:
        """A finished request leaves the scheduler: its blocks are freed, every stage is
        told (``finished_req_ids``) and it leaves ``requests``."""
        self.kv_cache_manager.free(request)
        request.spec_token_ids.clear()
        self.finished_req_ids.add(request.request_id)
        # Preempted since the last schedule went out and finished now (aborted, or stopped by its
        # stale output): the stages are told it finished, and need no word of the preemption.
        self.preempted_req_ids.discard(request.request_id)
        self.finished_totals.add(request)
        del self.requests[request.request_id]

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def totals(self) -> RequestTotals:
        """The counts of every request since the scheduler was built, finished or not."""
        totals = RequestTotals(**vars(self.finished_totals))
        for request in self.requests.values():
            totals.add(request)
        return totals

    # -- schedule ---------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        budget = self.config.max_num_batched_tokens
        num_scheduled: dict[str, int] = {}
        spec_tokens: dict[str, list[int]] = {}
        new_blocks: dict[str, list[int]] = {}
        running_reqs, resumed_reqs, new_reqs, preempted = [], [], [], []
        prefill_scheduled = False  # a running request scheduled in this step is mid-prefill

        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            if self._wait_for_output(request):
                i += 1
                continue
            # Every token this step computes can emit one more, and all of them
            # must fit in max_model_len: hence the - 1.
            n = min(
                request.num_tokens_with_spec + request.num_output_placeholders - request.num_computed_tokens,
                budget,
                self.config.max_model_len - 1 - request.num_computed_tokens,
            )
            if n <= 0:  # its batch is in flight: nothing to compute yet
                i += 1
                continue
            blocks = self._allocate_or_preempt(request, n, preempted)
            if blocks is None:
                break
            running_reqs.append(request)
            prefill_scheduled |= request.is_prefill_chunk
            new_blocks[request.request_id] = blocks
            num_scheduled[request.request_id] = n
            budget -= n
            i += 1
            # Drafts that did not fit are dropped (docs/fidelity/scheduler.md: a departure from 0.9.2).
            num_spec = n + request.num_computed_tokens - request.num_tokens - request.num_output_placeholders
            del request.spec_token_ids[max(num_spec, 0):]
            if request.spec_token_ids:
                spec_tokens[request.request_id] = list(request.spec_token_ids)

        j = 0
        while j < len(self.waiting) and budget > 0 and not preempted:
            if len(self.running) >= self.config.max_num_seqs:
                break
            request = self.waiting[j]
            if request.num_stale_output_tokens > 0:  # its stale output is still to come
                j += 1
                continue
            hits = self.kv_cache_manager.get_computed_blocks(request) if request.num_computed_tokens == 0 else []
            num_computed = request.num_computed_tokens + len(hits) * self.kv_cache_manager.block_size
            n = request.num_tokens - num_computed
            pad = self._pads(n, num_computed, prefill_scheduled, running_reqs)
            if pad and 1 + self.num_spec_tokens > budget:
                break  # vLLM prefers not scheduling it to scheduling it unpadded
            n = min(1 + self.num_spec_tokens if pad else n, budget)
            blocks = self.kv_cache_manager.allocate_slots(request, n, hits)
            if blocks is None:
                break
            request.num_computed_tokens = num_computed
            if pad:
                spec_tokens[request.request_id] = [-1] * self.num_spec_tokens
            del self.waiting[j]
            self.running.append(request)
            if request.status == RequestStatus.PREEMPTED:
                resumed_reqs.append(request)
                new_blocks[request.request_id] = self.kv_cache_manager.get_block_ids(request.request_id)
            else:
                new_reqs.append(request)
            request.status = RequestStatus.RUNNING
            num_scheduled[request.request_id] = n
            budget -= n

        output = SchedulerOutput(
            scheduled_new_reqs=[
                NewRequestData(r.request_id, r.prompt_token_ids, r.sampling_params,
                               list(self.kv_cache_manager.get_block_ids(r.request_id)), r.num_computed_tokens)
                for r in new_reqs
            ],
            scheduled_cached_reqs=self._make_cached_request_data(
                running_reqs, resumed_reqs, num_scheduled, spec_tokens, new_blocks
            ),
            num_scheduled_tokens=num_scheduled,
            total_num_scheduled_tokens=sum(num_scheduled.values()),
            scheduled_spec_decode_tokens=spec_tokens,
            finished_req_ids=self.finished_req_ids,
            step=self.step_counter,
            preempted_req_ids=self.preempted_req_ids,
        )
        self._update_after_schedule(output)
        self.step_counter += 1
        self.num_scheduled_batches += output.total_num_scheduled_tokens > 0
        # A new set, not clear(): the output just built carries the old one.
        self.finished_req_ids, self.preempted_req_ids = set(), set()
        return output

    def _pads(self, num_new_tokens: int, num_computed: int, prefill_scheduled: bool, running_reqs) -> bool:
        """Is a waiting request's first step a decode padded to ``1 + k`` tokens, k placeholder
        drafts (vLLM 0.30.0 ``vllm/v1/core/sched/scheduler.py`` 1042-1063; the conditions and
        minispec's own, ``1 + k`` within the whole budget: ``docs/fidelity/scheduler.md``)?"""
        return (self.pad_spec_decode and self.num_spec_tokens > 0 and num_new_tokens == 1 and not prefill_scheduled
                and bool(running_reqs or num_computed > 0)
                and num_computed + 1 + self.num_spec_tokens + 1 <= self.config.max_model_len
                and 1 + self.num_spec_tokens <= self.config.max_num_batched_tokens)

    def _wait_for_output(self, request: Request) -> bool:
        """Async scheduling only: is there nothing to schedule for ``request`` until an output
        comes back? Its batches in flight reach ``max_tokens`` even if every draft is rejected,
        or its design makes it wait, counted in executed batches (``num_scheduled_batches``;
        why: ``docs/fidelity/scheduler.md``). Once its batch is back, it waits no more."""
        params = request.sampling_params
        done = (request.num_output_placeholders > 0 and request.num_computed_tokens + 2
                - request.num_output_placeholders >= len(request.prompt_token_ids) + params.max_tokens)
        gated = request.num_inflight_batches > 0 and self.num_scheduled_batches < request.next_decode_eligible_step
        return done or gated

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        """Advance at schedule time, drafts included (vLLM: ``_update_after_schedule``)."""
        for req_id, n in output.num_scheduled_tokens.items():
            request = self.requests[req_id]
            request.num_computed_tokens += n
            request.num_in_flight_tokens += n
            request.num_inflight_batches += 1
            # read by the next schedule's padding rule (vLLM: is_prefill_chunk)
            request.is_prefill_chunk = request.num_computed_tokens < request.num_tokens + request.num_output_placeholders

    def _allocate_or_preempt(self, request, n, preempted) -> list[int] | None:
        """Allocate, preempting from the back of ``running`` until it fits. ``request`` is
        the first of ``running`` not yet looked at, so the victim is never one already
        scheduled in this step."""
        while (blocks := self.kv_cache_manager.allocate_slots(request, n)) is None:
            victim = self.running[-1]
            self._preempt(victim)
            preempted.append(victim)
            if victim is request:
                return None
        return blocks

    def _preempt(self, request: Request) -> None:
        self.running.remove(request)
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.spec_token_ids.clear()
        # Whatever is in flight comes back stale (vLLM 0.30.0 _preempt_request, 1497-1511;
        # in flight already counts a stale share not yet drained, so it is assigned).
        request.num_stale_output_tokens = request.num_in_flight_tokens
        request.num_output_placeholders = 0
        request.num_preemptions += 1
        self.num_preemptions += 1
        self.preempted_req_ids.add(request.request_id)
        self.waiting.appendleft(request)

    def _make_cached_request_data(self, running_reqs, resumed_reqs, num_scheduled, spec_tokens, new_blocks):
        data = CachedRequestData()
        for request in running_reqs + resumed_reqs:
            req_id = request.request_id
            data.req_ids.append(req_id)
            data.resumed_from_preemption.append(request in resumed_reqs)
            if request in resumed_reqs:
                data.all_token_ids[req_id] = list(request.all_token_ids)
            if self.use_pp and not self.config.async_scheduling:
                # (Under async scheduling the tokens are not known yet: the stages take
                # them from the last stage's broadcast; vLLM 0.30.0 scheduler.py 1633-1636.)
                # v0.9.2: the scheduled tokens minus the drafts, read from
                # all_token_ids at num_computed_tokens. For a decode step that
                # is only the last token emitted (bonus, or recovered after a
                # rejection): drafts accepted last step are not resent (fault
                # 2, see minispec.v1.worker.runner_fixes).
                n = num_scheduled[req_id] - len(spec_tokens.get(req_id, ()))
                nc = request.num_computed_tokens
                data.new_token_ids.append(request.all_token_ids[nc : nc + n])
            data.new_block_ids.append(list(new_blocks[req_id]))
            data.num_computed_tokens.append(request.num_computed_tokens)
        return data

    # -- results ----------------------------------------------------------
    def update_from_output(self, scheduler_output: SchedulerOutput, output: ModelRunnerOutput) -> list[Request]:
        """Apply one batch's results; return the requests that finished."""
        finished = []
        for req_id in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(req_id)
            if request is None:  # aborted while its batch was in flight: already gone
                continue
            stale = self._drain_in_flight(request, scheduler_output.num_scheduled_tokens[req_id])
            index = output.req_id_to_index[req_id]
            generated = list(output.sampled_token_ids[index])
            drafts = scheduler_output.scheduled_spec_decode_tokens.get(req_id)
            if drafts:
                rejected = len(drafts) + 1 - len(generated)
                if not stale:  # preemption already reset what the rejection would take back
                    request.num_computed_tokens -= rejected
                    if request.num_output_placeholders > 0:  # async: they counted the drafts too
                        request.num_output_placeholders -= rejected
                request.num_draft_tokens += len(drafts)
                request.num_accepted_tokens += len(generated) - 1
            request.num_sampling_steps += bool(generated)
            if stale:
                generated = self.stale_output(generated)
            if self._update_request_with_output(request, generated, stale):
                self._finish(request)
                finished.append(request)
            elif generated and output.spec_token_ids and not stale:
                self._take_drafts(request, output.spec_token_ids[index])
        return finished

    @staticmethod
    def _drain_in_flight(request: Request, num_scheduled: int) -> bool:
        """One batch of the request is back; return whether its output is stale (the
        request was preempted while it was in flight)."""
        request.num_inflight_batches -= 1
        request.num_in_flight_tokens -= num_scheduled
        if request.num_stale_output_tokens == 0:
            return False
        request.num_stale_output_tokens -= num_scheduled
        assert request.num_stale_output_tokens >= 0, request
        return True

    def _update_request_with_output(self, request: Request, generated: list[int], is_stale: bool = False) -> bool:
        """Append what was sampled up to a stop; return whether it stopped (vLLM's name; ``is_stale``
        matters only to the async scheduler's placeholders)."""
        for token in generated:
            request.output_token_ids.append(token)
            if self._check_stop(request):
                return True
        return False

    def _take_drafts(self, request: Request, drafts: list[int]) -> None:
        """The drafts the last stage proposed, which its output carries, are scheduled next
        step."""
        request.spec_token_ids = list(drafts)

    def _check_stop(self, request: Request) -> bool:
        params, last = request.sampling_params, request.output_token_ids[-1]
        if request.num_tokens >= self.config.max_model_len or request.num_output_tokens >= params.max_tokens:
            request.status = RequestStatus.FINISHED_LENGTH_CAPPED
            return True
        if (not params.ignore_eos and last == request.eos_token_id) or last in params.stop_token_ids:
            request.status = RequestStatus.FINISHED_STOPPED
            return True
        return False

    def _finish(self, request: Request) -> None:
        # A preempted request that its stale output stops is in waiting (vLLM 0.30.0 2184-2187).
        (self.running if request in self.running else self.waiting).remove(request)
        self._free_request(request)
