"""A pytest plugin that runs a test session with one mutant applied: the mutation benchmark's
"project suite" column (vLLM twin: none)::

    python -m pytest -p minispec.lab.experiments.mutant_plugin --mutant v2-slot-reuse -x -n 0 tests/...

The mutant (``minispec.lab.experiments.mutants``) is applied when the session is configured
and put back when it ends, in this process only: run with ``-n 0`` (xdist's workers would not
carry it), and know that an engine a test starts in other processes (the "mp" executor,
torchrun) runs unmutated code there.
"""

from __future__ import annotations

import contextlib

from minispec.lab.experiments.mutants import applied, mutant

_SCOPE = "minispec_mutant_scope"


def pytest_addoption(parser):
    parser.addoption("--mutant", default=None, help="apply this mutant (minispec.lab.experiments.mutants) "
                                                  "for the whole session")


def pytest_configure(config):
    name = config.getoption("--mutant")
    if name is None:
        return
    stack = contextlib.ExitStack()
    stack.enter_context(applied(mutant(name)))
    setattr(config, _SCOPE, stack)


def pytest_unconfigure(config):
    stack = getattr(config, _SCOPE, None)
    if stack is not None:
        stack.close()


def pytest_report_header(config):
    name = config.getoption("--mutant")
    return None if name is None else f"mutant applied: {name}"
