"""Building one stage's runner from a ``VllmConfig`` (vLLM: ``vllm/v1/worker/gpu_worker.py``).

vLLM's ``Worker`` also initialises the device and the distributed groups and profiles
memory; minispec's executors do the first two and size the KV cache from
``CacheConfig``. Both executors build their stages here, so a stage is the same object
in one process or many: the class the design's record names, or one handed in through
``worker_cls`` (a qualified name or a class, checked against ``WorkerBase``), as vLLM's
``ParallelConfig.worker_cls`` (``docs/fidelity/model_runner_v1.md``). Left out: the
``Worker`` class itself.
"""

from __future__ import annotations

import importlib
import inspect

from minispec.config import VllmConfig
from minispec.platforms import stage_device
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.worker_base import WorkerBase


def make_runner(config: VllmConfig, rank: int, recorder=None, device=None) -> WorkerBase:
    """``device`` overrides the placement ``stage_device`` would choose (torchrun: ``LOCAL_RANK``).
    The class is the design record's (``config.design``, imported when first built, as vLLM's
    Worker picks its model runner), unless ``worker_cls`` handed one in."""
    device = device or stage_device(rank, config.pipeline_parallel_size, config.device)
    if config.parallel_config.worker_cls is not None:  # a design handed in (resolve_worker_cls checked it)
        return config.parallel_config.worker_cls(config, rank, device, recorder)
    return config.design.runner_class(config, rank, device, recorder)


EXPECTED = "a WorkerBase subclass (minispec.v1.worker.worker_base) or its qualified name 'module.Class'"


def resolve_worker_cls(worker_cls: type | str | None, model_runner: str) -> type[WorkerBase] | None:
    """The class ``worker_cls`` names (a class, or ``"module.Class"``), checked against the runner
    contract: a concrete ``WorkerBase``. A subclass of a registered design's runner must be
    built with that design's ``model_runner``, whose switches (``fixes=``, ``faults=``) it reads."""
    if worker_cls is None:
        return None
    if isinstance(worker_cls, str):
        worker_cls = _by_qualname(worker_cls)
    if not (inspect.isclass(worker_cls) and issubclass(worker_cls, WorkerBase)):
        raise ValueError(f"worker_cls={worker_cls!r}: expected {EXPECTED}")
    missing = sorted(getattr(worker_cls, "__abstractmethods__", ()))
    if missing:
        raise ValueError(f"worker_cls={worker_cls.__qualname__}: does not implement {', '.join(missing)} "
                         "of the runner contract WorkerBase (docs/adding_a_runner.md)")
    extended = [d.name for d in DESIGNS.values() if issubclass(worker_cls, d.runner_class)]
    if extended and model_runner not in extended:
        design = extended[-1]
        raise ValueError(f"worker_cls={worker_cls.__qualname__} extends the runner of model_runner={design!r}: "
                         f"expected model_runner={design!r} (its switches), got {model_runner!r}")
    return worker_cls


def _by_qualname(name: str):
    module, _, attr = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr) if module else None
    except (ImportError, AttributeError) as e:
        raise ValueError(f"worker_cls={name!r}: cannot import it ({e}): expected {EXPECTED}") from None
