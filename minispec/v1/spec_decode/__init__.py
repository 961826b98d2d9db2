"""The proposers both runner designs draft with, and ``make_drafter``, which picks one.

``make_drafter`` is the last stage's choice of proposer from
``SpeculativeConfig.method``. minispec's designs run the same proposers
(``ngram_proposer.py``, ``draft_model.py``, ``eagle.py``; and the explorer's
``scripted_proposer.py``, which has no vLLM twin), so the choice lives beside them, as
Model Runner V2's does (``docs/fidelity/spec_decode.md``), and neither runner imports
the other. ``capture_hidden_states`` is the one seam through which a runner hands the
target's hidden states to a proposer that reads them.
"""

from __future__ import annotations

import numpy as np
import torch

from minispec.config import VllmConfig
from minispec.v1.spec_decode.draft_model import DraftModelProposer
from minispec.v1.spec_decode.eagle import EAGLE_METHODS, EagleProposer
from minispec.v1.spec_decode.ngram_proposer import NgramProposer
from minispec.v1.spec_decode.scripted_proposer import ScriptedProposer


def make_drafter(vllm_config: VllmConfig, device: torch.device, dtype: torch.dtype
                 ) -> NgramProposer | DraftModelProposer | EagleProposer | ScriptedProposer | None:
    """The last stage's proposer, by method; ``None`` without speculative decoding."""
    spec, sched = vllm_config.speculative_config, vllm_config.scheduler_config
    if not spec.enabled:
        return None
    if spec.method == "ngram":
        return NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max, spec.num_speculative_tokens)
    if spec.method == "scripted":
        return ScriptedProposer(dict(spec.script), spec.num_speculative_tokens, vllm_config.arch, spec.token_tree,
                                spec.eagle_aux_hidden_state_layer_ids)
    proposer = EagleProposer if spec.method in EAGLE_METHODS else DraftModelProposer
    return proposer(spec.model, spec.num_speculative_tokens, sched.max_model_len, sched.max_num_seqs,
                    vllm_config.cache_config.block_size, device, dtype, arch=spec.draft_arch, tree=spec.token_tree)


def capture_hidden_states(drafter, req_ids: list[str], starts: np.ndarray, counts: np.ndarray, hidden_states,
                          aux_hidden_states) -> None:
    """After the last stage's forward: hand an EAGLE drafter (or the scripted one, which may read
    taps) the features of every computed position (``EagleProposer.capture``); any other proposer
    reads tokens only."""
    if isinstance(drafter, (EagleProposer, ScriptedProposer)):
        drafter.capture(req_ids, starts, counts, hidden_states, aux_hidden_states)
