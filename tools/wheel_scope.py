"""Which of ``minispec``'s modules the wheel holds, and which serve the notebooks only.

The wheel holds what runs without a checkout: the engine and everything else outside
``minispec/lab``, its command line (``minispec/entrypoints``) among them, and the part of the lab
an engineer points at a runner of their own: the explorer and the mutation benchmark. Every
module those import, directly, inside a function, or through a part's surface
(``minispec.lab.surface``), is in the wheel too: the fault catalogue and the cited threads (the
citation table) among them.

The rest serve the notebooks alone: the exercises, the predictions and their reveals, and the
experiments, fault runs and figures only a notebook shows. The notebooks are not in the wheel, so neither is
their support: both ship in the checkout, where ``make lab`` installs the package in editable
mode and every module imports as before. ``pyproject.toml`` lists them
(``[tool.minispec.wheel] notebook-only``); ``setup.py`` leaves them out of the wheel,
``tools/package_size.py`` out of its count.

    python tools/wheel_scope.py           # the list the import graph gives, as pyproject.toml writes it
    python tools/wheel_scope.py --check   # exit 1 when pyproject.toml's list differs from it

What the graph does not see: a module loaded from a name built at run time (``importlib``
on a computed string). ``tests/test_wheel.py`` builds the wheel and runs its entry points from
it alone, which would.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from generated import ROOT

PACKAGE = "minispec"
# What of the lab runs without a notebook (see the module docstring); every other module of the
# lab is in the wheel only if one of these, or the engine, imports it.
LAB_ROOTS = ("minispec/lab/__init__.py", "minispec/lab/surface.py", "minispec/lab/explorer/")


def module_name(path: str) -> str:
    """``minispec/v1/request.py`` -> ``minispec.v1.request``; a package's ``__init__`` -> the package."""
    parts = PurePosixPath(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_root(path: str) -> bool:
    return not path.startswith(f"{PACKAGE}/lab/") or any(
        path == r or (r.endswith("/") and path.startswith(r)) for r in LAB_ROOTS)


def _surface(tree: ast.Module) -> dict[str, str]:
    """A part's surface: each exported name -> the module (relative) it comes from, read from the
    ``_SURFACE`` table its ``__init__`` hands to ``lazy_surface``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_SURFACE" for t in node.targets):
            table = ast.literal_eval(node.value)
            return {name: module for module, names in table.items() for name in names}
    return {}


class Graph:
    """The modules of ``files`` (path -> source) and what each imports, surfaces resolved."""

    def __init__(self, files: dict[str, str]):
        self.path_of = {module_name(p): p for p in files}
        self.trees = {p: ast.parse(text) for p, text in files.items()}
        self.surfaces = {module_name(p): _surface(t) for p, t in self.trees.items() if p.endswith("__init__.py")}

    def _resolve(self, dotted: str) -> str | None:
        """The module a dotted name lands in: itself, a surface's module, or its nearest module."""
        if dotted in self.path_of:
            return dotted
        parent, _, name = dotted.rpartition(".")
        if name in self.surfaces.get(parent, {}):
            return f"{parent}.{self.surfaces[parent][name]}"
        return self._resolve(parent) if parent else None

    def imports(self, path: str) -> set[str]:
        """The modules ``path`` imports anywhere in its body, and its packages (importing a module runs them)."""
        me = module_name(path)
        package = me if path.endswith("__init__.py") else me.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(self.trees[path]):
            if isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                named |= {base} | {f"{base}.{a.name}" for a in node.names}
        found = {m for n in named if (m := self._resolve(n))}
        parts = me.split(".")
        return found | {".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in self.path_of}

    def reachable(self, roots: list[str]) -> set[str]:
        """The paths of every module ``roots`` (paths) import, transitively, roots included."""
        seen, todo = set(), list(roots)
        while todo:
            path = todo.pop()
            if path not in seen:
                seen.add(path)
                todo += [self.path_of[m] for m in self.imports(path)]
        return seen


def notebook_only(files: dict[str, str]) -> list[str]:
    """The package's files no root reaches: the notebooks' support, sorted."""
    graph = Graph(files)
    reached = graph.reachable([p for p in files if is_root(p)])
    return sorted(set(files) - reached)


def declared(pyproject: str) -> list[str]:
    """``pyproject.toml``'s list of notebook-only files (``[tool.minispec.wheel] notebook-only``)."""
    return tomllib.loads(pyproject).get("tool", {}).get("minispec", {}).get("wheel", {}).get("notebook-only", [])


def is_listed(path: str, listed: list[str]) -> bool:
    """Whether ``path`` matches one of ``listed``'s entries (a path, or a glob such as ``minispec/lab/exercises/*``)."""
    return any(fnmatchcase(path, entry) for entry in listed)


def package_files(root: Path = ROOT) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted((root / PACKAGE).rglob("*.py")) if "__pycache__" not in p.parts}


def as_toml(paths: list[str]) -> str:
    return "notebook-only = [\n" + "".join(f'    "{p}",\n' for p in paths) + "]"


def differences(files: dict[str, str], listed: list[str]) -> list[str]:
    """What is wrong with ``listed`` for ``files``: one line per file listed but imported by the wheel,
    or imported by nothing the wheel runs but not listed; empty when the list is right."""
    want = set(notebook_only(files))
    have = {p for p in files if is_listed(p, listed)}
    return ([f"{p}: listed as notebook-only, but the wheel imports it: take it off the list" for p in sorted(have - want)]
            + [f"{p}: nothing the wheel runs imports it: list it as notebook-only (python tools/wheel_scope.py)"
               for p in sorted(want - have)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when pyproject.toml's list differs")
    args = parser.parse_args(argv)
    files = package_files()
    if not args.check:
        print(as_toml(notebook_only(files)))
        return 0
    found = differences(files, declared((ROOT / "pyproject.toml").read_text()))
    print("\n".join(found) or "pyproject.toml's notebook-only list is what the import graph leaves")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
