"""The API reference: one page per package of ``minispec`` (read by ``minispec_site``).

``docs/api.md`` states the layout rule and lists the pages: vLLM's twins first, then
minispec's own folders. Each package's page (``docs/api/<package>.md``, written here
at ``builder-inited`` and ignored by git, as autosummary writes its stubs) holds one
section per module of that package, from its docstring, with ``[source]`` links made
by ``sphinx.ext.viewcode`` (pages on the site itself, so they read offline). A page is
rewritten only when its text changes, so an unchanged package is not read again.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

OWN = ("minispec.instruments", "minispec.lab", "minispec.training")
PAGES = Path(__file__).resolve().parents[1] / "api"


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
    return f"\n## `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n```\n"


def groups(pages: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    twins = [p for p in pages if not p.startswith(OWN)]
    return [("vLLM's twins", twins)] + [(f"minispec's own: `{own}`", [p for p in pages if p.startswith(own)])
                                         for own in OWN]


def api_contents() -> str:
    """What ``docs/api.md`` gets appended: its pages, grouped by the layout rule."""
    return "".join(f"\n\n```{{toctree}}\n:caption: {title}\n:maxdepth: 1\n\n" +
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
