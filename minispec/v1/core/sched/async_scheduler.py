"""The scheduler under async scheduling (vLLM 0.30.0: ``vllm/v1/core/sched/async_scheduler.py``,
``AsyncScheduler``; chosen by ``scheduler_config.async_scheduling``, as vLLM's
``SchedulerConfig.get_scheduler_cls`` does, ``config/scheduler.py`` 212-220).

The engine schedules the next step before this step's output is back. A request whose batch
is in flight can then be scheduled again, because its future tokens are counted as
*placeholders* (from reading the code, ``async_scheduler.py`` 19-49):

* ``num_output_placeholders``: once a step that samples for a request is scheduled, it owes
  ``1 + d`` tokens (the bonus and its ``d`` drafts, all assumed accepted). The base scheduler
  counts them as tokens to compute (``num_tokens_with_spec + num_output_placeholders -
  num_computed_tokens``), so the next step schedules ``1 + k`` more at once; a returning
  output takes back the rejected drafts and then every token it appended (52-63).
* ``spec_token_ids`` becomes ``[-1] * k``: the scheduler schedules ``k`` drafts whose values it
  never learns. The stages take the values, and the tokens sampled last step, from the last
  stage (V1: its own copy, or the broadcast under PP; V2: its slots and ``PPHandler``). So a
  returning output's drafts are not taken (``_take_drafts`` does nothing).
* With Model Runner V2 and pipeline parallelism a decoding request is next eligible
  ``pp_size`` steps later (``next_decode_eligible_step``, 46-49): its tokens are on every
  stage by then, since V2's stages apply the last stage's broadcast ``pp_size`` steps on.
  minispec counts executed batches there, not steps (``Scheduler._wait_for_output`` says why).
  vLLM asks ``use_v2_model_runner``; minispec is handed the wait, ``decode_wait_batches``, which
  the engine reads off the design's record (``minispec/v1/worker/designs.py``): V2's stages and
  the relay's wait ``pp_size`` batches, V1's none.

For the fault family (a switch that intervenes in the accounting): the placeholders are added
in ``_update_after_schedule`` and taken back in ``_update_request_with_output`` and, for the
rejected drafts, in ``Scheduler.update_from_output``; ``_wait_for_output`` decides which
requests wait for an output. Override those.

A preempted request's placeholders are zeroed and its stale output (``Scheduler``'s module
docstring) takes none back (vLLM 0.30.0 ``async_scheduler.py`` 60-64).

Left out: structured output, the diffusion-model variant (no bonus token), prefix caching's
``cache_blocks``.
"""

from __future__ import annotations

from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.core.sched.scheduler import Scheduler
from minispec.v1.request import Request


class AsyncScheduler(Scheduler):
    def __init__(self, *args, num_spec_tokens: int = 0, decode_wait_batches: int = 0, **kwargs):
        """``num_spec_tokens``: k, the placeholders a decoding request schedules;
        ``decode_wait_batches``: how many batches a decoding request waits before it is
        scheduled again (0: none; V2's cadence: ``pp_size``)."""
        super().__init__(*args, **kwargs)
        self.num_spec_tokens, self.decode_wait_batches = num_spec_tokens, decode_wait_batches

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
