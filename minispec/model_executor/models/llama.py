"""A Llama-family model that can be cut into pipeline stages.

Mirrors ``vllm/model_executor/models/llama.py``: ``LlamaForCausalLM`` wraps a
``LlamaModel`` whose embedding lives only on the first stage, whose decoder
layers are split with ``get_pp_indices``, and whose final norm and ``lm_head``
live only on the last stage (vLLM puts ``PPMissingLayer`` placeholders in the
other slots; minispec simply does not build them). A non-last stage returns
``IntermediateTensors``; the last returns hidden states for ``compute_logits``.

EAGLE-3 taps: ``LlamaModel`` mixes in ``EagleModelMixin`` (``interfaces.py``, as vLLM 0.30.0's
``LlamaModel.forward`` uses it, ``llama.py`` 406-457; from reading the code): each stage captures
the taps it owns and carries on those it received.

Left out: tensor parallelism, quantisation, fused kernels, rope scaling.
The arithmetic follows transformers' Llama step for step, so that logits agree
to float32 rounding (tests/test_model.py).
"""

from __future__ import annotations

import torch
from torch import nn

from minispec.attention import Attention, AttentionMetadata
from minispec.config import LlamaArchitecture
from minispec.distributed.utils import get_pp_indices
from minispec.model_executor.models.interfaces import EagleModelMixin, aux_key
from minispec.sequence import IntermediateTensors


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """Rotates query/key halves by ``position * inv_freq`` (the "rotate_half" form)."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.register_buffer("inv_freq", self.compute_inv_freq(), persistent=False)

    def compute_inv_freq(self) -> torch.Tensor:
        # On the CPU even while get_model builds the stage on the meta device: it is not in the
        # checkpoint, so it must be real, and arithmetic on meta tensors imports torch._dynamo (2-4 s).
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device="cpu").float() / self.head_dim
        return 1.0 / (self.theta**exponents)

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None, :].to(q.dtype), emb.sin()[:, None, :].to(q.dtype)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, arch: LlamaArchitecture, in_size: int | None = None):
        """``in_size``: the projections' input width, the hidden size unless given (EAGLE-3's head
        reads twice that, ``llama_eagle3.py``)."""
        super().__init__()
        h, d = in_size or arch.hidden_size, arch.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = arch.num_attention_heads, arch.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.num_heads * d, bias=arch.attention_bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=arch.attention_bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=arch.attention_bias)
        self.o_proj = nn.Linear(self.num_heads * d, arch.hidden_size, bias=arch.attention_bias)
        self.rotary_emb = RotaryEmbedding(d, arch.rope_theta)
        self.attn = Attention(self.num_heads, self.num_kv_heads, d)

    def forward(self, positions, x, meta: AttentionMetadata):
        n = x.shape[0]
        q = self.q_proj(x).view(n, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(n, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(n, self.num_kv_heads, self.head_dim)
        q, k = self.rotary_emb(positions, q, k)
        return self.o_proj(self.attn(q, k, v, meta).reshape(n, -1))


class LlamaMLP(nn.Module):
    def __init__(self, arch: LlamaArchitecture):
        super().__init__()
        h, m = arch.hidden_size, arch.intermediate_size
        self.gate_proj = nn.Linear(h, m, bias=arch.mlp_bias)
        self.up_proj = nn.Linear(h, m, bias=arch.mlp_bias)
        self.down_proj = nn.Linear(m, h, bias=arch.mlp_bias)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, arch: LlamaArchitecture):
        super().__init__()
        self.self_attn = LlamaAttention(arch)
        self.mlp = LlamaMLP(arch)
        self.input_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)

    def forward(self, positions, x, meta):
        x = x + self.self_attn(positions, self.input_layernorm(x), meta)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module, EagleModelMixin):
    def __init__(self, arch: LlamaArchitecture, pp_rank: int, pp_size: int):
        super().__init__()
        self.start_layer, self.end_layer = get_pp_indices(arch.num_hidden_layers, pp_rank, pp_size)
        self.is_first_rank, self.is_last_rank = pp_rank == 0, pp_rank == pp_size - 1
        # Left uninitialised, as vLLM v0.9.2 leaves it (``UnquantizedEmbeddingMethod.create_weights``,
        # ``vllm/model_executor/layers/vocab_parallel_embedding.py`` 28-40, from reading the code): the
        # checkpoint fills it. ``nn.Embedding``'s own normal_ init on the meta device (get_model)
        # would import torch._dynamo, 2-4 s in every process that loads a stage.
        self.embed_tokens = (nn.Embedding(arch.vocab_size, arch.hidden_size,
                                          _weight=torch.empty(arch.vocab_size, arch.hidden_size))
                             if self.is_first_rank else None)
        # Keyed by the global layer index so checkpoint names map one to one.
        self.layers = nn.ModuleDict(
            {str(i): LlamaDecoderLayer(arch) for i in range(self.start_layer, self.end_layer)}
        )
        self.norm = RMSNorm(arch.hidden_size, arch.rms_norm_eps) if self.is_last_rank else None

    def forward(self, input_ids, positions, meta, intermediate_tensors: IntermediateTensors | None):
        if self.is_first_rank:
            x = self.embed_tokens(input_ids)
        else:
            x = intermediate_tensors["hidden_states"]
        taps = self.collect_remote_aux_hidden_states(intermediate_tensors)
        for idx, layer in self.layers.items():
            self.maybe_add_hidden_state(taps, int(idx), x)
            x = layer(positions, x, meta)
        self.maybe_add_hidden_state(taps, self.end_layer, x)
        return self.aux_stage_output(x, taps, self.norm)


class LlamaForCausalLM(nn.Module):
    """One pipeline stage of a Llama model (the whole model when ``pp_size == 1``)."""

    def __init__(self, arch: LlamaArchitecture, pp_rank: int = 0, pp_size: int = 1):
        super().__init__()
        self.arch = arch
        self.pp_rank, self.pp_size = pp_rank, pp_size
        self.model = LlamaModel(arch, pp_rank, pp_size)
        is_last = self.model.is_last_rank
        self.lm_head = nn.Linear(arch.hidden_size, arch.vocab_size, bias=False) if is_last else None

    @property
    def attention_layers(self) -> list[Attention]:
        return [layer.self_attn.attn for layer in self.model.layers.values()]

    def forward(self, input_ids, positions, meta, intermediate_tensors=None):
        return self.model(input_ids, positions, meta, intermediate_tensors)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden_states)

    def intermediate_tensor_keys(self) -> list[str]:
        """What this stage receives from the one before (vLLM: ``make_empty_intermediate_tensors``'s
        keys): the hidden states, then the taps captured upstream, in layer order."""
        return ["hidden_states"] + [aux_key(i) for i in self.model.upstream_aux_layers()]

    def wanted_weight_names(self) -> dict[str, str]:
        """Own parameter name -> checkpoint tensor name, for this stage only."""
        names = {}
        for name, _ in self.named_parameters():
            tied = name == "lm_head.weight" and self.arch.tie_word_embeddings
            names[name] = "model.embed_tokens.weight" if tied else name
        return names
