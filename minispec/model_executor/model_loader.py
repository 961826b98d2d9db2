"""Build one pipeline stage of a model from a local transformers checkpoint.

Mirrors ``vllm/model_executor/model_loader`` (``get_model`` and the default
safetensors loader): read ``config.json``, build only this stage's modules, and
read from ``*.safetensors`` only the tensors this stage owns, so a stage never
holds another stage's weights. Left out: ``.bin`` checkpoints, quantisation,
downloading from a hub (minispec never downloads).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from minispec.config import LlamaArchitecture
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.model_executor.models.standin import StandInForCausalLM


def _tensor_files(path: Path) -> dict[str, Path]:
    """Checkpoint tensor name -> the safetensors file holding it (sharded or not)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: path / file for name, file in weight_map.items()}
    single = path / "model.safetensors"
    if not single.is_file():
        raise FileNotFoundError(f"model={str(path)!r}: expected model.safetensors (or a sharded index) in it")
    with safe_open(single, "pt") as f:
        return {name: single for name in f.keys()}


def get_model(
    path: str | Path,
    pp_rank: int = 0,
    pp_size: int = 1,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    arch: LlamaArchitecture | None = None,
) -> LlamaForCausalLM:
    """``arch``: the checkpoint's config.json if it was already read (the engine reads it once).
    A config naming ``StandInForCausalLM`` builds the explorer's stand-in, which has no weights."""
    path = Path(path)
    arch = arch or LlamaArchitecture.from_pretrained(path)
    if arch.architecture == StandInForCausalLM.__name__:
        if dtype != torch.float32:
            raise ValueError(f"dtype={dtype}: the stand-in model {str(path)!r} computes exactly in float32 only")
        return StandInForCausalLM(arch, pp_rank, pp_size).to(device).eval()
    with torch.device("meta"):
        model = LlamaForCausalLM(arch, pp_rank, pp_size)
    files = _tensor_files(path)
    state = {}
    expected = {name: tuple(p.shape) for name, p in model.state_dict().items()}
    for own_name, ckpt_name in model.wanted_weight_names().items():
        if ckpt_name not in files:
            raise KeyError(f"model={str(path)!r}: checkpoint has no tensor {ckpt_name!r}")
        with safe_open(files[ckpt_name], "pt", device="cpu") as f:
            tensor = f.get_tensor(ckpt_name)
        if tuple(tensor.shape) != expected[own_name]:
            raise ValueError(f"model={str(path)!r}: tensor {ckpt_name!r} has shape {tuple(tensor.shape)}: expected "
                             f"{expected[own_name]} from config.json (do the config and the weights belong together?)")
        state[own_name] = tensor.to(dtype)
    model.load_state_dict(state, assign=True, strict=True)  # the rotary inv_freq buffers were built real
    return model.requires_grad_(False).to(device).eval()
