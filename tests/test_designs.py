"""The registry of runner designs (``minispec/v1/worker/designs.py``): each record says what the
engine needs to know, the engine asks the record, and nothing outside the designs and the
registry branches on a design's name."""

import pickle
import re
from pathlib import Path

import pytest

from minispec.engine.arg_utils import EngineArgs
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.switches import ModelRunner

PKG = Path(__file__).resolve().parents[1] / "minispec"


@pytest.mark.parametrize("pp", [1, 2, 3, 4])
def test_v1_s_and_v2_s_records_give_vllm_s_batches_in_flight(pp):
    """vLLM 0.30.0 ``config/vllm.py`` 588-599: under async scheduling V2 keeps pp + 1 batches in
    flight, V1 two without pipeline parallelism and pp with it; synchronously, pp."""
    def in_flight(design, async_scheduling):
        return EngineArgs(model_runner=design, pipeline_parallel_size=pp, max_model_len=64,
                          async_scheduling=async_scheduling).create_engine_config().max_concurrent_batches

    assert (in_flight("v2", True), in_flight("v1", True)) == (pp + 1, max(pp, 2))
    assert {in_flight(d, False) for d in DESIGNS} == {pp}


def test_v2_s_record_makes_a_decoding_request_wait_one_round():
    """``next_decode_eligible_step`` (vLLM 0.30.0 ``v1/core/sched/async_scheduler.py`` 46-49): pp batches."""
    assert [DESIGNS["v2"].decode_wait_batches(pp) for pp in (1, 2, 3)] == [1, 2, 3]
    assert [DESIGNS["v1"].decode_wait_batches(pp) for pp in (1, 2, 3)] == [0, 0, 0]


def test_the_built_in_names_are_model_runner_s_members_and_what_they_carry_beyond_tokens():
    """V1 and V2 carry an EAGLE head's taps in the IntermediateTensors; a tree's accepted path is
    learned on every stage of V2 and the relay, and of V1 where its stages learn the sampled tokens."""
    assert list(DESIGNS) == list(ModelRunner)
    assert all(DESIGNS[d].name is d for d in ModelRunner)
    assert [d.name for d in DESIGNS.values() if d.can_carry_hidden_states] == ["v1", "v2"]
    carries = {(pp, a): [d.name for d in DESIGNS.values() if d.carries_tree(pp, a)] for pp in (1, 2) for a in (0, 1)}
    assert carries == {(1, 0): ["v1", "v2", "relay"], (1, 1): ["v1", "v2", "relay"], (2, 0): ["v2", "relay"],
                       (2, 1): ["v1", "v2", "relay"]}
    assert all(d.hidden_states_why for d in DESIGNS.values() if not d.can_carry_hidden_states)
    assert all(d.tree_drafts_why for d in DESIGNS.values())


def test_a_config_pickles_with_its_design_s_record():
    """What the "mp" workers get: the record travels in the config, its runner imported by name."""
    for design in DESIGNS:
        config = EngineArgs(model_runner=design, max_model_len=64).create_engine_config()
        assert pickle.loads(pickle.dumps(config)).design == config.design


# The machinery: everything outside the design packages, the registry and the lessons (the lab
# runs the design it teaches, by name).
# The scheduler's switch file declares which designs its preset was checked on, as a design's
# runner_fixes.py declares its own switches.
DESIGN_FILES = {"v1/worker/gpu_model_runner.py", "v1/worker/runner_fixes.py", "v1/worker/pp_prev_sampled.py",
                "v1/worker/designs.py", "v1/worker/switches.py", "v1/worker/scheduler_switches.py",
                "v1/worker/tree_switches.py"}
NAME_AS_VALUE = re.compile(r"""["'](v1|v2|relay|replicated)["']|ModelRunner\.(V1|V2|RELAY|REPLICATED)\b"""
                           r"""|in ModelRunner\b|ModelRunner\(""")


def names_as_values(source: str) -> list[str]:
    """Code lines (docstrings and comments left out) that use a design's name as a value."""
    lines, in_doc = [], False
    for line in source.splitlines():
        if line.count('"""') % 2:
            in_doc = not in_doc
            continue
        code = line.split("#")[0]
        if not in_doc and '"""' not in line and NAME_AS_VALUE.search(code):
            lines.append(line.strip())
    return lines


def machinery() -> list[Path]:
    return [p for p in PKG.rglob("*.py") if "lab" not in p.relative_to(PKG).parts
            and not {"gpu", "relay"} & set(p.relative_to(PKG).parts[:3])
            and str(p.relative_to(PKG)) not in DESIGN_FILES]


def test_no_design_name_is_used_as_a_value_outside_the_designs():
    """The config, the engine, the executors, the CLI and the instruments ask the record (issue 32:
    7 such uses before the registry)."""
    found = {str(p.relative_to(PKG)): hits for p in machinery() if (hits := names_as_values(p.read_text()))}
    assert found == {}


def test_the_scan_catches_a_name_used_as_a_value():
    """Planted: the branch the engine had before the registry, and the CLI's old choices."""
    planted = 'x = 1\n    use_v2 = vllm_config.model_runner == "v2"\n"""a "v1" docstring"""\n'
    assert names_as_values(planted) == ['use_v2 = vllm_config.model_runner == "v2"']
    assert names_as_values('p.add_argument("--model-runner", choices=["v1", "v2"])  # here') != []
    assert any(p.name == "core.py" for p in machinery()) and any(p.name == "gpu_check.py" for p in machinery())
