"""The user-facing ``LLM`` class (vLLM: ``vllm/entrypoints/llm.py``).

Builds the engine as vLLM does: ``EngineArgs(model=model, **kwargs)``, whose
``create_engine_config()`` checks every argument and returns the ``VllmConfig``
(``minispec.engine.arg_utils``); then ``EngineCore(vllm_config, Executor.get_class(vllm_config))``,
which builds the executor (one ``GPUModelRunner`` per pipeline stage), the KV-cache manager
and the scheduler, as vLLM 0.30.0's ``LLMEngine.from_vllm_config`` and ``EngineCore.__init__``
do (``v1/engine/llm_engine.py`` 149-158, ``v1/engine/core.py`` 108-170). What stays here is
the requests' side: each prompt and its parameters checked, queued, and the outputs built
once ``generate`` has run to completion. Arguments mirror vLLM's where they exist;
``fixes``, ``record``, ``check_invariants`` and ``arrival_steps`` are minispec's.
So is ``max_concurrent_batches``, the number of batches in flight at once: vLLM has no
setting (its ``VllmConfig.max_concurrent_batches`` is ``pipeline_parallel_size``,
0.30.0 ``config/vllm.py`` 588-599); minispec defaults to the same and lets 1 turn the batch
queue off, to measure what it buys. ``distributed_executor_backend="torchrun"``
is minispec's way across machines (vLLM's is Ray; see ``docs/executors.md``): the ``LLM`` runs on rank 0,
and the other ranks call ``minispec.entrypoints.cli.serve.run_headless``.
Everything is validated before a single request is added, so a bad request
never leaves the engine half-changed.
"""

from __future__ import annotations

import itertools
import numbers
import reprlib
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from minispec.config import DEFAULT_TARGET, is_int
from minispec.engine.arg_utils import EngineArgs
from minispec.instruments.invariants import InvariantChecker
from minispec.instruments.trace import TraceRecorder
from minispec.outputs import CompletionOutput, RequestOutput
from minispec.sampling_params import SamplingParams
from minispec.transformers_utils.tokenizer import load_tokenizer
from minispec.v1.engine.core import EngineCore
from minispec.v1.executor import Executor
from minispec.v1.request import Request, RequestStatus


class LLM:
    """The entry point a notebook or script uses: ``LLM(model, **engine_args).generate(prompts, params)``.
    It builds the engine (``EngineCore``) from the checked arguments and hands back one
    ``RequestOutput`` per prompt, so code written against vLLM's ``LLM`` reads the same here."""

    def __init__(self, model: str | Path = DEFAULT_TARGET, **kwargs):
        """``kwargs`` are ``EngineArgs`` fields (``minispec.engine.arg_utils``), as in vLLM:
        ``pipeline_parallel_size``, ``speculative_config``, ``fixes``, ``max_num_seqs``,
        ``max_num_batched_tokens``, ``max_model_len``, ``block_size``, ``num_gpu_blocks``,
        ``check_invariants``, ``record``, ``seed``, ``device``, ``dtype``,
        ``distributed_executor_backend``, ``max_concurrent_batches``, ``model_runner``, ``faults``,
        ``worker_cls``, ``async_scheduling``, ``enable_prefix_caching``."""
        args = EngineArgs(model=model, **kwargs)
        self.config = args.create_engine_config()  # every argument checked, nothing allocated yet
        self.arch, self.scheduler_config = self.config.arch, self.config.scheduler_config
        self.fixes_name = str(args.fixes) if isinstance(args.fixes, str) else repr(args.fixes)
        self.tokenizer = load_tokenizer(model)
        pp, observability = self.config.pipeline_parallel_size, self.config.observability_config
        self.recorder = None
        if observability.enabled:
            checker = InvariantChecker() if observability.check_invariants else None
            self.recorder = TraceRecorder(self.fixes_name, pp, checker)
        self.engine = EngineCore(self.config, Executor.get_class(self.config), self.recorder)
        self.scheduler = self.engine.scheduler
        self._ids = itertools.count()
        self._used_ids: set[str] = set()  # queued, running or finished: ids are never reused
        self._texts: dict[str, str] = {}  # the text of each text prompt not yet returned, by request id

    def shutdown(self) -> None:
        """Stop the worker processes (a no-op for the in-process executor); also
        done on leaving a ``with LLM(...)`` block, when the ``LLM`` is garbage
        collected and at interpreter exit. A shut-down multi-process ``LLM`` refuses to generate."""
        self.engine.shutdown()

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
    def _encode(self, text: str, label: str) -> list[int]:
        """Text as text: a special token's spelling is refused, unknown characters warned about."""
        if self.tokenizer is None:
            raise ValueError(f"{label} is text but the checkpoint has no tokenizer.json: pass token ids")
        enc = self.tokenizer.encode(text)
        special = {i: t.content for i, t in self.tokenizer.get_added_tokens_decoder().items()}
        unk = self.tokenizer.token_to_id("<unk>")
        unknown = "".join(text[a:b] for i, (a, b) in zip(enc.ids, enc.offsets) if i == unk and text[a:b] != "<unk>")
        if unknown:
            warnings.warn(f"{label} has characters the tokenizer does not know, {unknown!r}: each becomes "
                          f"<unk> (id {unk})", stacklevel=2)
        spelled = [special[i] for i in enc.ids if i in special and i != unk]
        if spelled or "<unk>" in text:
            raise ValueError(f"{label} contains the text {(spelled or ['<unk>'])[0]!r}, which the tokenizer reads "
                             "as a special token: expected plain text (pass token ids to use special tokens)")
        return enc.ids

    def _to_token_ids(self, prompt, label: str = "prompt") -> list[int]:
        if isinstance(prompt, str):
            ids = self._encode(prompt, label)
        elif isinstance(prompt, (torch.Tensor, np.ndarray)) and prompt.ndim == 1:
            ids = prompt.tolist()
        elif prompt is None or isinstance(prompt, (bytes, bytearray, dict, torch.Tensor, np.ndarray)) \
                or not hasattr(prompt, "__iter__"):
            raise ValueError(f"{label}={reprlib.repr(prompt)}: expected text (str) or a sequence of token ids")
        else:
            ids = list(prompt)
        if not ids:
            raise ValueError(f"{label} is empty: expected at least one token")
        bad = [t for t in ids if not _is_token_id(t) or not 0 <= t < self.arch.vocab_size]
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
        vocab = self.arch.vocab_size
        bad_stops = [t for t in params.stop_token_ids if not 0 <= t < vocab]
        if bad_stops:
            raise ValueError(f"SamplingParams.stop_token_ids={params.stop_token_ids!r} for {label}: expected "
                             f"token ids in [0, {vocab})")
        if not (is_int(arrival_step) and arrival_step >= 0):
            raise ValueError(f"arrival step for {label}={arrival_step!r}: expected an integer >= 0")
        if request_id is not None and request_id in self._used_ids:
            raise ValueError(f"request_id={request_id!r}: expected an id not used before")
        return self._to_token_ids(prompt, label)

    def _queue(self, prompt, ids: list[int], params: SamplingParams, arrival_step: int,
               request_id: str | None) -> Request:
        if request_id is None:
            request_id = next(i for i in (f"req-{n}" for n in self._ids) if i not in self._used_ids)
        self._used_ids.add(request_id)
        if isinstance(prompt, str):
            self._texts[request_id] = prompt
        request = Request(request_id, ids, params, self.arch.eos_token_id)
        self.engine.add_request(request, self.engine.engine_step + arrival_step)
        return request

    def add_request(self, prompt, params: SamplingParams, arrival_step: int = 0,
                    request_id: str | None = None) -> Request:
        """Validate and queue one request, to arrive ``arrival_step`` engine
        steps from now, without running the engine."""
        ids = self._check_request(prompt, params, arrival_step, request_id, "prompt")
        self.engine.recover()
        return self._queue(prompt, ids, params, arrival_step, request_id)

    def generate(self, prompts, sampling_params: SamplingParams | list[SamplingParams] | None = None,
                 arrival_steps: list[int] | None = None) -> list[RequestOutput]:
        """Generate for every prompt (text or token ids). ``arrival_steps[i]``
        delays prompt i by that many engine steps, to stagger arrivals."""
        prompts = _prompt_list(prompts)
        if isinstance(sampling_params, (list, tuple)):
            params = list(sampling_params)
        else:
            params = [sampling_params or SamplingParams()] * len(prompts)
        if arrival_steps is None:
            arrivals = [0] * len(prompts)
        elif isinstance(arrival_steps, (str, bytes, dict)) or not hasattr(arrival_steps, "__iter__"):
            raise ValueError(f"arrival_steps={reprlib.repr(arrival_steps)}: expected a list of integers >= 0, "
                             "one per prompt")
        else:
            arrivals = list(arrival_steps)
        if len(params) != len(prompts) or len(arrivals) != len(prompts):
            raise ValueError(f"sampling_params and arrival_steps: expected one per prompt ({len(prompts)})")
        # Every request is checked before any is queued.
        checked = [self._check_request(p, sp, a, None, f"prompts[{i}]")
                   for i, (p, sp, a) in enumerate(zip(prompts, params, arrivals))]
        self.engine.recover()
        with self._aborting_on_error():
            requests = [self._queue(p, ids, sp, a, None) for p, ids, sp, a in zip(prompts, checked, params, arrivals)]
            self.engine.run()
        outputs = {r.request_id: self._output(r) for r in self.engine.finished}
        return [outputs[r.request_id] for r in requests]

    def wait_for_completion(self) -> list[RequestOutput]:
        """Run every request queued with ``add_request`` to completion and return their outputs,
        in the order they finished (vLLM 0.30.0: ``LLM.wait_for_completion`` after ``enqueue``,
        ``entrypoints/llm.py`` 543-565). As in ``generate``, an exception, ``KeyboardInterrupt``
        too, aborts every unfinished request before it propagates."""
        self.engine.recover()
        with self._aborting_on_error():
            self.engine.run()
        return [self._output(r) for r in self.engine.finished]

    @contextmanager
    def _aborting_on_error(self):
        try:
            yield
        except BaseException:  # KeyboardInterrupt too: the engine must not stay half-stepped
            # Everything is aborted: a run runs every queued request. In "mp" the workers are
            # stopped and start again on the next call, unless a stage failed (then the LLM refuses).
            self.engine.abort_all()
            self._texts.clear()
            raise

    def stage_runners(self) -> list:
        """The runners of an in-process engine (``distributed_executor_backend="uni"``), one per
        pipeline stage, first stage first, for the notebooks and the lab to look into. vLLM
        0.9.2 reaches its workers' models through ``LLM.apply_model`` and ``collective_rpc``
        (``vllm/entrypoints/llm.py`` 513-549); minispec's stages are plain objects here.
        Under "mp" and torchrun the stages live in other processes: a ``ValueError`` says so."""
        return self.engine.executor.stage_runners()

    def _output(self, request: Request) -> RequestOutput:
        reason = {RequestStatus.FINISHED_STOPPED: "stop", RequestStatus.FINISHED_LENGTH_CAPPED: "length",
                  RequestStatus.FINISHED_ABORTED: "abort"}
        text = self.tokenizer.decode(request.output_token_ids) if self.tokenizer else ""
        return RequestOutput(
            request_id=request.request_id, prompt=self._texts.pop(request.request_id, None),
            prompt_token_ids=request.prompt_token_ids,
            outputs=[CompletionOutput(0, text, list(request.output_token_ids), reason.get(request.status))],
            finished=request.is_finished(), num_draft_tokens=request.num_draft_tokens,
            num_accepted_tokens=request.num_accepted_tokens, num_preemptions=request.num_preemptions,
        )

    def stats(self) -> dict:
        """Engine totals since construction, over every request, finished or not."""
        totals = self.scheduler.totals()
        generated, steps = totals.num_output_tokens, totals.num_sampling_steps
        drafts, accepted = totals.num_draft_tokens, totals.num_accepted_tokens
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



def _is_token_id(t) -> bool:
    """An integer (Python or numpy) that is not a bool."""
    return isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_))


def _prompt_list(prompts) -> list:
    """``generate``'s prompts as a list: one prompt (text, ids, a 1-D tensor or
    array) becomes a list of one; any other iterable is a list of prompts."""
    if isinstance(prompts, str):
        return [prompts]
    if isinstance(prompts, (torch.Tensor, np.ndarray)):
        if prompts.ndim in (1, 2):
            return [prompts] if prompts.ndim == 1 else list(prompts)
    elif prompts is not None and not isinstance(prompts, (bytes, bytearray, dict)) and hasattr(prompts, "__iter__"):
        prompts = list(prompts)
        # A bool here is a (bad) token id, refused with the others later.
        return [prompts] if prompts and isinstance(prompts[0], (numbers.Integral, np.bool_)) else prompts
    raise ValueError(f"prompts={reprlib.repr(prompts)}: expected text (str), a sequence of token ids, "
                     "or a list of those")
