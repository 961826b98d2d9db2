"""The lab's surface, grouped by job (``minispec.lab.viz``, ``.faults``, ...): the notebooks import
lab code through the parts' surfaces only, each part names what it exports, and importing a part
loads nothing heavy."""

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from minispec.lab import PARTS
from minispec.lab.surface import lazy_surface

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


SURFACES = {f"minispec.lab.{part}" for part in PARTS}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_import_lab_code_only_through_the_parts(notebook):
    assert lab_modules(notebook) <= SURFACES


def test_every_notebook_uses_a_part():  # the import cells say which parts each uses
    assert all(lab_modules(nb) for nb in NOTEBOOKS if nb.stem[:2].isdigit())


def test_the_import_check_sees_a_deep_import():
    assert imported_modules("import torch\nfrom minispec.lab.viz.text import render_step\n%matplotlib inline") == {
        "torch", "minispec.lab.viz.text"}


@pytest.mark.parametrize("part", PARTS)
def test_every_name_resolves_and_the_docstring_lists_it(part):
    surface = importlib.import_module(f"minispec.lab.{part}")
    assert surface.__all__, f"minispec.lab.{part} exports nothing"
    for name in surface.__all__:
        assert getattr(surface, name) is not None
        assert f"``{name}``" in surface.__doc__, f"{name}: exported but not listed in minispec.lab.{part}'s docstring"
    assert set(surface.__all__) <= set(dir(surface))


def test_an_unknown_name_is_refused_by_name():
    import minispec.lab.viz as viz

    with pytest.raises(AttributeError, match="'minispec.lab.viz' has no attribute 'render_steps'"):
        viz.render_steps  # noqa: B018


def test_a_name_that_a_module_would_shadow_is_refused():  # planted: viz.text's module and a name "text"
    with pytest.raises(ValueError, match=r"surface names \['text'\] are also names of its modules"):
        lazy_surface("minispec.lab.viz", {"text": ("text",)})


def test_importing_a_part_loads_nothing_heavy():
    parts = "; ".join(f"import minispec.lab.{part}" for part in PARTS)
    code = (f"import sys; {parts}; "
            "print(sorted(m for m in ('torch', 'transformers', 'matplotlib', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.strip() == "[]"
