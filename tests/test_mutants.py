"""The mutation benchmark's catalogue: every mutant is applied and put back cleanly, its
change is the one it declares, and the explorer catches a cheap subset where the benchmark
says it does (the full table: ``make mutants``). The table, the suite column and its pytest
plugin live outside the package (``benchmarks/``)."""

import importlib
import inspect
import types
from dataclasses import replace
from pathlib import Path

import pytest

from minispec.lab.explorer.explorer import Scope, explore
from minispec.lab.explorer.mutants import MUTANTS, V1, V2, Catch, Edit, SwitchSet, applied, mutant
from minispec.lab.records.threads import references, thread
from minispec.v1.worker.gpu_model_runner import GPUModelRunner
from minispec.v1.worker.runner_fixes import READD_SPEC_TOKENS, RunnerFixes, skip_spec_tokens
from minispec.v1.worker.switchboard import resolve_switches
from minispec.v1.worker.switches import Switches

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(monkeypatch):
    """The benchmark's own modules, imported from ``benchmarks/`` (not installed)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return types.SimpleNamespace(table=importlib.import_module("bench_mutants"),
                                 plugin=importlib.import_module("mutant_plugin"))


def _patched(m):
    """The (owner, attribute) pairs the mutant patches."""
    if isinstance(m.change, SwitchSet):
        return [(Switches, "pick")]
    return [(m.change.owner, m.change.name)]


def test_the_catalogue_has_at_least_25_distinct_mutants_of_both_designs():
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names) >= 25
    assert {m.design for m in MUTANTS} == {V1, V2}
    assert all(m.name.startswith(m.design.value + "-") for m in MUTANTS)
    assert len({m.change.diff() for m in MUTANTS}) == len(MUTANTS)  # no two make the same change


@pytest.mark.parametrize("m", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_is_applied_and_put_back_even_after_an_error(m):
    before = [inspect.getattr_static(owner, name) for owner, name in _patched(m)]
    with pytest.raises(ZeroDivisionError), applied(m):
        assert [inspect.getattr_static(o, n) for o, n in _patched(m)] != before
        raise ZeroDivisionError
    assert all(inspect.getattr_static(o, n) is b for (o, n), b in zip(_patched(m), before))


@pytest.mark.parametrize("m", [m for m in MUTANTS if isinstance(m.change, Edit)], ids=lambda m: m.name)
def test_an_edit_changes_exactly_its_line(m):
    function = m.change.mutated()
    code = getattr(function, "__func__", function).__code__
    assert code.co_filename == f"<mutant of {m.change.where}>"
    assert m.change.old != m.change.new


def test_an_edit_whose_line_is_gone_is_refused_by_name():
    with pytest.raises(ValueError, match=r"GPUModelRunner._write_spec_tokens.*'no such line'.*found it 0 times"):
        Edit(GPUModelRunner, "_write_spec_tokens", "no such line", "None").mutated()


def test_a_switch_mutant_leaves_explicit_settings_alone():
    def learners(runner, row, spec_token_ids):
        """A learner's function."""

    fix = GPUModelRunner._write_spec_tokens
    with applied(mutant("v1-readd-no-drafts")):
        assert Switches().pick(READD_SPEC_TOKENS, fix) is skip_spec_tokens
        given = resolve_switches(V1, fixes=RunnerFixes(readd_spec_tokens=learners))
        assert given.pick(READD_SPEC_TOKENS, fix) is learners
    assert Switches().pick(READD_SPEC_TOKENS, fix) is fix


def test_each_reference_is_in_the_thread_table():
    """Each names its thread by number (in a string, which tests/test_threads.py does not
    read: a quoted "#N" may be a colour), looked up here; the forum thread is not on GitHub."""
    for m in MUTANTS:
        found = references(m.reference)
        assert found or m.reference in ("", "the forum thread, vLLM 0.9.2 to 0.14"), m.name
        for repo, number in found:
            assert thread(repo, number)


def test_the_suite_subsets_name_files_that_exist(bench):
    assert all((ROOT / f).is_file() for files in bench.table.SUITE.values() for f in files)


def test_the_plugin_applies_the_mutant_for_the_session_and_puts_it_back(bench):
    mutant_plugin = bench.plugin
    m = mutant("v2-generation-not-bumped")
    original = inspect.getattr_static(m.change.owner, m.change.name)
    config = types.SimpleNamespace(getoption=lambda option: m.name)
    mutant_plugin.pytest_configure(config)
    try:
        assert inspect.getattr_static(m.change.owner, m.change.name) is not original
        assert mutant_plugin.pytest_report_header(config) == f"mutant applied: {m.name}"
    finally:
        mutant_plugin.pytest_unconfigure(config)
    assert inspect.getattr_static(m.change.owner, m.change.name) is original


def test_an_unknown_mutant_is_refused_with_the_names():
    with pytest.raises(KeyError, match="'v3-nothing'.*v1-readd-no-drafts"):
        mutant("v3-nothing")


# The explorer's catch, asserted where it is cheap: (mutant, the index of the first failing
# schedule in Scope(max_requests=2), the plain engine's schedules first: measured, issue 36).
CHEAP = [("v1-drafts-gated-by-rank", 1), ("v1-sampled-after-drafts", 7), ("v2-optimistic-num-computed", 7),
         ("v2-slot-reuse", 211)]


@pytest.mark.parametrize("name,index", CHEAP, ids=[c[0] for c in CHEAP])
def test_the_explorer_catches_a_cheap_subset_at_the_schedule_the_benchmark_measured(name, index):
    m = mutant(name)
    scope = Scope(max_requests=2)
    with applied(m):
        found = explore(m.engine_args, scope, limit=index)
    assert found.counterexample is not None and found.schedules_run == index
    assert explore(m.engine_args, scope, limit=index).counterexample is None  # the mutant, not the design


def test_the_table_counts_catches_and_the_findings_are_what_nothing_caught(bench):
    Row, render_table, uncaught = bench.table.Row, bench.table.render_table, bench.table.uncaught
    yes, no = Catch(True, "1 req, 2 steps"), Catch(False, "40 schedules")
    # made-up rows: since prefix caching, the explorer catches v2-drafts-not-cleared too (below)
    rows = [Row(mutant("v2-slot-reuse"), yes, yes, no, no), Row(mutant("v2-drafts-not-cleared"), no, no, no, no)]
    table = render_table(rows)
    assert "| v2-slot-reuse | v2 | #39833 | **yes**: 1 req, 2 steps | **yes**: 1 req, 2 steps | no: 40 schedules |" in table
    assert table.splitlines()[-1] == "| caught | | | 1 of 2 | 1 of 2 | 0 of 2 | 0 of 2 |"
    assert uncaught(rows) == [mutant("v2-drafts-not-cleared")]


def test_greedy_equality_alone_misses_a_draft_write_the_invariants_see():
    """#20530's kind: the last rank's drafts never written, so every draft is rejected and the
    output stays greedy; only the draft-agreement invariant notices, on the first schedule."""
    m = mutant("v1-drafts-gated-by-rank")
    with applied(m):
        assert explore(m.engine_args, Scope(max_requests=1), limit=1, invariants=False).counterexample is None
        found = explore(m.engine_args, Scope(max_requests=1), limit=1).counterexample
    assert found is not None and "draft agreement" in str(found.failure)


def test_a_padded_first_decode_under_prefix_caching_catches_drafts_not_cleared():
    """A new slot keeps its previous occupant's drafts: only a first step that is a decode reads
    them, which prefix caching brings (B's prompt is A's, and B waits for A's one slot). Without
    prefix caching the same scope never reads them; with it and without the mutant, it runs clean."""
    m = mutant("v2-drafts-not-cleared")
    scope = Scope(max_requests=2, prompt_lengths=(5,), max_tokens=(2,), arrival_steps=(0,), right_drafts=(0,),
                  max_num_seqs=(1,), enable_prefix_caching=(False, True))
    assert explore(m.engine_args, scope).counterexample is None
    with applied(m):
        assert explore(m.engine_args, replace(scope, enable_prefix_caching=(False,))).counterexample is None
        found = explore(m.engine_args, scope).counterexample
    assert found is not None and found.schedule.enable_prefix_caching
    assert (found.failure.violation.invariant, found.failure.violation.req_id) == (2, "B")
    assert "expected draft slots [0, 0, 0]" in str(found.failure)


def test_a_step_limit_turns_a_hung_engine_into_an_error_and_is_put_back():
    from minispec import LLM, SamplingParams
    from minispec.lab.explorer.explorer import STANDIN
    from minispec.lab.explorer.mutants import step_limit
    from minispec.v1.engine.core import EngineCore

    original = inspect.getattr_static(EngineCore, "_engine_step_events")
    llm = LLM(STANDIN, block_size=4)
    with step_limit(2), pytest.raises(RuntimeError, match="unfinished after 2 steps"):
        llm.generate(["A list is "], SamplingParams(temperature=0, max_tokens=6))
    assert inspect.getattr_static(EngineCore, "_engine_step_events") is original
    assert len(llm.generate(["A list is "], SamplingParams(temperature=0, max_tokens=6))[0].outputs[0].token_ids) == 6

