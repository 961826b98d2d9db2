"""The engine loop (vLLM: ``vllm/v1/engine/core.py``).

``EngineCore(vllm_config, executor_class)`` builds its executor, KV-cache manager (sized
from ``CacheConfig.num_gpu_blocks``) and scheduler, as vLLM's does.
``step_with_batch_queue`` keeps up to ``max_concurrent_batches`` batches in flight: it
schedules a new batch while the queue has room and anything can be scheduled, and
otherwise waits for the oldest batch and feeds its output back. Requests in flight have
nothing left to schedule, so decode batches alternate between two sets of requests; with
one stage the loop is vLLM's plain ``step()``. ``iter_events`` takes a step one event at
a time (the notebooks' walk through the forum thread); ``abort_requests`` and
``abort_all`` finish requests as aborted. Left out: the ZMQ engine-core process,
KV-cache sizing by profiling, structured outputs, output processing. Fidelity to vLLM:
``docs/fidelity/engine_and_executors.md``.
"""

from __future__ import annotations

from collections import deque
from typing import Iterator

from minispec.config import VllmConfig
from minispec.instruments.events import Event, EventKind
from minispec.instruments.trace import EngineListener
from minispec.v1.core.kv_cache_manager import KVCacheManager
from minispec.v1.core.sched.async_scheduler import AsyncScheduler
from minispec.v1.core.sched.scheduler import Scheduler, deliver_stale_output
from minispec.v1.executor.abstract import Executor, PendingBatch
from minispec.v1.request import Request, RequestStatus


def make_scheduler(vllm_config: VllmConfig, kv_cache_manager: KVCacheManager) -> Scheduler:
    """The scheduler ``scheduler_config`` asks for (vLLM: ``SchedulerConfig.get_scheduler_cls``), with
    the design's cadence under async scheduling (its record, ``vllm_config.design``)."""
    pp, sched = vllm_config.pipeline_parallel_size, vllm_config.scheduler_config
    switch = vllm_config.design.stale_output  # None: a design the preset was not checked on
    stale_output = vllm_config.switches.pick(switch, deliver_stale_output) if switch else deliver_stale_output
    k = vllm_config.speculative_config.num_speculative_tokens
    # vLLM 0.30.0 pads a new request's first step to 1 + k when it is a decode: minispec's
    # only such steps come from prefix caching, on a design whose slots take them.
    pad = vllm_config.cache_config.enable_prefix_caching and vllm_config.design.takes_padded_decodes and k > 0
    common = dict(use_pp=pp > 1, stale_output=stale_output, num_spec_tokens=k, pad_spec_decode=pad)
    if not sched.async_scheduling:
        return Scheduler(sched, kv_cache_manager, **common)
    return AsyncScheduler(sched, kv_cache_manager, decode_wait_batches=vllm_config.design.decode_wait_batches(pp),
                          **common)


class EngineCore:
    """The engine loop: builds the executor, the KV-cache manager and the scheduler, and keeps up
    to ``max_concurrent_batches`` batches in flight (``step_with_batch_queue``), so that under
    pipeline parallelism every stage has work; ``iter_events`` takes each step one event at a time."""

    def __init__(self, vllm_config: VllmConfig, executor_class: type[Executor], recorder=None):
        """``recorder``: a ``TraceRecorder`` the executor's stages and this loop report to, or None."""
        self.vllm_config, self.recorder = vllm_config, recorder
        self.executor = executor_class(vllm_config, recorder)
        cache = vllm_config.cache_config
        kv_cache_manager = KVCacheManager(cache.num_gpu_blocks, cache.block_size, cache.enable_prefix_caching)
        self.scheduler = make_scheduler(vllm_config, kv_cache_manager)
        self.max_concurrent_batches = vllm_config.max_concurrent_batches  # vLLM: batch_queue_size
        self.batch_queue: deque[PendingBatch] = deque()
        self.arrivals: list[tuple[int, Request]] = []
        self.engine_step = 0
        self.num_batches = 0  # target forwards: batches that went through every stage
        self.finished: list[Request] = []
        self._abort_pending = False  # abort_all was itself interrupted: finish it before anything else

    def add_request(self, request: Request, arrival_step: int = 0) -> None:
        tree = self.vllm_config.speculative_config.token_tree
        if not (tree.is_chain or request.sampling_params.greedy):  # refused before anything changed
            raise ValueError(f"temperature={request.sampling_params.temperature!r} with speculative_token_tree="
                             f"{str(tree)!r}: a tree is verified greedily only (token_tree.py); expected "
                             "temperature=0, or a chain")
        self.arrivals.append((arrival_step, request))
        self.arrivals.sort(key=lambda a: a[0])

    def abort_requests(self, request_ids) -> None:
        """Finish these requests as aborted, whether queued, waiting or running."""
        request_ids = set(request_ids)
        for _, request in self.arrivals:
            if request.request_id in request_ids:
                request.status = RequestStatus.FINISHED_ABORTED
        self.arrivals = [(step, r) for step, r in self.arrivals if r.request_id not in request_ids]
        self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED)

    def abort_all(self) -> None:
        """Abort every unfinished request, wherever it is: the scheduler frees their
        blocks, the batches in flight are dropped, and the executor makes every stage
        forget them (and gets ready for new batches). If this is interrupted too,
        ``recover`` finishes it."""
        self._abort_pending = True
        self.abort_requests(self.unfinished_request_ids())
        self.batch_queue.clear()
        self.executor.abort_all()
        self._abort_pending = False

    def recover(self) -> None:
        """Finish what an interrupted ``abort_all`` left undone."""
        if self._abort_pending:
            self.abort_all()

    def unfinished_request_ids(self) -> set[str]:
        """Every request not yet finished, wherever it is (queued, waiting, running)."""
        # the scheduler's requests are its unfinished ones: finished requests leave it
        return set(self.scheduler.requests) | {r.request_id for _, r in self.arrivals}

    def has_work(self) -> bool:
        return bool(self.arrivals or self.batch_queue or self.scheduler.has_unfinished_requests())

    def _admit_arrivals(self) -> None:
        while self.arrivals and self.arrivals[0][0] <= self.engine_step:
            request = self.arrivals.pop(0)[1]
            self.scheduler.add_request(request)
            if self.recorder:
                self.recorder.tell(EngineListener.on_request_added, self.scheduler, request)

    def _engine_step_events(self) -> Iterator[Event]:
        if self.arrivals and not self.batch_queue and not self.scheduler.has_unfinished_requests():
            # Nothing can happen before the next arrival: skip the idle steps,
            # numbering schedules as if each had run (an empty one still counts).
            idle = max(0, self.arrivals[0][0] - self.engine_step)
            self.engine_step += idle
            self.scheduler.skip_idle_steps(idle)
        self._admit_arrivals()
        scheduled = False
        if len(self.batch_queue) < self.max_concurrent_batches:
            out = self.scheduler.schedule()
            if self.recorder:
                self.recorder.tell(EngineListener.on_schedule, self.scheduler, out)
            scheduled = out.total_num_scheduled_tokens > 0
            if scheduled:
                if self.recorder:
                    self.recorder.on_schedule(out, self.scheduler)
                self.batch_queue.append(self.executor.execute_model(out))
                yield Event(EventKind.SCHEDULE, out.step)
            else:
                # Never executed, so no stage would hear of these finishes (or preemptions):
                # the next schedule carries them (vLLM 0.9.2's batch queue drops them,
                # core.py 266; 0.14.0 executes empty schedules too, core.py 437-440).
                self.scheduler.finished_req_ids |= out.finished_req_ids
                self.scheduler.preempted_req_ids |= out.preempted_req_ids
        if self.batch_queue and (not scheduled or self.max_concurrent_batches == 1):
            batch = self.batch_queue[0]
            yield from self.executor.wait(batch)
            self.batch_queue.popleft()
            self._update(batch.scheduler_output, batch.output)
            yield Event(EventKind.UPDATE, batch.scheduler_output.step)
        self.engine_step += 1

    def _update(self, out, output) -> None:
        num_accepted = {
            r: len(output.sampled_token_ids[output.req_id_to_index[r]]) - 1
            for r in out.scheduled_spec_decode_tokens
        }
        # held here: a request that finishes in this update leaves scheduler.requests
        requests = {r: self.scheduler.requests[r] for r in out.num_scheduled_tokens if r in self.scheduler.requests}
        before = {r: request.num_computed_tokens for r, request in requests.items()}
        stale = {r for r, request in requests.items() if request.num_stale_output_tokens > 0}  # preempted in flight
        self.finished.extend(self.scheduler.update_from_output(out, output))
        self.num_batches += 1
        if self.recorder:
            self.recorder.tell(EngineListener.on_update, self.scheduler, out, output)
            drafts = {r: output.spec_token_ids[i] for r, i in output.req_id_to_index.items()
                      if output.spec_token_ids and output.sampled_token_ids[i]}
            self.recorder.on_update(out, requests, num_accepted, before, drafts, stale)

    def step_with_batch_queue(self) -> list[Event]:
        """One engine step; returns the events it ran."""
        return list(self._engine_step_events())

    def iter_events(self) -> Iterator[Event]:
        """Every event until all requests finish, one at a time."""
        while self.has_work():
            idle = True
            for event in self._engine_step_events():
                idle = False
                yield event
            if idle and not self.arrivals:
                waiting = ", ".join(r.request_id for r in self.scheduler.waiting)
                raise RuntimeError(
                    f"no request can be scheduled (waiting: {waiting}); the KV cache "
                    f"({self.scheduler.kv_cache_manager.num_blocks} blocks) is too small for them"
                )

    def run(self) -> None:
        """Run until every request finishes. ``finished`` then holds the requests finished since
        this call began: earlier runs' are dropped, so an engine reused all afternoon stays bounded."""
        self.finished = []
        for _ in self.iter_events():
            pass

    def shutdown(self) -> None:
        self.executor.shutdown()
