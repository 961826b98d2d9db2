"""``python -m minispec generate``: one or more prompts with any engine option (vLLM 0.30.0:
``vllm/entrypoints/cli``, which has no such subcommand; offline generation there is
``LLM.generate``, ``vllm/entrypoints/llm.py``). ``print_run`` prints a run as ``demo`` prints its runs too.
Left out: every engine argument without a flag (they are ``LLM``'s keyword arguments).
"""

from __future__ import annotations

import argparse
import time

from minispec.entrypoints.cli.types import design_name, int_from, temperature

NAME = "generate"


def print_run(title: str, llm, prompts, params) -> list[list[int]]:
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


def cmd(args: argparse.Namespace) -> None:
    from minispec import LLM, SamplingParams

    spec = {"method": args.method, "num_speculative_tokens": args.k} if args.k else None
    if args.speculative_token_tree is not None:  # its nodes are k
        spec = {"method": args.method, "speculative_token_tree": args.speculative_token_tree}
    llm = LLM(args.model, pipeline_parallel_size=args.pp, speculative_config=spec, fixes=args.fixes,
              model_runner=args.model_runner)
    params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed)
    drafts = f"tree {args.speculative_token_tree}" if args.speculative_token_tree else f"k={args.k}"
    print_run(f"pp={args.pp} {drafts} {args.method} fixes={args.fixes}", llm, args.prompts, params)


def subparser_init(subparsers) -> argparse.ArgumentParser:
    from minispec.config import DEFAULT_TARGET
    from minispec.v1.worker.runner_fixes import Preset

    p = subparsers.add_parser(NAME, help="generate from prompts")
    p.add_argument("prompts", nargs="+")
    p.add_argument("--model", default=str(DEFAULT_TARGET))
    p.add_argument("--pp", type=int_from(1), default=1, help="pipeline stages")
    p.add_argument("--method", choices=["draft_model", "ngram"], default="draft_model")
    p.add_argument("-k", type=int_from(0), default=3, help="draft tokens per step (0 = off)")
    p.add_argument("--speculative-token-tree", default=None, metavar="TREE",
                   help="vLLM's tree of drafts, e.g. '[(0,), (1,), (0, 0)]' (its nodes replace -k)")
    p.add_argument("--fixes", choices=sorted(Preset), default="all")
    p.add_argument("--model-runner", type=design_name, default=None, metavar="DESIGN",
                   help="a registered runner design (minispec.v1.worker.designs.DESIGNS; default v1)")
    p.add_argument("--temperature", type=temperature, default=0.0)
    p.add_argument("--seed", type=int_from(0), default=None)
    p.add_argument("--max-tokens", type=int_from(1), default=64)
    return p
