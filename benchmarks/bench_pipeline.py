"""What the batch queue and async scheduling buy: PP=2 on the multi-process executor,
1, 2 and pp_size + 1 batches in flight, async scheduling off and on, both runner designs.

With two stages and one batch in flight, each stage waits while the other
works, so at best half the machine is busy; with two in flight (vLLM's
``max_concurrent_batches`` = pipeline stages) stage 0 runs one batch while
stage 1 runs the other, so the ideal throughput ratio is 2.0. Each stage gets
one thread (``OMP_NUM_THREADS=1``, inherited by the worker), so the two stages
are two cores' worth of work at most.

Requests arrive as in the forum thread, half one engine step later, so decode
batches alternate between the halves (``minispec.lab.experiments.overlap.compare_in_flight``
says why, and why the token budget is half the requests; ``--together`` shows
what happens when they all arrive at once). The settings run alternately, one
round each in turn, so a load that comes and goes hits them all alike.

Async scheduling (vLLM's ``async_scheduling``) schedules the next batch while
the last is still in flight, to hide the scheduler's time behind the forward.
Each setting (``SETTINGS``) is its own pipeline made through the engine
arguments, both designs with async scheduling included (V1's under PP: its last
stage broadcasts the previous sampled tokens, ``minispec/v1/worker/pp_prev_sampled.py``).

Printed, for a random-weight Llama of a few tens of millions of parameters
(made now, in a temporary directory) and for the shipped tiny target: the
machine's load before the run and before each round, the best wall time of
each setting, the ratio against the same runner's synchronous one-in-flight
time (best and per round over ``--repeat`` rounds), and each stage's idle
fraction from the measured timeline; then the paths of the Gantt PNGs. ``--threads N`` gives
each stage N intra-op threads instead of one. ``--throughput`` adds tokens/s for
64 requests x 256 tokens, PP=2 "mp" against PP=1 in process.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from minispec import LLM, SamplingParams  # noqa: E402
from minispec.config import DEFAULT_TARGET  # noqa: E402
from minispec.lab.experiments.overlap import (  # noqa: E402
    HEAVY,
    IDEAL,
    Comparison,
    compare_in_flight,
    first_batches,
    num_params,
    random_llama,
    random_prompts,
)


@dataclass(frozen=True)
class Setting:
    """One pipeline the benchmark measures: its runner design, scheduler and batches in flight."""

    runner: str  # "v1" | "v2"
    async_scheduling: bool
    in_flight: int

    def __str__(self) -> str:
        return f"{self.runner} {'async' if self.async_scheduling else 'sync '} {self.in_flight} in flight"

    def engine_args(self) -> dict:
        return dict(model_runner=self.runner, async_scheduling=self.async_scheduling,
                    max_concurrent_batches=self.in_flight)

    @property
    def baseline(self) -> "Setting":
        """What its ratio is against: the same runner, synchronous, one batch in flight."""
        return Setting(self.runner, False, 1)


# Async on and off beside 1, 2 (= pp_size, vLLM's synchronous queue) and pp_size + 1 (Model Runner
# V2's under async) batches in flight, both designs, at PP=2.
SETTINGS = tuple(Setting(r, a, n) for r in ("v1", "v2") for a in (False, True) for n in (1, 2, 3))


def compare(model: Path, vocab: int, args, settings=SETTINGS) -> Comparison:
    """Every repeat's wall time and the last timeline of each setting."""
    ids = random_prompts(args.requests, vocab)
    result = compare_in_flight(model, ids, args.max_tokens, args.repeat, args.together, args.threads,
                               settings={s: s.engine_args() for s in settings})
    if result.stopped:
        raise SystemExit(str(result))
    return result


def ratio_line(setting: Setting, runs: dict) -> str:
    """Its best time, and the baseline's over it: best of runs, and each run's against the same round's."""
    t, base = runs[setting].seconds, runs[setting.baseline].seconds
    ratios = [b / x for b, x in zip(base, t)]
    best = min(base) / min(t)
    noise = "  (above the ideal: noise)" if best > IDEAL else ""
    return (f"best {min(t):6.3f} s   ratio {best:4.2f} (per run {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {statistics.median(ratios):.2f}){noise}")


def report(name: str, result: Comparison, out_dir: Path) -> list[Path]:
    from minispec.lab.viz.gantt import plot_gantt

    print(f"\n{name} (load {result.load_before:.1f} on {result.cores} cores before the run)")
    print(f"  ratio: the same runner's synchronous 1-in-flight time over this one's (ideal {IDEAL}, goal >= 1.85)")
    paths = []
    for setting, run in result.runs.items():
        tl = run.timeline
        idle = ", ".join(f"stage {s} {tl.idle_fraction(s):.0%}" for s in range(2))
        loads = f"load before each run {', '.join(f'{x:.1f}' for x in run.loads)}"
        print(f"  {setting}: {ratio_line(setting, result.runs)}; idle (last run) {idle}; {loads}")
        if setting.in_flight == 1 and not setting.async_scheduling or setting.in_flight == 3:
            for suffix, max_step in (("", None), ("_first_steps", first_batches(tl, 12))):
                path = out_dir / f"gantt_{name.split()[0]}_{'_'.join(str(setting).split())}{suffix}.png"
                title = f"{name.split()[0]}, {setting}{', first steps' if max_step else ''}"
                plot_gantt(tl, title=title, max_step=max_step).savefig(path, dpi=110)
                paths.append(path)
    return paths


def throughput(model: Path, vocab: int) -> None:
    ids, params = random_prompts(64, vocab), SamplingParams(temperature=0, max_tokens=256, ignore_eos=True)
    kw = dict(model=model, max_num_seqs=64, max_num_batched_tokens=1024)
    print("\ntokens/s, 64 requests x 256 tokens, heavy model")
    # Two threads last: on a busy machine OpenMP's threads can wait on each other for minutes.
    runs = [("PP=1 in process, 1 thread", dict(), 1),
            ("PP=2 mp, 1 thread per stage", dict(pipeline_parallel_size=2, distributed_executor_backend="mp"), 1),
            ("PP=1 in process, 2 threads", dict(), 2)]
    for label, extra, threads in runs:
        torch.set_num_threads(threads)
        with LLM(**kw, **extra) as llm:
            start = time.perf_counter()
            llm.generate(ids, params, arrival_steps=[i % 2 for i in range(64)])
            print(f"  {label}: {64 * 256 / (time.perf_counter() - start):.0f} tokens/s")
    torch.set_num_threads(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--together", action="store_true", help="all requests arrive at step 0")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per stage")
    parser.add_argument("--throughput", action="store_true", help="also 64 x 256 tokens, PP=2 mp vs PP=1")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "minispec-bench-pipeline")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"PP=2 'mp', {args.requests} requests x {args.max_tokens} tokens, "
          f"{'all arriving at step 0' if args.together else 'half arriving one step later'}, "
          f"{args.threads} intra-op thread{'s' * (args.threads != 1)} per stage, {args.repeat} runs each, alternating")
    print("settings: " + "; ".join(map(str, SETTINGS)))
    with tempfile.TemporaryDirectory() as tmp:
        heavy = random_llama(Path(tmp))
        name = f"heavy random Llama ({num_params(heavy) / 1e6:.0f}M parameters)"
        paths = report(name, compare(heavy, HEAVY["vocab_size"], args), args.out)
        from minispec.config import LlamaArchitecture

        tiny_vocab = LlamaArchitecture.from_pretrained(DEFAULT_TARGET).vocab_size
        paths += report("shipped tiny target", compare(DEFAULT_TARGET, tiny_vocab, args), args.out)
        print("  (the tiny target computes a stage in a millisecond or two, less than passing a batch between "
              "processes and scheduling it take, so those set the pace and overlapping compute saves little)")
        if args.throughput:
            throughput(heavy, HEAVY["vocab_size"])
    print("\nGantt charts:", *paths, sep="\n  ")


if __name__ == "__main__":
    main()
