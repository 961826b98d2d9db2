"""The explorer's schedules through vLLM's own state code (reference.explore).

The first tests need only minispec: the schedules taken, the classes and the minimal
counterexample, the departures' predicates, the command line. The tests marked ``vllm`` run
vLLM's code on the explorer's first schedules, with a planted divergence (minispec under a
preset that is not the release's) that the run must find and class as the known fault it is;
they skip without the vLLM environment unless ``MINISPEC_REQUIRE_VLLM=1`` (``make vllm-check``).
"""

import os

import pytest

from minispec.lab.explorer.explorer import DEFAULT, schedules
from reference import environment, explore
from reference.compare import Comparison, Difference
from reference.explore import V1, V2, Divergence, Target, TargetResult, explore_vllm, explorer_schedules

FOURTEEN, THIRTY_THREE = Target("0.14.0", V1, "vllm-0.14"), Target("0.33.0", V1, "vllm-0.14")
ALL_EQUAL = Comparison(3, 3, [])


def _differs(*differences: Difference) -> Comparison:
    return Comparison(3, 3 - len(differences), list(differences))


def test_schedules_are_the_explorers_synchronous_ones_in_its_order():
    taken = explorer_schedules(DEFAULT, limit=40)
    every = [s for s in schedules(DEFAULT)][: taken[-1][0] + 1]
    assert [i for i, _ in taken] == [i for i, s in enumerate(every) if not s.async_scheduling]
    assert all(s.name == f"schedule {i}" and not s.check_invariants for i, s in taken)


def test_per_shape_keeps_the_first_schedules_of_each_engine_shape():
    taken = explorer_schedules(DEFAULT, per_shape=2, limit=64)
    shapes = [(s.pipeline_parallel_size, s.num_gpu_blocks, s.max_num_batched_tokens, s.max_num_seqs) for _, s in taken]
    assert max(shapes.count(shape) for shape in shapes) == 2 and len(set(shapes)) == len(taken) // 2
    assert [i for i, _ in taken] == sorted(i for i, _ in taken)


def test_the_minimal_counterexample_has_the_fewest_requests_then_steps():
    (_, one), (_, two) = explorer_schedules(DEFAULT, limit=1)[0], next(
        (i, s) for i, s in explorer_schedules(DEFAULT, limit=400) if len(s.requests) == 2)
    d = Difference(4, 0, "token_ids_cpu", "row 0", [1], [2])
    result = TargetResult(FOURTEEN, divergences=[Divergence(300, two, _differs(d)), Divergence(900, one, _differs(d))])
    assert result.minimal()["new"].index == 900  # later in the explorer's order, but one request
    assert result.classes() == {"new": result.divergences}


def test_pr_41133_departure_needs_0140_equal_and_0330s_relay_write():
    capture = type("C", (), {"trace": type("T", (), {"pipeline_parallel_size": 2})()})()
    mine = {"token_ids_cpu": [[35, 3, 28, 34, 73, 41], [0] * 6], "num_tokens_no_spec": [5], "num_tokens": [6]}

    def check(tokens, target=THIRTY_THREE, fourteen=ALL_EQUAL, stage=0, buffer="token_ids_cpu", no_spec=5):
        d = Difference(4, stage, buffer, "row 0", None, None)
        theirs = {"token_ids_cpu": tokens, "num_tokens_no_spec": [no_spec], "num_tokens": [no_spec + 1]}
        keyed = [{(4, stage): buffers} for buffers in (mine, theirs)]
        others = {"buffers": keyed} | ({} if fourteen is None else {"0.14.0": fourteen})
        return explore._holds_41133(target, capture, _differs(d), others)

    broadcast = [[35, 3, 28, 73, 73, 41], [0] * 6]  # 0.33.0: the relayed 73 over the accepted 34
    assert check(broadcast)
    assert check([[35, 3, 73, 73, 73, 41], [0] * 6])  # two slots before the relayed one
    assert not check([[35, 3, 28, 5, 73, 41], [0] * 6])  # a slot holding something else
    assert check([[35, 3, 28, 34, 73, 9], [0] * 6], no_spec=6, buffer="num_tokens_no_spec")  # kept longer
    assert not check(mine["token_ids_cpu"], no_spec=4, buffer="num_tokens_no_spec")  # lowered: not 0.33.0's
    assert not check(broadcast, fourteen=Comparison(3, 2, []))  # 0.14.0 differs too
    assert not check(broadcast, fourteen=None)  # 0.14.0 not run: not this departure
    assert not check(broadcast, target=FOURTEEN)
    assert not check(broadcast, stage=1)  # the last stage writes no relay
    assert not check(broadcast, buffer="drafts")


def test_pr_41133_departure_keeps_what_lies_below_where_0330s_write_starts():
    """Schedule 10200 of the whole scope, step 12, stage 0: B resumed with 3 tokens computed and
    4 in the row. 0.14.0 (and minispec) rewrite from slot 3 with the relay (98, the last stage's
    token); 0.33.0 writes from slot 4 and keeps the 11 it held."""
    capture = type("C", (), {"trace": type("T", (), {"pipeline_parallel_size": 2})()})()
    mine = {"req_ids": ["B"], "token_ids_cpu": [[53, 85, 12, 98, 48, 11]], "num_tokens_no_spec": [6],
            "num_tokens": [6]}
    theirs = mine | {"token_ids_cpu": [[53, 85, 12, 11, 48, 11]]}

    def holds(before_tokens, before_no_spec=4):
        before = {"req_ids": ["B"], "token_ids_cpu": [before_tokens], "num_tokens_no_spec": [before_no_spec]}
        keyed = [{(11, 0): before, (12, 0): mine}, {(11, 0): before, (12, 0): theirs}]
        d = Difference(12, 0, "token_ids_cpu", "row 0", None, None)
        return explore._holds_41133(THIRTY_THREE, capture, _differs(d), {"buffers": keyed, "0.14.0": ALL_EQUAL})

    assert holds([53, 85, 12, 11, 0, 0])
    assert not holds([53, 85, 12, 7, 0, 0])  # planted: vLLM changed a slot below where it writes
    assert not holds([53, 85, 12, 11, 0, 0], before_no_spec=3)  # slot 3 was inside its write
    assert not explore._relay_slots(mine, theirs)  # without the step before, only the spread is known


def test_0330s_v1_brings_0140_along_first_and_nothing_else_does():
    assert explore.with_needed((THIRTY_THREE,)) == (FOURTEEN, THIRTY_THREE)
    assert explore.with_needed((THIRTY_THREE, FOURTEEN)) == (FOURTEEN, THIRTY_THREE)
    alone = (Target("0.9.2", V1, "vllm-0.9.2"), Target("0.33.0", V2, explore.v2_run.FIXED), Target("0.14.0", V1, "all"))
    assert explore.with_needed(alone) == alone


def test_each_design_tries_the_other_presets_first_the_releases_nearest():
    assert explore.candidates(FOURTEEN) == ("vllm-0.9.2", "all")
    assert explore.candidates(Target("0.14.0", V1, "all"))[0] == "vllm-0.14"
    v2 = explore.candidates(Target("0.30.0", V2, "v2-stale-drafts"))
    assert v2[0] == "fixed" and "v2-stale-drafts" not in v2 and "v2-broadcast-width" in v2


@pytest.mark.parametrize("argv, message", [
    (["--per-shape", "0"], "--per-shape=0: expected a number >= 1"),
    (["--release", "0.14.0", "--design", "V2"], "no target is release"),
])
def test_bad_command_lines_are_refused_naming_the_option(argv, message, capsys):
    with pytest.raises(SystemExit):
        explore.main(argv)
    assert message in capsys.readouterr().err


def test_render_names_each_class_and_its_minimal_counterexample():
    (_, s), = explorer_schedules(DEFAULT, limit=1)
    d = Divergence(7, s, _differs(Difference(4, 0, "drafts", "row 0", [1], [2])), "known fault: x")
    text = explore.render({FOURTEEN: TargetResult(FOURTEEN, 10, 9, 30, 29, 1.0, [d])})
    assert "| 0.14.0 | V1 | vllm-0.14 | 10 | 9/10 | 29/30 | 1 | known fault: x: 1 | 1 |" in text
    assert "minimal counterexample schedule 7 (" in text and "step 4 stage 0: drafts row 0" in text


# -- vLLM's own code --------------------------------------------------------

def _require_vllm(releases):
    if why := environment.missing(releases):
        if os.environ.get("MINISPEC_REQUIRE_VLLM") == "1":
            pytest.fail(f"MINISPEC_REQUIRE_VLLM=1 but {why}")
        pytest.skip(why)


@pytest.mark.vllm
def test_the_explorers_first_schedules_agree_with_0140_and_differ_from_0330_only_by_41133():
    _require_vllm(("0.14.0", "0.33.0"))
    # 0.33.0 asked for alone: 0.14.0 runs too, or each relay-write divergence would be "new"
    results = explore_vllm((THIRTY_THREE,), limit=12, progress=lambda s: None)
    assert results[FOURTEEN].runs == results[FOURTEEN].runs_equal == 12
    kinds = {d.kind for d in results[THIRTY_THREE].divergences}
    assert kinds <= {explore.DEPARTURES[1][0]} and results[THIRTY_THREE].runs == 12


@pytest.mark.vllm
def test_a_planted_divergence_is_found_and_classed_as_the_known_fault():
    """Planted: minispec's V1 with fix 2 (``all``) against 0.14.0, which has fault 2. The
    explorer's first schedules must differ, and each is classed as the fault of the preset
    that mirrors 0.14.0; the smallest one has one request."""
    _require_vllm(("0.14.0",))
    planted = Target("0.14.0", V1, "all")
    result = explore_vllm((planted,), limit=12, progress=lambda s: None)[planted]
    assert result.divergences and result.runs_equal < result.runs
    assert {d.kind.split(" (")[0] for d in result.divergences} == {"known fault: minispec under 'vllm-0.14' matches"}
    assert len(next(iter(result.minimal().values())).schedule.requests) == 1
