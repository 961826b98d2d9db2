"""The scheduler's view of one request (vLLM: ``vllm/v1/request.py``).

``num_computed_tokens`` counts tokens whose KV is (or is being) computed; the
scheduler advances it when it schedules, drafts included, and rolls it back by
the number of rejected drafts when the output comes back.
Left out: multimodal inputs, structured output, LoRA, pooling, priorities.
"""

from __future__ import annotations

import enum

from minispec.sampling_params import SamplingParams


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED_STOPPED = "finished_stopped"
    FINISHED_LENGTH_CAPPED = "finished_length_capped"
    FINISHED_ABORTED = "finished_aborted"

    @property
    def is_finished(self) -> bool:
        return self.name.startswith("FINISHED")


class Request:
    def __init__(self, request_id: str, prompt_token_ids: list[int], sampling_params: SamplingParams,
                 eos_token_id: int | None = None):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self.sampling_params = sampling_params
        self.eos_token_id = eos_token_id
        self.output_token_ids: list[int] = []
        self.spec_token_ids: list[int] = []
        self.num_computed_tokens = 0
        self.status = RequestStatus.WAITING
        self.num_preemptions = 0
        # minispec: how many scheduled batches holding this request are still in flight
        self.num_inflight_batches = 0
        # Async scheduling (vLLM 0.30.0 ``v1/request.py``): tokens its batches in flight will emit,
        # counted in num_computed_tokens before they exist (bonus and drafts, all assumed accepted).
        self.num_output_placeholders = 0
        # Tokens scheduled in batches whose output is not back yet (vLLM 0.30.0 ``v1/request.py``
        # 168-171), and, once the request is preempted, those of its output still to come: it is
        # delivered when it returns, but no longer moves the counters preemption reset (158-163).
        self.num_in_flight_tokens = 0
        self.num_stale_output_tokens = 0
        # Model Runner V2 under pipeline parallelism and async scheduling: the first step at which a
        # decoding request may be scheduled again (vLLM's ``next_decode_eligible_step``; minispec
        # counts batches, see Scheduler._wait_for_output).
        self.next_decode_eligible_step = 0
        # vLLM's: its last scheduled chunk left it mid-prefill (the scheduler pads no decode beside it)
        self.is_prefill_chunk = False
        self.num_sampling_steps = 0  # target forwards that emitted tokens for it
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return self.num_tokens + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    def is_finished(self) -> bool:
        return self.status.is_finished

    def __repr__(self) -> str:
        return f"Request({self.request_id!r}, tokens={self.num_tokens}, computed={self.num_computed_tokens}, {self.status.value})"
