"""The notebook's mutation table, on hand-made catches."""

import pytest

from minispec.lab.explorer.mutants import Catch
from minispec.lab.viz.catches import catch_table

CATCHES = {
    "slip-a": {"invariants": Catch(True, "2 req, 3 steps"), "rule": Catch(True, "1% vs 49%")},
    "slip-b": {"invariants": Catch(True, "2 req, 4 steps"), "rule": Catch(False, "49% vs 42%")},
}


def test_catch_table_marks_each_cell_and_counts_each_kind_of_test():
    table = catch_table(CATCHES, slips={"slip-a": "a draft skipped", "slip-b": "a row moved"})
    assert table.header == ("mutant", "the slip", "invariants", "rule")
    assert table.rows == (
        ("`slip-a`", "a draft skipped", "caught: 2 req, 3 steps", "caught: 1% vs 49%"),
        ("`slip-b`", "a row moved", "caught: 2 req, 4 steps", "missed: 49% vs 42%"),
        ("caught", "", "2 of 2", "1 of 2"),
    )
    assert catch_table(CATCHES).header == ("mutant", "invariants", "rule")


def test_catch_table_refuses_rows_measured_differently():
    with pytest.raises(ValueError, match=r"mutants \['slip-c'\]"):
        catch_table(CATCHES | {"slip-c": {"rule": Catch(False, "")}})
    with pytest.raises(ValueError, match="at least one mutant"):
        catch_table({})
