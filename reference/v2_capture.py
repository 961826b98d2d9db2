"""What a Model Runner V2 run hands to vLLM's V2 code, and what minispec's slots held.

``capturing_v2()`` makes every recording ``LLM`` built inside it (with
``model_runner="v2"``) record, beside its ``Trace``: every ``SchedulerOutput`` as
plain data; for every stage-step, in the order they ran, the stage's request
slots right after its state updates (``update_pp_decode_requests``,
``finish_requests``, ``add_requests``, ``update_requests``), read from the
runner's own ``RequestState`` (``slot_buffers``), keyed as ``v2_worker.snapshot``
keys vLLM's; on the last stage, what it sampled and drafted; and on each
non-last stage, when each broadcast entry was received and when applied
(``Timing``). A broadcast that does not fit its receive
(``MessageMismatch``) ends the run; the stage-step where it was found is
recorded with the two shapes. All of it is heard on the trace recorder's channel
(``minispec.instruments.trace.listening``): nothing is patched.

vLLM twin: none (minispec's window onto its own V2 runner).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.instruments.trace import EngineListener, Trace, TraceRecorder
from minispec.v1.worker.gpu.model_runner import GPUModelRunner
from minispec.v1.worker.gpu.pp_utils import PPMessageKind
from reference.capture import StageStep, capturing_with, keep_executed, scheduler_output_data


@dataclass
class Timing:
    """One non-last stage's broadcast entries: the stage's call (its n-th
    stage-step) that received each, and the call that applied it (None: never)."""

    received: list[int] = field(default_factory=list)
    applied: list[int | None] = field(default_factory=list)

    def first_departure(self, pp_size: int, calls: int) -> int | None:
        """The first call at which minispec's applications part from vLLM 0.30.0's,
        which applies each entry ``pp_size`` calls after its receive (pp_utils.py
        71-77, 116-126); None if they never do."""
        points = []
        for r, a in zip(self.received, self.applied):
            vllm = r + pp_size if r + pp_size <= calls else None
            if a != vllm:
                points.append(min(x for x in (a, vllm) if x is not None))
        return min(points, default=None)


@dataclass
class V2Capture:
    trace: Trace
    config: dict = field(default_factory=dict)
    schedules: dict[int, dict] = field(default_factory=dict)
    stage_steps: list[StageStep] = field(default_factory=list)
    samples: dict[int, dict] = field(default_factory=dict)  # step -> the last stage's sampling and drafts
    prompts: dict[str, dict] = field(default_factory=dict)  # req_id -> prompt and sampling params
    timings: dict[int, Timing] = field(default_factory=dict)  # non-last stage -> its entries
    call_steps: dict[int, list[int]] = field(default_factory=dict)  # stage -> the step of each of its calls
    mismatch: dict | None = None
    current_step: int = -1
    # id of a queued broadcast entry -> (the entry, kept alive so the id stays its own; its index in Timing)
    entries: dict[int, tuple] = field(default_factory=dict)

    def departures(self) -> dict[int, int]:
        """Stage -> the step from which its broadcasts were applied otherwise than
        vLLM's FIFO applies them (stages where they never were are left out)."""
        pp, out = self.config["pipeline_parallel_size"], {}
        for stage, timing in self.timings.items():
            call = timing.first_departure(pp, len(self.call_steps[stage]))
            if call is not None:
                out[stage] = self.call_steps[stage][call - 1]
        return out

    def applied(self, stage: int, call: int) -> list[int]:
        """The receives (by call) whose entries ``stage`` applied at its ``call``."""
        timing = self.timings.get(stage, Timing())
        return [r for r, a in zip(timing.received, timing.applied) if a == call]

    def job(self) -> dict:
        last = self.config["pipeline_parallel_size"] - 1
        calls: dict[int, int] = {}
        steps = []
        for s in self.stage_steps:
            calls[s.stage] = calls.get(s.stage, 0) + 1
            steps.append({"stage": s.stage, "step": s.step, "scheduler_output": self.schedules[s.step],
                          "applied": self.applied(s.stage, calls[s.stage]),
                          "sample": self.samples.get(s.step) if s.stage == last else None})
        return {"config": self.config, "prompts": self.prompts, "stage_steps": steps}


def slot_buffers(runner: GPUModelRunner) -> dict:
    """The runner's live slots, per request."""
    s = runner.req_states
    index = dict(s.req_id_to_index)
    return {
        "req_id_to_index": index,
        "total_len": {r: int(s.total_len[i]) for r, i in index.items()},
        "all_token_ids": {r: s.token_ids(i) for r, i in index.items()},
        "prefill_len": {r: int(s.prefill_len[i]) for r, i in index.items()},
        "num_computed_tokens": {r: int(s.num_computed_tokens[i]) for r, i in index.items()},
        "num_computed_tokens_np": {r: int(s.num_computed_tokens_np[i]) for r, i in index.items()},
        "last_sampled_tokens": {r: int(s.last_sampled_tokens[i]) for r, i in index.items()},
        "draft_tokens": {r: s.draft_tokens[i].tolist() for r, i in index.items()},
        "broadcast_mismatch": None,
    }


def _schedule_data(out, scheduler) -> dict:
    data = scheduler_output_data(out, scheduler)
    # a resumed request is sent to vLLM's runner with every token it has, and a preempted
    # one's slot is freed at once (v2_worker.scheduler_output)
    cached = out.scheduled_cached_reqs
    data["cached"]["all_token_ids"] = [cached.all_token_ids.get(r, []) for r in cached.req_ids]
    data["preempted_req_ids"] = sorted(out.preempted_req_ids)
    return data


class V2CaptureListener(EngineListener):
    """Fills one recording engine's ``V2Capture`` from what its Model Runner V2 stages tell
    the recorder; other runner designs are not heard."""

    def __init__(self, recorder: TraceRecorder):
        self.capture = V2Capture(recorder.trace)
        self.queued: dict[int, list] = {}  # stage -> its broadcast entries when its call began

    def on_schedule(self, scheduler, out) -> None:
        data = _schedule_data(out, scheduler)
        if not keep_executed(self.capture, out, scheduler, data):
            return
        for new in data["new"]:
            self.capture.prompts.setdefault(new["req_id"], {k: new[k] for k in ("prompt_token_ids", "sampling_params")})

    def on_stage_start(self, runner, out) -> None:
        if not isinstance(runner, GPUModelRunner):
            return
        capture = self.capture
        capture.call_steps.setdefault(runner.pp_rank, []).append(out.step)
        capture.config.update(pipeline_parallel_size=runner.pp_size,
                              num_speculative_tokens=runner.num_speculative_steps, max_num_reqs=runner.max_num_reqs,
                              max_model_len=runner.max_model_len, vocab_size=runner.model.arch.vocab_size)
        capture.current_step = out.step
        handler = runner.pp_handler
        self.queued[runner.pp_rank] = list(handler.queue) if handler is not None and not runner.is_last_rank else []

    def _note_applied(self, runner) -> None:
        """The entries this call's ``update_pp_decode_requests`` took off the stage's queue."""
        capture, queued = self.capture, self.queued.pop(runner.pp_rank, [])
        left = {id(e) for e in runner.pp_handler.queue} if queued else set()
        for entry in queued:
            if id(entry) not in left:
                index = capture.entries.pop(id(entry))[1]
                capture.timings[runner.pp_rank].applied[index] = len(capture.call_steps[runner.pp_rank])

    def on_message_mismatch(self, runner, out, error) -> None:
        if not isinstance(runner, GPUModelRunner):
            return
        capture = self.capture
        capture.mismatch = {"sent": list(error.sent), "posted": list(error.posted)}
        buffers = dict.fromkeys(slot_buffers(runner)) | {"broadcast_mismatch": capture.mismatch}
        capture.stage_steps.append(StageStep(runner.pp_rank, out.step, buffers))
        self._note_applied(runner)

    def on_stage_inputs(self, runner, out) -> None:
        if not isinstance(runner, GPUModelRunner):
            return
        self._note_applied(runner)
        self.capture.stage_steps.append(StageStep(runner.pp_rank, out.step, slot_buffers(runner)))

    def on_pp_message(self, runner, message) -> None:
        """A non-last stage posted its receives: the entry it queued."""
        if not isinstance(runner, GPUModelRunner) or message.kind is not PPMessageKind.POSTED:
            return
        capture, entry = self.capture, runner.pp_handler.queue[-1]
        timing = capture.timings.setdefault(runner.pp_rank, Timing())
        capture.entries[id(entry)] = (entry, len(timing.received))
        timing.received.append(len(capture.call_steps[runner.pp_rank]))
        timing.applied.append(None)

    def on_last_stage_sampled(self, runner, batch, sampled, num_sampled, num_rejected) -> None:
        if not isinstance(runner, GPUModelRunner):
            return
        self.capture.samples[self.capture.current_step] = {
            "sampled_tokens": sampled.tolist(), "num_sampled": num_sampled.tolist(),
            "num_rejected": num_rejected.tolist(),
            "draft_tokens": runner.req_states.draft_tokens[batch.idx_mapping_np].tolist()}


def capturing_v2():
    """Every recording ``LLM`` built inside, with Model Runner V2, also captures;
    yields the list of their ``V2Capture``, in the order the engines were built."""
    return capturing_with(V2CaptureListener)
