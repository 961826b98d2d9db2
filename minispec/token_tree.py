"""A tree of drafts: its shape, the attention it allows, and greedy verification.

vLLM twin (vLLM 0.17.0: ``vllm/config/speculative.py`` 552-569, ``speculative_token_tree``): a string of
a Python list of tuples, each node's path of child indices from the root, sorted breadth-first;
a chain of k by default. Each node attends the context, its ancestors and itself, as
``_prepare_tree_attn_bias`` builds it (0.17.0 ``vllm/v1/attention/backends/tree_attn.py`` 249-285).
vLLM removed tree attention in PR #42121 (2026-05-08, "not fully supported and there's no plans to
support it"), so 0.29.0 on have no such key; its tree sampler (PR #22752) was closed unmerged, so
vLLM never verified a tree in its target. Verification here is greedy, as SGLang's; the accepted
path's compaction is ``v1/worker/tree_kv.py``. All from reading the code.
Left out: random-sampling verification of a tree, dynamic trees.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

# torch is imported where a mask is built: config imports this module, and `import minispec.lab`
# must load nothing heavy (tests/test_lab_surface.py)
if TYPE_CHECKING:
    import torch

PARAM = "speculative_config['speculative_token_tree']"


def _refuse(value, expected: str) -> ValueError:
    return ValueError(f"{PARAM}={value!r}: expected {expected}")


@dataclass(frozen=True)
class TokenTree:
    """Nodes as child-index paths from the root (the last sampled token), breadth-first."""

    choices: tuple[tuple[int, ...], ...]

    @classmethod
    def chain(cls, k: int) -> TokenTree:
        """vLLM's default: ``[(0,), (0, 0), ...]``, k nodes."""
        return cls(tuple((0,) * (i + 1) for i in range(k)))

    @classmethod
    def parse(cls, text) -> TokenTree:
        """vLLM's string, checked: every node's parent and elder siblings present, no repeats."""
        if not isinstance(text, str):
            raise _refuse(text, "a string of a Python list of tuples, e.g. '[(0,), (1,), (0, 0)]'")
        try:
            nodes = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise _refuse(text, "a Python list of tuples of child indices, e.g. '[(0,), (1,), (0, 0)]'") from None
        if not isinstance(nodes, list | tuple) or not nodes:
            raise _refuse(text, "a non-empty list of tuples")
        for node in nodes:
            if not (isinstance(node, tuple) and node and all(type(i) is int and i >= 0 for i in node)):
                raise _refuse(text, f"tuples of integers >= 0, each a path from the root; got {node!r}")
        seen = set(nodes)
        if len(seen) != len(nodes):
            raise _refuse(text, "each node once")
        for node in nodes:
            if len(node) > 1 and node[:-1] not in seen:
                raise _refuse(text, f"every node's parent in the tree: {node!r} has no {node[:-1]!r}")
            if node[-1] > 0 and node[:-1] + (node[-1] - 1,) not in seen:
                raise _refuse(text, f"children numbered from 0: {node!r} has no elder sibling "
                                    f"{node[:-1] + (node[-1] - 1,)!r}")
        return cls(tuple(sorted(nodes, key=lambda t: (len(t), t))))

    def __len__(self) -> int:
        return len(self.choices)

    def __str__(self) -> str:
        return str(list(self.choices))

    @property
    def is_chain(self) -> bool:
        return self == TokenTree.chain(len(self))

    @cached_property
    def parents(self) -> tuple[int, ...]:
        """Each node's parent as a node index; -1 for the root's children."""
        index = {node: i for i, node in enumerate(self.choices)}
        return tuple(index[n[:-1]] if len(n) > 1 else -1 for n in self.choices)

    def depth(self, node: int) -> int:
        return len(self.choices[node])

    def children(self, parent: int, n: int) -> list[int]:
        """The children of ``parent`` (-1: the root) among the first ``n`` nodes, eldest first."""
        return [i for i in range(n) if self.parents[i] == parent]

    def ancestor_mask(self, n: int) -> torch.Tensor:
        """``[n + 1, n + 1]``, row and column 0 the root: True where the row may attend the column
        (itself, its ancestors, the root). A truncated tree (fewer drafts scheduled) is its first n
        nodes: breadth-first, every parent comes before its children."""
        import torch

        mask = torch.eye(n + 1, dtype=torch.bool)
        mask[:, 0] = True
        for i in range(n):
            parent = self.parents[i]
            mask[i + 1] |= mask[parent + 1]
        return mask

    def walk(self, drafts: list[int], wanted) -> list[int]:
        """The path from the root: at each depth the eldest child whose draft is ``wanted(node)``,
        (``node``: the parent, -1 the root) until none is. Node indices, root excluded."""
        path, node = [], -1
        while True:
            token = wanted(node, len(path))
            child = next((c for c in self.children(node, len(drafts)) if drafts[c] == token), None)
            if token is None or child is None:
                return path
            path.append(child)
            node = child

    def verify_greedy(self, drafts: list[int], target: list[int]) -> tuple[list[int], list[int]]:
        """``target``: the target's argmax at the root (index 0) and at each node (``i + 1``). The
        longest path it agrees with, and the tokens emitted: the path's drafts, then the bonus."""
        path = self.walk(drafts, lambda node, _: target[node + 1])
        return path, [drafts[c] for c in path] + [target[path[-1] + 1 if path else 0]]

    def path_of(self, drafts: list[int], accepted: list[int]) -> list[int]:
        """The nodes whose drafts spell ``accepted`` (as far as they do): what a stage that learns
        only the tokens derives, the very path ``verify_greedy`` took (both take the eldest match)."""
        return self.walk(drafts, lambda _, depth: accepted[depth] if depth < len(accepted) else None)
