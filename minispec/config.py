"""Engine configuration objects, after ``vllm/config.py`` (ModelConfig, CacheConfig,
ParallelConfig, SpeculativeConfig, SchedulerConfig, ObservabilityConfig, VllmConfig),
each reduced to the fields minispec uses. Each config checks its own fields when it is
built, so a bad one is named at once; what needs several configs or a checkpoint's
files is checked where they are all built, ``EngineArgs.create_engine_config``
(``minispec/engine/arg_utils.py``), as in vLLM. Left out: ModelConfig as its own
object (``VllmConfig`` holds the model's path and architecture directly),
tensor/data/expert parallelism, quantisation, compilation, LoRA, device configs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from minispec.token_tree import PARAM as TREE_PARAM
from minispec.token_tree import TokenTree

CHECKPOINT_DIR = Path(__file__).parent / "checkpoints"
DEFAULT_TARGET = CHECKPOINT_DIR / "target"
DEFAULT_DRAFT = CHECKPOINT_DIR / "draft"
DEFAULT_EAGLE3 = CHECKPOINT_DIR / "eagle3"  # EAGLE heads trained on the target (training.eagle)
DEFAULT_EAGLE = CHECKPOINT_DIR / "eagle"


SCRIPT_REPEAT = -1  # a scripted proposal all wrong, proposed again next time (a proposer may repeat itself)


def is_int(value) -> bool:
    """An integer that is not a bool (``True`` is an ``int`` in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def require(ok: bool, name: str, value, expected: str) -> None:
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
    # config.json's "architectures": which class builds it (vLLM's model registry); the
    # explorer's stand-in (model_executor/models/standin.py) is the one other than Llama
    architecture: str = "LlamaForCausalLM"

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
        _check_config_fields(cfg, where)
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
            architecture=(cfg.get("architectures") or ["LlamaForCausalLM"])[0],
        )


_REQUIRED_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
_OPTIONAL_SIZES = ("num_key_value_heads", "head_dim", "max_position_embeddings")


def _check_config_fields(cfg: dict, where: str) -> None:
    """Every size config.json gives is a positive integer, and the required ones are there."""
    for key in _REQUIRED_SIZES:
        if key not in cfg:
            raise ValueError(f"{where}: config.json has no {key!r}: expected a Llama config with {list(_REQUIRED_SIZES)}")
    for key in _REQUIRED_SIZES + _OPTIONAL_SIZES:
        value = cfg.get(key)
        if (key in _REQUIRED_SIZES or value is not None) and not (is_int(value) and value > 0):
            raise ValueError(f"{where}: config.json {key}={value!r}: expected an integer > 0")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ValueError(f"{where}: config.json hidden_size={cfg['hidden_size']}: expected a multiple of "
                         f"num_attention_heads={cfg['num_attention_heads']}")


def read_config_json(path: str | Path, param: str = "model") -> dict:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{param}={path!r}: expected a path (str or pathlib.Path) to a checkpoint directory")
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{param}={str(path)!r}: expected a checkpoint directory, but it does not exist")
    config = path / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{param}={str(path)!r}: expected a transformers checkpoint with config.json in it")
    try:
        cfg = json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{param}={str(path)!r}: config.json is not valid JSON ({e}): expected a transformers "
                         "config") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{param}={str(path)!r}: config.json holds a {type(cfg).__name__}: expected a JSON object")
    return cfg


@dataclass(frozen=True)
class CacheConfig:
    """Paged KV cache shape: ``num_gpu_blocks`` blocks of ``block_size`` tokens.
    ``None`` blocks means enough for every sequence at full length. ``enable_prefix_caching``:
    vLLM's, off here by default (``minispec/v1/core/block_pool.py``)."""

    block_size: int = 16
    num_gpu_blocks: int | None = None
    enable_prefix_caching: bool = False

    def __post_init__(self):
        require(is_int(self.block_size) and self.block_size > 0, "block_size", self.block_size, "an integer > 0")
        require(
            self.num_gpu_blocks is None or (is_int(self.num_gpu_blocks) and self.num_gpu_blocks > 0),
            "num_gpu_blocks", self.num_gpu_blocks, "None or an integer > 0",
        )
        require(isinstance(self.enable_prefix_caching, bool), "enable_prefix_caching", self.enable_prefix_caching,
                "True or False")

    def sized_for(self, max_num_seqs: int, max_model_len: int) -> "CacheConfig":
        if self.num_gpu_blocks is not None:
            return self
        return replace(self, num_gpu_blocks=max_num_seqs * -(-max_model_len // self.block_size))


BACKENDS = ("uni", "mp", "torchrun")


@dataclass(frozen=True)
class ParallelConfig:
    pipeline_parallel_size: int = 1
    distributed_executor_backend: str = "uni"
    # minispec's: batches in flight at once, to turn the batch queue down. vLLM has no
    # setting; None means its value (VllmConfig.max_concurrent_batches).
    max_concurrent_batches: int | None = None
    # A runner design from outside minispec (vLLM: worker_cls, a qualified name there), checked
    # against the runner contract by gpu_worker.resolve_worker_cls; None: model_runner's design.
    worker_cls: type | None = None

    def __post_init__(self):
        require(self.distributed_executor_backend in BACKENDS, "distributed_executor_backend",
                self.distributed_executor_backend, "'uni', 'mp' or 'torchrun'")
        in_flight = self.max_concurrent_batches
        require(in_flight is None or (is_int(in_flight) and in_flight >= 1), "max_concurrent_batches", in_flight,
                "an integer >= 1 or None")

    def validate_for(self, arch: LlamaArchitecture) -> None:
        pp = self.pipeline_parallel_size
        require(
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
    # The draft's config.json, read once by create_engine_config (vLLM:
    # draft_model_config); None for n-gram or no drafts.
    draft_arch: LlamaArchitecture | None = None
    # Method "scripted" (minispec's, for the explorer's stand-in model): per request id, how
    # many of the k drafts of its 1st, 2nd, ... proposal are right; k once the list runs out.
    # SCRIPT_REPEAT in place of a count: all wrong, and the next proposal the same list.
    script: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # Methods "eagle"/"eagle3": the target layers whose entering stream the head reads (its
    # config.json's eagle_aux_hidden_state_layer_ids, as vLLM names it), read once with draft_arch.
    # Method "scripted": given here, the taps the scripted proposer reads (EAGLE-3 shaped).
    eagle_aux_hidden_state_layer_ids: tuple[int, ...] = ()
    # vLLM's string (0.13.0-0.17.0), parsed once into token_tree; None: a chain of k
    speculative_token_tree: str | None = None
    token_tree: TokenTree = field(init=False, repr=False, compare=False)

    METHODS = ("draft_model", "ngram", "scripted", "eagle", "eagle3")
    TREE_METHODS = ("draft_model", "scripted")  # the proposers that can branch (see _check_tree)

    def __post_init__(self):
        require(self.method in self.METHODS, "speculative_config['method']", self.method, f"one of {self.METHODS}")
        k = self.num_speculative_tokens
        require(is_int(k) and k >= 0, "speculative_config['num_speculative_tokens']", k, "an integer >= 0")
        require(isinstance(self.model, (str, os.PathLike)), "speculative_config['model']", self.model,
                "a path to a checkpoint directory")
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        require(
            is_int(lo) and is_int(hi) and 1 <= lo <= hi,
            "speculative_config['prompt_lookup_min'/'prompt_lookup_max']", (lo, hi), "integers with 1 <= min <= max",
        )
        require(not self.script or self.method == "scripted", "speculative_config['script']", dict(self.script),
                "no script unless method is 'scripted'")
        taps = self.eagle_aux_hidden_state_layer_ids
        require(isinstance(taps, tuple) and all(is_int(i) and i >= 0 for i in taps),
                "speculative_config['eagle_aux_hidden_state_layer_ids']", taps, "a tuple of layer indices >= 0")
        for req_id, counts in self.script:
            require(all(is_int(c) and (0 <= c <= k or c == SCRIPT_REPEAT) for c in counts),
                    f"speculative_config['script'][{req_id!r}]", counts,
                    f"right drafts per proposal, integers from 0 to k={k} (or SCRIPT_REPEAT={SCRIPT_REPEAT})")
        tree = TokenTree.chain(k) if self.speculative_token_tree is None else TokenTree.parse(self.speculative_token_tree)
        object.__setattr__(self, "token_tree", tree)
        self._check_tree()

    def _check_tree(self) -> None:
        tree, k = self.token_tree, self.num_speculative_tokens
        require(len(tree) == k, "speculative_config['num_speculative_tokens']", k,
                f"the speculative_token_tree's {len(tree)} nodes (one draft per node)")
        if tree.is_chain:
            return
        why = {"ngram": "n-gram lookup has one continuation per match, no ranked alternatives to branch on",
               "eagle": "minispec's EAGLE heads draft a chain (vLLM 0.17.0's propose_tree is not built)",
               "eagle3": "minispec's EAGLE heads draft a chain (vLLM 0.17.0's propose_tree is not built)"}
        if self.method not in self.TREE_METHODS:
            raise ValueError(f"{TREE_PARAM}={self.speculative_token_tree!r} with method={self.method!r}: "
                             f"{why[self.method]}; expected method in {list(self.TREE_METHODS)} or a chain")

    @classmethod
    def from_dict(cls, d: dict | None) -> "SpeculativeConfig":
        if not d:
            return cls()
        require(isinstance(d, dict), "speculative_config", d, "None or a dict")
        known = {"method", "num_speculative_tokens", "model", "prompt_lookup_min", "prompt_lookup_max", "script",
                 "eagle_aux_hidden_state_layer_ids", "speculative_token_tree"}
        unknown = set(d) - known
        require(not unknown, "speculative_config", sorted(unknown), f"keys among {sorted(known)}")
        taps = d.get("eagle_aux_hidden_state_layer_ids")
        # an EAGLE head's taps are its config.json's; only the scripted proposer takes them here
        require(taps is None or d.get("method") == "scripted", "speculative_config['eagle_aux_hidden_state_layer_ids']",
                taps, "none unless method is 'scripted' (an EAGLE-3 head's taps come from its config.json)")
        require(taps is None or isinstance(taps, (list, tuple)),
                "speculative_config['eagle_aux_hidden_state_layer_ids']", taps, "a list of layer indices")
        # vLLM refuses a speculative config without it rather than guess k; a tree gives it
        if "num_speculative_tokens" not in d and d.get("speculative_token_tree") is not None:
            d = {**d, "num_speculative_tokens": len(TokenTree.parse(d["speculative_token_tree"]))}
        require("num_speculative_tokens" in d, "speculative_config", d,
                "a 'num_speculative_tokens' key (drafts per step) or a 'speculative_token_tree'")
        script = d.get("script") or {}
        require(isinstance(script, dict), "speculative_config['script']", script, "a dict: request id -> counts")
        # vLLM needs the head's path; minispec ships a head of each kind for its target
        heads = {"eagle": DEFAULT_EAGLE, "eagle3": DEFAULT_EAGLE3}
        model = {"model": heads[d["method"]]} if d.get("method") in heads and "model" not in d else {}
        return cls(**{**d, **model, "script": tuple((str(r), tuple(c)) for r, c in sorted(script.items())),
                      "eagle_aux_hidden_state_layer_ids": tuple(taps or ())})

    @property
    def enabled(self) -> bool:
        return self.num_speculative_tokens > 0


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 256
    max_model_len: int = 512
    # vLLM's ``scheduler_config.async_scheduling`` (0.30.0 ``config/scheduler.py``): schedule the
    # next step before this one's output is back, with placeholders (``AsyncScheduler``).
    async_scheduling: bool = False

    def __post_init__(self):
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            require(is_int(value) and value > 0, name, value, "an integer > 0")
        require(isinstance(self.async_scheduling, bool), "async_scheduling", self.async_scheduling, "True or False")


@dataclass(frozen=True)
class ObservabilityConfig:
    """What the engine records as it runs (vLLM: ``ObservabilityConfig``, whose
    fields are tracing and metrics): minispec's trace of every stage's rows, and
    the invariant checker run on it live. Both need the stages in this process."""

    record: bool = False
    check_invariants: bool = False

    def __post_init__(self):
        for name in ("check_invariants", "record"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"{name}={value!r}: expected True or False")

    @property
    def enabled(self) -> bool:
        return self.record or self.check_invariants


@dataclass(frozen=True)
class VllmConfig:
    """Everything an engine and its workers are built from, in one picklable
    object (vLLM: ``VllmConfig``), so a worker process can rebuild its stage.
    Build it with ``EngineArgs(...).create_engine_config()``, which checks the
    configs against each other and against the checkpoints."""

    model: Path
    arch: LlamaArchitecture  # the target's config.json, read once
    parallel_config: ParallelConfig
    cache_config: CacheConfig
    scheduler_config: SchedulerConfig
    speculative_config: SpeculativeConfig
    switches: object  # minispec.v1.worker.switches.Switches: fixes= and faults=, resolved for model_runner
    design: object  # minispec.v1.worker.designs.Design: the runner design's record, model_runner's
    device: str | None = None
    dtype: object = None  # torch.dtype; None means float32
    seed: int = 0
    observability_config: ObservabilityConfig = ObservabilityConfig()

    @property
    def model_runner(self) -> str:
        """The design's name (``model_runner=``; a ``ModelRunner`` member for the built-in four)."""
        return self.design.name

    @property
    def pipeline_parallel_size(self) -> int:
        return self.parallel_config.pipeline_parallel_size

    @property
    def max_concurrent_batches(self) -> int:
        """The engine's batch queue size, its one source (vLLM 0.30.0 ``config/vllm.py`` 588-599,
        read by ``EngineCore.__init__``, ``v1/engine/core.py`` 210): one batch per pipeline
        stage, unless ``ParallelConfig.max_concurrent_batches`` asks for another number. With
        ``async_scheduling`` vLLM adds one: Model Runner V2 keeps ``pp_size + 1`` batches in
        flight, V1 two without pipeline parallelism and ``pp_size`` with it (V1 "does not fully
        support async scheduling with PP", the comment there says). vLLM asks its flag
        ``use_v2_model_runner``; minispec asks the design's record (``async_batches_in_flight``)."""
        if self.parallel_config.max_concurrent_batches:
            return self.parallel_config.max_concurrent_batches
        pp = self.pipeline_parallel_size
        if self.scheduler_config.async_scheduling:
            return self.design.async_batches_in_flight(pp)
        return pp


DTYPES = ("float32", "float16", "bfloat16")


def resolve_dtype(dtype):
    """A ``torch.dtype`` from a dtype or its name (vLLM accepts names too)."""
    import torch

    if isinstance(dtype, str) and dtype in DTYPES:
        return getattr(torch, dtype)
    require(dtype in (torch.float32, torch.float16, torch.bfloat16), "dtype", dtype,
            f"torch.float32, torch.float16 or torch.bfloat16, or one of {DTYPES}")
    return dtype


def check_device(device) -> None:
    """``None`` (choose), or a device torch knows and this machine has."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r}: expected None, 'cpu' or 'cuda[:N]'") from None
    if dev.type == "cuda" and not (torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count()):
        raise ValueError(f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s): "
                         "expected None or 'cpu'")
    require(dev.type in ("cpu", "cuda"), "device", device, "None, 'cpu' or 'cuda[:N]'")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def memory_plan(config: "VllmConfig", dtype_bytes: int, blocks_given: bool = True) -> list[tuple[str, int]]:
    """What each buffer the engine allocates up front costs, in bytes, with the
    parameters that size it (summed over stages). ``blocks_given``: whether the
    user chose num_gpu_blocks (else it was sized for max_num_seqs full-length requests)."""
    sched, cache, arch = config.scheduler_config, config.cache_config, config.arch
    seqs, max_len, pp = sched.max_num_seqs, sched.max_model_len, config.pipeline_parallel_size
    blocks_per_req = -(-max_len // cache.block_size)
    kv_per_token = 2 * arch.num_key_value_heads * arch.head_dim * dtype_bytes
    blocks = f"num_gpu_blocks={cache.num_gpu_blocks}"
    if not blocks_given:
        blocks += f" (max_num_seqs={seqs} x {blocks_per_req} blocks of max_model_len={max_len})"
    plan = [
        (f"{blocks} x block_size={cache.block_size} (the target's KV cache)",
         cache.num_gpu_blocks * cache.block_size * kv_per_token * arch.num_hidden_layers),
        (f"max_num_seqs={seqs} x max_model_len={max_len} (every stage's persistent batch)",
         pp * seqs * (max_len + blocks_per_req) * 8),
    ]
    draft = config.speculative_config.draft_arch
    if draft is not None:
        plan.append((f"max_num_seqs={seqs} x max_model_len={max_len} rounded up to block_size={cache.block_size} "
                     "(the draft model's KV cache)",
                     seqs * blocks_per_req * cache.block_size * 2 * draft.num_key_value_heads * draft.head_dim
                     * dtype_bytes * draft.num_hidden_layers))
    return plan


def available_memory() -> int:
    """Bytes the kernel says it can still hand out (MemAvailable), or all RAM."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(config: "VllmConfig", dtype_bytes: int, available: int, blocks_given: bool = True) -> None:
    """Refuse, before allocating, a configuration whose buffers exceed ``available`` bytes."""
    plan = memory_plan(config, dtype_bytes, blocks_given)
    total = sum(n for _, n in plan)
    if total > available:
        what, most = max(plan, key=lambda p: p[1])
        raise ValueError(f"{what} asks for {_gib(most)} ({_gib(total)} in all): expected at most the "
                         f"{_gib(available)} of memory available; lower it")
