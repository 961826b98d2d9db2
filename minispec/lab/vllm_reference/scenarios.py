"""The runs handed to vLLM's code: the forum thread, and seeded random schedules.

A random schedule is ``minispec.lab.random_schedules.random_config(seed)`` (2 or 3
stages, both proposers, k 1-4, arrivals over the first steps, a 16-block KV
cache a third of the time, so that requests are preempted and resumed), plus
stop tokens for three seeds in four, so that requests also finish part-way
through their accepted drafts, and a 12-token budget in one seed of three, so
that prompts (4-30 tokens) are prefilled in chunks.

vLLM twin: none.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from minispec.lab.random_schedules import ScheduleConfig, random_config
from minispec.lab.scenarios import run_recorded
from minispec.sampling_params import SamplingParams

# ' ', 'e' and 's' in the shipped character tokenizer: frequent in its outputs
STOP_CHOICES = ((), (3,), (70,), (84, 3))


@dataclass(frozen=True)
class ReferenceSchedule:
    config: ScheduleConfig
    stop_token_ids: tuple[int, ...]
    max_num_batched_tokens: int  # 12 in one seed of three: prompts are then prefilled in chunks

    @property
    def name(self) -> str:
        return f"random seed {self.config.seed}"


def reference_schedule(seed: int) -> ReferenceSchedule:
    rng = random.Random(f"reference:{seed}")
    return ReferenceSchedule(random_config(seed), rng.choice(STOP_CHOICES), rng.choice((64, 64, 12)))


def run_reference_schedule(schedule: ReferenceSchedule, fixes: str):
    """Like ``random_schedules.run_schedule``, with the stop tokens."""
    from minispec.entrypoints.llm import LLM

    c = schedule.config
    llm = LLM(
        pipeline_parallel_size=c.pipeline_parallel_size,
        speculative_config={"method": c.method, "num_speculative_tokens": c.num_speculative_tokens},
        fixes=fixes, record=True, max_num_seqs=8, max_num_batched_tokens=schedule.max_num_batched_tokens,
        max_model_len=64, block_size=4,
        num_gpu_blocks=c.num_gpu_blocks, seed=c.seed,
    )
    params = SamplingParams(temperature=c.temperature, max_tokens=c.max_tokens, seed=c.seed,
                            stop_token_ids=list(schedule.stop_token_ids))
    for prompt, arrival in zip(c.prompts, c.arrival_steps):
        llm.add_request(prompt, params, arrival_step=arrival)
    return run_recorded(llm)
