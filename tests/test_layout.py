"""The package's picture reads as its architecture (the layers docs/package_map.md's "Map of the package" states).

* No import cycles between modules, nor between folders, nor between the folders one
  level down (``lab.viz``, ``v1.worker``) but the one vLLM has too; the lab's folders are
  layers that import one way (records, experiments, faults, explorer, viz, exercises).
* The engine and the API never import the lessons (``lab``) or the model shop
  (``training``); ``instruments`` imports nothing of the engine. The command line,
  ``entrypoints/cli``, is a layer of its own above the lessons: its subcommands run them.
* Every module outside ``instruments``, ``lab`` and ``training`` names the vLLM
  file or package it mirrors in its docstring.
"""

import ast
from pathlib import Path

from minispec.v1.worker.designs import DESIGNS, Design

PKG = Path(__file__).resolve().parents[1] / "minispec"
OWN_FOLDERS = ("instruments", "lab", "training")  # minispec's own: no vLLM twin
TOP_LAYER = "entrypoints.cli"  # the command line: above the lessons, so a unit of its own


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text()) for p in PKG.rglob("*.py")}


def imports_of(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """minispec modules imported anywhere in the file (lazy imports count too)."""
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {t for t in targets if t in known and t != name}
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, tree, set(mods)) for name, tree in mods.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def folder(module: str) -> str:
    """The unit layers are made of: a subfolder, or a loose top-level module."""
    parts = module.split(".")
    if ".".join(parts[1:3]) == TOP_LAYER:
        return TOP_LAYER
    return parts[1] if len(parts) > 1 else "minispec"


def test_no_module_import_cycles():
    edges = graph()
    # a package's __init__ importing its own submodule is not a cycle of meaning
    edges = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in edges.items()}
    assert find_cycle(edges) is None


def test_no_folder_import_cycles():
    folders: dict[str, set[str]] = {}
    for mod, targets in graph().items():
        folders.setdefault(folder(mod), set()).update(folder(t) for t in targets if folder(t) != folder(mod))
    assert find_cycle(folders) is None, folders


def subfolder(module: str) -> str:
    """One level down: ``v1.worker``, ``lab.viz``; a loose module stands for itself."""
    return ".".join(module.split(".")[1:3]) or "minispec"


def folder_cycles(edges: dict[str, set[str]], unit) -> set[frozenset[str]]:
    """The units (``unit(module)``) that import one another in a loop, each loop as its set of units."""
    units: dict[str, set[str]] = {}
    for mod, targets in edges.items():
        units.setdefault(unit(mod), set()).update(unit(t) for t in targets if unit(t) != unit(mod))
    loops = set()
    for start in units:
        back = {u for u in reachable(units, start) if start in reachable(units, u)} | {start}
        if len(back) > 1:
            loops.add(frozenset(back))
    return loops


# Mirrored from vLLM, where the same two folders import each other (0.30.0: the runner imports
# the proposers, ``vllm/v1/worker/gpu_model_runner.py``; ``vllm/v1/spec_decode/llm_base_proposer.py``
# 65-66 imports ``vllm/v1/worker/gpu_input_batch.py``): minispec's draft proposer binds its KV cache
# with the workers' ``bind_kv_cache`` (``v1/worker/utils.py``, as vLLM's is).
MIRRORED_LOOPS = {frozenset({"v1.spec_decode", "v1.worker"})}


def test_no_folder_import_cycles_one_level_down():
    """``lab.experiments``, ``lab.viz``, ``v1.worker``...: no two import each other, but for
    the loop vLLM itself has (named above; the test fails when it is gone, so the name goes too)."""
    assert folder_cycles(graph(), subfolder) == MIRRORED_LOOPS


def test_the_folder_check_catches_a_loop_one_level_down():
    """Planted: the loop the lab had until its explorer stopped rendering its own findings."""
    planted = {"minispec.lab.experiments.explorer": {"minispec.lab.viz.text"},
               "minispec.lab.viz.text": {"minispec.lab.experiments.metrics"},
               "minispec.lab.experiments.metrics": set()}
    assert folder_cycles(planted, subfolder) == {frozenset({"lab.experiments", "lab.viz"})}
    assert folder_cycles(planted, folder) == set()  # one level up, both are "lab"


# The lab's layers, bottom to top: each imports only from its own layer or those before it.
LAB_LAYERS = ("records", "experiments", "faults", "explorer", "viz", "exercises")


def lab_layer(module: str) -> int | None:
    parts = module.split(".")
    return LAB_LAYERS.index(parts[2]) if parts[1:2] == ["lab"] and len(parts) > 3 else None


def upward(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The lab's imports that reach a higher layer."""
    return {(m, t) for m, targets in edges.items() if lab_layer(m) is not None
            for t in targets if lab_layer(t) is not None and lab_layer(t) > lab_layer(m)}


def test_the_lab_imports_one_way():
    """records (what is recorded about vLLM) -> experiments (the runs) -> faults -> viz (the
    renderers) -> exercises: a notebook's imports say which layer it uses, and no layer
    reaches up. Planted: the explorer rendering its own counterexample, as it did."""
    edges = graph()
    assert upward(edges) == set()
    assert {m.split(".")[2] for m in edges if lab_layer(m) is not None} == set(LAB_LAYERS), "every lab folder a layer"
    planted = {"minispec.lab.explorer.explorer": {"minispec.lab.viz.text", "minispec.lab.records.threads"}}
    assert upward(planted) == {("minispec.lab.explorer.explorer", "minispec.lab.viz.text")}


def test_engine_and_api_do_not_import_lessons_or_training():
    for mod, targets in graph().items():
        if folder(mod) in ("lab", "training", TOP_LAYER):
            continue
        bad = {t for t in targets if folder(t) in ("lab", "training")}
        assert not bad, f"{mod} imports {bad}"
        if folder(mod) == "instruments":
            engine = {t for t in targets if folder(t) not in ("instruments",)}
            assert not engine, f"{mod} imports the engine: {engine}"


def test_mirrored_modules_name_their_vllm_twin():
    for name, tree in modules().items():
        if folder(name) in OWN_FOLDERS or name.endswith("__init__") or name == "minispec":
            continue
        if name.rsplit(".", 1)[-1] == "__init__" or (PKG.parent / name.replace(".", "/") / "__init__.py").exists():
            continue  # packages: their modules carry the docstrings
        doc = ast.get_docstring(tree) or ""
        assert "vllm" in doc.lower(), f"{name}: its docstring should name the vLLM file it mirrors"


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _modules(design: Design) -> tuple[str, str | None]:
    """A design's runner module, and the module of its switches (None: it has none), from its record."""
    runner = design.runner.rpartition(".")[0] if isinstance(design.runner, str) else design.runner.__module__
    return runner, design.settings.__module__ if design.settings else None


RUNNERS = {name: _modules(design) for name, design in DESIGNS.items()}


def test_runner_designs_are_siblings():
    """No runner design reaches another's runner or switches, directly or through another
    module: what they need (the contract, the proposers, seeding, loading, KV binding, and for
    the relay designs V2's slots and input batch, ``gpu/model_runner_base.py``) is shared.
    The two relay designs share ``relay/stage.py``, which reads no switch."""
    edges = graph()
    for design, (runner, _) in RUNNERS.items():
        seen = reachable(edges, runner)
        assert "minispec.v1.worker.worker_base" in seen, design
        others = {m for other, pair in RUNNERS.items() if other != design for m in pair if m}
        assert not seen & others, f"{design} reaches {seen & others}"


def test_lab_module_names_are_its_own():
    """A lab module's file name is not a module name anywhere else in the package, nor twice
    in the lab: a learner who greps for ``scenarios.py`` or ``fault_presets.py`` finds one file."""
    def stem(module: str) -> str:
        return module.rsplit(".", 1)[-1]

    names = [m for m in modules() if not (PKG.parent / m.replace(".", "/") / "__init__.py").exists()
             and stem(m) != "__main__"]
    lab = [stem(m) for m in names if folder(m) == "lab"]
    others = {stem(m) for m in names if folder(m) != "lab"}
    assert sorted(n for n in set(lab) if lab.count(n) > 1) == []
    assert sorted(set(lab) & others) == []
