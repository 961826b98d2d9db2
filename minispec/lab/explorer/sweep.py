"""Every runner design explored, synchronous and async, at two and three stages: the sweep.

vLLM twin: none (vLLM's CI runs each runner on the workloads someone wrote). A design that
deadlocks under async scheduling at three stages ships when nobody points the explorer there:
``sweep()`` explores each cell (every registered design x async off/on x PP 2 and 3) on a bounded
scope, so the test suite does (``tests/test_explorer_sweep.py``). A design that drafts on every stage from the history alone (``replicated``) refuses the
scripted proposer, so its cells draft with n-gram (``explorer.for_design``). Left out: learner-written
designs (``worker_cls``), which ``explore`` takes one at a time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from minispec.lab.explorer.coverage import Condition, Kind
from minispec.lab.explorer.explorer import DEFAULT, ExploreResult, Scope, explore, for_design
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.switches import ModelRunner

# Bounded: each cell a few CPU-seconds. Two requests (a row can change hands), none, one or every
# draft right, max_tokens 2 or 6 (a full acceptance, then a later step), a budget below k + 1, one row,
# prefix caching where two prompts share a block (a first step that is a padded decode).
SWEEP = Scope(max_requests=2, prompt_lengths=(2, 5), max_tokens=(2, 6), arrival_steps=(0, 1), right_drafts=(0, 1, 3),
              max_num_batched_tokens=(512, 3), max_num_seqs=(4, 1), enable_prefix_caching=(False, True))

# Conditions a design's buffers make unreachable, with why (what its trace never shows).
SLOTS = {Condition(Kind.READD_WITH_DRAFTS): "a request keeps its slot for its life (Model Runner V2's RequestState): "
                                           "nothing is re-added"}
NGRAM = {Condition(Kind.ACCEPTED, n): "its n-gram drafts find no match in histories this short, so none is "
                                     "accepted" for n in range(1, 4)}
CANNOT: dict[str, dict[Condition, str]] = {ModelRunner.V2: SLOTS, ModelRunner.RELAY: SLOTS,
                                           ModelRunner.REPLICATED: SLOTS | NGRAM}


def _designs() -> dict[str, dict]:
    """Every registered runner design (``DESIGNS``), as ``explore``'s ``engine_args``."""
    return {name: {"model_runner": name} for name in DESIGNS}


class Cell(NamedTuple):
    design: str
    async_scheduling: bool
    pp: int

    def __str__(self) -> str:
        return f"{self.design}, {'async' if self.async_scheduling else 'sync'}, PP {self.pp}"


def cells() -> list[Cell]:
    return [Cell(d, a, pp) for d in _designs() for a in (False, True) for pp in (2, 3)]


def design_scope(design: str, scope: Scope = DEFAULT) -> Scope:
    """``scope`` as ``design`` can run it (its proposer)."""
    return for_design(scope, _designs()[design])


def explore_cell(cell: Cell, scope: Scope = SWEEP) -> ExploreResult:
    scope = replace(design_scope(cell.design, scope), async_scheduling=(cell.async_scheduling,),
                    pipeline_parallel_size=(cell.pp,))
    return explore(_designs()[cell.design], scope)


def never_exercised(design: str, result: ExploreResult) -> dict[Condition, str | None]:
    """The result's conditions never reached, with the design's own reasons added."""
    return {c: why or CANNOT.get(design, {}).get(c) for c, why in result.never_exercised.items()}
