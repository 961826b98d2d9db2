"""Replicated drafting: every stage drafts, only the accept result travels
(``model_runner="replicated"``, after an SGLang proposal: ``docs/fidelity/relay.md``).

The relay's stages (``stage.RelayStage``), except that every non-last stage runs the
last stage's n-gram proposer on its own copy of the history, right after the payload
completed it. The n-gram proposer is a function of the history alone, so the drafts come
out the same on every stage and the payload leaves them out. A proposer that reads
anything else (a draft model's KV cache, a random generator) cannot be replicated so:
the design's record accepts the n-gram proposer only. It reads no switch. Left out: the
suffix tree, SGLang PR #27620's accept indices (minispec's drafts are a chain). (vLLM
0.30.0: ``vllm/v1/spec_decode/ngram_proposer.py``, which runs on the last rank only.)
"""

from __future__ import annotations

from minispec.v1.spec_decode.ngram_proposer import NgramProposer
from minispec.v1.worker.relay.pp_relay import RelayPayload
from minispec.v1.worker.relay.stage import RelayStage


class ReplicatedDraftRunner(RelayStage):
    RELAYS_DRAFTS = False  # every stage drafts for itself

    def __init__(self, vllm_config, rank: int, device, recorder=None):
        super().__init__(vllm_config, rank, device, recorder)
        spec = vllm_config.speculative_config
        if spec.enabled and not self.is_last_rank:  # the last stage has its own, from make_drafter
            self.speculator = NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max, spec.num_speculative_tokens)

    def apply_entry(self, payload: RelayPayload) -> None:
        """Apply the accept result, then draft from the history it completed, as the last stage did."""
        super().apply_entry(payload)
        if self.speculator is None:  # no speculative decoding: nothing to draft
            return
        states = self.req_states
        slots = payload.idx_mapping[(payload.idx_mapping >= 0) & (payload.accept_lens > 0)]
        drafts, _ = self.speculator.propose([states.all_token_ids[s, : states.total_len[s]] for s in slots])
        for slot, d in zip(slots, drafts):
            states.set_drafts(slot, d)
