"""Layer partitioning across pipeline stages, after ``vllm/distributed/utils.py``
(``get_pp_indices``). vLLM also lets ``VLLM_PP_LAYER_PARTITION`` override the split;
minispec leaves that out.
"""

from __future__ import annotations


def get_pp_indices(num_hidden_layers: int, pp_rank: int, pp_size: int) -> tuple[int, int]:
    """Return ``[start, end)`` of the layers held by stage ``pp_rank``."""
    if not 1 <= pp_size <= num_hidden_layers:
        raise ValueError(
            f"pipeline_parallel_size={pp_size}: expected an integer from 1 to the model's {num_hidden_layers} layers"
        )
    sizes = [num_hidden_layers // pp_size] * pp_size
    # Leftover layers go to the stages just before the last one: the last stage
    # already carries the final norm and lm_head.
    for i in range(2, num_hidden_layers % pp_size + 2):
        sizes[-i] += 1
    start = sum(sizes[:pp_rank])
    return start, start + sizes[pp_rank]
