"""``python -m minispec replay``: the forum thread's scenario under a preset, buffers step by
step (vLLM 0.30.0: ``vllm/entrypoints/cli``, which has no such subcommand).
"""

from __future__ import annotations

import argparse

from minispec.entrypoints.cli.types import int_from

NAME = "replay"


def cmd(args: argparse.Namespace) -> None:
    from minispec.config import DEFAULT_TARGET
    from minispec.lab.experiments.scenarios import forum_thread
    from minispec.lab.viz.text import char_decoder, render_trace
    from minispec.transformers_utils.tokenizer import load_tokenizer

    trace = forum_thread(args.fixes, num_speculative_tokens=args.k, max_tokens=args.max_tokens)
    print(render_trace(trace, char_decoder(load_tokenizer(DEFAULT_TARGET)), max_steps=args.steps))
    print(f"acceptance {trace.stats['acceptance_rate']:.0%}, "
          f"tokens per target forward {trace.stats['tokens_per_forward']:.2f}")


def subparser_init(subparsers) -> argparse.ArgumentParser:
    from minispec.v1.worker.runner_fixes import Preset

    p = subparsers.add_parser(NAME, help="the forum thread's scenario, buffers per step")
    p.add_argument("--fixes", choices=sorted(Preset), default="vllm-0.9.2")
    p.add_argument("-k", type=int_from(1), default=3)
    p.add_argument("--max-tokens", type=int_from(1), default=16)
    p.add_argument("--steps", type=int_from(1), default=6, help="how many scheduler steps to print")
    return p
