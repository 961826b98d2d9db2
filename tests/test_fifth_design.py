"""A fifth runner design from outside minispec (``tests/fifth_design.py``, the example of
``docs/adding_a_runner.md``), registered for this module only: greedy equal to transformers'
at PP 1-3, synchronous and async, with the invariants checked live and on the recorded trace;
the runner contract's conformance tests; and its name taken wherever a design is named
(``LLM``, the command line, ``gpu-check``, the explorer). Nothing outside ``tests/`` changes but
the one ``register_design`` call (``fifth_design.register``).

Planted: the same design with V1's cadence in its record (no wait, ``pp_size`` batches in
flight) generates wrong tokens under async scheduling at PP 3 (issue 32 found 203 invariant
violations on its workload): the engine asks the record, so the record decides."""

from dataclasses import replace

import pytest
from fifth_design import FIFTH, register
from test_greedy_equivalence import _check_greedy, reference  # noqa: F401 (a fixture)
from test_worker_base import check_builds_as_worker_base, check_same_rows_as_v1

from minispec import LLM
from minispec.instruments.invariants import InvariantViolation, check_trace
from minispec.v1.worker.designs import DESIGNS, no_wait, one_per_stage, register_design, unregister_design


@pytest.fixture(scope="module", autouse=True)
def fifth():
    register()
    yield FIFTH
    unregister_design(FIFTH.name)


GREEDY = [(pp, async_scheduling) for async_scheduling in (False, True) for pp in (1, 2, 3)]


@pytest.mark.parametrize("pp,async_scheduling", GREEDY, ids=[f"pp{p}-{'async' if a else 'sync'}" for p, a in GREEDY])
def test_the_fifth_design_equals_transformers_generate(reference, pp, async_scheduling):  # noqa: F811
    llm = _check_greedy(reference, pp, 3, "draft_model", "fifth", async_scheduling, record=True)
    assert check_trace(llm.trace) == [] and llm.trace.steps and all(s.stages for s in llm.trace.steps)


def test_the_fifth_design_is_built_as_a_worker_base():
    check_builds_as_worker_base("fifth")


def test_the_fifth_design_describes_the_same_rows_as_v1(monkeypatch):
    check_same_rows_as_v1(monkeypatch, "fifth")


def test_its_record_s_cadence_is_what_makes_async_right(reference):  # noqa: F811
    """Planted: V1's cadence for a design on V2's slots breaks invariant 3 at PP 3."""
    unregister_design("fifth")
    try:
        register_design(replace(FIFTH, async_batches_in_flight=one_per_stage, decode_wait_batches=no_wait))
        with pytest.raises(InvariantViolation, match=r"^invariant 3 \(token history\) violated at step 1, stage 0"):
            _check_greedy(reference, 3, 3, "draft_model", "fifth", True)
    finally:
        unregister_design("fifth")
        register()


def test_registering_refuses_a_taken_name_and_a_runner_that_is_no_worker_base():
    with pytest.raises(ValueError, match=r"^Design name='fifth': a design of that name is registered already"):
        register()
    with pytest.raises(TypeError, match=r"^Design 'sixth' runner=<class 'dict'>: expected a WorkerBase subclass"):
        register_design(replace(FIFTH, name="sixth", runner=dict))
    with pytest.raises(ValueError, match=r"^Design 'sixth' runner='no_such_module.Runner': cannot import it"):
        register_design(replace(FIFTH, name="sixth", runner="no_such_module.Runner"))
    with pytest.raises(ValueError, match=r"^unregister_design\('v1'\): a built-in design stays registered"):
        unregister_design("v1")
    assert "sixth" not in DESIGNS and DESIGNS["fifth"] is FIFTH


def test_its_name_works_in_the_cli_and_gpu_check(capsys):
    from minispec.entrypoints.cli.gpu_check import gpu_plan
    from minispec.entrypoints.cli.main import main

    main(["generate", "the quick", "--model-runner", "fifth", "--pp", "2", "--max-tokens", "4"])
    assert "pp=2 k=3 draft_model" in capsys.readouterr().out
    assert {r.model_runner for r in gpu_plan(1)} == set(DESIGNS) and "fifth" in DESIGNS
    assert {r.drafts["method"] for r in gpu_plan(1, ("fifth",))} == {"draft_model"}


def test_the_handover_table_says_its_record_names_no_rule():
    from minispec.lab.experiments.handover import DesignCost
    from minispec.lab.viz import handover_table

    row = handover_table([DesignCost("fifth", 10, {"stage 2 -> stage 0": 30}, {"stage 2 -> stage 0": 1200})]).rows[0]
    assert row[0] == "`fifth`" and row[6] == "not stated by its record"


def test_its_name_works_in_the_explorer():
    from minispec.lab.explorer import Scope, explore
    from minispec.lab.viz import render_exploration

    result = explore({"model_runner": "fifth"}, Scope(max_requests=1), limit=3)
    assert "nothing breaks" in render_exploration(result)


def test_outside_the_module_it_is_not_registered():
    """What the fixture undoes: a later test module sees the built-in designs only."""
    unregister_design("fifth")
    try:
        with pytest.raises(ValueError, match=r"^model_runner='fifth': expected one of \['v1', 'v2', 'relay', "
                                             r"'replicated'\] \(or None: the default\)"):
            LLM(model_runner="fifth", max_model_len=64)
    finally:
        register()
