"""Which kind of test catches which mutant, as a table a notebook shows: a pure renderer.

The mutation benchmark (``minispec.lab.explorer.mutants``) measures each kind of test
against each mutant as a ``Catch``; ``render_table`` there prints every column of the
table in ``docs/explorer.md``. A notebook runs only the columns it can afford (the explorer with the
invariants, vLLM's acceptance rule) on a few mutants: ``catch_table`` lays out whichever
columns it is given, each cell "caught" or "missed" with the measurement, and a last row
counting what each kind of test caught. No vLLM twin.
"""

from __future__ import annotations

from minispec.lab.viz.table import Table


def catch_table(catches: dict[str, dict[str, object]], slips: dict[str, str] | None = None) -> Table:
    """``catches``: mutant name -> {kind of test: Catch (``caught``, ``detail``)}, every mutant
    with the same kinds, in the same order; ``slips``: mutant name -> what it changes."""
    if not catches:
        raise ValueError("catches: expected at least one mutant, got {}")
    kinds = list(next(iter(catches.values())))
    odd = [name for name, row in catches.items() if list(row) != kinds]
    if odd:
        raise ValueError(f"catches: mutants {odd} are not measured by the same kinds of test as the first, {kinds}")
    slips = slips or {}
    header = ("mutant", "the slip", *kinds) if slips else ("mutant", *kinds)
    rows = [(f"`{name}`", *([slips.get(name, "")] if slips else []),
             *(f"{'caught' if c.caught else 'missed'}: {c.detail}" for c in row.values()))
            for name, row in catches.items()]
    counts = [f"{sum(row[k].caught for row in catches.values())} of {len(catches)}" for k in kinds]
    rows.append(("caught", *([""] if slips else []), *counts))
    return Table(header, tuple(rows))
