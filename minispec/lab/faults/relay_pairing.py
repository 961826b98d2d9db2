"""Which batch's rows each relayed payload is applied to, on a non-last stage of the relay
design (``model_runner="relay"``), with and without the fault preset ``relay-pairing``:
the data of the "masked at PP = 2" figure (``minispec.lab.viz.pairing``).

A non-last stage runs its ``c``-th batch in micro-batch slot ``c % N`` (N = pp_size stages)
and remembers the batch's rows there. The payload that reports batch ``c`` comes back
around the ring later; the stage applies it to the rows of a slot: the engine's
``mb_slot`` (``c % N``, the batch it reports), or, under the fault, ``previous_forward_slot``
(``(c - 2) % N``, SGLang PR #40001's pairing). Both are the engine's own functions
(``minispec/v1/worker/relay/pp_relay.py``, ``runner_fixes.py``), called here, not rewritten.

By then the stage has run later batches, and a slot holds the newest batch it ran there.
``pairings`` places the take where the relay handler takes a payload at the latest: just
before the stage runs batch ``c + N``, which would reuse batch ``c``'s slot
(``RelayHandler.get_prev_sampled_outputs``). At N = 2, ``(c - 2) % 2 == c % 2``: the wrong
slot is the right one, and holds batch ``c``. At N = 3 it holds batch ``c + 1``.
``tests/test_relay_pairing.py`` checks this against what the engine's handler applies.

No vLLM twin (SGLang's loop: ``python/sglang/srt/managers/scheduler_pp_mixin.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minispec.v1.worker.relay.pp_relay import mb_slot
from minispec.v1.worker.relay.runner_fixes import previous_forward_slot

Pairing = Callable[[int, int], int]  # (batch ordinal, pp_size) -> micro-batch slot


@dataclass(frozen=True)
class Paired:
    """One payload on one non-last stage: the batch it reports and the batch it is applied to."""

    batch: int  # the ordinal of the batch the payload reports, on this stage
    slot: int  # that batch's micro-batch slot
    applied_slot: int  # the slot the payload is applied to
    applied_batch: int | None  # the batch that slot holds then (None: none ran there yet)

    @property
    def right(self) -> bool:
        return self.applied_batch == self.batch


def held(slot: int, last_run: int, pp_size: int) -> int | None:
    """The newest batch ordinal ``<= last_run`` run in ``slot`` (slot ``b % pp_size`` for batch ``b``)."""
    newest = last_run - (last_run - slot) % pp_size
    return newest if newest >= 0 else None


def pairings(pp_size: int, num_batches: int, faulty: bool) -> tuple[Paired, ...]:
    """Each of the first ``num_batches`` payloads of a stage, paired as the relay handler pairs
    them (``faulty``: under ``relay-pairing``), taken just before batch ``c + pp_size`` runs."""
    if not (isinstance(pp_size, int) and pp_size >= 2):
        raise ValueError(f"pairings: pp_size={pp_size!r}: expected an int >= 2 (one stage relays nothing)")
    if not (isinstance(num_batches, int) and num_batches >= 1):
        raise ValueError(f"pairings: num_batches={num_batches!r}: expected an int >= 1")
    pairing: Pairing = previous_forward_slot if faulty else mb_slot
    return tuple(Paired(c, mb_slot(c, pp_size), pairing(c, pp_size), held(pairing(c, pp_size), c + pp_size - 1,
                                                                          pp_size))
                 for c in range(num_batches))
