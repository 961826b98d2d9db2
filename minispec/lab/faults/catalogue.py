"""The 2026 faults of the July-2025 family: what each fault preset reproduces, where it is
documented, and where it bites (``FAULTS``).

``LLM(..., model_runner="v2", faults="<name>")`` runs one of them. The switches are the
engine's, next to the code they switch (``minispec/v1/worker/gpu/runner_fixes.py``:
``FaultPreset``, the switches, the fault functions; checked against ``model_runner=`` by
``minispec.v1.worker.switchboard``); this catalogue is the lab's, because each entry
carries a lab ``Schedule`` and the engine never imports the lab (``tests/test_layout.py``).
``FaultPreset`` and ``LEFT_OUT`` (``minispec/v1/worker/runner_fixes.py``) are importable
from here too.

Under pipeline parallelism the last stage samples and verifies, and every other stage
must learn exactly what it decided. Each preset below puts back one way a 2026 runner
got that wrong, in the runner design it belongs to (``FAULTS[name].design``), and
``FAULTS`` says, for each, where it is documented (the thread, and the release lines
where a release holds the fix, from reading the code), a scenario where it bites, and
the first thing that goes wrong there: an invariant (``Invariant``, at a step, stage and
request), or, for the broadcast-width fault, the transport's own error. The tests
(``tests/test_fault_presets.py``) assert each, and that the fixed run is clean.

A runner resolves each switch once, when it is built (``Switches.pick``), as V1's runner
resolves its own: the hot paths call one function and never compare names. The switches,
by preset:

* ``v2-stale-drafts`` (PR #46994's report, fixed upstream by PR #50514; PR #52295): non-last
  stages never apply the drafts the last stage broadcasts (``keep_stale_drafts`` for the runner's
  ``apply_drafts``), so a decode embeds the slot's zeroed ``draft_tokens``.
* ``v2-optimistic-num-computed`` (vllm-ascend PR #15171; the same shape in vLLM's V1
  runner: RFC #44697, PR #44698): non-last stages keep the ``num_computed_tokens`` they
  advanced by the whole query at their forward and never take the rejected drafts back
  (``ignore_rejected`` for ``num_rejected_on_apply``). Upstream V2 takes them back by design
  (vLLM 0.30.0 ``vllm/v1/worker/gpu/model_runner.py`` 1590-1611): only vllm-ascend's V2 had this bug.
* ``v2-slot-reuse`` (#39833's shape): a broadcast entry for a slot's previous request is
  applied to its new occupant: the slot generation check is dropped
  (``every_row_live`` for ``PPHandler.live_rows``). #39833's own half, the
  ``last_sampled_tokens`` left unset by ``add_request``, cannot bite here: a slot's first
  step in minispec is always a prefill, whose sample writes ``last_sampled_tokens``
  before any decode reads it (vLLM's decode-first slots come from PD disaggregation,
  which minispec has not; #39833 is a PD-disaggregation bug, not a stage hand-over one).
  The variant kept is the one the generation counter exists for (vLLM 0.30.0
  ``vllm/v1/worker/gpu/pp_utils.py`` 79-82, 90-91, 130-134).
* ``v2-broadcast-width`` (PR #46994's report, fixed upstream by PR #50514): the last stage sends the
  sampled tokens at their natural width, ``[n, 1]`` for a batch without drafts, into the
  ``[n, k + 1]`` receive every non-last stage posted (``natural_width`` for
  ``PPHandler.sample_width``). NCCL "does not negotiate element counts" and deadlocks;
  raw gloo packs the narrow rows into the front of the buffer and says nothing (a wider
  message aborts the process); minispec's transport checks each message's shape and
  names the mismatch (``minispec.distributed.parallel_state.post_checked``).
* ``v2-drafts-posted-twice`` (PR #56956, split from PR #53577): a second call site on the
  last stage posts a batch's drafts again (``post_drafts_twice`` for the runner's
  ``post_drafts``). No stage posted a receive for the copy, so the next batch's first
  receive, posted for ``[n, k + 1]`` sampled tokens, is paired with the ``[n, k]`` drafts:
  NCCL hangs ("double-posting misaligned the recv FIFO and hung the pipeline"); minispec's
  transport names the mismatch as invariant 7, message-schedule agreement: the receive
  posted for batch_1's step got batch_0's copy. It needs no async scheduling and bites at every pipeline
  depth (``tests/test_inflight_family.py``). The rest of the in-flight family, and why each
  is or is not a preset: ``minispec.lab.faults.in_flight``.

Left out (``LEFT_OUT``): ``v1-num-tokens-no-spec`` (PR #41133), with the reason.
``fixes=`` names the July-2025 presets of V1's switches (``minispec/v1/worker/runner_fixes.py``).

vLLM twin: none (vLLM ships each fix, never a switch back to the fault).
"""

from __future__ import annotations

from dataclasses import dataclass

from minispec.instruments.invariants import Invariant
from minispec.lab.experiments.scenarios import PROMPTS, thread_schedule
from minispec.lab.experiments.schedule import Request, Schedule
from minispec.v1.worker.gpu.runner_fixes import FaultPreset
from minispec.v1.worker.runner_fixes import LEFT_OUT
from minispec.v1.worker.switches import ModelRunner

__all__ = ["FAULTS", "LEFT_OUT", "Fault", "FaultPreset", "FirstViolation", "TransportError"]


@dataclass(frozen=True)
class FirstViolation:
    """The first invariant a run breaks: where, and what its expected/actual say (``why``)."""

    invariant: Invariant
    step: int
    stage: int | None
    req_id: str
    why: str


@dataclass(frozen=True)
class TransportError:
    """The run stops in the transport instead: at the step and stage that took the message."""

    step: int
    stage: int
    message: str  # a part of the error's text


@dataclass(frozen=True)
class Fault:
    preset: FaultPreset
    reference: str  # the thread(s)
    source: str  # the release lines of the fix, from reading the code, or why there are none
    summary: str
    fix: str  # what cures it (the runner's default)
    scenario: Schedule
    expected: FirstViolation | TransportError

    @property
    def design(self) -> ModelRunner:
        """The runner design it belongs to: each fault preset switches one design's code."""
        (design,) = self.preset.designs
        return design


# One slot (max_num_seqs=1): E waits for A's, and is given it while A's last broadcast is
# still pending on stage 0 (nothing scheduled at E's first step needed it). In the
# thread's scenario every finished request's entry is taken before its slot is refilled.
SLOT_REUSE_SCHEDULE = Schedule(
    "A, then E in A's slot", (Request(PROMPTS["A"], 0, "A"), Request(PROMPTS["C"], 1, "E")),
    2, "draft_model", 3, 16, check_invariants=True, max_num_seqs=1,
)

FAULTS: dict[FaultPreset, Fault] = {
    FaultPreset.V2_STALE_DRAFTS: Fault(
        FaultPreset.V2_STALE_DRAFTS,
        "vLLM PR #46994 (merged; its comment of 2026-09-01 confirms \"draft tokens never reach non-last ranks\"); "
        "fixed upstream by PR #50514 (opened 2026-07-31, merged; in 0.30.0, not in 0.29.0: \"broadcast draft "
        "proposals from the last stage\"); PR #52295 (open, 2026-08-14: \"non-last ranks keep stale or "
        "zero-initialized draft tokens\")",
        "the fix in vLLM 0.30.0: vllm/v1/worker/gpu/pp_utils.py 163-178 (broadcast_drafts), 144-154 "
        "(drafts restored with the sampled tokens), model_runner.py 1110-1118",
        "non-last ranks keep stale or zero-initialised draft tokens: the last rank's drafts never reach them",
        "the last rank broadcasts the next drafts with the sampled tokens; non-last ranks write them into the "
        "slots when they apply the broadcast",
        thread_schedule(check_invariants=True),
        FirstViolation(Invariant.DRAFT_AGREEMENT, 2, 0, "A",
                       "stage 0 embeds the slot's zeroed draft_tokens, not the drafts the scheduler scheduled"),
    ),
    FaultPreset.V2_OPTIMISTIC_NUM_COMPUTED: Fault(
        FaultPreset.V2_OPTIMISTIC_NUM_COMPUTED,
        "vllm-ascend PR #15171 (open, 2026-08-28: V2's non-last ranks build sequence lengths \"from a length that "
        "was never reverted after a rejected draft token\"); the same shape in vLLM's V1 runner: RFC #44697 (open, "
        "2026-06-05: \"the non-last PP rank should apply the sampler's broadcast per-request valid/accepted "
        "count\") and PR #44698 (open)",
        "upstream V2 takes the rejected drafts back by design, vLLM 0.30.0: vllm/v1/worker/gpu/model_runner.py "
        "2016-2024 (the optimistic advance) and 1590-1611 (post_update takes num_rejected back)",
        "non-last ranks keep the optimistic num_computed_tokens: rejected drafts are never taken back",
        "non-last ranks apply the broadcast's per-request num_rejected to their own num_computed_tokens",
        thread_schedule(check_invariants=True),
        FirstViolation(Invariant.SHARED_ACCOUNTING, 4, 0, "A",
                       "stage 0's num_computed_tokens is the scheduler's plus the drafts rejected"),
    ),
    FaultPreset.V2_SLOT_REUSE: Fault(
        FaultPreset.V2_SLOT_REUSE,
        "vLLM PR #39833 (merged; 2026-04-14: a PD-disaggregation bug, stale last_sampled_tokens and draft_tokens "
        "\"leaking between requests when V2 model runner reuses request state slots\", where a slot's first step "
        "is a decode); this preset is its shape through the broadcast instead",
        "the fix in vLLM 0.30.0: vllm/v1/worker/gpu/pp_utils.py 79-82, 90-91 (a generation per slot), 130-134 "
        "(rows whose slot was freed since are skipped)",
        "a slot's previous request's broadcast lands in its new occupant (the generation check dropped)",
        "each slot's generation is bumped when it is freed, and a broadcast's rows whose slot changed hands since "
        "its receive are skipped",
        SLOT_REUSE_SCHEDULE,
        FirstViolation(Invariant.TOKEN_HISTORY, 14, 0, "E",
                       "E's history on stage 0 runs on past its prompt with A's last sampled tokens"),
    ),
    FaultPreset.V2_BROADCAST_WIDTH: Fault(
        FaultPreset.V2_BROADCAST_WIDTH,
        "vLLM PR #46994 (merged; its comment of 2026-09-01: \"NCCL does not negotiate element counts\"); listed "
        "second, after DeepSeekMTP's missing SupportsPP, in RFC #44697's comment of 2026-06-29; fixed upstream by "
        "PR #50514 (\"use one fixed sampled-token broadcast width on every rank\"; in 0.30.0, not in 0.29.0)",
        "the fix in vLLM 0.30.0: vllm/v1/worker/gpu/pp_utils.py 257-260 (broadcast pads to max_sample_len) "
        "against 196-198 (receive posts [num_reqs, max_sample_len]); 0.33.0 has both sides work the width out "
        "alike (_sample_len, 104-106; asserted at 255)",
        "the sampled tokens go out [n, 1] on a step without drafts into a receive posted for [n, k + 1]",
        "the last rank pads the sampled tokens to the width every receive was posted for",
        thread_schedule(check_invariants=True),
        TransportError(2, 0, "rank 1 sent a [2, 1] torch.int64 message to rank 0 (tag 17), which posted a "
                                 "[2, 4] torch.int64 receive"),
    ),
    FaultPreset.V2_DRAFTS_POSTED_TWICE: Fault(
        FaultPreset.V2_DRAFTS_POSTED_TWICE,
        "vLLM PR #56956 (open, 2026-09-15: the draft broadcast \"is gated out of the no-op second call site when a "
        "speculator ran (double-posting misaligned the recv FIFO and hung the pipeline)\"), split from PR #53577 "
        "(closed, 2026-08-24)",
        "no release holds #56956; the contract it restores is 0.30.0's, from reading the code: one broadcast_drafts "
        "call site on the last rank, vllm/v1/worker/gpu/model_runner.py 2171-2174, against the one drafts receive "
        "each non-last rank posts, pp_utils.py 207-216; 0.33.0 writes it down: receive's recv_drafts \"must match "
        "whether the last rank calls broadcast_drafts for this step\" (pp_utils.py 176-179; both sides gated alike, "
        "model_runner.py 2175-2177 and 2340-2341)",
        "the last stage posts a batch's drafts twice against the one receive each non-last stage posted for them",
        "the last stage posts each batch's drafts once, from one call site",
        thread_schedule(check_invariants=True),
        TransportError(3, 0, "rank 1 sent a [2, 3] torch.int64 message to rank 0 (tag 17), which posted a "
                                 "[2, 4] torch.int64 receive"),
    ),
}
