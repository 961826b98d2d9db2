"""Ten slips a runner author could make, written against the seams a design exposes (issue 36,
deliverable 7), none of them the mutation table's (``minispec/lab/explorer/mutants.py``) nor a
preset: each is a runner class handed to the explorer with ``worker_cls``, as an outside design
would be. ``SLIPS`` lists them with the shape each has, and the design its class extends.

Shapes: async placeholders, collective bookkeeping (who sends what to whom, and when it is
taken), non-token state (blocks, lengths, generations), faults masked at two stages, and outside
runners written against ``WorkerBase`` alone.

Measured (``explore(slip.engine_args)``, one process, load 10-15 on 2 shared cores, 2026-12-07):
every slip found in ``DEFAULT`` before the search pass; first failing schedule and CPU time:
v1-skips-unchanged-drafts 15 (1 s), v2-one-broadcast-per-step 346 (4 s), v2-broadcast-to-first-stage
800 (8 s, a deadlock), v1-blocks-only-with-drafts 823 (6 s), v2-receives-only-when-all-sample 948
(8 s), outside-forgets-preemption 1024 (8 s), v2-resumed-prefill-is-the-prompt 1149 (14 s),
v1-async-drafts-from-the-end 4772 (42 s), v1-async-broadcast-to-first-stage 4777 (48 s, a
deadlock), v2-generation-kept-on-preemption 10341 (130 s: two requests, max_tokens 8, 4 KV
blocks and a budget of 3).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from test_explorer import OutsideRunner

from minispec.distributed.parallel_state import send_checked
from minispec.v1.worker.gpu.model_runner import GPUModelRunner as V2Runner
from minispec.v1.worker.gpu.pp_utils import SAMPLED_TAG
from minispec.v1.worker.gpu_model_runner import GPUModelRunner as V1Runner

# -- V1's persistent batch -------------------------------------------------------------------


class V1SkipsUnchangedDrafts(V1Runner):
    """A stayed row's drafts are written only when they differ from the last ones written for
    the request (a copy saved): a repeated list a step later belongs one slot further on, and
    the slots there still hold the old list shifted by one."""

    def _write_spec_tokens(self, row, spec_token_ids):
        written = self.__dict__.setdefault("_written", {})
        req_id = self.input_batch.req_ids[row]
        if spec_token_ids and written.get(req_id) == list(spec_token_ids):
            self.input_batch.num_tokens[row] += len(spec_token_ids)
            return
        written[req_id] = list(spec_token_ids)
        super()._write_spec_tokens(row, spec_token_ids)


class V1AsyncDraftsFromTheEnd(V1Runner):
    """Under async scheduling, when the scheduler schedules fewer drafts than were proposed (a
    budget or the length cap cut them), the stage keeps the last ones instead of the first."""

    def _scheduled_drafts(self, out):
        if not self.use_async_scheduling:
            return super()._scheduled_drafts(out)
        spec = {}
        for req_id, placeholders in out.scheduled_spec_decode_tokens.items():
            own = self.draft_token_ids.get(req_id, [])
            own = own[len(own) - len(placeholders):] if len(placeholders) else []
            spec[req_id] = own + [0] * (len(placeholders) - len(own))
        return spec


class V1BlocksOnlyWithDrafts(V1Runner):
    """A row that stays is given this step's new blocks only when it decodes with drafts (the
    author thought only decodes grow): a prefill continued in chunks runs past its blocks."""

    def _update_cached_request(self, out, i):
        req_id = out.scheduled_cached_reqs.req_ids[i]
        if self.spec_decode_tokens.get(req_id):
            return super()._update_cached_request(out, i)
        table = self.input_batch.block_table
        table.append_row = lambda *args: None  # an instance attribute hides the method, for this call
        try:
            return super()._update_cached_request(out, i)
        finally:
            del table.append_row


class V1AsyncBroadcastToFirstStage(V1Runner):
    """Under async scheduling the last stage sends the previous sampled tokens to rank 0 alone
    (at two stages, every stage there is): a middle stage waits for them for ever."""

    def bind_pp_group(self, group):
        super().bind_pp_group(group)
        if self.pp_prev_sampled is not None and self.is_last_rank:
            self.pp_prev_sampled.last_rank = 1  # its send loop's range(last_rank): rank 0 only

# -- Model Runner V2's slots -------------------------------------------------------------------


class V2GenerationKeptOnPreemption(V2Runner):
    """A preempted request's slot is freed without bumping its generation (finished ones are
    bumped): a broadcast still pending for it is applied to whoever takes the slot next."""

    def finish_requests(self, out):
        self.__dict__["_preempting"] = set(out.preempted_req_ids)
        super().finish_requests(out)

    def _remove_request(self, req_id):
        if req_id not in self.__dict__.get("_preempting", ()):
            return super()._remove_request(req_id)
        handler, self.pp_handler = self.pp_handler, None
        try:
            return super()._remove_request(req_id)
        finally:
            self.pp_handler = handler


class V2OneBroadcastPerStep(V2Runner):
    """A non-last stage applies at most one pending broadcast per step, the oldest, even when a
    slot scheduled now needs a later one too."""

    def bind_pp_group(self, group):
        super().bind_pp_group(group)
        handler = self.pp_handler
        if handler is None:
            return

        def oldest_only(slots):
            gen, live = handler.req_idx_gen_np, handler.live_rows
            if any(e.needs(slots, gen, live) for e in handler.queue):
                return [handler._take(handler.queue.popleft())]
            return []

        handler.get_prev_sampled_outputs = oldest_only


class V2ResumedPrefillIsThePrompt(V2Runner):
    """A resumed request's slot takes its prefill length from the prompt, not from every token
    it has: its recompute samples as soon as it passes the prompt."""

    def _resume(self, req_id, token_ids, num_computed, block_ids):
        prompt_len = self.preempted[req_id][0]
        super()._resume(req_id, token_ids, num_computed, block_ids)
        self.req_states.prefill_len[self.req_states.req_id_to_index[req_id]] = prompt_len


class V2BroadcastToFirstStage(V2Runner):
    """The last stage sends its sampled tokens to rank 0 alone (at two stages, every stage
    there is): a middle stage waits for them for ever."""

    def bind_pp_group(self, group):
        super().bind_pp_group(group)
        handler = self.pp_handler
        if handler is not None:
            handler._send = lambda tensor, step: send_checked(handler.group, tensor, 0, SAMPLED_TAG, step)


class V2ReceivesOnlyWhenAllSample(V2Runner):
    """A non-last stage posts its receives for a batch only when every row of it samples (the
    last stage sends when any does): a batch with a prefill chunk in it leaves its message
    for the next receive to take."""

    def bind_pp_group(self, group):
        super().bind_pp_group(group)
        handler = self.pp_handler
        if handler is None:
            return
        receive = handler.receive

        def all_or_nothing(batch):
            samples = batch.num_computed_tokens_np + batch.num_scheduled_tokens >= batch.prefill_len_np
            if samples.all():
                receive(batch)

        handler.receive = all_or_nothing

# -- outside runners, written against WorkerBase alone -----------------------------------------


class ForgetsPreemption(OutsideRunner):
    """An outside wrapper that hands its inner runner every cached request as an ordinary one:
    a resumed request keeps the blocks it had before it was preempted, and gets its new ones
    after them."""

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        cached = scheduler_output.scheduled_cached_reqs
        if any(cached.resumed_from_preemption):
            plain = dataclasses.replace(cached, resumed_from_preemption=[False] * len(cached.req_ids))
            scheduler_output = dataclasses.replace(scheduler_output, scheduled_cached_reqs=plain)
        return super().execute_model(scheduler_output, intermediate_tensors)


class Slip(NamedTuple):
    name: str
    shape: str
    engine_args: dict


V2 = {"model_runner": "v2"}
SLIPS = (
    Slip("v1-skips-unchanged-drafts", "non-token state: a repeated draft list", {"worker_cls": V1SkipsUnchangedDrafts}),
    Slip("v1-async-drafts-from-the-end", "async placeholders", {"worker_cls": V1AsyncDraftsFromTheEnd}),
    Slip("v1-blocks-only-with-drafts", "non-token state: blocks", {"worker_cls": V1BlocksOnlyWithDrafts}),
    Slip("v1-async-broadcast-to-first-stage", "masked at PP 2 (async)", {"worker_cls": V1AsyncBroadcastToFirstStage}),
    Slip("v2-generation-kept-on-preemption", "non-token state: slot generation, broadcast pending",
         V2 | {"worker_cls": V2GenerationKeptOnPreemption}),
    Slip("v2-one-broadcast-per-step", "collective bookkeeping", V2 | {"worker_cls": V2OneBroadcastPerStep}),
    Slip("v2-resumed-prefill-is-the-prompt", "non-token state: lengths after preemption",
         V2 | {"worker_cls": V2ResumedPrefillIsThePrompt}),
    Slip("v2-broadcast-to-first-stage", "masked at PP 2", V2 | {"worker_cls": V2BroadcastToFirstStage}),
    Slip("v2-receives-only-when-all-sample", "collective bookkeeping: a chunked prefill",
         V2 | {"worker_cls": V2ReceivesOnlyWhenAllSample}),
    Slip("outside-forgets-preemption", "an outside runner (worker_cls)", {"worker_cls": ForgetsPreemption}),
)
