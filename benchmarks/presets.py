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
from minispec.corpus import split_text
from minispec.fixes import PRESETS
from minispec.scenarios import PROMPTS, forum_thread


def divergence(outputs: dict, reference: dict) -> str:
    diverged = []
    for req_id, tokens in outputs.items():
        ref = reference[req_id]
        if tokens != ref:
            pos = next((i for i, (a, b) in enumerate(zip(tokens, ref)) if a != b), min(len(tokens), len(ref)))
            diverged.append(f"{req_id}@{pos}")
    return f"{len(diverged)}/{len(outputs)}" + (f" ({', '.join(diverged)})" if diverged else "")


def row(name, stats, div) -> str:
    return (f"{name:<24} {stats['acceptance_rate']:>10.1%} {stats['tokens_per_forward']:>10.2f} "
            f"{stats['target_forwards']:>9} {div}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=["draft_model", "ngram"], default="draft_model")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    greedy = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    _, heldout = split_text()
    prompts = [heldout[211 * i : 211 * i + 20 + 3 * i] for i in range(16)]
    plain = LLM()
    ref_thread = dict(zip(PROMPTS, (o.outputs[0].token_ids for o in plain.generate(list(PROMPTS.values()), greedy))))
    ref_16 = {i: o.outputs[0].token_ids for i, o in enumerate(plain.generate(prompts, greedy))}

    print(f"{args.method}, k={args.k}, {args.max_tokens} tokens per request, 2 stages, greedy")
    print(f"{'run':<24} {'acceptance':>10} {'tok/fwd':>10} {'forwards':>9} diverged (request@position)")
    for preset in PRESETS:
        trace = forum_thread(preset, method=args.method, num_speculative_tokens=args.k, max_tokens=args.max_tokens)
        print(row(f"thread, {preset}", trace.stats, divergence(trace.outputs, ref_thread)))
        llm = LLM(pipeline_parallel_size=2, fixes=preset,
                  speculative_config={"method": args.method, "num_speculative_tokens": args.k})
        outs = llm.generate(prompts, greedy, arrival_steps=[i // 4 for i in range(16)])
        print(row(f"16 requests, {preset}", llm.stats(),
                  divergence({i: o.outputs[0].token_ids for i, o in enumerate(outs)}, ref_16)))


if __name__ == "__main__":
    main()
