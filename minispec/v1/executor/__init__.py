"""The executors (vLLM: ``vllm/v1/executor/``), imported here so that ``Executor.get_class``
finds each by its backend (vLLM 0.30.0's ``__init__.py`` 3-6 imports ``UniProcExecutor`` too)."""

from minispec.v1.executor.abstract import Executor
from minispec.v1.executor.multiproc_executor import MultiprocExecutor, TorchrunExecutor
from minispec.v1.executor.uniproc_executor import UniProcExecutor

__all__ = ["Executor", "MultiprocExecutor", "TorchrunExecutor", "UniProcExecutor"]
