"""Which vLLM file each minispec module mirrors, and what it leaves out, read from the docstrings.

Every module outside ``instruments/``, ``lab/`` and ``training/`` names its vLLM
twin in its docstring (``tests/test_layout.py`` holds it to that), and most say
what they leave out in a sentence starting "Left out:". ``vllm_twins`` collects
both without importing the modules, so the map never drifts from the code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
OWN_FOLDERS = ("instruments", "lab", "training")
VLLM_PATH = re.compile(r"``(vllm/[\w/.]+)``")
LEFT_OUT = re.compile(r"Left out: (.+?\.)(?:\s|$)")


@dataclass(frozen=True)
class Twin:
    module: str  # path inside the package, e.g. "v1/worker/gpu_model_runner.py"
    vllm_paths: tuple[str, ...]  # every vLLM path its docstring names, in order
    left_out: str | None  # its "Left out:" sentence, if it has one


def docstring_twin(module: str, docstring: str) -> Twin:
    # a path broken across lines inside ``...`` reads as one path
    flat = " ".join(re.sub(r"/\s*\n\s*", "/", docstring).split())
    paths = tuple(dict.fromkeys(VLLM_PATH.findall(flat)))
    left_out = LEFT_OUT.search(flat)
    return Twin(module, paths, left_out.group(1) if left_out else None)


def vllm_twins(package: Path = PACKAGE) -> list[Twin]:
    """One ``Twin`` per mirrored module with a docstring (empty ``__init__`` files skipped)."""
    twins = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module.split("/")[0] in OWN_FOLDERS or module == "__main__.py":
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        if docstring and path.name != "__init__.py":
            twins.append(docstring_twin(module, docstring))
    return twins


def render_twins_markdown(twins: list[Twin]) -> str:
    """A markdown table: minispec module, the vLLM file(s) it names, what it leaves out."""
    lines = ["| minispec | vLLM (named in its docstring) | left out (its docstring's words) |", "|---|---|---|"]
    for twin in twins:
        paths = ", ".join(f"`{p}`" for p in twin.vllm_paths) or "—"
        left_out = (twin.left_out or "see its docstring").replace("``", "`").replace("|", "\\|")
        lines.append(f"| `{twin.module}` | {paths} | {left_out} |")
    return "\n".join(lines)
