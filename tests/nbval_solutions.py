"""pytest plugin (pyproject's ``-p nbval_solutions``): nbval runs the exercise notebook
with the reference solutions plugged in.

The checker (``minispec.lab.exercises.checkers``) honours ``MINISPEC_PLUG_SOLUTIONS=1`` only for
exercise cells that are still the empty stub, and raises if a plugged solution fails its
check. The variable is set only while a notebook's kernel starts (nbval starts it when
the notebook's first cell is set up, and the kernel inherits this process's
environment), so the tests under ``tests/`` never see it. It lives here rather than as
``notebooks/conftest.py`` so that the notebook folder holds only notebooks.
"""

import os

import pytest
from nbval.plugin import IPyNbFile

PLUG_ENV = "MINISPEC_PLUG_SOLUTIONS"
# and every prediction's reveal shows its answer without a guess, as in the committed outputs
# (``minispec.lab.prediction``; ``make notebooks`` sets it too)
REVEAL_ENV = "MINISPEC_REVEAL"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if not isinstance(item.parent, IPyNbFile):
        return (yield)
    before = {name: os.environ.get(name) for name in (PLUG_ENV, REVEAL_ENV)}
    os.environ.update({name: "1" for name in before})
    try:
        return (yield)
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
