"""Pipeline stages in separate processes, talking only over ``torch.distributed``
(vLLM: ``vllm/v1/executor/multiproc_executor.py``).

Rank 0 is the engine's process and runs stage 0; ranks 1..PP-1 run the others, on one
machine (``"mp"``) or several (``"torchrun"``). All travels as point-to-point messages
on one gloo group: each ``SchedulerOutput`` from rank 0 to every rank, hidden states
stage to stage, the ``ModelRunnerOutput`` and each stage's ``StageSpan`` back to rank 0.
Each receive is posted before its message is sent, so a busy stage never delays the
next; one that gets nothing within ``MINISPEC_EXECUTE_MODEL_TIMEOUT_SECONDS`` fails the
executor. An abort stops every stage. Left out: tensor parallelism, vLLM's worker RPCs
(``collective_rpc``) and its shared-memory queues. Backend: gloo, which sends CPU
tensors only, so on a GPU the hidden states go through host memory (NCCL would send them
GPU to GPU; no GPU run here).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from minispec.distributed.parallel_state import StageGroup
from minispec.instruments.events import Event, EventKind
from minispec.instruments.timeline import StageSpan, Timeline
from minispec.sequence import IntermediateTensors
from minispec.v1.executor.abstract import Executor, PendingBatch
from minispec.v1.worker.gpu_worker import make_runner

CTRL, HIDDEN, OUTPUT, SPAN = 1, 2, 3, 4  # message tags
SHUTDOWN_GRACE_S = 5.0
DIAGNOSE_GRACE_S = 2.0  # after a failure, how long the other stages get to report theirs
START_POLL_S = 0.5


class WorkerError(RuntimeError):
    pass


def execute_model_timeout() -> float:
    return float(os.environ.get("MINISPEC_EXECUTE_MODEL_TIMEOUT_SECONDS", "20"))


def run_stage(group: StageGroup, runner, config) -> None:
    """A worker rank's loop: one batch per ``SchedulerOutput``, until rank 0 sends
    ``None``. The next batch's messages are posted for before this batch's forward, so
    they arrive while it runs."""
    rank, last = group.rank, runner.is_last_rank
    runner.bind_pp_group(group)  # the last stage's broadcast goes over this group too (V2; V1 under async)
    keys = runner.model.intermediate_tensor_keys()  # the hidden states, and any EAGLE-3 taps
    shape = (config.scheduler_config.max_num_batched_tokens, config.arch.hidden_size * len(keys))

    def post_hidden():  # in host memory: gloo sends and receives CPU tensors only
        return group.post(torch.empty(shape, dtype=config.dtype or torch.float32), rank - 1, HIDDEN)

    next_out, next_hidden = group.post_object(0, CTRL), post_hidden()
    while (out := next_out.take(idle=True)) is not None:
        asked = group.now()
        hidden = next_hidden.take()[:out.total_num_scheduled_tokens].to(runner.device)
        next_out, next_hidden = group.post_object(0, CTRL), post_hidden()
        start = group.now()
        result = runner.execute_model(out, IntermediateTensors.unflatten(hidden, keys))
        end = group.now()
        if last:
            group.send_object(result, 0, OUTPUT)
        else:
            group.send(result.flatten().contiguous().cpu(), rank + 1, HIDDEN)
        group.send_object(StageSpan(rank, out.step, tuple(out.num_scheduled_tokens), start, end, start - asked),
                          0, SPAN)


def _exit_with_parent() -> None:
    """A worker whose parent died (even by SIGKILL) exits too: it is re-parented, so its ppid changes."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="minispec-parent-watch").start()


def share_cores(pp: int) -> None:
    """Give each stage its share of the cores (unless ``OMP_NUM_THREADS`` says otherwise):
    more threads than cores makes OpenMP's waiting threads spin against each other."""
    if "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        torch.set_num_threads(max(1, cores // pp))


def _ignore_interrupts() -> None:
    """Interrupt Kernel signals the kernel's whole process group, this worker too. Rank 0
    handles it (``generate`` aborts and stops the workers, ``_stop_workers``); a worker that
    raised ``KeyboardInterrupt`` too would print its traceback into the notebook and leave
    its peers mid-message."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _started_ignoring_interrupts():
    """Start workers with SIGINT ignored from their first instruction: it stays ignored across
    exec and Python installs no KeyboardInterrupt handler, so an interrupt while a worker
    imports torch prints nothing. (Only the main thread may change handlers; elsewhere
    ``_ignore_interrupts`` covers it.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker_main(rank: int, config, port: int, timeout_s: float, reports) -> None:
    _ignore_interrupts()
    _exit_with_parent()
    share_cores(config.pipeline_parallel_size)
    try:
        runner = make_runner(config, rank)
        reports.put(("ready", rank, ""))
        store = dist.TCPStore("127.0.0.1", port, config.pipeline_parallel_size, is_master=False)
        group = StageGroup(store, rank, config.pipeline_parallel_size, timeout_s, "127.0.0.1")
        run_stage(group, runner, config)
        code = 0
    except Exception:  # the engine must hear the cause, not only that a connection closed
        reports.put(("error", rank, traceback.format_exc()))
        code = 1
    # Leave without running destructors: a process group with a send still pending
    # to a dead peer would block in its destructor.
    sys.stdout.flush()
    sys.stderr.flush()
    reports.close()
    reports.join_thread()
    os._exit(code)


def refuse_spawn_bootstrap() -> None:
    """Creating an "mp" pipeline while a spawned child re-imports the user's script
    would start workers from a worker: say what the script is missing."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError('distributed_executor_backend="mp" re-runs your script in each worker: '
                           'put the code that creates the LLM under `if __name__ == "__main__":`')


@dataclass(eq=False)
class SentBatch(PendingBatch):
    receives: list = field(default_factory=list)  # posted as soon as it is sent: its spans, then the output


class MultiprocExecutor(Executor):
    """Rank 0's side: runs stage 0 and keeps the batches in flight in order."""

    backend = "mp"

    def __init__(self, config, recorder=None):
        if recorder is not None:
            raise ValueError(f"recorder: expected None under distributed_executor_backend={self.backend!r} "
                             "(stage records live in worker processes)")
        if self.backend == "mp":
            refuse_spawn_bootstrap()
        share_cores(config.pipeline_parallel_size)  # stage 0 runs in this process
        self.config = config
        self.pp, self.timeout_s = config.pipeline_parallel_size, execute_model_timeout()
        self.error: str | None = None  # why a stage failed: from then on this executor refuses work
        self._stopped_by_abort = False  # abort_all stopped the stages: start them before the next batch
        self._start()

    def _start(self) -> None:
        self.workers, self.groups, self.reports = [], [], None
        self.in_flight: deque[SentBatch] = deque()
        self.timeline = Timeline(self.pp, clock="seconds")  # a new process group, a new clock origin
        # Workers must not outlive an engine that was dropped without shutdown(), nor one that failed to start.
        self._finalizer = weakref.finalize(self, _stop_workers, self.groups, self.workers)
        try:
            if self.backend == "mp":
                store, hostname = self._spawn_workers(self.config), "127.0.0.1"
            else:
                store, hostname = torchrun_store(self.pp), None
            self.runner = make_runner(self.config, 0, device=torchrun_device(self.backend))
            self.group = StageGroup(store, 0, self.pp, self.timeout_s, hostname)
            self.runner.bind_pp_group(self.group)  # as in run_stage
        except BaseException:
            self.shutdown()
            raise
        self.groups.append(self.group)

    def _spawn_workers(self, config):
        ctx = mp.get_context("spawn")
        store = dist.TCPStore("127.0.0.1", 0, self.pp, is_master=True, wait_for_workers=False)
        self.reports = ctx.Queue()
        for rank in range(1, self.pp):
            args = (rank, config, store.port, self.timeout_s, self.reports)
            self.workers.append(ctx.Process(target=_worker_main, args=args, daemon=True, name=f"stage-{rank}"))
        with _started_ignoring_interrupts():
            for w in self.workers:
                w.start()
        ready = 0
        while ready < len(self.workers):  # a stage that cannot load its model fails here, not at the rendezvous
            try:
                kind, rank, text = self.reports.get(timeout=START_POLL_S)
            except queue.Empty:
                if any(not w.is_alive() for w in self.workers):
                    self._fail("before it was ready")
                continue
            if kind == "error":
                self._fail("before it was ready", [(kind, rank, text)])
            ready += 1
        return store

    # -- the executor interface ------------------------------------------------
    def execute_model(self, scheduler_output) -> SentBatch:
        self._restart_after_abort()
        self.check_health()
        batch, step = SentBatch(scheduler_output), scheduler_output.step
        try:
            for rank in range(1, self.pp):
                self.group.send_object(scheduler_output, rank, CTRL)
            start = self.group.now()
            try:
                result = self.runner.execute_model(scheduler_output, None)
            except Exception:  # stage 0 lives here; the others already hold this step
                self._fail(f"step {step}", [("error", 0, traceback.format_exc())])
            self._record(StageSpan(0, step, tuple(scheduler_output.num_scheduled_tokens), start, self.group.now()))
            if self.pp == 1:
                batch.output = result
            else:
                self.group.send(result.flatten().contiguous().cpu(), 1, HIDDEN)  # the taps travel too
                batch.receives = [self.group.post_object(r, SPAN) for r in range(1, self.pp)]
                batch.receives.append(self.group.post_object(self.pp - 1, OUTPUT))
        except WorkerError:
            raise
        except RuntimeError as exc:
            self._fail(f"sending step {step}", cause=exc)
        self.in_flight.append(batch)
        return batch

    def wait(self, batch: SentBatch) -> Iterator[Event]:
        self.check_health()
        while batch in self.in_flight:
            oldest = self.in_flight.popleft()
            self._receive(oldest)
            yield from (Event(EventKind.STAGE, oldest.scheduler_output.step, stage) for stage in range(self.pp))

    def abort_all(self) -> None:
        """Stop every stage: a worker may be mid-send, and only a new process group is sure to be
        clean. A failed or shut-down executor stays stopped, and goes on refusing."""
        if self._finalizer.alive:
            self._stopped_by_abort = True
            self.shutdown()

    def check_health(self) -> None:
        if self.error is not None:
            raise WorkerError(f"this LLM's pipeline failed earlier and was shut down ({self.error.splitlines()[0]}): "
                              "create a new LLM")
        if not self._finalizer.alive:
            raise WorkerError("this LLM was shut down: create a new LLM")

    def shutdown(self) -> None:
        self._finalizer()

    def _receive(self, batch: SentBatch) -> None:
        """The other stages' spans and the last one's output (with one stage, stage 0 made it here)."""
        if not batch.receives:
            return
        try:
            *spans, batch.output = [r.take() for r in batch.receives]
        except RuntimeError as exc:
            self._fail(f"waiting for step {batch.scheduler_output.step}", cause=exc)
        for span in spans:
            self._record(span)

    def _restart_after_abort(self) -> None:
        if not self._stopped_by_abort or self.error is not None:  # a failed one refuses (check_health)
            return
        if self.backend == "torchrun":
            raise RuntimeError("generate was interrupted under torchrun, which stopped the stages on the other "
                               "ranks; they cannot be restarted from here: start the job again")
        self._start()
        self._stopped_by_abort = False

    def _record(self, span: StageSpan) -> None:
        self.timeline.spans.append(span)

    # -- faults ----------------------------------------------------------------
    def _fail(self, when: str, reports: list | None = None, cause: Exception | None = None):
        """Name the stage that failed and why, stop every stage, and refuse from now on."""
        reports = reports or self._collect_reports()
        self.error = diagnose(self.workers, reports, self.pp, self.timeout_s, cause) + f" ({when})"
        for w in self.workers:  # nothing left to finish: no grace period
            w.kill()
        self.shutdown()
        raise WorkerError(self.error) from None

    def _collect_reports(self) -> list:
        if self.reports is None:
            return []
        found, deadline = [], time.monotonic() + DIAGNOSE_GRACE_S
        while time.monotonic() < deadline:
            try:
                found.append(self.reports.get(timeout=0.1))
            except queue.Empty:
                if any(not w.is_alive() for w in self.workers) or _own_errors(found):
                    break
        return found


def diagnose(workers, reports, pp: int, timeout_s: float, cause: Exception | None) -> str:
    """The root cause first: a stage that died, then one that raised, then one that hung."""
    for rank, w in enumerate(workers, start=1):
        if not w.is_alive() and w.exitcode is not None and w.exitcode < 0:
            return f"pipeline stage {rank} was killed by {signal.Signals(-w.exitcode).name}"
    errors = {rank: text for kind, rank, text in reports if kind == "error"}
    own = _own_errors(reports)
    if own:
        return f"pipeline stage {own[0]} raised:\n{errors[own[0]]}"
    for rank, w in enumerate(workers, start=1):
        if not w.is_alive() and w.exitcode and rank not in errors:  # died without a word
            return f"pipeline stage {rank} exited with code {w.exitcode}"
    waited = [r for r, text in errors.items() if "Timed out" in text]  # r heard nothing from r - 1
    if waited or (cause is not None and "Timed out" in str(cause)):
        hung = min(waited) - 1 if waited else pp - 1
        return (f"pipeline stage {hung} is hung: nothing arrived from it within {timeout_s:g} s "
                "(MINISPEC_EXECUTE_MODEL_TIMEOUT_SECONDS)")
    detail = f": {str(cause).splitlines()[0]}" if cause is not None else ""
    return f"the pipeline failed{detail}"


def _own_errors(reports) -> list[int]:
    """Stages that raised for a reason of their own, not because a peer went away or went quiet."""
    return [rank for kind, rank, text in reports
            if kind == "error" and "Connection closed" not in text and "Timed out" not in text]


def _stop_workers(groups: list, workers: list) -> None:
    """Tell every stage to stop, then terminate any still running at the deadline
    (one blocked in a receive from a dead stage never reads its stop message)."""
    for group in groups:
        for rank in range(1, group.pg.size()):
            try:
                group.send_object(None, rank, CTRL)
            except RuntimeError:
                pass  # that stage is gone already
    deadline = time.monotonic() + SHUTDOWN_GRACE_S
    for w in workers:
        w.join(timeout=max(0.0, deadline - time.monotonic()))
        if w.is_alive():
            w.kill()
            w.join()


# -- torchrun: every rank started from outside ----------------------------------
class TorchrunExecutor(MultiprocExecutor):
    """Rank 0's side when ``torchrun`` started every rank: the other ranks serve their
    stages through ``serve_stage`` (``minispec.entrypoints.cli.serve.run_headless``).
    vLLM's torchrun backend runs a whole engine on every rank instead."""

    backend = "torchrun"

    def __init__(self, config, recorder=None):
        rank = torchrun_rank()
        if rank != 0:
            raise ValueError(f"distributed_executor_backend='torchrun' on rank {rank}: the LLM runs on rank 0; "
                             "call minispec.entrypoints.cli.serve.run_headless(...) with the same arguments "
                             "on the other ranks")
        super().__init__(config, recorder)


def torchrun_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def torchrun_store(pp: int):
    """The rendezvous store ``torchrun`` set up (``MASTER_ADDR``/``MASTER_PORT``)."""
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if world != pp:
        raise ValueError(f"distributed_executor_backend='torchrun' with WORLD_SIZE={world or 'unset'}: expected "
                         f"a launch by torchrun with one process per stage ({pp})")
    store, _, _ = next(dist.rendezvous("env://"))
    return dist.PrefixStore("minispec", store)


def torchrun_device(backend: str):
    """Under torchrun a rank's GPU is its ``LOCAL_RANK``; the CPU otherwise."""
    if backend == "torchrun" and torch.cuda.is_available():
        return torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}")
    return None


def serve_stage(config) -> None:
    """Run this torchrun rank's stage until rank 0 shuts the pipeline down."""
    _exit_with_parent()
    rank = torchrun_rank()
    runner = make_runner(config, rank, device=torchrun_device("torchrun"))
    group = StageGroup(torchrun_store(config.pipeline_parallel_size), rank, config.pipeline_parallel_size,
                       execute_model_timeout())
    run_stage(group, runner, config)
