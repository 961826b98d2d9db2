"""State that is not tokens, measured for notebook 11: where EAGLE-3's taps live per stage,
what dropping them costs, and the KV each stage keeps after a tree of drafts.

* ``tap_layout(num_layers, taps, pp)``: which stage runs each layer and which captures each
  tap, by the target's own rule (``EagleModelMixin.own_aux_layers`` on each stage's layers).
* ``taps_acceptance(pps)``: the thread's requests with the shipped EAGLE-3 head under Model
  Runner V2, taps carried (the fix) and dropped off the last stage (``v2-eagle3-taps-dropped``):
  acceptance, and whether the output is the same.
* ``tree_kv_run(pp, tree)``: the thread's requests with a tree of drafts (``speculative_token_tree``)
  under V2, fixed and with ``tree-path-not-compacted``: the first invariant broken, the tree the
  request ran before it, and what each stage's KV holds at the positions that tree committed.

vLLM twin: none (lab experiments; the engine code they run is named in each function).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from minispec.distributed.utils import get_pp_indices
from minispec.instruments.invariants import InvariantViolation, Violation
from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import build_llm, run_recorded
from minispec.model_executor.models.interfaces import EagleModelMixin
from minispec.token_tree import TokenTree

TAPS_DROPPED = "v2-eagle3-taps-dropped"
TREE_NOT_COMPACTED = "tree-path-not-compacted"
TREE = "[(0,), (1,), (0, 0), (1, 0), (1, 1)]"  # two children of the root, two levels: 5 drafts


@dataclass(frozen=True)
class TapLayout:
    pp: int
    layer_stages: tuple[int, ...]  # per layer: the stage that runs it
    tap_stages: dict[int, int]  # per tap (the layer whose entering stream it is): the stage that captures it

    @property
    def carried(self) -> tuple[int, ...]:
        """The taps a stage before the last captures: the drafter gets them only if they travel."""
        return tuple(t for t, s in self.tap_stages.items() if s != self.pp - 1)


def tap_layout(num_layers: int, taps: tuple[int, ...], pp: int) -> TapLayout:
    stages, owners = [], {}
    for rank in range(pp):
        stage = EagleModelMixin()
        stage.start_layer, stage.end_layer = get_pp_indices(num_layers, rank, pp)
        stage.is_first_rank, stage.is_last_rank = rank == 0, rank == pp - 1
        stage.set_aux_hidden_state_layers(taps)
        stages += [rank] * (stage.end_layer - stage.start_layer)
        owners.update(dict.fromkeys(stage.own_aux_layers(), rank))
    return TapLayout(pp, tuple(stages), dict(sorted(owners.items())))


@dataclass(frozen=True)
class TapsAcceptance:
    pp: int
    carried: float  # acceptance with every stage filling its taps' slots
    dropped: float  # with only the last stage filling its own
    same_output: bool


def taps_acceptance(pps: tuple[int, ...] = (1, 2, 3, 4)) -> list[TapsAcceptance]:
    """The thread's four requests, k = 3, the shipped EAGLE-3 head, Model Runner V2 (about 1 s a run)."""
    rows = []
    for pp in pps:
        schedule = replace(thread_schedule(method="eagle3"), pipeline_parallel_size=pp)
        fixed = run_recorded(build_llm(schedule, model_runner="v2"))
        faulty = run_recorded(build_llm(schedule, model_runner="v2", faults=TAPS_DROPPED))
        rows.append(TapsAcceptance(pp, fixed.stats["acceptance_rate"], faulty.stats["acceptance_rate"],
                                   fixed.outputs == faulty.outputs))
    return rows


@dataclass(frozen=True)
class KVCell:
    token: int
    position: int  # the position stored with it (a node keeps its tree position)


@dataclass(frozen=True)
class TreeKVRun:
    tree: TokenTree
    req_id: str
    tree_step: int  # the step that ran the tree whose accepted path broke
    root: int  # the root's position: the nodes of depth d sit at root + d
    drafts: tuple[int, ...]  # per node, breadth-first
    path: tuple[int, ...]  # the accepted nodes
    committed: dict[str, tuple[KVCell, ...]]  # "tokens" (the scheduler's), "stage i": positions root..root + len(path)
    violation: Violation
    outputs: dict[str, dict[str, list[int]]]  # "fixed" / "faulty": per request
    acceptance: dict[str, float]


def tree_kv_run(pp: int = 2, tree: str = TREE) -> TreeKVRun:
    """Model Runner V2 on the thread's requests with ``tree``: checked once with the fault (the
    first violation), then unchecked with and without it (its KV and outputs); about 3 s."""
    schedule = replace(thread_schedule(num_speculative_tokens=len(TokenTree.parse(tree))),
                       speculative_token_tree=tree, pipeline_parallel_size=pp)
    try:
        run_recorded(build_llm(replace(schedule, check_invariants=True), model_runner="v2", faults=TREE_NOT_COMPACTED))
    except InvariantViolation as caught:
        violation = caught.violation
    else:
        raise RuntimeError(f"{TREE_NOT_COMPACTED} broke no invariant at PP {pp}: expected invariant 10")
    faulty = run_recorded(build_llm(schedule, model_runner="v2", faults=TREE_NOT_COMPACTED))
    fixed = run_recorded(build_llm(schedule, model_runner="v2"))
    req = violation.req_id
    ran = max((s for s in faulty.steps if s.step < violation.step and _verified(s, req)), key=lambda s: s.step)
    drafts, sampled = _verified(ran, req), next(st for st in ran.stages if st.is_last).sampled[req]
    parsed = TokenTree.parse(tree)
    path = parsed.path_of(drafts, sampled[:-1])
    root = next(st for st in ran.stages if st.is_last).row_of(req).num_computed_tokens
    after = next(s for s in faulty.steps if s.step == violation.step)
    span = range(root, root + len(path) + 1)
    committed = {"tokens": tuple(KVCell(after.schedule.all_token_ids[req][p], p) for p in span)}
    for st in after.stages:
        row = st.row_of(req)
        committed[f"stage {st.stage}"] = tuple(KVCell(row.kv_token_ids[p], row.kv_positions[p]) for p in span)
    return TreeKVRun(parsed, req, ran.step, root, tuple(drafts), tuple(path), committed, violation,
                     {"fixed": fixed.outputs, "faulty": faulty.outputs},
                     {"fixed": fixed.stats["acceptance_rate"], "faulty": faulty.stats["acceptance_rate"]})


def _verified(step, req_id: str) -> list[int]:
    """The drafts the last stage verified for ``req_id`` in ``step`` (empty: none)."""
    return next(st for st in step.stages if st.is_last).verified_drafts.get(req_id, [])
