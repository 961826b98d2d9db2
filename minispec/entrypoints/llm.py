"""The user-facing ``LLM`` class (vLLM: ``vllm/entrypoints/llm.py``).

Builds the engine -- an executor holding one ``ModelRunner`` per pipeline
stage, a scheduler and an engine core -- and runs ``generate`` to completion. Arguments mirror vLLM's where they exist;
``fixes``, ``record``, ``check_invariants`` and ``arrival_steps`` are minispec's.
So is ``max_concurrent_batches``, the number of batches in flight at once: vLLM's
executor derives it from ``pipeline_parallel_size`` (``Executor.max_concurrent_batches``)
and offers no setting; minispec defaults to the same and lets 1 turn the batch
queue off, to measure what it buys. ``distributed_executor_backend="torchrun"``
is minispec's way across machines (vLLM's is Ray; see the README).
Everything is validated before a single request is added, so a bad request
never leaves the engine half-changed.
"""

from __future__ import annotations

import itertools
import numbers
import os
import sys
from pathlib import Path

import torch

from minispec.config import (
    DEFAULT_TARGET,
    CacheConfig,
    LlamaArchitecture,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
    is_int,
)
from minispec.instruments.fixes import RunnerFixes, resolve_fixes
from minispec.instruments.invariants import InvariantChecker
from minispec.outputs import CompletionOutput, RequestOutput
from minispec.sampling_params import SamplingParams
from minispec.transformers_utils.tokenizer import load_tokenizer
from minispec.instruments.trace import TraceRecorder
from minispec.v1.core.kv_cache_manager import KVCacheManager
from minispec.v1.core.sched.scheduler import Scheduler
from minispec.v1.engine.core import EngineCore
from minispec.v1.executor.inproc_executor import InProcPipelineExecutor
from minispec.v1.request import Request, RequestStatus


class LLM:
    def __init__(
        self,
        model: str | Path = DEFAULT_TARGET,
        pipeline_parallel_size: int = 1,
        speculative_config: dict | None = None,
        fixes: str | RunnerFixes = "all",
        max_num_seqs: int = 16,
        max_num_batched_tokens: int = 512,
        max_model_len: int | None = None,
        block_size: int = 16,
        num_gpu_blocks: int | None = None,
        check_invariants: bool = False,
        record: bool = False,
        seed: int = 0,
        device: str | None = None,
        dtype: torch.dtype = torch.float32,
        distributed_executor_backend: str = "uni",
        max_concurrent_batches: int | None = None,
    ):
        arch = LlamaArchitecture.from_pretrained(model)
        self.fixes_name = fixes if isinstance(fixes, str) else repr(fixes)
        scheduler_config = SchedulerConfig(
            max_num_seqs, max_num_batched_tokens, max_model_len or min(512, arch.max_position_embeddings)
        )
        self.config = VllmConfig(
            model=Path(model), arch=arch, parallel_config=ParallelConfig(pipeline_parallel_size),
            cache_config=CacheConfig(block_size, num_gpu_blocks).sized_for(max_num_seqs, scheduler_config.max_model_len),
            scheduler_config=scheduler_config, speculative_config=SpeculativeConfig.from_dict(speculative_config),
            fixes=resolve_fixes(fixes), device=device, dtype=dtype, seed=seed,
        )
        self.arch, self.scheduler_config = arch, scheduler_config
        self.tokenizer = load_tokenizer(model)
        pp = pipeline_parallel_size
        self.recorder = None
        if record or check_invariants:
            self.recorder = TraceRecorder(self.fixes_name, pp, InvariantChecker() if check_invariants else None)
        in_flight = pp if max_concurrent_batches is None else max_concurrent_batches
        if not (is_int(in_flight) and in_flight >= 1):
            raise ValueError(f"max_concurrent_batches={max_concurrent_batches!r}: expected an integer >= 1 or None")
        executor = self._make_executor(distributed_executor_backend)
        kv = KVCacheManager(self.config.cache_config.num_gpu_blocks, block_size)
        self.scheduler = Scheduler(scheduler_config, kv, use_pp=pp > 1)
        self.engine = EngineCore(self.scheduler, executor, in_flight, self.recorder)
        self._ids = itertools.count()
        self._used_ids: set[str] = set()  # queued, running or finished: ids are never reused

    def _make_executor(self, backend: str):
        if backend == "uni":
            return InProcPipelineExecutor(self.config, self.recorder)
        if backend not in ("mp", "torchrun"):
            raise ValueError(f"distributed_executor_backend={backend!r}: expected 'uni', 'mp' or 'torchrun'")
        if self.recorder is not None:
            raise ValueError(f"record/check_invariants: expected distributed_executor_backend='uni' "
                             f"(stage records live in worker processes under {backend!r})")
        from minispec.v1.executor import multiproc_executor

        if backend == "torchrun" and int(os.environ.get("RANK", "0")) > 0:
            # The same script runs on every rank; the rest of it is rank 0's.
            multiproc_executor.serve_stage(self.config)
            sys.exit(0)
        return multiproc_executor.MultiprocPipelineExecutor(self.config, launcher=backend)

    def shutdown(self) -> None:
        """Stop the worker processes (a no-op for the in-process executor); also
        done on leaving a ``with LLM(...)`` block, when the ``LLM`` is garbage
        collected and at interpreter exit. A shut-down multi-process ``LLM`` refuses to generate."""
        self.engine.executor.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    @property
    def trace(self):
        return self.recorder.trace if self.recorder else None

    def timeline(self):
        """When each stage worked on each batch so far (``minispec.instruments.timeline``)."""
        return self.engine.executor.timeline

    # -- requests ---------------------------------------------------------
    def _to_token_ids(self, prompt, label: str = "prompt") -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError(f"{label} is text but the checkpoint has no tokenizer.json: pass token ids")
            ids = self.tokenizer.encode(prompt).ids
        else:
            ids = list(prompt)
        if not ids:
            raise ValueError(f"{label} is empty: expected at least one token")
        bad = [t for t in ids if not isinstance(t, numbers.Integral) or not 0 <= t < self.arch.vocab_size]
        if bad:
            raise ValueError(f"{label} has token id {bad[0]!r}: expected integers in [0, {self.arch.vocab_size})")
        limit = self.scheduler_config.max_model_len - 1
        if len(ids) > limit:
            raise ValueError(f"{label} has {len(ids)} tokens: expected at most max_model_len - 1 = {limit}")
        return [int(t) for t in ids]

    def _check_request(self, prompt, params, arrival_step, request_id, label) -> list[int]:
        """Everything about one request that could go wrong later, checked now."""
        if not isinstance(params, SamplingParams):
            raise ValueError(f"sampling params for {label}={params!r}: expected a SamplingParams")
        if not (is_int(arrival_step) and arrival_step >= 0):
            raise ValueError(f"arrival step for {label}={arrival_step!r}: expected an integer >= 0")
        if request_id is not None and request_id in self._used_ids:
            raise ValueError(f"request_id={request_id!r}: expected an id not used before")
        return self._to_token_ids(prompt, label)

    def _queue(self, ids: list[int], params: SamplingParams, arrival_step: int, request_id: str | None) -> Request:
        if request_id is None:
            request_id = next(i for i in (f"req-{n}" for n in self._ids) if i not in self._used_ids)
        self._used_ids.add(request_id)
        request = Request(request_id, ids, params, self.arch.eos_token_id)
        self.engine.add_request(request, self.engine.engine_step + arrival_step)
        return request

    def add_request(self, prompt, params: SamplingParams, arrival_step: int = 0,
                    request_id: str | None = None) -> Request:
        """Validate and queue one request, to arrive ``arrival_step`` engine
        steps from now, without running the engine."""
        ids = self._check_request(prompt, params, arrival_step, request_id, "prompt")
        return self._queue(ids, params, arrival_step, request_id)

    def generate(self, prompts, sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 arrival_steps: list[int] | None = None) -> list[RequestOutput]:
        """Generate for every prompt (text or token ids). ``arrival_steps[i]``
        delays prompt i by that many engine steps, to stagger arrivals."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], numbers.Integral)):
            prompts = [prompts]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(prompts)
        arrivals = [0] * len(prompts) if arrival_steps is None else list(arrival_steps)
        if len(params) != len(prompts) or len(arrivals) != len(prompts):
            raise ValueError(f"sampling_params and arrival_steps: expected one per prompt ({len(prompts)})")
        # Every request is checked before any is queued.
        checked = [self._check_request(p, sp, a, None, f"prompts[{i}]")
                   for i, (p, sp, a) in enumerate(zip(prompts, params, arrivals))]
        requests = [self._queue(ids, sp, a, None) for ids, sp, a in zip(checked, params, arrivals)]
        self.engine.run()
        return [self._output(r, p) for r, p in zip(requests, prompts)]

    def _output(self, request: Request, prompt) -> RequestOutput:
        reason = {RequestStatus.FINISHED_STOPPED: "stop", RequestStatus.FINISHED_LENGTH_CAPPED: "length"}
        text = self.tokenizer.decode(request.output_token_ids) if self.tokenizer else ""
        return RequestOutput(
            request_id=request.request_id, prompt=prompt if isinstance(prompt, str) else None,
            prompt_token_ids=request.prompt_token_ids,
            outputs=[CompletionOutput(0, text, list(request.output_token_ids), reason.get(request.status))],
            finished=request.is_finished(), num_draft_tokens=request.num_draft_tokens,
            num_accepted_tokens=request.num_accepted_tokens, num_preemptions=request.num_preemptions,
        )

    def stats(self) -> dict:
        """Engine totals since construction."""
        reqs = self.scheduler.requests.values()
        generated = sum(r.num_output_tokens for r in reqs)
        drafts = sum(r.num_draft_tokens for r in reqs)
        accepted = sum(r.num_accepted_tokens for r in reqs)
        steps = sum(r.num_sampling_steps for r in reqs)
        return {
            "target_forwards": self.engine.num_batches,
            "generated_tokens": generated,
            "draft_tokens": drafts,
            "accepted_tokens": accepted,
            "acceptance_rate": accepted / drafts if drafts else 0.0,
            # per request: tokens emitted per target forward it took part in
            "tokens_per_forward": generated / steps if steps else 0.0,
            "preemptions": self.scheduler.num_preemptions,
        }

