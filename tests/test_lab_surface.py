"""The lab's one surface (``minispec.lab``): the notebooks import lab code through it
only, it names what it exports, and importing it loads nothing heavy."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import minispec.lab as lab

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def imported_modules(source: str) -> set[str]:
    """Every module a cell's code imports from (IPython's magics and shell lines dropped)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def lab_modules(notebook: Path) -> set[str]:
    cells = json.loads(notebook.read_text())["cells"]
    modules = set().union(*(imported_modules("".join(c["source"])) for c in cells if c["cell_type"] == "code"))
    return {m for m in modules if m == "minispec.lab" or m.startswith("minispec.lab.")}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_import_lab_code_only_through_the_surface(notebook):
    assert lab_modules(notebook) <= {"minispec.lab"}


def test_the_import_check_sees_a_deep_import():
    assert imported_modules("import torch\nfrom minispec.lab.viz.text import render_step\n%matplotlib inline") == {
        "torch", "minispec.lab.viz.text"}


def test_every_name_resolves_and_the_docstring_lists_it():
    for name in lab.__all__:
        assert getattr(lab, name) is not None
        assert f"``{name}``" in lab.__doc__, f"{name}: exported but not listed in minispec.lab's docstring"
    assert set(lab.__all__) <= set(dir(lab))


def test_an_unknown_name_is_refused_by_name():
    with pytest.raises(AttributeError, match="'minispec.lab' has no attribute 'forum_threads'"):
        lab.forum_threads  # noqa: B018


def test_importing_the_surface_loads_nothing_heavy():
    code = ("import sys; import minispec.lab; "
            "print(sorted(m for m in ('torch', 'transformers', 'matplotlib', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.strip() == "[]"
