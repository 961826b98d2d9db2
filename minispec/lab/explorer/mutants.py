"""Single-point protocol mutants of the two runner designs, and how the explorer and vLLM's
acceptance rule fare against each: the mutation benchmark's catalogue (``benchmarks/bench_mutants.py``).

vLLM twin: none. Each mutant changes one thing in one design's protocol (V1's
``GPUModelRunner``, ``model_runner="v1"``; Model Runner V2, ``"v2"``), modelled on a fault
reported upstream (``Mutant.reference``) or a slip of the same kind. It is applied only
inside ``applied(mutant)``, a scoped monkeypatch (``unittest.mock.patch.object``) that puts
the original back on exit, whatever happened; nothing is written to disk. Two kinds:

* ``SwitchSet``: one of the switchboard's switches (``minispec.v1.worker.switches``) set to
  its fault or to a function below, by patching ``Switches.pick`` so that a runner built
  inside the scope gets it wherever that switch was left at its fix (a preset or a
  learner's ``RunnerFixes`` given explicitly still wins);
* ``Edit``: one line of one function's source changed (``old`` must occur exactly once);
  the function is recompiled from its own source, in its own module's globals, and patched
  in where the runner looks it up. A mutant is therefore readable as a one-line diff.

``MUTANTS`` is the catalogue; ``explorer_catch`` and ``acceptance_catch`` measure one kind of
test against one mutant (a ``Catch``), as notebook 06 does on a few. The benchmark's table, its
project-suite column and that column's pytest plugin live beside it, outside the package
(``benchmarks/bench_mutants.py``, ``benchmarks/mutant_plugin.py``).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from unittest import mock

from minispec.v1.worker import gpu_input_batch, gpu_model_runner
from minispec.v1.worker.gpu import input_batch as v2_input_batch
from minispec.v1.worker.gpu import model_runner as v2_runner
from minispec.v1.worker.gpu import pp_utils, states
from minispec.v1.worker.gpu.runner_fixes import APPLY_DRAFTS, LIVE_ROWS, NUM_REJECTED_ON_APPLY, SAMPLE_WIDTH
from minispec.v1.worker.runner_fixes import MOVE_ROW, READD_SPEC_TOKENS, SYNC_ACCEPTED_TOKENS, take_accepted_drafts
from minispec.v1.worker.switches import ModelRunner, Switch, Switches

V1Runner, V2Runner = gpu_model_runner.GPUModelRunner, v2_runner.GPUModelRunner
InputBatch = gpu_input_batch.InputBatch


# -- the functions a few V1 mutants plug into the switchboard -----------------------
def drafts_one_short(runner, row, spec_token_ids):
    """A re-added row is given all but its last draft (a slice off by one)."""
    V1Runner._write_spec_tokens(runner, row, spec_token_ids[:-1])


def drafts_one_late(runner, row, spec_token_ids):
    """A re-added row's drafts written one slot late (from num_tokens_no_spec + 1)."""
    runner.input_batch.num_tokens_no_spec[row] += 1
    V1Runner._write_spec_tokens(runner, row, spec_token_ids)
    runner.input_batch.num_tokens_no_spec[row] -= 1


def relay_one_short(state, num_computed_tokens, new_token_ids):
    """The accepted drafts recovered, the relayed token dropped (a relay sliced by one)."""
    return take_accepted_drafts(state, num_computed_tokens, new_token_ids)[:-1] or list(new_token_ids)


def relay_twice(state, num_computed_tokens, new_token_ids):
    """The relayed token appended twice (a message posted twice)."""
    return take_accepted_drafts(state, num_computed_tokens, new_token_ids) + list(new_token_ids[-1:])


def move_without_drafts(batch, src: int, tgt: int) -> None:
    """condense moves a row's history but leaves its draft slots behind (num_tokens as no_spec)."""
    drafts = batch.num_tokens[src] - batch.num_tokens_no_spec[src]
    batch.num_tokens[src] -= drafts
    InputBatch._move_row(batch, src, tgt)
    batch.num_tokens[tgt] += drafts


# -- the two kinds of change ----------------------------------------------------------
@dataclass(frozen=True)
class SwitchSet:
    """``switch`` runs ``function`` (None: the switch's own fault) wherever it was left at its fix."""

    switch: Switch
    function: Callable | None = None

    def patches(self):
        target, function = self.switch, self.function or self.switch.fault
        original = Switches.pick

        def pick(switches: Switches, switch: Switch, fix: Callable) -> Callable:
            if switch is target and switch not in switches.chosen:
                return function
            return original(switches, switch, fix)

        return [mock.patch.object(Switches, "pick", pick)]

    def diff(self) -> str:
        function = self.function or self.switch.fault
        return f"switch {self.switch.name} -> {function.__name__}"


@dataclass(frozen=True)
class Edit:
    """In the function ``owner.name`` (a class's method or a module's function), the text
    ``old`` (found exactly once in its source) becomes ``new``."""

    owner: type | types.ModuleType
    name: str
    old: str
    new: str

    def mutated(self):
        """The function recompiled with the edit, in its module's globals (decorators and all)."""
        static = inspect.getattr_static(self.owner, self.name)
        function = static.__func__ if isinstance(static, staticmethod) else static
        source = textwrap.dedent(inspect.getsource(function))
        if source.count(self.old) != 1:
            raise ValueError(f"Edit of {self.where}: expected {self.old!r} exactly once in its source, "
                             f"found it {source.count(self.old)} times (has the code changed?)")
        namespace: dict = {}
        code = compile(source.replace(self.old, self.new), f"<mutant of {self.where}>", "exec")
        exec(code, function.__globals__, namespace)  # noqa: S102 -- the repository's own source, one edit
        return namespace[function.__name__]

    @property
    def where(self) -> str:
        owner = self.owner.__name__ if isinstance(self.owner, types.ModuleType) else self.owner.__qualname__
        return f"{owner}.{self.name}"

    def patches(self):
        """A module's function is patched where it is defined and in every minispec module
        that imported it by name, since each looks it up in its own globals."""
        mutated, original = self.mutated(), inspect.getattr_static(self.owner, self.name)
        owners = [self.owner]
        if isinstance(self.owner, types.ModuleType):
            owners += [module for name, module in sorted(sys.modules.items())
                       if name.startswith("minispec.") and module is not self.owner
                       and getattr(module, self.name, None) is original]
        return [mock.patch.object(owner, self.name, mutated) for owner in owners]

    def diff(self) -> str:
        return f"{self.where}: `{self.old}` -> `{self.new}`"


@dataclass(frozen=True)
class Mutant:
    name: str
    design: ModelRunner
    change: SwitchSet | Edit
    slip: str  # what goes wrong, in the workshop's words
    reference: str = ""  # the reported fault it is modelled on ("" : a slip of the same kind)

    @property
    def engine_args(self) -> dict:
        """What the explorer and ``LLM`` take to run this mutant's design (the change itself is
        applied by ``applied``)."""
        return {"model_runner": self.design.value}


@contextlib.contextmanager
def applied(mutant: Mutant):
    """Apply ``mutant`` for the duration of the block; everything is put back on exit.
    Runners built inside the block carry the mutant (a ``SwitchSet`` is read when a runner is
    built, an ``Edit`` on every call)."""
    with contextlib.ExitStack() as stack:
        for patch in mutant.change.patches():
            stack.enter_context(patch)
        yield mutant



STEP_LIMIT = 200  # engine steps; the explorer's schedules and the thread's scenario need under 100


@contextlib.contextmanager
def step_limit(limit: int = STEP_LIMIT):
    """An engine that runs past ``limit`` steps raises: a mutant can leave a request that never
    finishes (a last rank that never samples), and the engine would step forever where a
    test's timeout would have stopped it."""
    from minispec.v1.engine.core import EngineCore

    steps = EngineCore._engine_step_events

    def guarded(engine):
        if engine.engine_step > limit:
            raise RuntimeError(f"engine step {engine.engine_step}: requests still unfinished after {limit} steps")
        return steps(engine)

    with mock.patch.object(EngineCore, "_engine_step_events", guarded):
        yield


V1, V2 = ModelRunner.V1, ModelRunner.V2
_VERIFY = "verified_drafts = [input_ids_np[e - d : e].tolist()"
MUTANTS: tuple[Mutant, ...] = (
    # V1: the July-2025 faults, and slips at their seams
    Mutant("v1-readd-no-drafts", V1, SwitchSet(READD_SPEC_TOKENS), "a re-added row gets no drafts (fault 1)",
           "the forum thread, vLLM 0.9.2; fixed by #31944"),
    Mutant("v1-relay-sliced", V1, SwitchSet(SYNC_ACCEPTED_TOKENS),
           "accepted drafts never reach non-last ranks (fault 2)", "the forum thread, vLLM 0.9.2 to 0.14"),
    Mutant("v1-drafts-one-short", V1, SwitchSet(READD_SPEC_TOKENS, drafts_one_short), drafts_one_short.__doc__),
    Mutant("v1-drafts-one-late", V1, SwitchSet(READD_SPEC_TOKENS, drafts_one_late), drafts_one_late.__doc__),
    Mutant("v1-relay-one-short", V1, SwitchSet(SYNC_ACCEPTED_TOKENS, relay_one_short), relay_one_short.__doc__),
    Mutant("v1-relay-twice", V1, SwitchSet(SYNC_ACCEPTED_TOKENS, relay_twice), relay_twice.__doc__),
    Mutant("v1-move-without-drafts", V1, SwitchSet(MOVE_ROW, move_without_drafts), move_without_drafts.__doc__),
    Mutant("v1-drafts-gated-by-rank", V1,
           Edit(V1Runner, "_update_cached_request", "self._write_spec_tokens(row, self.spec_decode_tokens",
                "self.is_last_rank or self._write_spec_tokens(row, self.spec_decode_tokens"),
           "an in-batch row's drafts are written on non-last ranks only", "#20530"),
    Mutant("v1-relay-guard-inclusive", V1,
           Edit(V1Runner, "_append_relayed_tokens", "> state.num_tokens:", ">= state.num_tokens:"),
           "a non-last rank appends the relay even when nothing is missing (posted twice)", "#20247"),
    Mutant("v1-relay-one-slot-late", V1,
           Edit(V1Runner, "_write_relayed_tokens", "batch.token_ids_cpu[row, num_computed:end]",
                "batch.token_ids_cpu[row, num_computed + 1:end + 1]"),
           "a non-last rank writes the relayed tokens one slot late", "#41133"),
    Mutant("v1-resumed-blocks-appended", V1,
           Edit(V1Runner, "_update_cached_request", "if cached.resumed_from_preemption[i]:", "if False:"),
           "a resumed request's new blocks are appended to its freed ones, not put in their place", "#46595"),
    Mutant("v1-new-blocks-dropped", V1,
           Edit(V1Runner, "_update_cached_request", "batch.block_table.append_row(new_block_ids, row)", "None"),
           "a row that stays is not given the blocks allocated to it this step"),
    Mutant("v1-num-computed-not-updated", V1,
           Edit(V1Runner, "_update_cached_request", "batch.num_computed_tokens_cpu[row] = num_computed", "None"),
           "a row that stays keeps last step's num_computed_tokens: a rejection is never taken back"),
    Mutant("v1-drafts-not-kept", V1,
           Edit(V1Runner, "_update_states", "self.requests[req_id].spec_token_ids = list(drafts)", "None"),
           "a stage forgets the drafts it was given, so fix 2 has nothing to recover from"),
    Mutant("v1-verify-one-early", V1,
           Edit(V1Runner, "_prepare_inputs", _VERIFY, "verified_drafts = [input_ids_np[e - d - 1 : e - 1].tolist()"),
           "the drafts to verify are read back one position early"),
    Mutant("v1-sampled-after-drafts", V1,
           Edit(V1Runner, "_sample_and_propose", "start = batch.num_tokens_no_spec[row]",
                "start = batch.num_tokens[row]"),
           "the last rank writes sampled tokens after the draft slots, not over them"),
    Mutant("v1-readd-without-outputs", V1,
           Edit(InputBatch, "add_request", "self.token_ids_cpu[row, n_prompt:end] = request.output_token_ids",
                "None"),
           "a re-added row gets its prompt but not its outputs (stale tokens in their place)", "#26385"),
    Mutant("v1-readd-stale-num-computed", V1,
           Edit(InputBatch, "add_request", "self.num_computed_tokens_cpu[row] = request.num_computed_tokens",
                "None"),
           "a (re-)added row keeps the num_computed_tokens of its row's previous occupant"),
    # V2: the 2026 faults, and slips at their seams
    Mutant("v2-stale-drafts", V2, SwitchSet(APPLY_DRAFTS), "non-last ranks never apply the broadcast drafts",
           "#52295"),
    Mutant("v2-optimistic-num-computed", V2, SwitchSet(NUM_REJECTED_ON_APPLY),
           "non-last ranks never take back the rejected part of the optimistic advance",
           "RFC #44697, vllm-ascend #15171"),
    Mutant("v2-slot-reuse", V2, SwitchSet(LIVE_ROWS), "the slot generation check dropped", "#39833"),
    Mutant("v2-broadcast-width", V2, SwitchSet(SAMPLE_WIDTH), "a batch without drafts broadcast at width 1",
           "#46994"),
    Mutant("v2-generation-not-bumped", V2,
           Edit(pp_utils.PPHandler, "on_req_idx_freed", "self.req_idx_gen_np[req_idx] += 1", "None"),
           "a freed slot's generation is never bumped (the check kept, its counter dead)", "#39833"),
    Mutant("v2-advance-without-drafts", V2,
           Edit(v2_input_batch, "post_update_num_computed_tokens", "+= batch.num_scheduled_tokens",
                "+= batch.num_scheduled_tokens - batch.num_draft_tokens_per_req"),
           "a non-last rank's optimistic advance leaves out the drafts, then takes the rejected ones back too",
           "vllm-ascend #15171"),
    Mutant("v2-rollback-twice", V2,
           Edit(v2_input_batch, "post_update", "query_len - int(num_rejected[i])", "query_len - 2 * int(num_rejected[i])"),
           "the rejected drafts are taken back twice from num_computed_tokens"),
    Mutant("v2-first-sample-embedded", V2,
           Edit(v2_input_batch, "post_update", "sampled_tokens[i, n - 1]", "sampled_tokens[i, 0]"),
           "last_sampled_tokens takes the first token sampled, not the last (a slice at the wrong end)"),
    Mutant("v2-drafts-keyed-by-row", V2,
           Edit(V2Runner, "sample_tokens", "draft_tokens[batch.idx_mapping_np]", "draft_tokens[: batch.num_reqs]"),
           "the drafts broadcast are read by batch row instead of by the request's slot"),
    Mutant("v2-newest-broadcast-first", V2,
           Edit(pp_utils.PPHandler, "get_prev_sampled_outputs", "self.queue.popleft()", "self.queue.pop()"),
           "a non-last rank applies pending broadcasts newest first", "#52179"),
    Mutant("v2-last-chunk-not-sampled", V2,
           Edit(pp_utils, "compute_need_sampled_mask", "batch.num_scheduled_tokens >= batch.prefill_len_np",
                "batch.num_scheduled_tokens > batch.prefill_len_np"),
           "a prefill's last chunk is left out of the broadcast (on every rank alike)", "#54436"),
    Mutant("v2-resumed-blocks-kept", V2,
           Edit(V2Runner, "_resume", "num_computed, max_tokens, block_ids)",
                "num_computed, max_tokens, self.block_tables.block_table_np[old, : self.block_tables."
                "num_blocks_per_row[old]].tolist())"),
           "a resumed request's slot gets its old blocks, not the ones it was given on resuming", "#46595"),
    Mutant("v2-stayed-blocks-dropped", V2,
           Edit(V2Runner, "update_requests", "self.block_tables.append_row(cached.new_block_ids[i], index[req_id])",
                "None"),
           "a cached request is not given the blocks allocated to it this step"),
    Mutant("v2-mirror-overwrites-count", V2,
           Edit(V2Runner, "update_requests", "self.req_states.num_computed_tokens_np[index[req_id]]",
                "self.req_states.num_computed_tokens[index[req_id]]"),
           "the scheduler's num_computed_tokens overwrites the runner's own count (V1's habit)"),
    Mutant("v2-drafts-not-cleared", V2,
           Edit(states.RequestState, "add_request", "self.draft_tokens[req_idx] = 0", "None"),
           "a new slot keeps its previous occupant's drafts", "#39833"),
)


def mutant(name: str) -> Mutant:
    for m in MUTANTS:
        if m.name == name:
            return m
    raise KeyError(f"mutant {name!r}: expected one of {[m.name for m in MUTANTS]}")


# -- what a kind of test says about a mutant ------------------------------------------
@dataclass(frozen=True)
class Catch:
    """One kind of test against one mutant: caught or not, and how it reads in the table."""

    caught: bool
    detail: str  # "2 req, 3 steps, schedule 26, 0.7 s", "92% vs 95%", "test_x::test_y, 40 s"


def explorer_catch(m: Mutant, scope=None, invariants: bool = True) -> Catch:
    """The explorer on ``m``'s design with ``m`` applied: the minimal counterexample's size and
    the time to find it (``invariants=False``: outputs against the greedy reference only)."""
    from minispec.lab.explorer.explorer import explore

    with applied(m), step_limit():
        result = explore(m.engine_args, scope, invariants=invariants)
    if result.counterexample is None:
        return Catch(False, f"{result.schedules_run} schedules, {result.seconds:.0f} s")
    s, failure = result.counterexample.schedule, result.counterexample.failure
    seen = (f"invariant {failure.violation.invariant.value}" if failure.violation else
            "output" if failure.divergence else str(failure.stall.kind) if failure.stall else "raises")
    return Catch(True, f"{len(s.requests)} req, {max(s.arrival_steps) + s.max_tokens} steps, {seen} "
                       f"(schedule {result.schedules_run}), {result.seconds:.1f} s")


def acceptance_catch(m: Mutant) -> Catch:
    """vLLM's end-to-end rule (vLLM 0.33.0 ``tests/v1/e2e/spec_decode/eagle/test_eagle3_pp.py``
    19-59: the acceptance length at PP 2 and 4 at least 0.95 of PP 1's, and above 1), here at
    PP 2 on the forum thread's four requests with the shipped models, ``m`` applied to both
    runs. Acceptance length as vLLM's ``compute_acceptance_len`` (``tests/v1/e2e/spec_decode/utils.py``
    213-231): 1 + accepted tokens per draft proposal, every proposal taken as k drafts."""
    from minispec.lab.experiments.scenarios import thread_schedule
    from minispec.lab.experiments.schedule import build_llm, run_recorded

    lengths = []
    with applied(m), step_limit():
        for pp in (1, 2):
            schedule = replace(thread_schedule(), pipeline_parallel_size=pp)
            try:
                stats = run_recorded(build_llm(schedule, **m.engine_args)).stats
            except Exception as e:  # a crash fails any test
                return Catch(True, f"PP {pp} raised {type(e).__name__}")
            lengths.append(1 + schedule.num_speculative_tokens * stats["acceptance_rate"])
    caught = lengths[1] < 0.95 * lengths[0] or min(lengths) <= 1
    return Catch(caught, f"{lengths[1]:.2f} vs {lengths[0]:.2f}")
