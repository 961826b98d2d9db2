"""EAGLE-3's taps on a model cut into pipeline stages: what both target models share.

Twin: ``EagleModelMixin`` (vLLM 0.30.0: ``vllm/model_executor/models/interfaces.py`` 1569-1641;
from reading the code), mixed into each model that can feed an EAGLE-3 head. Tap ``i`` is the
residual stream entering layer ``i`` (``i == num_hidden_layers``: the stream after the last
layer). The stage that owns the layer before a tap captures it and appends it to the
``IntermediateTensors`` it sends on, and the last stage returns ``(hidden_states, taps)`` with
every tap, in layer order. In minispec every later stage also passes on what it received; in
vLLM 0.30.0's lines a stage packs its own taps (``pack_local_aux_hidden_states``) and only the
last collects those sent to it (``collect_remote_aux_hidden_states``). vLLM keys the
slots by their index among the taps (``aux_hidden_states_0``...); minispec keys them by layer
(``aux_key``), so a reader can tell which stage's capture a slot holds. ``captures=False`` is
the fault SGLang #39644 describes: a stage that does not fill its own taps' slots (SGLang's
``set_eagle3_layers_to_capture`` returns early off the last rank), so they travel as zeros, the
placeholders the transport reserved for them. Left out: vLLM's cached slot layout (minispec
recomputes the few indices per forward).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minispec.sequence import IntermediateTensors


def aux_key(layer: int) -> str:
    """The ``IntermediateTensors`` key of the tap entering ``layer``."""
    return f"aux_hidden_states_layer_{layer}"


class EagleModelMixin:
    """For a stage's model with ``start_layer``, ``end_layer``, ``is_first_rank`` and ``is_last_rank``."""

    start_layer: int
    end_layer: int
    is_first_rank: bool
    is_last_rank: bool
    aux_hidden_state_layers: tuple[int, ...] = ()  # EAGLE-3's taps, by layer; none by default
    captures_aux: bool = True
    # minispec's probe for the trace (vLLM keeps none): the streams this stage computed at its
    # own tap points in its last forward, whether or not it filled their slots
    computed_aux_hidden_states: dict[int, torch.Tensor] = {}  # replaced per forward, never mutated

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...], captures: bool = True) -> None:
        """Tap the residual stream entering each layer in ``layers`` (``len(layers)`` may name the
        stream after the last layer). ``captures``: whether this stage fills its own taps' slots."""
        self.aux_hidden_state_layers = tuple(sorted(set(layers)))
        self.captures_aux = captures

    def upstream_aux_layers(self) -> tuple[int, ...]:
        """The taps captured before this stage: the slots its ``IntermediateTensors`` bring."""
        if self.is_first_rank:
            return ()
        return tuple(i for i in self.aux_hidden_state_layers if i <= self.start_layer)

    def own_aux_layers(self) -> tuple[int, ...]:
        """The taps this stage captures itself: the streams entering its layers (but its first, which
        a later stage receives) and the one after its last."""
        first = self.start_layer if self.is_first_rank else self.start_layer + 1
        return tuple(i for i in self.aux_hidden_state_layers if first <= i <= self.end_layer)

    def collect_remote_aux_hidden_states(self, intermediate_tensors: IntermediateTensors | None
                                         ) -> dict[int, torch.Tensor]:
        """The taps the stages before this one captured, by layer."""
        return {i: intermediate_tensors[aux_key(i)] for i in self.upstream_aux_layers()}

    def maybe_add_hidden_state(self, taps: dict[int, torch.Tensor], layer: int, stream: torch.Tensor) -> None:
        """Keep ``stream``, the one entering ``layer``, when this stage owns that tap."""
        if layer in self.own_aux_layers():
            taps[layer] = stream

    def aux_stage_output(self, stream: torch.Tensor, taps: dict[int, torch.Tensor],
                         final: Callable[[torch.Tensor], torch.Tensor]):
        """What the stage returns: ``IntermediateTensors`` with the hidden states and every tap so
        far, or on the last stage ``final(stream)``, with the taps in layer order when any are asked."""
        own = self.own_aux_layers()
        self.computed_aux_hidden_states = {i: taps[i] for i in own}
        if not self.captures_aux:  # the fault: the slots were reserved, nothing filled them
            taps = taps | {i: torch.zeros_like(stream) for i in own}
        if not self.is_last_rank:
            return IntermediateTensors({"hidden_states": stream, **{aux_key(i): t for i, t in taps.items()}})
        if self.aux_hidden_state_layers:
            return final(stream), [taps[i] for i in self.aux_hidden_state_layers]
        return final(stream)
