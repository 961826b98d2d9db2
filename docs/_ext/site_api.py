"""The API reference: one page per package of ``minispec`` (read by ``minispec_site``).

``docs/api.md`` states the layout rule and lists the pages: vLLM's twins first, then
minispec's own folders. Each package's page (``docs/api/<package>.md``, written here
at ``builder-inited`` and ignored by git, as autosummary writes its stubs) holds one
section per module of that package, from its docstring, with ``[source]`` links made
by ``sphinx.ext.viewcode`` (pages on the site itself, so they read offline). A page is
rewritten only when its text changes, so an unchanged package is not read again.

Above the pages, ``docs/api.md`` gets an index of the classes a reader meets first: the
engine's parts the notebooks talk about (``CORE``) and every minispec class a notebook
imports, each linked to its entry with the first sentence of its docstring. autodoc shows
only what has a docstring, so a class without one would be missing from its page: the build
stops on it instead.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import pkgutil
import re
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

OWN = ("minispec.instruments", "minispec.lab", "minispec.training")
PAGES = Path(__file__).resolve().parents[1] / "api"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
# The engine's parts every notebook talks about, whether or not one imports them.
CORE = ("minispec.entrypoints.llm.LLM", "minispec.v1.engine.core.EngineCore", "minispec.v1.core.sched.scheduler.Scheduler",
        "minispec.v1.core.kv_cache_manager.KVCacheManager", "minispec.v1.worker.gpu_input_batch.InputBatch",
        "minispec.v1.worker.gpu_input_batch.CachedRequestState")


def modules() -> list[str]:
    import minispec

    names = ["minispec"] + [m.name for m in pkgutil.walk_packages(minispec.__path__, "minispec.")]
    return sorted(n for n in names if not n.endswith("__main__"))


def packages() -> dict[str, list[str]]:
    """Each package and its modules (a package's own ``__init__`` first)."""
    names = modules()
    found = {n for n in names if importlib.util.find_spec(n).submodule_search_locations is not None}
    pages: dict[str, list[str]] = {p: [p] for p in sorted(found)}
    for name in names:
        if name not in found:
            pages[name.rsplit(".", 1)[0]].append(name)
    return pages


def module_section(name: str) -> str:
    """autodoc's section for ``name``; for a module that only runs as a script in
    another environment (e.g. inside vLLM's), its docstring, read without importing."""
    try:
        importlib.import_module(name)
    except ImportError as error:
        spec = importlib.util.find_spec(name)
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
        logger.info(f"{name}: not importable here ({error}); its docstring only")
        return (f"\n## `{name}`\n\n*Runs as a script in its own environment, so only its docstring is "
                f"shown (importing it here: `{error}`).*\n\n```{{eval-rst}}\n{doc}\n```\n")
    # A package's __all__ lists what it re-exports; each object is documented once, in the module
    # that defines it, so that a reference to it has one target (two made `Executor` ambiguous).
    reexports = "\n   :ignore-module-all:" if importlib.util.find_spec(name).submodule_search_locations else ""
    return f"\n## `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}{reexports}\n```\n"


def groups(pages: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    twins = [p for p in pages if not p.startswith(OWN)]
    return [("vLLM's twins", twins)] + [(f"minispec's own: `{own}`", [p for p in pages if p.startswith(own)])
                                         for own in OWN]


def _object(path: str):
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def notebook_classes(notebooks: Path = NOTEBOOKS) -> list[type]:
    """Every minispec class the notebooks' code imports (``from minispec... import X``), in order."""
    found = []
    for path in sorted(notebooks.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            code = "\n".join(line for line in "".join(cell["source"]).splitlines()
                             if not line.lstrip().startswith(("%", "!")))  # IPython's magics are not Python
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minispec"):
                    found += [_object(f"{node.module}.{alias.name}") for alias in node.names]
    return list(dict.fromkeys(c for c in found if inspect.isclass(c) and c.__module__.startswith("minispec")))


def first_sentence(cls: type) -> str:
    """The first sentence of the class's own docstring (a dataclass's made-up signature is none)."""
    doc = " ".join((cls.__dict__.get("__doc__") or "").split())
    if not doc or doc.startswith(f"{cls.__name__}("):
        raise ValueError(f"{cls.__module__}.{cls.__qualname__} has no docstring: autodoc would leave it out of "
                         "the API reference; say what it is and why")
    return re.split(r"(?<=\.)\s", doc, maxsplit=1)[0]


def class_index() -> str:
    """The classes a reader meets first, each linked to its entry, with what it is."""
    classes = dict.fromkeys([_object(path) for path in CORE] + notebook_classes())
    rows = [f"- {{py:class}}`{c.__name__} <{c.__module__}.{c.__qualname__}>` (`{c.__module__}`): "
            f"{first_sentence(c)}" for c in classes]
    return ("\n\n## Start here: the engine's parts and the classes the notebooks use\n\n"
            "The engine's parts first, then every class a notebook imports:\n\n" + "\n".join(rows) + "\n")


def api_contents() -> str:
    """What ``docs/api.md`` gets appended: the class index, then its pages, grouped by the layout rule."""
    return class_index() + "".join(f"\n\n```{{toctree}}\n:caption: {title}\n:maxdepth: 1\n\n" +
                   "\n".join(f"api/{p}" for p in members) + "\n```\n"
                   for title, members in groups(packages()))


def write_pages(app) -> None:
    PAGES.mkdir(exist_ok=True)
    pages = packages()
    for package, members in pages.items():
        text = f"# `{package}`\n" + "".join(module_section(n) for n in members)
        path = PAGES / f"{package}.md"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    for stale in set(PAGES.glob("*.md")) - {PAGES / f"{p}.md" for p in pages}:
        stale.unlink()
