"""Drafts whose quality a schedule sets, for the explorer's stand-in model.

No vLLM twin (vLLM's proposers are `ngram_proposer.py`, `eagle.py`, `medusa.py`, ... in
its `v1/spec_decode/`; this one takes their place in ``propose``'s interface only). The
explorer must choose how many drafts are accepted, step by step, to reach every path a
runner takes. With the stand-in model as the target the right continuation is known
(``greedy_continuation``), so for the n-th proposal of a request whose script says
``a``, the first ``a`` drafts are right and the rest are not (the right token plus one);
without a script, all ``k`` are right. In a tree (``speculative_token_tree``) the right
ones are the first ``a`` nodes of the path through each level's youngest child; every
other node is wrong. A script entry ``SCRIPT_REPEAT`` makes a proposal all wrong and the
next one the very same list, as an n-gram proposer repeats itself.

EAGLE-3 shaped (``taps``): the runner hands it the taps of every computed position after
each forward (``capture``, as ``EagleProposer``'s); the taps paired with the last token
must be the target's there (``layer_inputs``), or its drafts are all wrong, as a head fed
another position's features drafts badly. So a hand-over that loses a tap costs
acceptance, never output. Left out: draft probabilities (the rejection sampler treats
these drafts as one-hot, as n-gram drafts).
"""

from __future__ import annotations

from collections import Counter

from minispec.config import SCRIPT_REPEAT, LlamaArchitecture
from minispec.model_executor.models.standin import greedy_continuation, layer_inputs
from minispec.token_tree import TokenTree


class ScriptedProposer:
    def __init__(self, script: dict[str, tuple[int, ...]], k: int, arch: LlamaArchitecture,
                 tree: TokenTree | None = None, taps: tuple[int, ...] = ()):
        self.script, self.k, self.arch, self.taps = script, k, arch, taps
        self.tree = tree or TokenTree.chain(k)
        self.proposals: Counter[str] = Counter()  # per request: proposals made so far
        self.repeat: dict[str, list[int]] = {}  # per request: drafts its next proposal repeats
        self.features: dict[str, dict[int, tuple[int, ...]]] = {}  # per request and position: the taps handed

    def capture(self, req_ids: list[str], starts, counts, hidden_states, aux_hidden_states) -> None:
        """Keep the taps of this forward's positions (``EagleProposer.capture``'s arguments); a
        position computed again (after a rejection) is overwritten."""
        if not self.taps:
            return
        if aux_hidden_states is None:
            raise RuntimeError(f"the scripted proposer reads taps {self.taps}, but the target's last stage "
                               "returned none")
        columns = [t[:, 0].to(int).tolist() for t in aux_hidden_states]
        offset = 0
        for req_id, start, n in zip(req_ids, starts.tolist(), counts.tolist()):
            rows = zip(*(c[offset : offset + n] for c in columns))
            self.features.setdefault(req_id, {}).update(zip(range(start, start + n), rows))
            offset += n

    def _taps_right(self, req_id: str, context: list[int]) -> bool:
        """Whether the taps paired with the context's last token are the target's."""
        if not self.taps:
            return True
        place = len(context) - 2
        streams = layer_inputs(context[: place + 1], self.arch)
        return self.features.get(req_id, {}).get(place) == tuple(streams[i] for i in self.taps)

    def _right_count(self, req_id: str) -> int:
        counts, n = self.script.get(req_id, ()), self.proposals[req_id]
        self.proposals[req_id] += 1
        return counts[n] if n < len(counts) else self.k

    def propose(self, contexts, params=None, generators=None, req_ids=None):
        """One list of k drafts per context; no draft probabilities."""
        drafts = []
        for context, req_id in zip(contexts, req_ids):
            right, vocab, context = self._right_count(req_id), self.arch.vocab_size, [int(t) for t in context]
            if req_id in self.repeat:
                drafts.append(self.repeat.pop(req_id))
                continue
            truth = greedy_continuation(context, self.tree.depth(self.k - 1), self.arch)
            # SCRIPT_REPEAT: all wrong, and the next proposal the same; wrong taps: all wrong
            spoiled = max(right, 0) if self._taps_right(req_id, context) else 0
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
        """Keeps its count (a finished request is not proposed for again); drops its taps."""
        self.features.pop(req_id, None)

    def reset(self) -> None:
        self.proposals.clear()
        self.repeat.clear()
        self.features.clear()
