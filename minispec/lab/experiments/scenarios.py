"""What the lab runs: the forum thread's scenario (July 2025) and seeded random schedules.

Two pipeline stages, speculative decoding on. ``batch_0`` = {A, B} arrives and
prefills; ``batch_1`` = {C, D} arrives while batch_0 is still in flight and
prefills; from then on decode batches alternate batch_0, batch_1, batch_0, ...
Each stage's persistent batch therefore holds only the other batch's requests
whenever a batch comes round again, so every decode request is re-added every
step.

Drafts come from the shipped draft model by default (``method="ngram"`` is the
proposer July-2025 V1 itself had; its EAGLE/MTP heads were learned drafters like
this one). The prompts are chosen so the stale slots are easy to read: C's prompt is
longer than A's, so when A is re-added into the row C just left, A's draft
slots still hold C's prompt characters (and likewise B and D).

The seeded generators each draw in a fixed order, so a seed always gives the
same run (notebook 05's outputs and ``make vllm-check`` rely on it):
``random_config`` mixes what the thread's scenario fixes (2 or 3 stages, either
proposer, greedy or seeded sampling, sometimes a KV cache small enough to
preempt); ``exercise_schedule`` gives the workshop checker its preempting runs.
Every one is a ``minispec.lab.experiments.schedule.Schedule``, built and run there.

vLLM twin: none.
"""

from __future__ import annotations

import random

from minispec.lab.experiments.schedule import Request, Schedule, build_llm, greedy_reference, run_recorded

PROMPTS = {
    "A": "A list is ",
    "B": "Strings are ",
    "C": "The for statement is used to iterate",
    "D": "Exceptions are raised when",
}
BATCH_0, BATCH_1 = ("A", "B"), ("C", "D")


def batch_label(req_ids) -> str:
    """The thread's name for a batch: "batch_0 = {A, B}" (or just its requests)."""
    names = {frozenset(BATCH_0): "batch_0", frozenset(BATCH_1): "batch_1"}
    members = "{" + ", ".join(sorted(req_ids)) + "}"
    name = names.get(frozenset(req_ids))
    return f"{name} = {members}" if name else members


FIRST_DECODE = 2  # the scheduler step of batch_0's first decode
TEXT = " ".join(PROMPTS.values())  # random_config's prompts are slices of it


def thread_schedule(num_speculative_tokens: int = 3, method: str = "draft_model", max_tokens: int = 16,
                    check_invariants: bool = False) -> Schedule:
    requests = tuple(Request(PROMPTS[r], arrival, r) for arrival, batch in enumerate((BATCH_0, BATCH_1)) for r in batch)
    return Schedule("the thread scenario", requests, 2, method, num_speculative_tokens, max_tokens,
                    check_invariants=check_invariants, max_num_seqs=4)


def forum_thread_llm(fixes="vllm-0.9.2", num_speculative_tokens: int = 3, method: str = "draft_model",
                     max_tokens: int = 16, check_invariants: bool = False):
    """The engine with the four requests queued but not yet run (for stepping)."""
    return build_llm(thread_schedule(num_speculative_tokens, method, max_tokens, check_invariants), fixes)


def forum_thread(fixes="vllm-0.9.2", **kwargs):
    """Run the scenario to completion and return its ``Trace`` (with outputs)."""
    return run_recorded(forum_thread_llm(fixes, **kwargs))


def forum_thread_reference(max_tokens: int = 16) -> dict[str, list[int]]:
    """Each request's output from plain greedy decoding (one stage, no drafts): what
    every preset must reproduce token for token."""
    return greedy_reference(PROMPTS, max_tokens)


# -- seeded generators: each keeps its draws in the order its seeds were recorded with ----
def random_config(seed: int) -> Schedule:
    """2 or 3 stages, either proposer, k 1-4, 2-5 requests (slices of the thread's
    prompts) arriving over the first steps, greedy or seeded sampling, and a KV cache
    small enough to preempt one seed in three."""
    rng = random.Random(seed)
    num_requests = rng.randint(2, 5)
    prompts = []
    for _ in range(num_requests):
        length = rng.randint(4, 30)
        start = rng.randrange(len(TEXT) - length)
        prompts.append(TEXT[start : start + length])
    pp, method, k = rng.choice((2, 3)), rng.choice(("draft_model", "draft_model", "ngram")), rng.randint(1, 4)
    arrivals = sorted(rng.randint(0, 3) for _ in range(num_requests))
    temperature, max_tokens, num_gpu_blocks = rng.choice((0.0, 0.0, 0.8)), rng.randint(6, 10), rng.choice((None, None, 16))
    blocks = "ample KV" if num_gpu_blocks is None else f"{num_gpu_blocks} KV blocks"
    name = (f"seed {seed}: pp={pp} {method} k={k} {num_requests} requests arriving at {arrivals} "
            f"temperature={temperature} {blocks}")
    return Schedule(name, tuple(map(Request, prompts, arrivals)), pp, method, k, max_tokens, temperature, seed,
                    max_num_seqs=8, max_num_batched_tokens=64, max_model_len=64, block_size=4,
                    num_gpu_blocks=num_gpu_blocks)


EXERCISE_PROMPTS = (
    "The for statement ", "A list is ", "Exceptions are raised when", "The while loop ",
    "Strings are ", "A function definition ", "The import statement ", "Dictionaries map ",
    "The with statement ", "Numbers are ", "A class definition defines ", "The return statement ",
)


def exercise_schedule(seed: int, pp: int, method: str, num_requests: int = 6, max_tokens: int = 16) -> Schedule:
    """Greedy, k = 3, requests A, B, ... with prompts and arrival steps drawn with ``seed``;
    a KV cache of 8 blocks of 8 tokens, too small for all of them at once, so requests
    get preempted and resumed; invariants checked live."""
    rng = random.Random(seed)
    req_ids = [chr(ord("A") + i) for i in range(num_requests)]
    prompts = rng.sample(EXERCISE_PROMPTS, num_requests)
    arrivals = sorted(rng.randrange(0, 2 * num_requests) for _ in req_ids)
    return Schedule(f"random schedule {seed}", tuple(map(Request, prompts, arrivals, req_ids)), pp, method, 3,
                    max_tokens, check_invariants=True, max_num_batched_tokens=40, max_model_len=64, block_size=8,
                    num_gpu_blocks=8, details=f"PP {pp}, {method} drafts")
