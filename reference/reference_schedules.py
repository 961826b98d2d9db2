"""The runs handed to vLLM's code: the forum thread, and seeded random schedules.

A random schedule is ``minispec.lab.experiments.scenarios.random_config(seed)`` (2 or 3
stages, both proposers, k 1-4, arrivals over the first steps, a 16-block KV
cache a third of the time, so that requests are preempted and resumed), plus
stop tokens for three seeds in four, so that requests also finish part-way
through their accepted drafts, and a 12-token budget in one seed of three, so
that prompts (4-30 tokens) are prefilled in chunks. It runs through
``minispec.lab.experiments.schedule.run_schedule`` like every other schedule.

vLLM twin: none.
"""

from __future__ import annotations

import dataclasses
import random

from minispec.lab.experiments.scenarios import random_config
from minispec.lab.experiments.schedule import Schedule

# ' ', 'e' and 's' in the shipped character tokenizer: frequent in its outputs
STOP_CHOICES = ((), (3,), (70,), (84, 3))


def reference_schedule(seed: int) -> Schedule:
    # its own generator, seeded apart from random_config's, so those draws stay as they were
    rng = random.Random(f"reference:{seed}")
    return dataclasses.replace(random_config(seed), name=f"random seed {seed}", stop_token_ids=rng.choice(STOP_CHOICES),
                               max_num_batched_tokens=rng.choice((64, 64, 12)))  # 12: prefilled in chunks
