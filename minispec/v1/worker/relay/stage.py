"""What the relay and replicated drafting share: a stage on Model Runner V2's slots
(``gpu/model_runner_base.py``) whose non-last stages apply a payload relayed around the
ring (``pp_relay.py``) with the fixes of the relay's two switches; neither design reads
a switch here. (SGLang: the result processing of ``SchedulerPPMixin.event_loop_pp``;
vLLM 0.30.0: ``vllm/v1/worker/gpu/model_runner.py``, ``postprocess_sampled``, its
nearest twin.)
"""

from __future__ import annotations

import numpy as np

from minispec.v1.worker.gpu.input_batch import post_update
from minispec.v1.worker.gpu.model_runner_base import GPUModelRunnerBase
from minispec.v1.worker.gpu.states import RequestState
from minispec.v1.worker.relay.pp_relay import RelayHandler, RelayPayload, mb_slot


def commit_seq_lens(states: RequestState, payload: RelayPayload) -> None:
    """A non-last stage takes each row's count of tokens with KV from the payload."""
    keep = payload.idx_mapping >= 0
    states.num_computed_tokens[payload.idx_mapping[keep]] = payload.new_seq_lens[keep]


class RelayStage(GPUModelRunnerBase):
    """What the relay and replicated drafting share: the ring and how a payload is applied,
    with the fixes (``pairing``, ``commit``); neither reads a switch here."""

    PAYLOAD = "the relayed payload"
    RELAYS_DRAFTS = True  # does the payload carry the next drafts?

    def __init__(self, vllm_config, rank: int, device, recorder=None):
        super().__init__(vllm_config, rank, device, recorder)
        self.pairing, self.commit = mb_slot, commit_seq_lens

    def bind_pp_group(self, group) -> None:
        """The group the payload travels around (SGLang: the PP group's point-to-point sends)."""
        if self.pp_size > 1:
            self.pp_handler = RelayHandler(group, self.pp_size, self.max_num_reqs, self.num_speculative_steps,
                                           self.pairing, with_drafts=self.RELAYS_DRAFTS)

    def apply_entry(self, payload: RelayPayload) -> None:
        """Apply one relayed payload: the tokens and ``last_sampled_tokens``, the count of
        tokens with KV, the next drafts."""
        post_update(payload.idx_mapping, self.req_states, payload.sampled_tokens, payload.accept_lens,
                    np.zeros_like(payload.accept_lens), query_lens=None)
        self.commit(self.req_states, payload)
        if payload.draft_tokens is not None:
            self.req_states.set_draft_tokens(payload.idx_mapping, payload.draft_tokens)
