"""``python -m minispec explore``: the smallest schedule that breaks a runner design (vLLM 0.30.0:
``vllm/entrypoints/cli``, which has no such subcommand; the explorer is minispec's,
``minispec.lab.explorer.explorer``).

Under ``--fixes``, ``--faults``, ``--model-runner`` and ``--worker-cls`` (any switch ``LLM``
takes; the last, a runner from outside minispec by its qualified name), it runs every
schedule of the default scope (``explorer.DEFAULT``, cut by ``--max-requests``, ``--pp``, ``-k``,
``--async-scheduling on|off``) smallest first, then ``--then-search`` random ones from a wider
scope, and prints the first that breaks, as a step table, or "nothing breaks" with the scope, the
number of schedules and the conditions they never exercised. ``--search N`` draws N random
schedules from a wider scope instead (hypothesis) and shrinks the first failure.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from minispec.entrypoints.cli.types import design_name, int_from

NAME = "explore"


def cmd(args: argparse.Namespace) -> None:
    from minispec.lab.explorer.explorer import DEFAULT, WIDE, explore, for_design, search
    from minispec.lab.viz.exploration import render_exploration

    design = {"fixes": args.fixes, "faults": args.faults, "model_runner": args.model_runner,
              "worker_cls": args.worker_cls}
    design = {k: v for k, v in design.items() if v is not None}
    async_scheduling = {"on": (True,), "off": (False,), "both": (False, True)}[args.async_scheduling]
    if args.search:
        result = search(design, for_design(replace(WIDE, async_scheduling=async_scheduling), design),
                        max_examples=args.search)
    else:
        scope = replace(DEFAULT, max_requests=args.max_requests, pipeline_parallel_size=tuple(args.pp),
                        num_speculative_tokens=tuple(args.k), async_scheduling=async_scheduling,
                        right_drafts=tuple(n for n in DEFAULT.right_drafts if n <= min(args.k)))
        scope = for_design(scope, design)  # a design that refuses scripted drafts gets its own
        result = explore(design, scope, limit=args.limit, workers=args.workers, search_examples=args.then_search)
    print(render_exploration(result))


def subparser_init(subparsers) -> argparse.ArgumentParser:
    from minispec.v1.worker.runner_fixes import Preset

    p = subparsers.add_parser(NAME, help="find the smallest schedule that breaks a runner design (the explorer)")
    p.add_argument("--fixes", choices=sorted(Preset), default=None, help="V1's preset (default: all)")
    p.add_argument("--faults", default=None, help="a 2026 fault preset (Model Runner V2's)")
    p.add_argument("--model-runner", type=design_name, default=None, metavar="DESIGN",
                   help="a registered runner design (minispec.v1.worker.designs.DESIGNS; default v1)")
    p.add_argument("--worker-cls", default=None, metavar="MODULE.CLASS",
                   help="a runner design from outside minispec (a WorkerBase subclass), as vLLM's --worker-cls")
    p.add_argument("--async-scheduling", nargs="?", choices=["on", "off", "both"], const="on", default="both",
                   help="async scheduling (vLLM's; invariants restated for it): on (alone, the flag), off, "
                        "or both (default)")
    p.add_argument("--max-requests", type=int_from(1), default=2)
    p.add_argument("--pp", type=int_from(1), nargs="+", default=[2, 3], help="pipeline sizes to run")
    p.add_argument("-k", type=int_from(1), nargs="+", default=[3], help="drafts per step, each value run")
    p.add_argument("--workers", type=int_from(1), default=1, help="processes sharing the runs")
    p.add_argument("--limit", type=int_from(1), default=None, help="stop after this many schedules")
    p.add_argument("--then-search", type=int_from(0), default=100, metavar="N",
                   help="if the scope runs clean, N random schedules from a wider scope after it (0: none)")
    p.add_argument("--search", type=int_from(1), default=None, metavar="N",
                   help="instead: N random schedules from a wider scope (hypothesis), the failure shrunk")
    return p
