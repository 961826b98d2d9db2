"""Device placement for pipeline stages (vLLM: ``vllm/platforms`` plus the worker's
``init_device``). Stage ``i`` runs on ``cuda:i`` when there is one GPU per stage,
every stage shares ``cuda:0`` when there are fewer, and the CPU is used otherwise.
Only the CPU path has been run by minispec's own tests.
"""

from __future__ import annotations

import torch


def stage_device(stage: int, num_stages: int, override: str | torch.device | None = None) -> torch.device:
    if override is not None:
        return torch.device(override)
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n_gpus >= num_stages:
        return torch.device(f"cuda:{stage}")
    if n_gpus >= 1:
        return torch.device("cuda:0")
    return torch.device("cpu")
