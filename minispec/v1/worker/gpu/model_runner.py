"""One pipeline stage of Model Runner V2 (vLLM 0.30.0: ``vllm/v1/worker/gpu/model_runner.py``,
``GPUModelRunner``; selected by ``model_runner="v2"`` or ``MINISPEC_USE_V2_MODEL_RUNNER``, see ``__init__.py``).

Each step, in vLLM's order: a non-last stage applies the broadcast of earlier batches to
its slots; slots are freed and filled; the input batch is gathered from them; the layers
run; a non-last stage advances its count optimistically (corrected when the broadcast
arrives), the last samples, broadcasts and drafts. From the scheduler it takes only how
many tokens and drafts to run, never the relay or draft values: unlike V1, no stage
rebuilds its rows from the relay. The stage is ``model_runner_base.GPUModelRunnerBase``;
this class adds V2's handler and switches (``gpu/runner_fixes.py``). Left out: CUDA
graphs, Triton kernels (numpy loops stand in), async output copies, streams, structured
output, logprobs, penalties, LoRA, multimodal, pooling, KV connectors, data and context
parallelism, EPLB. vLLM 0.30.0's lines for each step, preemption, and the one departure:
``docs/fidelity/model_runner_v2.md``.
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
    """A non-last stage writes the broadcast's next drafts into its live rows' slots
    (fault: ``keep_stale_drafts``)."""
    if sampled.draft_tokens is not None:
        states.set_draft_tokens(sampled.idx_mapping, sampled.draft_tokens)


def captures_own_taps(is_last_rank: bool) -> bool:
    """Every stage fills the slots of the EAGLE-3 taps it owns (fault:
    ``capture_on_last_rank_only``)."""
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
        ``slots[i]`` (-1: skip): the tokens, ``last_sampled_tokens`` and the rejected
        part of the optimistic count (``post_update``), then the next drafts, through
        this runner's fault switches."""
        sampled = SampledOutputs(slots, sampled_tokens, num_sampled, num_rejected, draft_tokens)
        post_update(sampled.idx_mapping, states, sampled.sampled_tokens, sampled.num_sampled,
                    self.num_rejected_on_apply(sampled), query_lens=None)
        self.apply_drafts(states, sampled)

