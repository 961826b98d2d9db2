"""Every run the lab builds, from one description: a ``Schedule`` and its engine.

A ``Schedule`` is plain data: the engine's shape (stages, proposer, k, budgets,
KV cache), its requests (prompt, arrival step, optional id) and the sampling
they share. ``build_llm(schedule, fixes)`` returns a recording engine with the
requests queued; ``run_schedule`` runs it and returns its ``Trace``.
``greedy_reference`` is what every run must reproduce when sampling is greedy:
one stage, no drafts, computed once per prompt set per session.

What is run (the forum thread, the seeded random schedules) is in
``minispec.lab.experiments.scenarios``.

vLLM twin: none (vLLM's tests build their engines inline).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

from minispec.sampling_params import SamplingParams


@dataclass(frozen=True)
class Request:
    prompt: str | tuple[int, ...]  # text, or token ids
    arrival_step: int = 0
    req_id: str | None = None  # None: the engine numbers it


@dataclass(frozen=True)
class Schedule:
    name: str
    requests: tuple[Request, ...]
    pipeline_parallel_size: int
    method: str
    num_speculative_tokens: int
    max_tokens: int
    temperature: float = 0.0
    seed: int | None = None  # the engine's and every request's; None: engine seed 0, requests unseeded
    stop_token_ids: tuple[int, ...] = ()
    check_invariants: bool = False
    # the rest as LLM's own defaults
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 512
    max_model_len: int | None = None
    block_size: int = 16
    num_gpu_blocks: int | None = None  # None: enough for every request
    details: str = ""  # e.g. "PP 2, ngram drafts"
    model: str | None = None  # None: the shipped target; the explorer's runs name the stand-in
    script: tuple[tuple[str, tuple[int, ...]], ...] = ()  # method "scripted": right drafts per proposal
    max_concurrent_batches: int | None = None  # None: one per stage
    async_scheduling: bool = False  # LLM's (vLLM's): schedule ahead on placeholders
    eagle_aux_hidden_state_layer_ids: tuple[int, ...] = ()  # method "scripted": the taps it reads (EAGLE-3 shaped)
    speculative_token_tree: str | None = None  # vLLM's tree of drafts; None: a chain
    enable_prefix_caching: bool = False  # LLM's (vLLM's): a waiting request reuses cached full blocks

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(r.prompt for r in self.requests)

    @property
    def arrival_steps(self) -> tuple[int, ...]:
        return tuple(r.arrival_step for r in self.requests)

    def describe(self, llm=None) -> str:
        """The name, with the details and what the run showed: how many preemptions it had."""
        preemptions = llm.stats()["preemptions"] if llm is not None else 0
        details = self.details + (f", {plural(preemptions, 'preemption')}" if preemptions else "")
        return f"{self.name} ({details})" if details else self.name


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + "s" * (n != 1)


def build_llm(schedule: Schedule, fixes="all", model_runner: str | None = None, faults: str | None = None,
              worker_cls=None, record: bool = True):
    """A recording engine for ``schedule`` under ``fixes``, its requests queued, not yet run.
    ``model_runner``, ``faults`` and ``worker_cls``: as ``LLM``'s (Model Runner V2 and its fault
    presets, issue 17; a runner design from outside minispec). ``record=False``: an engine that
    keeps no trace (a run only its outputs are read from)."""
    from minispec.entrypoints.llm import LLM

    s = schedule
    spec = {"method": s.method, "num_speculative_tokens": s.num_speculative_tokens}
    if s.eagle_aux_hidden_state_layer_ids:
        spec["eagle_aux_hidden_state_layer_ids"] = s.eagle_aux_hidden_state_layer_ids
    if s.speculative_token_tree is not None:
        spec["speculative_token_tree"] = s.speculative_token_tree
    model = {} if s.model is None else {"model": s.model}
    llm = LLM(
        **model, pipeline_parallel_size=s.pipeline_parallel_size,
        speculative_config=spec | ({"script": dict(s.script)} if s.script else {}),
        max_concurrent_batches=s.max_concurrent_batches, fixes=fixes, record=record,
        check_invariants=s.check_invariants, max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens, max_model_len=s.max_model_len, block_size=s.block_size,
        num_gpu_blocks=s.num_gpu_blocks, seed=0 if s.seed is None else s.seed, model_runner=model_runner,
        faults=faults, worker_cls=worker_cls, async_scheduling=s.async_scheduling,
        enable_prefix_caching=s.enable_prefix_caching,
    )
    params = SamplingParams(temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed,
                            stop_token_ids=list(s.stop_token_ids))
    for r in s.requests:
        llm.add_request(r.prompt, params, arrival_step=r.arrival_step, request_id=r.req_id)
    return llm


def run_recorded(llm):
    """Run a recording engine to completion (``LLM.wait_for_completion``: an exception aborts every
    request first, as ``generate`` does); return its ``Trace`` with every request's output
    and the engine's stats filled in."""
    # listed by request id, so tables print A, B, C, D whatever finished first
    finished = sorted(llm.wait_for_completion(), key=lambda out: out.request_id)
    trace = llm.trace
    trace.outputs = {out.request_id: list(out.outputs[0].token_ids) for out in finished}
    trace.stats = llm.stats()
    return trace


def run_schedule(schedule: Schedule, fixes="all", model_runner: str | None = None, faults: str | None = None,
                 worker_cls=None):
    """Run ``schedule`` under ``fixes`` (and ``model_runner``, ``faults``, ``worker_cls``) and return its ``Trace``."""
    return run_recorded(build_llm(schedule, fixes, model_runner, faults, worker_cls))


@contextlib.contextmanager
def intra_op_threads(n: int = 1):
    """Torch on ``n`` threads in this process (one unless told). These models are so small
    that, on a laptop's two busy cores, threads handing work to each other cost more than
    the arithmetic (measured: 5 to 15 times slower with two threads while other processes
    competed for the cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.cache
def _plain_llm():
    from minispec.entrypoints.llm import LLM

    return LLM()


@functools.cache
def _greedy(prompts: tuple, max_tokens: int) -> tuple[tuple[int, ...], ...]:
    with intra_op_threads():
        outs = _plain_llm().generate([list(p) if isinstance(p, tuple) else p for p in prompts],
                                     SamplingParams(temperature=0, max_tokens=max_tokens))
    return tuple(tuple(o.outputs[0].token_ids) for o in outs)


def greedy_reference(prompts: dict, max_tokens: int) -> dict:
    """Key -> plain greedy output (one stage, no drafts; the tests prove it equals
    transformers) for each prompt (text, or a tuple of token ids), computed once."""
    return {key: list(out) for key, out in zip(prompts, _greedy(tuple(prompts.values()), max_tokens))}


def schedule_reference(schedule: Schedule) -> dict[str, list[int]]:
    """What a greedy run of ``schedule`` must produce, by request id."""
    return greedy_reference({r.req_id: r.prompt for r in schedule.requests}, schedule.max_tokens)
