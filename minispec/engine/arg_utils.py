"""The engine's arguments and the one place they are checked together (vLLM:
``vllm/engine/arg_utils.py``, ``EngineArgs.create_engine_config``).

``LLM(model, **kwargs)`` passes its arguments here as ``EngineArgs(model=model, **kwargs)``;
``create_engine_config()`` builds every config (each checks its own fields), checks
them against each other and against the checkpoints, and returns the ``VllmConfig``
the executors and runners are built from. Each checkpoint's ``config.json`` is read
once, here: the target's into ``VllmConfig.arch``, the draft's into
``SpeculativeConfig.draft_arch``. Nothing is allocated before every check has passed,
including the memory check, so a bad argument never leaves anything half-built.
``fixes``, ``faults``, ``record``, ``check_invariants`` and ``max_concurrent_batches`` are
minispec's; ``worker_cls`` is vLLM's (``ParallelConfig.worker_cls``; a class or its qualified
name here, ``minispec/v1/worker/gpu_worker.py``); ``model_runner`` stands for vLLM's
``VLLM_USE_V2_MODEL_RUNNER``, which minispec's ``MINISPEC_USE_V2_MODEL_RUNNER`` sets the
default of (``minispec/v1/worker/gpu/__init__.py``), and names any registered design: its
record (``minispec/v1/worker/designs.py``) goes into ``VllmConfig.design``, and every check
that depends on the design (its proposers, its switches) reads the record.
Left out: the command-line parser (``add_cli_args``), ``AsyncEngineArgs``, and every
argument minispec has no use for (tokenizer modes, quantisation, LoRA, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

from minispec.config import (
    DEFAULT_TARGET,
    CacheConfig,
    LlamaArchitecture,
    ObservabilityConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
    available_memory,
    check_device,
    check_memory,
    is_int,
    read_config_json,
    require,
    resolve_dtype,
)
from minispec.transformers_utils.tokenizer import load_tokenizer
from minispec.v1.spec_decode.eagle import EAGLE_METHODS
from minispec.v1.worker.designs import DESIGNS, Design, get_design
from minispec.v1.worker.gpu import default_model_runner
from minispec.v1.worker.gpu_worker import resolve_worker_cls
from minispec.v1.worker.runner_fixes import Preset
from minispec.v1.worker.switchboard import resolve_switches
from minispec.v1.worker.switches import SwitchPreset, SwitchSettings


@dataclass
class EngineArgs:
    model: str | Path = DEFAULT_TARGET
    pipeline_parallel_size: int = 1
    speculative_config: dict | None = None
    fixes: SwitchPreset | str | SwitchSettings = Preset.ALL  # a design's RunnerFixes or a preset: checked against model_runner (switchboard.py)
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 512
    max_model_len: int | None = None  # None: the model's positions, at most 512
    block_size: int = 16
    num_gpu_blocks: int | None = None  # None: enough for max_num_seqs full-length requests
    check_invariants: bool = False
    record: bool = False
    seed: int = 0
    device: str | None = None
    dtype: torch.dtype | str = torch.float32
    distributed_executor_backend: str = "uni"
    max_concurrent_batches: int | None = None  # None: VllmConfig.max_concurrent_batches's (one per stage)
    model_runner: str | None = None  # a design in DESIGNS (designs.py); None: MINISPEC_USE_V2_MODEL_RUNNER's, else "v1"
    faults: SwitchPreset | str | None = None  # one fault preset by name; None: none
    worker_cls: type | str | None = None  # a runner design from outside minispec (gpu_worker.resolve_worker_cls)
    async_scheduling: bool = False  # vLLM's: schedule ahead with placeholders (v1/core/sched/async_scheduler.py)
    enable_prefix_caching: bool = False  # vLLM's (on by default there): reuse cached full blocks (v1/core/block_pool.py)

    def create_engine_config(self) -> VllmConfig:
        observability = ObservabilityConfig(record=self.record, check_invariants=self.check_invariants)
        arch = LlamaArchitecture.from_pretrained(self.model)
        max_model_len = self.max_model_len
        if max_model_len is None:
            max_model_len = min(512, arch.max_position_embeddings)
        scheduler = SchedulerConfig(self.max_num_seqs, self.max_num_batched_tokens, max_model_len,
                                    self.async_scheduling)
        dtype = resolve_dtype(self.dtype)
        design = get_design(default_model_runner() if self.model_runner is None else self.model_runner)
        parallel = ParallelConfig(self.pipeline_parallel_size, self.distributed_executor_backend,
                                  self.max_concurrent_batches, resolve_worker_cls(self.worker_cls, design.name))
        cache = CacheConfig(self.block_size, self.num_gpu_blocks, self.enable_prefix_caching).sized_for(
            self.max_num_seqs, max_model_len)
        spec = SpeculativeConfig.from_dict(self.speculative_config)
        _check_prefix_caching(spec, cache)
        _check_eagle_design(spec, design, self.pipeline_parallel_size)  # the EAGLE reason before the general one
        _check_proposer(design, spec)
        _check_tree_design(spec, design, self.pipeline_parallel_size, self.async_scheduling)
        switches = resolve_switches(design.name, fixes=self.fixes, faults=self.faults)
        require(is_int(self.seed) and 0 <= self.seed < 2**63, "seed", self.seed, "an integer in [0, 2**63)")
        check_device(self.device)
        parallel.validate_for(arch)
        _check_sizes(arch, scheduler, cache)
        config = VllmConfig(
            model=Path(self.model), arch=arch, parallel_config=parallel, cache_config=cache,
            scheduler_config=scheduler, speculative_config=_with_draft(spec, arch, self.model), switches=switches,
            design=design, device=self.device, dtype=dtype, seed=self.seed, observability_config=observability,
        )
        check_memory(config, dtype.itemsize, available_memory(), blocks_given=self.num_gpu_blocks is not None)
        _check_recording(observability, parallel.distributed_executor_backend)
        return config


def _check_prefix_caching(spec: SpeculativeConfig, cache: CacheConfig) -> None:
    """minispec's EAGLE heads keep their own cache, fed the target's hidden states at every
    position: a prefix hit computes none for the positions it skips."""
    reads_taps = spec.method in EAGLE_METHODS or spec.eagle_aux_hidden_state_layer_ids
    if cache.enable_prefix_caching and spec.enabled and reads_taps:
        raise ValueError(f"enable_prefix_caching=True with speculative_config method={spec.method!r} reading the "
                         "target's hidden states: minispec's drafter reads them at every position, which a prefix hit "
                         "does not compute; expected enable_prefix_caching=False, or a drafter without taps")


def _check_proposer(design: Design, spec: SpeculativeConfig) -> None:
    """A design that accepts only some proposers (replicated drafting: one of the history alone,
    so that every stage drafts the same) refuses the others."""
    if spec.enabled and not design.accepts(spec.method):
        raise ValueError(f"speculative_config method={spec.method!r}: model_runner={design.name!r} "
                         f"{design.proposers_why}, so it expects one of {list(design.proposers)}")


def _check_tree_design(spec: SpeculativeConfig, design: Design, pp: int, async_scheduling: bool) -> None:
    """A branching tree needs every stage to learn its accepted path: the design's record says whether."""
    if spec.enabled and not spec.token_tree.is_chain and not design.carries_tree(pp, async_scheduling):
        carriers = [name for name, d in DESIGNS.items() if d.carries_tree(pp, async_scheduling)]
        raise ValueError(f"speculative_config['speculative_token_tree']={spec.speculative_token_tree!r}: "
                         f"model_runner={design.name!r} {design.tree_drafts_why}; expected model_runner in {carriers}")


def _check_sizes(arch: LlamaArchitecture, scheduler: SchedulerConfig, cache: CacheConfig) -> None:
    max_len, positions = scheduler.max_model_len, arch.max_position_embeddings
    require(max_len <= positions, "max_model_len", max_len, f"at most the model's {positions} positions")
    if cache.num_gpu_blocks * cache.block_size < max_len:
        # Otherwise one long request could wait forever for blocks.
        raise ValueError(f"num_gpu_blocks={cache.num_gpu_blocks}: expected at least max_model_len / block_size = "
                         f"{-(-max_len // cache.block_size)} blocks")


def _with_draft(spec: SpeculativeConfig, arch: LlamaArchitecture, target: str | Path) -> SpeculativeConfig:
    """The draft model's architecture, read once, checked against the target's."""
    if spec.enabled and spec.method == "scripted" and arch.architecture != "StandInForCausalLM":
        raise ValueError(f"speculative_config['method']='scripted': drafts from the stand-in model's own "
                         f"function; expected model=<a StandInForCausalLM checkpoint>, got {arch.architecture}")
    require(all(i <= arch.num_hidden_layers for i in spec.eagle_aux_hidden_state_layer_ids),
            "speculative_config['eagle_aux_hidden_state_layer_ids']", list(spec.eagle_aux_hidden_state_layer_ids),
            f"layer indices from 0 to the target's {arch.num_hidden_layers}")
    if spec.enabled and spec.method in EAGLE_METHODS:
        return _with_eagle_head(spec, arch)
    if not (spec.enabled and spec.method == "draft_model"):
        return spec
    draft = LlamaArchitecture.from_pretrained(spec.model, "speculative_config['model']")
    if draft.vocab_size != arch.vocab_size:
        raise ValueError(f"speculative_config['model']={str(spec.model)!r}: expected the target's vocabulary "
                         f"({arch.vocab_size} tokens), got {draft.vocab_size}")
    _check_draft_tokenizer(spec.model, target)
    return replace(spec, draft_arch=draft)


def _with_eagle_head(spec: SpeculativeConfig, arch: LlamaArchitecture) -> SpeculativeConfig:
    """An EAGLE head's architecture and taps, checked against the target whose hidden states it reads."""
    where = f"speculative_config['model']={str(spec.model)!r}"
    if arch.architecture != "LlamaForCausalLM":
        raise ValueError(f"speculative_config['method']={spec.method!r}: the head reads the target's hidden "
                         f"states; expected a Llama target, got {arch.architecture} (it has none)")
    head = LlamaArchitecture.from_pretrained(spec.model, "speculative_config['model']")
    taps = tuple(read_config_json(spec.model).get("eagle_aux_hidden_state_layer_ids") or ())
    if (head.hidden_size, head.vocab_size) != (arch.hidden_size, arch.vocab_size):
        raise ValueError(f"{where}: hidden_size {head.hidden_size}, vocab_size {head.vocab_size}: expected the "
                         f"target's {arch.hidden_size} and {arch.vocab_size}")
    if bool(taps) != (spec.method == "eagle3"):
        raise ValueError(f"{where}: eagle_aux_hidden_state_layer_ids={list(taps)}: method 'eagle3' expects a head "
                         "with taps, 'eagle' one without (it reads the last hidden state)")
    require(all(is_int(i) and 0 <= i <= arch.num_hidden_layers for i in taps),
            f"{where}: eagle_aux_hidden_state_layer_ids", list(taps),
            f"layer indices from 0 to the target's {arch.num_hidden_layers}")
    return replace(spec, draft_arch=head, eagle_aux_hidden_state_layer_ids=taps)


def _check_eagle_design(spec: SpeculativeConfig, design: Design, pp_size: int) -> None:
    """An EAGLE head reads hidden states that, under pipeline parallelism, live on other stages:
    only a design whose record says its hand-over carries them runs one there (one stage carries
    nothing, so any design that accepts the method runs it at PP 1)."""
    reads_taps = spec.method in EAGLE_METHODS or spec.eagle_aux_hidden_state_layer_ids  # or the scripted, so
    if not spec.enabled or not reads_taps or design.can_carry_hidden_states:
        return
    if pp_size == 1 and design.accepts(spec.method):
        return
    carriers = [name for name, d in DESIGNS.items() if d.can_carry_hidden_states]
    raise ValueError(f"speculative_config['method']={spec.method!r}: model_runner={design.name!r} "
                     f"{design.hidden_states_why}; expected model_runner in {carriers}"
                     + (", or pipeline_parallel_size=1" if design.accepts(spec.method) else ""))


def _check_draft_tokenizer(draft_dir: str | Path, target_dir: str | Path) -> None:
    """Drafts are verified id for id, so both models must read ids as the same text."""
    target, draft = load_tokenizer(target_dir), load_tokenizer(draft_dir)
    if target is not None and draft is not None and draft.get_vocab() != target.get_vocab():
        raise ValueError(f"speculative_config['model']={str(draft_dir)!r}: its tokenizer.json maps tokens to "
                         "other ids than the target's: expected the target's tokenizer")


def _check_recording(observability: ObservabilityConfig, backend: str) -> None:
    if observability.enabled and backend != "uni":
        raise ValueError(f"record/check_invariants: expected distributed_executor_backend='uni' "
                         f"(stage records live in worker processes under {backend!r})")
