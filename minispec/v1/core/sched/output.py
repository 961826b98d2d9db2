"""What the scheduler sends to every pipeline stage each step
(vLLM: ``vllm/v1/core/sched/output.py``, field names as in v0.9.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.sampling_params import SamplingParams


@dataclass
class NewRequestData:
    """A request the workers have never seen: everything they need to cache it."""

    req_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    block_ids: list[int]
    num_computed_tokens: int


@dataclass
class CachedRequestData:
    """Requests the workers already hold, one column per field. ``new_token_ids`` is filled
    only under pipeline parallelism: the first stage never sees what the last stage sampled,
    so the scheduler relays it.
    """

    req_ids: list[str] = field(default_factory=list)
    resumed_from_preemption: list[bool] = field(default_factory=list)
    new_token_ids: list[list[int]] = field(default_factory=list)
    new_block_ids: list[list[int]] = field(default_factory=list)
    num_computed_tokens: list[int] = field(default_factory=list)
    # minispec: every token of a request resumed after preemption, by id. vLLM 0.30.0's
    # scheduler sends Model Runner V2 a resumed request as a new one carrying them
    # (``NewRequestData.prefill_token_ids``, v1/core/sched/scheduler.py 1323-1333): V2
    # freed its slot when it was preempted. minispec keeps V1's resumed flag and sends them here.
    all_token_ids: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    finished_req_ids: set[str]
    # minispec: the engine step that produced it, for traces
    step: int = 0
    # The requests this step preempted (vLLM 0.30.0 output.py 265, scheduler.py 1416 and
    # 1518): Model Runner V2 frees their slots at once; V1's runner (0.9.2's) ignores it.
    preempted_req_ids: set[str] = field(default_factory=set)
