"""What the batch queue buys, measured: the same work through PP=2 "mp" with two
batches in flight and with one. Shared by ``benchmarks/bench_pipeline.py`` and
notebook 04.

The shipped target computes a stage in a millisecond or two, about what moving
a batch between processes costs, so on it overlapping compute saves little.
``random_llama`` makes a model where compute dominates: a random-weight Llama
of a few tens of millions of parameters, written to a directory the caller
owns (nothing large is committed).
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from minispec import LLM, SamplingParams
from minispec.instruments.timeline import Timeline
from minispec.lab.experiments.schedule import intra_op_threads

HEAVY = dict(vocab_size=2048, hidden_size=640, intermediate_size=1792, num_hidden_layers=10,
             num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=1024,
             tie_word_embeddings=True)


def random_llama(directory: Path, seed: int = 0, **overrides) -> Path:
    """Save a random-weight Llama checkpoint (``HEAVY``, 52M parameters, unless overridden),
    drawn with ``seed``, in ``directory``: config.json and model.safetensors as transformers
    writes them, weights drawn as transformers initialises a Llama (normal, std 0.02; norms
    one). minispec's own model names the tensors, so ``import transformers`` (over 10 s on a
    loaded laptop) stays off notebook 04's measured cell."""
    from safetensors.torch import save_file

    from minispec.config import LlamaArchitecture
    from minispec.model_executor.models.llama import LlamaForCausalLM

    sizes = {**HEAVY, **overrides}
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
              "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "torch_dtype": "float32", **sizes}
    directory = Path(directory)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    arch = LlamaArchitecture.from_pretrained(directory)
    generator = torch.Generator().manual_seed(seed)
    model = LlamaForCausalLM(arch)  # on the CPU: torch.device("meta") would import torch._dynamo (10 s)
    params = dict(model.named_parameters())
    tensors = {}
    for own, stored in model.wanted_weight_names().items():
        if stored not in tensors:  # the tied lm_head is the embedding, stored once
            weight = params[own].detach()
            tensors[stored] = weight.fill_(1.0) if weight.dim() == 1 else weight.normal_(0.0, 0.02, generator=generator)
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


def num_params(model_dir: Path) -> int:
    from safetensors import safe_open

    with safe_open(Path(model_dir) / "model.safetensors", "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def random_prompts(n: int, vocab_size: int, length: int = 12) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(3, vocab_size, (length,), generator=g).tolist() for _ in range(n)]


@contextmanager
def threads_per_stage(n: int = 1):
    """Each stage ``n`` intra-op threads: this process (stage 0) through ``intra_op_threads``,
    the spawned stages through the ``OMP_NUM_THREADS`` they inherit. One by default: on two
    shared cores a second thread per stage slows these small forwards down (see
    ``THREADS_MEASURED``)."""
    env = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(n)
    try:
        with intra_op_threads(n):
            yield
    finally:
        if env is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = env


@dataclass
class OverlapRun:
    in_flight: int
    seconds: list[float]  # wall time of each round
    loads: list[float] = field(default_factory=list)  # the 1-minute load average before each round
    timeline: Timeline | None = None  # the last round's


@dataclass(frozen=True)
class StoredResult:
    """A result measured ahead of time, shown next to a live one and labelled as such."""

    ratio: float
    when: str
    where: str
    command: str

    def __str__(self) -> str:
        return f"{self.ratio:.2f}x, measured ahead of time ({self.when}, {self.where}: `{self.command}`)"


IDEAL = 2.0  # two stages, each busy all the time: the most two batches in flight can gain

# From the batch-queue table, now in docs/executors.md (commit e3446d6): nothing else was running.
QUIET_MACHINE = StoredResult(1.70, "2026-11-30", "minispec's 2-core Linux development machine, idle, 16 requests "
                             "x 64 tokens, median of 5 runs", "python benchmarks/bench_pipeline.py --repeat 5")


# Why one intra-op thread per stage is the default (``threads_per_stage``). Measured on
# 2026-12-01 on minispec's 2-core development machine in the notebooks' real conditions:
# JupyterLab in Chromium with notebook 01's kernel open, the measurement in a second kernel,
# and other work on the machine (1-minute load average 10-11 throughout).
THREADS_MEASURED = (
    "measure_overlap(max_tokens=8, rounds=2): 1 thread per stage, best 6.05 s with 2 in flight and 5.81 s "
    "with 1; 2 threads per stage, first round 149 s and 78 s, stopped at 300 s",
    "in process, 16 requests x 128 tokens, k = 3 draft-model drafts: 1 thread 2.56-3.04 s per run (6 runs); "
    "2 threads did not finish the warm-up and 3 runs in 300 s",
)


def machine_load() -> tuple[float, int]:
    """The 1-minute load average (runnable processes, averaged) and the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return (os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")), cores


@dataclass
class Comparison:
    """Two batches in flight against one (or other settings), measured alternately."""

    runs: dict  # a setting's key (batches in flight, by default) -> its runs
    load_before: float
    cores: int
    threads: int
    stopped: str | None = None  # what Interrupt Kernel stopped, if it did

    @property
    def ratio(self) -> float:
        """Best time with one batch in flight over best time with two (ideal ``IDEAL``)."""
        return min(self.runs[1].seconds) / min(self.runs[2].seconds)

    @property
    def noise(self) -> float | None:
        """How far apart the runs of one setting were, at most: (slowest - fastest) / fastest, the
        largest over the settings; None with one run each (then nothing says how noisy it was)."""
        spreads = [max(run.seconds) / min(run.seconds) - 1 for run in self.runs.values() if len(run.seconds) > 1]
        return max(spreads) if spreads else None

    def noise_line(self) -> str:
        """The measurement's own noise, in words: how much of the ratio it can account for."""
        if self.noise is None:
            return "noise: unknown, with one run each (run the cell again to see how far a second result moves)"
        close = abs(self.ratio - 1) <= self.noise
        within = ("so a ratio this close to 1.0 is no measured gain or loss" if close
                  else "less than the ratio's distance from 1.0, so the difference is real")
        return f"noise: the runs of one setting differed by up to {self.noise:.0%} with the same work, {within}"

    def verdict(self) -> str:
        """The result in words: "faster" only when it was, and why it may not be."""
        load = f"load {self.load_before:.1f} on {self.cores} cores before the run"
        rounds = len(self.runs[2].seconds)
        best = f"best of {rounds} runs each" if rounds > 1 else "1 run each"
        if self.ratio > IDEAL:
            return (f"the batch queue finished the same work {self.ratio:.2f}x faster than one batch in flight "
                    f"({best}; {load}): more than the ideal {IDEAL}, which two stages cannot beat, so this is noise: "
                    "other work slowed the runs with one batch in flight more than those with two. Read it as "
                    "about 2x: the second stage's work was hidden almost entirely")
        if self.ratio >= 1:
            return (f"the batch queue finished the same work {self.ratio:.2f}x faster than one batch in flight "
                    f"(ideal {IDEAL}; {best}; {load})")
        return (f"the batch queue was {1 / self.ratio:.2f}x slower than one batch in flight (ratio {self.ratio:.2f}; "
                f"{best}; {load}): other work shares the cores, so the two stages could not run at the same time "
                "and two batches only added handing over between them")

    def lines(self) -> list[str]:
        if self.stopped:
            return [f"stopped: {self.stopped}; the worker process was shut down and nothing was measured.",
                    "Run the cell again to measure (under 20 s)."]
        return [self.verdict(), self.noise_line()] + [self.run_line(run) for run in self.runs.values()] + [
            f"on a quiet machine: {QUIET_MACHINE}"]

    @staticmethod
    def run_line(run: OverlapRun) -> str:
        """One setting: its times, and from its last round each stage's idle share and mean bar."""
        line = f"  {run.in_flight} in flight: best {min(run.seconds):.2f} s (runs {', '.join(f'{t:.2f}' for t in run.seconds)})"
        if run.timeline is None or not run.timeline.spans:
            return line
        spans = run.timeline.spans
        bar_ms = 1e3 * sum(s.end - s.start for s in spans) / len(spans)
        idle = ", ".join(f"stage {s} {run.timeline.idle_fraction(s):.0%}" for s in (0, 1))
        return line + f"; idle {idle}; mean bar {bar_ms:.1f} ms"

    def __str__(self) -> str:
        return "\n".join(self.lines())


IN_FLIGHT = {2: dict(max_concurrent_batches=2), 1: dict(max_concurrent_batches=1)}  # notebook 04's two settings


def compare_in_flight(model: Path, prompts: list[list[int]], max_tokens: int, rounds: int = 3,
                      together: bool = False, threads: int = 1, budget_s: float | None = None,
                      settings: dict | None = None, engine: dict | None = None) -> Comparison:
    """Generate ``prompts`` on "mp" ``rounds`` times in each of ``settings`` (a key for
    each, mapped to the engine arguments that make it: ``IN_FLIGHT``, two batches in flight and
    one, unless given), alternating. Each setting is its own pipeline, made through the engine
    arguments (``max_concurrent_batches``, ``async_scheduling``, ``model_runner``) and open for the
    whole measurement, so a load that comes and goes hits every setting alike; the best time of
    each is the one least disturbed. Interrupt Kernel stops it cleanly: the result says what was
    stopped.

    Half the requests arrive one engine step later, as in the forum thread, so
    decode batches alternate between the halves (``together`` puts them all at
    step 0: then one batch takes everything and nothing overlaps). The token
    budget is half the requests, so a batch holds the same number of tokens
    with one batch in flight as with two: on a CPU a small decode batch costs
    about the same whatever its size, and one batch of 16 against two of 8
    would measure batch size, not overlap.

    ``budget_s``: start no further round once the rounds so far took that long (at least one
    round runs), so a loaded laptop measures fewer rounds instead of taking longer. ``engine``:
    further engine arguments for every setting (a design, drafts, more stages than the default
    2: the designs' comparison, ``minispec.lab.experiments.handover``)."""
    settings = IN_FLIGHT if settings is None else settings
    args = dict(pipeline_parallel_size=2, max_num_seqs=len(prompts), max_num_batched_tokens=max(1, len(prompts) // 2))
    args |= engine or {}
    load, cores = machine_load()
    result = Comparison({key: OverlapRun(kw.get("max_concurrent_batches"), []) for key, kw in settings.items()},
                        load, cores, threads)
    arrivals = [0 if together else i % 2 for i in range(len(prompts))]
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    doing = "while the pipeline started"
    try:
        with threads_per_stage(threads), ExitStack() as stack:
            llms = {key: stack.enter_context(LLM(model=model, distributed_executor_backend="mp", **(args | kw)))
                    for key, kw in settings.items()}
            for llm in llms.values():
                llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))  # warm-up
            began = time.perf_counter()
            for i in range(rounds):
                if i and budget_s is not None and time.perf_counter() - began > budget_s:
                    break
                for key, run in result.runs.items():
                    doing = f"in round {i + 1} of {rounds}, {key}{' in flight' * isinstance(key, int)}"
                    run.loads.append(machine_load()[0])
                    run.seconds.append(_timed(llms[key], prompts, params, arrivals))
                    run.timeline = Timeline(args["pipeline_parallel_size"], clock="seconds",
                                            spans=list(llms[key].timeline().spans))
    except KeyboardInterrupt:
        result.stopped = f"Interrupt Kernel stopped the measurement {doing}"
    return result


def _timed(llm: LLM, prompts: list[list[int]], params: SamplingParams, arrivals: list[int]) -> float:
    """Seconds to generate ``prompts``; ``llm``'s timeline then holds this run only."""
    llm.timeline().spans.clear()
    start = time.perf_counter()
    llm.generate(prompts, params, arrival_steps=arrivals)
    return time.perf_counter() - start


def measure_overlap(requests: int = 16, max_tokens: int = 8, rounds: int = 3, threads: int = 1,
                    budget_s: float = 5.0, prompt_tokens: int = 4) -> Comparison:
    """Notebook 04's measurement: a ``HEAVY`` random Llama made in a temporary directory
    (200 MB, removed afterwards), then ``compare_in_flight`` on it, best of up to ``rounds``
    rounds within ``budget_s`` (issue 24: the cell fits its 20 s on a loaded laptop). Interrupt
    Kernel at any point gives a result that says what was stopped, not a traceback.

    Where its time went (2026-12-02, minispec's 2-core development machine, profiled at load 1-10):
    starting each pipeline 7-9 s (its worker process imports torch, and loading a stage imported
    torch._dynamo too, since removed: ``model_loader.get_model``), making the model 0.5-4 s, and
    each run of 16 requests x 12 prompt tokens x 12 tokens 4-15 s, half of it prefill at the 8-token
    budget. Hence short prompts (``prompt_tokens``: 8 prefill batches, not 24), 8 tokens, and a
    smaller budget. The cell as the kernel runs it, three times each, alternating, at load 9-12:
    before, 73, 39 and 40 s (15-16 s of CPU); now 22, 20 and 30 s (9-11 s of CPU)."""
    import tempfile

    load, cores = machine_load()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            heavy = random_llama(Path(tmp))
            return compare_in_flight(heavy, random_prompts(requests, HEAVY["vocab_size"], prompt_tokens), max_tokens,
                                     rounds, threads=threads, budget_s=budget_s)
    except KeyboardInterrupt:
        return Comparison({n: OverlapRun(n, []) for n in (2, 1)}, load, cores, threads,
                          stopped="Interrupt Kernel stopped the measurement while it made the model")


def first_batches(timeline: Timeline, n: int) -> int:
    """The last scheduler step among a run's first ``n`` batches (for ``plot_gantt``'s ``max_step``)."""
    return sorted({s.step for s in timeline.spans})[:n][-1]
