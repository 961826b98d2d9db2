"""vLLM 0.9.2's own ``Scheduler`` (with its ``KVCacheManager``), driven by minispec's engine.

Runs in vLLM's environment like ``worker.py`` (``python scheduler_worker.py JOBS
RESULTS``). Each job is one minispec run's scheduler events in the order they
happened: requests added, ``schedule()`` called, ``update_from_output`` fed a
``ModelRunnerOutput``. The same calls go to vLLM's ``Scheduler``, with minispec's
own model-runner outputs; every ``SchedulerOutput`` vLLM returns is written
out, as plain data shaped as ``capture.scheduler_output_data``, until the first
schedule whose tokens differ from minispec's (after it, minispec's runner
outputs no longer answer what vLLM scheduled).

Stand-ins, for what a text-only model without LoRA, prefix caching, structured
output or KV transfer never reads: the config objects (``SimpleNamespace``es
holding only the fields the scheduler reads) and the structured-output manager.
vLLM's KV cache keeps block 0 as its null block, so it is given one block more
than minispec, and its block ids are reported minus one (minispec's
``kv_cache_manager.py`` docstring notes the departure).
vLLM twin: none (it drives ``vllm/v1/core/sched/scheduler.py`` of 0.9.2).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

from worker import _sampling_params  # noqa: E402  (this folder is on sys.path when run as a script)


def make_scheduler(cfg: dict):
    import torch
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    ns = types.SimpleNamespace
    spec = None
    if cfg["num_speculative_tokens"]:
        spec = ns(num_speculative_tokens=cfg["num_speculative_tokens"], use_eagle=lambda: False)
    vllm_config = ns(
        scheduler_config=ns(max_num_seqs=cfg["max_num_seqs"], max_num_batched_tokens=cfg["max_num_batched_tokens"],
                            max_model_len=cfg["max_model_len"], policy="fcfs", long_prefill_token_threshold=0,
                            chunked_prefill_enabled=True, disable_chunked_mm_input=False),
        cache_config=ns(num_gpu_blocks=cfg["num_gpu_blocks"] + 1, block_size=cfg["block_size"],
                        enable_prefix_caching=False, prefix_caching_hash_algo="builtin"),
        parallel_config=ns(pipeline_parallel_size=cfg["pipeline_parallel_size"], data_parallel_rank=0),
        model_config=ns(is_multimodal_model=False),
        speculative_config=spec, lora_config=None, kv_events_config=None, kv_transfer_config=None,
    )
    group = KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=cfg["block_size"], num_kv_heads=1, head_size=1,
                                                          dtype=torch.float32, use_mla=False))
    kv_cache_config = KVCacheConfig(num_blocks=cfg["num_gpu_blocks"] + 1, kv_cache_tensors=[], kv_cache_groups=[group])
    structured = ns(grammar_bitmask=lambda *args: None, should_advance=lambda request: False)
    return Scheduler(vllm_config, kv_cache_config, structured, log_stats=False)


def _blocks(ids) -> list[int]:
    return [b - 1 for b in ids]  # back to minispec's numbering (vLLM's block 0 is the null block)


def output_data(out, scheduler) -> dict:
    c = out.scheduled_cached_reqs
    return {
        "new": [{"req_id": n.req_id, "prompt_token_ids": list(n.prompt_token_ids), "block_ids": _blocks(n.block_ids[0]),
                 "num_computed_tokens": n.num_computed_tokens} for n in out.scheduled_new_reqs],
        "cached": {"req_ids": list(c.req_ids), "resumed_from_preemption": list(c.resumed_from_preemption),
                   "new_token_ids": [list(t) for t in c.new_token_ids],
                   "new_block_ids": [_blocks(b[0]) for b in c.new_block_ids],
                   "num_computed_tokens": list(c.num_computed_tokens)},
        "num_scheduled_tokens": dict(out.num_scheduled_tokens),
        "scheduled_spec_decode_tokens": {r: list(d) for r, d in out.scheduled_spec_decode_tokens.items()},
        "finished_req_ids": sorted(out.finished_req_ids),
    }


def _request(r: dict):
    from vllm.v1.request import Request

    return Request(request_id=r["req_id"], prompt_token_ids=r["prompt_token_ids"], multi_modal_inputs=None,
                   multi_modal_hashes=None, multi_modal_placeholders=None,
                   sampling_params=_sampling_params(r["sampling_params"]), pooling_params=None,
                   eos_token_id=r["eos_token_id"])


def _runner_output(o: dict):
    from vllm.v1.outputs import ModelRunnerOutput

    return ModelRunnerOutput(req_ids=o["req_ids"], req_id_to_index=o["req_id_to_index"],
                             sampled_token_ids=o["sampled_token_ids"], spec_token_ids=o["spec_token_ids"] or None,
                             logprobs=None, prompt_logprobs_dict={}, pooler_output=[])


def run_job(job: dict) -> list[dict]:
    """vLLM's schedules, one per minispec ``schedule()`` call, until the first
    that schedules other requests or token counts than minispec's (included)."""
    from vllm.v1.request import RequestStatus

    scheduler = make_scheduler(job["config"])
    vllm_outputs, results, dropped = {}, [], []
    for event in job["events"]:
        if event["kind"] == "add":
            scheduler.add_request(_request(event["request"]))
        elif event["kind"] == "schedule":
            in_flight = {r for o in vllm_outputs.values() for r in o.num_scheduled_tokens}
            before = {r for r, req in scheduler.requests.items() if req.status == RequestStatus.PREEMPTED}
            out = scheduler.schedule()
            vllm_outputs[event["step"]] = out
            data = output_data(out, scheduler)
            # 0.9.2's SchedulerOutput does not say whom it preempted: read it off the requests
            data["preempted"] = [{"req_id": r, "in_flight": r in in_flight} for r, req in scheduler.requests.items()
                                 if req.status == RequestStatus.PREEMPTED and r not in before]
            # vLLM's engine never executes an empty schedule, so the finished ids
            # it carries reach no worker; minispec keeps them for the next one
            # (its scheduler.py docstring). Recorded, then carried as minispec does.
            if not out.total_num_scheduled_tokens:
                dropped += data["finished_req_ids"]
                data["finished_req_ids"] = sorted(set(dropped))
            elif dropped:
                data["finished_req_ids"] = sorted(set(data["finished_req_ids"]) | set(dropped))
                data["dropped_finished_req_ids"], dropped = sorted(dropped), []
            results.append({"step": event["step"], "output": data})
            if data["num_scheduled_tokens"] != event["output"]["num_scheduled_tokens"]:
                break  # minispec's runner outputs answer other requests from here on
        else:
            scheduler.update_from_output(vllm_outputs.pop(event["step"]), _runner_output(event["output"]))
    return results


def main() -> None:
    jobs_path, results_path = sys.argv[1:]
    jobs = json.loads(Path(jobs_path).read_text())
    Path(results_path).write_text(json.dumps({name: run_job(job) for name, job in jobs["jobs"].items()}))


if __name__ == "__main__":
    main()
