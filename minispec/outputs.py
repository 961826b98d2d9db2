"""What ``LLM.generate`` returns (vLLM: ``vllm/outputs.py``), plus minispec's
per-request speculative-decoding counts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None  # "stop" or "length"


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_preemptions: int = 0

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / proposed drafts (0 when none were proposed)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0
