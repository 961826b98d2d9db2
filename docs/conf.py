"""Sphinx configuration of the walkthrough site (``make docs``).

The source folder is the repository itself, so the README, the notebooks and
``docs/*.md`` keep the links they have on GitHub and in JupyterLab; only the
files in ``include_patterns`` are pages. Notebooks are rendered from their stored
outputs, never executed. Everything a page loads is served from the site itself:
the stepper's frames come from ``tools/stepper_frames.py`` (``build/docs-frames``);
no page holds widget state, so no widget script is loaded (``docs/_ext/site_notebook.py``
warns if a notebook ever stores another widget). The landing page is ``docs/index.md``;
the developer README is a page of its own.
"""

import datetime
import subprocess
import sys
import tomllib
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
BUILD = ROOT / "build"
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT)]

project = "minispec"
author = "the minispec authors"
copyright = "the minispec authors; Apache-2.0"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.viewcode", "minispec_site", "site_source"]
root_doc = "docs/index"
include_patterns = ["README.md", "notebooks/*.ipynb", "docs/*.md", "docs/api/*.md", "docs/fidelity/*.md"]
exclude_patterns = ["build", ".venv", "**/.ipynb_checkpoints"]

# Notebooks: stored outputs only, in the order of the workshop.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # no page needs a widget script (the stepper is static)
nb_output_stderr = "show"
nb_merge_streams = True
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
# "set": matplotlib writes a `set` method, with its own docstring markup, into every Artist
# subclass (minispec.lab.viz.figure.DescribedFigure); no minispec class defines one.
autodoc_default_options = {"members": True, "show-inheritance": True, "exclude-members": "set"}
autodoc_typehints = "description"
# A name that a module re-exports (minispec.lab.faults.catalogue re-exports FaultPreset) links
# to its own module's [source] only where that module documents it; following it mixed the
# two pages' anchors.
viewcode_follow_imported_members = False

html_theme = "sphinx_book_theme"
html_title = "minispec"
html_static_path = ["_static", str(BUILD / "docs-frames" / "static")]
minispec_frames = str(BUILD / "docs-frames")  # docs/_ext/site_notebook.py reads steppers.json there
html_js_files = ["minispec-stepper.js", "minispec-nav.js"]
html_css_files = ["minispec-stepper.css", "minispec-site.css"]


def built_from() -> str:
    """The footer's line: minispec's version, the commit the site was built from, the date."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    git = ["git", "-C", str(ROOT)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked release)
        commit, dirty = "unknown", ""
    commit += " with uncommitted changes" if dirty else ""
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    return (f'<p class="minispec-built">minispec {version} · commit <code>{commit}</code> · '
            f"built {day} (UTC)</p>")


html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
    "extra_footer": built_from(),
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


def _paths_from_the_checkout(app, what, name, obj, options, signature, return_annotation):
    """A dataclass default that is a path in the building checkout (``SpeculativeConfig.model``:
    the shipped draft) is shown from the checkout's root: the machine's own folder says nothing
    to a reader and widens the page past a phone's screen."""
    if signature:
        signature = signature.replace(f"{ROOT}/", "")
    return signature, return_annotation


def setup(app):
    app.connect("autodoc-process-signature", _paths_from_the_checkout)
