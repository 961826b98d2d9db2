"""Building one stage's runner from a ``VllmConfig`` (vLLM: ``vllm/v1/worker/gpu_worker.py``).

vLLM's ``Worker`` also initialises the device and the distributed groups and
profiles memory; minispec's executors do the first two and size the KV cache
from ``CacheConfig`` directly, and the runner picks its own drafter, as vLLM's
does. Both executors build their stages here, so a stage is the same object in
one process or many. Left out: the ``Worker`` class itself.
"""

from __future__ import annotations

from minispec.config import VllmConfig
from minispec.platforms import stage_device
from minispec.v1.worker.gpu_model_runner import GPUModelRunner
from minispec.v1.worker.worker_base import WorkerBase


def make_runner(config: VllmConfig, rank: int, recorder=None, device=None) -> WorkerBase:
    """``device`` overrides the placement ``stage_device`` would choose (torchrun: ``LOCAL_RANK``)."""
    device = device or stage_device(rank, config.pipeline_parallel_size, config.device)
    if config.model_runner == "v2":  # issue 17: Model Runner V2, chosen as vLLM's Worker does (gpu/__init__.py)
        from minispec.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2

        return GPUModelRunnerV2(config, rank, device, recorder)
    if config.model_runner == "relay":  # issue 25: SGLang's relay around the ring (relay/model_runner.py)
        from minispec.v1.worker.relay.model_runner import RelayModelRunner

        return RelayModelRunner(config, rank, device, recorder)
    if config.model_runner == "replicated":  # issue 25: every stage drafts, only accept results travel
        from minispec.v1.worker.relay.replicated import ReplicatedDraftRunner

        return ReplicatedDraftRunner(config, rank, device, recorder)
    return GPUModelRunner(config, rank, device, recorder)
