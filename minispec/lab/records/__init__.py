"""What is recorded about vLLM, for the lessons to read: the bottom layer of the lab.

``threads``: the one table of cited GitHub threads (dates, states, quotes);
``twin_map``: each minispec module's vLLM twin and what it leaves out, read from the
docstrings; ``artifact``: what vLLM's own code did on minispec's schedules, stored in
``artifacts/thread.json`` and rendered for notebook 07. Nothing here runs vLLM or
imports the rest of the lab: the harness that runs vLLM and writes the artifact lives
beside the package, in ``reference/`` (``make vllm-check``), and is not installed.

What a notebook imports from here (``from minispec.lab.records import ...``), by module:

* ``artifact``: ``load_artifact``, ``render_moment``, ``render_sources``;
* ``twin_map``: ``vllm_twins``, ``render_twins_markdown``.

vLLM twin: none.
"""

from minispec.lab.surface import lazy_surface

_SURFACE = {
    "artifact": ("load_artifact", "render_moment", "render_sources"),
    "twin_map": ("vllm_twins", "render_twins_markdown"),
}
__all__, __getattr__, __dir__ = lazy_surface(__name__, _SURFACE)
