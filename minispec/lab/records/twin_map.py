"""Which vLLM file each minispec module mirrors, and what it leaves out, read from the docstrings.

Every module outside ``instruments/``, ``lab/`` and ``training/`` names its vLLM
twin in its docstring (``tests/test_layout.py`` holds it to that), and most say
what they leave out in a sentence starting "Left out:". ``vllm_twins`` collects
both without importing the modules, so the map never drifts from the code. The
docstrings are the one source of the twin table: the copy in ``docs/package_map.md`` is written
from them (``tools/twin_table.py``), notebook 07 renders them, and the map's
boxes (``minispec.lab.viz.map``) look their vLLM files up here.

The twin is the first vLLM path a docstring names. It is a path of vLLM
``REFERENCE`` (the release minispec mirrors) unless the docstring names another
release just before it, as in "(vLLM 0.15.0: ``vllm/v1/spec_decode/draft_model.py``)".
``reference.sources.vllm_files`` (outside the package) lists a release's files where
they are cached, so the tests can check that each twin exists in the release it names.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]
OWN_FOLDERS = ("instruments", "lab", "training")
REFERENCE = "0.9.2"
VLLM_PATH = re.compile(r"``(vllm/[\w/.]+)``")
RELEASE_BEFORE = re.compile(r"vLLM (\d+\.\d+\.\d+): $")
LEFT_OUT = re.compile(r"Left out: (.+?\.)(?:\s|$)")
# in the first sentence, the parts that only name vLLM's files: "(vLLM: ``...``)", "after ``...``"
NAMING_VLLM = re.compile(r"\s*\([^()]*``vllm/[^()]*\)|,? after ``vllm/[^`]+``(?: \([^()]*\))?")
SENTENCE_END = re.compile(r"\.(?:\s|$)")


@dataclass(frozen=True)
class Twin:
    module: str  # path inside the package, e.g. "v1/worker/gpu_model_runner.py"
    vllm_paths: tuple[str, ...]  # every vLLM path its docstring names, in order; the first is the twin
    left_out: str | None  # its "Left out:" sentence, if it has one
    release: str = REFERENCE  # the vLLM release the twin path is from
    summary: str = ""  # its docstring's first sentence, without the vLLM file names

    @property
    def vllm_path(self) -> str | None:
        return self.vllm_paths[0] if self.vllm_paths else None


def first_sentence(flat: str) -> str:
    text = NAMING_VLLM.sub("", flat)
    end = SENTENCE_END.search(text)
    return text[: end.start() + 1] if end else text


def docstring_twin(module: str, docstring: str) -> Twin:
    # a path broken across lines inside ``...`` reads as one path
    flat = " ".join(re.sub(r"/\s*\n\s*", "/", docstring).split())
    paths = tuple(dict.fromkeys(VLLM_PATH.findall(flat)))
    first = VLLM_PATH.search(flat)
    release = RELEASE_BEFORE.search(flat[max(0, first.start() - 20) : first.start()]) if first else None
    left_out = LEFT_OUT.search(flat)
    return Twin(module, paths, left_out.group(1) if left_out else None,
                release.group(1) if release else REFERENCE, first_sentence(flat))


@lru_cache(maxsize=None)
def _twins(package: Path) -> tuple[Twin, ...]:
    twins = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module.split("/")[0] in OWN_FOLDERS or module == "__main__.py":
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        if docstring and path.name != "__init__.py":
            twins.append(docstring_twin(module, docstring))
    return tuple(twins)


def vllm_twins(package: Path = PACKAGE) -> list[Twin]:
    """One ``Twin`` per mirrored module with a docstring (empty ``__init__`` files skipped)."""
    return list(_twins(package))


def twin_of(module: str) -> Twin:
    """The twin of one module of the package, e.g. ``twin_of("v1/engine/core.py")``."""
    twins = {t.module: t for t in _twins(PACKAGE)}
    if module not in twins:
        raise KeyError(f"module={module!r}: expected a mirrored module of the package, one of {sorted(twins)}")
    return twins[module]


class Column(Enum):
    """The third column of a twin table."""

    SUMMARY = "what it is (its docstring's first sentence)"
    LEFT_OUT = "left out (its docstring's words)"


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|")


def render_twins_markdown(twins: list[Twin], column: Column = Column.LEFT_OUT) -> str:
    """A markdown table: minispec module, its vLLM twin (and release), and ``column``."""
    lines = [f"| minispec | vLLM twin (release) | {column.value} |", "|---|---|---|"]
    for twin in twins:
        where = f"`{twin.vllm_path}` ({twin.release})" if twin.vllm_path else "— (minispec's own)"
        third = twin.summary if column is Column.SUMMARY else (twin.left_out or "see its docstring")
        lines.append(f"| `{twin.module}` | {where} | {_cell(third)} |")
    return "\n".join(lines)
