"""What the batch queue buys: PP=2 on the multi-process executor, two batches in
flight against one.

With two stages and one batch in flight, each stage waits while the other
works, so at best half the machine is busy; with two in flight (vLLM's
``max_concurrent_batches`` = pipeline stages) stage 0 runs one batch while
stage 1 runs the other, so the ideal throughput ratio is 2.0. Each stage gets
one thread (``OMP_NUM_THREADS=1``, inherited by the worker), so the two stages
are two cores' worth of work at most.

Requests arrive as in the forum thread, half one engine step later, so decode
batches alternate between the halves (``minispec.lab.experiments.overlap.compare_in_flight``
says why, and why the token budget is half the requests; ``--together`` shows
what happens when they all arrive at once). The two settings run alternately on
one pipeline, so a load that comes and goes hits both alike.

Printed, for a random-weight Llama of a few tens of millions of parameters
(made now, in a temporary directory) and for the shipped tiny target: the
machine's load before the run, the best wall time of each setting, the ratio
(best and spread over ``--repeat`` runs), and each stage's idle fraction from
the measured timeline; then the paths of the Gantt PNGs. ``--threads N`` gives
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
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from minispec import LLM, SamplingParams  # noqa: E402
from minispec.config import DEFAULT_TARGET  # noqa: E402
from minispec.lab.experiments.overlap import (  # noqa: E402
    HEAVY,
    Comparison,
    compare_in_flight,
    first_batches,
    num_params,
    random_llama,
    random_prompts,
)


def compare(model: Path, vocab: int, args) -> Comparison:
    """Every repeat's wall time and the last timeline, for 2 and for 1 batch in flight."""
    ids = random_prompts(args.requests, vocab)
    result = compare_in_flight(model, ids, args.max_tokens, args.repeat, args.together, args.threads)
    if result.stopped:
        raise SystemExit(str(result))
    return result


def report(name: str, result: Comparison, out_dir: Path) -> list[Path]:
    from minispec.lab.viz.gantt import plot_gantt

    (t2, tl2), (t1, tl1) = ((result.runs[n].seconds, result.runs[n].timeline) for n in (2, 1))
    ratios = [a / b for a, b in zip(t1, t2)]
    print(f"\n{name} (load {result.load_before:.1f} on {result.cores} cores before the run)")
    print(f"  1 batch in flight : best {min(t1):.3f} s   2 in flight: best {min(t2):.3f} s")
    print(f"  ratio (1 / 2 in flight; ideal 2.0, target >= 1.6): best-of-runs {min(t1) / min(t2):.2f}, "
          f"per run {', '.join(f'{r:.2f}' for r in ratios)} (spread {max(ratios) - min(ratios):.2f}, "
          f"median {statistics.median(ratios):.2f})")
    paths = []
    for in_flight, timeline in ((2, tl2), (1, tl1)):
        idle = ", ".join(f"stage {s} {timeline.idle_fraction(s):.0%}" for s in range(2))
        print(f"  idle fraction, {in_flight} in flight (last run): {idle}")
        for suffix, max_step in (("", None), ("_first_steps", first_batches(timeline, 12))):
            path = out_dir / f"gantt_{name.split()[0]}_{in_flight}_in_flight{suffix}.png"
            title = f"{name.split()[0]}, {in_flight} in flight{', first steps' if max_step else ''}"
            plot_gantt(timeline, title=title, max_step=max_step).savefig(path, dpi=110)
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
