"""The scheduler under async scheduling (vLLM 0.30.0:
``vllm/v1/core/sched/async_scheduler.py``, ``AsyncScheduler``; chosen by
``scheduler_config.async_scheduling``).

The engine schedules the next step before this step's output is back. A request in
flight can then be scheduled again, because its future tokens count as *placeholders*
(``num_output_placeholders``: ``1 + d`` per sampling step, every draft assumed
accepted), taken back when the output returns. Its drafts are scheduled as ``[-1] * k``;
the stages take their values from the last stage. With a design that waits, a decoding
request is next eligible ``decode_wait_batches`` batches later. The fault family
overrides ``_update_after_schedule``, ``_update_request_with_output`` and
``_wait_for_output``. Left out: structured output, the diffusion-model variant (no
bonus token). Fidelity to vLLM:
``docs/fidelity/scheduler.md``.
"""

from __future__ import annotations

from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.core.sched.scheduler import Scheduler
from minispec.v1.request import Request


class AsyncScheduler(Scheduler):
    def __init__(self, *args, decode_wait_batches: int = 0, **kwargs):
        """``num_spec_tokens`` (the base's): k, the placeholders a decoding request schedules;
        ``decode_wait_batches``: how many batches a decoding request waits before it is
        scheduled again (0: none; V2's cadence: ``pp_size``)."""
        super().__init__(*args, **kwargs)
        self.decode_wait_batches = decode_wait_batches

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        super()._update_after_schedule(output)
        for req_id in output.num_scheduled_tokens:
            request = self.requests[req_id]
            if request.num_computed_tokens < request.num_tokens + request.num_output_placeholders:
                continue  # a prefill chunk that is not the last: it samples nothing
            num_drafts = len(output.scheduled_spec_decode_tokens.get(req_id, ()))
            request.num_output_placeholders += 1 + num_drafts
            request.spec_token_ids = [-1] * self.num_spec_tokens
            if self.decode_wait_batches:
                request.next_decode_eligible_step = self.num_scheduled_batches + self.decode_wait_batches

    def _update_request_with_output(self, request: Request, generated: list[int], is_stale: bool = False) -> bool:
        before = request.num_output_tokens
        stopped = super()._update_request_with_output(request, generated)
        if is_stale:  # preemption zeroed the placeholders (vLLM 0.30.0 async_scheduler.py 60-64)
            return stopped
        request.num_output_placeholders -= request.num_output_tokens - before
        if request.num_output_placeholders < 0:
            raise RuntimeError(f"request {request.request_id}: more tokens came back than were scheduled "
                               f"(num_output_placeholders={request.num_output_placeholders})")
        return stopped

    def _take_drafts(self, request: Request, drafts: list[int]) -> None:
        """The drafts stay with the stages; the scheduler keeps its placeholders."""
