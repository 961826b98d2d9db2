"""The bisect table, on hand-made violations."""

from minispec.instruments.invariants import Violation
from minispec.lab.viz.bisect import first_by_invariant, render_bisect


def v(invariant, step, stage, req_id):
    return Violation(invariant, step, stage, req_id, "expected", "actual")


def test_first_by_invariant_keeps_the_earliest_found():
    found = [v(2, 2, 0, "A"), v(3, 4, 0, "A"), v(2, 3, 1, "C")]
    assert first_by_invariant(found) == {2: found[0], 3: found[1]}


def test_render_bisect():
    table = render_bisect({"buggy": [v(2, 2, 0, "A"), v(5, 7, None, "B")], "fixed": []}, invariants=(2, 3, 5))
    assert table.splitlines() == [
        "run   | 2 draft agreement | 3 token history | 5 one in-flight batch per decode request",
        "-" * 86,
        "buggy | step 2 stage 0 A  | holds           | step 7 B",
        "fixed | holds             | holds           | holds",
    ]
