"""The Model Runner V2 side of the reference harness, run inside vLLM's environment.

Started by ``reference.v2_run`` as ``python v2_worker.py`` with
one vLLM release (0.29.0 or 0.30.0) and Triton's Python package on the path and
``TRITON_INTERPRET=1``. It reads JSON jobs (per run, every stage-step in the order
minispec ran them, with its scheduler output and, on the last stage, what was
sampled and drafted) and steps one stand-in runner per stage through them, in
that order, in this one process; after each stage's state updates it writes the
stage's request slots as JSON.

Run as vLLM's own code, from the release's files:

* ``RequestState`` (``vllm/v1/worker/gpu/states.py``), the slots themselves,
  with the ``StagedWriteTensor`` / ``UvaBackedTensor`` of ``buffer_utils.py``
  (CPU tensors: no UVA on this machine) and their Triton kernel;
* ``PPHandler`` and ``compute_need_sampled_mask`` (``pp_utils.py``): the
  receive, the broadcast (0.30.0: and ``broadcast_drafts``), the FIFO and its
  generation check, the draft write;
* ``post_update`` and ``post_update_num_computed_tokens`` (``input_batch.py``),
  Triton kernels run by Triton's interpreter;
* ``GPUModelRunner``'s ``update_pp_decode_requests``, ``postprocess_sampled``,
  ``postprocess_num_computed_tokens``, ``finish_requests``, ``_remove_request``,
  ``add_requests``, ``update_requests`` (``model_runner.py``), compiled from
  its text as ``worker.py`` compiles V1's, bound to ``StandInRunner``.

Stood in for, each because it needs what this check has not (``STAND_INS`` says
why, and goes into every result): the sampler and the speculator (their outputs
are minispec's, recorded), the input batch (only the fields the code above reads,
filled as ``prepare_inputs`` fills them), the scheduler output (plain data),
pinned memory and UVA views, CUDA streams and events, the NCCL broadcast
(``InProcBroadcast``: every rank in this process, in the order minispec ran the
stage-steps; a broadcast that does not fit stalls every later wait of its rank),
and the step at which a non-last rank takes a broadcast entry from
its FIFO (``apply_broadcasts``: when minispec's run took it).

No vLLM code is stored in minispec: this file imports vLLM from the cache; it
imports nothing from minispec. vLLM twin: none (it drives ``vllm/v1/worker/gpu/``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import json
import sys
import types
from collections import deque
from pathlib import Path

import torch
from worker import compile_methods, vllm_root

# The files run, hashed into the provenance.
HASHED = ("v1/worker/gpu/model_runner.py", "v1/worker/gpu/states.py", "v1/worker/gpu/pp_utils.py",
          "v1/worker/gpu/input_batch.py", "v1/worker/gpu/buffer_utils.py", "v1/core/sched/output.py")
RUNNER_METHODS = ("update_pp_decode_requests", "postprocess_sampled", "postprocess_num_computed_tokens",
                  "finish_requests", "_remove_request", "add_requests", "update_requests")
OWN_CLASSES = {"RequestState": "v1/worker/gpu/states.py", "PPHandler": "v1/worker/gpu/pp_utils.py",
               "StagedWriteTensor": "v1/worker/gpu/buffer_utils.py", "UvaBackedTensor": "v1/worker/gpu/buffer_utils.py",
               "UvaBufferPool": "v1/worker/gpu/buffer_utils.py", "UvaBuffer": "v1/worker/gpu/buffer_utils.py"}
OWN_FUNCTIONS = {"compute_need_sampled_mask": "v1/worker/gpu/pp_utils.py", "post_update": "v1/worker/gpu/input_batch.py",
                 "_post_update_kernel": "v1/worker/gpu/input_batch.py",
                 "post_update_num_computed_tokens": "v1/worker/gpu/input_batch.py",
                 "_post_update_num_computed_tokens_kernel": "v1/worker/gpu/input_batch.py",
                 "_apply_write_kernel": "v1/worker/gpu/buffer_utils.py"}
STAND_INS = {
    "sampler, rejection sampler": "minispec's sampled tokens, counts and rejections, recorded per batch; the "
                                  "width vLLM's sampler returns: 1 without drafts in the batch, else k + 1 "
                                  "(vLLM 0.30.0 vllm/v1/worker/gpu/model_runner.py 1552; vllm/v1/worker/gpu/sample/sampler.py 200, view(-1, 1))",
    "speculator.propose": "minispec's drafts for the batch's slots, written as vLLM writes the speculator's "
                          "output (req_states.draft_tokens[idx_mapping] = draft_tokens): vLLM's V2 drafters "
                          "need a model and a GPU",
    "InputBatch": "a namespace with the fields the code run here reads (idx_mapping, num_scheduled_tokens, "
                  "query_start_loc, num_computed_tokens_np, prefill_len_np, max_seq_len_np, num_draft_tokens), "
                  "filled from the slots and the schedule as prepare_inputs fills them",
    "UVA buffers (buffer_utils.py)": "their CPU tensors are not pinned (this CPU build of torch cannot pin; "
                                     "Tensor.pin_memory returns the tensor) and are their own device view "
                                     "(get_accelerator_view_from_cpu_tensor needs vLLM's CUDA ops)",
    "CUDA streams and events": "no-ops on CPU, except that waiting on a receive's event checks that the "
                               "broadcast it waits for arrived, and that neither it nor an earlier one to "
                               "this rank misfitted (NCCL runs a stream's broadcasts in order and would hang)",
    "torch.distributed.broadcast": "InProcBroadcast: a receive posted by a non-last rank is filled by the "
                                   "last rank's next broadcast to it, in order, as NCCL pairs them",
    "model_state, LoRA, prompt logprobs, block tables": "states that only features this check leaves out "
                                                        "read (their add/remove calls do nothing here)",
    "when a broadcast entry is taken": "when minispec's run took it (on first need), not pp_size calls after "
                                       "its receive, which vLLM's async scheduler guarantees and minispec's "
                                       "synchronous one does not; what taking it does is vLLM's own",
    "sample_tokens (non-last rank)": "its two calls that touch the slots, re-expressed: pp_handler.receive "
                                     "and postprocess_num_computed_tokens (0.30.0 model_runner.py 2016-2024)",
}


class BroadcastMismatch(RuntimeError):
    """A broadcast that does not fit the receive a rank posted for it (``sent``
    is None if nothing was sent to it)."""

    def __init__(self, message: str, sent: list[int] | None, posted: list[int]):
        super().__init__(message)
        self.sent, self.posted = sent, posted


# -- CUDA on CPU: streams, events, the broadcast ----------------------------------

class InProcBroadcast:
    """Every rank of the pipeline in this process. A non-last rank's
    ``broadcast`` posts its buffer; the last rank's fills each other rank's
    oldest posted buffer, as NCCL pairs collective calls in order.

    A broadcast that does not fit its receive stalls the receiving rank's
    broadcast stream (``stalled``): NCCL runs a stream's collectives in order, so
    every receive posted after it waits behind it. vLLM's code only finds out
    when it waits on the event of that receive or of a later one; it never
    waits on an entry whose rows were all freed (0.29.0 ``pp_utils.py``
    110-113, before the wait at 118; 0.30.0 135-138, 143)."""

    def __init__(self, world_size: int):
        self.rank, self.world_size = 0, world_size  # ``rank``: whose code runs now
        self.posted: dict[int, deque] = {r: deque() for r in range(world_size)}
        self.since_event: dict[int, list] = {r: [] for r in range(world_size)}
        self.receives: dict[int, int] = dict.fromkeys(range(world_size), 0)  # posted so far, per rank
        self.stalled: dict[int, dict] = {}  # rank -> its first receive that a broadcast did not fit

    def broadcast(self, tensor: torch.Tensor, src: int, group=None) -> None:
        if self.rank != src:
            self.receives[self.rank] += 1
            receive = {"buffer": tensor, "sent": None, "seq": self.receives[self.rank]}
            self.posted[self.rank].append(receive)
            self.since_event[self.rank].append(receive)
            return
        for dst in range(self.world_size):
            if dst == src:
                continue
            if not self.posted[dst]:
                raise BroadcastMismatch(f"rank {src} broadcast a {list(tensor.shape)} tensor that rank {dst} "
                                        "posted no receive for (NCCL would hang)", list(tensor.shape), [])
            receive = self.posted[dst].popleft()
            receive["sent"] = list(tensor.shape)
            if tensor.shape == receive["buffer"].shape and tensor.dtype == receive["buffer"].dtype:
                receive["buffer"].copy_(tensor)
            else:
                self.stalled.setdefault(dst, receive)

    def record_event(self) -> "Event":
        receives, self.since_event[self.rank] = self.since_event[self.rank], []
        return Event(self, self.rank, receives)


def _unfit(receive: dict) -> dict:
    return {"sent": receive["sent"], "posted": list(receive["buffer"].shape)}


class Event:
    def __init__(self, group: InProcBroadcast, rank: int, receives: list):
        self.group, self.rank, self.receives, self.waited = group, rank, receives, False

    def unfit(self) -> dict | None:
        """The first of its receives that the broadcast sent to it did not fit, as {"sent", "posted"}."""
        return next((_unfit(r) for r in self.receives if r["sent"] != list(r["buffer"].shape)), None)

    def check(self) -> None:
        """Waiting on it: it hangs if its rank's stream is stalled at or before its
        receives, or if nothing was sent to one of them."""
        self.waited = True
        stall = self.group.stalled.get(self.rank)
        if stall is not None and stall["seq"] <= max((r["seq"] for r in self.receives), default=0):
            raise BroadcastMismatch(f"a {_unfit(stall)['posted']} receive got {stall['sent']}, and this rank's "
                                    "broadcast stream waits behind it (NCCL would hang)", **_unfit(stall))
        for r in self.receives:
            if r["sent"] is None:
                raise BroadcastMismatch(f"a {list(r['buffer'].shape)} receive got nothing (NCCL would hang)",
                                        **_unfit(r))


class Stream:
    def __init__(self, group: InProcBroadcast):
        self.group = group

    def wait_stream(self, other) -> None:
        pass

    def wait_event(self, event: Event) -> None:
        event.check()

    def record_event(self) -> Event:
        return self.group.record_event()

    def synchronize(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class Unpinned:
    """``torch`` for ``buffer_utils``, whose pinned allocations become plain ones."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def zeros(*size, pin_memory: bool = False, **kwargs) -> torch.Tensor:
        return torch.zeros(*size, **kwargs)


def cuda_on_cpu(group: InProcBroadcast) -> None:
    """Streams and the broadcast, for this process (which runs nothing else),
    once vLLM's modules are imported (some annotate with ``torch.cuda.Stream``)."""
    import vllm.v1.worker.gpu.pp_utils  # noqa: F401
    from vllm.v1.worker.gpu import buffer_utils

    if importlib.util.find_spec("transformers") is not None:
        # 0.33.0's model_runner.py imports vllm.config (through vllm/v1/worker/utils.py 13), which
        # imports transformers, whose modules annotate with torch.cuda.Stream: before the patch
        import vllm.config  # noqa: F401

    # UVA buffers, which vLLM's CPU platform counts as available (0.30.0
    # utils/platform_utils.py 51-57): a CPU tensor is its own view from the CPU,
    # and this CPU build of torch cannot pin memory
    buffer_utils.torch = Unpinned()
    buffer_utils.get_accelerator_view_from_cpu_tensor = lambda cpu_tensor: cpu_tensor
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: self  # 0.29.0's async_copy_to_gpu pins
    stream = Stream(group)
    torch.cuda.current_stream = lambda device=None: stream
    torch.cuda.Stream = lambda device=None: stream
    torch.cuda.stream = lambda s: s
    torch.Tensor.record_stream = lambda self, s: None
    torch.distributed.broadcast = group.broadcast


# -- the stand-in runner ----------------------------------------------------------

class Untouched:
    """A per-request state of a feature this check leaves out: every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def pp_group(rank: int, world_size: int, group: InProcBroadcast):
    return types.SimpleNamespace(is_last_rank=rank == world_size - 1, last_rank=world_size - 1,
                                 world_size=world_size, make_sibling_device_group=lambda group_desc: group)


@functools.cache
def runner_methods() -> tuple[dict, dict]:
    """The runner's methods run here, compiled once per process (no name is replaced, so every
    stage of every run binds the same functions)."""
    return compile_methods("v1/worker/gpu/model_runner.py", "GPUModelRunner", RUNNER_METHODS, {})


class StandInRunner:
    """What the methods run here read from ``self``; the rest of vLLM's runner is absent."""

    def __init__(self, rank: int, cfg: dict, group: InProcBroadcast):
        from vllm.v1.worker.gpu import pp_utils
        from vllm.v1.worker.gpu.states import RequestState

        world_size, k = cfg["pipeline_parallel_size"], cfg["num_speculative_tokens"]
        self.rank, self.is_last_pp_rank = rank, rank == world_size - 1
        self.device = torch.device("cpu")
        self.req_states = RequestState(cfg["max_num_reqs"], cfg["max_model_len"], cfg["max_num_batched_tokens"], k,
                                       cfg["vocab_size"], self.device)
        pp_utils.get_pp_group = lambda: pp_group(rank, world_size, group)
        self.pp_handler = pp_utils.PPHandler(cfg["max_num_reqs"], k, self.device)
        self.model_state = self.lora_state = self.prompt_logprobs_worker = self.block_tables = Untouched()
        self.pooling_runner = self.encoder_cache = self.adaptive_verification = self.kv_block_zeroer = None
        # the last rank's sampler: only add_request and the penalties' bin counts are read here
        self.sampler = types.SimpleNamespace(add_request=lambda *a: None, apply_staged_writes=lambda: None,
                                             penalties_state=types.SimpleNamespace(output_bin_counts=None))
        self.method_lines: dict = {}
        methods, self.method_lines = runner_methods()
        for name, fn in methods.items():
            setattr(self, name, types.MethodType(fn, self))


def scheduler_output(o: dict, prompts: dict):
    """The fields of vLLM's ``SchedulerOutput`` (``v1/core/sched/output.py``) that
    the runner methods run here read, as plain namespaces: importing the module
    itself pulls in vLLM's configs, tokenizers and entrypoints. A request resumed
    after preemption is sent as vLLM 0.30.0's scheduler sends it: as a new
    request carrying every token, after the step's new requests
    (``v1/core/sched/scheduler.py`` 1323-1333); the step that preempted it lists it
    in ``preempted_req_ids`` (1416, 1518), so its slot is freed then."""
    ns = types.SimpleNamespace

    def new(req_id, token_ids, block_ids, num_computed):
        prompt = prompts[req_id]
        return ns(req_id=req_id, prompt_token_ids=prompt["prompt_token_ids"], prefill_token_ids=token_ids,
                  prompt_len=len(prompt["prompt_token_ids"]),
                  sampling_params=ns(max_tokens=prompt["sampling_params"]["max_tokens"]), pooling_params=None,
                  mm_features=[], lora_request=None, block_ids=(block_ids,), num_computed_tokens=num_computed)

    c = o["cached"]
    resumed = [i for i, flag in enumerate(c["resumed_from_preemption"]) if flag]
    kept = [i for i in range(len(c["req_ids"])) if i not in resumed]
    new_reqs = [new(n["req_id"], n["prompt_token_ids"], n["block_ids"], n["num_computed_tokens"]) for n in o["new"]]
    new_reqs += [new(c["req_ids"][i], c["all_token_ids"][i], c["new_block_ids"][i], c["num_computed_tokens"][i])
                 for i in resumed]
    cached = ns(req_ids=[c["req_ids"][i] for i in kept], new_block_ids=[(c["new_block_ids"][i],) for i in kept],
                num_computed_tokens=[c["num_computed_tokens"][i] for i in kept])
    return ns(scheduled_new_reqs=new_reqs, scheduled_cached_reqs=cached, num_scheduled_tokens=o["num_scheduled_tokens"],
              total_num_scheduled_tokens=sum(o["num_scheduled_tokens"].values()),
              scheduled_spec_decode_tokens=o["scheduled_spec_decode_tokens"],
              finished_req_ids=set(o["finished_req_ids"]), preempted_req_ids=set(o["preempted_req_ids"]),
              free_encoder_mm_hashes=[], block_table_updates=None, new_block_ids_to_zero=None,
              kv_cache_block_copies=None)


def input_batch(runner: StandInRunner, o: dict):
    """The fields of vLLM's ``InputBatch`` that the code run here reads, in batch order."""
    import numpy as np

    states = runner.req_states
    req_ids = list(o["num_scheduled_tokens"])
    idx = np.array([states.req_id_to_index[r] for r in req_ids], dtype=np.int32)
    num_scheduled = np.array([o["num_scheduled_tokens"][r] for r in req_ids], dtype=np.int32)
    num_drafts = sum(len(o["scheduled_spec_decode_tokens"].get(r, ())) for r in req_ids)
    query_start_loc = np.concatenate([[0], np.cumsum(num_scheduled)]).astype(np.int32)
    batch = types.SimpleNamespace(
        req_ids=req_ids, num_reqs=len(req_ids), idx_mapping_np=idx, idx_mapping=torch.from_numpy(idx),
        num_scheduled_tokens=num_scheduled, query_start_loc=torch.from_numpy(query_start_loc),
        num_computed_tokens_np=states.num_computed_tokens_np[idx].copy(), prefill_len_np=states.prefill_len.np[idx],
        max_seq_len_np=states.max_seq_len[idx], num_draft_tokens=num_drafts)
    if hasattr(states, "num_computed_prefill_tokens"):  # 0.33.0: gather_batch_req_state computes it (model_runner.py 1335-1338)
        batch.is_prefilling_np = states.num_computed_prefill_tokens[idx] < batch.prefill_len_np
    return batch


def snapshot(runner: StandInRunner) -> dict:
    """The live slots, per request (keys as ``v2_compare.BUFFERS``)."""
    s = runner.req_states
    index = dict(s.req_id_to_index)
    total = s.total_len.gpu
    return {
        "req_id_to_index": index,
        "total_len": {r: int(total[i]) for r, i in index.items()},
        "all_token_ids": {r: s.all_token_ids.gpu[i, : int(total[i])].tolist() for r, i in index.items()},
        "prefill_len": {r: int(s.prefill_len.np[i]) for r, i in index.items()},
        "num_computed_tokens": {r: int(s.num_computed_tokens.gpu[i]) for r, i in index.items()},
        "num_computed_tokens_np": {r: int(s.num_computed_tokens_np[i]) for r, i in index.items()},
        "last_sampled_tokens": {r: int(s.last_sampled_tokens[i, 0]) for r, i in index.items()},
        "draft_tokens": {r: s.draft_tokens[i].tolist() for r, i in index.items()},
        "broadcast_mismatch": None,
        "broadcast_unwaited": None,  # not compared: minispec's run has no such wait to skip (v2_run.V2Row)
    }


def sample_on_last_rank(runner: StandInRunner, batch, sample: dict, k: int, sampler_width: str) -> None:
    """The last rank after its forward: the stand-in sampler's output, then
    vLLM's broadcast, ``postprocess_sampled``, the drafts (stand-in speculator)
    and, where the release has it, ``broadcast_drafts``; in vLLM's order
    (0.30.0 model_runner.py 2052-2174). 0.33.0's ``broadcast_drafts`` takes the batch's
    drafts alone, in batch order (0.33.0 model_runner.py 2332-2341)."""
    rows = sample["sampled_tokens"]
    width = k + 1 if sampler_width == "k+1" or batch.num_draft_tokens > 0 else 1
    sampled = torch.tensor([r[:width] for r in rows], dtype=torch.int64).reshape(len(rows), width)
    counts = torch.tensor([sample["num_sampled"], sample["num_rejected"]], dtype=torch.int32)
    runner.pp_handler.broadcast(sampled, counts[0], counts[1], batch)
    runner.postprocess_sampled(batch.idx_mapping, sampled, counts[0], counts[1], batch.query_start_loc)
    if k > 0:
        runner.req_states.draft_tokens[batch.idx_mapping] = torch.tensor(sample["draft_tokens"], dtype=torch.int64)
        if not hasattr(runner.pp_handler, "broadcast_drafts"):  # 0.29.0: none
            return
        if "input_batch" in inspect.signature(runner.pp_handler.broadcast_drafts).parameters:  # 0.30.0 (PR #50514)
            runner.pp_handler.broadcast_drafts(runner.req_states.draft_tokens, batch)
        else:
            runner.pp_handler.broadcast_drafts(runner.req_states.draft_tokens[batch.idx_mapping])


def apply_broadcasts(runner: StandInRunner, applied: list[int], receipts: dict[int, int]) -> dict | None:
    """vLLM's ``update_pp_decode_requests``, called once per broadcast entry that
    minispec applied at this stage-step (``applied``: the calls that received
    them), with the FIFO's placeholders ahead of the entry dropped; on a step
    that applies none, only this step's placeholder is appended, as
    ``get_prev_sampled_outputs`` appends it (0.30.0 pp_utils.py 124-126).
    vLLM's FIFO would take an entry exactly ``pp_size`` calls after its receive;
    when it is taken is the one decision left to minispec's schedule
    (``v2_run``'s docstring).

    Returns the first broadcast that did not fit an entry vLLM's code took off
    its FIFO without waiting on it (every row freed since its receive), as
    {"sent", "posted"}; None if there was none."""
    queue = runner.pp_handler.queue
    if runner.is_last_pp_rank:
        runner.update_pp_decode_requests()  # its queue is empty: nothing to take
        return None
    if not applied:
        queue.append(None)
        return None
    unwaited = None
    while any(e is not None and receipts[id(e)] <= max(applied) for e in queue):
        while queue[0] is None:
            queue.popleft()
        entry = queue[0]
        runner.update_pp_decode_requests()
        if not entry.event.waited:
            unwaited = unwaited or entry.event.unfit()
    return unwaited


def run_job(job: dict, sampler_width: str) -> list[dict]:
    cfg = job["config"]
    pp = cfg["pipeline_parallel_size"]
    group = InProcBroadcast(pp)
    cuda_on_cpu(group)
    runners = []
    for rank in range(pp):
        group.rank = rank
        runners.append(StandInRunner(rank, cfg, group))
    out = []
    # per stage: its receives' call numbers (by the entry's id), and its calls so far
    receipts: dict[int, dict[int, int]] = {rank: {} for rank in range(pp)}
    calls = dict.fromkeys(range(pp), 0)
    for event in job["stage_steps"]:
        runner, o = runners[event["stage"]], event["scheduler_output"]
        group.rank = event["stage"]
        where = {"stage": event["stage"], "step": event["step"]}
        try:
            unwaited = apply_broadcasts(runner, event["applied"], receipts[event["stage"]])
        except BroadcastMismatch as e:
            mismatch = {"sent": e.sent, "posted": e.posted}
            out.append({**where, "buffers": dict.fromkeys(snapshot(runner)) | {"broadcast_mismatch": mismatch}})
            break
        so = scheduler_output(o, job["prompts"])
        runner.finish_requests(so)
        runner.add_requests(so)
        runner.update_requests(so)
        out.append({**where, "buffers": snapshot(runner) | {"broadcast_unwaited": unwaited}})
        batch = input_batch(runner, o)
        if runner.is_last_pp_rank:
            sample_on_last_rank(runner, batch, event["sample"], cfg["num_speculative_tokens"], sampler_width)
        else:
            if "recv_drafts" in inspect.signature(runner.pp_handler.receive).parameters:  # 0.33.0 ``model_runner.py`` 2175-2177
                runner.pp_handler.receive(batch, recv_drafts=cfg["num_speculative_tokens"] > 0)
            else:
                runner.pp_handler.receive(batch)
            runner.postprocess_num_computed_tokens(batch)
            calls[event["stage"]] += 1
            if runner.pp_handler.queue[-1] is not None:
                receipts[event["stage"]][id(runner.pp_handler.queue[-1])] = calls[event["stage"]]
    return out


def _lines(relpath: str, name: str) -> tuple[int, int]:
    import ast

    tree = ast.parse((vllm_root() / relpath).read_text())
    node = next(n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    return node.lineno, node.end_lineno


def provenance() -> dict:
    import os

    import triton
    import vllm
    from vllm.triton_utils import HAS_TRITON

    if not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("vLLM's Triton kernels must run in Triton's interpreter (TRITON_INTERPRET=1), "
                           f"and vLLM must see Triton: HAS_TRITON={HAS_TRITON}")

    root = vllm_root()
    _, runner_lines = compile_methods("v1/worker/gpu/model_runner.py", "GPUModelRunner", RUNNER_METHODS, {})
    executed = {f"GPUModelRunner.{n}": f"vllm/v1/worker/gpu/model_runner.py:{a}-{b}" for n, (a, b) in runner_lines.items()}
    for name, relpath in {**OWN_CLASSES, **OWN_FUNCTIONS}.items():
        a, b = _lines(relpath, name)
        executed[name] = f"vllm/{relpath}:{a}-{b}"
    pp_utils = (root / "v1/worker/gpu/pp_utils.py").read_text()
    if "def broadcast_drafts" not in pp_utils:
        executed["PPHandler"] += " (no broadcast_drafts in this release)"
    return {
        "vllm_version": vllm.__version__,
        "triton": f"{triton.__version__}, TRITON_INTERPRET=1",
        "sha256": {f"vllm/{p}": hashlib.sha256((root / p).read_bytes()).hexdigest() for p in HASHED},
        "executed": executed,
        "stand_ins": STAND_INS,
    }


def main() -> None:
    """``v2_worker.py JOBS RESULTS``: JOBS {"sampler_width": "vllm" | "k+1",
    "jobs": {name: job}}; RESULTS {"provenance", "results": {name: [stage-steps]}}."""
    jobs_path, results_path = sys.argv[1:]
    jobs = json.loads(Path(jobs_path).read_text())
    results = {name: run_job(job, jobs["sampler_width"]) for name, job in jobs["jobs"].items()}
    Path(results_path).write_text(json.dumps({"provenance": provenance(), "results": results}))


if __name__ == "__main__":
    main()
