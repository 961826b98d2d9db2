"""The map of vLLM v1 that minispec mirrors, as one matplotlib figure (pure:
``render_map(...) -> Figure``). No vLLM twin: vLLM has no such drawing.

One box per component a request passes through; arrows carry what one hands to
the next. The executor sends the same ``SchedulerOutput`` to every stage (v0.9.2's
``MultiprocExecutor.execute_model`` is a ``collective_rpc`` to all workers), so
each stage updates its own ``InputBatch`` from it. The left column is the
engine's loop, one ``GPUModelRunner`` per pipeline stage runs to the right, each with
its own ``InputBatch`` below it.

Two layouts: ``WORKSHOP`` (the default) has large type, a few words per box and
each arrow numbered in the step's order (``flow`` lists what passes, under the same
numbers), so every text is at least 14 px on a 1280×720 screen by
``minispec.lab.viz.legible``'s rule; ``FULL`` adds to every box the
minispec module and the vLLM file it mirrors, for reading at a desk. Each box
names only its minispec module; its vLLM file is the twin that module's
docstring names (``minispec.lab.records.twin_map.twin_of``), so the map cannot disagree
with the code. The executor box is the multi-process one: it is the executor that
runs a pipeline in vLLM 0.9.2.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from minispec.lab.records.twin_map import REFERENCE, twin_of
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.palette import OKABE_ITO, TEXT

# Okabe-Ito (colour-blind safe); the legend names each layer, and each layer also has its own
# hatching and outline (hatch, line style), so colour is never the only cue.
LAYERS = {"API": OKABE_ITO["orange"], "engine": OKABE_ITO["sky"], "worker": OKABE_ITO["green"]}
LAYER_STYLE = {"API": ("..", "--"), "engine": (None, "-"), "worker": ("//", "-")}


@dataclass(frozen=True)
class Layout:
    """Geometry (inches, which are also the axes' data units) and type sizes (points)."""
    box_w: float  # every box has this width, so the columns align
    box_h: float
    gap: float  # between columns
    rows: tuple[float, ...]  # box bottoms, top row first
    height: float
    name_size: float
    role_size: float
    label_size: float
    title_size: float
    paths: bool  # show the minispec module and vLLM file in each box
    numbered: bool = False  # each arrow shows its number in ``flow``, not what passes (the list says that)


# 15 pt in a figure drawn about 1230 px wide, shown at 848: 14.4 px (legible.py's rule)
WORKSHOP = Layout(box_w=3.0, box_h=1.05, gap=1.35, rows=(5.8, 4.4, 3.0, 1.6, 0.2), height=7.3,
                  name_size=15, role_size=15, label_size=15, title_size=16, paths=False, numbered=True)
FULL = Layout(box_w=3.7, box_h=1.15, gap=0.9, rows=(7.0, 5.35, 3.7, 2.05, 0.3), height=8.5,
              name_size=10, role_size=8.5, label_size=8, title_size=12, paths=True)

# box -> (a few words for the projector, the fuller description)
ROLES = {
    "LLM.generate": ("adds requests, steps", "queues prompts, steps the engine"),
    "EngineCore": ("PP batches in flight", "step_with_batch_queue:\nup to PP batches in flight"),
    "Scheduler.schedule": ("who runs, tokens, drafts", "who runs, how many tokens,\nwhich drafts"),
    "Executor": ("one input for all stages", "sends each SchedulerOutput\nto every stage"),
    "runner": ("runs its layers", "forward of its layers,\nsend hidden states"),
    "last runner": ("sample, verify, propose", "forward, sample, verify drafts,\npropose new drafts"),
    "InputBatch": ("rows: token_ids_cpu", "persistent rows: token_ids_cpu,\nreq_id_to_index"),
    "Scheduler.update_from_output": ("appends accepted tokens", "accept drafts, append tokens,\nfinish requests"),
}


def figure_width(pipeline_parallel_size: int, layout: Layout = WORKSHOP) -> float:
    return 0.2 + layout.box_w + pipeline_parallel_size * (layout.gap + layout.box_w) + 0.2


@dataclass(frozen=True)
class Box:
    name: str
    role: str
    minispec: str  # path under minispec/
    vllm: str  # its twin's path in vLLM, and the release if not the reference one ("vLLM 0.13.0: vllm/...")
    layer: str
    x: float
    y: float
    w: float
    h: float


def components(pipeline_parallel_size: int = 2, layout: Layout = WORKSHOP) -> list[Box]:
    """The engine's loop down the left column; the stages along the bottom rows."""
    rows, full = layout.rows, int(layout.paths)

    def box(name: str, role: str, minispec: str, layer: str, x: float, y: float) -> Box:
        twin = twin_of(minispec)
        vllm = twin.vllm_path if twin.release == REFERENCE else f"{twin.release}: {twin.vllm_path}"
        return Box(name, ROLES[role][full], minispec, vllm, layer, x, y, layout.box_w, layout.box_h)

    boxes = [
        box("LLM.generate", "LLM.generate", "entrypoints/llm.py", "API", 0.2, rows[0]),
        box("EngineCore", "EngineCore", "v1/engine/core.py", "engine", 0.2, rows[1]),
        box("Scheduler.schedule", "Scheduler.schedule", "v1/core/sched/scheduler.py", "engine", 0.2, rows[2]),
        box("Executor", "Executor", "v1/executor/multiproc_executor.py", "engine", 0.2, rows[3]),
    ]
    for stage in range(pipeline_parallel_size):
        x = 0.2 + layout.box_w + layout.gap + stage * (layout.gap + layout.box_w)
        role = "last runner" if stage == pipeline_parallel_size - 1 else "runner"
        boxes.append(box(f"stage {stage}: GPUModelRunner", role, "v1/worker/gpu_model_runner.py", "worker", x, rows[3]))
        boxes.append(box(f"stage {stage}: InputBatch", "InputBatch", "v1/worker/gpu_input_batch.py", "worker", x,
                         rows[4]))
    boxes.append(box("Scheduler.update_from_output", "Scheduler.update_from_output", "v1/core/sched/scheduler.py",
                     "engine", x, rows[1]))
    return boxes


def flow(pipeline_parallel_size: int = 2) -> list[tuple[str, str, str]]:
    """(from box, to box, what passes) for one engine step, in the order it happens."""
    runners = [f"stage {s}: GPUModelRunner" for s in range(pipeline_parallel_size)]
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


def _bar_route(a: Box, b: Box, rise: float) -> tuple[tuple[float, float], tuple[float, float], str]:
    """Top of ``a`` to top of ``b``, ``rise`` inches over the boxes between them (same row)."""
    start, end = (a.x + a.w - 0.12, a.y + a.h), (b.x + 0.5, b.y + b.h)
    return start, end, f"bar,fraction={-rise / (end[0] - start[0])}"


def _fit(size: float, text: str, room: float, em: float) -> float:
    """``size``, or smaller, so that ``text`` fits ``room`` inches (``em``: mean character width in ems)."""
    return min(size, room * 72 / (em * max(map(len, text.split("\n")))))


def _name_lines(name: str, size: float, room: float, em: float) -> str:
    """``name`` on one line if it fits ``room`` at ``size``, else broken after its ": " or its last "."""
    if _fit(size, name, room, em) == size:
        return name
    head, sep, tail = name.partition(": ") if ": " in name else name.rpartition(".")
    return f"{head}{sep.strip()}\n{tail}"


def _draw_box(ax, b: Box, layout: Layout) -> None:
    hatch, linestyle = LAYER_STYLE[b.layer]
    ax.add_patch(FancyBboxPatch((b.x, b.y), b.w, b.h, boxstyle="round,pad=0,rounding_size=0.08",
                                facecolor=LAYERS[b.layer] + "40", edgecolor=LAYERS[b.layer], hatch=hatch,
                                linestyle=linestyle, linewidth=1.5, gid=f"box:{b.name}"))
    cx = b.x + b.w / 2
    # a long name goes on two lines in the workshop's large type, and shrinks to its box rather than spill out
    name = b.name if layout.paths else _name_lines(b.name, layout.name_size, 0.92 * b.w, 0.62)
    name_y = b.y + b.h - (0.17 if layout.paths else 0.25 + 0.06 * name.count("\n"))
    ax.text(cx, name_y, name, ha="center", va="center", fontsize=_fit(layout.name_size, name, 0.92 * b.w, 0.62),
            weight="bold", linespacing=1.1, gid=f"name:{b.name}")
    lines = f"{b.role}\nminispec/{b.minispec}\nvLLM: {b.vllm}" if layout.paths else b.role
    ax.text(cx, b.y + (0.45 if layout.paths else 0.22), lines, ha="center", va="center", fontsize=layout.role_size,
            family="monospace" if layout.paths else None, linespacing=1.3, gid=f"text:{b.name}",
            bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1))


def render_map(pipeline_parallel_size: int = 2, layout: Layout = WORKSHOP) -> Figure:
    boxes = {b.name: b for b in components(pipeline_parallel_size, layout)}
    width = figure_width(pipeline_parallel_size, layout)
    fig = DescribedFigure(figsize=(width, layout.height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, layout.height)
    ax.axis("off")
    for b in boxes.values():
        _draw_box(ax, b, layout)
    last_runner = f"stage {pipeline_parallel_size - 1}: GPUModelRunner"
    rise = (layout.rows[2] - layout.rows[3] - layout.box_h) / 2  # the bar runs half-way up to the next row
    shared: list[str] = []  # the numbers of the bars to the middle stages, shown on the longest one
    for number, (source, target, label) in enumerate(flow(pipeline_parallel_size), 1):
        a, b = boxes[source], boxes[target]
        over = a.y == b.y and b.x - a.x - a.w > layout.gap + 0.01  # boxes in between: go over them
        (start, end, route) = _bar_route(a, b, rise) if over else (*_ends(a, b), "arc3")
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, linewidth=1.3,
                                     color=TEXT, shrinkA=2, shrinkB=2, connectionstyle=route,
                                     gid=f"arrow:{source}->{target}"))
        if over and target != last_runner:
            shared.append(str(number))
            continue  # the bars to the stages in between share one line: one label, on the longest
        if layout.numbered:
            label, shared = ", ".join([*shared, str(number)]) if over else str(number), []
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + (rise if over else 0))
        # labels left of vertical arrows (the bar to the later stages rises on their right), above
        # horizontal ones
        vertical = start[0] == end[0]
        room = mid[0] - 0.1 if vertical else abs(end[0] - start[0]) - 0.1
        ax.text(mid[0] - (0.08 if vertical else 0), mid[1] + (0 if vertical else 0.08), label,
                fontsize=_fit(layout.label_size, label, room, 0.55), style="italic", ha="right" if vertical else "center",
                va="center" if vertical else "bottom", gid=f"label:{source}->{target}")
    stages = f"{pipeline_parallel_size} pipeline stage{'s' if pipeline_parallel_size > 1 else ''}"
    title = f"vLLM v1 as minispec mirrors it: one engine step, {stages}"
    ax.text(width / 2, layout.height - 0.25, title, ha="center", va="center",
            fontsize=_fit(layout.title_size, title, width - 0.4, 0.62), weight="bold", gid="title")
    ax.legend(handles=[FancyBboxPatch((0, 0), 1, 1, facecolor=c + "40", edgecolor=c, hatch=LAYER_STYLE[k][0],
                                      linestyle=LAYER_STYLE[k][1], label=f"{k} layer")
                       for k, c in LAYERS.items()],
              loc="lower left", bbox_to_anchor=(0.01, 0.02), fontsize=layout.label_size, frameon=False)
    return fig
