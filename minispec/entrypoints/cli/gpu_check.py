"""``python -m minispec gpu-check``: the first run on a GPU, as one command (vLLM 0.30.0:
``vllm/entrypoints/cli``, which has no such subcommand; ``make gpu-check`` runs it).

Greedy generation with draft tokens on ``cuda`` for every design it can build: every registered
runner design (``minispec.v1.worker.designs.DESIGNS``: V1's ``GPUModelRunner``, Model Runner V2,
the relay, replicated drafting, and any registered since; a design whose record refuses a draft
model drafts with n-grams), or those ``--model-runner`` names, both executors ("uni" and "mp"), and
three stage layouts (1 stage, 2 stages on one GPU, 2 stages on two GPUs where there are two).
Each run is compared token for token with the CPU's greedy tokens without drafts, and its
tokens/s printed beside the same run's on the CPU. A difference that greedy decoding without
drafts on the GPU shares is the GPU's rounding (a note); any other is a failure (exit status 1).
Without CUDA it prints one line and exits 0. Left out: torchrun (it needs a launcher).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from minispec.entrypoints.cli.demo import DEMO_PROMPTS
from minispec.entrypoints.cli.types import OK, Outcome, Verdict, design_name, int_from

NAME = "gpu-check"


@dataclass(frozen=True)
class GpuCase:
    label: str
    stages: int
    device: str | None  # LLM(device=...): "cuda:0" puts every stage there; None puts stage i on cuda:i
    gpus: int  # how many GPUs it needs


GPU_CASES = (GpuCase("1 stage", 1, "cuda:0", 1), GpuCase("2 stages on one GPU", 2, "cuda:0", 1),
             GpuCase("2 stages on two GPUs", 2, None, 2))
GPU_BACKENDS = ("uni", "mp")
GPU_DRAFTS = {"method": "draft_model", "num_speculative_tokens": 3}
NGRAM_DRAFTS = {"method": "ngram", "num_speculative_tokens": 3}  # for a design that refuses a model (replicated drafting)


@dataclass(frozen=True)
class GpuRun:
    """One run gpu-check makes: a runner design, an executor, a stage layout."""

    model_runner: str
    backend: str
    case: GpuCase
    skip: str | None  # why it is skipped on this machine, or None

    @property
    def drafts(self) -> dict:
        """The draft model where the design accepts one (its record), else n-gram drafts."""
        from minispec.v1.worker.designs import DESIGNS

        return GPU_DRAFTS if DESIGNS[self.model_runner].accepts(GPU_DRAFTS["method"]) else NGRAM_DRAFTS

    @property
    def title(self) -> str:
        method = "draft model" if self.drafts["method"] == "draft_model" else "n-gram"
        return f"{self.model_runner} {self.backend:<3} {self.case.label}, {method} k={self.drafts['num_speculative_tokens']}"


def gpu_plan(num_gpus: int, designs: tuple[str, ...] | None = None) -> list[GpuRun]:
    """Every run gpu-check makes, for ``designs`` (None: every registered design), with why it is
    skipped where this machine has too few GPUs."""
    from minispec.v1.worker.designs import DESIGNS

    return [GpuRun(runner, backend, case,
                   None if num_gpus >= case.gpus else f"needs {case.gpus} GPUs, this machine has {num_gpus}")
            for runner in (designs or tuple(DESIGNS)) for backend in GPU_BACKENDS for case in GPU_CASES]


@dataclass(frozen=True)
class Measured:
    tokens: list[list[int]]  # per prompt
    tokens_per_s: float


def measure(params, stages: int = 1, device: str | None = "cpu", backend: str = "uni", drafts: dict | None = None,
            prompts=tuple(DEMO_PROMPTS), model_runner: str | None = None) -> Measured:
    """Greedy tokens and throughput of one configuration, timed after a short warm-up run."""
    from minispec import LLM, SamplingParams

    with LLM(pipeline_parallel_size=stages, device=device, distributed_executor_backend=backend,
             speculative_config=drafts, model_runner=model_runner) as llm:
        llm.generate(list(prompts[:1]), SamplingParams(temperature=0, max_tokens=4))  # kernels, caches, workers
        start = time.perf_counter()
        outputs = llm.generate(list(prompts), params)
        seconds = time.perf_counter() - start
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    return Measured(tokens, sum(map(len, tokens)) / seconds)


def gpu_verdict(got: list[list[int]], cpu: list[list[int]], gpu_plain: list[list[int]]) -> Outcome:
    """Equal to the CPU reference; or different only where the GPU without drafts differs too."""
    from minispec.lab.experiments.metrics import first_divergence

    for i, (tokens, reference, plain) in enumerate(zip(got, cpu, gpu_plain)):
        if (position := first_divergence(tokens, reference)) is None:
            continue
        if tokens == plain:
            return Outcome(Verdict.NOTE, f"prompt {i} differs from the CPU at token {position}, as greedy decoding "
                           "without drafts on the GPU does: the GPU rounds differently, the engine agrees with itself")
        return Outcome(Verdict.FAIL, f"prompt {i} differs from the CPU reference at token {position}: "
                       f"{tokens[position:position + 5]} where the CPU has {reference[position:position + 5]}")
    return OK


def _no_cuda() -> str:
    import torch

    build = (f"torch {torch.__version__} is a CPU-only build" if torch.version.cuda is None
             else f"torch {torch.__version__} is built for CUDA {torch.version.cuda} but sees no GPU")
    return f"gpu-check: skipped, no CUDA device ({build}); nothing was run"


def _gpu_run(run: GpuRun, params, cpu: Measured, plain: Measured) -> tuple[Outcome, str]:
    """One configuration on cuda and on the CPU: its verdict, and the two throughputs."""
    case = run.case
    try:
        on_gpu = measure(params, case.stages, case.device, run.backend, run.drafts, model_runner=run.model_runner)
        on_cpu = measure(params, case.stages, "cpu", run.backend, run.drafts, model_runner=run.model_runner)
    except Exception as e:  # a first run fails in ways no one can list: say which run, and go on
        return Outcome(Verdict.FAIL, f"{type(e).__name__}: {e}"), ""
    speed = f"{on_gpu.tokens_per_s:.0f} tokens/s on cuda, {on_cpu.tokens_per_s:.0f} on the CPU"
    return gpu_verdict(on_gpu.tokens, cpu.tokens, plain.tokens), speed


def cmd(args: argparse.Namespace) -> None:
    """Each run prints one line, ok, a note, skip or what failed; the exit status is 1 if any failed."""
    import torch

    from minispec import SamplingParams

    if not torch.cuda.is_available():
        print(_no_cuda())
        return
    torch.set_num_threads(1)  # as in check: the CPU figures with one thread, the tiny models' best
    n = torch.cuda.device_count()
    print(f"gpu-check: torch {torch.__version__}, CUDA {torch.version.cuda}, {n} GPU{'s' if n > 1 else ''}: "
          + ", ".join(torch.cuda.get_device_name(i) for i in range(n)))
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    cpu, plain = measure(params), measure(params, device="cuda:0")
    print(f"reference: greedy without drafts, 1 stage, {len(DEMO_PROMPTS)} prompts x {args.max_tokens} tokens: "
          f"{cpu.tokens_per_s:.0f} tokens/s on the CPU, {plain.tokens_per_s:.0f} on cuda:0")
    failed = 0
    for run in gpu_plan(n, tuple(args.model_runner) if args.model_runner else None):
        if run.skip:
            print(f"skip {run.title}: {run.skip}")
            continue
        outcome, speed = _gpu_run(run, params, cpu, plain)
        failed += outcome.verdict is Verdict.FAIL
        print(f"{outcome.verdict.value} {run.title}: {outcome.detail or 'greedy equal to the CPU'}"
              + (f"; {speed}" if speed else ""))
    print("gpu-check passed" if not failed else f"gpu-check: {failed} run(s) failed")
    if failed:
        sys.exit(1)


def subparser_init(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help="greedy equality and tokens/s on cuda, against the CPU (make gpu-check)")
    p.add_argument("--max-tokens", type=int_from(1), default=64)
    p.add_argument("--model-runner", type=design_name, nargs="+", default=None, metavar="DESIGN",
                   help="the runner designs to check (default: every registered design)")
    return p
