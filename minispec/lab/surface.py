"""A part's surface: the names a notebook imports from one part of the lab, each loaded on first use.

Each part (``minispec.lab.viz``, ``.faults``, ...) lists in its ``__init__`` the modules it takes
names from; ``from minispec.lab.viz import render_step`` then imports ``viz.text`` and nothing
else, so a notebook's import cell loads only what it uses, and no part's ``__init__`` pulls in
torch or matplotlib.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_surface(package: str, table: dict[str, tuple[str, ...]]) -> tuple[list[str], Callable, Callable]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, whose ``table`` maps each of its
    modules (relative to it) to the names the part exports from that module."""
    module_of = {name: module for module, names in table.items() for name in names}
    clash = sorted(set(module_of) & {m.split(".")[0] for m in table})
    if clash:  # an imported submodule would shadow the name on the package
        raise ValueError(f"{package}: surface names {clash} are also names of its modules")

    def __getattr__(name: str):
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(_load(f"{package}.{module_of[name]}", name), name)
        setattr(sys.modules[package], name, value)  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(module_of))

    return sorted(module_of), __getattr__, __dir__


def _load(module: str, name: str):
    """Import ``module`` for ``name``; where the wheel left it out (the notebooks' support ships with
    the checkout: ``tools/wheel_scope.py``), say so and how to get it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        raise ImportError(f"{name} comes from {module}, which serves the notebooks and ships with them in the "
                          f"checkout, not in the wheel: clone minispec and run `make lab`, whose editable "
                          f"install imports it", name=module) from None
