"""A pytest plugin that runs a test session with one mutant applied: the mutation benchmark's
"project suite" column (vLLM twin: none)::

    PYTHONPATH=benchmarks python -m pytest -p mutant_plugin --mutant v2-slot-reuse -x -n 0 tests/...

The mutant (``minispec.lab.explorer.mutants``) is applied when the session is configured
and put back when it ends, in this process only: run with ``-n 0`` (xdist's workers would not
carry it), and know that an engine a test starts in other processes (the "mp" executor,
torchrun) runs unmutated code there. An engine still stepping after ``HANG`` steps raises
(``step_limit``), so a mutant that leaves a request unfinished fails the test that ran it
instead of hanging the session (pytest-timeout would do the same; it is not a dependency).
"""

from __future__ import annotations

import contextlib

from minispec.lab.explorer.mutants import applied, mutant, step_limit

HANG = 10_000  # engine steps: a hung engine raises there (no test here runs that long)

_SCOPE = "minispec_mutant_scope"


def pytest_addoption(parser):
    parser.addoption("--mutant", default=None, help="apply this mutant (minispec.lab.explorer.mutants) "
                                                  "for the whole session")


def pytest_configure(config):
    name = config.getoption("--mutant")
    if name is None:
        return
    stack = contextlib.ExitStack()
    stack.enter_context(applied(mutant(name)))
    stack.enter_context(step_limit(HANG))
    setattr(config, _SCOPE, stack)


def pytest_unconfigure(config):
    stack = getattr(config, _SCOPE, None)
    if stack is not None:
        stack.close()


def pytest_report_header(config):
    name = config.getoption("--mutant")
    return None if name is None else f"mutant applied: {name}"
