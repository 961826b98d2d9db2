"""Sphinx configuration of the walkthrough site (``make docs``).

The source folder is the repository itself, so the README, the notebooks and
``docs/*.md`` keep the links they have on GitHub and in JupyterLab; only the
files in ``include_patterns`` are pages. Notebooks are rendered from their stored
outputs, never executed. Everything a page loads is served from the site itself:
the widget script comes from the npm package ``@jupyter-widgets/html-manager``
(the Makefile puts it in ``build/docs-js``), the stepper's frames from
``tools/stepper_frames.py`` (``build/docs-frames``).
"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
BUILD = ROOT / "build"
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT)]

project = "minispec"
author = "the minispec authors"
copyright = "the minispec authors; Apache-2.0"

extensions = ["myst_nb", "sphinx.ext.autodoc", "minispec_site"]
root_doc = "README"
include_patterns = ["README.md", "notebooks/*.ipynb", "docs/*.md"]
exclude_patterns = ["build", ".venv", "**/.ipynb_checkpoints"]

# Notebooks: stored outputs only, in the order of the workshop.
nb_execution_mode = "off"
nb_ipywidgets_js = {"widgets/embed.js": {}}  # served locally, not from a CDN
nb_output_stderr = "show"
nb_merge_streams = True
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"

html_theme = "sphinx_book_theme"
html_title = "minispec"
html_static_path = ["_static", str(BUILD / "docs-js"), str(BUILD / "docs-frames" / "static")]
minispec_frames = str(BUILD / "docs-frames")  # docs/_ext/minispec_site.py reads steppers.json there
html_js_files = ["minispec-stepper.js"]
html_css_files = ["minispec-stepper.css"]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
}
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None

# MyST resolves a link's #anchor only against the headings it made itself, so it warns
# about the notebooks' JupyterLab-style anchors (#Glossary, glossary.ipynb#KV-cache: ids
# of raw <a id> tags and of headings as JupyterLab names them) although the links work.
# tests/test_docs_site.py checks every internal link of the built pages instead: the page
# exists and holds the id.
suppress_warnings = ["myst.xref_missing",
                    # The glossary puts each term in an h4 under its letter's h2 on purpose
                    # (JupyterLab's fragment links find headings); the pages render it as is.
                    "myst.header"]
