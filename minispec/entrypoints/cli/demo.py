"""``python -m minispec demo``: the project's demonstration (vLLM 0.30.0: ``vllm/entrypoints/cli``,
which has no such subcommand). The forum thread's scenario, before (``vllm-0.9.2``) and after
(``all``) at batch_0's first decode, the presets against plain greedy decoding, the same
figures as PNG files; then the shipped target, greedy, without and with the shipped draft model
(both texts, tokens per target forward, time taken). It gives the workshop's answers away.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minispec.entrypoints.cli.generate import print_run
from minispec.entrypoints.cli.types import int_from

NAME = "demo"
DEMO_PROMPTS = ["The for statement ", "A class definition ", "Exceptions are ", "The import statement "]


def _thread(out) -> None:
    """The thread's scenario under each preset: text before/after, table, figures."""
    from minispec.config import DEFAULT_TARGET
    from minispec.lab.experiments.scenarios import (
        BATCH_0,
        BATCH_1,
        FIRST_DECODE,
        batch_label,
        forum_thread,
        forum_thread_reference,
    )
    from minispec.lab.viz.text import char_decoder, render_comparison, render_step
    from minispec.transformers_utils.tokenizer import load_tokenizer
    from minispec.v1.worker.runner_fixes import Preset

    tokenizer = load_tokenizer(DEFAULT_TARGET)
    traces = {preset: forum_thread(preset) for preset in Preset}
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
    from minispec.lab.experiments.scenarios import FIRST_DECODE
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


def cmd(args: argparse.Namespace) -> None:
    import torch

    from minispec import LLM, SamplingParams

    # The shipped models are tiny: a second intra-op thread costs more than it gives,
    # and on a busy 2-core machine it spins (measured: 4 s with one thread, 49 s with two).
    torch.set_num_threads(1)
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    # Both engines first, so a bad -k is refused before the first phase runs.
    target, drafting = LLM(), LLM(speculative_config={"method": "draft_model", "num_speculative_tokens": args.k})
    _thread(args.out)
    plain = print_run("target alone", target, DEMO_PROMPTS, params)
    drafted = print_run(f"target + draft model, k={args.k}", drafting, DEMO_PROMPTS, params)
    print("greedy output identical with and without drafts:", "yes" if plain == drafted else "NO")


def subparser_init(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help="the forum thread before/after; target alone vs. target + draft model")
    p.add_argument("--out", default="minispec-demo", help="folder for the PNG figures")
    p.add_argument("--max-tokens", type=int_from(1), default=64)
    p.add_argument("-k", type=int_from(1), default=3)
    return p
