"""What the subcommands share: argument types and the verdicts of the checks (vLLM 0.30.0:
``vllm/entrypoints/cli/types.py``, whose ``CLISubcommand`` base class every subcommand extends).

minispec's subcommands are plain modules with ``subparser_init(subparsers)`` and ``cmd(args)``
functions, the two methods of vLLM's ``CLISubcommand`` (``types.py`` 12-29), so this module keeps
only what several of them use: argument types that refuse a bad value in one line (a design's
name among them: every ``--model-runner`` takes the registry's names), and the
``Verdict`` that ``check`` and ``gpu-check`` print per part. Left out: the base class, ``validate``.
"""

from __future__ import annotations

import argparse
import enum
import math
from dataclasses import dataclass


def int_from(low: int):
    """An argument type: an integer >= ``low``."""
    def parse(text: str) -> int:
        value = int(text)  # argparse turns a ValueError into "invalid ... value"
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: expected an integer >= {low}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def temperature(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text}: expected a finite number >= 0")
    return value


def design_name(text: str) -> str:
    """An argument type: the name of a registered runner design (``DESIGNS``, read when the
    option is given, so the parser stays quick and a design registered before ``main`` runs counts)."""
    from minispec.v1.worker.designs import DESIGNS

    if text not in DESIGNS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a registered design, one of {list(DESIGNS)}")
    return DESIGNS[text].name


design_name.__name__ = "design name"


class Verdict(enum.Enum):
    OK = "ok  "
    NOTE = "note"  # works, but differs from the reference machine in a way worth telling
    FAIL = "FAIL"


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    detail: str = ""


OK = Outcome(Verdict.OK)
