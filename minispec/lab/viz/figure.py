"""Figures that say what they show: alt text for a notebook's figure outputs.

A figure in a notebook is stored as a PNG; a reader who cannot see it (a screen reader
on the docs site) gets only what the output's metadata says. ``DescribedFigure`` is a
matplotlib ``Figure`` whose display adds ``alt`` to the PNG's metadata, written by
``describe`` from what the figure draws: its title, each panel's title, axis labels and
legend entries (or, for a panel of boxes and words such as the map, its first words).
The docs site (``docs/_ext/site_notebook.py``) puts it on the page's ``<img>``.

A pure renderer's helper; no vLLM twin.
"""

from __future__ import annotations

from matplotlib.figure import Figure

MAX_CHARS = 400  # alt text is a summary; the text around the figure says the rest
MAX_WORDS = 6  # a panel without title or labels: its first texts


def _panel(ax) -> str:
    title = " ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t)
    axes = "; ".join(f"{name}: {label}" for name, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if label)
    legend = ax.get_legend()
    entries = ", ".join(t.get_text() for t in legend.get_texts()) if legend else ""
    words = "" if title or axes else ", ".join(t.get_text() for t in ax.texts[:MAX_WORDS] if t.get_text().strip())
    return " — ".join(p for p in (title, axes, f"legend: {entries}" if entries else "", words) if p)


def describe(fig: Figure) -> str:
    """One line saying what ``fig`` draws, from its texts (at most ``MAX_CHARS`` characters)."""
    panels = [p for p in map(_panel, fig.axes) if p]
    parts = [fig.get_suptitle()] + ([f"panel {i + 1}: {p}" for i, p in enumerate(panels)] if len(panels) > 1
                                    else panels)
    text = ". ".join(p.strip() for p in parts if p and p.strip()) or "a figure"
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1].rstrip() + "…"


class DescribedFigure(Figure):
    """A ``Figure`` whose notebook output carries its ``describe`` text as the PNG's alt
    text. Only metadata: the PNG itself is what the inline backend draws, as before."""

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {}, {"image/png": {"alt": describe(self)}}
