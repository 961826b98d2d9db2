"""A stand-in for a language model, for the explorer: integer-exact and fast.

No vLLM twin: vLLM tests its runners on real (or random-weight) networks, whose outputs are
floats and whose forward costs most of a step. minispec's explorer (``minispec.lab.explorer.explorer``)
runs thousands of schedules and must tell a correct run from a broken one by exact equality,
so it swaps only the network for this model; the scheduler, KV-cache manager, block tables,
runners, executors and rejection sampler stay the real ones. It is built the way vLLM builds a
model (vLLM's model registry, `model_executor/models/registry.py`, picks the class by
config.json's ``architectures``): a checkpoint whose config names ``StandInForCausalLM``
(``minispec/checkpoints/standin``) loads this class instead of ``LlamaForCausalLM``.

What makes it a stand-in and not a toy: each layer is an attention layer in the one sense
that matters here. It writes every scheduled token's value and the position the runner gave
it into the paged KV cache at the slot ``slot_mapping`` names, then reads each query's
context back out of the cache through the block table, ``seq_lens`` long, and hashes it
(value, stored position and place in the context of every entry, and the query's position)
modulo a prime below 2**24, so every value is exact in float32. A stale draft slot, a wrong
position, a wrong block or a wrong ``num_computed_tokens`` changes the hash, and so the
token it predicts, as it would change a real model's (up to a 1-in-vocabulary collision
when the hash is reduced to a token). A tree of drafts (``AttentionMetadata.visible``) hides a
node's siblings from it, so a rejected sibling's entry left in the committed context changes the
hash. Layers are split over pipeline stages as Llama's are, so the output does not depend on
the number of stages. ``greedy_continuation`` computes the same function on a plain token list:
what a correct engine must produce, and what the scripted proposer (``minispec.v1.spec_decode.scripted_proposer``) drafts from; ``layer_inputs``
gives the streams entering each layer there, what EAGLE-3 taps (``EagleModelMixin``) must carry.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from minispec.attention import AttentionMetadata
from minispec.config import LlamaArchitecture
from minispec.distributed.utils import get_pp_indices
from minispec.model_executor.models.interfaces import EagleModelMixin, aux_key

PRIME = 16_777_213  # the largest prime below 2**24: float32 holds every residue exactly
_VALUE, _POSITION, _QUERY = 1_000_003, 7_919, 104_729  # odd multipliers, below PRIME
_LOGIT = 100.0  # the predicted token's logit (others 0): a near one-hot even when sampling


def _layer_weight(layer: int) -> int:
    """Each layer weighs its context's places differently, so layers do not commute."""
    return (2_654_435_761 * (layer + 1)) % PRIME


def entry_hash(value, position, place, layer: int):
    """One context entry's share of a layer's hash: its value and stored position, weighed
    by its place in the context. Integers, or numpy int64 arrays of them (products stay
    below 2**48)."""
    return (value * _VALUE + position * _POSITION + 1) % PRIME * ((place + 1) * _layer_weight(layer) % PRIME) % PRIME


def layer_output(context_hash, query_position):
    return (context_hash + query_position * _QUERY) % PRIME


class _Causal:
    """The stand-in computed on a plain token list, one place at a time (every position and
    place what it should be). Causal, so each layer's hash of a prefix is a running sum."""

    def __init__(self, arch: LlamaArchitecture):
        self.sums = [0] * arch.num_hidden_layers

    def feed(self, token: int, place: int) -> list[int]:
        """The streams entering layers 0, 1, ..., n at ``place`` (the last: the model's output)."""
        streams = [token]
        for layer in range(len(self.sums)):
            self.sums[layer] = (self.sums[layer] + entry_hash(streams[-1], place, place, layer)) % PRIME
            streams.append(layer_output(self.sums[layer], place))
        return streams


def greedy_continuation(tokens: list[int], n: int, arch: LlamaArchitecture) -> list[int]:
    """The ``n`` tokens a correct engine generates greedily after ``tokens``, in one pass."""
    model = _Causal(arch)
    for place, token in enumerate(tokens):
        last = model.feed(int(token), place)[-1]
    out = []
    for place in range(len(tokens), len(tokens) + n):
        out.append(last % arch.vocab_size)
        last = model.feed(out[-1], place)[-1]
    return out


def layer_inputs(tokens: list[int], arch: LlamaArchitecture) -> list[int]:
    """The streams entering layers 0..n at the last of ``tokens``' positions: what a correct
    engine hands an EAGLE-3 drafter as tap ``i`` there (its first column)."""
    model = _Causal(arch)
    for place, token in enumerate(tokens):
        streams = model.feed(int(token), place)
    return streams


class StandInLayer(nn.Module):
    """One layer: write this step's (value, position) into the KV cache, read each query's
    context back through the block table, hash it."""

    def __init__(self, layer: int):
        super().__init__()
        self.layer = layer
        self.kv_cache: torch.Tensor | None = None  # bound by the model runner, as Attention's

    def forward(self, positions: torch.Tensor, x: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        if self.kv_cache is None:
            raise RuntimeError("StandInLayer.kv_cache is not bound; the model runner allocates it")
        cache = self.kv_cache[0].view(-1, self.kv_cache.shape[-1])  # [slots, (value, position)]
        cache[meta.slot_mapping, 0] = x.to(cache.dtype)
        cache[meta.slot_mapping, 1] = positions.to(cache.dtype)
        out = []
        for i in range(meta.num_reqs):
            start, end, seq_len = meta.query_start_loc[i], meta.query_start_loc[i + 1], meta.seq_lens[i]
            blocks = meta.block_table[i, : -(-seq_len // meta.block_size)]
            context = self.kv_cache[0, blocks].reshape(-1, self.kv_cache.shape[-1])[:seq_len].cpu().numpy()
            values, stored = context[:, 0].astype(np.int64), context[:, 1].astype(np.int64)
            queries = positions[start:end].cpu().numpy()  # the context's last (end - start) entries
            if meta.num_tree_nodes and meta.num_tree_nodes[i]:
                out.append(layer_output(self._tree_hashes(meta, i, end - start, values, stored), queries))
                continue
            # entry_hash is plain arithmetic, so it runs on the whole context at once
            hashes = np.cumsum(entry_hash(values, stored, np.arange(seq_len), self.layer)) % PRIME
            out.append(layer_output(hashes[seq_len - (end - start):], queries))
        return torch.from_numpy(np.concatenate(out)).to(x.device)

    def _tree_hashes(self, meta: AttentionMetadata, i: int, q_len: int, values, stored):
        """Each query hashes the entries it sees (``meta.visible``), placed by their rank among them:
        a node's context is the committed one, its ancestors and itself, as a chain's would be."""
        seen = meta.visible(i, q_len, "cpu").numpy()
        places = np.cumsum(seen, axis=1) - 1
        shares = np.where(seen, entry_hash(values[None, :], stored[None, :], places, self.layer), 0)
        return shares.sum(axis=1) % PRIME


class StandInModel(nn.Module, EagleModelMixin):
    """One pipeline stage's layers. Hidden states are ``[tokens, hidden_size]`` floats whose
    first column carries the hash; so are EAGLE-3 taps (``EagleModelMixin``): tap ``i``, the
    stream entering layer ``i``, travels to the last stage as the real model's do."""

    def __init__(self, arch: LlamaArchitecture, pp_rank: int, pp_size: int):
        super().__init__()
        self.hidden_size = arch.hidden_size
        self.start_layer, self.end_layer = get_pp_indices(arch.num_hidden_layers, pp_rank, pp_size)
        self.is_first_rank, self.is_last_rank = pp_rank == 0, pp_rank == pp_size - 1
        self.layers = nn.ModuleList(StandInLayer(i) for i in range(self.start_layer, self.end_layer))

    def _hidden(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.zeros(len(x), self.hidden_size, device=x.device)
        hidden[:, 0] = x.to(hidden.dtype)
        return hidden

    def forward(self, input_ids, positions, meta, intermediate_tensors=None):
        if self.is_first_rank:
            x = input_ids.to(torch.int64)
        else:
            x = intermediate_tensors["hidden_states"][:, 0].to(torch.int64)
        taps = self.collect_remote_aux_hidden_states(intermediate_tensors)
        for layer in self.layers:
            if self.aux_hidden_state_layers:  # a hidden-state copy per layer only when a tap may want it
                self.maybe_add_hidden_state(taps, layer.layer, self._hidden(x))
            x = layer(positions.to(torch.int64), x, meta)
        hidden = self._hidden(x)
        self.maybe_add_hidden_state(taps, self.end_layer, hidden)
        return self.aux_stage_output(hidden, taps, lambda h: h)


class StandInForCausalLM(nn.Module):
    """One pipeline stage of the stand-in (the whole model when ``pp_size == 1``)."""

    def __init__(self, arch: LlamaArchitecture, pp_rank: int = 0, pp_size: int = 1):
        super().__init__()
        self.arch, self.pp_rank, self.pp_size = arch, pp_rank, pp_size
        self.model = StandInModel(arch, pp_rank, pp_size)

    @property
    def attention_layers(self) -> list[StandInLayer]:
        return list(self.model.layers)

    def forward(self, input_ids, positions, meta, intermediate_tensors=None):
        return self.model(input_ids, positions, meta, intermediate_tensors)

    def intermediate_tensor_keys(self) -> list[str]:
        """What this stage receives from the one before: the hidden states, then the taps captured upstream."""
        return ["hidden_states"] + [aux_key(i) for i in self.model.upstream_aux_layers()]

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        tokens = hidden_states[:, 0].to(torch.int64) % self.arch.vocab_size
        logits = torch.zeros(len(tokens), self.arch.vocab_size, device=tokens.device)
        logits[torch.arange(len(tokens)), tokens] = _LOGIT
        return logits
