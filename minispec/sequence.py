"""``IntermediateTensors``: what a non-last pipeline stage hands to the next one
(vLLM: ``vllm/sequence.py``). vLLM carries ``hidden_states`` and ``residual``
because its RMSNorm fuses the residual add; minispec's layers add the residual
themselves, so ``hidden_states`` travels, with the EAGLE-3 taps captured so far when the
drafter reads them (``aux_hidden_states_layer_<i>``, ``model_executor/models/llama.py``).
Between processes the tensors travel as one (``flatten``/``unflatten``), the receiver
knowing the keys from its own model (vLLM sends each key's tensor in turn:
``GroupCoordinator.send_tensor_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class IntermediateTensors:
    tensors: dict[str, torch.Tensor]

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]

    def to(self, device) -> "IntermediateTensors":
        return IntermediateTensors({k: v.to(device) for k, v in self.tensors.items()})

    def flatten(self) -> torch.Tensor:
        """Every tensor side by side, ``[tokens, sum of widths]``, in key order: one message."""
        return torch.cat(list(self.tensors.values()), dim=-1)

    @classmethod
    def unflatten(cls, flat: torch.Tensor, keys: list[str]) -> "IntermediateTensors":
        """``flatten``'s inverse, for tensors of equal width named ``keys``, in order."""
        return cls(dict(zip(keys, flat.chunk(len(keys), dim=-1))))
