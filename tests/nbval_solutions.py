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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if not isinstance(item.parent, IPyNbFile):
        return (yield)
    before = os.environ.get(PLUG_ENV)
    os.environ[PLUG_ENV] = "1"
    try:
        return (yield)
    finally:
        if before is None:
            del os.environ[PLUG_ENV]
        else:
            os.environ[PLUG_ENV] = before
