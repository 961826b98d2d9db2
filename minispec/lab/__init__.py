"""The lessons on top of the engine, in parts by job; a notebook imports from the part it uses.

Everything here calls ``minispec.LLM`` or reads traces; the engine never imports it. Nothing
here has a vLLM twin. Each part's ``__init__`` lists what it exports (its surface), and the
notebooks import lab code from those surfaces only (``tests/test_lab_surface.py``), so an
import cell says which parts a notebook uses, and a part's modules can move without touching
a notebook. A name is loaded from its module on first use (``minispec.lab.surface``), so
importing a part loads nothing heavy (no torch, transformers or matplotlib).

The parts, in their layers (each imports only those above it; ``tests/test_layout.py``):

``minispec.lab.records``
    what is recorded about vLLM: the cited threads, each module's vLLM twin, and what vLLM's
    own code did on minispec's schedules (the harness that runs vLLM is ``reference/``).
``minispec.lab.experiments``
    the runs and what they measure: the forum thread's scenario, schedules, acceptance, overlap.
``minispec.lab.faults``
    the 2026 fault family: each preset, run and caught; the pipeline hand-over's designs.
``minispec.lab.explorer``
    every schedule of a scope, its coverage and liveness, and the mutation benchmark.
``minispec.lab.viz``
    the renderers: text, figures, the stepper.
``minispec.lab.exercises``
    the workshop's exercises and their checker.
``minispec.lab.predictions``
    every prediction's question and its ``reveal`` (the mechanism: ``minispec.lab.prediction``).
"""

PARTS = ("records", "experiments", "faults", "explorer", "viz", "exercises", "predictions")
