"""Pipeline stages in separate processes, hidden states over ``torch.distributed``
(vLLM: ``vllm/v1/executor/multiproc_executor.py``).

The engine process starts one worker process per stage. Every worker gets every
``SchedulerOutput`` through its own queue (vLLM broadcasts it through a
shared-memory ring buffer); stage ``r`` receives the previous stage's hidden
states with ``dist.recv`` and sends its own on with ``dist.send``; the last
stage puts its ``ModelRunnerOutput`` on the result queue. Results come back in
the order the batches went in, so a batch's future is just its place in line.

Backend: gloo on the CPU, NCCL when the stages are on GPUs (not run here).
Stage records and live invariant checks need the in-process executor.
"""

from __future__ import annotations

import queue
import socket
import time
import traceback
import weakref
from collections import deque
from typing import Iterator

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from minispec.sequence import IntermediateTensors

RESULT_POLL_S = 1.0  # how often a wait for results checks the workers are alive
SHUTDOWN_GRACE_S = 10.0


class WorkerError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_main(rank: int, config, port: int, inbox, results) -> None:
    try:
        from minispec.v1.worker.gpu_worker import make_runner

        pp = config.pipeline_parallel_size
        runner = make_runner(config, rank)
        backend = "nccl" if runner.device.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=pp)
        hidden_size, dtype = config.arch.hidden_size, config.dtype or torch.float32
        results.put(("ready", rank))
        while (out := inbox.get()) is not None:
            carry = None
            if rank > 0:
                hidden = torch.empty(out.total_num_scheduled_tokens, hidden_size, dtype=dtype, device=runner.device)
                dist.recv(hidden, src=rank - 1)
                carry = IntermediateTensors({"hidden_states": hidden})
            result = runner.execute_model(out, carry)
            if rank < pp - 1:
                dist.send(result["hidden_states"].contiguous(), dst=rank + 1)
            else:
                results.put(("output", result))
        dist.destroy_process_group()
    except Exception:  # the engine must hear about it rather than wait forever
        results.put(("error", f"stage {rank}:\n{traceback.format_exc()}"))


class PendingBatch:
    def __init__(self, scheduler_output, executor: "MultiprocPipelineExecutor"):
        self.scheduler_output, self.executor, self.output = scheduler_output, executor, None

    @property
    def done(self) -> bool:
        return self.output is not None


class MultiprocPipelineExecutor:
    def __init__(self, config):
        ctx = mp.get_context("spawn")
        self.pp = config.pipeline_parallel_size
        self.results = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(self.pp)]
        port = _free_port()
        self.workers = [
            ctx.Process(target=_worker_main, args=(r, config, port, self.inboxes[r], self.results), daemon=True)
            for r in range(self.pp)
        ]
        for w in self.workers:
            w.start()
        # Workers must not outlive an engine that was dropped without shutdown().
        self._finalizer = weakref.finalize(self, _stop_workers, self.inboxes, self.workers)
        self.in_flight: deque[PendingBatch] = deque()
        for _ in range(self.pp):
            self._next_result("ready")

    def _next_result(self, kind: str):
        while True:
            try:
                got, payload = self.results.get(timeout=RESULT_POLL_S)
                break
            except queue.Empty:
                dead = [r for r, w in enumerate(self.workers) if not w.is_alive()]
                if dead:
                    self.shutdown()
                    raise WorkerError(f"pipeline stage(s) {dead} exited") from None
        if got == "error":
            self.shutdown()
            raise WorkerError(payload)
        assert got == kind, (got, kind)
        return payload

    def execute_model(self, scheduler_output) -> PendingBatch:
        for inbox in self.inboxes:
            inbox.put(scheduler_output)
        batch = PendingBatch(scheduler_output, self)
        self.in_flight.append(batch)
        return batch

    def wait(self, batch: PendingBatch) -> Iterator[str]:
        while not batch.done:
            oldest = self.in_flight.popleft()
            oldest.output = self._next_result("output")
            yield f"stage {self.pp - 1} returned step {oldest.scheduler_output.step}"

    def shutdown(self) -> None:
        self._finalizer()


def _stop_workers(inboxes, workers) -> None:
    """Ask every worker to stop, then terminate any still running at the deadline
    (one blocked in a send or receive never reads its inbox)."""
    for inbox, worker in zip(inboxes, workers):
        if worker.is_alive():
            inbox.put(None)
    deadline = time.monotonic() + SHUTDOWN_GRACE_S
    for worker in workers:
        worker.join(timeout=max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.terminate()
