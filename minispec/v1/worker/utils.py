"""What every runner design and the draft proposer build the same way (vLLM 0.30.0:
``vllm/v1/worker/utils.py``, whose ``allocate_kv_cache`` and ``bind_kv_cache`` give each
attention layer its cache): ``load_stage_model`` (a stage's weights, its KV cache bound,
the EAGLE-3 taps it captures), ``bind_kv_cache`` (one paged cache per attention layer)
and ``request_generator`` (a random request's own ``torch.Generator``, seeded from its
seed or from the engine's and its id, so it draws the same numbers in every run). Left
out: KV-cache layouts, cache groups and sharing between layers, the forward context.
"""

from __future__ import annotations

import zlib

import torch

from minispec.attention import allocate_kv_cache
from minispec.config import VllmConfig
from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.sampling_params import SamplingParams


def bind_kv_cache(model: LlamaForCausalLM, num_blocks: int, block_size: int, dtype: torch.dtype,
                  device: torch.device | str) -> None:
    """Give each of ``model``'s attention layers a cache of ``num_blocks`` blocks."""
    arch = model.arch
    for attn in model.attention_layers:
        attn.kv_cache = allocate_kv_cache(num_blocks, block_size, arch.num_key_value_heads, arch.head_dim, dtype,
                                          device)


def load_stage_model(vllm_config: VllmConfig, rank: int, device: torch.device, dtype: torch.dtype
                     ) -> LlamaForCausalLM:
    """Stage ``rank``'s layers of the target, from the ``config.json`` the engine read once
    (``vllm_config.arch``), with their KV cache."""
    cache = vllm_config.cache_config
    model = get_model(vllm_config.model, rank, vllm_config.pipeline_parallel_size, device=device, dtype=dtype,
                      arch=vllm_config.arch)
    taps = vllm_config.speculative_config.eagle_aux_hidden_state_layer_ids
    if taps:  # an EAGLE-3 head reads them on the last stage: every stage captures and carries its own
        model.model.set_aux_hidden_state_layers(taps)
    bind_kv_cache(model, cache.num_gpu_blocks, cache.block_size, dtype, device)
    return model


def request_generator(engine_seed: int, req_id: str, params: SamplingParams) -> torch.Generator | None:
    """A random request's generator: its own ``seed``, else one derived from the engine's
    seed and the request id (not ``hash()``, which differs per process); greedy: ``None``."""
    if params.greedy:
        return None
    seed = params.seed if params.seed is not None else zlib.crc32(f"{engine_seed}:{req_id}".encode())
    return torch.Generator().manual_seed(seed)
