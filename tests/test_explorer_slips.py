"""Proof by planting (issue 36, deliverable 7): ten slips of their own (``explorer_slips``), none
of them the mutation table's, each found by ``explore`` on its default scope (``DEFAULT``, then
a search pass), and each design without the slip clean on the schedule that catches it."""

import pytest
from explorer_slips import SLIPS

from minispec.lab.explorer.explorer import explore, run_one


@pytest.mark.slow
@pytest.mark.parametrize("slip", SLIPS, ids=lambda s: s.name)
def test_the_default_scope_finds_each_planted_slip(slip):
    found = explore(slip.engine_args).counterexample
    assert found is not None, f"{slip.name} ({slip.shape}) escaped the default scope"
    assert found.failure.error is None or "Mismatch" in found.failure.error  # named, not a crash from nowhere
    fixed = {k: v for k, v in slip.engine_args.items() if k != "worker_cls"}
    assert run_one(found.schedule, fixed) is None  # the design itself runs that schedule clean


def test_the_slips_span_the_shapes_and_are_not_the_mutants():
    from minispec.lab.explorer.mutants import MUTANTS

    assert len(SLIPS) >= 10 and not {s.name for s in SLIPS} & {m.name for m in MUTANTS}
    shapes = " ".join(s.shape for s in SLIPS)
    for shape in ("async", "collective", "non-token", "masked at PP 2", "outside runner", "slot generation",
                  "repeated draft list"):
        assert shape in shapes
