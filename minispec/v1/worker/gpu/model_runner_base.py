"""Model Runner V2's pipeline stage less how the non-last stages learn what the last one
decided (vLLM 0.30.0: ``vllm/v1/worker/gpu/model_runner.py``, ``GPUModelRunner``): what
two designs share, V2 (``model_runner.py``: the last stage's broadcast) and the relay
(``minispec/v1/worker/relay/``: SGLang's payload around the ring).

vLLM has one class; minispec splits it so that a second design can use V2's persistent
slots (``states.py``), its input batch (``input_batch.py``), its sampling and drafting
without inheriting V2's runner or reading V2's switches (the house rule: a runner reads
only its own design's switches, ``tests/test_switchboard.py``). This class reads no switch
at all. A design built on it says two things:

* ``bind_pp_group``: which handler carries the last stage's results (``self.pp_handler``:
  ``broadcast``/``broadcast_drafts`` on the last stage, ``receive`` after a non-last
  stage's forward, ``get_prev_sampled_outputs`` before its next step, ``on_req_idx_freed``
  and ``reset``);
* ``apply_entry``: how a non-last stage applies one entry the handler hands it.

Everything else, in vLLM's order, is described in ``model_runner.py``'s docstring.
Left out: as ``model_runner.py``.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch

from minispec.attention import make_attention_metadata
from minispec.distributed.parallel_state import MessageMismatch
from minispec.instruments.trace import EngineListener, RowPath, RowRecord
from minispec.sampling_params import SamplingParams
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.sample.rejection_sampler import RejectionSampler
from minispec.v1.sample.sampler import Sampler
from minispec.v1.spec_decode import capture_hidden_states, make_drafter
from minispec.v1.spec_decode.eagle import split_model_output
from minispec.v1.worker.block_table import BlockTable
from minispec.v1.worker.gpu.input_batch import (
    InputBatch,
    combine_sampled_and_draft_tokens,
    post_update,
    post_update_num_computed_tokens,
    prepare_prefill_inputs,
)
from minispec.v1.worker.gpu.states import RequestState
from minispec.v1.worker.utils import load_stage_model, request_generator
from minispec.v1.worker.worker_base import WorkerBase


def embedded_drafts(batch: InputBatch, row: int) -> list[int]:
    """The drafts row ``row`` embeds, its last inputs: what the last stage verifies."""
    end = batch.query_start_loc_np[row + 1]
    return batch.input_ids_np[end - int(batch.num_draft_tokens_per_req[row]) : end].tolist()




class GPUModelRunnerBase(WorkerBase[InputBatch]):
    PAYLOAD = "the last stage's broadcast"  # what a non-last stage applies, for messages
    def __init__(self, vllm_config, rank: int, device, recorder=None):
        """The last stage picks its proposer as V1's runner does, with the shared
        ``make_drafter`` (``minispec.v1.spec_decode``). vLLM's V2
        builds its own with ``init_speculator`` (``gpu/spec_decode/__init__.py`` 8-58), which in
        0.30.0 offers EAGLE, MTP, DFlash and other learned drafters, and raises
        ``NotImplementedError`` for anything else: neither n-gram lookup nor a separate
        draft model, the two proposers minispec runs here."""
        super().__init__(vllm_config, rank, device, recorder)
        spec = vllm_config.speculative_config
        self.max_num_reqs = vllm_config.scheduler_config.max_num_seqs
        self.num_speculative_steps = spec.num_speculative_tokens if spec.enabled else 0
        self.model = load_stage_model(vllm_config, rank, device, self.dtype)
        self.speculator = make_drafter(vllm_config, device, self.dtype) if self.is_last_rank else None
        self.sampler, self.rejection_sampler = Sampler(), RejectionSampler()
        self.pp_handler = None  # bound by the executor: bind_pp_group (each design its own handler)
        self._init_states()
        self._init_tree_kv()  # compacting on every stage; a design may turn it with its switch

    def _init_states(self) -> None:
        self.req_states = RequestState(self.max_num_reqs, self.max_model_len, self.num_speculative_steps)
        self.block_tables = BlockTable(self.max_num_reqs, -(-self.max_model_len // self.block_size))
        # last stage, per slot (vLLM: the sampler's and speculator's own states)
        self.sampling: dict[int, tuple[SamplingParams, torch.Generator | None]] = {}
        self.draft_probs: dict[int, torch.Tensor | None] = {}
        # per preempted request: prompt_len, max_tokens, and (last stage) its sampling state
        self.preempted: dict[str, tuple[int, int, tuple | None]] = {}

    def drop_all_requests(self) -> None:
        """Forget every request and pending broadcast (after the engine aborted them all)."""
        self._init_states()
        self.tree_kv.ran.clear()
        if self.speculator is not None:
            self.speculator.reset()
        if self.pp_handler is not None:
            self.pp_handler.reset()

    # -- request states ---------------------------------------------------------
    def update_pp_decode_requests(self, out: SchedulerOutput) -> None:
        if self.pp_handler is None or self.is_last_rank:
            return
        index = self.req_states.req_id_to_index
        scheduled = {index[r] for r in out.num_scheduled_tokens if r in index}
        try:
            entries = self.pp_handler.get_prev_sampled_outputs(scheduled)
        except MessageMismatch as e:  # say where: the transport knows ranks and tags, not steps
            error = MessageMismatch(f"stage {self.pp_rank}, step {out.step}, applying {self.PAYLOAD}: {e}",
                                    e.sent, e.posted, e.violation)
            if self.recorder is not None:
                self.recorder.tell(EngineListener.on_message_mismatch, self, out, error)
            raise error from None
        for entry in entries:
            self.apply_entry(entry)

    @abstractmethod
    def apply_entry(self, entry) -> None:
        """A non-last stage applies one entry its handler took (``get_prev_sampled_outputs``),
        oldest first, before it touches its slots."""

    def _remove_request(self, req_id: str) -> None:
        req_idx = self.req_states.remove_request(req_id)
        if req_idx is None:
            return
        if self.pp_handler is not None:
            self.pp_handler.on_req_idx_freed(req_idx)
        self.sampling.pop(req_idx, None)
        self.draft_probs.pop(req_idx, None)

    def finish_requests(self, out: SchedulerOutput) -> None:
        """Free the slots of finished and preempted requests, in one sorted pass (vLLM
        0.30.0 model_runner.py 1091-1103): the free-slot stack's order decides which slot
        each later request gets."""
        for req_id in sorted(out.finished_req_ids | out.preempted_req_ids):
            if req_id in out.preempted_req_ids:
                self._keep_preempted(req_id)  # the drafter keeps its cache of it: it resumes
            else:
                self.preempted.pop(req_id, None)  # aborted while preempted
                if self.speculator is not None:
                    self.speculator.remove(req_id)
            self._remove_request(req_id)

    def _keep_preempted(self, req_id: str) -> None:
        """What minispec's scheduler will not send again when the request resumes."""
        states = self.req_states
        req_idx = states.req_id_to_index[req_id]
        prompt_len = int(states.prompt_len[req_idx])
        self.preempted[req_id] = (prompt_len, int(states.max_seq_len[req_idx]) - prompt_len,
                                  self.sampling.get(req_idx))

    def _add(self, req_id: str, prompt_len: int, token_ids: list[int], num_computed: int, max_tokens: int,
             block_ids: list[int]) -> int:
        req_idx = self.req_states.add_request(req_id, prompt_len, token_ids, num_computed, max_tokens)
        self.block_tables.add_row(block_ids, req_idx)
        return req_idx

    def add_requests(self, out: SchedulerOutput) -> None:
        for new in out.scheduled_new_reqs:
            params = new.sampling_params
            req_idx = self._add(new.req_id, len(new.prompt_token_ids), list(new.prompt_token_ids),
                                new.num_computed_tokens, params.max_tokens, new.block_ids)
            if self.is_last_rank:
                self.sampling[req_idx] = (params, request_generator(self.seed, new.req_id, params))

    def _resume(self, req_id: str, token_ids: list[int], num_computed: int, block_ids: list[int]) -> None:
        """Add a resumed request again, prefilling every token it has (see the module docstring)."""
        prompt_len, max_tokens, sampling = self.preempted.pop(req_id)
        req_idx = self._add(req_id, prompt_len, token_ids, num_computed, max_tokens, block_ids)
        if sampling is not None:
            self.sampling[req_idx] = sampling

    def update_requests(self, out: SchedulerOutput) -> None:
        cached, index = out.scheduled_cached_reqs, self.req_states.req_id_to_index
        for i, req_id in enumerate(cached.req_ids):
            if cached.resumed_from_preemption[i]:
                self._resume(req_id, cached.all_token_ids[req_id], cached.num_computed_tokens[i],
                             cached.new_block_ids[i])
                continue
            self.block_tables.append_row(cached.new_block_ids[i], index[req_id])
            self.req_states.num_computed_tokens_np[index[req_id]] = cached.num_computed_tokens[i]

    # -- inputs -----------------------------------------------------------------
    def prepare_inputs(self, out: SchedulerOutput) -> InputBatch:
        states = self.req_states
        req_ids = list(out.num_scheduled_tokens)
        idx = np.array([states.req_id_to_index[r] for r in req_ids], dtype=np.int64)
        num_scheduled = np.array([out.num_scheduled_tokens[r] for r in req_ids], dtype=np.int64)
        num_drafts = np.array([len(out.scheduled_spec_decode_tokens.get(r, ())) for r in req_ids], dtype=np.int64)
        query_start_loc = np.concatenate([[0], np.cumsum(num_scheduled)])
        num_computed = states.num_computed_tokens[idx]
        for req_id, slot in zip(req_ids, idx.tolist()):  # a tree's accepted path, before anything reads the KV
            self.tree_kv.settle(req_id, int(states.num_computed_tokens[slot]), states.all_token_ids[slot],
                                self._blocks(slot))
        ends = query_start_loc[1:]
        batch = InputBatch(
            req_ids=req_ids, idx_mapping_np=idx, num_scheduled_tokens=num_scheduled,
            num_draft_tokens_per_req=num_drafts, num_computed_tokens_np=states.num_computed_tokens_np[idx],
            prefill_len_np=states.prefill_len[idx], query_start_loc_np=query_start_loc,
            seq_lens=num_computed + num_scheduled, input_ids_np=np.zeros(int(ends[-1]), dtype=np.int64),
            positions=None, attn_metadata=None,  # attend(), once the rows are recorded
            logits_indices=[list(range(e - 1 - d, e)) for e, d in zip(ends.tolist(), num_drafts.tolist())],
            step=out.step,
        )
        prepare_prefill_inputs(batch.input_ids_np, batch, states)
        combine_sampled_and_draft_tokens(batch.input_ids_np, batch, states)
        return batch

    def attend(self, batch: InputBatch) -> None:
        """The batch's positions and KV slots, from each slot's own count. Built after the
        rows are recorded: a count run past the block table (a fault that never takes
        rejected drafts back) is then reported by invariant 4, not as an IndexError here."""
        idx = batch.idx_mapping_np
        batch.positions, batch.attn_metadata = make_attention_metadata(
            self.req_states.num_computed_tokens[idx], batch.num_scheduled_tokens, self.block_tables.block_table_np[idx],
            self.block_size, self.device, self.tree_kv.tree, batch.num_draft_tokens_per_req)
        for row, (req_id, slot) in enumerate(zip(batch.req_ids, idx.tolist())):
            self.tree_kv.remember(batch.attn_metadata, row, req_id, embedded_drafts(batch, row), self._blocks(slot))

    def _blocks(self, slot: int) -> list[int]:
        return self.block_tables.block_table_np[slot, : self.block_tables.num_blocks_per_row[slot]].tolist()

    # -- execute_model ----------------------------------------------------------
    @torch.inference_mode()
    def execute_model(self, scheduler_output: SchedulerOutput, intermediate_tensors=None):
        if self.pp_size > 1 and self.pp_handler is None:
            raise RuntimeError(f"stage {self.pp_rank}: no pipeline group bound; the executor must call "
                               "bind_pp_group (the runner contract, worker_base.py) before the first step")
        out = scheduler_output
        if self.recorder is not None:
            self.recorder.tell(EngineListener.on_stage_start, self, out)
        self.update_pp_decode_requests(out)
        self.finish_requests(out)
        self.add_requests(out)
        self.update_requests(out)
        batch = self.prepare_inputs(out)
        if self.recorder is not None:
            self._record_stage(out, batch, batch.input_ids_np.tolist(),
                               [embedded_drafts(batch, row) for row in range(batch.num_reqs)])
        self.attend(batch)
        input_ids = torch.as_tensor(batch.input_ids_np, device=self.device)
        self.tree_kv.write(batch.attn_metadata.slot_mapping, input_ids, batch.positions)
        hidden = self.model(input_ids, batch.positions, batch.attn_metadata, intermediate_tensors)
        counts = batch.num_scheduled_tokens.tolist()
        if not self.is_last_rank:
            self._record_taps(out, batch.req_ids, counts, None)
            self.pp_handler.receive(batch)
            post_update_num_computed_tokens(batch, self.req_states)
            return hidden
        hidden, aux_hidden_states = split_model_output(hidden)
        self._record_taps(out, batch.req_ids, counts, aux_hidden_states)
        capture_hidden_states(self.speculator, batch.req_ids, self.req_states.num_computed_tokens[batch.idx_mapping_np],
                              batch.num_scheduled_tokens, hidden, aux_hidden_states)
        output = self.sample_tokens(hidden, batch)
        self._record_sampled(out, output)
        return output

    def describe_rows(self, scheduler_output: SchedulerOutput, batch: InputBatch) -> list[RowRecord]:
        """Each batch row read off its slot (minispec's bookkeeping; vLLM has none). Its
        tokens: ``all_token_ids[slot, :num_computed_tokens]``, then what this step embeds
        (a decode: ``last_sampled_tokens``, then the ``draft_tokens``), then the rest of a
        prompt still to prefill. Invariant 3 compares them with the scheduler's tokens, so a
        stale ``last_sampled_tokens`` or a lost broadcast shows there; invariant 2 sees
        stale or zero drafts. ``num_computed_tokens`` is the runner's own count, from which
        it builds positions, not the scheduler's mirror: invariant 4 sees a count the
        broadcast failed to correct. A row's path is "new" when added this step,
        "re-added" when resumed into a fresh slot, "stayed" otherwise (V2 never moves a
        request between slots); ``slot`` makes the recorder track a slot's occupants, not
        a batch row's."""
        states, cached = self.req_states, scheduler_output.scheduled_cached_reqs
        paths = dict.fromkeys((n.req_id for n in scheduler_output.scheduled_new_reqs), RowPath.NEW) | dict.fromkeys(
            (r for r, resumed in zip(cached.req_ids, cached.resumed_from_preemption) if resumed), RowPath.READDED)
        rows = []
        for row, (req_id, slot) in enumerate(zip(batch.req_ids, batch.idx_mapping_np.tolist())):
            start, drafts = batch.query_start_loc_np[row], embedded_drafts(batch, row)
            inputs = batch.input_ids_np[start : start + int(batch.num_scheduled_tokens[row]) - len(drafts)].tolist()
            computed = int(states.num_computed_tokens[slot])
            known = states.all_token_ids[slot, computed + len(inputs) : states.total_len[slot]].tolist()
            history = states.all_token_ids[slot, :computed].tolist() + inputs + known
            rows.append(RowRecord(
                row=row, req_id=req_id, path=paths.get(req_id, RowPath.STAYED), token_ids=history + drafts,
                num_tokens=len(history) + len(drafts), num_tokens_no_spec=len(history), num_computed_tokens=computed,
                num_scheduled_tokens=int(batch.num_scheduled_tokens[row]), num_drafts=len(drafts),
                block_ids=self._blocks(slot), slot=slot,
            ))
        return rows

    def _sample_row(self, batch: InputBatch, row: int, logits: torch.Tensor) -> list[int]:
        params, generator = self.sampling[int(batch.idx_mapping_np[row])]
        if logits.shape[0] == 1:
            return [self.sampler(logits[0], params, generator)]
        # The drafts to verify are read back out of input_ids, as vLLM does.
        drafts, q = embedded_drafts(batch, row), self.draft_probs.get(int(batch.idx_mapping_np[row]))
        return self.rejection_sampler(drafts, logits, params, q[: len(drafts)] if q is not None else None, generator,
                                      self.tree_kv.tree)

    def sample(self, hidden, batch: InputBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``sampled_tokens`` ``[num_reqs, k + 1]`` (padded with -1), ``num_sampled``,
        ``num_rejected``; a prefill chunk that is not the last samples nothing
        (vLLM: ``get_num_sampled_and_rejected``)."""
        flat = [i for rows in batch.logits_indices for i in rows]
        logits = self.model.compute_logits(hidden[flat])
        n = batch.num_reqs
        sampled = np.full((n, self.num_speculative_steps + 1), -1, dtype=np.int64)
        num_sampled, num_rejected = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        offset = 0
        for row, rows in enumerate(batch.logits_indices):
            row_logits, offset = logits[offset : offset + len(rows)], offset + len(rows)
            if batch.seq_lens[row] < batch.prefill_len_np[row]:
                continue
            tokens = self._sample_row(batch, row, row_logits)
            sampled[row, : len(tokens)] = tokens
            num_sampled[row], num_rejected[row] = len(tokens), len(rows) - len(tokens)
        return sampled, num_sampled, num_rejected

    def post_drafts(self, handler, batch: InputBatch, draft_tokens) -> None:
        """The last stage sends the next drafts down its hand-over (V2 may turn this into
        its fault, ``POST_DRAFTS``; the base reads no switch)."""
        handler.broadcast_drafts(batch, draft_tokens)

    def sample_tokens(self, hidden, batch: InputBatch) -> ModelRunnerOutput:
        sampled, num_sampled, num_rejected = self.sample(hidden, batch)
        if self.pp_handler is not None:
            self.pp_handler.broadcast(batch, sampled, num_sampled, num_rejected)
        post_update(batch.idx_mapping_np, self.req_states, sampled, num_sampled, num_rejected,
                    batch.num_scheduled_tokens)
        spec = self.propose(batch, num_sampled)
        if self.recorder is not None:
            self.recorder.tell(EngineListener.on_last_stage_sampled, self, batch, sampled, num_sampled, num_rejected)
        if self.pp_handler is not None and self.num_speculative_steps > 0:
            self.post_drafts(self.pp_handler, batch, self.req_states.draft_tokens[batch.idx_mapping_np])
        return ModelRunnerOutput(
            req_ids=list(batch.req_ids),
            req_id_to_index={r: i for i, r in enumerate(batch.req_ids)},
            sampled_token_ids=[sampled[i, : num_sampled[i]].tolist() for i in range(batch.num_reqs)],
            spec_token_ids=spec,
        )

    def propose(self, batch: InputBatch, num_sampled: np.ndarray) -> list[list[int]]:
        """Draft for every row that sampled, into its slot's ``draft_tokens``."""
        if self.speculator is None:
            return []
        states = self.req_states
        rows = [row for row in range(batch.num_reqs) if num_sampled[row] > 0]
        slots = [int(batch.idx_mapping_np[row]) for row in rows]
        params = [self.sampling[s] for s in slots]
        drafts, probs = self.speculator.propose(
            [states.all_token_ids[s, : states.total_len[s]] for s in slots], [p for p, _ in params],
            [g for _, g in params], [batch.req_ids[row] for row in rows],
        )
        spec = [[] for _ in batch.req_ids]
        for row, slot, d, q in zip(rows, slots, drafts, probs):
            states.set_drafts(slot, d)
            self.draft_probs[slot], spec[row] = q, list(d)
        return spec
