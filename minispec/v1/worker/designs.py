"""The runner designs, one record each: everything the rest of minispec needs to know about
a design, so that the config, the engine, the executors, the command line and the
instruments ask the record and never test a design's name.

vLLM has two designs and one flag (vLLM 0.30.0: ``vllm/config/vllm.py``,
``VllmConfig.use_v2_model_runner``); minispec has four and room for more, so each answer
is a field of a ``Design``: its ``runner`` (a ``WorkerBase`` class or its qualified name),
its switches (``settings``, ``fixes_presets``, ``fault_presets``), its cadence under async
scheduling (``async_batches_in_flight``, ``decode_wait_batches``), whether its non-last
stages hear from the last over the pipeline group (``binds_pp_group``), the scheduler's
stale-output switch where its preset was checked (``stale_output``), and:

* ``proposers``: the ``speculative_config`` methods it accepts (None: every one), and why;
* ``can_carry_hidden_states`` (and ``hidden_states_why`` where not), ``can_carry_tree_drafts``
  (and ``tree_drafts_why``): whether its hand-over carries an EAGLE drafter's hidden states
  (V1 and V2, in the ``IntermediateTensors``), or what each stage needs to commit a tree's
  accepted path (V1, V2, relay: the accepted tokens, ``tree_kv.py``);
* ``must_keep``: the invariant (the checker's number) its hand-over must get right, and why;
* ``stale_output``: the scheduler's stale-output switch declared for it, else None;
* ``takes_padded_decodes``: whether a request's first step may be a decode padded with
  placeholder drafts, read from a fresh slot (V1's rows take the scheduler's values).

``DESIGNS`` maps each name to its record; ``register_design`` adds one from outside
minispec, after which ``model_runner="its-name"`` works wherever a design is named. A
record pickles (the "mp" workers get it in the ``VllmConfig``) as long as its runner is
importable by name. Left out: vLLM's automatic choice between its two designs. Fidelity
to vLLM: ``docs/fidelity/designs.md``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from minispec.v1.worker.gpu.runner_fixes import FaultPreset
from minispec.v1.worker.gpu.runner_fixes import RunnerFixes as RunnerFixesV2
from minispec.v1.worker.relay.runner_fixes import RelayFaultPreset
from minispec.v1.worker.relay.runner_fixes import RunnerFixes as RunnerFixesRelay
from minispec.v1.worker.runner_fixes import Preset, RunnerFixes, V1FaultPreset
from minispec.v1.worker.scheduler_switches import STALE_OUTPUT_V1, STALE_OUTPUT_V2
from minispec.v1.worker.switches import ModelRunner, Switch, SwitchPreset, SwitchSettings


def one_per_stage(pp: int) -> int:
    """V1 under async scheduling: one batch per stage, two without pipeline parallelism."""
    return 2 if pp == 1 else pp


def with_sampled_tokens(pp: int, async_scheduling: bool) -> bool:
    """V1 carries a tree where every stage learns the sampled tokens: one stage, or the last
    stage's broadcast under async scheduling (``pp_prev_sampled.py``)."""
    return pp == 1 or async_scheduling


def one_more_than_stages(pp: int) -> int:
    """Model Runner V2 under async scheduling (``config/vllm.py`` 593-594): ``pp_size + 1``."""
    return pp + 1


def no_wait(pp: int) -> int:
    """A decoding request may be scheduled into the very next batch (V1: its stages take the
    last stage's broadcast before they touch their rows, waiting for it if need be)."""
    return 0


def one_round(pp: int) -> int:
    """A decoding request waits ``pp_size`` batches (V2's ``next_decode_eligible_step``): by then
    its batch has left the last stage and every stage has what it sampled."""
    return pp


@dataclass(frozen=True)
class Design:
    """One runner design (see the module docstring for each field)."""

    name: str
    runner: type | str  # a WorkerBase subclass, or "module.Class"
    description: str
    settings: type[SwitchSettings] | None = None
    fixes_presets: type[SwitchPreset] | None = None
    fault_presets: type[SwitchPreset] | None = None
    async_batches_in_flight: Callable[[int], int] = one_per_stage
    decode_wait_batches: Callable[[int], int] = no_wait
    binds_pp_group: bool = True
    proposers: tuple[str, ...] | None = None
    proposers_why: str = ""  # why only those, for the refusal's message
    can_carry_hidden_states: bool = False
    hidden_states_why: str = "does not say its hand-over carries hidden states"  # the EAGLE refusal's reason
    can_carry_tree_drafts: bool | Callable[[int, bool], bool] = False  # or per (pp, async_scheduling)
    tree_drafts_why: str = "does not say its stages learn a tree's accepted path"  # the tree refusal's reason
    must_keep: tuple[int, str] | None = None
    stale_output: Switch | None = None  # the scheduler's switch, where the preset was checked on this design
    takes_padded_decodes: bool = False  # a first step of 1 + k tokens, its drafts read from the slot

    @property
    def runner_class(self) -> type:
        """The runner class, imported on first use when the record names it."""
        if not isinstance(self.runner, str):
            return self.runner
        module, _, name = self.runner.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def accepts(self, method: str) -> bool:
        return self.proposers is None or method in self.proposers

    def carries_tree(self, pp: int, async_scheduling: bool) -> bool:
        carries = self.can_carry_tree_drafts
        return carries(pp, async_scheduling) if callable(carries) else carries


# The invariants' numbers (minispec.instruments.invariants.Invariant): the engine's records name
# them as data, the instruments turn them into the checker's members.
DRAFT_AGREEMENT, TOKEN_HISTORY, SHARED_ACCOUNTING = 2, 3, 4

BUILT_IN = (
    Design(ModelRunner.V1, "minispec.v1.worker.gpu_model_runner.GPUModelRunner",
           "vLLM V1's GPUModelRunner: a persistent batch of rows, rebuilt from the scheduler's relay",
           settings=RunnerFixes, fixes_presets=Preset, fault_presets=V1FaultPreset, binds_pp_group=False,
           can_carry_hidden_states=True, can_carry_tree_drafts=with_sampled_tokens, stale_output=STALE_OUTPUT_V1,
           tree_drafts_why="learns the accepted drafts under synchronous pipeline parallelism from the scheduler's "
                           "count alone (fix 2 takes the first n drafts it ran), which names no path in a tree (it carries "
                           "one with async_scheduling=True, whose last stage broadcasts its sampled tokens, or at "
                           "pipeline_parallel_size=1)",
           must_keep=(DRAFT_AGREEMENT, "a re-added row gets its scheduled drafts (fix 1, July 2025)")),
    Design(ModelRunner.V2, "minispec.v1.worker.gpu.model_runner.GPUModelRunner",
           "vLLM's Model Runner V2: persistent slots, the last stage broadcasts what it sampled and drafted",
           settings=RunnerFixesV2, fault_presets=FaultPreset,
           async_batches_in_flight=one_more_than_stages, decode_wait_batches=one_round,
           can_carry_hidden_states=True, can_carry_tree_drafts=True, stale_output=STALE_OUTPUT_V2,
           takes_padded_decodes=True,
           must_keep=(SHARED_ACCOUNTING, "each non-last stage takes its rejected drafts back from the count it "
                      "advanced at its forward")),
    Design(ModelRunner.RELAY, "minispec.v1.worker.relay.model_runner.RelayModelRunner",
           "SGLang's relay: V2's slots, one payload relayed around the ring from the last stage",
           settings=RunnerFixesRelay, fault_presets=RelayFaultPreset,
           async_batches_in_flight=one_more_than_stages, decode_wait_batches=one_round,
           hidden_states_why="is SGLang's design, and SGLang refuses EAGLE-3 hidden-state capture under pipeline "
                             "parallelism (SGLang PR #39644)",
           can_carry_tree_drafts=True, takes_padded_decodes=True,
           must_keep=(TOKEN_HISTORY, "a payload is applied to the micro-batch it reports, not the previous "
                      "forward's (relay-pairing, from 3 stages)")),
    Design(ModelRunner.REPLICATED, "minispec.v1.worker.relay.replicated.ReplicatedDraftRunner",
           "replicated drafting: every stage drafts from its own history, only the accept result travels",
           async_batches_in_flight=one_more_than_stages, decode_wait_batches=one_round,
           proposers=("ngram",), proposers_why="drafts on every stage from the history alone",
           hidden_states_why="drafts on every stage, and a non-last stage never has the target's later layers' "
                             "hidden states an EAGLE head reads",
           tree_drafts_why="drafts on every stage with n-gram lookup, which has no ranked alternatives to branch on",
           takes_padded_decodes=True,
           must_keep=(DRAFT_AGREEMENT, "every stage drafts the same tokens from the same history: only a "
                      "proposer of the history alone")),
)

DESIGNS: dict[str, Design] = {d.name: d for d in BUILT_IN}


def register_design(design: Design) -> Design:
    """Add ``design`` to ``DESIGNS``; refused (nothing added) for a name already taken or a
    runner that is not a ``WorkerBase`` subclass. Returns it, so it can be unregistered."""
    from minispec.v1.worker.worker_base import WorkerBase

    if not isinstance(design, Design):
        raise TypeError(f"register_design({design!r}): expected a Design (minispec.v1.worker.designs)")
    if not (isinstance(design.name, str) and design.name):
        raise ValueError(f"Design name={design.name!r}: expected a non-empty string")
    if design.name in DESIGNS:
        raise ValueError(f"Design name={design.name!r}: a design of that name is registered already "
                         f"({DESIGNS[design.name].description}); expected a new name")
    try:
        runner = design.runner_class
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"Design {design.name!r} runner={design.runner!r}: cannot import it ({e})") from None
    if not (inspect.isclass(runner) and issubclass(runner, WorkerBase)):
        raise TypeError(f"Design {design.name!r} runner={design.runner!r}: expected a WorkerBase subclass "
                        "(minispec.v1.worker.worker_base) or its qualified name")
    DESIGNS[design.name] = design
    return design


def unregister_design(name: str) -> None:
    """Remove a design ``register_design`` added (the built-in ones stay)."""
    if name in {d.name for d in BUILT_IN}:
        raise ValueError(f"unregister_design({name!r}): a built-in design stays registered")
    DESIGNS.pop(name, None)


def get_design(model_runner) -> Design:
    """The record of ``model_runner`` (a name), or the error naming every registered design."""
    if isinstance(model_runner, str) and model_runner in DESIGNS:
        return DESIGNS[model_runner]
    raise ValueError(f"model_runner={model_runner!r}: expected one of {list(DESIGNS)} (or None: the default)")
