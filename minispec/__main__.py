"""Command line: ``python -m minispec {check,demo,explore,generate,gpu-check,replay}`` (vLLM's own is the
``vllm`` command, ``vllm/entrypoints/cli/main.py``; only ``generate`` has a
counterpart there, as offline ``LLM.generate``).

* ``demo``: the forum thread's scenario, before (``vllm-0.9.2``) and after (``all``)
  at batch_0's first decode, the presets against plain greedy decoding, the same
  figures as PNG files; then the shipped target, greedy, without and with the
  shipped draft model (both texts, tokens per target forward, time taken).
* ``check``: the set-up check a learner runs before a workshop. It proves the install
  works (greedy generation with 2 stages and drafts equal to 1 stage, and both to a
  stored reference; a figure saved; JupyterLab and its widgets importable) and prints
  no exercise answer: no draft tokens, no acceptance rates.
* ``explore``: the smallest schedule that breaks a runner design (``--fixes``, ``--faults``,
  ``--model-runner``), or "nothing breaks" with the scope and the number of schedules run
  (``minispec.lab.explorer``; ``--search N`` for random schedules beyond the scope).
* ``generate``: one or more prompts with any engine option.
* ``gpu-check``: the first run on a GPU, as one command (``make gpu-check``). Greedy
  generation with draft tokens on ``cuda`` -- 1 stage, 2 stages on one GPU, 2 stages
  on two GPUs where there are two -- with both executors ("uni" and "mp"), each
  compared token for token with the CPU's greedy tokens without drafts, and its
  tokens/s printed beside the same run's on the CPU. A difference that greedy
  decoding without drafts on the GPU shares is the GPU's rounding (a note); any
  other is a failure (exit status 1). Without CUDA it prints one line and exits 0.
* ``replay``: the forum thread's scenario under a preset, buffers step by step.
"""

from __future__ import annotations

import argparse
import enum
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# `check`'s reference: the shipped target's greedy tokens for this prompt (one stage, no
# drafts), recorded with torch 2.13.0 on CPU; the test suite proves the engine's greedy
# tokens equal transformers'. Speculative decoding must give the same tokens.
CHECK_PROMPT, CHECK_TOKENS = "The import statement ", [
    74, 84, 3, 66, 3, 84, 70, 82, 86, 70, 79, 68, 70, 3, 85, 90, 81, 70, 84, 3, 85, 73, 66, 85]
DEMO_PROMPTS = ["The for statement ", "A class definition ", "Exceptions are ", "The import statement "]


def _print_run(title: str, llm, prompts, params) -> list[list[int]]:
    """Generate, print each text, tokens per forward, acceptance and time; return the token ids per prompt."""
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    seconds = time.perf_counter() - start
    stats = llm.stats()
    print(f"== {title}")
    for prompt, out in zip(prompts, outputs):
        print(f"{prompt!r} -> {out.outputs[0].text!r}")
    print(f"tokens per target forward {stats['tokens_per_forward']:.2f}, acceptance "
          f"{stats['acceptance_rate']:.0%}, {stats['generated_tokens']} tokens in {seconds:.2f} s\n")
    return [o.outputs[0].token_ids for o in outputs]


def _thread(out) -> None:
    """The thread's scenario under each preset: text before/after, table, figures."""
    from minispec.config import DEFAULT_TARGET
    from minispec.lab.scenarios import BATCH_0, BATCH_1, FIRST_DECODE, batch_label, forum_thread, forum_thread_reference
    from minispec.lab.viz.text import char_decoder, render_comparison, render_step
    from minispec.transformers_utils.tokenizer import load_tokenizer
    from minispec.v1.worker.runner_fixes import PRESETS

    tokenizer = load_tokenizer(DEFAULT_TARGET)
    traces = {preset: forum_thread(preset) for preset in PRESETS}
    print(f"== The forum thread's scenario: 2 pipeline stages, draft model k=3, "
          f"{batch_label(BATCH_0)}, {batch_label(BATCH_1)}")
    for title, preset in (("before", "vllm-0.9.2"), ("after", "all")):
        print(f"-- {title}: preset {preset}, step {FIRST_DECODE} (batch_0's first decode)")
        print(render_step(traces[preset].step(FIRST_DECODE), char_decoder(tokenizer)) + "\n")
    print("== Presets against plain greedy decoding (one stage, no drafts)")
    runs = [(name, t.stats, t.outputs) for name, t in traces.items()]
    print(render_comparison(runs, forum_thread_reference()) + "\n")
    names = _save_figures(traces, Path(out), char_decoder(tokenizer, visible_spaces=True))
    print(f"figures in {Path(out).resolve()}/: {', '.join(names)}\n")


def _save_figures(traces, folder: Path, decode) -> list[str]:
    """Step 2 before and after, side by side per stage and whole; acceptance per preset."""
    from minispec.lab.scenarios import FIRST_DECODE
    from minispec.lab.viz.plots import plot_presets, plot_step_rows, plot_strip_diff

    before, after = (traces[p].step(FIRST_DECODE) for p in ("vllm-0.9.2", "all"))
    figures = {f"step{FIRST_DECODE}-vllm-0.9.2-vs-all-stage{stage}.png":
               plot_strip_diff({"vllm-0.9.2": before, "all": after}, stage, decode) for stage in (0, 1)}
    figures.update({f"step{FIRST_DECODE}-{name}.png": plot_step_rows(step, decode)
                    for name, step in (("vllm-0.9.2", before), ("all", after))})
    figures["presets-accepted-drafts.png"] = plot_presets(traces)
    folder.mkdir(parents=True, exist_ok=True)
    for name, fig in figures.items():
        fig.savefig(folder / name, dpi=110)
    return list(figures)


def demo(args) -> None:
    import torch

    from minispec import LLM, SamplingParams

    # The shipped models are tiny: a second intra-op thread costs more than it gives,
    # and on a busy 2-core machine it spins (measured: 4 s with one thread, 49 s with two).
    torch.set_num_threads(1)
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    # Both engines first, so a bad -k is refused before the first phase runs.
    target, drafting = LLM(), LLM(speculative_config={"method": "draft_model", "num_speculative_tokens": args.k})
    _thread(args.out)
    plain = _print_run("target alone", target, DEMO_PROMPTS, params)
    drafted = _print_run(f"target + draft model, k={args.k}", drafting, DEMO_PROMPTS, params)
    print("greedy output identical with and without drafts:", "yes" if plain == drafted else "NO")


class Verdict(enum.Enum):
    OK = "ok  "
    NOTE = "note"  # works, but differs from the reference machine in a way worth telling
    FAIL = "FAIL"


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    detail: str = ""


OK = Outcome(Verdict.OK)


def _check_generate() -> Outcome:
    import torch

    from minispec import LLM, SamplingParams
    from minispec.lab.metrics import first_divergence

    params = SamplingParams(temperature=0, max_tokens=len(CHECK_TOKENS))
    drafting = {"pipeline_parallel_size": 2, "speculative_config": {"method": "draft_model", "num_speculative_tokens": 3}}
    plain, drafted = (LLM(**kwargs).generate([CHECK_PROMPT], params)[0].outputs[0].token_ids for kwargs in ({}, drafting))
    if (position := first_divergence(drafted, plain)) is not None:
        return Outcome(Verdict.FAIL, f"2 stages with draft tokens differ from 1 stage at token {position}")
    if (position := first_divergence(plain, CHECK_TOKENS)) is not None:
        # Both engines agree, so the install works; another PyTorch build can round the
        # tiny model's logits differently (seen: a CUDA build of the same release on CPU).
        return Outcome(Verdict.NOTE, f"token {position} differs from the reference machine's (torch "
                       f"{torch.__version__}): printed numbers in the notebooks may differ a little")
    return OK


def _check_figure(folder: Path) -> Outcome:
    from minispec.lab.viz.map import render_map

    folder.mkdir(parents=True, exist_ok=True)
    render_map(2).savefig(folder / "map.png", dpi=80)
    return OK


def _check_import(module: str) -> Outcome:
    try:
        __import__(module)
    except ImportError as e:
        return Outcome(Verdict.FAIL, f"{e}; install the notebooks' packages: make lab in a clone, "
                       "else pip install 'minispec[lab]'")
    return OK


def check(args) -> None:
    """Each part prints one line, ok, a note or what failed; the exit status is 1 if any failed."""
    import torch

    torch.set_num_threads(1)  # as in demo: one thread is faster for the tiny models
    out = Path(args.out)
    parts = [
        ("greedy generate: 1 stage, and 2 stages with draft tokens, equal to the stored reference", _check_generate),
        (f"a figure saved ({out / 'map.png'})", lambda: _check_figure(out)),
        ("JupyterLab importable", lambda: _check_import("jupyterlab")),
        ("notebook widgets importable", lambda: _check_import("ipywidgets")),
    ]
    failed = 0
    for title, run in parts:
        try:
            outcome = run()
        except Exception as e:  # a broken install fails in ways no one can list: say which part
            outcome = Outcome(Verdict.FAIL, f"{type(e).__name__}: {e}")
        failed += outcome.verdict is Verdict.FAIL
        print(f"{outcome.verdict.value} {title}" + (f": {outcome.detail}" if outcome.detail else ""))
    print("set-up check passed: you are ready for the workshop" if not failed
          else f"set-up check: {failed} of {len(parts)} failed")
    if failed:
        sys.exit(1)


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


def gpu_plan(num_gpus: int) -> list[tuple[str, GpuCase, str | None]]:
    """(backend, case, why it is skipped or None) for every run gpu-check makes."""
    return [(backend, case, None if num_gpus >= case.gpus else f"needs {case.gpus} GPUs, this machine has {num_gpus}")
            for backend in GPU_BACKENDS for case in GPU_CASES]


@dataclass(frozen=True)
class Measured:
    tokens: list[list[int]]  # per prompt
    tokens_per_s: float


def measure(params, stages: int = 1, device: str | None = "cpu", backend: str = "uni", drafts: dict | None = None,
            prompts=tuple(DEMO_PROMPTS)) -> Measured:
    """Greedy tokens and throughput of one configuration, timed after a short warm-up run."""
    from minispec import LLM, SamplingParams

    with LLM(pipeline_parallel_size=stages, device=device, distributed_executor_backend=backend,
             speculative_config=drafts) as llm:
        llm.generate(list(prompts[:1]), SamplingParams(temperature=0, max_tokens=4))  # kernels, caches, workers
        start = time.perf_counter()
        outputs = llm.generate(list(prompts), params)
        seconds = time.perf_counter() - start
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    return Measured(tokens, sum(map(len, tokens)) / seconds)


def gpu_verdict(got: list[list[int]], cpu: list[list[int]], gpu_plain: list[list[int]]) -> Outcome:
    """Equal to the CPU reference; or different only where the GPU without drafts differs too."""
    from minispec.lab.viz.text import first_divergence

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


def _gpu_run(backend: str, case: GpuCase, params, cpu: Measured, plain: Measured) -> tuple[Outcome, str]:
    """One configuration on cuda and on the CPU: its verdict, and the two throughputs."""
    try:
        on_gpu = measure(params, case.stages, case.device, backend, GPU_DRAFTS)
        on_cpu = measure(params, case.stages, "cpu", backend, GPU_DRAFTS)
    except Exception as e:  # a first run fails in ways no one can list: say which run, and go on
        return Outcome(Verdict.FAIL, f"{type(e).__name__}: {e}"), ""
    speed = f"{on_gpu.tokens_per_s:.0f} tokens/s on cuda, {on_cpu.tokens_per_s:.0f} on the CPU"
    return gpu_verdict(on_gpu.tokens, cpu.tokens, plain.tokens), speed


def gpu_check(args) -> None:
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
    for backend, case, skip in gpu_plan(n):
        title = f"{backend:<3} {case.label}, draft model k={GPU_DRAFTS['num_speculative_tokens']}"
        if skip:
            print(f"skip {title}: {skip}")
            continue
        outcome, speed = _gpu_run(backend, case, params, cpu, plain)
        failed += outcome.verdict is Verdict.FAIL
        print(f"{outcome.verdict.value} {title}: {outcome.detail or 'greedy equal to the CPU'}"
              + (f"; {speed}" if speed else ""))
    print("gpu-check passed" if not failed else f"gpu-check: {failed} run(s) failed")
    if failed:
        sys.exit(1)

def generate(args) -> None:
    from minispec import LLM, SamplingParams

    spec = {"method": args.method, "num_speculative_tokens": args.k} if args.k else None
    llm = LLM(args.model, pipeline_parallel_size=args.pp, speculative_config=spec, fixes=args.fixes)
    params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed)
    _print_run(f"pp={args.pp} k={args.k} {args.method} fixes={args.fixes}", llm, args.prompts, params)


def replay(args) -> None:
    from minispec.lab.scenarios import forum_thread
    from minispec.lab.viz.text import char_decoder, render_trace

    trace = forum_thread(args.fixes, num_speculative_tokens=args.k, max_tokens=args.max_tokens)
    from minispec.config import DEFAULT_TARGET
    from minispec.transformers_utils.tokenizer import load_tokenizer

    print(render_trace(trace, char_decoder(load_tokenizer(DEFAULT_TARGET)), max_steps=args.steps))
    print(f"acceptance {trace.stats['acceptance_rate']:.0%}, "
          f"tokens per target forward {trace.stats['tokens_per_forward']:.2f}")


def explore(args) -> None:
    from minispec.lab.explorer import WIDE, Scope, search
    from minispec.lab.explorer import explore as run_explorer

    design = {"fixes": args.fixes, "faults": args.faults, "model_runner": args.model_runner}
    design = {k: v for k, v in design.items() if v is not None}
    if args.search:
        result = search(design, WIDE, max_examples=args.search)
    else:
        scope = Scope(max_requests=args.max_requests, pipeline_parallel_size=tuple(args.pp),
                      num_speculative_tokens=tuple(args.k))
        result = run_explorer(design, scope, limit=args.limit, workers=args.workers)
    print(result.report())


def _int_from(low: int):
    def parse(text: str) -> int:
        value = int(text)  # argparse turns a ValueError into "invalid ... value"
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: expected an integer >= {low}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def _temperature(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text}: expected a finite number >= 0")
    return value


class _Parser(argparse.ArgumentParser):
    """Errors as one line, ``minispec: error: ...``, exit status 2 (argparse's)."""

    def error(self, message):
        sys.stderr.write(f"minispec: error: {message}\n")
        sys.exit(2)


def main(argv=None) -> None:
    from minispec.config import DEFAULT_TARGET
    from minispec.v1.worker.runner_fixes import PRESETS

    parser = _Parser(prog="python -m minispec", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="the set-up check before a workshop (prints no answer)")
    p.add_argument("--out", default="minispec-check", help="folder for the figure it saves")
    p.set_defaults(func=check)

    p = sub.add_parser("demo", help="the forum thread before/after; target alone vs. target + draft model")
    p.add_argument("--out", default="minispec-demo", help="folder for the PNG figures")
    p.add_argument("--max-tokens", type=_int_from(1), default=64)
    p.add_argument("-k", type=_int_from(1), default=3)
    p.set_defaults(func=demo)

    p = sub.add_parser("generate", help="generate from prompts")
    p.add_argument("prompts", nargs="+")
    p.add_argument("--model", default=str(DEFAULT_TARGET))
    p.add_argument("--pp", type=_int_from(1), default=1, help="pipeline stages")
    p.add_argument("--method", choices=["draft_model", "ngram"], default="draft_model")
    p.add_argument("-k", type=_int_from(0), default=3, help="draft tokens per step (0 = off)")
    p.add_argument("--fixes", choices=sorted(PRESETS), default="all")
    p.add_argument("--temperature", type=_temperature, default=0.0)
    p.add_argument("--seed", type=_int_from(0), default=None)
    p.add_argument("--max-tokens", type=_int_from(1), default=64)
    p.set_defaults(func=generate)

    p = sub.add_parser("gpu-check", help="greedy equality and tokens/s on cuda, against the CPU (make gpu-check)")
    p.add_argument("--max-tokens", type=_int_from(1), default=64)
    p.set_defaults(func=gpu_check)

    p = sub.add_parser("replay", help="the forum thread's scenario, buffers per step")
    p.add_argument("--fixes", choices=sorted(PRESETS), default="vllm-0.9.2")
    p.add_argument("-k", type=_int_from(1), default=3)
    p.add_argument("--max-tokens", type=_int_from(1), default=16)
    p.add_argument("--steps", type=_int_from(1), default=6, help="how many scheduler steps to print")
    p.set_defaults(func=replay)

    p = sub.add_parser("explore", help="find the smallest schedule that breaks a runner design (the explorer)")
    p.add_argument("--fixes", choices=sorted(PRESETS), default=None, help="V1's preset (default: all)")
    p.add_argument("--faults", default=None, help="a 2026 fault preset (Model Runner V2's)")
    p.add_argument("--model-runner", choices=["v1", "v2"], default=None)
    p.add_argument("--max-requests", type=_int_from(1), default=3)
    p.add_argument("--pp", type=_int_from(1), nargs="+", default=[2], help="pipeline sizes to run")
    p.add_argument("-k", type=_int_from(1), nargs="+", default=[3], help="drafts per step, each value run")
    p.add_argument("--workers", type=_int_from(1), default=1, help="processes sharing the runs")
    p.add_argument("--limit", type=_int_from(1), default=None, help="stop after this many schedules")
    p.add_argument("--search", type=_int_from(1), default=None, metavar="N",
                   help="instead: N random schedules from a wider scope (hypothesis), the failure shrunk")
    p.set_defaults(func=explore)

    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as e:
        # Raised by the engine's checks, which all run before any work (a run
        # itself raises neither).
        parser.error(str(e))


if __name__ == "__main__":
    main()
