"""Building one stage's runner from a ``VllmConfig`` (vLLM: ``vllm/v1/worker/gpu_worker.py``).

vLLM's ``Worker`` also initialises the device and the distributed groups and
profiles memory; minispec's executors do the first two and size the KV cache
from ``CacheConfig`` directly. Both executors build their stages here, so a
stage is the same object in one process or many.
"""

from __future__ import annotations

import torch

from minispec.config import VllmConfig
from minispec.platforms import stage_device
from minispec.v1.spec_decode.draft_model import DraftModelProposer
from minispec.v1.spec_decode.ngram_proposer import NgramProposer
from minispec.v1.worker.gpu import use_v2_model_runner
from minispec.v1.worker.gpu_model_runner import GPUModelRunner


def make_drafter(config: VllmConfig, device):
    spec, sched = config.speculative_config, config.scheduler_config
    if not spec.enabled:
        return None
    if spec.method == "ngram":
        return NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max, spec.num_speculative_tokens)
    return DraftModelProposer(spec.model, spec.num_speculative_tokens, sched.max_model_len, sched.max_num_seqs,
                              config.cache_config.block_size, device, config.dtype or torch.float32)


def make_runner(config: VllmConfig, rank: int, recorder=None, device=None) -> GPUModelRunner:
    """``device`` overrides the placement ``stage_device`` would choose (torchrun: ``LOCAL_RANK``)."""
    pp = config.pipeline_parallel_size
    device = device or stage_device(rank, pp, config.device)
    if use_v2_model_runner():  # issue 17: Model Runner V2, chosen as vLLM's Worker does (gpu/__init__.py)
        from minispec.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2

        return GPUModelRunnerV2(config, rank, device, recorder,
                                drafter=make_drafter(config, device) if rank == pp - 1 else None)
    return GPUModelRunner(
        config.model, rank, pp, config.scheduler_config, config.cache_config, config.fixes,
        drafter=make_drafter(config, device) if rank == pp - 1 else None,
        device=device, dtype=config.dtype or torch.float32, seed=config.seed, recorder=recorder,
    )
