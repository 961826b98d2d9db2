"""What a minispec run hands to vLLM's code, and what minispec's own buffers held.

``capturing()`` makes every ``LLM(record=True)`` built inside it record, beside
its usual ``Trace``, the complete ``SchedulerOutput`` of every step as plain data
and, for every stage-step, a snapshot of the stage's ``InputBatch`` and request
states right after ``_update_states`` -- the same buffers, in the same form, that
``worker.snapshot`` reads out of vLLM's own ``InputBatch``. Scenarios stay black
boxes: ``with capturing() as runs: forum_thread("vllm-0.9.2")``. It also logs
every call into minispec's ``Scheduler`` (requests added, ``schedule()``,
``update_from_output`` with its ``ModelRunnerOutput``), which
``scheduler_worker.py`` replays into vLLM's own ``Scheduler``. All of it is heard on the
trace recorder's channel (``minispec.instruments.trace.listening``): nothing is patched.

vLLM twin: none (minispec's window, like ``minispec.instruments.trace``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from minispec.instruments.trace import EngineListener, Trace, TraceRecorder, listening
from minispec.v1.worker.gpu_model_runner import GPUModelRunner


@dataclass
class StageStep:
    stage: int
    step: int
    buffers: dict  # as worker.snapshot


@dataclass
class Capture:
    """One run: its trace, its config, every schedule and every stage-step."""

    trace: Trace
    config: dict = field(default_factory=dict)  # what vLLM's InputBatch is built with
    schedules: dict[int, dict] = field(default_factory=dict)  # step -> SchedulerOutput as plain data
    stage_steps: list[StageStep] = field(default_factory=list)  # in the order they ran
    # every call into the scheduler, in order: "add" (a request), "schedule"
    # (empty ones too), "update" (with the ModelRunnerOutput it was given)
    scheduler_events: list[dict] = field(default_factory=list)
    scheduler_config: dict = field(default_factory=dict)  # what vLLM's Scheduler is built with

    def job(self) -> dict:
        """The worker's input: per stage, its scheduler outputs in the order it
        ran them, and (last stage) the tokens it sampled."""
        pp = self.trace.pipeline_parallel_size
        sampled = {(r.step, r.stage): r.sampled for s in self.trace.steps for r in s.stages}
        stages = [{"stage": stage, "is_last": stage == pp - 1,
                   "steps": [{"step": ss.step, "scheduler_output": self.schedules[ss.step],
                              "sampled": sampled.get((ss.step, stage), {})}
                             for ss in self.stage_steps if ss.stage == stage]} for stage in range(pp)]
        return {"config": self.config, "stages": stages}


def _params(p) -> dict:
    return {"temperature": p.temperature, "seed": p.seed, "max_tokens": p.max_tokens,
            "stop_token_ids": list(p.stop_token_ids or [])}


def scheduler_output_data(out, scheduler) -> dict:
    """minispec's ``SchedulerOutput`` as plain data (copied: nothing later changes it)."""
    c = out.scheduled_cached_reqs

    return {
        "new": [{"req_id": n.req_id, "prompt_token_ids": list(n.prompt_token_ids), "block_ids": list(n.block_ids),
                 "num_computed_tokens": n.num_computed_tokens, "sampling_params": _params(n.sampling_params)}
                for n in out.scheduled_new_reqs],
        "cached": {"req_ids": list(c.req_ids), "resumed_from_preemption": list(c.resumed_from_preemption),
                   "new_token_ids": [list(t) for t in c.new_token_ids],
                   "new_block_ids": [list(b) for b in c.new_block_ids],
                   "num_computed_tokens": list(c.num_computed_tokens),
                   # vLLM 0.14.0 also sends each one's output length at schedule time
                   "num_output_tokens": [scheduler.requests[r].num_output_tokens for r in c.req_ids]},
        "num_scheduled_tokens": dict(out.num_scheduled_tokens),
        "scheduled_spec_decode_tokens": {r: list(d) for r, d in out.scheduled_spec_decode_tokens.items()},
        "finished_req_ids": sorted(out.finished_req_ids),
    }


def stage_buffers(runner) -> dict:
    """The stage's buffers, keyed and shaped as ``worker.snapshot``'s."""
    batch = runner.input_batch
    rows = batch.req_ids
    n = len(rows)
    table = batch.block_table
    return {
        "req_ids": list(rows),
        "req_id_to_index": dict(batch.req_id_to_index),
        "token_ids_cpu": batch.token_ids_cpu.tolist(),
        "num_tokens": batch.num_tokens[:n].tolist(),
        "num_tokens_no_spec": batch.num_tokens_no_spec[:n].tolist(),
        "num_computed_tokens_cpu": batch.num_computed_tokens_cpu[:n].tolist(),
        "num_prompt_tokens": batch.num_prompt_tokens[:n].tolist(),
        "block_table": [table.block_table_np[i, : table.num_blocks_per_row[i]].tolist() for i in range(n)],
        "drafts": [batch.token_ids_cpu[i, batch.num_tokens_no_spec[i] : batch.num_tokens[i]].tolist() for i in range(n)],
        "output_token_ids": {r: list(s.output_token_ids) for r, s in runner.requests.items()},
    }


def _request_data(request) -> dict:
    return {"req_id": request.request_id, "prompt_token_ids": list(request.prompt_token_ids),
            "sampling_params": _params(request.sampling_params), "eos_token_id": request.eos_token_id}


def _runner_output_data(output) -> dict:
    return {"req_ids": list(output.req_ids), "req_id_to_index": dict(output.req_id_to_index),
            "sampled_token_ids": [list(t) for t in output.sampled_token_ids],
            "spec_token_ids": [list(t) for t in output.spec_token_ids]}


def keep_executed(capture, out, scheduler, data: dict) -> bool:
    """Keep ``data`` as the step's schedule, with the budget it was made under, unless the
    schedule holds nothing: then it is never executed and no stage sees it (False)."""
    if out.total_num_scheduled_tokens == 0:
        return False
    capture.schedules[out.step] = data
    capture.config.setdefault("max_num_batched_tokens", scheduler.config.max_num_batched_tokens)
    return True


class CaptureListener(EngineListener):
    """Fills one recording engine's ``Capture``: its schedules, its scheduler's calls, and
    each V1 stage's buffers once its inputs are gathered."""

    def __init__(self, recorder: TraceRecorder):
        self.capture = Capture(recorder.trace)

    def on_request_added(self, scheduler, request) -> None:
        self.capture.scheduler_events.append({"kind": "add", "request": _request_data(request)})

    def on_schedule(self, scheduler, out) -> None:
        capture = self.capture
        capture.scheduler_events.append({"kind": "schedule", "step": out.step,
                                         "output": scheduler_output_data(out, scheduler),
                                         "preempted": sorted(out.preempted_req_ids)})
        if not keep_executed(capture, out, scheduler, scheduler_output_data(out, scheduler)):
            return
        if not capture.scheduler_config:
            c, kv = scheduler.config, scheduler.kv_cache_manager
            capture.scheduler_config = {
                "max_num_seqs": c.max_num_seqs, "max_num_batched_tokens": c.max_num_batched_tokens,
                "max_model_len": c.max_model_len, "num_gpu_blocks": kv.num_blocks, "block_size": kv.block_size,
                "pipeline_parallel_size": capture.trace.pipeline_parallel_size}

    def on_update(self, scheduler, out, output) -> None:
        self.capture.scheduler_events.append({"kind": "update", "step": out.step,
                                              "output": _runner_output_data(output)})

    def on_stage_inputs(self, runner, out) -> None:
        """V1's buffers right after ``_update_states`` and the gather, before the forward."""
        if not isinstance(runner, GPUModelRunner):
            return
        self.capture.stage_steps.append(StageStep(runner.pp_rank, out.step, stage_buffers(runner)))
        self.capture.config.update(max_num_reqs=runner.input_batch.max_num_reqs,
                                   max_model_len=runner.input_batch.max_model_len,
                                   block_size=runner.block_size, vocab_size=runner.model.arch.vocab_size)


@contextlib.contextmanager
def capturing_with(listener: type[EngineListener]):
    """Every ``LLM`` that records, built inside, also gets a ``listener(recorder)``; yields the
    list of their ``capture`` objects, in the order the engines were built."""
    captures: list = []

    def make(recorder: TraceRecorder) -> EngineListener:
        made = listener(recorder)
        captures.append(made.capture)
        return made

    with listening(make):
        yield captures


def capturing():
    """Every ``LLM`` that records, built inside, also captures; yields the list of
    their ``Capture`` objects, in the order the engines were built."""
    return capturing_with(CaptureListener)
