"""One pipeline stage of Model Runner V2 (vLLM 0.30.0: ``vllm/v1/worker/gpu/model_runner.py``,
``GPUModelRunner``; selected by ``model_runner="v2"`` or ``MINISPEC_USE_V2_MODEL_RUNNER``, see ``__init__.py``).

Each step, in vLLM's order (``execute_model``, ``model_runner.py`` 1631-1650):

1. ``update_pp_decode_requests``: a non-last stage applies the last stage's
   broadcast of earlier batches to its slots (``pp_utils.py``);
2. ``finish_requests``, ``add_requests``, ``update_requests``: slots are freed and
   filled; a cached request only gets new blocks and the scheduler's
   ``num_computed_tokens`` as a mirror (``model_runner.py`` 1177-1200): the runner keeps its own count;
3. ``prepare_inputs``: the input batch is gathered from the slots (``input_batch.py``);
4. the stage's layers run; then

   * a non-last stage posts its receives for this batch's broadcast and advances
     ``num_computed_tokens`` by the whole query, drafts included (``sample_tokens``,
     2016-2024: "Optimistically update num_computed_tokens"); the rejected part is
     taken back when the broadcast is applied;
   * the last stage samples or rejection-samples the drafts it embedded, broadcasts
     tokens and counts, updates its slots, proposes the next drafts into
     ``draft_tokens`` and broadcasts those too (``model_runner.py`` 2048-2174).

The scheduler's ``new_token_ids`` relay and its draft token *values* are never read:
from the scheduler this runner takes only how many tokens and drafts to run. That
is the difference from V1 (``minispec/v1/worker/gpu_model_runner.py``), where a
non-last stage rebuilt its rows from the relay and lost the accepted drafts. V1's
switches do not apply here (this design has neither of those faults): ``fixes=`` takes
only ``"all"`` or this design's ``RunnerFixes``, and the switchboard refuses the rest.
Its own switches (``gpu/runner_fixes.py``: the 2026 faults, as ``faults=`` presets, and
``apply_broadcast``, the workshop's plug point for the whole post-processing of the
broadcast, notebook 08's last exercise) are resolved to functions when the runner is
built, all seven here (``PPHandler`` is handed ``live_rows`` and ``sample_width``; ``captures_taps``
decides whether this stage fills its EAGLE-3 taps' slots).

The stage itself, everything above but the broadcast and the switches, is
``model_runner_base.GPUModelRunnerBase``, which the relay design shares
(``minispec/v1/worker/relay/``); this class adds V2's handler and its switches.

Like V1's runner, this one implements the runner contract (``worker_base.WorkerBase``):
when asked (``record``/``check_invariants``) it describes its rows to the trace recorder
before the forward, each read off its slot (``describe_rows``), so the invariants check
V2's own state. It shares with V1's runner the proposer choice
(``minispec.v1.spec_decode.make_drafter``), request seeding, weight loading and KV-cache
binding (``minispec.v1.worker.utils``), and imports nothing of V1's runner.

Preemption, as vLLM 0.30.0 (and 0.29.0) does it: the scheduler lists the requests a step
preempted (``SchedulerOutput.preempted_req_ids``), and ``finish_requests`` frees their
slots with the finished ones, in one sorted pass (1091-1103), so a preempted request's
slot may go to a request admitted before it resumes. When it resumes, it is added
again, after the step's new requests, from every token it has, which the scheduler
sends (vLLM: as a new request, ``prefill_token_ids``, ``v1/core/sched/scheduler.py``
1323-1333). One departure, because minispec's scheduler is V1's: it sends the resumed
request as cached with ``resumed_from_preemption`` and its tokens in
``CachedRequestData.all_token_ids``, and does not send the prompt length and
``max_tokens`` again, so this runner keeps those of a preempted request (``preempted``),
with the last stage's sampling state, whose random generator goes on where it stopped,
as V1's runner's does.

Async scheduling (``scheduler_config.async_scheduling``) needs nothing of this runner: it
already takes only counts from the scheduler, so the ``-1`` draft placeholders are never read,
and the ``AsyncScheduler`` schedules a decoding request again only ``pp_size`` steps on, when
its broadcast is due. Left out: CUDA graphs, Triton kernels (numpy loops stand in),
async output copies, streams, structured output, logprobs, penalties, LoRA,
multimodal, pooling, KV connectors, data and context parallelism, EPLB.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from minispec.instruments.trace import EngineListener
from minispec.v1.spec_decode.eagle import set_eagle3_aux_hidden_state_layers
from minispec.v1.worker.gpu.input_batch import post_update
from minispec.v1.worker.gpu.model_runner_base import GPUModelRunnerBase
from minispec.v1.worker.gpu.pp_utils import PPHandler, SampledOutputs, padded_width, same_occupant
from minispec.v1.worker.gpu.runner_fixes import (
    APPLY_BROADCAST,
    APPLY_DRAFTS,
    CAPTURES_TAPS,
    LIVE_ROWS,
    NUM_REJECTED_ON_APPLY,
    POST_DRAFTS,
    SAMPLE_WIDTH,
)
from minispec.v1.worker.gpu.states import RequestState
from minispec.v1.worker.tree_kv import compacts_on_every_rank
from minispec.v1.worker.tree_switches import TREE_COMPACTION_V2


def apply_broadcast_drafts(states: RequestState, sampled: SampledOutputs) -> None:
    """A non-last stage writes the broadcast's next drafts into the rows' slots (vLLM 0.30.0:
    ``pp_utils.py`` 144-154, with the rows still live only; fault: ``keep_stale_drafts``)."""
    if sampled.draft_tokens is not None:
        states.set_draft_tokens(sampled.idx_mapping, sampled.draft_tokens)


def captures_own_taps(is_last_rank: bool) -> bool:
    """Every stage fills the slots of the EAGLE-3 taps it owns (vLLM 0.30.0 ``EagleModelMixin``,
    ``pack_local_aux_hidden_states``; fault: ``capture_on_last_rank_only``)."""
    return True


def broadcast_rejected(sampled: SampledOutputs) -> np.ndarray:
    """What a non-last stage takes back from its optimistic ``num_computed_tokens`` (fault: ``ignore_rejected``)."""
    return sampled.num_rejected


class GPUModelRunner(GPUModelRunnerBase):
    def __init__(self, vllm_config, rank: int, device, recorder=None):
        """The stage (``model_runner_base.py``), and V2's switches, each resolved here once."""
        super().__init__(vllm_config, rank, device, recorder)
        # Each switch is one function from here on (gpu/runner_fixes.py): the fix, the fault,
        # or for apply_broadcast (notebook 08) a learner's post-processing of the broadcast.
        self.switches = vllm_config.switches
        self.apply_drafts = self.switches.pick(APPLY_DRAFTS, apply_broadcast_drafts)
        self.num_rejected_on_apply = self.switches.pick(NUM_REJECTED_ON_APPLY, broadcast_rejected)
        self.apply_broadcast = self.switches.pick(APPLY_BROADCAST, self._apply_broadcast)
        self.post_drafts = self.switches.pick(POST_DRAFTS, PPHandler.broadcast_drafts)
        self.live_rows = self.switches.pick(LIVE_ROWS, same_occupant)
        self.sample_width = self.switches.pick(SAMPLE_WIDTH, padded_width)
        self.captures_taps = self.switches.pick(CAPTURES_TAPS, captures_own_taps)
        self.tree_kv.compacts = self.switches.pick(TREE_COMPACTION_V2, compacts_on_every_rank)(self.is_last_rank)
        taps = vllm_config.speculative_config.eagle_aux_hidden_state_layer_ids
        if taps:
            set_eagle3_aux_hidden_state_layers(self.model, taps, self.captures_taps(self.is_last_rank))

    def bind_pp_group(self, group) -> None:
        """The group the last stage's broadcast travels on (vLLM: ``get_pp_group()``)."""
        if self.pp_size > 1:
            self.pp_handler = PPHandler(group, self.pp_size, self.max_num_reqs, self.num_speculative_steps,
                                        self.live_rows, self.sample_width)
            if self.recorder is not None and self.recorder.listeners:  # the trace's listeners hear the hand-over
                self.pp_handler.subscribe(partial(self.recorder.tell, EngineListener.on_pp_message, self))

    def apply_entry(self, sampled: SampledOutputs) -> None:
        """One batch's broadcast, through the plug point (``APPLY_BROADCAST``)."""
        self.apply_broadcast(self.req_states, sampled.idx_mapping, sampled.sampled_tokens, sampled.num_sampled,
                             sampled.num_rejected, sampled.draft_tokens)

    def _apply_broadcast(self, states: RequestState, slots: np.ndarray, sampled_tokens: np.ndarray,
                         num_sampled: np.ndarray, num_rejected: np.ndarray, draft_tokens: np.ndarray | None) -> None:
        """A non-last stage's post-processing of one batch's broadcast, row ``i`` for slot
        ``slots[i]`` (-1: skip): the tokens, ``last_sampled_tokens`` and the rejected part of
        the optimistic ``num_computed_tokens`` (``post_update``), then the next drafts (vLLM
        0.30.0: ``postprocess_sampled``, model_runner.py 1590-1619, and the draft write in
        ``PPHandler.get_prev_sampled_outputs``, pp_utils.py 144-154), through this runner's
        fault switches."""
        sampled = SampledOutputs(slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
        post_update(sampled.idx_mapping, states, sampled.sampled_tokens, sampled.num_sampled,
                    self.num_rejected_on_apply(sampled), query_lens=None)
        self.apply_drafts(states, sampled)

