"""The relay design's switches: its faults from SGLang's 2026 reports, as ``faults=``
presets, and a learner's setting of them (minispec's own idea, as V2's
``gpu/runner_fixes.py``: SGLang ships each fix, never a switch). They belong to
``ModelRunner.RELAY``; replicated drafting reads none. ``PAIRING``: a payload is applied
to the micro-batch slot of the batch it reports (fault ``previous_forward_slot``).
``COMMIT_SEQ_LENS``: a non-last stage commits the relayed ``new_seq_lens`` (fault
``keep_optimistic_count``, a payload without them). Where each preset bites: ``FAULTS``
in ``minispec/lab/faults/catalogue.py``; the reports: ``docs/fidelity/relay.md``. (vLLM
0.30.0: ``vllm/v1/worker/gpu/pp_utils.py``, its nearest twin, the file V2's switches
switch.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minispec.v1.worker.switches import ModelRunner, Switch, SwitchPreset, SwitchSettings


def previous_forward_slot(ordinal: int, pp_size: int) -> int:
    """relay-pairing: the payload of a stage's ``ordinal``-th batch goes to micro-batch slot
    ``(ordinal - 2) % pp_size``, the slot before the one it is about to reuse: SGLang's
    ``(i - 1) % N`` where its loop means ``(i + 1) % N``. At N = 2 the two are the same slot."""
    return (ordinal - 2) % pp_size


def keep_optimistic_count(states, payload) -> None:
    """relay-no-seq-lens: nothing to commit; the stage keeps the count it advanced at its forward."""


PAIRING = Switch("pairing", ModelRunner.RELAY, previous_forward_slot)
COMMIT_SEQ_LENS = Switch("commit_seq_lens", ModelRunner.RELAY, keep_optimistic_count)


class RelayFaultPreset(SwitchPreset):
    """The relay design's ``faults=`` presets."""

    RELAY_PAIRING = "relay-pairing", (PAIRING,)
    RELAY_NO_SEQ_LENS = "relay-no-seq-lens", (COMMIT_SEQ_LENS,)


@dataclass(frozen=True, repr=False)
class RunnerFixes(SwitchSettings):
    """A learner's setting of each of the relay's switches (``fixes=RunnerFixes(...)``)."""

    SWITCHES = (PAIRING, COMMIT_SEQ_LENS)

    pairing: bool | Callable = True
    commit_seq_lens: bool | Callable = True
