"""Engine configuration objects, after ``vllm/config.py`` (ModelConfig, CacheConfig,
ParallelConfig, SpeculativeConfig, SchedulerConfig), each reduced to the fields
minispec uses and each validating its own values so a bad one is named at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

CHECKPOINT_DIR = Path(__file__).parent / "checkpoints"
DEFAULT_TARGET = CHECKPOINT_DIR / "target"
DEFAULT_DRAFT = CHECKPOINT_DIR / "draft"


def is_int(value) -> bool:
    """An integer that is not a bool (``True`` is an ``int`` in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _require(ok: bool, name: str, value, expected: str) -> None:
    if not ok:
        raise ValueError(f"{name}={value!r}: expected {expected}")


@dataclass(frozen=True)
class LlamaArchitecture:
    """What minispec's forward needs from a transformers Llama ``config.json``."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    eos_token_id: int | None

    @classmethod
    def from_pretrained(cls, path: str | Path, param: str = "model") -> "LlamaArchitecture":
        """``param`` names the argument the path came from, for error messages."""
        cfg = read_config_json(path, param)
        where = f"{param}={str(path)!r}"
        if cfg.get("model_type") != "llama":
            raise ValueError(
                f"{where}: expected a Llama checkpoint (config.json model_type 'llama'), "
                f"got model_type={cfg.get('model_type')!r}"
            )
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ValueError(f"{where}: rope_type={rope_type!r} is not supported; expected 'default'")
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(f"{where}: hidden_act={cfg['hidden_act']!r} is not supported; expected 'silu'")
        heads = cfg["num_attention_heads"]
        eos = cfg.get("eos_token_id")
        return cls(
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope.get("rope_theta", cfg.get("rope_theta", 10000.0)),
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            attention_bias=cfg.get("attention_bias", False),
            mlp_bias=cfg.get("mlp_bias", False),
            eos_token_id=eos[0] if isinstance(eos, list) else eos,
        )


def read_config_json(path: str | Path, param: str = "model") -> dict:
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{param}={str(path)!r}: expected a checkpoint directory, but it does not exist")
    config = path / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{param}={str(path)!r}: expected a transformers checkpoint with config.json in it")
    return json.loads(config.read_text())


@dataclass(frozen=True)
class CacheConfig:
    """Paged KV cache shape: ``num_gpu_blocks`` blocks of ``block_size`` tokens.
    ``None`` blocks means enough for every sequence at full length."""

    block_size: int = 16
    num_gpu_blocks: int | None = None

    def __post_init__(self):
        _require(is_int(self.block_size) and self.block_size > 0, "block_size", self.block_size, "an integer > 0")
        _require(
            self.num_gpu_blocks is None or (is_int(self.num_gpu_blocks) and self.num_gpu_blocks > 0),
            "num_gpu_blocks", self.num_gpu_blocks, "None or an integer > 0",
        )

    def sized_for(self, max_num_seqs: int, max_model_len: int) -> "CacheConfig":
        if self.num_gpu_blocks is not None:
            return self
        return replace(self, num_gpu_blocks=max_num_seqs * -(-max_model_len // self.block_size))


@dataclass(frozen=True)
class ParallelConfig:
    pipeline_parallel_size: int = 1

    def validate_for(self, arch: LlamaArchitecture) -> None:
        pp = self.pipeline_parallel_size
        _require(
            is_int(pp) and 1 <= pp <= arch.num_hidden_layers,
            "pipeline_parallel_size", pp, f"an integer from 1 to the model's {arch.num_hidden_layers} layers",
        )


@dataclass(frozen=True)
class SpeculativeConfig:
    method: str = "draft_model"
    num_speculative_tokens: int = 0
    model: str | Path = DEFAULT_DRAFT
    prompt_lookup_min: int = 1
    prompt_lookup_max: int = 3

    METHODS = ("draft_model", "ngram")

    def __post_init__(self):
        _require(self.method in self.METHODS, "speculative_config['method']", self.method, f"one of {self.METHODS}")
        k = self.num_speculative_tokens
        _require(is_int(k) and k >= 0, "speculative_config['num_speculative_tokens']", k, "an integer >= 0")
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        _require(
            is_int(lo) and is_int(hi) and 1 <= lo <= hi,
            "speculative_config['prompt_lookup_min'/'prompt_lookup_max']", (lo, hi), "integers with 1 <= min <= max",
        )

    @classmethod
    def from_dict(cls, d: dict | None) -> "SpeculativeConfig":
        if not d:
            return cls()
        known = {"method", "num_speculative_tokens", "model", "prompt_lookup_min", "prompt_lookup_max"}
        unknown = set(d) - known
        _require(not unknown, "speculative_config", sorted(unknown), f"keys among {sorted(known)}")
        return cls(**d)

    @property
    def enabled(self) -> bool:
        return self.num_speculative_tokens > 0


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 256
    max_model_len: int = 512

    def __post_init__(self):
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            _require(is_int(value) and value > 0, name, value, "an integer > 0")


@dataclass(frozen=True)
class VllmConfig:
    """Everything an engine and its workers are built from, in one picklable
    object (vLLM: ``VllmConfig``), so a worker process can rebuild its stage."""

    model: Path
    arch: LlamaArchitecture
    parallel_config: ParallelConfig
    cache_config: CacheConfig
    scheduler_config: SchedulerConfig
    speculative_config: SpeculativeConfig
    fixes: object  # minispec.instruments.fixes.RunnerFixes
    device: str | None = None
    dtype: object = None  # torch.dtype; None means float32
    seed: int = 0

    def __post_init__(self):
        self.parallel_config.validate_for(self.arch)
        max_len = self.scheduler_config.max_model_len
        positions = self.arch.max_position_embeddings
        _require(max_len <= positions, "max_model_len", max_len, f"at most the model's {positions} positions")
        blocks, block_size = self.cache_config.num_gpu_blocks, self.cache_config.block_size
        if blocks * block_size < max_len:
            # Otherwise one long request could wait forever for blocks.
            raise ValueError(f"num_gpu_blocks={blocks}: expected at least max_model_len / block_size = "
                             f"{-(-max_len // block_size)} blocks")
        spec = self.speculative_config
        if spec.enabled and spec.method == "draft_model":
            draft = LlamaArchitecture.from_pretrained(spec.model, "speculative_config['model']")
            if draft.vocab_size != self.arch.vocab_size:
                raise ValueError(
                    f"speculative_config['model']={str(spec.model)!r}: expected the target's vocabulary "
                    f"({self.arch.vocab_size} tokens), got {draft.vocab_size}"
                )

    @property
    def pipeline_parallel_size(self) -> int:
        return self.parallel_config.pipeline_parallel_size
