"""The in-flight family (issue 22 §3): the pipeline-parallel × speculative-decoding faults
of June to September 2026 that are about batches still in flight, each checked in its
thread and, where a release holds the code, in the release source; and what became of
it here (``FAMILY``).

Async scheduling lets the scheduler run a step ahead with placeholders, Model Runner V2
keeps ``pp_size + 1`` batches in flight under it (vLLM 0.30.0 ``vllm/config/vllm.py``
589-599), and every message between stages must then say which step it belongs to. Each
candidate below says which runner design it belongs to (``designs``: the scheduler's
faults belong to both; SGLang's to neither, minispec's relay design being another part of
the project), whether it needs async scheduling, and its outcome:

* ``PRESET``: a fault preset puts it back (``EVERY_FAULT`` in ``catalogue.py`` holds its
  scenario and the first thing that goes wrong; V1's three under PP + async scheduling, in
  ``V1_FAULTS``, were waiting for V1's broadcast of the previous sampled tokens, the code they
  break, until ``minispec/v1/worker/pp_prev_sampled.py``);
* ``SAME_AS``: it leaves the stages in the state an existing preset already reproduces;
* ``NOT_HERE``: the code it breaks is not in minispec;
* ``HANDLED``: the code is here and does what upstream's fix does, and a test says so.

Every thread cited is in ``minispec.lab.records.threads`` with the date and the
sentence it rests on; the release lines are from reading the code. vLLM twin: none.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from minispec.v1.worker.gpu.runner_fixes import FaultPreset
from minispec.v1.worker.runner_fixes import V1FaultPreset
from minispec.v1.worker.switches import ModelRunner

V1, V2 = ModelRunner.V1, ModelRunner.V2


class Outcome(StrEnum):
    PRESET = "a fault preset"
    SAME_AS = "the state an existing preset reproduces"
    NOT_HERE = "the code it breaks is not in minispec"
    HANDLED = "the code is here and does what upstream's fix does"


@dataclass(frozen=True)
class Candidate:
    reference: str  # the threads
    what: str  # what went wrong, as the threads show it
    designs: tuple[ModelRunner, ...]  # () for a design minispec has not
    needs_async: bool
    source: str  # the release lines of the fix, or why there are none
    outcome: Outcome
    preset: FaultPreset | V1FaultPreset | None = None  # for PRESET and SAME_AS

    def __post_init__(self):
        if (self.preset is not None) != (self.outcome in (Outcome.PRESET, Outcome.SAME_AS)):
            raise ValueError(f"{self.reference}: outcome {self.outcome.name} with preset={self.preset!r}: a preset is "
                             "expected exactly for PRESET and SAME_AS")


FAMILY: tuple[Candidate, ...] = (
    Candidate(
        "vLLM #57755 (open, 2026-09-20); its author's measurements on a vLLM 0.28.0 base in "
        "syv-ai/qwen38-27b-rtx3090#160 (open, 2026-09-20)",
        "V1 under PP + async broadcasts the previous sampled tokens at width 1, which speculative decoding never has; "
        "broadcasting column 0 instead boots but corrupts output silently, and MTP acceptance under PP 2 is 8 % "
        "against 45.6 % under TP 2",
        (V1,), True,
        "see V1_FAULTS[V1FaultPreset.V1_PP_ASYNC_COLUMN_0].source",
        Outcome.PRESET, V1FaultPreset.V1_PP_ASYNC_COLUMN_0,
    ),
    Candidate(
        "vLLM #54260 (open, 2026-08-28); PR #54270 (closed unmerged, 2026-08-28)",
        "under PP + async + speculative decoding the trim of the optimistic placeholders sits in an elif that only "
        "the last rank takes; non-last ranks never trim, and the ranks drift until they disagree on whether to "
        "broadcast and NCCL deadlocks",
        (V1,), True,
        "see V1_FAULTS[V1FaultPreset.V1_PP_ASYNC_TRIM_LAST_RANK].source",
        Outcome.PRESET, V1FaultPreset.V1_PP_ASYNC_TRIM_LAST_RANK,
    ),
    Candidate(
        "vLLM #53402 (closed, a fork's report; its author's comment of 2026-08-23)",
        "V2 under async admits pp_size + 1 batches in flight; receivers posted draft broadcast N + 1 while the last "
        "rank was still at N; the fork's fix is a fixed broadcast schedule with a sequence header its receivers "
        "validate, and an opt-in cap of pp_size batches",
        (V2,), True,
        "no vLLM release holds the fork's fix; under async, V2 still gets pp_size + 1 batches in vLLM 0.30.0 "
        "vllm/config/vllm.py 593-595 (max_concurrent_batches). The race is between NCCL collectives enqueued on "
        "a side stream; minispec has no streams, and every stage works out which broadcasts a batch has from "
        "the scheduler's counts it was given (pp_utils.compute_need_sampled_mask), so all stages post the same "
        "messages in the same order and a receive posted early still pairs with its own step's message; the "
        "check the fork added, a step and sequence number each receiver validates, is issue 22 §2's",
        Outcome.NOT_HERE,
    ),
    Candidate(
        "vLLM PR #56956 (open, 2026-09-15), split from PR #53577 (closed, 2026-08-24)",
        "a second call site on the last rank posts the drafts again against the one receive each non-last rank "
        "posted; the extra message misaligns the receive FIFO and the pipeline hangs",
        (V2,), False,
        "see FAULTS[FaultPreset.V2_DRAFTS_POSTED_TWICE].source",
        Outcome.PRESET, FaultPreset.V2_DRAFTS_POSTED_TWICE,
    ),
    Candidate(
        "vLLM #54437 (open; title and state read); PR #56802 (open, 2026-09-14)",
        "structured output with speculative decoding, async scheduling and PP: the drafts handed to the scheduler "
        "for the grammar bitmask sit in one unkeyed slot that alternating microbatches overwrite; the fix keys the "
        "snapshot by scheduler step and fails closed on a miss",
        (V1,), True,
        "no release holds PR #56802",
        Outcome.NOT_HERE,
    ),
    Candidate(
        "vLLM PR #49620 (open, 2026-07-23)",
        "under async scheduling a request preempted after its speculative step was dispatched but before the output "
        "returned gets that late output applied to its reset state",
        (V1, V2), True,
        "vLLM 0.30.0 handles the case as PR #48245 does, not by #49620's discard: in "
        "vllm/v1/core/sched/scheduler.py lines 1497-1511, _preempt_request marks the in-flight output stale and "
        "zeroes the placeholders, in lines 1946-1969 update_from_output delivers it without moving the reset "
        "counters, and lines 886-895 hold the request back until it is in (from reading the code). minispec's "
        "scheduler preempts a request with a batch in flight and does the same (Scheduler._preempt, "
        "_drain_in_flight; tests/test_scheduler.py::test_a_stale_output_takes_back_nothing_under_async_scheduling)",
        Outcome.HANDLED,
    ),
    Candidate(
        "tenstorrent/vllm-tt-plugin#131 (open; title, state and an excerpt of its description read)",
        "a commit that runs a step after its submission resolves a request's row by the step's row; condense "
        "has moved the request since, and the row it left keeps a stale length (there, the drafter's context)",
        (V1,), True,
        "see V1_FAULTS[V1FaultPreset.V1_PP_ASYNC_STALE_ROW].source: minispec's deferred commit is a non-last "
        "stage's application of the last stage's broadcast",
        Outcome.PRESET, V1FaultPreset.V1_PP_ASYNC_STALE_ROW,
    ),
    Candidate(
        "tenstorrent/vllm-tt-plugin#131 (its other fix, in the same excerpt)",
        "a late commit writes the state of a request that was preempted after its step was submitted, reviving "
        "a slot the request no longer holds",
        (V2,), False,
        "vLLM 0.30.0's slot generation counter drops such an entry: vllm/v1/worker/gpu/pp_utils.py 79-82, 130-134 "
        "(from reading the code); tests/test_preempted_slot.py shows minispec's V2 dropping late entries for "
        "slots freed by preemption, and invariant 4 breaking when they land",
        Outcome.SAME_AS, FaultPreset.V2_SLOT_REUSE,
    ),
    Candidate(
        "vllm-ascend PR #14184 (merged, 2026-08-13)",
        "in vllm-ascend's V2, the sampled tokens are broadcast before the last stage has drafted, so non-last "
        "stages never receive the next drafts; the fix defers the broadcast and carries the drafts in the same "
        "queue slot",
        (V2,), False,
        "upstream V2 broadcasts the drafts after proposing them: vLLM 0.30.0 vllm/v1/worker/gpu/model_runner.py "
        "lines 2171-2174 (from reading the code)",
        Outcome.SAME_AS, FaultPreset.V2_STALE_DRAFTS,
    ),
    Candidate(
        "vLLM PR #41133 (merged, 2026-04-28)",
        "non-last ranks set num_tokens_no_spec from num_computed_tokens; gsm8k 0.8324 under PP 2 with async (the "
        "default) against 0.8741 under TP and 0.8757 under PP 2 without async",
        (V1,), True,
        "see V1_FAULTS[V1FaultPreset.V1_PP_ASYNC_NUM_TOKENS_NO_SPEC].source (LEFT_OUT['v1-num-tokens-no-spec'] in "
        "minispec/v1/worker/runner_fixes.py says why no synchronous schedule bites)",
        Outcome.PRESET, V1FaultPreset.V1_PP_ASYNC_NUM_TOKENS_NO_SPEC,
    ),
    Candidate(
        "sglang PR #29405 (merged, 2026-06-26)",
        "abort scans only the current and the previous microbatch slot, so with more than two slots in flight some "
        "requests are never aborted: masked with two slots, it shows with three or more (its test runs pp_size=4)",
        (), False,
        "SGLang's scheduler, not vLLM's: its relay design is another part of the project",
        Outcome.NOT_HERE,
    ),
)
