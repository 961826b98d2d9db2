"""How a notebook is changed on its way to a page (read by ``minispec_site``).

The committed notebook is never touched; what Sphinx reads is a copy with:

- the ``# NBVAL_...`` lines that tell nbval what to compare dropped from the code;
- every linked stepper's output replaced by the static stepper
  (``minispec.lab.viz.static_stepper``) with the frames ``tools/stepper_frames.py`` drew;
- every answer behind a click, as the learner copy (``tools/workshop.py``) keeps it off
  the screen: a code cell tagged ``reveal`` shows its code and folds its outputs, one
  tagged ``answer`` or ``solution`` folds code and outputs, and a markdown cell tagged
  ``answer`` or ``solution`` is folded whole (unless all of it is folded already); each fold
  titled by what is behind it (``fold_label``; a ``reveal`` cell that calls no ``reveal(id)``
  names its own in its metadata, ``{"workshop": {"fold": "..."}}``);
- a box under the title: how to run the notebook yourself, and its learner copy to
  download (``build-finished`` in ``minispec_site`` writes the copies);
- for the exercises (``NEEDS_KERNEL``), a line saying that the checks need a kernel;
- each figure's alt text from its output's metadata (``image/png`` → ``alt``), which
  minispec's renderers attach (``minispec.lab.viz.figure``); an output stored before
  they did gets a line naming the renderer that drew it, never its file name.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
from docutils import nodes
from sphinx.util import logging

from minispec.lab.viz.static_stepper import site_html

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import spoilers  # noqa: E402  (the cell's declaration: one reader)
import workshop  # noqa: E402  (the learner copy's rules: one place)

logger = logging.getLogger(__name__)

NBVAL = re.compile(r"^[ \t]*# NBVAL_\w+[^\n]*(\n|$)", re.MULTILINE)
STEPPER_HTML = re.compile(r'class="minispec-stepper" data-stepper="(\w+)"')
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Tags whose cells answer a question asked above them; "solution" marks an exercise's
# reference solution. reveal folds only the outputs (its code is the experiment).
REVEAL, ANSWER, SOLUTION, DEEPER = "reveal", "answer", "solution", "deeper"
FOLDED = {REVEAL: "The output: it answers the question above (guess first)", ANSWER: "Show the answer (try first)",
          SOLUTION: "Show the solution (try first)"}
REVEAL_CALL = re.compile(r'\breveal\("[\w.-]+"\)')
PREDICTION_FOLD = "The answer, what shows it, and why (make your guess first)"
FOLD_KEY = "fold"  # a reveal cell's own fold title, under its "workshop" metadata
DEEPER_FOLD = "Going deeper: {what}"
_HEADING = re.compile(r"^#+\s+(.+)$", re.M)
NEEDS_KERNEL = {"notebooks/08_exercises"}
LEARNER = "_learner"  # the site's folder of learner copies
CALL = re.compile(r"\b(plot_\w+|render_\w+)\(")
PROSE_TAG = "minispec-prose"  # myst-nb gives the cell the class tag_minispec-prose: the CSS wraps it
WIDE = 88  # characters: a longer output line scrolls sideways unless it wraps


def page_box(docname: str) -> str:
    """The box under a notebook's title: run it yourself, or download the learner copy."""
    name = Path(docname).name
    note = ""
    if docname in NEEDS_KERNEL:
        note = ("<p><b>These exercises need a kernel.</b> On this page nothing runs: each <code>check_…(…)</code> "
                "shows what it prints for the empty stub. Run the notebook to write and check your code.</p>")
    return (f'<div class="admonition minispec-run"><p class="admonition-title">Run it yourself</p>{note}'
            f"<p>This page shows the notebook with its stored outputs. To run it: "
            f"<code>make lab</code> in a clone of the repository opens JupyterLab on learner copies "
            f"(<code>workshop/{name}.ipynb</code>; the committed one is <code>notebooks/{name}.ipynb</code>). "
            f'Or <a href="../{LEARNER}/{name}.ipynb" download>download the learner copy</a> '
            f"(answers cleared) and open it wherever minispec is installed.</p></div>")


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


def fold_label(cell, tag: str) -> str:
    """What the fold's title says is behind it: a prediction's reveal names the answer and why; an
    experiment whose output answers a question names it in its metadata (``workshop.fold``)."""
    if tag == REVEAL and REVEAL_CALL.search(cell.source):
        return PREDICTION_FOLD
    if tag == REVEAL and (own := spoilers.declaration(cell).get(FOLD_KEY)):
        return own
    if tag == DEEPER:
        if cell.cell_type == "code":
            return DEEPER_FOLD.format(what=f"{code_line(cell)} and what it prints")
        heading = _HEADING.findall(cell.source)
        what = heading[-1] if heading and heading[-1] != "Going deeper" else "the notes"
        return DEEPER_FOLD.format(what=what.strip("*` "))
    return FOLDED[tag]


def code_line(cell, width: int = 60) -> str:
    """The cell's first line of code (no comment, no nbval marker, no import), cut to ``width``: a
    fold's title names the code behind it (a guess cell's line is only the guess's name)."""
    lines = [line.split("  #")[0].strip() for line in NBVAL.sub("", cell.source).splitlines()]
    line = next((x for x in lines if x and not x.startswith(("#", "from ", "import "))), "the code")
    return line if len(line) <= width else line[: width - 1] + "…"


def fold_deeper(cell) -> None:
    """A Going deeper cell, folded as the learner's notebook reads it: on a phone it would fill the page.
    Headings stay outside the folds (a heading inside ``<details>`` opens a new section and breaks
    the fold apart), so links to #Going-deeper and to each subsection still land: the text under
    each heading is a fold of its own, titled by that heading."""
    label = fold_label(cell, DEEPER)
    if cell.cell_type == "code":
        cell.metadata.setdefault("tags", []).append("hide-cell")
        cell.metadata["mystnb"] = {**cell.metadata.get("mystnb", {}), "code_prompt_show": label,
                                   "code_prompt_hide": "Hide it"}
        return
    if cell.source.lstrip().startswith("<details>"):  # folded in the notebook already: styled as the others
        cell.source = cell.source.replace("<details>", '<details class="minispec-deeper">', 1)
        return
    pieces = re.split(r"^(#+\s+.+)$", cell.source, flags=re.M)  # text, heading, text, heading, text...
    out = [_deeper_fold(pieces[0], label)]
    for heading, text in zip(pieces[1::2], pieces[2::2]):
        what = heading.lstrip("#").strip()
        title = label if what == "Going deeper" else DEEPER_FOLD.format(what=what.strip("*` "))
        out.append(f"{heading}\n{_deeper_fold(text, title)}")
    cell.source = "\n".join(part for part in out if part)


def _deeper_fold(text: str, title: str) -> str:
    """``text`` behind a Going deeper fold titled ``title``; nothing when it shows nothing."""
    if not workshop.visible_text(text).split():
        return text.strip()
    return f'\n<details class="minispec-deeper">\n<summary>{title}</summary>\n\n{text.strip()}\n\n</details>\n'


def fold(cell) -> None:
    """Put the cell's answer behind a click (myst-nb's hide-output / hide-cell folds), and Going deeper too."""
    found = [t for t in FOLDED if t in workshop.tags(cell)]
    if not found:
        if DEEPER in workshop.tags(cell):
            fold_deeper(cell)
        return
    tag = SOLUTION if SOLUTION in found else found[-1]
    if cell.cell_type == "code":
        cell.metadata.setdefault("tags", []).append("hide-output" if tag == REVEAL else "hide-cell")
        cell.metadata["mystnb"] = {**cell.metadata.get("mystnb", {}), "code_prompt_show": fold_label(cell, tag),
                                   "code_prompt_hide": "Hide it"}
    elif cell.cell_type == "markdown" and workshop.visible_text(cell.source).split():
        cell.source = (f'<details class="minispec-answer">\n<summary>{FOLDED[tag]}</summary>\n\n'
                       f"{cell.source}\n\n</details>")


def is_prose(cell) -> bool:
    """Whether the cell prints sentences too wide for the column (wrapped on the site), not
    columns that wrapping would break (lines with aligned runs of spaces or box drawing)."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    wide = [line.strip() for line in text.splitlines() if len(line) > WIDE]
    return bool(wide) and not any("  " in line or re.search("[│─┼|]", line) for line in wide)


def figure_alt(cell, output) -> str | None:
    """The alt text of an output's figure: what its renderer attached, else its renderer's name."""
    if "image/png" not in output.get("data", {}):
        return None
    alt = output.get("metadata", {}).get("image/png", {}).get("alt")
    if alt:
        return alt
    calls = CALL.findall(cell.source)
    return f"A figure drawn by {calls[-1]} (described in the text around it)" if calls else "A figure"


ALTS: dict[str, list[str]] = {}  # docname -> alt text of its output figures, in order (one process reads a page)


def clean_notebook(app, docname: str, text: str) -> str:
    nb = nbformat.reads(text, as_version=4)
    views, alts = 0, []
    for cell in nb.cells:
        fold(cell)
        if cell.cell_type != "code":
            continue
        cell.source = NBVAL.sub("", cell.source)
        if is_prose(cell):
            cell.metadata.setdefault("tags", []).append(PROSE_TAG)
        for output in cell.get("outputs", []):
            if is_stepper(cell, output):
                site_stepper(app, docname, cell, output)
            views += WIDGET_VIEW in output.get("data", {})
            if (alt := figure_alt(cell, output)) is not None:
                alts.append(alt)
    if views:  # the site loads no widget script: a widget other than the stepper would show nothing
        logger.warning(f"{docname}: {views} widget output(s) the site cannot show (it has no widget script)",
                       type="minispec", subtype="widget")
    nb.metadata.pop("widgets", None)
    ALTS[docname] = alts
    title = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), None)
    if title is not None:
        nb.cells.insert(title + 1, nbformat.v4.new_markdown_cell(page_box(docname)))
    return nbformat.writes(nb)


def figure_alts(app, doctree) -> None:
    """Give each output figure of a notebook page its alt text (myst-nb writes the file path)."""
    alts = ALTS.get(app.env.docname)
    if not alts:
        return
    images = [n for n in doctree.findall(nodes.image) if "jupyter_execute" in n["uri"] or
              n.get("alt", "").endswith(".png")]
    if len(images) != len(alts):
        logger.warning(f"{app.env.docname}: {len(images)} output figures but {len(alts)} stored",
                       type="minispec", subtype="alt")
    for image, alt in zip(images, alts, strict=False):
        image["alt"] = alt
