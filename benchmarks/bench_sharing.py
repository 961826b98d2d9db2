"""What sharing schedule prefixes and skipping states already seen would save the explorer,
measured, and one design's whole default answer timed (issue 36, deliverable 3).

The explorer runs each schedule on its own engine. Before building a trie of schedules or a
table of states seen, this measures what they could buy on ``DEFAULT``, on a fixed sample of
its groups (a group: the schedules alike in everything but their requests, so one engine
shape and one ``max_tokens``; 265 schedules each), every schedule run alone, step by step:

* costs, in CPU time of this process: building an engine, one engine step, and a snapshot of
  a running engine two ways (``copy.deepcopy`` of the ``LLM`` with its tokenizer and config
  shared; ``pickle``'s dump and load, which would give a state's hash for free);
* the trie's bound: each schedule as the sequence of inputs it reads (each request's arrival,
  each scripted proposal's right-draft count at the step the proposer reads it), the steps
  before each input shared by every schedule that reads the same inputs up to there, the
  snapshots taken as free;
* repeats: steps run after the engine reached a state some earlier schedule of the group
  had reached, under two keys. The sound key is everything reachable from the engine and its
  recorder (scheduler and KV-cache manager, each runner with its buffers, stale ones included,
  and its KV cache, the messages in flight, the invariant checker), but the tokenizer, the
  config and code, with the scripted proposer as the script entries it has yet to read and
  the drafts it will repeat: two states equal under it run the same from there. The
  scheduler's view (each request's tokens, computed count, status and drafts, the finished
  requests' outputs, the free blocks, the batches in flight, the engine step) is not sound:
  it leaves out the drafts still unread in the script, the runners' stale buffers and the KV
  cache's contents.

Then ``--whole DESIGN``: ``explore`` on that design with no scope (``DEFAULT`` whole, then 100
random schedules), with one process and with two: wall time, schedules per second, and CPU time
of this process and of its workers. Every row carries the load average (``os.getloadavg``): the
machine is shared. Run it under ``nice``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import hashlib
import io
import os
import pickle
import random
import resource
import time
import types
from dataclasses import dataclass
from unittest import mock

import numpy as np
import torch

from minispec.lab.experiments.schedule import build_llm, intra_op_threads
from minispec.lab.explorer.explorer import DEFAULT, explore, schedules
from minispec.v1.spec_decode.scripted_proposer import ScriptedProposer

# pickled by name: code does not change during a run (a bound method is pickled with its object)
CODE = (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def groups(sample: int, seed: int) -> list[list]:
    """``sample`` of ``DEFAULT``'s groups, chosen at random with ``seed``."""
    by_engine = collections.defaultdict(list)
    for s in schedules(DEFAULT):
        by_engine[(s.pipeline_parallel_size, s.max_tokens, s.max_num_seqs, s.max_num_batched_tokens,
                   s.num_gpu_blocks, s.async_scheduling)].append(s)
    keys = random.Random(seed).sample(sorted(by_engine, key=str), sample)
    return [by_engine[k] for k in keys]


class _KeyPickler(pickle.Pickler):
    """Pickles an engine's mutable state: the tokenizer and the config by name (a group's
    engines have equal ones: its schedules differ only in requests, and the script in the
    config is read once, when the proposer copies it), code by qualified name, the scripted
    proposer as what it has yet to read, a tensor as its values and which storage it views
    (numbered in the order met: two tensors on one storage stay one)."""

    def __init__(self, file, llm):
        super().__init__(file, protocol=5)
        self.named = {id(llm.tokenizer): "tokenizer", id(llm.config): "config"}
        self.storages: dict[int, int] = {}  # a tensor's storage -> the order it was first met in

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):  # torch's own pickling writes storage addresses
            where = self.storages.setdefault(obj.untyped_storage().data_ptr(), len(self.storages))
            values = bytes(obj.detach().cpu().clone().untyped_storage())
            return ("tensor", where, obj.storage_offset(), tuple(obj.shape), obj.stride(), str(obj.dtype), values)
        if isinstance(obj, ScriptedProposer):
            unread = {r: c[obj.proposals[r]:] for r, c in obj.script.items() if c[obj.proposals[r]:]}
            return ("proposer", sorted(unread.items()), sorted((r, tuple(d)) for r, d in obj.repeat.items()))
        if id(obj) in self.named:
            return self.named[id(obj)]
        if isinstance(obj, types.FunctionType) and obj.__closure__:
            raise TypeError(f"{obj.__qualname__} is a closure: its cells would be left out of the key")
        if isinstance(obj, CODE):
            return ("code", getattr(obj, "__module__", None), getattr(obj, "__qualname__", obj.__name__), id(obj))
        return None


def sound_key(llm) -> bytes:
    buffer = io.BytesIO()
    _KeyPickler(buffer, llm).dump((llm.engine, llm.recorder))
    return hashlib.blake2b(buffer.getvalue(), digest_size=16).digest()


def scheduler_key(llm) -> tuple:
    engine = llm.engine
    requests = tuple(sorted((r.request_id, tuple(r.all_token_ids), r.num_computed_tokens, str(r.status),
                             tuple(r.spec_token_ids)) for r in engine.scheduler.requests.values()))
    finished = tuple(sorted((r.request_id, tuple(r.output_token_ids)) for r in engine.finished))
    return (engine.engine_step, len(engine.batch_queue), requests, finished,
            engine.scheduler.kv_cache_manager.num_free_blocks)


def snapshot_costs(group: list, repeat: int = 30) -> dict[str, float]:
    """Milliseconds of CPU: build, deepcopy and pickle a two-request engine three steps in."""
    schedule = next(s for s in group if len(s.requests) == 2)
    start = time.process_time()
    for _ in range(repeat):
        llm = build_llm(schedule)
    build = (time.process_time() - start) / repeat
    for _ in range(3):
        llm.engine.step_with_batch_queue()
    shared = {id(llm.tokenizer): llm.tokenizer, id(llm.config): llm.config}
    start = time.process_time()
    for _ in range(repeat):
        copy.deepcopy(llm, dict(shared))
    deep = (time.process_time() - start) / repeat
    start = time.process_time()
    for _ in range(repeat):
        sound_key(llm)
    dump = (time.process_time() - start) / repeat
    return {"build": 1000 * build, "deepcopy": 1000 * deep, "the sound key (pickle, hash)": 1000 * dump}


@dataclass
class Alone:
    """One schedule run alone, step by step."""

    keys: list[dict[str, object]]  # per step: the state's keys before it, once every request has arrived
    views: list[tuple]  # per step: the scheduler's view after it
    reads: list[tuple]  # (engine step, the script entry read)
    engine_steps: int
    cpu: float  # building the engine and its steps, keys left out


@contextlib.contextmanager
def zeroed():
    """Buffers allocated zeroed, for the measurement: the engine allocates with ``torch.empty``
    and ``np.empty``, whose leftover bytes differ from one build to the next, so a key over
    every byte of every buffer would never repeat across engines otherwise."""
    with mock.patch.object(torch, "empty", torch.zeros), mock.patch.object(np, "empty", np.zeros):
        yield


def run_alone(schedule) -> Alone:
    reads, now = [], [0]
    right_count = ScriptedProposer._right_count

    def logged(proposer, req_id):
        n, counts = proposer.proposals[req_id], proposer.script.get(req_id, ())
        if n < len(counts):
            reads.append((now[0], ("script", req_id, n, counts[n])))
        return right_count(proposer, req_id)

    keys, views, start = [], [], time.process_time()
    with zeroed(), mock.patch.object(ScriptedProposer, "_right_count", logged):
        llm = build_llm(schedule)
        engine, cpu = llm.engine, time.process_time() - start
        engine.finished = []
        while engine.has_work():
            # once every request has arrived, every input but the script's is in the state
            keys.append({} if engine.arrivals else {"sound": sound_key(llm), "view": scheduler_key(llm)})
            start, now[0] = time.process_time(), engine.engine_step
            engine.step_with_batch_queue()
            cpu += time.process_time() - start
            views.append(scheduler_key(llm))
    return Alone(keys, views, reads, engine.engine_step, cpu)


def measure(group: list) -> collections.Counter:
    """Every schedule of ``group`` run alone: its steps, the trie's bound, and per key the
    steps run after a state seen before and the futures that differed after an equal key
    (the key's own check: a sound key has none)."""
    totals, nodes = collections.Counter(schedules=len(group)), {}
    futures: dict[str, dict] = {"sound": {}, "view": {}}
    for schedule in group:
        run = run_alone(schedule)
        totals.update(steps=len(run.views), cpu=run.cpu, engine_steps=run.engine_steps, keyed=sum(map(bool, run.keys)))
        for name, seen in futures.items():
            repeated = False
            for i, keys in enumerate(run.keys):
                if name not in keys:
                    continue
                future = hash(tuple(run.views[i:]))
                repeated |= keys[name] in seen
                totals[f"{name} differed"] += seen.setdefault(keys[name], future) != future
                totals[f"{name} repeat"] += repeated
        inputs = sorted([(r.arrival_step, ("arrive", r.req_id, len(r.prompt))) for r in schedule.requests]
                        + run.reads, key=lambda d: d[0])
        path, before = (), 0
        for step, what in inputs:
            path += ((step, what),)
            nodes[path], before = step - before, step
        nodes[path + ("end",)] = run.engine_steps - before
    totals["trie engine steps"], totals["distinct sound"] = sum(nodes.values()), len(futures["sound"])
    return totals


def whole(design: str, workers: int) -> None:
    before, start = load(), time.perf_counter()
    cpu, children = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    result = explore({"model_runner": design}, workers=workers)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = time.perf_counter() - start
    own = time.process_time() - cpu
    theirs = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    verdict = "nothing breaks" if result.counterexample is None else f"BROKEN: {result.counterexample.failure}"
    print(f"| {design} | {workers} | {result.schedules_run} ({result.searched} searched) | {seconds:.0f} s | "
          f"{result.schedules_run / seconds:.0f}/s | {own:.0f} s + {theirs:.0f} s | "
          f"{result.schedules_run / (own + theirs):.0f}/s | {verdict} | {before} -> {load()} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=4, help="groups of DEFAULT measured (265 schedules each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--whole", default=None, help="a design to explore on DEFAULT whole (e.g. v1)")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    args = parser.parse_args()
    with intra_op_threads():
        chosen = groups(args.groups, args.seed)
        if chosen:
            costs = snapshot_costs(chosen[0])
            print("CPU ms: " + ", ".join(f"{name} {ms:.2f}" for name, ms in costs.items()) + f" (load {load()})")
        print("| group (PP, max_tokens, rows, budget, KV blocks, async) | schedules | steps "
              "| CPU s (builds and steps) | engine steps, each alone | in a trie | steps after a state seen: "
              "sound key (futures that differed) | scheduler's view (differed) | distinct states (sound) "
              "| per CPU-s: schedules, states | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for group in chosen:
            s, before = group[0], load()
            t = measure(group)
            print(f"| {s.pipeline_parallel_size}, {s.max_tokens}, {s.max_num_seqs}, {s.max_num_batched_tokens}, "
                  f"{s.num_gpu_blocks}, {s.async_scheduling} | {t['schedules']} | {t['steps']} | "
                  f"{t['cpu']:.1f} | {t['engine_steps']} | {t['trie engine steps']} "
                  f"({t['engine_steps'] / t['trie engine steps']:.2f}x) | {t['sound repeat']} ({t['sound differed']}) "
                  f"| {t['view repeat']} ({t['view differed']}) | {t['distinct sound']} "
                  f"| {t['schedules'] / t['cpu']:.0f}, {t['distinct sound'] / t['cpu']:.0f} | {before} |", flush=True)
    if args.whole:
        print("\n| design | processes | schedules | wall | schedules/s | CPU (this process + workers) "
              "| schedules per CPU-s | result | load before -> after |")
        print("|---|---|---|---|---|---|---|---|---|")
        for workers in args.workers:
            whole(args.whole, workers)


if __name__ == "__main__":
    main()
