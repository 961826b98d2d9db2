"""Drafting with an EAGLE head that reads the target's hidden states (vLLM 0.30.0:
``vllm/v1/spec_decode/eagle.py``'s ``EagleProposer`` over ``llm_base_proposer.py``; Model
Runner V2's ``v1/worker/gpu/spec_decode/eagle/``; from reading the code).

**What it reads.** For each target position ``i`` the head takes the token at ``i + 1`` and a
feature of the target at ``i``: EAGLE-3 (``method="eagle3"``) the taps entering early, middle
and late layers, concatenated and projected by the head's ``fc``; ``method="eagle"`` the
target's last hidden state. After each forward the last stage hands the drafter every
computed position's feature (``capture``); the drafter keeps them per request, by position,
and then drafts as ``draft_model.py`` does, sharing its paged cache and loop: step 0 feeds the
pairs it has not cached (``SHIFT = 1``: the token after each position), every later step the
draft just made, paired with the head's own output stream at the step before (vLLM: the
``hidden_states`` the head returns, ``llama_eagle3.py`` 283-288). Features at positions whose
drafts were rejected are overwritten when the target computes those positions again, before
they are read.

**Under pipeline parallelism the taps live on other stages** (the target's 4 layers, taps
entering layers 1, 2, 3: at PP 4 the last stage captures none of them). This is the design
question of SGLang #39644 and vLLM #50514 (both verified in their threads):

* *Carry them* (minispec, as vLLM 0.30.0's ``EagleModelMixin`` does, ``interfaces.py``
  1569-1641, with Model Runner V2's PP support, PR #50514): every stage appends the taps it
  captured to the ``IntermediateTensors`` it sends on, and passes on what it received, so the
  last stage returns ``(hidden_states, taps)`` with all of them
  (``model_executor/models/llama.py``). Cost: ``len(taps) * hidden_size`` more floats per token
  on every hop after the first capture.
* *Refuse the configuration* (SGLang PR #39644, open, 2026-09-15): its target models capture
  only on the last rank, so under PP the default taps (layers 2, n/2, n-3) were silently
  missing; the PR raises ``NotImplementedError`` when aux capture is asked for with
  ``pp_size > 1`` and leaves single-layer EAGLE/MTP alone. minispec keeps that fault as the
  preset ``v2-eagle3-taps-dropped`` (non-last stages fill no taps; their slots travel as zeros)
  and refuses the configuration where a design cannot carry the taps: each design's record
  says whether it can (``Design.can_carry_hidden_states``, ``minispec/v1/worker/designs.py``),
  and the engine's arguments are refused on it (``engine/arg_utils.py``).

Left out: vLLM's padded/parallel drafting, CUDA graphs, a reduced draft vocabulary, tree
drafts, MTP, and sharing the target's embedding and ``lm_head`` (the head ships its own).
"""

from __future__ import annotations

import numpy as np
import torch

from minispec.attention import make_attention_metadata
from minispec.model_executor.models.llama_eagle3 import load_eagle_head
from minispec.v1.spec_decode.draft_model import DraftModelProposer

EAGLE_METHODS = ("eagle", "eagle3")


def set_eagle3_aux_hidden_state_layers(model, aux_layers: tuple[int, ...], captures: bool) -> None:
    """Make a target stage capture (and carry on) the head's taps (vLLM 0.30.0 has the same name,
    ``gpu/spec_decode/eagle/eagle3_utils.py`` 15-33). ``captures=False``: SGLang #39644's fault."""
    model.model.set_aux_hidden_state_layers(aux_layers, captures)


def split_model_output(output) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """The last stage's ``(hidden_states, taps)``; taps ``None`` when none were asked for."""
    if isinstance(output, tuple):
        return output
    return output, None


class EagleProposer(DraftModelProposer):
    SHIFT = 1

    def __init__(self, model_path, k: int, max_model_len: int, max_num_seqs: int, block_size: int,
                 device="cpu", dtype=torch.float32, arch=None, tree=None):
        """``arch``: the head's config.json (a one-layer Llama with ``eagle_aux_hidden_state_layer_ids``);
        ``tree``: a chain (the config refuses a branching tree for an EAGLE head)."""
        super().__init__(model_path, k, max_model_len, max_num_seqs, block_size, device, dtype, arch, tree)
        self.dtype = dtype

    @staticmethod
    def _load_model(model_path, arch, device, dtype):
        return load_eagle_head(model_path, arch, device, dtype)

    def reset(self) -> None:
        super().reset()
        self.features: dict[str, torch.Tensor] = {}  # per request: [max_model_len, feature width]
        self.carried: dict[str, torch.Tensor] = {}  # per request: the head's stream at its last fed position
        self.last_inputs: dict[str, torch.Tensor] = {}  # per request: the features step 0 read (for the trace)

    def remove(self, req_id: str) -> None:
        super().remove(req_id)
        self.features.pop(req_id, None)
        self.carried.pop(req_id, None)
        self.last_inputs.pop(req_id, None)

    @property
    def aux_layers(self) -> tuple[int, ...]:
        return self.model.aux_layers

    def capture(self, req_ids: list[str], starts: np.ndarray, counts: np.ndarray, hidden_states: torch.Tensor,
                aux_hidden_states: list[torch.Tensor] | None) -> None:
        """Keep the features of this forward's positions: request ``req_ids[j]`` computed
        ``counts[j]`` positions from ``starts[j]``, its rows of ``hidden_states`` in that order."""
        if self.aux_layers and aux_hidden_states is None:
            raise RuntimeError(f"the EAGLE-3 head reads taps {self.aux_layers}, but the target's last stage "
                               "returned none: set_eagle3_aux_hidden_state_layers was not called on its stages")
        feats = torch.cat(aux_hidden_states, dim=-1) if self.aux_layers else hidden_states
        offset = 0
        for req_id, start, n in zip(req_ids, starts.tolist(), counts.tolist()):
            buf = self.features.get(req_id)
            if buf is None:
                buf = self.features[req_id] = feats.new_zeros(self.max_model_len, feats.shape[-1])
            buf[start : start + n] = feats[offset : offset + n]
            offset += n

    def _forward(self, tokens, starts, block_rows, req_ids, step) -> torch.Tensor:
        width = max(len(b) for b in block_rows)
        table = np.array([b + [0] * (width - len(b)) for b in block_rows])
        positions, meta = make_attention_metadata(starts, [len(t) for t in tokens], table, self.block_size,
                                                  self.device)
        ids = torch.tensor([t for ts in tokens for t in ts], device=self.device)
        if step == 0:  # the target's features at the fed positions
            inputs = [self.features[r][s : s + len(t)] for r, s, t in zip(req_ids, starts, tokens)]
            self.last_inputs.update({r: x for r, x in zip(req_ids, inputs)})
            hidden = self.model.combine_hidden_states(torch.cat(inputs))
        else:  # the head's own stream one position back
            hidden = torch.stack([self.carried[r] for r in req_ids])
        normed, prenorm = self.model(ids, positions, meta, hidden)
        last = torch.tensor(meta.query_start_loc[1:], device=self.device) - 1
        self.carried.update({r: prenorm[i] for r, i in zip(req_ids, last.tolist())})
        return self.model.compute_logits(normed[last])
