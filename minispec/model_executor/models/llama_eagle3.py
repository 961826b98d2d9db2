"""An EAGLE-3 draft head for a Llama target (vLLM 0.30.0: ``vllm/model_executor/models/llama_eagle3.py``,
``Eagle3LlamaForCausalLM``; from reading the code).

One decoder layer that reads two things per position: the embedding of the next token and a
feature of the target. Its first (and only) layer normalises each (``input_layernorm`` on the
embedding, ``hidden_norm`` on the feature), concatenates them, so its ``q/k/v_proj`` take
``2 * hidden_size`` inputs, and keeps the un-normalised feature as the residual (vLLM's
default ``_norm_after_residual``, lines 117-121). ``forward`` returns the final norm's output,
for ``compute_logits``, and the stream before it, which the next draft step reads in place of
the target's feature (lines 283-288).

The feature of a target position is ``combine_hidden_states``: with taps (EAGLE-3, config.json
``eagle_aux_hidden_state_layer_ids``) ``fc`` projects the taps, concatenated, back to
``hidden_size``; without them (minispec's ``"eagle"``) the feature is the target's last hidden
state, after its final norm, as vLLM's EAGLE-1 reads it. Departure: vLLM's EAGLE-1 head
(``llama_eagle.py``) has another layer shape (``fc`` over ``[embedding, feature]``); minispec
uses this one layer shape for both methods.

The head has its own embedding and ``lm_head`` (vLLM shares the target's embedding when the
checkpoint has none, and needs one on the last stage under PP; the head's own copy keeps the
last stage free of the first stage's weights). Left out: a reduced draft vocabulary
(``d2t``/``t2d``), more than one layer, quantisation, ``norm_before_fc``/``fc_norm`` variants.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from minispec.attention import Attention
from minispec.config import LlamaArchitecture
from minispec.model_executor.models.llama import LlamaAttention, LlamaMLP, RMSNorm


class Eagle3DecoderLayer(nn.Module):
    def __init__(self, arch: LlamaArchitecture):
        super().__init__()
        h = arch.hidden_size
        self.self_attn = LlamaAttention(arch, 2 * h)
        self.mlp = LlamaMLP(arch)
        self.input_layernorm = RMSNorm(h, arch.rms_norm_eps)
        self.hidden_norm = RMSNorm(h, arch.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(h, arch.rms_norm_eps)

    def forward(self, positions, embeds, hidden, meta):
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1)
        residual = hidden + self.self_attn(positions, x, meta)
        return residual + self.mlp(self.post_attention_layernorm(residual))


class Eagle3LlamaForCausalLM(nn.Module):
    """The head. ``aux_layers``: the target's taps it reads (empty: the target's last hidden state)."""

    def __init__(self, arch: LlamaArchitecture, aux_layers: tuple[int, ...] = ()):
        super().__init__()
        self.arch, self.aux_layers = arch, tuple(aux_layers)
        h = arch.hidden_size
        self.embed_tokens = nn.Embedding(arch.vocab_size, h)
        self.fc = nn.Linear(len(aux_layers) * h, h, bias=False) if aux_layers else None
        self.midlayer = Eagle3DecoderLayer(arch)
        self.norm = RMSNorm(h, arch.rms_norm_eps)
        self.lm_head = nn.Linear(h, arch.vocab_size, bias=False)

    @property
    def attention_layers(self) -> list[Attention]:
        return [self.midlayer.self_attn.attn]

    def combine_hidden_states(self, features: torch.Tensor) -> torch.Tensor:
        """A target position's feature, ``[tokens, hidden_size]``, from what the drafter
        stored for it (the taps side by side, or the last hidden state)."""
        return self.fc(features) if self.fc is not None else features

    def forward(self, input_ids, positions, meta, hidden_states) -> tuple[torch.Tensor, torch.Tensor]:
        """``(normed, prenorm)``: the first for ``compute_logits``, the second for the next step."""
        prenorm = self.midlayer(positions, self.embed_tokens(input_ids), hidden_states, meta)
        return self.norm(prenorm), prenorm

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden_states)


def load_eagle_head(path: str | Path, arch: LlamaArchitecture, device, dtype) -> Eagle3LlamaForCausalLM:
    """The head in ``path`` (config.json and model.safetensors, as ``training.eagle`` saves it)."""
    from safetensors.torch import load_file

    path = Path(path)
    aux = tuple(json.loads((path / "config.json").read_text()).get("eagle_aux_hidden_state_layer_ids") or ())
    model = Eagle3LlamaForCausalLM(arch, aux)
    state = {k: v.to(dtype) for k, v in load_file(path / "model.safetensors").items()}
    model.load_state_dict(state, strict=True)
    return model.requires_grad_(False).to(device=device, dtype=dtype).eval()
