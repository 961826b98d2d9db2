"""Command line: ``python -m minispec {check,demo,explore,generate,gpu-check,replay}`` (vLLM 0.30.0:
``vllm/entrypoints/cli/main.py``; vLLM's is the ``vllm`` command, and only ``generate`` has a
counterpart there, as offline ``LLM.generate``).

* ``check``: the set-up check a learner runs before a workshop; it prints no exercise answer.
* ``demo``: the forum thread's scenario before and after the fixes, its figures, and the
  shipped target with and without the shipped draft model.
* ``explore``: the smallest schedule that breaks a runner design (the explorer), or
  "nothing breaks" with the scope and the number of schedules run.
* ``generate``: one or more prompts with any engine option.
* ``gpu-check``: the first run on a GPU (``make gpu-check``): both runner designs, both
  executors, on ``cuda`` against the CPU. Without CUDA it prints one line and exits 0.
* ``replay``: the forum thread's scenario under a preset, buffers step by step.

One module per subcommand, as vLLM has (``main`` 55-62 lists them): each gives
``subparser_init(subparsers)``, which adds its parser, and ``cmd(args)``, which runs it --
the two methods of vLLM's ``CLISubcommand`` (``types.py`` 12-29). Subcommands import the
engine and the lab only when they run, so the parser itself is quick.
Left out: ``--version``, vLLM's subcommands (``serve``, ``bench``, ...).
"""

from __future__ import annotations

import argparse
import sys

from minispec.entrypoints.cli import check, demo, explore, generate, gpu_check, replay

CMD_MODULES = (check, demo, explore, generate, gpu_check, replay)


class _Parser(argparse.ArgumentParser):
    """Errors as one line, ``minispec: error: ...``, exit status 2 (argparse's)."""

    def error(self, message):
        sys.stderr.write(f"minispec: error: {message}\n")
        sys.exit(2)


def main(argv=None) -> None:
    parser = _Parser(prog="python -m minispec", description=__doc__.split("\n\nOne module")[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in CMD_MODULES:
        module.subparser_init(subparsers).set_defaults(dispatch_function=module.cmd)
    args = parser.parse_args(argv)
    try:
        args.dispatch_function(args)
    except (ValueError, FileNotFoundError) as e:
        # Raised by the engine's checks, which all run before any work (a run
        # itself raises neither).
        parser.error(str(e))
