"""Sphinx hooks of the walkthrough site: what turns the repository into pages.

- The landing page (``docs/index.md``, the site's front door) gets the site's
  table of contents: the notebooks in their order (then the glossary), the guides
  in ``docs/``, then the reference (the API, the invariants, the README), then the
  developer guide (the README's former sections).
  Pages that are absent (the glossary, the handout) are left out, not errors.
  ``index.html`` at the top of the site sends the browser there.
- Each notebook is changed on its way to a page by ``site_notebook`` (nbval
  markers dropped, the static stepper, answers folded, the run-it-yourself box,
  figures' alt text); its learner copy is written beside the site to download.
- Notebook headings also get the ids JupyterLab gives them, which the notebooks'
  links use (``glossary.ipynb#KV-cache``, ``#Going-deeper``).
- ``docs/api.md`` lists one page per package (``site_api``).
- What no page needs is left out of the site: the theme's source maps and its
  Font Awesome script (its stylesheet draws the icons from the web font).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import site_api
import site_notebook
from docutils import nodes

# Pages in each caption: named pages in this order, then any other page a wildcard
# finds (a new guide in docs/ appears without a change here).
TOC = [("Walkthrough", ["notebooks/[0-9]*", "notebooks/glossary", "notebooks/*"]),
       ("Workshop", ["docs/workshop", "docs/opening", "docs/handout", "docs/*"]),
       ("Reference", ["docs/api", "docs/invariants", "docs/adding_a_runner", "README"]),
       # the README's sections, moved to pages of their own (the README is the front door)
       ("Developer guide", ["docs/install", "docs/using", "docs/notebooks_and_site", "docs/faults_and_designs",
                            "docs/explorer", "docs/testing", "docs/checked_against_vllm", "docs/fidelity",
                            "docs/fidelity/*", "docs/package_map", "docs/executors"])]
ICONS = Path(__file__).resolve().parents[1] / "_icons" / "fontawesome.js"
SOURCE_MAP = re.compile(r"\n?(//# sourceMappingURL=\S+|/\*# sourceMappingURL=\S+ \*/)\s*$")
TABLE_MARK = "<!-- the site puts the notebooks' table here: notebooks_table in docs/_ext/minispec_site.py -->"
WORDS_A_MINUTE = 60  # the reading pace docs/workshop.md's agenda is planned at
REDIRECT = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>minispec</title>'
            '<meta http-equiv="refresh" content="0; url={0}"><link rel="canonical" href="{0}"></head>'
            '<body><p>The walkthrough starts at <a href="{0}">{0}</a>.</p></body></html>\n')


def toctree(found: set[str], root: str) -> str:
    """The landing page's hidden toctree over the pages that exist, each once."""
    named = {p for _, patterns in TOC for p in patterns if "*" not in p}
    seen, parts = {root}, []
    for caption, patterns in TOC:
        pages = [d for p in patterns for d in sorted(found) if Path(d).match(p) and d.count("/") == p.count("/")
                 and ("*" not in p or d not in named)]
        pages = [d for d in dict.fromkeys(pages) if d not in seen]
        seen.update(pages)
        if pages:
            parts.append(f"\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n" +
                         "\n".join(f"/{d}" for d in pages) + "\n```\n")
    return "".join(parts)


def notebooks_table() -> str:
    """Each notebook, linked by its title, with the minutes its workshop path takes to read."""
    rows = ["| notebook | minutes |", "|---|---|"]
    for path in sorted((site_notebook.ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
        minutes = max(1, round(site_notebook.workshop.visible_words(nb) / WORDS_A_MINUTE))
        rows.append(f"| [{title}](../notebooks/{path.name}) | {minutes} |")
    return "\n".join(rows) + "\n"


def on_source_read(app, docname: str, source: list[str]) -> None:
    if docname == app.config.root_doc:
        source[0] = source[0].replace(TABLE_MARK, notebooks_table()) + toctree(app.env.found_docs, docname)
    elif docname.startswith("notebooks/"):
        source[0] = site_notebook.clean_notebook(app, docname, source[0])
    elif docname == "docs/api":
        source[0] += site_api.api_contents()


def always_read(app, env, added, changed, removed) -> list[str]:
    """Pages made from more than their own file: the contents (pages come and go),
    the API's list of packages, the stepper pages (the frames change)."""
    return [d for d in (app.config.root_doc, "docs/api", *site_notebook.steppers(app)) if d in env.found_docs]


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


def learner_copies(out: Path) -> None:
    """Each notebook's learner copy (``tools/workshop.py``'s rules) for its page's download link."""
    folder = out / site_notebook.LEARNER
    folder.mkdir(exist_ok=True)
    for path in sorted((site_notebook.ROOT / "notebooks").glob("*.ipynb")):
        nbformat.write(site_notebook.workshop.learner_copy(nbformat.read(path, as_version=4)), folder / path.name)


def drop_unused(out: Path) -> None:
    """What no reader needs: the theme's source maps (only a browser's developer tools ask
    for them; their comments go too) and its 1.5 MB Font Awesome script, which repeats the
    icons its stylesheet already draws from the web font (``docs/_icons/fontawesome.js``
    says so in its place)."""
    for path in (out / "_static").rglob("*.map"):
        path.unlink()
    for path in [*(out / "_static").rglob("*.js"), *(out / "_static").rglob("*.css")]:
        text = path.read_text(errors="surrogateescape")
        if SOURCE_MAP.search(text):
            path.write_text(SOURCE_MAP.sub("", text), errors="surrogateescape")
    shutil.copyfile(ICONS, out / "_static" / "scripts" / "fontawesome.js")


def finish(app, error) -> None:
    if error is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    (out / "index.html").write_text(REDIRECT.format(f"{app.config.root_doc}.html"))
    learner_copies(out)
    drop_unused(out)


def setup(app):
    app.add_config_value("minispec_frames", "build/docs-frames", "env")
    app.connect("builder-inited", site_api.write_pages)
    app.connect("source-read", on_source_read)
    app.connect("env-get-outdated", always_read)
    app.connect("doctree-read", jupyterlab_anchors)
    app.connect("doctree-read", site_notebook.figure_alts)
    app.connect("build-finished", finish)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
