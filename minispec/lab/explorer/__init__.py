"""The explorer and the mutation benchmark: every schedule of a scope run against a runner
design, what each exercised, and which kind of check catches which slip.

A layer of the lab above the fault catalogue (``minispec.lab.faults``), whose presets it
explores and warns about, and below the renderers (``minispec.lab.viz``).

What a notebook imports from here (``from minispec.lab.explorer import ...``), by module:

* ``explorer``: ``explore``, ``search``, ``Scope``;
* ``mutants``: ``MUTANTS``, ``mutant``, ``explorer_catch``, ``acceptance_catch``.

vLLM twin: none.
"""

from minispec.lab.surface import lazy_surface

_SURFACE = {
    "explorer": ("explore", "search", "Scope"),
    "mutants": ("MUTANTS", "mutant", "explorer_catch", "acceptance_catch"),
}
__all__, __getattr__, __dir__ = lazy_surface(__name__, _SURFACE)
