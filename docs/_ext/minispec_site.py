"""Sphinx hooks of the walkthrough site: what turns the repository into pages.

- The README, the landing page, gets the site's table of contents: the notebooks
  in their order (then the glossary), the guides in ``docs/``, the API reference.
  Pages that are absent (the glossary, the handout) are left out, not errors.
- Each notebook is cleaned as it is read: the ``# NBVAL_...`` lines that tell
  nbval what to compare are dropped from the code, and every linked stepper's
  output becomes the static stepper (``minispec.lab.viz.static_stepper``) with
  the frames ``tools/stepper_frames.py`` drew. A stored stepper whose stops differ
  from those frames is a warning: the notebook needs re-executing.
- Notebook headings also get the ids JupyterLab gives them, which the notebooks'
  links use (``glossary.ipynb#KV-cache``, ``#Going-deeper``).
- ``docs/api.md`` gets one section per module, from its docstring, grouped by
  the layout rule (vLLM twins, then minispec's own folders).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import re
import shutil
from pathlib import Path

import nbformat
from docutils import nodes
from sphinx.util import logging

from minispec.lab.viz.static_stepper import site_html

logger = logging.getLogger(__name__)

NBVAL = re.compile(r"^[ \t]*# NBVAL_\w+[^\n]*(\n|$)", re.MULTILINE)
STEPPER_HTML = re.compile(r'class="minispec-stepper" data-stepper="(\w+)"')
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
OWN = ("minispec.instruments", "minispec.lab", "minispec.training")
# Pages in each caption: named pages in this order, then any other page a wildcard
# finds (a new guide in docs/ appears without a change here).
TOC = [("Walkthrough", ["notebooks/0*", "notebooks/glossary", "notebooks/*"]),
       ("Workshop", ["docs/workshop", "docs/opening", "docs/handout", "docs/*"]),
       ("Reference", ["docs/api", "docs/invariants", "docs/adding_a_runner"])]


def toctree(found: set[str]) -> str:
    """The landing page's hidden toctree over the pages that exist, each once."""
    named = {p for _, patterns in TOC for p in patterns if "*" not in p}
    seen, parts = set(), []
    for caption, patterns in TOC:
        pages = [d for p in patterns for d in sorted(found) if "/" in d and Path(d).match(p)
                 and ("*" not in p or d not in named)]
        pages = [d for d in dict.fromkeys(pages) if d not in seen]
        seen.update(pages)
        if pages:
            parts.append(f"\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n" + "\n".join(pages) + "\n```\n")
    return "".join(parts)


def steppers(app) -> dict:
    path = Path(app.config.minispec_frames) / "steppers.json"
    if not path.exists():
        logger.warning(f"{path} is missing: run tools/stepper_frames.py first (make docs does)",
                       type="minispec", subtype="frames")
        return {}
    return json.loads(path.read_text())


def is_stepper(cell, output) -> bool:
    data = output.get("data", {})
    return bool(STEPPER_HTML.search(data.get("text/html", ""))) or (
        WIDGET_VIEW in data and "trace_stepper(" in cell.source)


def site_stepper(app, docname: str, cell, output) -> None:
    """Replace a stored stepper's output with the static stepper drawn for this page."""
    manifest = steppers(app).get(docname)
    if manifest is None:
        logger.warning(f"{docname}: a stepper with no frames: add its runs to SITE_STEPPERS in "
                       "tools/stepper_frames.py", type="minispec", subtype="frames")
        return
    stored = STEPPER_HTML.search(output.get("data", {}).get("text/html", ""))
    if stored and stored.group(1) != manifest["id"]:
        logger.warning(f"{docname}: the stored stepper (stops {stored.group(1)}) differs from what minispec "
                       f"draws now ({manifest['id']}): re-execute the notebook", type="minispec", subtype="stale")
    output["data"] = {"text/html": site_html(manifest, f"_static/stepper/{manifest['id']}/")}


def clean_notebook(app, docname: str, text: str) -> str:
    nb = nbformat.reads(text, as_version=4)
    views = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = NBVAL.sub("", cell.source)
        for output in cell.get("outputs", []):
            if is_stepper(cell, output):
                site_stepper(app, docname, cell, output)
            views += WIDGET_VIEW in output.get("data", {})
    if not views:  # no widget left on the page: no widget state, no widget script
        nb.metadata.pop("widgets", None)
    return nbformat.writes(nb)


def modules() -> list[str]:
    import minispec

    names = ["minispec"] + [m.name for m in pkgutil.walk_packages(minispec.__path__, "minispec.")]
    return sorted(n for n in names if not n.endswith("__main__"))


def module_section(name: str) -> str:
    """autodoc's section for ``name``; for a module that only runs as a script in
    another environment (e.g. inside vLLM's), its docstring, read without importing."""
    try:
        importlib.import_module(name)
    except ImportError as error:
        spec = importlib.util.find_spec(name)
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
        logger.info(f"{name}: not importable here ({error}); its docstring only")
        return (f"\n### `{name}`\n\n*Runs as a script in its own environment, so only its docstring is "
                f"shown (importing it here: `{error}`).*\n\n```{{eval-rst}}\n{doc}\n```\n")
    return f"\n### `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n```\n"


def api_reference() -> str:
    names = modules()
    groups = [("vLLM's twins", [n for n in names if not n.startswith(OWN)])]
    groups += [(f"minispec's own: `{own}`", [n for n in names if n.startswith(own)]) for own in OWN]
    return "".join(f"\n## {title}\n" + "".join(module_section(n) for n in members) for title, members in groups)


def on_source_read(app, docname: str, source: list[str]) -> None:
    if docname == app.config.root_doc:
        source[0] += toctree(app.env.found_docs)
    elif docname.startswith("notebooks/"):
        source[0] = clean_notebook(app, docname, source[0])
    elif docname == "docs/api":
        source[0] += api_reference()


def always_read(app, env, added, changed, removed) -> list[str]:
    """Pages made from more than their own file: the contents (pages come and go),
    the API (the code changes), the stepper pages (the frames change)."""
    return [d for d in (app.config.root_doc, "docs/api", *steppers(app)) if d in env.found_docs]


def jupyterlab_anchors(app, doctree) -> None:
    """Give each notebook heading the id JupyterLab gives it too (its text, spaces
    as '-', case kept: "Going-deeper", "KV-cache"), so the notebooks' own
    fragment links work on the site as they do in JupyterLab."""
    if not app.env.docname.startswith("notebooks/"):
        return
    for section in doctree.findall(nodes.section):
        anchor = section[0].astext().replace(" ", "-")
        if anchor not in doctree.ids:
            section["ids"].append(anchor)
            doctree.ids[anchor] = section


def landing_page(app, error) -> None:
    """``index.html`` is the README's page, so the site's address opens it."""
    readme = Path(app.outdir) / f"{app.config.root_doc}.html"
    if error is None and app.builder.format == "html" and readme.exists():
        shutil.copyfile(readme, Path(app.outdir) / "index.html")


def setup(app):
    app.add_config_value("minispec_frames", "build/docs-frames", "env")
    app.connect("source-read", on_source_read)
    app.connect("env-get-outdated", always_read)
    app.connect("doctree-read", jupyterlab_anchors)
    app.connect("build-finished", landing_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
