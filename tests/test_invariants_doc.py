"""docs/invariants.md is what tools/invariants_doc.py writes, and its worked example runs.

The invariants themselves (``minispec.instruments.invariants.Invariant``): numbered
as everything cites them, each rule stated, every field a rule reads a real one.
"""

import contextlib
import dataclasses
import io
import re
import sys
from pathlib import Path

import pytest

from minispec.instruments import trace as records
from minispec.instruments.invariants import CHECKED, Invariant, Violation

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import invariants_doc  # noqa: E402

PAGE = (ROOT / "docs" / "invariants.md").read_text()


def test_the_committed_page_is_what_the_tool_writes():
    assert PAGE == invariants_doc.render(), "docs/invariants.md is out of date: run python tools/invariants_doc.py"


def test_the_worked_example_on_the_page_runs_and_prints_what_the_page_says():
    code, printed = re.findall(r"```(?:python|text)\n(.*?)```", PAGE, re.S)[-2:]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/invariants.md", "exec"), {"__name__": "example"})
    assert out.getvalue() == printed and "invariant 2 (draft agreement)" in printed


def test_invariants_keep_the_numbers_everything_cites():
    assert [int(i) for i in Invariant] == list(range(1, 11))  # 7: the transport's (issue 22); 8-10: issue 37's
    assert CHECKED == (2, 3, 4, 5, 8, 9, 10) and all(i.rule and i.title and i.where for i in Invariant)
    assert "block table" in Invariant.SHARED_ACCOUNTING.rule  # 4 compares block tables too
    assert f"{Invariant.TOKEN_HISTORY}" == "3"  # printed as the number the notebooks cite


@pytest.mark.parametrize("invariant", CHECKED)
def test_every_field_a_rule_reads_exists(invariant):
    for name in invariant.reads:
        cls_name, attr = name.split(".")
        cls = getattr(records, cls_name)
        assert attr in {f.name for f in dataclasses.fields(cls)} or isinstance(getattr(cls, attr, None), property), name


def test_a_violation_carries_the_member_and_refuses_an_unknown_number():
    v = Violation(3, 4, 0, "A", "expected", "actual")
    assert v.invariant is Invariant.TOKEN_HISTORY and v.headline.startswith("invariant 3 (token history)")
    with pytest.raises(ValueError, match="11 is not a valid Invariant"):
        Violation(11, 4, 0, "A", "expected", "actual")
