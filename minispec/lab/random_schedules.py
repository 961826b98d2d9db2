"""Seeded random schedules: many small runs that mix what the thread's scenario fixes.

Each seed picks the number of stages (2 or 3), the proposer and k, how many
requests arrive and when, their prompts (slices of the thread's own prompts),
greedy or seeded random sampling, and a KV cache that is sometimes small enough
to force preemption. ``run_schedule(config, fixes)`` runs one with a trace, so the
invariant checker (``minispec.instruments.invariants.check_trace``) can go over
every step and stage of it offline. The same seed gives the same run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from minispec.lab.scenarios import PROMPTS, run_recorded
from minispec.sampling_params import SamplingParams

TEXT = " ".join(PROMPTS.values())


@dataclass(frozen=True)
class ScheduleConfig:
    seed: int
    pipeline_parallel_size: int
    method: str
    num_speculative_tokens: int
    prompts: tuple[str, ...]
    arrival_steps: tuple[int, ...]
    temperature: float
    max_tokens: int
    num_gpu_blocks: int | None  # None: enough for every request; else small, so requests get preempted

    def describe(self) -> str:
        blocks = "ample KV" if self.num_gpu_blocks is None else f"{self.num_gpu_blocks} KV blocks"
        return (f"seed {self.seed}: pp={self.pipeline_parallel_size} {self.method} k={self.num_speculative_tokens} "
                f"{len(self.prompts)} requests arriving at {list(self.arrival_steps)} "
                f"temperature={self.temperature} {blocks}")


def random_config(seed: int) -> ScheduleConfig:
    rng = random.Random(seed)
    num_requests = rng.randint(2, 5)
    prompts = []
    for _ in range(num_requests):
        length = rng.randint(4, 30)
        start = rng.randrange(len(TEXT) - length)
        prompts.append(TEXT[start : start + length])
    return ScheduleConfig(
        seed=seed,
        pipeline_parallel_size=rng.choice((2, 3)),
        method=rng.choice(("draft_model", "draft_model", "ngram")),
        num_speculative_tokens=rng.randint(1, 4),
        prompts=tuple(prompts),
        arrival_steps=tuple(sorted(rng.randint(0, 3) for _ in range(num_requests))),
        temperature=rng.choice((0.0, 0.0, 0.8)),
        max_tokens=rng.randint(6, 10),
        num_gpu_blocks=rng.choice((None, None, 16)),
    )


def run_schedule(config: ScheduleConfig, fixes="all"):
    """Run ``config`` under ``fixes`` and return its ``Trace``."""
    from minispec.entrypoints.llm import LLM

    llm = LLM(
        pipeline_parallel_size=config.pipeline_parallel_size,
        speculative_config={"method": config.method, "num_speculative_tokens": config.num_speculative_tokens},
        fixes=fixes, record=True, max_num_seqs=8, max_num_batched_tokens=64, max_model_len=64, block_size=4,
        num_gpu_blocks=config.num_gpu_blocks, seed=config.seed,
    )
    params = SamplingParams(temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed)
    for prompt, arrival in zip(config.prompts, config.arrival_steps):
        llm.add_request(prompt, params, arrival_step=arrival)
    return run_recorded(llm)
