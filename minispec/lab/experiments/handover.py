"""The four designs of the hand-over compared by what they send and what it costs, measured
on one workload (issue 25 §4): per design, the messages and bytes per engine step on each
channel, which stage waits on which, the step time and the batch queue's overlap over "mp",
and the one invariant the design must get right (its record's ``must_keep``, ``designs.py``).

Two measurements per design, both on the same workload (``Workload``):

* ``count_handover``, in one process: every message of the hand-over, counted where it is
  sent. For Model Runner V2 and the two relay designs that is each payload tensor on the
  pipeline's own group (``send_checked``'s shape header, minispec's own check, is left out:
  vLLM and SGLang send none); for V1 it is the scheduler's ``new_token_ids`` relay, one field
  of the ``SchedulerOutput`` every non-last stage reads (counted as a message on a step
  that carries any, its bytes as int64). A receiver waits on its sender: the waits are read
  off the channels.
* ``compare_in_flight`` (``overlap.py``, the batch-queue benchmark's machinery): the same
  workload over "mp", two batches in flight against one, best wall time of each; the step
  time is the best wall time with two in flight over the engine steps of the run.

``compare_designs`` runs both for every design; ``minispec.lab.viz.handover_costs`` renders
the result (a table and a figure). Nothing here reads a design's code: the channels come
from the messages sent.

No vLLM twin: a measurement.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from minispec import LLM, SamplingParams
from minispec.config import DEFAULT_TARGET
from minispec.distributed.parallel_state import CHECK_TAG
from minispec.instruments.invariants import Invariant
from minispec.lab.experiments.overlap import compare_in_flight
from minispec.training.corpus import split_text
from minispec.v1.worker.designs import DESIGNS, get_design

SCHEDULER = "scheduler"


@dataclass(frozen=True)
class Workload:
    """One workload for every design: held-out text, arrivals alternating so two batches
    really are in flight, n-gram drafts (the one proposer every design can run)."""

    pipeline_parallel_size: int = 3
    num_speculative_tokens: int = 3
    requests: int = 8
    max_tokens: int = 16

    def prompts(self) -> list[str]:
        text = split_text()[1]
        return [text[531 * i : 531 * i + 24] for i in range(self.requests)]

    def engine(self, design: str) -> dict:
        return dict(model_runner=design, pipeline_parallel_size=self.pipeline_parallel_size,
                    speculative_config={"method": "ngram", "num_speculative_tokens": self.num_speculative_tokens},
                    max_num_seqs=self.requests, max_num_batched_tokens=max(1, self.requests // 2) * (
                        self.num_speculative_tokens + 1))

    def __str__(self) -> str:
        return (f"PP {self.pipeline_parallel_size}, k {self.num_speculative_tokens} n-gram drafts, "
                f"{self.requests} requests x {self.max_tokens} tokens, half arriving a step later")


@dataclass
class DesignCost:
    """One design's hand-over on one workload. ``messages``/``nbytes``: per channel
    ("stage 2 -> stage 0"), over the whole run; ``steps``: the engine steps it took."""

    design: str  # a registered design's name
    steps: int
    messages: dict[str, int] = field(default_factory=dict)
    nbytes: dict[str, int] = field(default_factory=dict)
    seconds: float | None = None  # best wall time over "mp", two batches in flight
    overlap: float | None = None  # best time with one in flight over best with two
    load: float | None = None  # the 1-minute load average before the "mp" runs

    @property
    def messages_per_step(self) -> float:
        return sum(self.messages.values()) / self.steps

    def bytes_per_step(self, channel: str) -> float:
        return self.nbytes.get(channel, 0) / self.steps

    @property
    def step_ms(self) -> float | None:
        return None if self.seconds is None else 1e3 * self.seconds / self.steps

    @property
    def waits(self) -> list[str]:
        """Each receiver waits on its sender, one line per channel."""
        return [f"{receiver} waits on {sender}" for sender, receiver in map(_ends, sorted(self.messages))]

    @property
    def must(self) -> tuple[Invariant, str] | None:
        """What the design's record says its hand-over must get right (None if it says nothing)."""
        rule = get_design(self.design).must_keep
        return None if rule is None else (Invariant(rule[0]), rule[1])


def _ends(channel: str) -> tuple[str, str]:
    sender, receiver = channel.split(" -> ")
    return sender, receiver


def _stage(rank: int) -> str:
    return f"stage {rank}"


class _Counting:
    """A stage's group, counting what it sends (the checked headers left out)."""

    def __init__(self, group, sent: list):
        self.group, self.sent = group, sent

    def send(self, tensor, dst: int, tag: int) -> None:
        if tag < CHECK_TAG:
            self.sent.append((_stage(self.group.rank), _stage(dst), tensor.numel() * tensor.element_size()))
        self.group.send(tensor, dst, tag)

    def __getattr__(self, name):
        return getattr(self.group, name)


def _count_relay(llm: LLM, sent: list) -> None:
    """V1's hand-over: the scheduler's ``new_token_ids``, read by every non-last stage."""
    scheduler, schedule = llm.engine.scheduler, llm.engine.scheduler.schedule
    non_last = range(llm.config.pipeline_parallel_size - 1)

    def counted():
        out = schedule()
        tokens = sum(len(ids) for ids in out.scheduled_cached_reqs.new_token_ids)
        if tokens:
            sent.extend((SCHEDULER, _stage(rank), 8 * tokens) for rank in non_last)
        return out

    scheduler.schedule = counted


def count_handover(design: str, workload: Workload = Workload(), model=DEFAULT_TARGET) -> DesignCost:
    """Run ``workload`` in one process on ``design`` and count its hand-over's messages."""
    design = get_design(design).name
    llm = LLM(model=model, max_concurrent_batches=2, **workload.engine(design))  # as time_over_mp's two in flight
    sent: list[tuple[str, str, int]] = []
    if not llm.config.design.binds_pp_group:  # the scheduler tells the non-last stages
        _count_relay(llm, sent)
    for handler in (getattr(r, "pp_handler", None) for r in llm.engine.executor.runners):
        if handler is not None:  # a design on V2's slots: its handler's group (model_runner_base.py)
            handler.group = _Counting(handler.group, sent)
    prompts = workload.prompts()
    params = SamplingParams(temperature=0, max_tokens=workload.max_tokens, ignore_eos=True)
    llm.generate(prompts, params, arrival_steps=[i % 2 for i in range(len(prompts))])
    messages, nbytes = Counter(), Counter()
    for sender, receiver, size in sent:
        messages[f"{sender} -> {receiver}"] += 1
        nbytes[f"{sender} -> {receiver}"] += size
    return DesignCost(design, llm.stats()["target_forwards"], dict(messages), dict(nbytes))


def time_over_mp(cost: DesignCost, workload: Workload = Workload(), model=DEFAULT_TARGET, rounds: int = 1,
                 budget_s: float | None = None) -> DesignCost:
    """Add the "mp" step time and batch-queue overlap to ``cost`` (the pipeline benchmark's
    ``compare_in_flight``, the same workload and engine)."""
    engine = workload.engine(cost.design)
    comparison = compare_in_flight(model, workload.prompts(), workload.max_tokens, rounds, budget_s=budget_s,
                                   engine=engine)
    if comparison.stopped:
        raise KeyboardInterrupt(comparison.stopped)
    cost.seconds, cost.overlap, cost.load = min(comparison.runs[2].seconds), comparison.ratio, comparison.load_before
    return cost


def compare_designs(workload: Workload = Workload(), model=DEFAULT_TARGET, rounds: int = 1,
                    over_mp: bool = True) -> list[DesignCost]:
    """Every design on ``workload``: counted in one process, then (``over_mp``) timed over "mp"."""
    costs = [count_handover(design, workload, model) for design in DESIGNS]
    if over_mp:
        costs = [time_over_mp(cost, workload, model, rounds) for cost in costs]
    return costs


__all__ = ["DesignCost", "Workload", "compare_designs", "count_handover", "time_over_mp"]
