"""Drafting with a small model (vLLM 0.15.0: ``vllm/v1/spec_decode/draft_model.py``).

A note on history: vLLM V1 gained draft-model drafting after v0.14.0 (PR
#24322): 0.14.0 still raises ``NotImplementedError`` for
``method="draft_model"`` (``vllm/engine/arg_utils.py``), 0.15.0 ships
``vllm/v1/spec_decode/draft_model.py`` and 0.16.0 has its
``DraftModelProposer``. In July 2025 V1 drafted with n-gram lookup or learned
heads (EAGLE, Medusa, MTP), which also run on the last stage after sampling.
minispec's small draft model stands in for those learned proposers: the runner
faults it exposes do not depend on which proposer made the drafts.

The draft keeps its own paged KV cache, separate from the target's. For each
request it remembers how many leading tokens of the history it has cached;
after verification it feeds only the tokens it has not seen (the accepted drafts
and the token emitted after them: bonus, or recovered after a rejection), then
generates ``k`` drafts one position at a time, all requests batched together.
Keeping the cache costs some bookkeeping but makes a draft step cost one token
per request; recomputing the whole context every step would cost more than the
target's own forward.

Draft KV written for positions beyond the history is never trusted: the next
call feeds from the end of the real history again and overwrites it. When the
pool runs short, the least recently used request not in this call loses its
draft cache and simply starts over next time.

For a random request the draft samples from its own processed distribution and
returns it, so the rejection sampler can use ``p / q`` (vLLM's runner, in
0.9.2 and still in 0.16.0, passes ``draft_probs=None`` instead); a greedy
request gets the argmax and no probabilities (one-hot). EAGLE heads reuse this class's cache
and loop (``eagle.py``). Left out: MTP heads, draft tensor parallelism, CUDA graphs.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from minispec.attention import make_attention_metadata
from minispec.model_executor.model_loader import get_model
from minispec.token_tree import TokenTree
from minispec.v1.sample.sampler import compute_probs, sample_from
from minispec.v1.worker.utils import bind_kv_cache


class DraftModelProposer:
    """Proposes ``k`` drafts per request with the small draft model, on the last stage after
    sampling; it keeps its own paged KV cache, so a draft step feeds only the tokens it has not seen."""

    # How far a fed token sits ahead of its position: 0 here (a token at its own position);
    # EAGLE feeds the token after each position (eagle.py).
    SHIFT = 0

    def __init__(self, model_path, k: int, max_model_len: int, max_num_seqs: int, block_size: int,
                 device="cpu", dtype=torch.float32, arch=None, tree: TokenTree | None = None):
        """``arch``: the draft's config.json, if the engine has read it already; ``tree``: the
        speculative_token_tree its k drafts fill (a chain unless given)."""
        self.tree = tree or TokenTree.chain(k)
        self.model = self._load_model(model_path, arch, device, dtype)
        self.k, self.max_model_len, self.block_size, self.device = k, max_model_len, block_size, device
        self.blocks_per_req = -(-max_model_len // block_size)
        self.num_blocks = self.blocks_per_req * max_num_seqs
        bind_kv_cache(self.model, self.num_blocks, block_size, dtype, device)
        self.reset()

    @staticmethod
    def _load_model(model_path, arch, device, dtype):
        return get_model(model_path, 0, 1, device=device, dtype=dtype, arch=arch)

    def reset(self) -> None:
        """Forget every request's draft cache."""
        self.free_blocks = list(range(self.num_blocks))
        self.req_blocks: OrderedDict[str, list[int]] = OrderedDict()  # LRU order
        self.num_cached: dict[str, int] = {}

    def remove(self, req_id: str) -> None:
        """Forget a request (finished, or aborted)."""
        self._drop_cache(req_id)

    def _drop_cache(self, req_id: str) -> None:
        """Give a request's draft KV back; it starts over next time."""
        # num_cached first: blocks without it are merely recomputed, the reverse reads stale KV.
        self.num_cached.pop(req_id, None)
        self.free_blocks.extend(self.req_blocks.pop(req_id, []))

    def _reserve(self, req_id: str, num_tokens: int, keep: set[str]) -> list[int]:
        blocks = self.req_blocks.setdefault(req_id, [])
        self.req_blocks.move_to_end(req_id)
        needed = -(-num_tokens // self.block_size) - len(blocks)
        while needed > len(self.free_blocks):
            victim = next(r for r in self.req_blocks if r not in keep)
            self._drop_cache(victim)
        blocks.extend(self.free_blocks.pop() for _ in range(max(0, needed)))
        return blocks

    def _forward(self, tokens: list[list[int]], starts: list[int], block_rows: list[list[int]],
                 req_ids: list[str], step: int) -> torch.Tensor:
        """Feed each request its new tokens; return the logits at each one's last. ``req_ids``
        and ``step`` (which draft this is) are for EAGLE's, which reads features by them."""
        width = max(len(b) for b in block_rows)
        table = np.array([b + [0] * (width - len(b)) for b in block_rows])
        positions, meta = make_attention_metadata(starts, [len(t) for t in tokens], table, self.block_size,
                                                  self.device)
        ids = torch.tensor([t for ts in tokens for t in ts], device=self.device)
        hidden = self.model(ids, positions, meta)
        last = torch.tensor(meta.query_start_loc[1:], device=self.device) - 1
        return self.model.compute_logits(hidden[last])

    @torch.inference_mode()
    def propose(self, contexts, params, generators, req_ids):
        """Drafts (and, for random requests, their probabilities) per context."""
        if not self.tree.is_chain:
            return [self._propose_tree(c, r, set(req_ids)) for c, r in zip(contexts, req_ids)], [None] * len(contexts)
        lengths = [len(c) for c in contexts]
        ks = [max(0, min(self.k, self.max_model_len - 1 - n)) for n in lengths]
        active = [i for i, k in enumerate(ks) if k > 0]
        drafts = [[] for _ in contexts]
        probs = [[] for _ in contexts]
        if not active:
            return drafts, [None] * len(contexts)
        keep = {req_ids[i] for i in active}
        blocks = {i: self._reserve(req_ids[i], lengths[i] + ks[i], keep) for i in active}
        shift = self.SHIFT
        start = {i: min(self.num_cached.get(req_ids[i], 0), lengths[i] - 1 - shift) for i in active}
        feed = {i: list(contexts[i][start[i] + shift:]) for i in active}
        for step in range(max(ks)):
            rows = [i for i in active if step < ks[i]]
            logits = self._forward([feed[i] for i in rows], [start[i] for i in rows], [blocks[i] for i in rows],
                                   [req_ids[i] for i in rows], step)
            for row, i in enumerate(rows):
                if params[i].greedy:
                    token = int(logits[row].argmax())
                else:
                    q = compute_probs(logits[row], params[i])
                    token = sample_from(q, generators[i])
                    probs[i].append(q)
                drafts[i].append(token)
                start[i] += len(feed[i])
                feed[i] = [token]
        for i in active:
            self.num_cached[req_ids[i]] = lengths[i] - shift
        return drafts, [torch.stack(p) if p else None for p in probs]

    def _propose_tree(self, context, req_id: str, keep: set[str]) -> list[int]:
        """A tree's nodes, greedy: child ``c`` of a node is the draft's ``c``-th likeliest token after
        the node's path, one forward per level under the tree mask (vLLM 0.17.0 ``eagle.py``
        ``propose_tree`` drafts level by level too; from reading the code)."""
        n = len(context)
        k = max(0, min(self.k, self.max_model_len - 1 - n))
        if k == 0:
            return []
        blocks = self._reserve(req_id, n + k, keep)
        start = min(self.num_cached.get(req_id, 0), n - 1)
        ranked = {-1: self._forward([list(context[start:])], [start], [blocks], [req_id], 0)[0].argsort(descending=True)}
        self.num_cached[req_id] = n  # the nodes' KV lies beyond the history: fed again next time
        nodes, depth = [], 1
        while len(nodes) < k:
            level = [j for j in range(k) if self.tree.depth(j) == depth]
            nodes += [int(ranked[self.tree.parents[j]][self.tree.choices[j][-1]]) for j in level]
            if len(nodes) < k:
                logits = self._tree_logits(int(context[-1]), nodes, n - 1, blocks)
                ranked.update({j: logits[j + 1].argsort(descending=True) for j in level})
            depth += 1
        return nodes

    def _tree_logits(self, root: int, nodes: list[int], root_pos: int, blocks: list[int]) -> torch.Tensor:
        """The draft's logits at the root and at each node, every node seeing only its path."""
        positions, meta = make_attention_metadata([root_pos], [1 + len(nodes)], np.array([blocks]), self.block_size,
                                                  self.device, self.tree, [len(nodes)])
        hidden = self.model(torch.tensor([root] + nodes, device=self.device), positions, meta)
        return self.model.compute_logits(hidden)
