"""The map of vLLM v1 (minispec/lab/viz/map.py): real files, the step's order, text in its boxes."""

import re
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from minispec.lab.viz.legible import DPI, SCREEN_PX, drawn_width_px, too_small
from minispec.lab.viz.map import FULL, WORKSHOP, components, flow, render_map

PKG = Path(__file__).resolve().parents[1] / "minispec"


@pytest.mark.parametrize("pp", [1, 2, 3])
def test_one_runner_and_input_batch_per_stage_and_only_the_last_proposes(pp):
    names = [b.name for b in components(pp)]
    assert sum(n.endswith("GPUModelRunner") for n in names) == pp == sum(n.endswith("InputBatch") for n in names)
    proposers = [b.name for b in components(pp) if "propose" in b.role]
    assert proposers == [f"stage {pp - 1}: GPUModelRunner"]


def test_every_box_names_a_minispec_module_and_the_twin_its_docstring_names():
    # that each twin exists in its vLLM release is tests/test_vllm_map.py's check
    for box in components(3, FULL):
        assert (PKG / box.minispec).is_file(), box
        docstring = (PKG / box.minispec).read_text().split('"""')[1]
        assert box.vllm in " ".join(re.sub(r"/\s*\n\s*", "/", docstring).split()), box
        assert box.vllm.startswith("vllm/v1/") or box.vllm == "vllm/entrypoints/llm.py", box


@pytest.mark.parametrize("pp", [1, 2, 3])
def test_the_flow_is_one_engine_step_in_order(pp):
    edges = flow(pp)
    names = {b.name for b in components(pp)}
    assert all(a in names and b in names for a, b, _ in edges)
    # Follow the step from the API: every box is reached, and the step returns to the engine.
    path, node = [], "LLM.generate"
    nexts = {}
    for a, b, _ in edges:
        if not b.endswith("InputBatch"):
            nexts.setdefault(a, b)
    while node not in path:
        path.append(node)
        node = nexts[node]
    assert node == "EngineCore" and path[-1] == "Scheduler.update_from_output"
    assert path[:4] == ["LLM.generate", "EngineCore", "Scheduler.schedule", "Executor"]
    assert path[4:-1] == [f"stage {s}: GPUModelRunner" for s in range(pp)]
    assert {b for a, b, label in edges if label == "_update_states"} == {n for n in names if n.endswith("InputBatch")}


def _drawn(pp, layout):
    fig = render_map(pp, layout)
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    boxes = {p.get_gid(): p.get_window_extent(renderer) for p in ax.patches if (p.get_gid() or "").startswith("box:")}
    return fig, ax, renderer, boxes


@pytest.mark.parametrize("layout", [WORKSHOP, FULL], ids=["workshop", "full"])
@pytest.mark.parametrize("pp", [1, 2, 3])
def test_every_label_fits_inside_its_box(pp, layout):
    fig, ax, renderer, boxes = _drawn(pp, layout)
    texts = [t for t in ax.texts if (t.get_gid() or "").startswith(("name:", "text:"))]
    assert len(texts) == 2 * len(components(pp))
    for text in texts:
        box = boxes["box:" + text.get_gid().split(":", 1)[1]]
        inner = text.get_window_extent(renderer)
        assert box.x0 <= inner.x0 and inner.x1 <= box.x1 and box.y0 <= inner.y0 and inner.y1 <= box.y1, text.get_text()
    shown = "\n".join(t.get_text() for t in ax.texts)
    paths = "minispec/v1/worker/gpu_input_batch.py" in shown and "vLLM: vllm/v1/engine/core.py" in shown
    assert paths == layout.paths


@pytest.mark.parametrize("layout", [WORKSHOP, FULL], ids=["workshop", "full"])
@pytest.mark.parametrize("pp", [1, 2, 3])
def test_arrow_labels_and_title_stay_in_the_figure_and_off_the_boxes(pp, layout):
    fig, ax, renderer, boxes = _drawn(pp, layout)
    frame = fig.bbox
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith(("label:", "title"))]
    assert len(labels) == len(flow(pp)) - max(pp - 2, 0) + 1  # bars to the middle stages share one label
    for text in labels:
        extent = text.get_window_extent(renderer)
        assert frame.x0 <= extent.x0 and extent.x1 <= frame.x1 and frame.y0 <= extent.y0 and extent.y1 <= frame.y1, text.get_text()
        overlapping = [gid for gid, box in boxes.items() if box.overlaps(extent)]
        assert not overlapping, (text.get_text(), overlapping)


def test_the_workshop_map_reads_on_a_1280x720_projector():
    """Every text at least 14 px by ``minispec.lab.viz.legible``'s rule (the 848-px output area at
    1280x720, file browser open; the dry run measured 11 px before its arrows were numbered), and the
    whole map within the screen's height under the browser's and JupyterLab's bars (about 560 px)."""
    fig = render_map(2, WORKSHOP)
    assert too_small(fig) == []
    assert fig.get_size_inches()[1] * DPI * min(1.0, SCREEN_PX / drawn_width_px(fig)) <= 560
    assert [text for text, _ in too_small(render_map(2, FULL))]  # why the workshop needs a layout of its own


def test_the_workshop_map_numbers_its_arrows_as_the_printed_flow_does():
    """The arrows carry the numbers of ``flow``'s list, printed under the map; the bars to the middle
    stages share one line, so its label holds all their numbers."""
    for pp in (2, 3):
        labels = sorted(t.get_text() for t in render_map(pp, WORKSHOP).axes[0].texts
                        if (t.get_gid() or "").startswith("label:"))
        numbers = sorted(int(n) for label in labels for n in label.split(", "))
        assert numbers == list(range(1, len(flow(pp)) + 1)), labels
    assert "5, 6" in [t.get_text() for t in render_map(3, WORKSHOP).axes[0].texts]


@pytest.mark.parametrize("pp", [1, 2, 3])
def test_the_executor_sends_the_scheduler_output_to_every_stage(pp):
    # vLLM v0.9.2 MultiprocExecutor.execute_model is a collective_rpc to all workers
    sent = {b for a, b, _ in flow(pp) if a == "Executor"}
    assert sent == {f"stage {s}: GPUModelRunner" for s in range(pp)}
    arrows = {p.get_gid() for p in render_map(pp).axes[0].patches if (p.get_gid() or "").startswith("arrow:")}
    assert {f"arrow:Executor->{b}" for b in sent} <= arrows


def test_layers_differ_by_more_than_colour():
    patches = {p.get_gid(): p for p in render_map(2).axes[0].patches if p.get_gid()}
    styles = {layer: (patches[f"box:{name}"].get_hatch(), patches[f"box:{name}"].get_linestyle())
              for layer, name in [("API", "LLM.generate"), ("engine", "EngineCore"), ("worker", "stage 0: InputBatch")]}
    assert len(set(styles.values())) == 3, styles
