"""Liveness, planted (issue 36, deliverable 4): a stage waiting on a message no stage will send
is a deadlock, and a scheduler whose queues never change while work is pending (vLLM PR #57104's
shape: a request admitted only with room it can never get) is no progress; both come back as
minimal counterexamples named so, never as an exception or a run that does not end."""

import torch
from test_explorer import OutsideRunner

from minispec.lab.explorer.explorer import Scope, explore
from minispec.lab.explorer.liveness import StallKind
from minispec.lab.viz.exploration import render_exploration
from minispec.v1.core.kv_cache_manager import KVCacheManager

ONE = Scope(max_requests=2, max_tokens=(4,), arrival_steps=(0, 1), max_num_seqs=(4,))


class WaitsForAMessageNeverSent(OutsideRunner):
    """The slip: before a decode, every stage but the last waits for a word from the last stage
    that the last stage was never written to send."""

    def bind_pp_group(self, group):
        self.group = group
        super().bind_pp_group(group)

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        if not self.is_last_rank and scheduler_output.scheduled_spec_decode_tokens:
            last = self.vllm_config.pipeline_parallel_size - 1
            self.group.post(torch.zeros(1, dtype=torch.int64), src=last, tag=77).take()  # before any row changes
        return super().execute_model(scheduler_output, intermediate_tensors)


def test_a_stage_waiting_on_a_message_never_sent_is_a_deadlock():
    result = explore({"worker_cls": WaitsForAMessageNeverSent}, ONE)
    found = result.counterexample
    assert found is not None and found.failure.stall is not None
    assert found.failure.stall.kind is StallKind.DEADLOCK
    assert [(r.req_id, r.arrival_step) for r in found.schedule.requests] == [("A", 0)]  # minimal: one request
    assert "deadlock at engine step" in render_exploration(result) and "(tag 77) that was never sent" in render_exploration(result)
    assert explore({"worker_cls": OutsideRunner}, ONE, limit=3).counterexample is None  # the wrapper alone is live


class ReservesDraftRoomUpFront(KVCacheManager):
    """The slip: a waiting request is admitted only with room for its prompt and k more slots
    (as #57104's MTP blocks); in a cache that holds the prompt but not the extra, it waits for
    ever, nothing running, queues the same every step."""

    def allocate_slots(self, request, num_new_tokens, new_computed_blocks=()):
        if request.num_computed_tokens == 0:
            needed = -(-(num_new_tokens + 4) // self.block_size)
            if needed > self.num_free_blocks:
                return None
        return super().allocate_slots(request, num_new_tokens, new_computed_blocks)


def test_a_scheduler_that_never_admits_pending_work_is_no_progress(monkeypatch):
    monkeypatch.setattr("minispec.v1.engine.core.KVCacheManager", ReservesDraftRoomUpFront)
    result = explore({}, Scope(max_requests=1, prompt_lengths=(5,), max_tokens=(2,), num_gpu_blocks=(2,),
                               max_num_seqs=(4,)))
    found = result.counterexample
    assert found is not None and found.failure.stall.kind is StallKind.NO_PROGRESS
    assert "no progress at engine step" in render_exploration(result)
    assert "waiting: A; running: none; 0 batches in flight; 2 of 2 KV blocks free" in render_exploration(result)
    monkeypatch.undo()
    assert explore({}, Scope(max_requests=1, prompt_lengths=(5,), max_tokens=(2,), num_gpu_blocks=(2,),
                             max_num_seqs=(4,))).counterexample is None
