"""The side of the reference harness that runs inside vLLM's own environment.

Started by ``reference.run`` as ``python worker.py`` in the
environment that ``environment.py`` builds, with one downloaded vLLM release on
the path. It reads JSON jobs (per run, every stage's scheduler outputs in the
order that stage ran them, and the last stage's sampled tokens) and writes, as JSON,
what vLLM's own ``InputBatch`` holds after vLLM's own
``GPUModelRunner._update_states`` at every stage-step.

``_update_states`` (and the two small methods it calls) are compiled from the
text of the installed ``vllm/v1/worker/gpu_model_runner.py``, with its file name
and line numbers, and bound to ``StandInRunner``, which holds only the
attributes those methods read. Their module-level names are bound by running
that file's own import statements for exactly those names; the one name
replaced is ``get_pp_group``, whose answer (``is_last_rank``) is the stage's.

The only lines re-expressed here rather than executed are the last rank's
post-sampling bookkeeping (``record_sampled``), with their source lines cited.

No vLLM code is stored in minispec: this file imports vLLM from the cache.
It imports nothing from minispec, so it runs without minispec's dependencies.
vLLM twin: none (it drives vLLM's worker code; ``gpu_model_runner.py`` of each release).
"""

from __future__ import annotations
import __future__

import ast
import dataclasses
import functools
import hashlib
import json
import sys
import types
from pathlib import Path

# Files whose hashes go into the provenance of every result.
HASHED = ("v1/worker/gpu_model_runner.py", "v1/worker/gpu_input_batch.py", "v1/worker/block_table.py",
          "v1/core/sched/output.py")
# The runner's methods that run as vLLM's own code, per release.
METHODS = {
    "0.9.2": ("_update_states", "_may_reorder_batch"),
    "0.14.0": ("_update_states", "_may_reorder_batch", "_get_valid_sampled_token_count"),
    "0.33.0": ("_update_states", "_may_reorder_batch", "_get_valid_sampled_token_count", "_on_request_state_removed",
               "_process_encoder_cache_scheduler_output"),
}


def vllm_root() -> Path:
    import vllm

    return Path(vllm.__file__).parent


def _method_node(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    cls_node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in cls_node.body if isinstance(n, ast.FunctionDef) and n.name == name)
    if fn.decorator_list:
        raise RuntimeError(f"{cls}.{name} is decorated; compiling it bare would change what it does")
    return fn


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _import_globals(tree: ast.Module, path: Path, wanted: set[str], module: str) -> dict:
    """Run the module's own top-level imports that bind a name in ``wanted``.
    An import that fails on this CPU-only machine leaves its names unbound, so a
    branch that needs one fails loudly (NameError) instead of silently."""
    namespace: dict = {"__builtins__": __builtins__, "__name__": module}
    for node in tree.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        bound = {(a.asname or a.name).split(".")[0] for a in node.names}
        if not bound & wanted:
            continue
        code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec")
        try:
            exec(code, namespace)
        except ImportError:
            pass
    return namespace


def compile_methods(relpath: str, cls: str, names, replaced: dict) -> tuple[dict, dict]:
    """Methods ``names`` of class ``cls``, compiled from the text of vLLM's
    ``relpath`` (under ``vllm/``) with its file name and line numbers; their
    module-level names bound by that file's own imports, except ``replaced``.
    Returns the functions and each one's (first, last) source line."""
    path = vllm_root() / relpath
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = [_method_node(tree, cls, name) for name in names]
    flags = __future__.annotations.compiler_flag
    code = compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec", flags=flags, dont_inherit=True)
    module = "vllm." + relpath.removesuffix(".py").replace("/", ".")
    namespace = _import_globals(tree, path, _global_names(code) - set(replaced), module)
    namespace.update(replaced)
    methods: dict = {}
    exec(code, namespace, methods)
    return methods, {n.name: (n.lineno, n.end_lineno) for n in nodes}


@functools.cache
def compile_runner_methods(version: str, is_last_rank: bool) -> tuple[dict, dict]:
    """vLLM's own runner methods, compiled from ``gpu_model_runner.py``'s text.
    The one name replaced is ``get_pp_group``: the stage's place in the pipeline,
    which vLLM asks its process group for. Compiled once per process and rank kind
    (each stage binds the same functions; parsing 0.33.0's file for every stage of
    thousands of runs took most of the explorer's time)."""
    return compile_methods("v1/worker/gpu_model_runner.py", "GPUModelRunner", METHODS[version],
                           {"get_pp_group": lambda: types.SimpleNamespace(is_last_rank=is_last_rank)})


class StandInRunner:
    """Only what vLLM's ``_update_states`` reads from ``self`` (and what the two
    methods it calls read), with the values of a plain decoder on FlashAttention:
    no multimodal inputs, no M-RoPE, no pooling, no async scheduling."""

    def __init__(self, version: str, input_batch, is_last_rank: bool):
        import torch

        self.requests: dict = {}
        self.input_batch = input_batch
        self.device = torch.device("cpu")
        self.encoder_cache: dict = {}
        self.uses_mrope = False
        # one KV cache group (a plain decoder), whose FlashAttention builder
        # does not reorder the batch
        self.kv_cache_config = types.SimpleNamespace(kv_cache_groups=[None])
        if version == "0.9.2":
            from vllm.v1.attention.backends.utils import AttentionMetadataBuilder

            self.attn_metadata_builders = [types.SimpleNamespace(
                reorder_batch=lambda batch, out: AttentionMetadataBuilder.reorder_batch(None, batch, out))]
        else:
            self.num_prompt_logprobs: dict = {}
            self.is_pooling_model = False
            self.uses_xdrope_dim = 0
            self.use_async_scheduling = False
            self.valid_sampled_token_count_event = None
            self.reorder_batch_threshold = None
        if version == "0.33.0":
            # pooling (late interaction) is left out; the drafts are not vLLM's GPU n-gram
            # proposer's (0.33.0 gpu_model_runner.py 1239-1243); no async speculative decoding
            self.late_interaction_runner = types.SimpleNamespace(on_requests_finished=lambda ids: None,
                                                                 register_request=lambda *a: None)
            self.speculative_config = types.SimpleNamespace(use_ngram_gpu=lambda: False)
            self.use_async_spec_decode = False
        methods, self.method_lines = compile_runner_methods(version, is_last_rank)
        for name, fn in methods.items():
            setattr(self, name, types.MethodType(fn, self))


def record_sampled(runner: StandInRunner, version: str, sampled: dict[str, list[int]]) -> None:
    """The last rank's bookkeeping after sampling, re-expressed (it is inline in
    ``execute_model``): vLLM 0.9.2 ``gpu_model_runner.py`` lines 1515-1532,
    vLLM 0.14.0 ``_bookkeeping_sync`` lines 2839-2865, vLLM 0.33.0 lines 3526-3552, the
    same lines (no async scheduling)."""
    batch = runner.input_batch
    for req_idx, req_id in enumerate(batch.req_ids):
        sampled_ids = sampled.get(req_id)
        if not sampled_ids:
            continue
        start_idx = batch.num_tokens_no_spec[req_idx]
        end_idx = start_idx + len(sampled_ids)
        batch.token_ids_cpu[req_idx, start_idx:end_idx] = sampled_ids
        batch.num_tokens_no_spec[req_idx] = end_idx
        if version == "0.9.2":
            batch.num_tokens[req_idx] = end_idx
        else:
            batch.is_token_ids[req_idx, start_idx:end_idx] = True
        runner.requests[req_id].output_token_ids.extend(sampled_ids)


# -- vLLM's dataclasses from the job's plain data --------------------------

def _fill(cls, **given):
    """``cls(**given)``, with every other required field empty: ``[]``, ``{}``,
    ``set()`` by its annotation, else ``None`` (multimodal inputs, LoRA, pooling,
    structured output, KV connectors: none of them is used here)."""
    empty = {"list": list, "dict": dict, "set": set, "tuple": tuple}
    for f in dataclasses.fields(cls):
        if f.name in given or f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        kind = str(f.type).split("[")[0].strip()
        given[f.name] = empty.get(kind, lambda: None)()
    unknown = set(given) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
    return cls(**given)


def _sampling_params(p: dict):
    from vllm.sampling_params import SamplingParams

    return SamplingParams(temperature=p["temperature"], seed=p["seed"], max_tokens=p["max_tokens"],
                          stop_token_ids=p["stop_token_ids"])


def scheduler_output(version: str, o: dict):
    """vLLM's own ``SchedulerOutput`` for one of minispec's (as plain data);
    block ids become one KV cache group, as vLLM's are."""
    from vllm.v1.core.sched import output as so

    new = [_fill(so.NewRequestData, req_id=n["req_id"], prompt_token_ids=n["prompt_token_ids"],
                 sampling_params=_sampling_params(n["sampling_params"]), block_ids=(n["block_ids"],),
                 num_computed_tokens=n["num_computed_tokens"]) for n in o["new"]]
    c = o["cached"]
    columns = dict(req_ids=c["req_ids"], new_token_ids=c["new_token_ids"],
                   new_block_ids=[(ids,) for ids in c["new_block_ids"]], num_computed_tokens=c["num_computed_tokens"])
    if version == "0.9.2":
        cached = so.CachedRequestData(resumed_from_preemption=c["resumed_from_preemption"], **columns)
    else:
        # all_token_ids is read only under async scheduling (0.14.0 line 1034)
        cached = so.CachedRequestData(
            resumed_req_ids={r for r, resumed in zip(c["req_ids"], c["resumed_from_preemption"]) if resumed},
            all_token_ids={}, num_output_tokens=c["num_output_tokens"], **columns)
    return _fill(so.SchedulerOutput, scheduled_new_reqs=new, scheduled_cached_reqs=cached,
                 num_scheduled_tokens=o["num_scheduled_tokens"],
                 total_num_scheduled_tokens=sum(o["num_scheduled_tokens"].values()),
                 scheduled_spec_decode_tokens=o["scheduled_spec_decode_tokens"],
                 finished_req_ids=set(o["finished_req_ids"]), num_common_prefix_blocks=[0])


def input_batch(version: str, cfg: dict):
    import torch
    from vllm.v1.worker.gpu_input_batch import InputBatch

    if version == "0.33.0":  # no pin_memory, no is_spec_decode; the block table's width is asked for
        return InputBatch(max_num_reqs=cfg["max_num_reqs"], max_model_len=cfg["max_model_len"],
                          max_num_batched_tokens=cfg["max_num_batched_tokens"], device=torch.device("cpu"),
                          vocab_size=cfg["vocab_size"], block_sizes=[cfg["block_size"]],
                          max_num_blocks_per_req=[-(-cfg["max_model_len"] // cfg["block_size"])])
    extra = {"kernel_block_sizes": [cfg["block_size"]]} if version == "0.14.0" else {}
    return InputBatch(max_num_reqs=cfg["max_num_reqs"], max_model_len=cfg["max_model_len"],
                      max_num_batched_tokens=cfg["max_num_batched_tokens"], device=torch.device("cpu"),
                      pin_memory=False, vocab_size=cfg["vocab_size"], block_sizes=[cfg["block_size"]],
                      is_spec_decode=True, **extra)


def snapshot(version: str, runner: StandInRunner) -> dict:
    """The buffers compared, as plain data (``compare.BUFFERS`` names them)."""
    batch = runner.input_batch
    table = batch.block_table.block_tables[0]
    table_np = table.block_table_np if version == "0.9.2" else table.block_table.np
    rows = list(batch.req_ids)
    if version == "0.9.2":
        drafts = [batch.token_ids_cpu[i, batch.num_tokens_no_spec[i]:batch.num_tokens[i]].tolist()
                  for i in range(len(rows))]
    else:
        drafts = [list(batch.spec_token_ids[i]) for i in range(len(rows))]
    return {
        "req_ids": rows,
        "req_id_to_index": dict(batch.req_id_to_index),
        "token_ids_cpu": batch.token_ids_cpu.tolist(),
        # 0.14.0 has no num_tokens array: a row's length is num_tokens_no_spec
        # plus its spec_token_ids (gpu_input_batch.py lines 130, 254)
        "num_tokens": [int(batch.num_tokens_no_spec[i]) + len(drafts[i]) for i in range(len(rows))],
        "num_tokens_no_spec": batch.num_tokens_no_spec[: len(rows)].tolist(),
        "num_computed_tokens_cpu": batch.num_computed_tokens_cpu[: len(rows)].tolist(),
        "num_prompt_tokens": batch.num_prompt_tokens[: len(rows)].tolist(),
        "block_table": [table_np[i, : table.num_blocks_per_row[i]].tolist() for i in range(len(rows))],
        "drafts": drafts,
        "output_token_ids": {r: list(s.output_token_ids) for r, s in runner.requests.items()},
    }


def run_stage(version: str, cfg: dict, stage: dict) -> list[dict]:
    runner = StandInRunner(version, input_batch(version, cfg), stage["is_last"])
    out = []
    for event in stage["steps"]:
        # every stage gets its own objects, as each worker deserialises its own copy
        runner._update_states(scheduler_output(version, event["scheduler_output"]))
        out.append({"stage": stage["stage"], "step": event["step"], "buffers": snapshot(version, runner)})
        if stage["is_last"]:
            record_sampled(runner, version, event["sampled"])
    return out


def provenance(version: str) -> dict:
    import vllm

    root = vllm_root()
    _, lines = compile_runner_methods(version, False)
    return {
        "vllm_version": vllm.__version__,
        "sha256": {f"vllm/{p}": hashlib.sha256((root / p).read_bytes()).hexdigest() for p in HASHED},
        "executed": {f"GPUModelRunner.{n}": f"vllm/v1/worker/gpu_model_runner.py:{a}-{b}" for n, (a, b) in lines.items()},
    }


def main() -> None:
    """``worker.py JOBS RESULTS``, both JSON files (vLLM logs to stdout, so
    results do not go there). JOBS: {"version", "jobs": {name: job}}, one job
    per run, each {"config", "stages"}; RESULTS: {"provenance", "results":
    {name: [stage-step snapshots]}}."""
    jobs_path, results_path = sys.argv[1:]
    jobs = json.loads(Path(jobs_path).read_text())
    version = jobs["version"]
    results = {name: [r for stage in job["stages"] for r in run_stage(version, job["config"], stage)]
               for name, job in jobs["jobs"].items()}
    Path(results_path).write_text(json.dumps({"provenance": provenance(version), "results": results}))


if __name__ == "__main__":
    main()
