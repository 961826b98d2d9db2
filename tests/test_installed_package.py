"""What ``pip install minispec`` ships: the lessons and the engine, not the harness that runs vLLM.

The reference harness (``reference/``, ``make vllm-check``) builds virtual environments
and runs pip to fetch vLLM releases; a learner never needs it, so it lives beside the
package and ``pyproject.toml`` installs only ``minispec*``. This holds every module under
``minispec/`` to that: none starts ``python -m pip`` or ``python -m venv`` (or imports the
modules that build environments). The check is planted on the harness itself: its two
modules that do both must be caught. What it does not see: pip started through a string
built at run time, or through a shell command line.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILDERS = {"pip", "venv", "ensurepip", "virtualenv"}


def _constants(node: ast.AST) -> list[str]:
    """A call's positional arguments as strings, lists and tuples flattened; others as ''."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _constants(e)]
    return [node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""]


def builds_environments(source: str) -> list[tuple[int, str]]:
    """Where ``source`` runs ``-m pip``/``-m venv`` or imports an environment builder: (its line, what)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            args = [s for a in node.args for s in _constants(a)]
            found += [(node.lineno, f"-m {b}") for a, b in zip(args, args[1:]) if a == "-m" and b in BUILDERS]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [(node.lineno, f"import {n}") for n in names if n.split(".")[0] in BUILDERS]
    return found


def test_the_check_catches_the_harness_that_runs_pip_and_builds_environments():
    found = {what for _, what in builds_environments((ROOT / "reference/environment.py").read_text())}
    assert {"-m venv", "-m pip"} <= found  # the harness's one fetch path builds and downloads there
    assert builds_environments("import venv\nfrom pip._internal import main\n") == [
        (1, "import venv"), (2, "import pip._internal")]


def test_no_installed_module_runs_pip_or_builds_an_environment():
    found = {p.relative_to(ROOT).as_posix(): f for p in sorted((ROOT / "minispec").rglob("*.py"))
             if (f := builds_environments(p.read_text()))}
    assert found == {}, "move it to reference/ (not installed)"


def test_only_minispec_is_installed():
    """``reference/`` and ``tools/`` stay out of the wheel: setuptools finds ``minispec*`` only."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '[tool.setuptools.packages.find]\ninclude = ["minispec*"]\n' in text
    assert (ROOT / "reference" / "__init__.py").is_file() and not (ROOT / "minispec" / "lab" / "vllm_reference").exists()
