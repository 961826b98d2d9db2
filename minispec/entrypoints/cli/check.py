"""``python -m minispec check``: the set-up check a learner runs before a workshop (vLLM 0.30.0:
``vllm/entrypoints/cli``, which has no such subcommand; ``collect-env`` is its nearest, and only
reports). It proves the install works -- greedy generation with 2 stages and drafts equal to 1
stage, and both to a stored reference; a figure saved; JupyterLab and its widgets importable --
and prints no exercise answer: no draft tokens, no acceptance rates.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minispec.entrypoints.cli.types import OK, Outcome, Verdict

NAME = "check"
# The reference: the shipped target's greedy tokens for this prompt (one stage, no
# drafts), recorded with torch 2.13.0 on CPU; the test suite proves the engine's greedy
# tokens equal transformers'. Speculative decoding must give the same tokens.
CHECK_PROMPT, CHECK_TOKENS = "The import statement ", [
    74, 84, 3, 66, 3, 84, 70, 82, 86, 70, 79, 68, 70, 3, 85, 90, 81, 70, 84, 3, 85, 73, 66, 85]


def _check_generate() -> Outcome:
    import torch

    from minispec import LLM, SamplingParams
    from minispec.lab.experiments.metrics import first_divergence

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


def cmd(args: argparse.Namespace) -> None:
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


def subparser_init(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help="the set-up check before a workshop (prints no answer)")
    p.add_argument("--out", default="minispec-check", help="folder for the figure it saves")
    return p
