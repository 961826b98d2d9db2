"""The vLLM map read from the docstrings."""

from minispec.lab.vllm_map import docstring_twin, render_twins_markdown, vllm_twins


def test_docstring_parsing():
    doc = ("Thing (vLLM: ``vllm/v1/executor/\n    multiproc_executor.py``), compare ``vllm/a.py``.\n\n"
           "Left out: ``.bin`` files, hubs\n(never). Another sentence.")
    twin = docstring_twin("x.py", doc)
    assert twin.vllm_paths == ("vllm/v1/executor/multiproc_executor.py", "vllm/a.py")
    assert twin.left_out == "``.bin`` files, hubs (never)."
    assert docstring_twin("y.py", "No twin here.") == docstring_twin("y.py", "No twin here.")
    assert docstring_twin("y.py", "No twin here.").left_out is None


def test_package_map():
    twins = {t.module: t for t in vllm_twins()}
    assert twins["v1/worker/gpu_model_runner.py"].vllm_paths[0] == "vllm/v1/worker/gpu_model_runner.py"
    assert twins["v1/core/sched/scheduler.py"].left_out.startswith("priorities, prefix caching")
    assert not any(m.split("/")[0] in ("instruments", "lab", "training") for m in twins)
    assert all(t.vllm_paths for t in twins.values())
    table = render_twins_markdown(list(twins.values())).splitlines()
    assert len(table) == 2 + len(twins)
    assert "| `v1/request.py` | `vllm/v1/request.py` | multimodal inputs" in "\n".join(table)
