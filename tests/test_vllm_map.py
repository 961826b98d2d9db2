"""The vLLM map read from the docstrings: the one source of the twin table.

The copy in docs/package_map.md is what ``tools/twin_table.py`` writes, and each twin path
exists in the vLLM release it names wherever that release's sources are cached
(``make vllm-check``'s cache, or ``$MINISPEC_VLLM_SOURCES``; skipped otherwise).
"""

import sys
from pathlib import Path

import pytest

from minispec.lab.records.twin_map import (
    Column,
    docstring_twin,
    render_twins_markdown,
    twin_of,
    vllm_twins,
)
from reference.sources import in_release, vllm_files

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "minispec"
sys.path.insert(0, str(ROOT / "tools"))
import twin_table  # noqa: E402


def test_docstring_parsing():
    doc = ("Thing (vLLM: ``vllm/v1/executor/\n    multiproc_executor.py``), compare ``vllm/a.py``.\n\n"
           "Left out: ``.bin`` files, hubs\n(never). Another sentence.")
    twin = docstring_twin("x.py", doc)
    assert twin.vllm_paths == ("vllm/v1/executor/multiproc_executor.py", "vllm/a.py")
    assert twin.vllm_path == "vllm/v1/executor/multiproc_executor.py" and twin.release == "0.9.2"
    assert twin.left_out == "``.bin`` files, hubs (never)."
    assert twin.summary == "Thing, compare ``vllm/a.py``."
    assert docstring_twin("y.py", "No twin here.") == docstring_twin("y.py", "No twin here.")
    assert docstring_twin("y.py", "No twin here.").left_out is None


def test_a_release_named_before_the_twin_is_its_release():
    doc = "Drafting (vLLM 0.15.0: ``vllm/v1/spec_decode/draft_model.py``), after ``vllm/x.py``."
    twin = docstring_twin("d.py", doc)
    assert (twin.vllm_path, twin.release, twin.summary) == ("vllm/v1/spec_decode/draft_model.py", "0.15.0", "Drafting.")


def test_package_map():
    twins = {t.module: t for t in vllm_twins()}
    assert twins["v1/worker/gpu_model_runner.py"].vllm_path == "vllm/v1/worker/gpu_model_runner.py"
    assert twins["v1/core/sched/scheduler.py"].left_out.startswith("priorities, encoder inputs")
    assert not any(m.split("/")[0] in ("instruments", "lab", "training") for m in twins)
    # every mirrored module names a twin, but the explorer's stand-in model and proposer, which
    # sit beside their kind and say why they have none; the fault switches name the file they switch
    no_twin = {m for m, t in twins.items() if not t.vllm_path}
    assert no_twin == {"model_executor/models/standin.py", "v1/spec_decode/scripted_proposer.py"}
    assert all(t.summary and "No vLLM twin" in (PKG / m).read_text() for m, t in twins.items() if m in no_twin)
    assert twins["v1/worker/runner_fixes.py"].vllm_path == "vllm/v1/worker/gpu_model_runner.py"
    assert (twin_of("v1/executor/uniproc_executor.py").vllm_path, twin_of("v1/executor/uniproc_executor.py").release) \
        == ("vllm/v1/executor/uniproc_executor.py", "0.13.0")
    table = render_twins_markdown(list(twins.values())).splitlines()
    assert len(table) == 2 + len(twins)
    assert "| `v1/request.py` | `vllm/v1/request.py` (0.9.2) | multimodal inputs" in "\n".join(table)
    with pytest.raises(KeyError, match="module='lab/experiments/scenarios.py': expected a mirrored module"):
        twin_of("lab/experiments/scenarios.py")


def test_the_readme_twin_table_is_what_the_tool_writes():
    readme = twin_table.PAGE.read_text()
    assert readme == twin_table.render(readme), "docs/package_map.md's twin table is out of date: run python tools/twin_table.py"
    assert render_twins_markdown(vllm_twins(), Column.SUMMARY) in readme


@pytest.mark.parametrize("twin", [t for t in vllm_twins() if t.vllm_path], ids=lambda t: t.module)
def test_each_twin_exists_in_the_release_it_names(twin):
    files = vllm_files(twin.release)
    if files is None:
        pytest.skip(f"vLLM {twin.release}'s sources are not cached here (make vllm-check, or $MINISPEC_VLLM_SOURCES)")
    assert in_release(files, twin.vllm_path), f"{twin.module}: {twin.vllm_path} is not in vLLM {twin.release}"


def test_a_missing_twin_would_be_caught():
    files = frozenset({"vllm/platforms/cuda.py", "vllm/v1/request.py"})
    assert in_release(files, "vllm/platforms") and in_release(files, "vllm/v1/request.py")
    assert not in_release(files, "vllm/v1/executor/uniproc_executor.py") and not in_release(files, "vllm/v1/req")
