"""What each fix preset does to acceptance, speed and correctness.

    python benchmarks/presets.py

For every preset, two runs with two pipeline stages and greedy sampling: the
forum thread's scenario (4 requests) and 16 requests arriving in waves of four.
Printed per run: draft acceptance, tokens per target forward (per request),
target forwards, and which requests' output diverged from plain greedy decoding
(no drafts, one stage) and at which output position.
"""

from __future__ import annotations

import argparse

from minispec import LLM, SamplingParams
from minispec.lab.experiments.scenarios import PROMPTS, forum_thread
from minispec.lab.experiments.schedule import greedy_reference
from minispec.lab.viz.text import render_comparison
from minispec.training.corpus import split_text
from minispec.v1.worker.runner_fixes import Preset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=["draft_model", "ngram"], default="draft_model")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    greedy = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    _, heldout = split_text()
    prompts = [heldout[211 * i : 211 * i + 20 + 3 * i] for i in range(16)]
    ref_thread = greedy_reference(PROMPTS, args.max_tokens)
    ref_16 = greedy_reference(dict(enumerate(prompts)), args.max_tokens)

    print(f"{args.method}, k={args.k}, {args.max_tokens} tokens per request, 2 stages, greedy\n")
    thread_runs, wave_runs = [], []
    for preset in Preset:
        trace = forum_thread(preset, method=args.method, num_speculative_tokens=args.k, max_tokens=args.max_tokens)
        thread_runs.append((f"thread, {preset}", trace.stats, trace.outputs))
        llm = LLM(pipeline_parallel_size=2, fixes=preset,
                  speculative_config={"method": args.method, "num_speculative_tokens": args.k})
        outs = llm.generate(prompts, greedy, arrival_steps=[i // 4 for i in range(16)])
        wave_runs.append((f"16 requests, {preset}", llm.stats(), {i: o.outputs[0].token_ids for i, o in enumerate(outs)}))
    print(render_comparison(thread_runs, ref_thread))
    print()
    print(render_comparison(wave_runs, ref_16))


if __name__ == "__main__":
    main()
