"""``IntermediateTensors``: what a non-last pipeline stage hands to the next one
(vLLM: ``vllm/sequence.py``). vLLM carries ``hidden_states`` and ``residual``
because its RMSNorm fuses the residual add; minispec's layers add the residual
themselves, so only ``hidden_states`` travels.
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
