"""Find the smallest schedule that breaks a runner design: the small-scope explorer.

vLLM twin: none. vLLM's tests for pipeline-parallel drafting replay schedules someone wrote
(``tests/v1/e2e/spec_decode/eagle/test_eagle3_pp.py`` checks acceptance, not equality); this
asks the question the other way round. ``explore(engine_args, scope)`` runs every schedule
within ``scope`` (plain data; ``DEFAULT`` when none is given) in order of size: engine settings
away from the plainest first, then requests, then steps, then the rest, on the stand-in model (``minispec/checkpoints/standin``: exact, fast, reading its context
through the real KV cache) with the scripted proposer, under the design and switches in
``engine_args`` (any of ``LLM``'s ``fixes``, ``faults``, ``model_runner``, and ``worker_cls``: a
runner from outside minispec that implements the runner contract, ``WorkerBase``). Each run has the
invariant checker on, and its outputs are compared with the stand-in's own greedy
continuation (what the same model at PP = 1 without drafts generates; a test holds the two
equal). The first failure is the minimal counterexample: a ``Schedule`` (replay it with
``run_schedule``, open it in the stepper with ``build_llm``) and a short step table.
A run that hangs is a finding too, named as a deadlock or no progress (``liveness``), and the
greedy reference stops where the KV cache's length cap stops the request. ``search`` goes
beyond the exhaustive scope with hypothesis: random schedules, the first failing one shrunk to
a small one; ``explore`` with no scope runs 100 of them once ``DEFAULT`` runs clean. Every
answer carries what its runs exercised (``coverage``), and "nothing breaks" names the
conditions never reached, with why where the scope or the engine rules them out. Left out:
sharing schedule prefixes and skipping states already seen: each schedule builds and runs its
own engine. Measured on ``DEFAULT`` (``benchmarks/bench_sharing.py``), a trie of the inputs
schedules read would run 1.1-1.3x fewer steps with snapshots for free (one costs about a
build), and a state key covering what the rest of a run depends on repeats only when buffers
are allocated zeroed, then in 6-51 % of steps, at the cost of about six steps a key. Also left
out: schedules of more than ``max_requests`` requests, except by ``search``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import multiprocessing
import random
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from minispec.config import CHECKPOINT_DIR, SCRIPT_REPEAT, LlamaArchitecture, is_int
from minispec.distributed.utils import get_pp_indices
from minispec.instruments.invariants import InvariantViolation, Violation
from minispec.lab.experiments.scenarios import PROMPTS
from minispec.lab.experiments.schedule import Request, Schedule, build_llm, intra_op_threads, plural
from minispec.lab.explorer.coverage import Condition, conditions, goals
from minispec.lab.explorer.liveness import Stall, drive, patience_for
from minispec.model_executor.models.standin import greedy_continuation
from minispec.token_tree import TokenTree

STANDIN = CHECKPOINT_DIR / "standin"
STANDIN_ARCH = LlamaArchitecture.from_pretrained(STANDIN)
MAX_MODEL_LEN = 64  # every scope's longest request fits; a KV cache of fewer blocks caps it lower
METHODS = ("scripted", "ngram")  # the proposers a scope may draft with
DESIGN_KEYS = ("fixes", "faults", "model_runner", "worker_cls")  # what engine_args may set: the design and its switches


class Shape(NamedTuple):
    """The engine's side of one schedule."""

    pp: int
    k: int
    in_flight: int | None
    blocks: int | None
    budget: int
    seqs: int
    async_scheduling: bool = False
    prefix_caching: bool = False


@dataclass(frozen=True)
class Scope:
    """Every schedule the explorer runs: each request picks a prompt length, an arrival step
    and, for its first ``scripted_proposals`` proposals, how many of the k drafts are right
    (``right_drafts``; later proposals are all right); the engine's shape picks one value
    of each tuple below. Requests are A, B, C, ..., their prompts the thread's, cut short."""

    max_requests: int = 3
    prompt_lengths: tuple[int, ...] = (2, 5)
    max_tokens: tuple[int, ...] = (2, 4)
    arrival_steps: tuple[int, ...] = (0, 1, 2)
    right_drafts: tuple[int, ...] = (0, 1, 3)
    scripted_proposals: int = 1
    pipeline_parallel_size: tuple[int, ...] = (2,)
    num_speculative_tokens: tuple[int, ...] = (3,)
    max_concurrent_batches: tuple[int | None, ...] = (None,)
    num_gpu_blocks: tuple[int | None, ...] = (None,)  # a small number makes requests preempt
    max_num_batched_tokens: tuple[int, ...] = (512,)  # a small budget chunks prefills
    max_num_seqs: tuple[int, ...] = (4, 1)  # one: requests wait for the one row (slot), and reuse it
    block_size: int = 4
    async_scheduling: tuple[bool, ...] = (False,)  # (True,): every schedule under async scheduling
    # True: schedules with prefix caching, every prompt cut from one text, so a later request whose
    # prompt is more than a block long hits the first's (run only where two such requests meet)
    enable_prefix_caching: tuple[bool, ...] = (False,)
    method: str = "scripted"  # "ngram": drafts from the history (a design that drafts on every stage needs it)
    # vLLM's speculative_token_tree for every schedule (its nodes are k; search draws chains); None: a chain
    speculative_token_tree: str | None = None
    # the scripted proposer EAGLE-3 shaped: the stand-in's layers whose entering stream it reads
    # (``TAPS``: under PP most live on stages before the last), handed over as the real model's are
    eagle_aux_hidden_state_layer_ids: tuple[int, ...] = ()

    def __post_init__(self):
        _check_fields(self)
        if not 1 <= self.max_requests <= len(PROMPTS):
            raise ValueError(f"max_requests={self.max_requests!r}: expected 1 to {len(PROMPTS)}")
        longest = min(len(p) for p in PROMPTS.values())
        if min(self.prompt_lengths) < 1 or max(self.prompt_lengths) > longest:
            raise ValueError(f"prompt_lengths={self.prompt_lengths!r}: expected lengths from 1 to {longest}")
        if 0 not in self.arrival_steps:
            # a schedule shifted later is the same schedule: each one's first request arrives at step 0
            raise ValueError(f"arrival_steps={self.arrival_steps!r}: expected 0 among them (the first request's)")
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r}: expected one of {METHODS}")
        taps = self.eagle_aux_hidden_state_layer_ids
        if taps and self.method != "scripted":
            raise ValueError(f"eagle_aux_hidden_state_layer_ids={taps!r}: the scripted proposer reads taps; "
                             f"expected () with method={self.method!r}")
        layers = STANDIN_ARCH.num_hidden_layers
        if not (isinstance(taps, tuple) and all(is_int(i) and 0 <= i <= layers for i in taps)):
            raise ValueError(f"eagle_aux_hidden_state_layer_ids={taps!r}: expected a tuple of the stand-in's "
                             f"layer indices, 0 to {layers}")
        if max(self.right_drafts) > min(self.num_speculative_tokens):
            raise ValueError(f"right_drafts={self.right_drafts!r}: expected at most k = "
                             f"{min(self.num_speculative_tokens)} (num_speculative_tokens' smallest)")
        if self.speculative_token_tree is not None:
            nodes = len(TokenTree.parse(self.speculative_token_tree))
            if set(self.num_speculative_tokens) != {nodes}:
                raise ValueError(f"num_speculative_tokens={self.num_speculative_tokens!r}: expected ({nodes},), the "
                                 "speculative_token_tree's nodes")
        _check_cache(self)

    def shapes(self) -> list[Shape]:
        return [Shape(*s) for s in itertools.product(
            self.pipeline_parallel_size, self.num_speculative_tokens, self.max_concurrent_batches,
            self.num_gpu_blocks, self.max_num_batched_tokens, self.max_num_seqs, self.async_scheduling,
            self.enable_prefix_caching)]

    def request_choices(self) -> list[tuple[int, int, tuple[int, ...]]]:
        scripted = self.method == "scripted"  # n-gram drafts follow the history: no script
        scripts = itertools.product(self.right_drafts, repeat=self.scripted_proposals * scripted)
        return sorted(itertools.product(sorted(self.arrival_steps), sorted(self.prompt_lengths), scripts))


# each tuple field of Scope: the smallest value it may hold (None allowed where the engine's default is meant)
_AXES = {"max_tokens": 1, "arrival_steps": 0, "right_drafts": SCRIPT_REPEAT, "pipeline_parallel_size": 1,
         "num_speculative_tokens": 1, "max_concurrent_batches": 1, "num_gpu_blocks": 1,
         "max_num_batched_tokens": 1, "max_num_seqs": 1, "prompt_lengths": 1}
_OPTIONAL = {"max_concurrent_batches", "num_gpu_blocks"}


def _check_fields(scope: Scope) -> None:
    """Each field its type and range, named: a bare int where a tuple belongs, a negative k, ..."""
    for name, low in (("max_requests", 1), ("scripted_proposals", 0), ("block_size", 1)):
        value = getattr(scope, name)
        if not (is_int(value) and value >= low):
            raise ValueError(f"{name}={value!r}: expected an integer >= {low}")
    for name, low in _AXES.items():
        value = getattr(scope, name)
        allowed = f"integers >= {low}" + (" or None" if name in _OPTIONAL else "")
        if not isinstance(value, tuple) or not value:
            raise ValueError(f"{name}={value!r}: expected a non-empty tuple of {allowed}")
        if not all((v is None and name in _OPTIONAL) or (is_int(v) and v >= low) for v in value):
            raise ValueError(f"{name}={value!r}: expected {allowed}")
    for name in ("async_scheduling", "enable_prefix_caching"):
        flags = getattr(scope, name)
        if not isinstance(flags, tuple) or not flags or not all(isinstance(f, bool) for f in flags):
            raise ValueError(f"{name}={flags!r}: expected a non-empty tuple of booleans")


def _check_cache(scope: Scope) -> None:
    """A KV cache of n blocks caps a request at n * block_size tokens (``max_model_len``): the
    longest prompt must fit with one token to generate, or no schedule could run."""
    need = -(-(max(scope.prompt_lengths) + 1) // scope.block_size)
    small = [b for b in scope.num_gpu_blocks if b is not None and b < need]
    if small:
        raise ValueError(f"num_gpu_blocks={scope.num_gpu_blocks!r}: {small} cannot hold the longest prompt "
                         f"({max(scope.prompt_lengths)} tokens) and one output token in blocks of "
                         f"{scope.block_size}; expected at least {need} blocks")


# What ``explore`` runs when given no scope (``Scope()``'s own defaults are the small, fast scope
# the tests build on): every condition of ``coverage`` the engine can reach, for every design.
# Each right-drafts count and a repeated list; max_tokens to 2k + 2 (a full acceptance, then more
# steps); two and three stages; async on and off; a budget below k + 1 (prefills chunked short);
# a KV cache of 4 blocks of 4 (two requests of 5 prompt tokens and 8 outputs preempt each other);
# one row (a request waits for it, then takes it over); prefix caching where two prompts share a
# block (a full hit: the later request's first step is a decode).
DEFAULT = Scope(max_requests=2, max_tokens=(2, 4, 8), right_drafts=(0, 1, 2, 3, SCRIPT_REPEAT),
                pipeline_parallel_size=(2, 3), num_gpu_blocks=(None, 4), max_num_batched_tokens=(512, 3),
                async_scheduling=(False, True), enable_prefix_caching=(False, True))


# The taps the shipped EAGLE-3 head reads (the streams entering layers 1, 2 and 3 of 4; SGLang's
# default, layers 2, n/2 and n - 3, needs more layers): at PP 2 the first two are stage 0's. A scope
# that reads them (``replace(scope, eagle_aux_hidden_state_layer_ids=TAPS)``) exercises invariant 9.
TAPS = (1, 2, 3)


def schedules(scope: Scope):
    """Every distinct schedule in ``scope``, smallest first (``_size``). Requests are
    interchangeable, so each multiset of requests is run once (in arrival order), and the
    first arrives at step 0 (a schedule shifted later is the same schedule)."""
    plain = scope.shapes()[0]
    batch = []
    for n in range(1, scope.max_requests + 1):
        for reqs in itertools.combinations_with_replacement(scope.request_choices(), n):
            if reqs[0][0] != 0:
                continue
            for max_tokens, shape in itertools.product(sorted(scope.max_tokens), scope.shapes()):
                if shape.prefix_caching and not _share_a_block(reqs, scope.block_size):
                    continue  # nothing to hit: the same run as without
                batch.append((_size(reqs, max_tokens, shape, plain), reqs, max_tokens, shape))
    batch.sort(key=lambda b: b[0])
    for _, reqs, max_tokens, shape in batch:
        schedule = _schedule(reqs, max_tokens, shape, scope.block_size, scope.method,
                             scope.eagle_aux_hidden_state_layer_ids)
        tree = scope.speculative_token_tree
        yield schedule if tree is None else replace(schedule, speculative_token_tree=tree,
                                                    details=f"{schedule.details}; tree {tree}")


def _share_a_block(reqs, block_size: int) -> bool:
    """Do two requests' prompts (cut from one text under prefix caching) share a full block that
    is not the later one's last token (a hit never covers it)?"""
    return sum(length > block_size for _, length, _ in reqs) >= 2


def _size(reqs, max_tokens, shape, plain: Shape) -> tuple:
    """The engine settings away from the plainest (``plain``: each axis's first value), then
    requests, then steps (the last arrival plus the tokens to generate), then the rest: a break
    on the plain engine is smaller than one that needs a chunking budget or a small cache, and
    the plain engine's schedules all run before any other's."""
    knobs = sum(a != b for a, b in zip(shape, plain))
    scripts = sum(shape.k + 1 if n == SCRIPT_REPEAT else n for r in reqs for n in r[2])  # a repeat: the most
    return (knobs, len(reqs), reqs[-1][0] + max_tokens, sum(r[1] for r in reqs), scripts, shape.pp,
            shape.k, shape.in_flight or 0, -(shape.blocks or 10**6), -shape.budget, -shape.seqs, shape.async_scheduling,
            shape.prefix_caching)


def _schedule(reqs, max_tokens: int, shape: Shape, block_size: int, method: str = "scripted",
              taps: tuple[int, ...] = ()) -> Schedule:
    blocks = shape.blocks
    names = list(PROMPTS)
    # under prefix caching every prompt is cut from the first text, so prompts share blocks
    texts = [PROMPTS[names[0 if shape.prefix_caching else i]] for i in range(len(reqs))]
    requests = tuple(Request(texts[i][:length], arrival, names[i]) for i, (arrival, length, _) in enumerate(reqs))
    script = tuple((names[i], script) for i, (_, _, script) in enumerate(reqs) if script)
    return Schedule("explorer", requests, shape.pp, method, shape.k, max_tokens, check_invariants=True,
                    max_num_seqs=shape.seqs, max_num_batched_tokens=shape.budget, block_size=block_size,
                    num_gpu_blocks=blocks, max_model_len=MAX_MODEL_LEN if blocks is None else blocks * block_size,
                    model=str(STANDIN), script=script, max_concurrent_batches=shape.in_flight,
                    async_scheduling=shape.async_scheduling, eagle_aux_hidden_state_layer_ids=taps,
                    enable_prefix_caching=shape.prefix_caching, details=_details(requests, script, shape, max_tokens, taps))


def _details(requests, script, shape: Shape, max_tokens, taps: tuple[int, ...] = ()) -> str:
    reqs = ", ".join(f"{r.req_id}: {plural(len(r.prompt), 'token')} at step {r.arrival_step}"
                     + (f", right drafts {_script_text(dict(script)[r.req_id])}" if r.req_id in dict(script) else "")
                     for r in requests)
    engine = [f"PP {shape.pp}", f"k {shape.k}", f"max_tokens {max_tokens}"]
    engine += [f"{shape.in_flight} batches in flight"] * (shape.in_flight is not None)
    engine += ["async scheduling"] * shape.async_scheduling
    engine += ["prefix caching, one prompt text"] * shape.prefix_caching
    engine += [f"{shape.blocks} KV blocks"] * (shape.blocks is not None)
    engine += [f"budget {shape.budget}"] * (shape.budget != 512) + [plural(shape.seqs, "row")] * (shape.seqs < 4)
    engine += [f"drafts reading taps {', '.join(map(str, taps))}"] * bool(taps)
    return f"{', '.join(engine)}; {reqs}"


def _script_text(script: tuple[int, ...]) -> str:
    return "[" + ", ".join("repeated" if n == SCRIPT_REPEAT else str(n) for n in script) + "]"


@dataclass
class Failure:
    """What broke: an invariant (with its step, stage, request, expected and found), an output
    that is not the stand-in's greedy continuation, or an exception from the engine."""

    violation: Violation | None = None
    divergence: tuple[str, int, int, int] | None = None  # request, output index, expected, found
    error: str | None = None
    stall: Stall | None = None  # a deadlock, or no progress (``liveness``)

    def __str__(self) -> str:
        if self.violation is not None:
            return str(self.violation)
        if self.stall is not None:
            return str(self.stall)
        if self.divergence is not None:
            req, i, want, got = self.divergence
            return f"request {req}'s output differs from PP 1 without drafts at token {i}: expected {want}, got {got}"
        return f"the engine raised {self.error}"

    @property
    def step(self) -> int | None:
        return self.violation.step if self.violation is not None else None


@dataclass
class Counterexample:
    schedule: Schedule
    failure: Failure
    trace: object = field(repr=False)  # the run's Trace, up to the failure
    tokenizer: object = field(default=None, repr=False)


@dataclass
class ExploreResult:
    engine_args: dict
    scope: Scope
    schedules_run: int
    seconds: float
    counterexample: Counterexample | None = None
    exhausted: bool = field(default=False)
    covered: frozenset[Condition] = frozenset()  # what the schedules run exercised (``coverage``)
    warnings: tuple[str, ...] = ()  # a fault the scope cannot reach (``warn_unreachable``)
    searched: int = 0  # of schedules_run, how many were random ones from ``WIDE`` after the scope (``search``)

    @property
    def never_exercised(self) -> dict[Condition, str | None]:
        """Each condition the scope aims at that no schedule run reached, with why it cannot
        where that is known (None: the scope could have, and did not)."""
        aims = goals(self.scope.num_speculative_tokens, self.scope.pipeline_parallel_size,
                     self.scope.async_scheduling, _remote_taps(self.scope), _padded_decodes(self.scope, self.engine_args))
        return {c: why for c, why in aims.items() if c not in self.covered}

    def coverage(self) -> str:
        never = self.never_exercised
        if not never:
            return "exercised every condition it aims at"
        return "never exercised: " + "; ".join(str(c) + (f" ({why})" if why else "") for c, why in never.items())


def _padded_decodes(scope: Scope, engine_args: dict) -> str | None:
    """Why no new request's first step can be a decode with drafts here; None where one can."""
    from minispec.v1.worker.designs import get_design
    from minispec.v1.worker.gpu import default_model_runner

    if True not in scope.enable_prefix_caching:
        return "the scope never enables prefix caching"
    design = get_design(engine_args.get("model_runner") or default_model_runner())
    if not design.takes_padded_decodes:
        return (f"model_runner={design.name!r} takes a new request's drafts from the scheduler, so the scheduler "
                "never pads its first step (docs/fidelity/scheduler.md)")
    longest = [(0, max(scope.prompt_lengths), ())] * min(2, scope.max_requests)  # the likeliest pair to share
    if not _share_a_block(longest, scope.block_size):
        return "no two of the scope's prompts share a full block"
    return None


def _remote_taps(scope: Scope) -> bool:
    """Whether some schedule's drafter reads a tap that a stage before the last owns (the last
    stage owns the taps from its first layer + 1 on)."""
    taps, layers = scope.eagle_aux_hidden_state_layer_ids, STANDIN_ARCH.num_hidden_layers
    return any(taps and min(taps) <= get_pp_indices(layers, pp - 1, pp)[0]
               for pp in scope.pipeline_parallel_size if pp > 1)


def run_one(schedule: Schedule, engine_args: dict) -> Counterexample | None:
    """Run ``schedule`` under ``engine_args``; what broke, or None when it ran clean and
    every output equals the stand-in's greedy continuation."""
    return run_covered(schedule, engine_args)[0]


def run_covered(schedule: Schedule, engine_args: dict) -> tuple[Counterexample | None, frozenset[Condition]]:
    """``run_one``, with the conditions the run exercised (``coverage.conditions``)."""
    llm = build_llm(schedule, **engine_args)
    failure = _drive(llm, schedule)
    trace = llm.trace
    covered = frozenset(conditions(trace, schedule.num_speculative_tokens))
    if failure is None:
        failure = _diverged(llm, schedule)
    return (None if failure is None else Counterexample(schedule, failure, trace, llm.tokenizer)), covered


def _drive(llm, schedule: Schedule) -> Failure | None:
    """Run to the end; an invariant broken, a stall, or the engine raising is a finding."""
    try:
        drive(llm.engine, patience_for(llm.scheduler_config.max_model_len, schedule.pipeline_parallel_size))
    except InvariantViolation as e:
        return Failure(violation=e.violation)
    except Stall as e:
        return Failure(stall=e)
    except Exception as e:  # the engine crashing on a schedule is a finding too
        return Failure(error=f"{type(e).__name__}: {e}")
    llm.trace.outputs = {r.request_id: list(r.output_token_ids) for r in llm.engine.finished}
    return None


def _diverged(llm, schedule: Schedule) -> Failure | None:
    """The first output token that is not the stand-in's greedy continuation."""
    cap = llm.scheduler_config.max_model_len  # a request stops there, whatever max_tokens says
    for req in sorted(llm.engine.finished, key=lambda r: r.request_id):
        length = min(schedule.max_tokens, cap - len(req.prompt_token_ids))
        want = greedy_continuation(req.prompt_token_ids, length, llm.arch)
        got = llm.trace.outputs[req.request_id]
        for i, (w, g) in enumerate(itertools.zip_longest(want, got)):
            if w != g:
                return Failure(divergence=(req.request_id, i, w, g))
    return None


def explore(engine_args: dict | None = None, scope: Scope | None = None, limit: int | None = None,
            workers: int = 1, invariants: bool = True, search_examples: int | None = None) -> ExploreResult:
    """Run every schedule in ``scope`` (default ``DEFAULT``), smallest first, under the design and
    switches in ``engine_args``; stop at the first failure. ``limit``: at most that many.
    ``workers``: processes sharing the runs (results are taken in order, so the failure found
    is still the smallest; its trace is recorded again in this process). ``invariants=False``:
    outputs compared with the greedy reference only (what a test of greedy equality sees).
    ``search_examples``: if every schedule ran clean, that many random ones from ``WIDE`` after
    them (``search``); None: 100 when no scope was given (the default answer), else none."""
    if search_examples is None:
        search_examples = 100 if scope is None else 0
    if not (is_int(search_examples) and search_examples >= 0):
        raise ValueError(f"search_examples={search_examples!r}: expected None or an integer >= 0")
    result = _explore(engine_args, scope, limit, workers, invariants)
    if result.counterexample is not None or not search_examples or not result.exhausted:
        return result
    wide = replace(WIDE, method=result.scope.method,
                   eagle_aux_hidden_state_layer_ids=result.scope.eagle_aux_hidden_state_layer_ids)
    more = search(result.engine_args, wide, max_examples=search_examples)
    return replace(result, schedules_run=result.schedules_run + more.schedules_run,
                   seconds=result.seconds + more.seconds, counterexample=more.counterexample,
                   covered=result.covered | more.covered, searched=more.schedules_run)


def _explore(engine_args, scope, limit, workers, invariants) -> ExploreResult:
    """``explore``'s run of the scope (None: ``DEFAULT`` as the design can run it), no search after."""
    engine_args = _check_engine_args(engine_args)  # the scope is checked against the checked dict
    scope = _check_scope(for_design(DEFAULT, engine_args) if scope is None else scope, engine_args)
    if not (is_int(workers) and workers >= 1):
        raise ValueError(f"workers={workers!r}: expected an integer >= 1")
    if not (limit is None or (is_int(limit) and limit >= 1)):
        raise ValueError(f"limit={limit!r}: expected None (every schedule) or an integer >= 1")
    start, count, covered = time.perf_counter(), 0, set()
    warned = tuple(warn_unreachable(engine_args, scope))
    todo = [replace(s, check_invariants=invariants) for s in itertools.islice(schedules(scope), limit)]
    with _runs(workers) as run_all:
        for schedule, (failed, reached) in zip(todo, run_all(functools.partial(_fails, engine_args=engine_args), todo)):
            count += 1
            covered |= reached
            if failed:
                with intra_op_threads():
                    found = run_one(schedule, engine_args)
                return ExploreResult(engine_args, scope, count, time.perf_counter() - start, found,
                                     covered=frozenset(covered), warnings=warned)
    return ExploreResult(engine_args, scope, count, time.perf_counter() - start,
                         exhausted=limit is None or count < limit, covered=frozenset(covered), warnings=warned)


WIDE = Scope(max_requests=4, prompt_lengths=tuple(range(1, 11)), max_tokens=tuple(range(2, 9)),
             arrival_steps=tuple(range(5)), right_drafts=(0, 1, 2, 3, SCRIPT_REPEAT), scripted_proposals=3,
             pipeline_parallel_size=(2, 3), num_speculative_tokens=(3,), max_concurrent_batches=(None, 1),
             num_gpu_blocks=(None, 4, 8, 12), max_num_batched_tokens=(512, 3, 8), max_num_seqs=(4, 2, 1),
             async_scheduling=(False, True))  # search's default: past exhaustion


def search(engine_args: dict | None = None, scope: Scope = WIDE, max_examples: int = 200,
           seed: int = 0) -> ExploreResult:
    """Random schedules from ``scope`` (hypothesis), the first failing one shrunk towards the
    smallest (fewer requests, earlier arrivals, shorter prompts, the first value of each
    tuple): for scopes too large to run whole. Up to ``max_examples`` schedules before shrinking."""
    try:
        import hypothesis
        from hypothesis import strategies as st
    except ImportError:
        raise ImportError("search needs hypothesis (the 'dev' extra: pip install 'minispec[dev]')") from None
    engine_args, count, start = _check_engine_args(engine_args), 0, time.perf_counter()
    scope = _check_scope(scope, engine_args)
    if not (is_int(max_examples) and max_examples >= 1):
        raise ValueError(f"max_examples={max_examples!r}: expected an integer >= 1")
    warned, covered = tuple(warn_unreachable(engine_args, scope)), set()
    choices = st.tuples(st.sampled_from(sorted(scope.arrival_steps)), st.sampled_from(sorted(scope.prompt_lengths)),
                        st.tuples(*[st.sampled_from(sorted(scope.right_drafts))]
                                  * scope.scripted_proposals * (scope.method == "scripted")))
    strategy = st.builds(_canonical, st.lists(choices, min_size=1, max_size=scope.max_requests),
                         st.sampled_from(sorted(scope.max_tokens)), st.sampled_from(scope.shapes()),
                         st.just(scope.block_size), st.just(scope.method),
                         st.just(scope.eagle_aux_hidden_state_layer_ids))

    def fails(schedule: Schedule) -> bool:
        nonlocal count
        count += 1
        failed, reached = _fails(schedule, engine_args)
        covered.update(reached)
        return failed

    settings = hypothesis.settings(max_examples=max_examples, database=None, deadline=None,
                                   suppress_health_check=list(hypothesis.HealthCheck))
    try:
        schedule = hypothesis.find(strategy, fails, settings=settings, random=random.Random(seed))
    except hypothesis.errors.NoSuchExample:
        return ExploreResult(engine_args, scope, count, time.perf_counter() - start, covered=frozenset(covered),
                             warnings=warned)
    with intra_op_threads():
        found = run_one(schedule, engine_args)
    return ExploreResult(engine_args, scope, count, time.perf_counter() - start, found, covered=frozenset(covered),
                         warnings=warned)


def _canonical(reqs, max_tokens, shape, block_size, method, taps) -> Schedule:
    """Requests in arrival order, the first arriving at step 0."""
    first = min(r[0] for r in reqs)
    return _schedule(sorted((a - first, n, script) for a, n, script in reqs), max_tokens, shape, block_size, method,
                     taps)


def _fails(schedule: Schedule, engine_args: dict) -> tuple[bool, frozenset[Condition]]:
    with intra_op_threads():  # one thread per process: these models are too small to share a core
        found, covered = run_covered(schedule, engine_args)
    return found is not None, covered


@contextlib.contextmanager
def _runs(workers: int):
    """``map`` in this process, or an ordered, lazy ``imap`` over a pool of ``workers`` processes."""
    if workers == 1:
        yield map
        return
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(workers) as pool:
        yield lambda fn, items: pool.imap(fn, items, chunksize=4)


def _check_engine_args(engine_args: dict | None) -> dict:
    """Refuse a bad design before any run: each run counts what the engine raises as a finding."""
    from minispec.engine.arg_utils import EngineArgs

    if engine_args is not None and not isinstance(engine_args, dict):
        raise ValueError(f"engine_args={engine_args!r}: expected a dict of the design's switches, "
                         f"keys among {DESIGN_KEYS} (e.g. {{'model_runner': 'v2'}})")
    engine_args = dict(engine_args or {})
    unknown = set(engine_args) - set(DESIGN_KEYS)
    if unknown:
        raise ValueError(f"engine_args={engine_args!r}: expected keys among {DESIGN_KEYS}, got {sorted(unknown)}")
    EngineArgs(model=STANDIN, **engine_args).create_engine_config()  # fixes, faults, worker_cls: each by name
    return engine_args


def _record(engine_args: dict):
    from minispec.v1.worker.designs import DESIGNS

    return DESIGNS.get(engine_args.get("model_runner") or "")


def drafting(engine_args: dict) -> str:
    """The proposer a design's schedules draft with: scripted, unless its record refuses it (a
    ``worker_cls`` design has no record and drafts scripted)."""
    design = _record(engine_args)
    return "ngram" if design is not None and not design.accepts("scripted") else "scripted"


def for_design(scope: Scope, engine_args: dict) -> Scope:
    """``scope`` as the design in ``engine_args`` can run it: with its drafter (``drafting``; n-gram
    has no scripts to vary) where its record refuses the scope's (``replicated`` drafts on every
    stage from the history alone)."""
    design = _record(engine_args)
    if design is None or design.accepts(scope.method):
        return scope
    method = drafting(engine_args)
    return replace(scope, method=method, right_drafts=(0,) if method == "ngram" else scope.right_drafts)


def _check_scope(scope, engine_args: dict) -> Scope:
    """A Scope whose drafter the design takes (refused before any run, with the design's reason
    and the scope that it takes); one whose drafter reads taps only on a design that can carry
    them at its largest PP (refused likewise, as the engine refuses it)."""
    from minispec.engine.arg_utils import EngineArgs

    if not isinstance(scope, Scope):
        raise ValueError(f"scope={scope!r}: expected a Scope (minispec.lab.explorer.explorer.Scope)")
    if for_design(scope, engine_args) != scope:
        raise ValueError(f"scope.method={scope.method!r}: the design {engine_args} drafts with "
                         f"{drafting(engine_args)!r} only; explore it with "
                         f"for_design(scope, engine_args), as explore does when no scope is given")
    if scope.eagle_aux_hidden_state_layer_ids:
        spec = {"method": "scripted", "num_speculative_tokens": min(scope.num_speculative_tokens),
                "eagle_aux_hidden_state_layer_ids": scope.eagle_aux_hidden_state_layer_ids}
        EngineArgs(model=STANDIN, pipeline_parallel_size=max(scope.pipeline_parallel_size), speculative_config=spec,
                   **engine_args).create_engine_config()
    return scope


def warn_unreachable(engine_args: dict, scope: Scope) -> list[str]:
    """A fault preset whose scenario needs what the scope never runs (async scheduling, more
    stages) would pass unseen: say so (``warnings.warn``) and return the sentences."""
    from minispec.lab.faults.catalogue import EVERY_FAULT

    name = engine_args.get("faults") or engine_args.get("fixes")
    fault = EVERY_FAULT.get(name) if isinstance(name, str) else None
    needs = []
    if fault is not None and fault.scenario.async_scheduling and True not in scope.async_scheduling:
        needs.append("async scheduling, which the scope never turns on (async_scheduling=(False,))")
    if fault is not None and fault.scenario.method == "eagle3" and not scope.eagle_aux_hidden_state_layer_ids:
        needs.append("a drafter reading EAGLE-3 taps, which the scope's proposer never reads "
                     "(eagle_aux_hidden_state_layer_ids=(); TAPS reads the shipped head's)")
    if fault is not None and fault.scenario.pipeline_parallel_size > max(scope.pipeline_parallel_size):
        needs.append(f"{fault.scenario.pipeline_parallel_size} stages, more than the scope's "
                     f"pipeline_parallel_size={scope.pipeline_parallel_size!r}")
    if fault is not None and fault.scenario.speculative_token_tree and scope.speculative_token_tree is None:
        needs.append("a tree of drafts, which the scope never drafts (speculative_token_tree=None)")
    sentences = [f"{fault.preset!r}: its scenario runs under {need}: the explorer cannot reach it" for need in needs]
    for sentence in sentences:
        warnings.warn(sentence, stacklevel=3)
    return sentences
