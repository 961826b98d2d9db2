"""What every runner design offers its executor and the trace recorder (vLLM 0.30.0:
``vllm/v1/worker/worker_base.py``, ``WorkerBase``).

One pipeline stage of any design is a ``WorkerBase``: the executors build it with
``gpu_worker.make_runner`` and use nothing else, so a new design plugs in by
implementing ``execute_model``, ``drop_all_requests``, ``bind_pp_group`` and
``describe_rows`` (``docs/adding_a_runner.md``); the rest is its record in
``designs.py``. In vLLM the executor talks to a worker that holds the runner; minispec
leaves the worker out, so the runner takes its place and its base class name. It is an
``ABC``: a design that forgets a method is not built. Left out: device initialisation,
memory profiling, KV-cache sizing, LoRA, sleep mode, ``sample_tokens`` (vLLM's split of
``execute_model`` for structured output). vLLM 0.30.0's worker and runner classes, line
by line: ``docs/fidelity/model_runner_v1.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from minispec.config import VllmConfig
from minispec.instruments.trace import EngineListener, RowRecord, tap_digests
from minispec.sequence import IntermediateTensors
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.worker.tree_kv import TreeKV

if TYPE_CHECKING:
    from minispec.instruments.trace import TraceRecorder

InputsT = TypeVar("InputsT")  # what a design's input preparation returns (V1: PreparedInputs, V2: InputBatch)


class WorkerBase(ABC, Generic[InputsT]):
    """One pipeline stage of a runner design."""

    def __init__(self, vllm_config: VllmConfig, rank: int, device: torch.device,
                 recorder: TraceRecorder | None = None):
        """Stage ``rank`` of ``vllm_config``'s pipeline, on ``device``, recording into
        ``recorder`` when the engine records (``record``/``check_invariants``)."""
        sched = vllm_config.scheduler_config
        self.vllm_config, self.recorder, self.device = vllm_config, recorder, device
        self.pp_rank, self.pp_size = rank, vllm_config.pipeline_parallel_size
        self.is_first_rank, self.is_last_rank = rank == 0, rank == self.pp_size - 1
        self.seed, self.dtype = vllm_config.seed, vllm_config.dtype or torch.float32
        self.block_size, self.max_model_len = vllm_config.cache_config.block_size, sched.max_model_len
        self.tree_kv: TreeKV | None = None  # _init_tree_kv, once the model's layers exist

    def _init_tree_kv(self, compacts: bool = True) -> None:
        """This stage's tree-of-drafts KV (``tree_kv.py``); ``compacts``: its design's switch's answer."""
        cache = self.vllm_config.cache_config
        self.tree_kv = TreeKV(self.vllm_config.speculative_config.token_tree, self.model.attention_layers,
                              cache.num_gpu_blocks * cache.block_size, cache.block_size, compacts)

    @abstractmethod
    def execute_model(self, scheduler_output: SchedulerOutput,
                      intermediate_tensors: IntermediateTensors | None = None
                      ) -> IntermediateTensors | ModelRunnerOutput:
        """Run this stage's part of one batch: a non-last stage returns the hidden states
        for the next, the last what it sampled and drafted. When recording, call
        ``_record_stage`` before the forward and, on the last stage, ``_record_sampled``
        after sampling: the recorder refuses a step without them (``MissingRecord``,
        naming stage, step and call)."""

    @abstractmethod
    def drop_all_requests(self) -> None:
        """Forget every request and everything pending for them: the engine aborted them all,
        possibly half-way through a step. The next batch starts from an empty stage."""

    @abstractmethod
    def bind_pp_group(self, group) -> None:
        """Take the group this stage messages the other stages on (``StageGroup`` across
        processes, an ``InProcStageGroup`` rank in one), before the first step. A design
        whose stages learn everything from the scheduler (V1, synchronously) has nothing to bind."""

    @abstractmethod
    def describe_rows(self, scheduler_output: SchedulerOutput, inputs: InputsT) -> list[RowRecord]:
        """This step's rows as the stage holds them before its forward: one ``RowRecord``
        per scheduled request, in input order, from this design's own buffers. Leave
        ``prev_req_id``/ ``prev_token_ids`` unset (the recorder knows them); set
        ``slot`` only for a slot table (V2)."""

    def _record_stage(self, scheduler_output: SchedulerOutput, inputs: InputsT, input_ids: list[int],
                      verified_drafts: list[list[int]]) -> None:
        """Hand ``self.recorder`` this step's rows and inputs (``verified_drafts``: per input
        row, what the last stage's rejection sampler will read back out of ``input_ids``).
        Only when recording: the caller checks, and so builds its arguments only then."""
        self.recorder.tell(EngineListener.on_stage_inputs, self, scheduler_output)
        rows = self.describe_rows(scheduler_output, inputs)
        if self.tree_kv is not None:  # invariant 10 reads what the stage's KV holds where it is committed
            writes = self.tree_kv.prefill_writes(rows)
            for row in (r for r in rows if r.block_ids is not None):
                row.kv_token_ids, row.kv_positions = self.tree_kv.committed(row.block_ids, row.num_computed_tokens,
                                                                            writes)
        self.recorder.on_stage(scheduler_output.step, self.pp_rank, self.is_last_rank, rows, input_ids,
                               {row.req_id: d for row, d in zip(rows, verified_drafts) if d})

    def _record_taps(self, scheduler_output: SchedulerOutput, req_ids: list[str], counts: list[int],
                     handed: list[torch.Tensor] | None) -> None:
        """After the forward, when an EAGLE-3 head reads taps: the taps this stage computed at its
        own tap points and, on the last stage, the ones ``handed`` to the drafter (in layer order)."""
        layers = self.vllm_config.speculative_config.eagle_aux_hidden_state_layer_ids
        if self.recorder is None or not layers:
            return
        computed = self.model.model.computed_aux_hidden_states
        by_layer = {i: tap_digests(t, counts, req_ids) for i, t in computed.items()}
        handed_by_layer = {i: tap_digests(t, counts, req_ids) for i, t in zip(layers, handed or [])}
        per_req = lambda d: {r: {i: v[r] for i, v in d.items()} for r in req_ids}  # noqa: E731
        self.recorder.on_hidden_states(scheduler_output.step, self.pp_rank, per_req(by_layer), per_req(handed_by_layer))

    def _record_sampled(self, scheduler_output: SchedulerOutput, output: ModelRunnerOutput) -> None:
        """Hand the recorder what the last stage emitted for each request."""
        if self.recorder is not None:
            self.recorder.on_sampled(scheduler_output.step, self.pp_rank,
                                     {r: output.sampled_token_ids[i] for r, i in output.req_id_to_index.items()})
