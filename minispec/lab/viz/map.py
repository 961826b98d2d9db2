"""The map of vLLM v1 that minispec mirrors, as one matplotlib figure (pure:
``render_map(...) -> Figure``).

One box per component a request passes through, each naming its minispec module
and the vLLM v0.9.2 file it mirrors; arrows carry what one hands to the next. The
executor sends the same ``SchedulerOutput`` to every stage (v0.9.2's
``MultiprocExecutor.execute_model`` is a ``collective_rpc`` to all workers), so
each stage updates its own ``InputBatch`` from it.
The left column is the engine's loop, one ``ModelRunner`` per pipeline stage
runs to the right, each with its own ``InputBatch`` below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Okabe-Ito (colour-blind safe); the legend names each layer, and each layer also has its own
# hatching and outline (hatch, line style), so colour is never the only cue.
LAYERS = {"API": "#E69F00", "engine": "#56B4E9", "worker": "#009E73"}
LAYER_STYLE = {"API": ("..", "--"), "engine": (None, "-"), "worker": ("//", "-")}
ENGINE_W, STAGE_W, GAP, BOX_H = 3.7, 3.7, 0.9, 1.15  # boxes share a width, so columns align  # inches = data units
ROWS = (7.0, 5.35, 3.7, 2.05, 0.3)  # box bottoms, top row first
HEIGHT = 8.5


def figure_width(pipeline_parallel_size: int) -> float:
    return 0.2 + ENGINE_W + pipeline_parallel_size * (GAP + STAGE_W) + 0.2


@dataclass(frozen=True)
class Box:
    name: str
    role: str
    minispec: str  # path under minispec/
    vllm: str  # path in vLLM v0.9.2
    layer: str
    x: float
    y: float
    w: float = ENGINE_W
    h: float = BOX_H


def components(pipeline_parallel_size: int = 2) -> list[Box]:
    """The engine's loop down the left column; the stages along the bottom rows."""
    boxes = [
        Box("LLM.generate", "queues prompts, steps the engine", "entrypoints/llm.py",
            "vllm/entrypoints/llm.py", "API", 0.2, ROWS[0]),
        Box("EngineCore", "step_with_batch_queue:\nup to PP batches in flight",
            "v1/engine/core.py", "vllm/v1/engine/core.py", "engine", 0.2, ROWS[1]),
        Box("Scheduler.schedule", "who runs, how many tokens,\nwhich drafts",
            "v1/core/sched/scheduler.py", "vllm/v1/core/sched/scheduler.py", "engine", 0.2, ROWS[2]),
        Box("Executor", "sends each SchedulerOutput\nto every stage", "v1/executor/inproc_executor.py",
            "vllm/v1/executor/multiproc_executor.py", "engine", 0.2, ROWS[3]),
    ]
    for stage in range(pipeline_parallel_size):
        x = 0.2 + ENGINE_W + GAP + stage * (GAP + STAGE_W)
        last = stage == pipeline_parallel_size - 1
        role = "forward, sample, verify drafts,\npropose new drafts" if last else "forward of its layers,\nsend hidden states"
        boxes.append(Box(f"stage {stage}: ModelRunner", role, "v1/worker/gpu_model_runner.py",
                         "vllm/v1/worker/gpu_model_runner.py", "worker", x, ROWS[3]))
        boxes.append(Box(f"stage {stage}: InputBatch", "persistent rows: token_ids_cpu,\nreq_id_to_index",
                         "v1/worker/gpu_input_batch.py", "vllm/v1/worker/gpu_input_batch.py", "worker",
                         x, ROWS[4]))
    boxes.append(Box("Scheduler.update_from_output", "accept drafts, append tokens,\nfinish requests",
                     "v1/core/sched/scheduler.py", "vllm/v1/core/sched/scheduler.py", "engine", x, ROWS[1]))
    return boxes


def flow(pipeline_parallel_size: int = 2) -> list[tuple[str, str, str]]:
    """(from box, to box, what passes) for one engine step, in the order it happens."""
    runners = [f"stage {s}: ModelRunner" for s in range(pipeline_parallel_size)]
    edges = [("LLM.generate", "EngineCore", "add_request, step"),
             ("EngineCore", "Scheduler.schedule", "schedule()"),
             ("Scheduler.schedule", "Executor", "SchedulerOutput"),
             ("Executor", runners[0], "execute_model")]
    # every stage gets the same SchedulerOutput, not only stage 0
    edges += [("Executor", runner, "execute_model: the same SchedulerOutput") for runner in runners[1:]]
    for stage, runner in enumerate(runners):
        edges.append((runner, f"stage {stage}: InputBatch", "_update_states"))
        if stage + 1 < len(runners):
            edges.append((runner, runners[stage + 1], "hidden states"))
    return edges + [(runners[-1], "Scheduler.update_from_output", "ModelRunnerOutput"),
                    ("Scheduler.update_from_output", "EngineCore", "oldest batch done")]


def _ends(a: Box, b: Box) -> tuple[tuple[float, float], tuple[float, float]]:
    """Facing sides of two boxes that share a row or a column."""
    if a.y == b.y:
        y = a.y + a.h / 2
        return ((a.x + a.w, y), (b.x, y)) if a.x < b.x else ((a.x, y), (b.x + b.w, y))
    x = a.x + a.w / 2
    return ((x, a.y), (x, b.y + b.h)) if a.y > b.y else ((x, a.y + a.h), (x, b.y))


def _bar_route(a: Box, b: Box) -> tuple[tuple[float, float], tuple[float, float], str]:
    """Top of ``a`` to top of ``b`` over the boxes between them (same row)."""
    return (a.x + a.w - 0.4, a.y + a.h), (b.x + 0.5, b.y + b.h), f"bar,fraction={-0.25 / (b.x + 0.9 - a.x - a.w)}"


def render_map(pipeline_parallel_size: int = 2) -> Figure:
    boxes = {b.name: b for b in components(pipeline_parallel_size)}
    width = figure_width(pipeline_parallel_size)
    fig = Figure(figsize=(width, HEIGHT))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, HEIGHT)
    ax.axis("off")
    for b in boxes.values():
        hatch, linestyle = LAYER_STYLE[b.layer]
        ax.add_patch(FancyBboxPatch((b.x, b.y), b.w, b.h, boxstyle="round,pad=0,rounding_size=0.08",
                                    facecolor=LAYERS[b.layer] + "40", edgecolor=LAYERS[b.layer], hatch=hatch,
                                    linestyle=linestyle, linewidth=1.5, gid=f"box:{b.name}"))
        cx = b.x + b.w / 2
        ax.text(cx, b.y + b.h - 0.17, b.name, ha="center", va="center", fontsize=10, weight="bold",
                gid=f"name:{b.name}")
        lines = f"{b.role}\nminispec/{b.minispec}\nvLLM: {b.vllm}"
        ax.text(cx, b.y + 0.45, lines, ha="center", va="center", fontsize=8.5, family="monospace",
                linespacing=1.3, gid=f"text:{b.name}",
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1))
    for source, target, label in flow(pipeline_parallel_size):
        a, b = boxes[source], boxes[target]
        over = a.y == b.y and b.x - a.x - a.w > GAP + 0.01  # boxes in between: go over them
        (start, end, route) = _bar_route(a, b) if over else (*_ends(a, b), "arc3")
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, linewidth=1.3,
                                     color="#333333", shrinkA=2, shrinkB=2, connectionstyle=route,
                                     gid=f"arrow:{source}->{target}"))
        if over and target != f"stage {pipeline_parallel_size - 1}: ModelRunner":
            continue  # the bars to the stages in between share one line: one label, on the longest
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + (0.25 if over else 0))
        vertical = start[0] == end[0]  # labels beside vertical arrows, above horizontal ones
        ax.text(mid[0] + (0.08 if vertical else 0), mid[1] + (0 if vertical else 0.08), label, fontsize=8,
                style="italic", ha="left" if vertical else "center", va="center" if vertical else "bottom")
    ax.text(width / 2, HEIGHT - 0.25, f"vLLM v1 as minispec mirrors it: one step of the engine, "
            f"{pipeline_parallel_size} pipeline stage{'s' if pipeline_parallel_size > 1 else ''}", ha="center", va="center", fontsize=12, weight="bold")
    ax.legend(handles=[FancyBboxPatch((0, 0), 1, 1, facecolor=c + "40", edgecolor=c, hatch=LAYER_STYLE[k][0],
                                      linestyle=LAYER_STYLE[k][1], label=f"{k} layer")
                       for k, c in LAYERS.items()],
              loc="lower left", bbox_to_anchor=(0.01, 0.02), fontsize=8, frameon=False)
    return fig
