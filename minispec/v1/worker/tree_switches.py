"""The tree-KV switch and its fault preset (minispec's own, as every switch is: ``switches.py``).

``TREE_COMPACTION_*``: which stages move the accepted path's KV into the committed positions
(``tree_kv.py``). The fix, ``compacts_on_every_rank``: every stage. The fault,
``compacts_on_last_rank_only``: the last stage alone, as SGLang's PP stages did (PR #30775,
comment of 2026-09-16): earlier stages keep a rejected sibling's KV where the path was
committed. Preset ``tree-path-not-compacted``. One switch per design that carries a tree (its
record's ``can_carry_tree_drafts``): each runner reads its own.
"""

from __future__ import annotations

from minispec.v1.worker.switches import ModelRunner, Switch, SwitchPreset
from minispec.v1.worker.tree_kv import compacts_on_every_rank

__all__ = ["TREE_COMPACTION_RELAY", "TREE_COMPACTION_V1", "TREE_COMPACTION_V2", "TreeFaultPreset",
           "compacts_on_every_rank", "compacts_on_last_rank_only"]


def compacts_on_last_rank_only(is_last_rank: bool) -> bool:
    """tree-path-not-compacted (SGLang PR #30775's comment): only the last stage compacts."""
    return is_last_rank


TREE_COMPACTION_V1 = Switch("tree_compaction", ModelRunner.V1, compacts_on_last_rank_only)
TREE_COMPACTION_V2 = Switch("tree_compaction", ModelRunner.V2, compacts_on_last_rank_only)
TREE_COMPACTION_RELAY = Switch("tree_compaction", ModelRunner.RELAY, compacts_on_last_rank_only)


class TreeFaultPreset(SwitchPreset):
    """The ``faults=`` preset of a tree's KV, for every design that carries a tree."""

    TREE_PATH_NOT_COMPACTED = "tree-path-not-compacted", (TREE_COMPACTION_V1, TREE_COMPACTION_V2, TREE_COMPACTION_RELAY)
