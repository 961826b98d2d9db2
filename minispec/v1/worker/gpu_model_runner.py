"""One pipeline stage's model runner (vLLM: ``vllm/v1/worker/gpu_model_runner.py``).

Every stage runs the same ``execute_model``: ``_update_states`` brings its
persistent ``InputBatch`` in line with the ``SchedulerOutput``,
``_prepare_inputs`` gathers ``input_ids`` from ``token_ids_cpu``, the stage's
layers run, and then

* a non-last stage returns ``IntermediateTensors`` for the next stage;
* the last stage computes logits, samples (or rejection-samples the drafts it
  reads back out of its own ``input_ids``), appends the result to its own copy
  of each request, proposes new drafts and returns a ``ModelRunnerOutput``.

``_update_states`` follows vLLM v0.9.2 step by step (split into helpers named
after its phases), including its two faults under pipeline parallelism, each
switchable (``minispec.v1.worker.runner_fixes``; with fix 1 alone, the preset
``"vllm-0.14"``, this runner's re-add and relay logic matches 0.14.0's).
minispec adds bookkeeping vLLM does not have: ``row_paths`` for traces and
each request's last drafts for fix 2.

Built as vLLM builds it, from the ``VllmConfig`` alone: the runner picks its
drafter (last stage only, ``minispec.v1.spec_decode.make_drafter``), its ``Sampler`` and
``RejectionSampler``, and turns each of V1's switches (``runner_fixes.py``) into the one
function it calls. It is one implementation of the runner contract (``worker_base.WorkerBase``):
``describe_rows`` hands the trace recorder its persistent batch's rows.
``removed_req_indices`` is not passed through ``_update_states``: vLLM 0.9.2's GPU
runner does not pass it either (0.9.1's did, and 0.9.2's ``vllm/v1/worker/tpu_model_runner.py``
365-368 still does); its ``InputBatch`` keeps the free rows itself, and so
does minispec's (see ``gpu_input_batch.py``).
Under pipeline parallelism with async scheduling the scheduler relays no tokens: the last stage
broadcasts each batch's sampled tokens, and a non-last stage applies them before it builds its
next inputs (``_pp_broadcast_prev_sampled_token_ids`` and its receive, vLLM 0.30.0's names;
``pp_prev_sampled.py`` says what minispec sends beyond vLLM's one column, and why).
Left out: CUDA graphs, the Worker class, structured output, LoRA, multimodal.
Under every preset a resumed request that still holds a row is evicted first, as 0.14.0
does (``cached - (scheduled - resumed)``, ``gpu_model_runner.py`` line 878; 0.30.0 1263-1276),
so it is re-added with its new blocks alone. One departure from 0.9.2 under
``"vllm-0.9.2"``, which removed ``cached - scheduled`` and appended the new blocks to the
old row. minispec's scheduler reaches the path since it preempts a request with a batch in
flight: a request preempted by a schedule that holds nothing is never executed, so no stage
drops its row before the request resumes (vLLM 0.30.0 executes empty schedules; its own
path is ``reset_prefix_cache``'s forced preemption). ``tests/test_vllm_reference.py`` runs a
hand-built schedule that reaches it through both vLLM releases.
Checked by running vLLM's own ``_update_states`` on minispec's schedules:
``reference/`` (beside the package, ``make vllm-check``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.attention import make_attention_metadata
from minispec.config import VllmConfig
from minispec.instruments.trace import RowPath, RowRecord
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.sample.rejection_sampler import RejectionSampler
from minispec.v1.sample.sampler import Sampler
from minispec.v1.spec_decode import capture_hidden_states, make_drafter
from minispec.v1.spec_decode.eagle import split_model_output
from minispec.v1.worker.gpu_input_batch import CachedRequestState, InputBatch
from minispec.v1.worker.pp_prev_sampled import PrevSampled, PrevSampledBroadcast, full_layout
from minispec.v1.worker.runner_fixes import (
    COMMIT_ROW,
    MOVE_ROW,
    NUM_TOKENS_NO_SPEC,
    PREV_SAMPLED_LAYOUT,
    READD_SPEC_TOKENS,
    SYNC_ACCEPTED_TOKENS,
    TRIM_OPTIMISTIC,
    end_of_history,
    row_now,
    take_accepted_drafts,
    take_back_rejected,
)
from minispec.v1.worker.tree_kv import compacts_on_every_rank
from minispec.v1.worker.tree_switches import TREE_COMPACTION_V1
from minispec.v1.worker.utils import load_stage_model, request_generator
from minispec.v1.worker.worker_base import WorkerBase


@dataclass
class PreparedInputs:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: object
    num_scheduled: np.ndarray  # per row
    logits_indices: list[list[int]]  # per row: the 1 + d positions sampled
    verified_drafts: list[list[int]]  # per row: drafts read back out of input_ids


class GPUModelRunner(WorkerBase[PreparedInputs]):
    """One pipeline stage of Model Runner V1: keeps the stage's persistent ``InputBatch`` in line
    with each ``SchedulerOutput`` and runs the stage's layers; the last stage also samples,
    verifies drafts and proposes new ones. Where the two faults of July 2025 live (``_update_states``)."""

    def __init__(self, vllm_config: VllmConfig, rank: int, device: torch.device, recorder=None):
        """Stage ``rank`` of ``vllm_config``'s pipeline, on ``device``. vLLM's takes
        ``(vllm_config, device)`` and reads its rank from the pipeline group."""
        super().__init__(vllm_config, rank, device, recorder)
        # vLLM: ``load_model`` and ``initialize_kv_cache``, which the worker calls after profiling memory
        self.model = load_stage_model(vllm_config, rank, device, self.dtype)
        # Each switch is one function from here on (runner_fixes): a learner's, the fix or the fault.
        switches = vllm_config.switches
        self.readd_spec_tokens = switches.pick(READD_SPEC_TOKENS, GPUModelRunner._write_spec_tokens)
        self.sync_accepted_tokens = switches.pick(SYNC_ACCEPTED_TOKENS, take_accepted_drafts)
        self.move_row = switches.pick(MOVE_ROW, InputBatch._move_row)
        self.prev_sampled_layout = switches.pick(PREV_SAMPLED_LAYOUT, full_layout)
        self.trim_optimistic = switches.pick(TRIM_OPTIMISTIC, take_back_rejected)
        self.num_tokens_no_spec_end = switches.pick(NUM_TOKENS_NO_SPEC, end_of_history)
        self.commit_row = switches.pick(COMMIT_ROW, row_now)
        self._init_tree_kv(switches.pick(TREE_COMPACTION_V1, compacts_on_every_rank)(self.is_last_rank))
        self.input_batch = self._make_input_batch()
        self.requests: dict[str, CachedRequestState] = {}
        self.row_paths: dict[str, RowPath] = {}  # trace bookkeeping, per scheduled request
        self.sampler = Sampler()
        self.drafter = make_drafter(vllm_config, self.device, self.dtype) if self.is_last_rank else None
        self.rejection_sampler = RejectionSampler()
        self.use_async_scheduling = vllm_config.scheduler_config.async_scheduling
        self.draft_token_ids: dict[str, list[int]] = {}  # async: the last stage's drafts, per request
        self.pp_prev_sampled: PrevSampledBroadcast | None = None  # PP + async only: bind_pp_group

    def _make_input_batch(self) -> InputBatch:
        sched = self.vllm_config.scheduler_config
        return InputBatch(sched.max_num_seqs, self.max_model_len, -(-self.max_model_len // self.block_size),
                          self.move_row)

    def drop_all_requests(self) -> None:
        """Forget every request: a new persistent batch and draft cache. For after
        all requests were aborted because an exception cut a step short, when
        this stage may have stopped half-way through updating its rows."""
        self.requests.clear()
        self.draft_token_ids.clear()
        if self.pp_prev_sampled is not None:
            self.pp_prev_sampled.reset()
        self.input_batch = self._make_input_batch()
        self.tree_kv.ran.clear()
        if self.drafter is not None:
            self.drafter.reset()

    def bind_pp_group(self, group) -> None:
        """Synchronously, nothing to bind: a V1 stage learns everything from the scheduler's output
        (a non-last stage its sampled tokens from the relay, which is where fault 2 lives). Under
        pipeline parallelism with async scheduling the last stage broadcasts them on ``group``
        (``pp_prev_sampled.py``)."""
        if self.use_async_scheduling and self.pp_size > 1:
            k = self.vllm_config.speculative_config.num_speculative_tokens
            self.pp_prev_sampled = PrevSampledBroadcast(group, self.pp_size, self.prev_sampled_layout(k))

    # -- _update_states ---------------------------------------------------
    def _update_states(self, out: SchedulerOutput) -> None:
        """Bring this stage's requests and persistent batch in line with ``out``,
        in vLLM v0.9.2's order: remove, cache new requests, update cached ones,
        add (or re-add) rows, condense."""
        self.row_paths = {}
        self.spec_decode_tokens = self._scheduled_drafts(out)
        self._remove_requests(out)
        req_ids_to_add = self._cache_new_requests(out)
        cached = out.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            if not self._update_cached_request(out, i):
                req_ids_to_add.append(req_id)
        for req_id in req_ids_to_add:
            row = self.input_batch.add_request(self.requests[req_id])
            if self.row_paths[req_id] is RowPath.READDED:  # fix 1 writes the drafts; v0.9.2 did not
                self.readd_spec_tokens(self, row, list(self.spec_decode_tokens.get(req_id, ())))
        rows_before = dict(self.input_batch.req_id_to_index)
        self.input_batch.condense()
        for req_id, row in self.input_batch.req_id_to_index.items():
            # .get: a row that is scheduled but listed neither as new nor as cached has no
            # path; vLLM's loop leaves such a row alone, and the trace's bookkeeping must too.
            if self.row_paths.get(req_id) is RowPath.STAYED and rows_before[req_id] != row:
                self.row_paths[req_id] = RowPath.MOVED  # by condense, drafts and all
        for req_id, drafts in self.spec_decode_tokens.items():
            self.requests[req_id].spec_token_ids = list(drafts)

    def _scheduled_drafts(self, out: SchedulerOutput) -> dict[str, list[int]]:
        """The drafts each request runs this step. Synchronous: the values the scheduler sent.
        Async: the scheduler sent ``-1`` placeholders and only their number counts; the values
        are the last stage's proposals (on a non-last stage, from its broadcast) (vLLM 0.30.0 copies them on the GPU from
        ``_draft_token_ids``, ``gpu_model_runner.py`` 1795-1830), 0 where it proposed fewer (a
        0 that is accepted is the target's own greedy token, so output is unchanged)."""
        if not self.use_async_scheduling:
            return out.scheduled_spec_decode_tokens
        spec = {}
        for req_id, placeholders in out.scheduled_spec_decode_tokens.items():
            own = self.draft_token_ids.get(req_id, [])[: len(placeholders)]
            spec[req_id] = own + [0] * (len(placeholders) - len(own))
        return spec

    def _num_computed(self, state: CachedRequestState, num_computed: int) -> int:
        """The scheduler's ``num_computed_tokens``, which under async scheduling assumes every
        draft of the batches still in flight is accepted; this stage has run them (the last
        stage runs batches in order) and takes the rejected ones back: a request that sampled
        has computed all but its last token (``runner_fixes.take_back_rejected``)."""
        if not self.use_async_scheduling:
            return num_computed
        return self.trim_optimistic(state, num_computed, self.is_last_rank)

    def _remove_requests(self, out: SchedulerOutput) -> None:
        for req_id in out.finished_req_ids:
            self.requests.pop(req_id, None)
            self.draft_token_ids.pop(req_id, None)
            self.input_batch.remove_request(req_id)
            if self.drafter is not None:
                self.drafter.remove(req_id)
        # Requests in the batch but not scheduled now lose their row (their
        # state is kept). Under PP with two batches in flight this is "the
        # other batch", every step. A resumed request loses a row it still holds
        # (vLLM 0.14.0 line 878, 0.30.0 1263-1276): see the module docstring.
        cached = out.scheduled_cached_reqs
        resumed = {r for r, flag in zip(cached.req_ids, cached.resumed_from_preemption) if flag}
        for req_id in set(self.input_batch.req_id_to_index) - (set(out.num_scheduled_tokens) - resumed):
            self.input_batch.remove_request(req_id)

    def _cache_new_requests(self, out: SchedulerOutput) -> list[str]:
        for new in out.scheduled_new_reqs:
            self.requests[new.req_id] = CachedRequestState(
                req_id=new.req_id, prompt_token_ids=list(new.prompt_token_ids),
                sampling_params=new.sampling_params,
                generator=request_generator(self.seed, new.req_id, new.sampling_params),
                block_ids=list(new.block_ids), num_computed_tokens=new.num_computed_tokens, output_token_ids=[],
            )
            self.row_paths[new.req_id] = RowPath.NEW
        return [new.req_id for new in out.scheduled_new_reqs]

    def _update_cached_request(self, out: SchedulerOutput, i: int) -> bool:
        """Update request ``i`` of ``scheduled_cached_reqs``; False if it has no
        row and must be (re-)added."""
        cached = out.scheduled_cached_reqs
        req_id, new_block_ids = cached.req_ids[i], cached.new_block_ids[i]
        state = self.requests[req_id]
        num_computed = self._num_computed(state, cached.num_computed_tokens[i])
        state.num_computed_tokens = num_computed
        # Under PP + async scheduling the scheduler relays nothing (vLLM 0.30.0 1427-1430): the
        # tokens came with the last stage's broadcast (_pp_receive_prev_sampled_token_ids).
        new_token_ids = cached.new_token_ids[i] if cached.new_token_ids else []
        if not self.is_last_rank and self.pp_prev_sampled is None:
            self._append_relayed_tokens(state, num_computed, new_token_ids)
        if cached.resumed_from_preemption[i]:
            state.block_ids = list(new_block_ids)
        else:
            state.block_ids.extend(new_block_ids)

        batch = self.input_batch
        row = batch.req_id_to_index.get(req_id)
        if row is None:
            # Preempted and resumed, or simply not scheduled last step. In
            # July 2025 this early exit skipped the draft write below.
            self.row_paths[req_id] = RowPath.READDED
            return False
        self.row_paths[req_id] = RowPath.STAYED
        batch.num_computed_tokens_cpu[row] = num_computed
        batch.block_table.append_row(new_block_ids, row)
        if not self.is_last_rank:
            self._write_relayed_tokens(row, num_computed, new_token_ids)
        self._write_spec_tokens(row, self.spec_decode_tokens.get(req_id, ()))
        return True

    def _write_relayed_tokens(self, row: int, num_computed: int, new_token_ids: list[int]) -> None:
        """A non-last stage's row: the relayed tokens written at ``num_computed`` (as 0.17.0 does);
        under async scheduling none are relayed and the row ends where its history does, the
        broadcast's tokens included (``num_tokens_no_spec_end``, PR #41133's switch)."""
        batch = self.input_batch
        if self.pp_prev_sampled is None:
            end = num_computed + len(new_token_ids)
            batch.token_ids_cpu[row, num_computed:end] = new_token_ids
        else:
            end = self.num_tokens_no_spec_end(int(batch.num_tokens_no_spec[row]), num_computed, len(new_token_ids))
        batch.num_tokens_no_spec[row] = batch.num_tokens[row] = end

    def _append_relayed_tokens(self, state: CachedRequestState, num_computed: int, new_token_ids: list[int]):
        """Non-last stages learn sampled tokens only from the scheduler, which
        relays the last token emitted (bonus, or recovered after a rejection)
        and not the drafts accepted before it (fault 2, ``slice_relayed_tokens``;
        fix 2 is ``take_accepted_drafts``, both in ``runner_fixes``). vLLM 0.14.0's
        runner still extends ``output_token_ids`` from that one-token list; the V2
        model runner broadcasts sampled tokens and counts from the last rank
        instead (``vllm/v1/worker/gpu/pp_utils.py``, from 0.17.0)."""
        if num_computed + len(new_token_ids) > state.num_tokens:  # behind: tokens were sampled since
            state.output_token_ids.extend(self.sync_accepted_tokens(state, num_computed, list(new_token_ids)))

    def _write_spec_tokens(self, row: int, spec_token_ids) -> None:
        if not spec_token_ids:
            return
        start = self.input_batch.num_tokens_no_spec[row]
        self.input_batch.token_ids_cpu[row, start : start + len(spec_token_ids)] = spec_token_ids
        self.input_batch.num_tokens[row] += len(spec_token_ids)

    # -- _prepare_inputs --------------------------------------------------
    def _prepare_inputs(self, out: SchedulerOutput) -> PreparedInputs:
        batch = self.input_batch
        req_ids = batch.req_ids
        num_scheduled = np.array([out.num_scheduled_tokens[r] for r in req_ids])
        num_computed = batch.num_computed_tokens_cpu[: len(req_ids)].copy()
        blocks = [batch.block_table.block_table_np[row, : batch.block_table.num_blocks_per_row[row]].tolist()
                  for row in range(len(req_ids))]
        for row, req_id in enumerate(req_ids):  # a tree's accepted path, before anything reads the KV
            self.tree_kv.settle(req_id, int(num_computed[row]), batch.token_ids_cpu[row], blocks[row])
        num_drafts = [len(out.scheduled_spec_decode_tokens.get(r, ())) for r in req_ids]
        positions, meta = make_attention_metadata(
            num_computed, num_scheduled, batch.block_table.block_table_np[: len(req_ids)], self.block_size, self.device,
            self.tree_kv.tree, num_drafts)
        # gathered by slot, not position: a tree's nodes share positions
        rows = np.repeat(np.arange(len(req_ids)), num_scheduled)
        flat = np.concatenate([np.arange(c, c + n) for c, n in zip(num_computed, num_scheduled)] + [np.zeros(0, int)])
        input_ids_np = batch.token_ids_cpu[rows, flat]
        # The last 1 + d positions of a request with d drafts are sampled; the
        # drafts to verify are read back out of input_ids, as vLLM does.
        ends = meta.query_start_loc[1:]
        logits_indices = [list(range(e - 1 - d, e)) for e, d in zip(ends, num_drafts)]
        verified_drafts = [input_ids_np[e - d : e].tolist() for e, d in zip(ends, num_drafts)]
        for row, req_id in enumerate(req_ids):
            self.tree_kv.remember(meta, row, req_id, verified_drafts[row], blocks[row])
        input_ids = torch.as_tensor(input_ids_np, device=self.device)
        return PreparedInputs(input_ids, positions, meta, num_scheduled, logits_indices, verified_drafts)

    # -- execute_model ----------------------------------------------------
    @torch.inference_mode()
    def execute_model(self, out: SchedulerOutput, intermediate_tensors=None):
        if self.pp_prev_sampled is not None and not self.is_last_rank:
            # first, before any row changes: in one process it may raise NotSentYet, and is run again
            self._pp_apply_prev_sampled_token_ids(out)
        self._update_states(out)
        inputs = self._prepare_inputs(out)
        if self.recorder is not None:
            self._record_stage(out, inputs, inputs.input_ids.tolist(), inputs.verified_drafts)
        self.tree_kv.write(inputs.meta.slot_mapping, inputs.input_ids, inputs.positions)
        hidden = self.model(inputs.input_ids, inputs.positions, inputs.meta, intermediate_tensors)
        req_ids = self.input_batch.req_ids
        if not self.is_last_rank:
            self._record_taps(out, req_ids, inputs.num_scheduled.tolist(), None)
            if self.pp_prev_sampled is not None:
                self._pp_receive_prev_sampled_token_ids_to_input_batch(out, inputs)
            return hidden
        hidden, aux_hidden_states = split_model_output(hidden)
        self._record_taps(out, req_ids, inputs.num_scheduled.tolist(), aux_hidden_states)
        capture_hidden_states(self.drafter, req_ids, self.input_batch.num_computed_tokens_cpu[: len(req_ids)],
                              inputs.num_scheduled, hidden, aux_hidden_states)
        output = self._sample_and_propose(hidden, inputs)
        if self.pp_prev_sampled is not None:
            self._pp_broadcast_prev_sampled_token_ids(out, output)
        self._record_sampled(out, output)
        return output

    # -- PP + async scheduling: the previous sampled tokens (pp_prev_sampled.py) ---------
    def _pp_broadcast_prev_sampled_token_ids(self, out: SchedulerOutput, output: ModelRunnerOutput) -> None:
        """The last stage: this batch's sampled tokens (and minispec's counts and drafts) to every other."""
        self.pp_prev_sampled.broadcast(out.step, output.sampled_token_ids, output.spec_token_ids)

    def _pp_receive_prev_sampled_token_ids_to_input_batch(self, out: SchedulerOutput, inputs: PreparedInputs) -> None:
        """A non-last stage, right after its forward: post the receives for this batch's broadcast,
        for the rows the last stage will sample (alike on both sides: a row samples once its
        scheduled tokens reach the end of its history)."""
        batch = self.input_batch
        req_ids = batch.req_ids
        num_tokens = np.array([self.requests[r].num_tokens for r in req_ids])
        samples = batch.num_computed_tokens_cpu[: len(req_ids)] + inputs.num_scheduled >= num_tokens
        self.pp_prev_sampled.receive(out.step, req_ids, samples)

    def _pp_apply_prev_sampled_token_ids(self, out: SchedulerOutput) -> None:
        """A non-last stage, before it touches its rows: every broadcast a request scheduled now
        needs, applied to its history, its row (at ``num_tokens_no_spec``) and its drafts."""
        for entry in self.pp_prev_sampled.take_needed(set(out.num_scheduled_tokens)):
            self._apply_prev_sampled(entry)

    def _apply_prev_sampled(self, entry: PrevSampled) -> None:
        batch = self.input_batch
        for req_id, tokens in entry.tokens.items():
            state = self.requests.get(req_id)
            if state is None:  # finished since
                continue
            state.output_token_ids.extend(tokens)
            row = self.commit_row(batch, req_id, entry.rows[req_id])
            if row is not None:
                start = batch.num_tokens_no_spec[row]
                batch.token_ids_cpu[row, start : start + len(tokens)] = tokens
                batch.num_tokens_no_spec[row] = batch.num_tokens[row] = start + len(tokens)
            if entry.drafts is not None:
                self.draft_token_ids[req_id] = entry.drafts[req_id]

    def describe_rows(self, scheduler_output: SchedulerOutput, inputs: PreparedInputs) -> list[RowRecord]:
        """Each row of the persistent batch as it stands after ``_prepare_inputs``: its
        ``token_ids_cpu`` up to the end of what it holds or gathers, whichever is further."""
        batch, rows = self.input_batch, []
        for row, req_id in enumerate(batch.req_ids):
            num_computed, num_scheduled = int(batch.num_computed_tokens_cpu[row]), int(inputs.num_scheduled[row])
            end = max(int(batch.num_tokens[row]), num_computed + num_scheduled)
            rows.append(RowRecord(
                row=row, req_id=req_id, path=self.row_paths.get(req_id, RowPath.STAYED),
                token_ids=batch.token_ids_cpu[row, :end].tolist(), num_tokens=int(batch.num_tokens[row]),
                num_tokens_no_spec=int(batch.num_tokens_no_spec[row]), num_computed_tokens=num_computed,
                num_scheduled_tokens=num_scheduled, num_drafts=len(inputs.verified_drafts[row]),
                block_ids=batch.block_table.block_table_np[row, : batch.block_table.num_blocks_per_row[row]].tolist(),
            ))
        return rows

    def _sample_and_propose(self, hidden, inputs: PreparedInputs) -> ModelRunnerOutput:
        batch = self.input_batch
        req_ids = batch.req_ids
        flat = [i for idx in inputs.logits_indices for i in idx]
        logits = self.model.compute_logits(hidden[flat])
        sampled, offset = [], 0
        for row, req_id in enumerate(req_ids):
            state, n_rows = self.requests[req_id], len(inputs.logits_indices[row])
            req_logits, offset = logits[offset : offset + n_rows], offset + n_rows
            if batch.num_computed_tokens_cpu[row] + inputs.num_scheduled[row] < state.num_tokens:
                sampled.append([])  # a prefill chunk that is not the last one
            elif n_rows == 1:
                sampled.append([self.sampler(req_logits[0], state.sampling_params, state.generator)])
            else:
                q = state.draft_probs[: n_rows - 1] if state.draft_probs is not None else None
                sampled.append(self.rejection_sampler(inputs.verified_drafts[row], req_logits, state.sampling_params,
                                                      q, state.generator, self.tree_kv.tree))
        for row, tokens in enumerate(sampled):
            if tokens:
                start = batch.num_tokens_no_spec[row]
                batch.token_ids_cpu[row, start : start + len(tokens)] = tokens
                batch.num_tokens_no_spec[row] = batch.num_tokens[row] = start + len(tokens)
                self.requests[req_ids[row]].output_token_ids.extend(tokens)
        return ModelRunnerOutput(
            req_ids=list(req_ids),
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=sampled,
            spec_token_ids=self._propose(sampled),
        )

    def _propose(self, sampled: list[list[int]]) -> list[list[int]]:
        if self.drafter is None:
            return []
        batch = self.input_batch
        rows = [row for row, tokens in enumerate(sampled) if tokens]
        batch_req_ids = batch.req_ids  # a property that builds the list: read it once
        req_ids = [batch_req_ids[row] for row in rows]
        states = [self.requests[r] for r in req_ids]
        contexts = [batch.token_ids_cpu[row, : batch.num_tokens_no_spec[row]] for row in rows]
        drafts, probs = self.drafter.propose(
            contexts, [s.sampling_params for s in states], [s.generator for s in states], req_ids
        )
        spec = [[] for _ in sampled]
        for row, state, d, q in zip(rows, states, drafts, probs):
            spec[row], state.draft_probs = d, q
            self.draft_token_ids[state.req_id] = list(d)
        return spec
