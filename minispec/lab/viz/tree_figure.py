"""A tree of drafts and the KV each stage commits after it: pure renderers over
``minispec.lab.experiments.beyond_tokens.TreeKVRun``.

``render_tree(run, decode)``: the tree the request ran, node by node (draft, parent, the position
it was computed at, the KV place it was written to) and the path the target accepted: what a
stage must know to commit the right KV, and no more. ``plot_tree_kv(run, decode)``: top, the tree
(the accepted path solid and ticked, rejected nodes dashed); bottom, what the scheduler's tokens
say each committed position holds beside what each stage's KV holds there, a wrong entry
hatched and crossed (marks and words, colour only repeats them).

No vLLM twin.
"""

from __future__ import annotations

from collections.abc import Callable

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Patch

from minispec.lab.experiments.beyond_tokens import KVCell, TreeKVRun
from minispec.lab.viz.figure import DescribedFigure
from minispec.lab.viz.legible import BODY, SMALL, TITLE
from minispec.lab.viz.palette import EDGE, EDGE_SOFT, FILL_LIGHT, OKABE_ITO, PALE_BLUE, TEXT, WHITE

Decode = Callable[[int], str]
RIGHT, WRONG = OKABE_ITO["blue"], OKABE_ITO["vermillion"]
WIDTH, HEIGHT = 8.4, 5.6  # inches at 100 dpi: shown 1:1 at 1280 x 720 beside the file browser
BOX_W, BOX_H = 1.5, 0.62


def _name(node: tuple[int, ...] | None) -> str:
    return "root" if node is None else str(node)


def render_tree(run: TreeKVRun, decode: Decode) -> str:
    """The tree request ``run.req_id`` ran, one node a line, and the path the target accepted."""
    choices, root = run.tree.choices, run.root
    lines = [f"request {run.req_id} at step {run.tree_step}: the root (its last token) is at position {root},",
             f"then {len(choices)} drafts in a tree, each written to the next KV place:",
             f"{'node':<8} {'draft':>5}  {'parent':<7} {'position':>8}  {'KV place':>8}"]
    for i, node in enumerate(choices):
        parent = _name(node[:-1] or None)
        lines.append(f"{_name(node):<8} {decode(run.drafts[i])!r:>5}  {parent:<7} {root + len(node):>8}  {root + 1 + i:>8}")
    accepted = ", then ".join(_name(choices[i]) for i in run.path) or "no node"
    spelled = "".join(decode(run.drafts[i]) for i in run.path)
    lines.append(f"the target accepted {accepted}: {spelled!r}, then its own next token")
    return "\n".join(lines)


def _tree_panel(ax, run: TreeKVRun, decode: Decode) -> None:
    choices, on_path = run.tree.choices, set(run.path)
    depth_rows: dict[int, list[int]] = {}
    for i, node in enumerate(choices):
        depth_rows.setdefault(len(node), []).append(i)
    where = {-1: (0.0, 0.0)}
    for depth, nodes in depth_rows.items():
        for j, i in enumerate(nodes):
            where[i] = (depth * 2.4, (len(nodes) - 1) / 2 - j)
    _node(ax, where[-1], f"root {decode(run.committed['tokens'][0].token)!r}\nposition {run.root}", True, None)
    for i, node in enumerate(choices):
        accepted = i in on_path
        parent = run.tree.parents[i]
        (x0, y0), (x1, y1) = where[parent], where[i]
        ax.annotate("", (x1 - BOX_W / 2, y1), (x0 + BOX_W / 2, y0),
                    arrowprops=dict(arrowstyle="-|>", linewidth=2.2 if accepted else 1.2, mutation_scale=12,
                                    color=RIGHT if accepted else EDGE_SOFT, linestyle="-" if accepted else "--"))
        label = f"{_name(node)} {decode(run.drafts[i])!r}\nKV place {run.root + 1 + i}"
        _node(ax, where[i], label, accepted, "✓" if accepted else "✗")
    ax.set_xlim(-BOX_W / 2 - 0.2, max(x for x, _ in where.values()) + BOX_W / 2 + 0.5)
    ys = [y for _, y in where.values()]
    ax.set_ylim(min(ys) - 0.55, max(ys) + 0.55)
    ax.axis("off")
    ax.set_title(f"the tree request {run.req_id} ran at step {run.tree_step}: accepted path solid (✓), "
                 "rejected nodes dashed (✗)", fontsize=BODY, color=TEXT, loc="left")


def _node(ax, xy, text: str, solid: bool, mark: str | None) -> None:
    x, y = xy
    ax.add_patch(FancyBboxPatch((x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02",
                                facecolor=PALE_BLUE if solid else WHITE, edgecolor=EDGE if solid else EDGE_SOFT,
                                linestyle="-" if solid else "--"))
    ax.text(x, y, text, ha="center", va="center", fontsize=SMALL, color=TEXT)
    if mark:
        ax.text(x + BOX_W / 2, y + BOX_H / 2, mark, ha="center", va="center", fontsize=BODY,
                color=RIGHT if mark == "✓" else WRONG, bbox=dict(facecolor=WHITE, edgecolor="none", pad=0.5))


def _kv_panel(ax, run: TreeKVRun, decode: Decode) -> None:
    rows = [("the scheduler's tokens", run.committed["tokens"])]
    stages = sorted(k for k in run.committed if k.startswith("stage "))
    last = stages[-1]
    rows += [(f"{s}'s KV" + (" (last stage)" if s == last else ""), run.committed[s]) for s in reversed(stages)]
    want = run.committed["tokens"]
    for r, (label, cells) in enumerate(rows):
        y = -r
        ax.text(-0.6, y, label, ha="right", va="center", fontsize=SMALL, color=TEXT)
        for c, (cell, ref) in enumerate(zip(cells, want)):
            _cell(ax, c, y, cell, r == 0 or cell == ref, decode)
    for c, ref in enumerate(want):
        ax.text(c, 0.55, f"position {ref.position}", ha="center", va="bottom", fontsize=SMALL, color=TEXT)
    ax.set_xlim(-3.4, len(want) - 0.4)
    ax.set_ylim(-len(rows) + 0.45, 1.0)
    ax.axis("off")
    ax.set_title("the committed KV after the tree: each entry's token and the position stored with it",
                 fontsize=BODY, color=TEXT, loc="left")


def _cell(ax, x: float, y: float, cell: KVCell, right: bool, decode: Decode) -> None:
    ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.36), 0.9, 0.72, boxstyle="round,pad=0.01",
                                facecolor=FILL_LIGHT if right else WHITE, edgecolor=EDGE if right else WRONG,
                                hatch="" if right else "//", linewidth=1 if right else 2))
    mark = "" if right else " ✗"
    ax.text(x, y, f"{decode(cell.token)!r}{mark}\nat {cell.position}", ha="center", va="center", fontsize=SMALL,
            color=TEXT, bbox=None if right else dict(facecolor=WHITE, edgecolor="none", pad=1))


def plot_tree_kv(run: TreeKVRun, decode: Decode, title: str) -> Figure:
    """The tree, then each stage's committed KV beside the scheduler's tokens."""
    fig = DescribedFigure(figsize=(WIDTH, HEIGHT))
    top, bottom = fig.subplots(2, 1, gridspec_kw=dict(height_ratios=[1.15, 1]))
    _tree_panel(top, run, decode)
    _kv_panel(bottom, run, decode)
    handles = [Line2D([], [], color=RIGHT, linewidth=2.2, label="✓ the accepted path"),
               Line2D([], [], color=EDGE_SOFT, linewidth=1.2, linestyle="--", label="✗ a rejected node"),
               Patch(facecolor=WHITE, edgecolor=WRONG, hatch="//", label="✗ KV that is not the token committed there")]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=SMALL, frameon=False)
    fig.suptitle(title, fontsize=TITLE, color=TEXT)
    fig.subplots_adjust(left=0.02, right=0.98, top=0.9, bottom=0.13, hspace=0.35)
    return fig
