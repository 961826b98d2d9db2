"""Serving a pipeline stage on a torchrun rank other than 0 (vLLM 0.30.0:
``vllm/entrypoints/cli/serve.py``, ``run_headless``, 179-230).

Under ``distributed_executor_backend="torchrun"`` the same script runs on every rank. Rank 0
builds the ``LLM`` (the engine and stage 0); every other rank calls ``run_headless`` with the
same arguments, which serves that rank's stage and returns when rank 0 shuts the pipeline
down::

    if int(os.environ["RANK"]) > 0:
        run_headless(pipeline_parallel_size=2, distributed_executor_backend="torchrun")
    else:
        llm = LLM(pipeline_parallel_size=2, distributed_executor_backend="torchrun")

vLLM's ``run_headless`` is what ``vllm serve --headless`` runs on the nodes after the first
(215-230): it builds the ``MultiprocExecutor`` of that node's workers and waits on them,
while the first node runs the engine. Left out: the ``serve`` subcommand and its
OpenAI-compatible server, data-parallel engines, signal handling.
"""

from __future__ import annotations

from pathlib import Path

from minispec.config import DEFAULT_TARGET
from minispec.engine.arg_utils import EngineArgs
from minispec.v1.executor.multiproc_executor import serve_stage, torchrun_rank


def run_headless(model: str | Path = DEFAULT_TARGET, **kwargs) -> None:
    """Serve this rank's stage until rank 0 shuts the pipeline down. The arguments are the
    ``LLM``'s on rank 0 (``EngineArgs`` fields), checked the same way."""
    rank = torchrun_rank()
    if rank == 0:
        raise ValueError("run_headless on rank 0: expected a rank > 0 (rank 0 runs the engine: create the LLM there)")
    config = EngineArgs(model=model, **kwargs).create_engine_config()
    backend = config.parallel_config.distributed_executor_backend
    if backend != "torchrun":
        raise ValueError(f"run_headless with distributed_executor_backend={backend!r}: expected 'torchrun' "
                         "(under 'uni' and 'mp' the LLM starts every stage itself)")
    serve_stage(config)
