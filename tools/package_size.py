"""How much Python the installed package holds, how much of ``minispec/v1`` is docstring, and how long its functions are.

Prints three measures of the wheel (the packages ``pyproject.toml``'s ``packages.find`` includes, as
setuptools finds them, namespace folders too, less the notebooks' support ``setup.py`` leaves out):

- lines of Python by folder (every line of every ``.py`` file, blank ones and comments included, as
  ``wc -l`` counts them), one row per ``minispec/<folder>`` and per ``minispec/lab/<layer>``;
- the docstring share of ``minispec/v1``: the lines of module, class and function docstrings (from the
  line the string opens on to the line it closes on, as ``ast`` places it) over all lines of its files;
- the median function size: lines from ``def`` to the function's last line, its docstring left out
  (so moving prose out of a docstring does not move it), over every function and method of the wheel;
  the median with docstrings is printed beside it.

With ``--before REV`` it prints the same for the git revision ``REV`` first (read with ``git show``,
the working tree untouched), then the working tree, then what changed by folder.

    python tools/package_size.py                 # the working tree
    python tools/package_size.py --before main   # main first, then the working tree
"""

from __future__ import annotations

import argparse
import ast
import statistics
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from generated import ROOT
from wheel_scope import declared, is_listed

PACKAGE = "minispec"
LAB = f"{PACKAGE}/lab"
DOCSTRING_AREA = f"{PACKAGE}/v1"

Reader = Callable[[str], str]  # a file's path in the repository -> its text


@dataclass(frozen=True)
class Size:
    by_folder: dict[str, int]  # "minispec/v1", "minispec/lab/viz", "minispec (top level)" -> lines
    docstring_lines: int  # in DOCSTRING_AREA
    area_lines: int  # all lines in DOCSTRING_AREA
    function_sizes: tuple[int, ...]  # every function of the wheel, docstring left out
    function_spans: tuple[int, ...]  # the same functions, docstring included

    @property
    def total(self) -> int:
        return sum(self.by_folder.values())

    @property
    def docstring_share(self) -> float:
        return self.docstring_lines / self.area_lines if self.area_lines else 0.0

    @property
    def median_function(self) -> float:
        return statistics.median(self.function_sizes) if self.function_sizes else 0.0

    @property
    def median_span(self) -> float:
        return statistics.median(self.function_spans) if self.function_spans else 0.0


def wheel_packages(pyproject: str, folders: list[str]) -> set[str]:
    """The folders (``minispec/v1/worker``) whose ``.py`` files the wheel holds: every folder under a
    package root whose dotted name ``packages.find``'s ``include`` patterns match (namespace folders
    too, as setuptools' pyproject default finds them) and its ``exclude`` patterns do not."""
    from fnmatch import fnmatchcase

    find = tomllib.loads(pyproject)["tool"]["setuptools"]["packages"]["find"]
    include, exclude = find.get("include", ["*"]), find.get("exclude", [])
    dotted = {f: f.replace("/", ".") for f in folders}
    return {f for f, d in dotted.items()
            if any(fnmatchcase(d, p) for p in include) and not any(fnmatchcase(d, p) for p in exclude)}


def wheel_files(names: list[str], pyproject: str) -> list[str]:
    """The ``.py`` files among the repository's ``names`` the wheel holds: those of its packages, less
    the notebooks' support that ``setup.py`` leaves out (``tools/wheel_scope.py``)."""
    folders = sorted({str(PurePosixPath(n).parent) for n in names if n.endswith(".py")})
    packages, listed = wheel_packages(pyproject, folders), declared(pyproject)
    return sorted(n for n in names if n.endswith(".py") and str(PurePosixPath(n).parent) in packages
                  and not is_listed(n, listed))


def folder_of(name: str) -> str:
    """The row a file counts in: ``minispec/lab/<layer>`` inside the lab, else ``minispec/<folder>``,
    and ``<package> (top level)`` for a file directly in ``minispec`` or ``minispec/lab``."""
    parts = PurePosixPath(name).parts
    if parts[:2] == ("minispec", "lab"):
        return f"{LAB}/{parts[2]}" if len(parts) > 3 else f"{LAB} (top level)"
    return f"{PACKAGE}/{parts[1]}" if len(parts) > 2 else f"{PACKAGE} (top level)"


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    holders = [tree] + [n for n in ast.walk(tree)
                        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    found = []
    for holder in holders:
        body = holder.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            found.append(body[0].value)
    return found


def docstring_lines(text: str) -> int:
    """Lines that module, class and function docstrings span in ``text``."""
    return sum(n.end_lineno - n.lineno + 1 for n in _docstring_nodes(ast.parse(text)))


def function_sizes(text: str) -> list[tuple[int, int]]:
    """Each function's lines from ``def`` to its end: less its docstring's lines, and in all."""
    sizes = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = node.end_lineno - node.lineno + 1
            first = node.body[0]
            doc = first.end_lineno - first.lineno + 1 if isinstance(first, ast.Expr) \
                and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str) else 0
            sizes.append((span - doc, span))
    return sizes


def line_count(text: str) -> int:
    """Lines as ``wc -l`` counts them, plus a last line without its newline."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def measure(names: list[str], read: Reader) -> Size:
    by_folder: dict[str, int] = {}
    doc = area = 0
    functions: list[tuple[int, int]] = []
    for name in wheel_files(names, read("pyproject.toml")):
        text = read(name)
        lines = line_count(text)
        by_folder[folder_of(name)] = by_folder.get(folder_of(name), 0) + lines
        functions += function_sizes(text)
        if name.startswith(DOCSTRING_AREA + "/"):
            area += lines
            doc += docstring_lines(text)
    return Size(by_folder, doc, area, tuple(f[0] for f in functions), tuple(f[1] for f in functions))


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def at_revision(rev: str) -> Size:
    """The measures of the files committed at ``rev``."""
    names = _git("ls-tree", "-r", "--name-only", rev).split("\n")
    return measure([n for n in names if n], lambda name: _git("show", f"{rev}:{name}"))


def working_tree() -> Size:
    """The measures of the tracked and untracked (not ignored) files as they are on disk."""
    names = _git("ls-files", "--cached", "--others", "--exclude-standard").split("\n")
    present = [n for n in names if n and (ROOT / n).is_file()]
    return measure(present, lambda name: (ROOT / name).read_text(encoding="utf-8"))


def report(title: str, size: Size) -> str:
    lab = {f: n for f, n in size.by_folder.items() if f.startswith(LAB)}
    rest = {f: n for f, n in size.by_folder.items() if not f.startswith(LAB)}
    rows = [title, f"  lines of Python in the wheel: {size.total:,}",
            f"    {LAB + ' (all)':<34} {sum(lab.values()):>6,}"]
    rows += [f"      {f:<32} {n:>6,}" for f, n in sorted(lab.items(), key=lambda item: -item[1])]
    rows += [f"    {f:<34} {n:>6,}" for f, n in sorted(rest.items(), key=lambda item: -item[1])]
    rows.append(f"  docstrings of {DOCSTRING_AREA}: {size.docstring_lines:,} of {size.area_lines:,} lines "
                f"= {100 * size.docstring_share:.1f} % (module, class and function docstrings, opening to "
                f"closing line, over all lines)")
    rows.append(f"  median function size: {size.median_function:g} lines over {len(size.function_sizes):,} "
                f"functions (def to last line, docstring left out; {size.median_span:g} with it)")
    return "\n".join(rows)


def changes(before: Size, after: Size) -> str:
    rows = ["change by folder (before -> after)"]
    for folder in sorted(set(before.by_folder) | set(after.by_folder)):
        a, b = before.by_folder.get(folder, 0), after.by_folder.get(folder, 0)
        if a != b:
            rows.append(f"    {folder:<34} {a:>6,} -> {b:>6,} ({b - a:+,})")
    rows.append(f"    {'total':<34} {before.total:>6,} -> {after.total:>6,} ({after.total - before.total:+,})")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", help="print the git revision REV's measures first, then compare")
    args = parser.parse_args(argv)
    after = working_tree()
    if args.before:
        try:
            before = at_revision(args.before)
        except subprocess.CalledProcessError as error:
            raise SystemExit(f"--before: expected a git revision of this repository, got {args.before!r} "
                             f"({error.stderr.strip()})") from None
        print(report(f"before ({args.before})", before))
        print(report("after (working tree)", after))
        print(changes(before, after))
    else:
        print(report("working tree", after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
