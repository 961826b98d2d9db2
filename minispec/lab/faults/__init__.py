"""The fault family of 2026 (notebook 09): what each fault preset reproduces and where it
bites (``catalogue``), each one run and caught (``reproduce``), and the designs and
threads of the pipeline hand-over it belongs to (``pp_sync``). The switches themselves
are the engine's (``minispec/v1/worker/fault_presets.py``).

What a notebook imports from here (``from minispec.lab.faults import ...``), by module:

* ``catalogue``: ``FAULTS``, ``RELAY_FAULTS``, ``EVERY_FAULT``, ``LEFT_OUT``;
* ``reproduce``: ``run_fault``;
* ``pp_sync``: ``TIMELINE``, ``DESIGNS``, ``THE_INVARIANT``;
* ``in_flight``: ``FAMILY``;
* ``relay_pairing``: ``pairings``.

vLLM twin: none.
"""

from minispec.lab.surface import lazy_surface

_SURFACE = {
    "catalogue": ("FAULTS", "RELAY_FAULTS", "EVERY_FAULT", "LEFT_OUT"),
    "reproduce": ("run_fault",),
    "pp_sync": ("TIMELINE", "DESIGNS", "THE_INVARIANT"),
    "in_flight": ("FAMILY",),
    "relay_pairing": ("pairings",),
}
__all__, __getattr__, __dir__ = lazy_surface(__name__, _SURFACE)
