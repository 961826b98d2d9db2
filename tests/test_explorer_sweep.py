"""The sweep in CI (issue 36, deliverable 5): every runner design x sync/async x PP 2 and 3,
explored on a bounded scope, so a design that deadlocks or breaks in a cell nobody pointed the
explorer at cannot ship again; and the sweep does catch a deadlocking design, planted."""

import pytest
from test_explorer_liveness import WaitsForAMessageNeverSent

from minispec.lab.explorer import explorer, sweep
from minispec.lab.explorer.explorer import Scope
from minispec.lab.explorer.liveness import StallKind
from minispec.lab.viz.exploration import render_exploration
from minispec.v1.worker.designs import DESIGNS


@pytest.mark.slow
@pytest.mark.parametrize("cell", sweep.cells(), ids=str)
def test_every_design_runs_clean_in_every_cell(cell):
    """The relay designs under async scheduling at three stages deadlocked here until their
    records gave them V2's cadence and their handler took each payload whole (issue 32)."""
    result = sweep.explore_cell(cell)
    assert result.counterexample is None, render_exploration(result)
    assert result.exhausted and result.schedules_run >= 72  # replicated, n-gram drafts: no scripts to vary


def test_the_sweep_lists_every_design_in_every_cell():
    assert {c.design for c in sweep.cells()} == set(DESIGNS)
    assert len(sweep.cells()) == 4 * 2 * 2
    assert explorer.drafting({"model_runner": "replicated"}) == "ngram"  # it refuses scripted drafts
    assert explorer.drafting({"model_runner": "v2"}) == "scripted"


def test_the_sweep_catches_a_design_that_deadlocks(monkeypatch):
    designs = sweep._designs() | {"planted": {"worker_cls": WaitsForAMessageNeverSent}}
    monkeypatch.setattr(sweep, "_designs", lambda: designs)
    small = Scope(max_requests=1, max_tokens=(4,), max_num_seqs=(4,))
    result = sweep.explore_cell(sweep.Cell("planted", True, 3), small)
    assert result.counterexample.failure.stall.kind is StallKind.DEADLOCK


def test_the_relays_hang_is_a_finding_not_a_crash():
    # with invariants off (what a user measuring throughput runs), the relay designs' async
    # PP 3 hang once raised from deep in the executor; now it is named, or the cell runs clean
    cell = sweep.Cell("relay", True, 3)
    scope = sweep.design_scope("relay", Scope(max_requests=1, max_tokens=(6,), max_num_seqs=(4,),
                                              async_scheduling=(True,), pipeline_parallel_size=(3,)))
    found = sweep.explore(sweep._designs()[cell.design], scope, invariants=False).counterexample
    assert found is None or (found.failure.error is None and found.failure.stall.kind is StallKind.DEADLOCK)
