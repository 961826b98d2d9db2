"""The same bug, again: how pipeline stages learn what the last stage decided.

Under pipeline parallelism only the last stage samples and verifies drafts; every
other stage must learn exactly what it decided before it builds its next input.
This module holds, as plain data for the renderers of ``minispec.lab.viz.sync_timeline``
and ``minispec.lab.viz.sync_designs``:

* ``TIMELINE``: the designs built and the faults found in that hand-over, 2025-2026,
  each with the GitHub thread it is read from (every one checked in the thread's
  text; see notebook 09 for what each says);
* ``DESIGNS``: three designs of the hand-over, and who tells whom what after a step;
* ``THE_INVARIANT``: the invariants every such design must keep, as minispec numbers
  them (``minispec.instruments.invariants.Invariant``).

vLLM twin: none (references and a summary, not code).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum

from minispec.instruments.invariants import Invariant
from minispec.lab.records.threads import VLLM, Thread, ThreadState, thread


def vllm(number: int) -> Thread:
    """vLLM's thread ``number``, from the one table of threads."""
    return thread(VLLM, number)


class Lane(StrEnum):
    """Which runner or project a milestone belongs to (a row of the timeline figure)."""

    V1 = "vLLM V1 runner"
    V2 = "vLLM Model Runner V2"
    SGLANG = "SGLang"
    ASCEND = "vllm-ascend (V2)"


class Kind(StrEnum):
    DESIGN = "a design built"
    FAULT = "a fault found, with its fix"


class State(StrEnum):
    MERGED = "merged"
    OPEN = "open, not merged"  # proposed, not merged when the thread was read


@dataclass(frozen=True)
class Milestone:
    when: date  # the month shown: its thread's first post cited, or an earlier one that dates the finding
    lane: Lane
    kind: Kind
    what: str
    refs: tuple[Thread, ...]  # from the table (minispec.lab.records.threads), first the one that dates it

    @property
    def state(self) -> State:
        """Its first thread's state in the table."""
        return State.MERGED if self.refs[0].state is ThreadState.MERGED else State.OPEN


TIMELINE: tuple[Milestone, ...] = (
    Milestone(date(2025, 2, 15), Lane.V1, Kind.DESIGN,
              "the scheduler relays `new_token_ids` to the runners, so non-last ranks get their input tokens: "
              "one token per decode, the relay of fault 2", (vllm(13339),)),
    Milestone(date(2026, 2, 6), Lane.V2, Kind.DESIGN,
              "pipeline parallelism for Model Runner V2: a `PPHandler`; the last rank broadcasts "
              "`sampled_token_ids`, `num_sampled`, `num_rejected`, the others receive and post-process",
              (vllm(33960),)),
    Milestone(date(2026, 4, 14), Lane.V2, Kind.FAULT,
              "under PD disaggregation (a slot whose first step is a decode, not a stage hand-over), a slot's "
              "previous request leaks stale `last_sampled_tokens` and `draft_tokens` into a new request's first "
              "decode: fault 1's shape, in slots", (vllm(39833),)),
    Milestone(date(2026, 4, 28), Lane.V1, Kind.FAULT,
              "non-last ranks write relayed tokens at the wrong offset: the fix writes at `num_tokens_no_spec`",
              (vllm(41133),)),
    Milestone(date(2026, 5, 9), Lane.V2, Kind.DESIGN,
              "avoiding pipeline bubbles; an automated reviewer flags a possible off-by-one in which requests "
              "get their sampled tokens broadcast", (vllm(42187),)),
    Milestone(date(2026, 6, 5), Lane.V1, Kind.FAULT,
              "non-last ranks advance `num_computed_tokens` optimistically and never take the rejected drafts "
              "back: \"one invariant behind all of it\"", (vllm(44697), vllm(44698))),
    # Dated by RFC #44697's comment of 2026-06-29, which lists the width fault: the PR was open by then.
    Milestone(date(2026, 6, 29), Lane.V2, Kind.FAULT,
              "a sampled-token broadcast of `[n, 1]` into a receive posted for `[n, max_sample_len]` deadlocks "
              "under NCCL, and drafts never reach non-last ranks (reported and confirmed there)", (vllm(46994),)),
    Milestone(date(2026, 7, 10), Lane.SGLANG, Kind.DESIGN,
              "pipeline parallelism with speculative decoding: drafts only on the last stage, and a relay payload "
              "of accept lengths, new sequence lengths, bonus token and next draft tree around the ring",
              (thread("sgl-project/sglang", 30775),)),
    # Dated by its description (2026-07-31), which lists both; the first comment is of 2026-08-04.
    Milestone(date(2026, 7, 31), Lane.V2, Kind.FAULT,
              "the fix of #46994's two faults: the last rank broadcasts its draft proposals, and the sampled tokens "
              "go out at one fixed width on every rank (in 0.30.0, not in 0.29.0)", (vllm(50514),)),
    Milestone(date(2026, 8, 14), Lane.V2, Kind.FAULT,
              "non-last ranks keep stale or zero-initialised draft tokens; the fix carries next-step drafts with "
              "the sampled-token broadcast", (vllm(52295),)),
    Milestone(date(2026, 8, 28), Lane.ASCEND, Kind.FAULT,
              "non-last ranks build sequence lengths from a `num_computed_tokens` never reverted after a "
              "rejection", (thread("vllm-project/vllm-ascend", 15171),)),
    Milestone(date(2026, 8, 30), Lane.V2, Kind.FAULT,
              "#42187's flagged concern was real in another form: a decoding request dropped from the broadcast "
              "froze earlier stages' slots", (vllm(54436),)),
)


@dataclass(frozen=True)
class Message:
    """What one party tells another after a step (a party: "scheduler" or a stage's name)."""

    sender: str
    receiver: str
    what: str
    values: bool  # True: token values; False: counts only (how many, not which)


@dataclass(frozen=True)
class Design:
    name: str
    ref: Thread
    drafts_on: str  # which stage proposes the next drafts
    state: str  # where a non-last stage keeps what it knows of a request
    rebuild: str  # what a non-last stage does with what it is told
    messages: tuple[Message, ...]


STAGES = ("stage 0", "stage 1", "last stage")  # three stages: the ring needs one in the middle
_FIRST, _MIDDLE, _LAST = STAGES

DESIGNS: tuple[Design, ...] = (
    Design(
        "vLLM V1 runner", vllm(13339), "the last stage (then the scheduler holds them)",
        "a row of its persistent batch, and a copy of the request (CachedRequestState)",
        "rebuilds or extends its row from the scheduler's output",
        (Message(_LAST, "scheduler", "sampled tokens, next drafts", True),
         Message("scheduler", _FIRST, "new_token_ids: one token per decode (without async scheduling); the drafts",
                 True),
         Message("scheduler", _MIDDLE, "the same", True),
         # vLLM 0.30.0 vllm/v1/core/sched/scheduler.py 1633-1636: with async scheduling the
         # scheduler omits new_token_ids, and the runners take a GPU broadcast instead.
         Message(_LAST, _FIRST, "with async scheduling (PR #32618): the sampled tokens, broadcast", True),
         Message(_LAST, _MIDDLE, "the same broadcast", True)),
    ),
    Design(
        "vLLM Model Runner V2", vllm(33960), "the last stage",
        "a slot (req_idx): all_token_ids, last_sampled_tokens, draft_tokens, num_computed_tokens",
        "applies the broadcast to its slots, then builds its input from them",
        (Message(_LAST, "scheduler", "sampled tokens, next drafts", True),
         Message("scheduler", _FIRST, "what it reads: counts of tokens and drafts to run (vLLM's scheduler still "
                 "sends new_token_ids without async scheduling, and the drafts)", False),
         Message("scheduler", _MIDDLE, "the same", False),
         Message(_LAST, _FIRST, "sampled_tokens, num_sampled, num_rejected, next draft_tokens", True),
         Message(_LAST, _MIDDLE, "the same broadcast", True)),
    ),
    Design(
        "SGLang (PP x spec)", thread("sgl-project/sglang", 30775), "the last stage",
        "its own request state, advanced from the relay",
        "applies the relay payload, forwards it to the next stage",
        (Message(_LAST, _FIRST, "relay: accept_lens, new_seq_lens, bonus_token, next draft tree", True),
         Message(_FIRST, _MIDDLE, "the relay, passed on", True),
         Message(_MIDDLE, _LAST, "the relay, passed on", True)),
    ),
)

# What every design must keep: before a non-last stage builds a request's next input,
# its state for the request equals what the last stage decided. minispec checks it as
# three invariants of a stage against the scheduler (which holds the decided truth).
THE_INVARIANT: tuple[Invariant, ...] = (Invariant.TOKEN_HISTORY, Invariant.DRAFT_AGREEMENT, Invariant.SHARED_ACCOUNTING)
