"""Drafts whose quality a schedule sets, for the explorer's stand-in model.

No vLLM twin (vLLM's proposers are `ngram_proposer.py`, `eagle.py`, `medusa.py`, ... in
its `v1/spec_decode/`; this one takes their place in ``propose``'s interface only). The
explorer must choose how many drafts are accepted, step by step, to reach every path a
runner takes. With the stand-in model as the target the right continuation is known
(``greedy_continuation``), so for the n-th proposal of a request whose script says
``a``, the first ``a`` drafts are right and the rest are not (the right token plus one);
without a script, all ``k`` are right. In a tree (``speculative_token_tree``) the right
ones are the first ``a`` nodes of the path through each level's eldest child; every other
node is wrong. A script entry ``SCRIPT_REPEAT`` makes a proposal all wrong and the next
one the very same list, as an n-gram proposer repeats itself.
Left out: draft probabilities (the rejection sampler treats these drafts as one-hot, as
n-gram drafts).
"""

from __future__ import annotations

from collections import Counter

from minispec.config import SCRIPT_REPEAT, LlamaArchitecture
from minispec.model_executor.models.standin import greedy_continuation
from minispec.token_tree import TokenTree


class ScriptedProposer:
    def __init__(self, script: dict[str, tuple[int, ...]], k: int, arch: LlamaArchitecture,
                 tree: TokenTree | None = None):
        self.script, self.k, self.arch = script, k, arch
        self.tree = tree or TokenTree.chain(k)
        self.proposals: Counter[str] = Counter()  # per request: proposals made so far
        self.repeat: dict[str, list[int]] = {}  # per request: drafts its next proposal repeats

    def _right_count(self, req_id: str) -> int:
        counts, n = self.script.get(req_id, ()), self.proposals[req_id]
        self.proposals[req_id] += 1
        return counts[n] if n < len(counts) else self.k

    def propose(self, contexts, params=None, generators=None, req_ids=None):
        """One list of k drafts per context; no draft probabilities."""
        drafts = []
        for context, req_id in zip(contexts, req_ids):
            right, vocab = self._right_count(req_id), self.arch.vocab_size
            if req_id in self.repeat:
                drafts.append(self.repeat.pop(req_id))
                continue
            truth = greedy_continuation([int(t) for t in context], self.tree.depth(self.k - 1), self.arch)
            spoiled = max(right, 0)  # SCRIPT_REPEAT: all wrong, and the next proposal the same
            on_path = self._right_path()
            drafts.append([truth[d - 1] if j in on_path and d <= spoiled else (truth[d - 1] + 1 + c) % vocab
                           for j, (d, c) in enumerate((len(n), n[-1]) for n in self.tree.choices)])
            if right == SCRIPT_REPEAT:
                self.repeat[req_id] = list(drafts[-1])
        return drafts, [None] * len(contexts)

    def _right_path(self) -> set[int]:
        """The nodes the truth may follow: each level's youngest child of the one above, so that a
        tree's accepted path skips its elder siblings (a chain's is every node)."""
        path, node = set(), -1
        while kids := self.tree.children(node, self.k):
            node = kids[-1]
            path.add(node)
        return path

    def remove(self, req_id: str) -> None:
        """Keeps its count: a finished request is not proposed for again."""

    def reset(self) -> None:
        self.proposals.clear()
        self.repeat.clear()
