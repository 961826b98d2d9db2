"""minispec: vLLM v1's speculative decoding under pipeline parallelism, small
enough to read and step through. ``from minispec import LLM, SamplingParams``."""

from minispec.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams"]


def __getattr__(name):
    # LLM pulls in torch and the engine; keep `import minispec` itself cheap.
    if name == "LLM":
        from minispec.entrypoints.llm import LLM

        return LLM
    raise AttributeError(f"module 'minispec' has no attribute {name!r}")
