"""The switchboard (``minispec/v1/worker/switchboard.py``): every switch, preset and plug on
every design, accepted where it applies and refused, with the argument, the value and the
design, where it does not; nothing given is ever ignored."""

import multiprocessing
import re
from dataclasses import fields
from pathlib import Path

import pytest

from minispec import LLM
from minispec.engine.arg_utils import EngineArgs
from minispec.v1.worker import runner_fixes as v1
from minispec.v1.worker import scheduler_switches as sched
from minispec.v1.worker import tree_switches as tree
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.gpu import runner_fixes as v2
from minispec.v1.worker.relay import runner_fixes as relay
from minispec.v1.worker.switchboard import arguments
from minispec.v1.worker.switches import ModelRunner, Switch, Switches

V1, V2, RELAY = ModelRunner.V1, ModelRunner.V2, ModelRunner.RELAY
MODULES = (v1, v2, relay, sched, tree)  # each design's switches, the scheduler's and the tree's; replicated has none


def mine(*args):
    """A learner's function: its name is what the messages show."""


# (argument, value, what it resolves to where it applies, the refusal on one other design or None)
CASES = [
    ("fixes", "vllm-0.9.2", {v1.READD_SPEC_TOKENS: v1.skip_spec_tokens, v1.SYNC_ACCEPTED_TOKENS: v1.slice_relayed_tokens},
     "fixes='vllm-0.9.2' applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", "vllm-0.14", {v1.SYNC_ACCEPTED_TOKENS: v1.slice_relayed_tokens},
     "fixes='vllm-0.14' applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", "all", {}, None),
    ("faults", "v2-stale-drafts", {v2.APPLY_DRAFTS: v2.keep_stale_drafts},
     "faults='v2-stale-drafts' applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "v2-optimistic-num-computed", {v2.NUM_REJECTED_ON_APPLY: v2.ignore_rejected},
     "faults='v2-optimistic-num-computed' applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "v2-slot-reuse", {v2.LIVE_ROWS: v2.every_row_live},
     "faults='v2-slot-reuse' applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "v2-broadcast-width", {v2.SAMPLE_WIDTH: v2.natural_width},
     "faults='v2-broadcast-width' applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "relay-pairing", {relay.PAIRING: relay.previous_forward_slot},
     "faults='relay-pairing' applies to model_runner='relay'; got model_runner='v1'"),
    ("faults", "relay-no-seq-lens", {relay.COMMIT_SEQ_LENS: relay.keep_optimistic_count},
     "faults='relay-no-seq-lens' applies to model_runner='relay'; got model_runner='v2'"),
    ("fixes", relay.RunnerFixes(pairing=mine), {relay.PAIRING: mine},
     "fixes=RunnerFixes(pairing=mine) applies to model_runner='relay'; got model_runner='replicated'"),
    ("fixes", relay.RunnerFixes(commit_seq_lens=False), {relay.COMMIT_SEQ_LENS: relay.keep_optimistic_count},
     "fixes=RunnerFixes(commit_seq_lens=False) applies to model_runner='relay'; got model_runner='v1'"),
    ("faults", "v2-drafts-posted-twice", {v2.POST_DRAFTS: v2.post_drafts_twice},
     "faults='v2-drafts-posted-twice' applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "v2-eagle3-taps-dropped", {v2.CAPTURES_TAPS: v2.capture_on_last_rank_only},
     "faults='v2-eagle3-taps-dropped' applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "v1-pp-async-column-0", {v1.PREV_SAMPLED_LAYOUT: v1.column_zero_layout},
     "faults='v1-pp-async-column-0' applies to model_runner='v1'; got model_runner='v2'"),
    ("faults", "v1-pp-async-trim-last-rank", {v1.TRIM_OPTIMISTIC: v1.trim_on_last_rank_only},
     "faults='v1-pp-async-trim-last-rank' applies to model_runner='v1'; got model_runner='relay'"),
    ("faults", "v1-pp-async-num-tokens-no-spec", {v1.NUM_TOKENS_NO_SPEC: v1.end_from_num_computed},
     "faults='v1-pp-async-num-tokens-no-spec' applies to model_runner='v1'; got model_runner='v2'"),
    ("faults", "v1-pp-async-stale-row", {v1.COMMIT_ROW: v1.row_at_receive},
     "faults='v1-pp-async-stale-row' applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v1.RunnerFixes(readd_spec_tokens=mine), {v1.READD_SPEC_TOKENS: mine},
     "fixes=RunnerFixes(readd_spec_tokens=mine) applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v1.RunnerFixes(readd_spec_tokens=False), {v1.READD_SPEC_TOKENS: v1.skip_spec_tokens},
     "fixes=RunnerFixes(readd_spec_tokens=False) applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v1.RunnerFixes(sync_accepted_tokens=mine), {v1.SYNC_ACCEPTED_TOKENS: mine},
     "fixes=RunnerFixes(sync_accepted_tokens=mine) applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v1.RunnerFixes(sync_accepted_tokens=False), {v1.SYNC_ACCEPTED_TOKENS: v1.slice_relayed_tokens},
     "fixes=RunnerFixes(sync_accepted_tokens=False) applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v1.RunnerFixes(move_row=mine), {v1.MOVE_ROW: mine},
     "fixes=RunnerFixes(move_row=mine) applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v1.RunnerFixes(), {}, "fixes=RunnerFixes() applies to model_runner='v1'; got model_runner='v2'"),
    ("fixes", v2.RunnerFixes(apply_broadcast=mine), {v2.APPLY_BROADCAST: mine},
     "fixes=RunnerFixes(apply_broadcast=mine) applies to model_runner='v2'; got model_runner='v1'"),
    ("fixes", v2.RunnerFixes(), {}, "fixes=RunnerFixes() applies to model_runner='v2'; got model_runner='v1'"),
    ("faults", "stale-output-dropped", {sched.STALE_OUTPUT_V1: sched.drop_stale_output,
                                        sched.STALE_OUTPUT_V2: sched.drop_stale_output},
     "faults='stale-output-dropped' applies to model_runner='v1' or 'v2'; got model_runner='relay'"),
    ("faults", "tree-path-not-compacted", {tree.TREE_COMPACTION_V1: tree.compacts_on_last_rank_only,
                                           tree.TREE_COMPACTION_V2: tree.compacts_on_last_rank_only,
                                           tree.TREE_COMPACTION_RELAY: tree.compacts_on_last_rank_only},
     "faults='tree-path-not-compacted' applies to model_runner='v1' or 'v2' or 'relay'; got model_runner='replicated'"),
]


def config(**kwargs):
    return EngineArgs(max_model_len=64, **kwargs).create_engine_config()


@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("argument,value,chosen,refusal", CASES, ids=[f"{a}={v!r}" for a, v, _, _ in CASES])
def test_each_switch_preset_and_plug_on_each_design(argument, value, chosen, refusal, design):
    """Accepted where it applies, resolved to the functions its runner will call; refused with
    the exact message where it does not (each case's refusal is written for one other design;
    on ``design`` it names ``design``). Only "all" (no fault) applies to every design."""
    applies = refusal is None or re.search(f"applies to model_runner=[^;]*{str(design)!r}[^;]*;", refusal)
    if applies:
        assert config(model_runner=design, **{argument: value}).switches == Switches(chosen)
    else:
        with pytest.raises(ValueError) as refused:
            config(model_runner=design, **{argument: value})
        assert str(refused.value) == re.sub(r"got model_runner='\w+'$", f"got model_runner={str(design)!r}", refusal)


def test_the_cases_cover_every_preset_and_every_switch_a_learner_can_set():
    assert {v for _, v, _, _ in CASES if isinstance(v, str)} == {str(p) for a in arguments().values() for kind in a.presets for p in kind}
    set_by_cases = {s for _, v, _, _ in CASES if not isinstance(v, str) for s in v.settings()}
    assert set_by_cases == {s for a in arguments().values() for cls in a.settings for s in cls.SWITCHES}


def test_a_preset_by_its_enum_is_the_preset_by_its_name():
    assert config(fixes=v1.Preset.VLLM_0_14) == config(fixes="vllm-0.14")
    assert config(model_runner=V2, faults=v2.FaultPreset.V2_SLOT_REUSE) == config(model_runner="v2",
                                                                                   faults="v2-slot-reuse")
    assert config(model_runner="v2").model_runner is V2


def test_a_preset_or_plug_given_to_the_other_argument_is_refused():
    with pytest.raises(ValueError, match=r"^fixes='v2-stale-drafts': expected one of \['all', 'vllm-0.14', "
                                         r"'vllm-0.9.2'\] or a RunnerFixes$"):
        config(model_runner="v2", fixes=v2.FaultPreset.V2_STALE_DRAFTS)
    with pytest.raises(ValueError, match=r"^faults=RunnerFixes\(apply_broadcast=mine\): expected None or one of "
                                         r"\['relay-no-seq-lens', 'relay-pairing', 'stale-output-dropped', "):
        config(model_runner="v2", faults=v2.RunnerFixes(apply_broadcast=mine))
    with pytest.raises(ValueError, match=r"^faults='vllm-0.9.2': expected None or one of"):
        config(faults="vllm-0.9.2")


@pytest.mark.parametrize("preset,inner", [("v2-stale-drafts", "apply_drafts"),
                                          ("v2-optimistic-num-computed", "num_rejected_on_apply")])
def test_a_fault_inside_a_replaced_function_is_refused(preset, inner):
    """The runner's own apply_broadcast is where these two faults run: a learner's replaces it,
    so the fault would never run."""
    with pytest.raises(ValueError) as refused:
        config(model_runner="v2", fixes=v2.RunnerFixes(apply_broadcast=mine), faults=preset)
    assert str(refused.value) == (f"faults='{preset}' switches {inner}, a part of the runner's own apply_broadcast, "
                                  "which fixes=RunnerFixes(apply_broadcast=mine) replaces: expected one of the two")


def test_a_fault_outside_a_plug_goes_with_it():
    switches = config(model_runner="v2", fixes=v2.RunnerFixes(apply_broadcast=mine), faults="v2-slot-reuse").switches
    assert switches == Switches({v2.APPLY_BROADCAST: mine, v2.LIVE_ROWS: v2.every_row_live})


@pytest.mark.parametrize("make,message", [
    (lambda: v1.RunnerFixes(move_row=False), r"^move_row=False: expected None \(the runner's own\) or a function$"),
    (lambda: v1.RunnerFixes(readd_spec_tokens=None),
     r"^readd_spec_tokens=None: expected True \(the fix\), False \(the fault\) or a function$"),
    (lambda: v1.RunnerFixes(sync_accepted_tokens=1), r"^sync_accepted_tokens=1: expected True \(the fix\)"),
    (lambda: v2.RunnerFixes(apply_broadcast="mine"), r"^apply_broadcast='mine': expected None \(the runner's own\)"),
])
def test_a_learner_s_settings_are_checked_when_built(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_refused_call_leaves_nothing_behind():
    """Refused before anything is built: no worker process, and the same settings work with
    the design they belong to."""
    plug = v1.RunnerFixes(move_row=mine)
    with pytest.raises(ValueError, match="applies to model_runner='v1'"):
        LLM(model_runner="v2", fixes=plug, distributed_executor_backend="mp", pipeline_parallel_size=2)
    assert multiprocessing.active_children() == []
    assert plug == v1.RunnerFixes(move_row=mine) and v1.Preset.VLLM_0_14.faults == (v1.SYNC_ACCEPTED_TOKENS,)
    assert config(fixes=plug).switches == Switches({v1.MOVE_ROW: mine})


def declared() -> set[Switch]:
    return {v for module in MODULES for v in vars(module).values() if isinstance(v, Switch)}


def test_each_design_s_settings_name_its_switches_and_every_switch_can_be_set():
    for cls in (v1.RunnerFixes, v2.RunnerFixes, relay.RunnerFixes):
        assert [f.name for f in fields(cls)] == [s.name for s in cls.SWITCHES]
    reachable = {s for a in arguments().values() for kind in a.presets for p in kind for s in p.faults}
    reachable |= {s for a in arguments().values() for cls in a.settings for s in cls.SWITCHES}
    assert reachable == declared()
    assert {s.design for s in vars(v1).values() if isinstance(s, Switch)} == {V1}
    assert {s.design for s in vars(v2).values() if isinstance(s, Switch)} == {V2}
    assert {s.design for s in vars(relay).values() if isinstance(s, Switch)} == {RELAY}
    assert {s.design for s in vars(sched).values() if isinstance(s, Switch)} == {V1, V2}
    assert {s.design for s in vars(tree).values() if isinstance(s, Switch)} == {V1, V2, RELAY}


@pytest.mark.parametrize("design", list(DESIGNS))
def test_each_design_s_runners_read_every_switch_of_their_design_and_no_other(monkeypatch, design):
    """What makes "accepted" mean "used": a switch no runner asks for would be ignored; and a
    design reads no other design's switch (replicated drafting, built on the relay's stage,
    reads none: the relay's presets are refused for it)."""
    asked = set()
    pick = Switches.pick

    def recording(self, switch, fix):
        asked.add(switch)
        return pick(self, switch, fix)

    monkeypatch.setattr(Switches, "pick", recording)
    LLM(pipeline_parallel_size=2, model_runner=design, max_model_len=64)
    assert asked == {s for s in declared() if s.design == design}


def test_the_readme_s_switch_table_lists_every_switch_with_its_design_and_module():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "faults_and_designs.md").read_text()
    rows = [line for line in readme.splitlines() if re.match(r"\| `\w+` \| (V[12]|RELAY) \| ", line)]
    assert len(rows) == len(declared())
    for module in MODULES:
        path = Path(module.__file__).relative_to(Path(__file__).resolve().parents[1])
        for switch in (v for v in vars(module).values() if isinstance(v, Switch)):
            row = f"| `{switch.name}` | {switch.design.name} | "
            assert any(r.startswith(row) and r.endswith(f"| `{path}` |") for r in rows), row
