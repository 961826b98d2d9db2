"""What the last pipeline stage returns to the scheduler (vLLM: ``vllm/v1/outputs.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelRunnerOutput:
    req_ids: list[str]
    req_id_to_index: dict[str, int]
    # Per request: the tokens this step produced (accepted drafts, then one
    # recovered or bonus token), or [] for a prefill chunk that is not the last.
    sampled_token_ids: list[list[int]]
    # Per request: the drafts proposed for the next step.
    spec_token_ids: list[list[int]] = field(default_factory=list)
