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
  step is a prefill or, under prefix caching, a decode padded to ``1 + k`` whose first input
  is the prompt's last token, read from ``all_token_ids``; either samples and writes
  ``last_sampled_tokens`` before any step reads it. Its other half, drafts not cleared, is
  the mutant ``v2-drafts-not-cleared``, which that padded decode reaches (vLLM's decode-first
  slots come from prefix-cache hits and PD disaggregation, where #39833 was found).
  The variant kept is the one the generation counter exists for (vLLM 0.30.0
  ``vllm/v1/worker/gpu/pp_utils.py`` 79-82, 90-91, 130-134).
* ``v2-broadcast-width`` (PR #46994's report, fixed upstream by PR #50514): the last stage sends the
  sampled tokens at their natural width, ``[n, 1]`` for a batch without drafts, into the
  ``[n, k + 1]`` receive every non-last stage posted (``natural_width`` for
  ``PPHandler.sample_width``). NCCL deadlocks (PR #46994's comment: "NCCL does not negotiate element counts");
  raw gloo packs the narrow rows into the front of the buffer and says nothing (a wider
  message aborts the process); minispec's transport checks each message's shape and
  names the mismatch (``minispec.distributed.parallel_state.post_checked``).
* ``v2-drafts-posted-twice``: a second call site on the last stage posts a batch's drafts
  again (``post_drafts_twice`` for the runner's ``post_drafts``). No stage posted a receive
  for the copy, so the next batch's first receive, posted for ``[n, k + 1]`` sampled tokens,
  is paired with the ``[n, k]`` drafts. Under NCCL the pipeline hangs (PR #56956: "double-posting
  misaligned the recv FIFO and hung the pipeline"; it was split from PR #53577); minispec's
  transport names the mismatch as invariant 7, message-schedule agreement: the receive
  posted for batch_1's step got batch_0's copy. It needs no async scheduling and bites at
  every pipeline depth (``tests/test_inflight_family.py``). The rest of the in-flight family, and why each
  is or is not a preset: ``minispec.lab.faults.in_flight``.

The scheduler's one fault (``model_runner="v1"`` or ``"v2"``; switch and preset in
``minispec/v1/worker/scheduler_switches.py``), not in this catalogue's tables:
``stale-output-dropped`` (vllm-project/vllm-gaudi#1794, merged, and vllm-project/vllm-gaudi#1803) discards the
output of a batch in flight when its request was preempted, where vLLM 0.30.0 delivers it
(PR #48245). On a random schedule whose KV pool preempts requests in flight
(``exercise_schedule(3, 2, "ngram")``) the first break is invariant 8 (each position sampled
once) at step 30, stage 1, request B under V2, and invariant 3 (token history) at the same
place under V1, whose last stage keeps the token it sampled; the fixed runs are clean
(``tests/test_stale_output.py``).

The relay design's two faults (``model_runner="relay"``, ``RELAY_FAULTS``; switches in
``minispec/v1/worker/relay/runner_fixes.py``), from SGLang's 2026 reports:

* ``relay-pairing`` (SGLang PR #40001): a non-last stage applies a relayed payload to the
  micro-batch slot of its previous forward, ``(c - 2) % N`` for its ``c``-th batch, where
  the payload reports slot ``c % N``. At N = 2 the two are the same slot, so it bites only
  from three stages on (the scenario is the thread's requests on three stages; at two the
  same preset runs clean, ``tests/test_fault_presets.py`` says so).
* ``relay-no-seq-lens`` (SGLang PR #30775's payload without one of its fields): the payload
  travels without ``new_seq_lens``, and the non-last stages keep the count their forward
  advanced, drafts rejected included.

V1's three faults under pipeline parallelism with async scheduling (``model_runner="v1"``,
``V1_FAULTS``; switches in ``minispec/v1/worker/runner_fixes.py``), from the in-flight family
(issue 22, ``minispec.lab.faults.in_flight``), each on the thread's requests scheduled
asynchronously, invariants 2-5 checked live as they are stated for async scheduling (a stage
against what the scheduler's placeholders stood for once the outputs they stand for are back).
No message goes out of schedule; each is caught on stage 0 at the first step that reads what it
broke:

* ``v1-pp-async-column-0`` (vLLM #57755): the patch that lets V1 boot with speculative decoding
  under PP + async, column 0 of the sampled tokens at vLLM's width 1 and nothing else: a
  non-last stage loses the accepted drafts and the bonus token from its history and embeds
  zeros for the drafts. MTP acceptance collapsed from 45.6 % to 8 % with that patch in
  syv-ai/qwen38-27b-rtx3090#160 (its description of 2026-09-20, by #57755's author); here the
  draft model's falls from about 49 % to 12 %.
* ``v1-pp-async-trim-last-rank`` (vLLM #54260): the take-back of the scheduler's optimistic count
  (every draft in flight assumed accepted) runs on the last stage only. In vLLM the overshoot is
  in the non-last ranks' ``output_token_ids`` and grows until the ranks disagree on whether to
  broadcast, and NCCL deadlocks; minispec's twin of that trim is the take-back of the optimistic
  ``num_computed_tokens`` (``take_back_rejected``), and each stage decides whether a broadcast
  comes from its own rows and the scheduler's counts, which the fault leaves alike on every
  stage, so here it never deadlocks: the non-last stages compute at positions past their history
  after each rejection, and the output goes wrong.
* ``v1-pp-async-num-tokens-no-spec`` (PR #41133): a non-last stage's row ends at the scheduler's
  ``num_computed_tokens``, 0.17.0's offset: under async scheduling nothing is relayed, so the row
  ends before the last sampled token, which the next broadcast (and the drafts) then overwrite.
* ``v1-pp-async-stale-row`` (tenstorrent/vllm-tt-plugin#131's shape): a non-last stage applies a
  broadcast entry to the rows the batch had when the receive was posted, not to the rows its
  requests hold now; a request that left the batch since, or that condense moved, leaves its old
  row to another request, whose history takes the tokens and whose length goes stale. The thread
  scenario never reuses a row that way, so its scenario is a random schedule
  (``exercise_schedule(1, 2, "ngram")`` under async scheduling); the step it bites at depends on the
  depth (27 at PP 2, 30 at PP 3).

Two of them need drafts: without speculative decoding the column-0 layout is the full one and
nothing is optimistic, so both run clean at ``k = 0``, while the third bites there too (its
token loss is not about drafts). None is masked at PP = 2: the first three bite alike at PP = 2
and 3, the stale row at another step (``tests/test_fault_presets.py``).

They are kept apart from ``FAULTS`` (Model Runner V2's) so that what iterates ``FAULTS``
(notebook 09) is unchanged; ``EVERY_FAULT`` holds all three dicts.

Left out (``LEFT_OUT``): ``v1-num-tokens-no-spec`` (PR #41133), with the reason. SGLang PR
#29405 (abort scanning only the current and the previous micro-batch slot, visible from
three slots on) is not a preset: minispec's engine aborts through its one scheduler, which
holds every request (``Scheduler.finish_requests``), and its runners keep no per-slot
running batch to scan, so there is no seam where that fault could be put back.
State that is not tokens (issue 37, ``BEYOND_TOKENS_FAULTS``, kept apart like V1's):

* ``v2-eagle3-taps-dropped`` (SGLang PR #39644; the same shape in vLLM PR #53052's review): with an
  EAGLE-3 head, the stages before the last do not fill the slots of the taps they own, so the
  drafter is handed zeros for them. Output stays right (the target verifies every draft); what
  breaks is invariant 9, hidden-state hand-over, at the first step, and acceptance. Masked at
  PP = 1, where the last stage owns every tap.
* ``tree-path-not-compacted`` (SGLang PR #30775's comment of 2026-09-16; ``TREE_FAULTS``): with a tree of
  drafts, only the last stage moves the accepted path's KV into the committed positions, so the earlier
  stages keep a rejected sibling's KV there. Invariant 10 names it once the request's next step reads that
  KV; output changes later, where the sibling's token differs. Masked at PP = 1, where the one stage is the last.
  Its preset switches V1 (async), V2 and the relay; its scenario runs on the relay, SGLang's design.

``fixes=`` names the July-2025 presets of V1's switches (``minispec/v1/worker/runner_fixes.py``).

vLLM twin: none (vLLM ships each fix, never a switch back to the fault).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date

from minispec.instruments.invariants import Invariant
from minispec.lab.experiments.scenarios import PROMPTS, exercise_schedule, thread_schedule
from minispec.lab.experiments.schedule import Request, Schedule
from minispec.lab.records.threads import SGLANG, VLLM, Citation, thread
from minispec.v1.worker.gpu.runner_fixes import BeyondTokensFaultPreset, FaultPreset
from minispec.v1.worker.relay.runner_fixes import RelayFaultPreset
from minispec.v1.worker.runner_fixes import LEFT_OUT, V1FaultPreset
from minispec.v1.worker.switches import ModelRunner
from minispec.v1.worker.tree_switches import TreeFaultPreset

__all__ = ["BEYOND_TOKENS_FAULTS", "EVERY_FAULT", "FAULTS", "LEFT_OUT", "RELAY_FAULTS", "TREE_FAULTS", "V1_FAULTS", "Fault", "FaultPreset", "FirstViolation",
           "RelayFaultPreset", "TransportError", "V1FaultPreset", "BeyondTokensFaultPreset"]


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
    preset: FaultPreset | RelayFaultPreset | V1FaultPreset | BeyondTokensFaultPreset | TreeFaultPreset
    citations: tuple[Citation, ...]  # the threads, their posts and quotes drawn from the one table
    source: str  # the release lines of the fix, from reading the code, or why there are none
    summary: str
    fix: str  # what cures it (the runner's default)
    scenario: Schedule
    expected: FirstViolation | TransportError
    runs_on: ModelRunner | None = None  # a preset that switches several designs: the one its scenario runs

    @property
    def reference(self) -> str:
        """The threads, as prose: each rendered from the table (``Citation.render``)."""
        return "; ".join(c.render() for c in self.citations)

    @property
    def design(self) -> ModelRunner:
        """The runner design it runs on: the one whose code its preset switches (or ``runs_on``)."""
        if self.runs_on is not None:
            return self.runs_on
        (design,) = self.preset.designs
        return design


# One slot (max_num_seqs=1): E waits for A's, and is given it while A's last broadcast is
# still pending on stage 0 (nothing scheduled at E's first step needed it). In the
# thread's scenario every finished request's entry is taken before its slot is refilled.
SLOT_REUSE_SCHEDULE = Schedule(
    "A, then E in A's slot", (Request(PROMPTS["A"], 0, "A"), Request(PROMPTS["C"], 1, "E")),
    2, "draft_model", 3, 16, check_invariants=True, max_num_seqs=1,
)

def _cite(number: int, posted: date | None = None, quote: str = "", role: str = "") -> Citation:
    return Citation(thread(VLLM, number), posted, quote, role)


FAULTS: dict[FaultPreset, Fault] = {
    FaultPreset.V2_STALE_DRAFTS: Fault(
        FaultPreset.V2_STALE_DRAFTS,
        (_cite(46994, date(2026, 9, 1), "draft tokens never reach non-last ranks", "reported and confirmed there"),
         _cite(50514, date(2026, 7, 31), "broadcast draft proposals from the last stage",
               "fixed upstream (in 0.30.0, not in 0.29.0, from reading the code; run by make vllm-check)"),
         _cite(52295, date(2026, 8, 14), "the non-last ranks keep stale or zero-initialized draft tokens",
               "the same fault in its own words, with its own fix")),
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
        (Citation(thread("vllm-project/vllm-ascend", 15171), date(2026, 8, 28),
                  "a length that was never reverted after a rejected draft token",
                  "V2's non-last ranks build their sequence lengths from it"),
         _cite(44697, date(2026, 6, 5), "the non-last PP rank should apply the sampler's broadcast per-request "
               "valid/accepted count", "the same shape in vLLM's V1 runner"),
         _cite(44698, date(2026, 6, 5), role="its implementation, for V1")),
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
        (_cite(39833, date(2026, 4, 14), "leaking between requests when V2 model runner reuses request state slots",
               "a PD-disaggregation bug, where a slot's first step is a decode; this preset is its shape through "
               "the broadcast instead"),),
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
        (_cite(46994, date(2026, 9, 1), "NCCL does not negotiate element counts", "reported and confirmed there"),
         _cite(44697, date(2026, 6, 29), role="listed second, after DeepSeekMTP's missing SupportsPP"),
         _cite(50514, date(2026, 7, 31), "use one fixed sampled-token broadcast width on every rank",
               "fixed upstream (in 0.30.0, not in 0.29.0, from reading the code; run by make vllm-check)")),
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
        (_cite(56956, date(2026, 9, 15), "double-posting misaligned the recv FIFO and hung the pipeline",
               "the draft broadcast gated out of a second call site on the last rank"),
         _cite(53577, date(2026, 8, 24), role="the work it was split from")),
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

# The thread's requests on three stages: the relay's pairing fault needs more than two.
THREAD_AT_PP3 = replace(thread_schedule(check_invariants=True), name="the thread scenario on three stages",
                        pipeline_parallel_size=3)

RELAY_FAULTS: dict[RelayFaultPreset, Fault] = {
    RelayFaultPreset.RELAY_PAIRING: Fault(
        RelayFaultPreset.RELAY_PAIRING,
        (Citation(thread(SGLANG, 40001), date(2026, 9, 17),
                  "With PP2 `(i-1) % 2 == (i+1) % 2`, so both errors are masked; with PP4 the first concurrent "
                  "batch crashes",
                  "the (i - 1) % N pairing of a relayed result with the previous forward's slot, masked at two "
                  "stages"),),
        "SGLang 0.5.23's loop applies the relayed result of slot (mb_id + 1) % pp_loop_size, from reading the "
        "code (python/sglang/srt/managers/scheduler_pp_mixin.py 137, 191-204, event_loop_pp); minispec's "
        "fix: minispec/v1/worker/relay/pp_relay.py (mb_slot)",
        "a non-last stage applies the relayed payload to the micro-batch slot of its previous forward, "
        "(c - 2) % N for its c-th batch, instead of the slot of the batch the payload reports, c % N; at N = 2 "
        "those are the same slot",
        "each payload is applied to the micro-batch slot of the batch it reports, taken before that slot is reused",
        THREAD_AT_PP3,
        FirstViolation(Invariant.TOKEN_HISTORY, 3, 0, "A",
                       "stage 0 holds a zero where A's last sampled token belongs: A's payload went to another "
                       "micro-batch's rows"),
    ),
    RelayFaultPreset.RELAY_NO_SEQ_LENS: Fault(
        RelayFaultPreset.RELAY_NO_SEQ_LENS,
        (Citation(thread(SGLANG, 30775), date(2026, 7, 10),
                  "the relay payload just grows to `{accept_lens, new_seq_lens, bonus_token, next draft tree}`",
                  "the fields every stage must apply; this preset drops new_seq_lens"),
         Citation(thread(SGLANG, 40001), role="recurrent-state commit on non-last stages, in its title")),
        "SGLang 0.5.23 relays spec_new_seq_lens (python/sglang/srt/managers/scheduler_pp_mixin.py 797-802) "
        "and an earlier stage sets its seq_lens from them (1010-1022), from reading the code; minispec's fix: "
        "minispec/v1/worker/relay/stage.py (commit_seq_lens)",
        "the payload travels without new_seq_lens: non-last stages keep the count they advanced at their forward",
        "the payload carries each row's new_seq_lens and every non-last stage commits it",
        thread_schedule(check_invariants=True),
        FirstViolation(Invariant.SHARED_ACCOUNTING, 4, 0, "A", "nothing to commit: stage 0's count stays where its "
                       "forward advanced it, drafts rejected included"),
    ),
}

# The thread's requests, scheduled asynchronously: V1 then keeps pp_size batches in flight, and
# every request is in every batch.
THREAD_ASYNC = replace(thread_schedule(check_invariants=True), name="the thread scenario under async scheduling",
                       async_scheduling=True)

V1_FAULTS: dict[V1FaultPreset, Fault] = {
    V1FaultPreset.V1_PP_ASYNC_COLUMN_0: Fault(
        V1FaultPreset.V1_PP_ASYNC_COLUMN_0,
        (_cite(57755, date(2026, 9, 20), "broadcast only `sampled_token_ids[:, :1]`, keep the receiver at "
               "`[num_reqs, 1]`", "the workaround it reports, which boots and corrupts output silently"),),
        "no release fixes it: the width-1 assertion is in vLLM 0.30.0 vllm/v1/worker/gpu_model_runner.py 4856-4858 "
        "(0.29.0 4918-4919, 0.33.0 4534-4535); minispec's fix: minispec/v1/worker/pp_prev_sampled.py (full_layout)",
        "the last stage broadcasts column 0 of the sampled tokens at width 1, with no counts and no drafts",
        "the last stage broadcasts all k + 1 columns, how many of each row are valid, and the next drafts",
        THREAD_ASYNC,
        FirstViolation(Invariant.DRAFT_AGREEMENT, 1, 0, "A",
                       "stage 0 embeds zeros for the drafts step 0's output brought: acceptance falls from about "
                       "49 % to 12 %"),
    ),
    V1FaultPreset.V1_PP_ASYNC_TRIM_LAST_RANK: Fault(
        V1FaultPreset.V1_PP_ASYNC_TRIM_LAST_RANK,
        (_cite(54260, date(2026, 8, 28), "The trim branch is an `elif`, so it only ever executes on the last PP rank.",
               "reported there, in vLLM's V1 runner"),
         _cite(54270, date(2026, 8, 28), role="its fix, closed unmerged")),
        "no release fixes it: the elif is in vLLM 0.30.0 vllm/v1/worker/gpu_model_runner.py 1448 (0.29.0 1439, "
        "0.33.0 1409); minispec's fix: minispec/v1/worker/runner_fixes.py (take_back_rejected, on every stage)",
        "the take-back of the optimistic count runs on the last stage only; the others keep the scheduler's",
        "every stage takes the rejected drafts back from the scheduler's optimistic num_computed_tokens",
        THREAD_ASYNC,
        FirstViolation(Invariant.SHARED_ACCOUNTING, 2, 0, "A",
                       "stage 0 keeps the scheduler's optimistic count after the first rejection: 14, where 13"),
    ),
    V1FaultPreset.V1_PP_ASYNC_NUM_TOKENS_NO_SPEC: Fault(
        V1FaultPreset.V1_PP_ASYNC_NUM_TOKENS_NO_SPEC,
        (_cite(41133, date(2026, 4, 28), "In async-scheduling, `new_token_ids` is empty, so `token_ids_cpu` not "
               "touched.", "merged; its gsm8k table: PP 2 with async 0.8324 against 0.8741 under TP"),),
        "the fix in vLLM 0.30.0: vllm/v1/worker/gpu_model_runner.py 1496-1518 (the fault: 0.17.0 1153-1160)",
        "a non-last stage's row ends at the scheduler's num_computed_tokens, before the last sampled token",
        "a non-last stage's row ends no earlier than its num_tokens_no_spec, which the broadcast advanced",
        THREAD_ASYNC,
        FirstViolation(Invariant.TOKEN_HISTORY, 1, 0, "A",
                       "stage 0's row ends before the last sampled token, which the next broadcast or a draft overwrites"),
    ),
    V1FaultPreset.V1_PP_ASYNC_STALE_ROW: Fault(
        V1FaultPreset.V1_PP_ASYNC_STALE_ROW,
        (Citation(thread("tenstorrent/vllm-tt-plugin", 131),
                  role="its shape: a commit a step after its submission resolves a request's row by the step's row "
                       "(there, the drafter's context length), where condense has since moved the request"),),
        "vLLM 0.30.0 maps each received row to its request by id (prev_req_id_to_index, "
        "vllm/v1/worker/gpu_model_runner.py 4880-4896, from reading the code); minispec's fix: "
        "minispec/v1/worker/runner_fixes.py (row_now)",
        "a non-last stage applies a broadcast entry to the row each request had when the receive was posted; since "
        "then the request left the batch or condense moved it, and another request's row takes the tokens and a "
        "stale length",
        "the entry's tokens go to the row the request holds now, looked up by its id (req_id_to_index), or to its "
        "history alone if it holds none",
        replace(exercise_schedule(1, 2, "ngram"), name="random schedule 1 under async scheduling",
                async_scheduling=True),
        FirstViolation(Invariant.TOKEN_HISTORY, 27, 0, "C",
                       "stage 0's row of C holds a token another request's broadcast entry wrote there"),
    ),
}

# The thread's requests, drafted by the shipped EAGLE-3 head: at PP 2 stage 0 owns taps 1 and 2.
THREAD_EAGLE3 = replace(thread_schedule(check_invariants=True), name="the thread scenario with EAGLE-3 drafts",
                        method="eagle3")

BEYOND_TOKENS_FAULTS: dict[BeyondTokensFaultPreset, Fault] = {
    BeyondTokensFaultPreset.V2_EAGLE3_TAPS_DROPPED: Fault(
        BeyondTokensFaultPreset.V2_EAGLE3_TAPS_DROPPED,
        (Citation(thread(SGLANG, 39644), date(2026, 9, 15),
                  "the draft silently gets incomplete aux hidden states",
                  "SGLang's target models capture on the last rank only; the PR refuses the configuration"),
         _cite(53052, date(2026, 9, 4), "When a requested layer is on a non-final pipeline stage, this list is "
               "populated but discarded by the `IntermediateTensors` return", "the same shape in a vLLM model file"),
         _cite(50514, date(2026, 7, 31), "Each stage adds the states it produces to the existing "
               "`IntermediateTensors` handoff", "Model Runner V2's EAGLE-3 under PP, whose models carry the taps "
               "(in 0.30.0, from reading the code)")),
        "the carrying side in vLLM 0.30.0, from reading the code: vllm/model_executor/models/interfaces.py "
        "1569-1641 (EagleModelMixin: pack_local_aux_hidden_states, collect_remote_aux_hidden_states), used by "
        "llama.py 406-457; no SGLang release read",
        "only the last stage fills its EAGLE-3 taps' slots; the taps owned by earlier stages reach the drafter as "
        "zeros, and output stays right (the target verifies) while acceptance falls",
        "every stage fills the slots of the taps it owns in the IntermediateTensors it sends on",
        THREAD_EAGLE3,
        FirstViolation(Invariant.HIDDEN_STATE_HANDOVER, 0, 1, "A",
                       "the drafter is handed zeros for tap 1, which stage 0 computed at A's prompt positions"),
    ),
}

# The thread's requests, the draft model filling a tree of 5 nodes (two children of the root).
THREAD_TREE = replace(thread_schedule(check_invariants=True), name="the thread scenario with a tree of drafts",
                      num_speculative_tokens=5, speculative_token_tree="[(0,), (1,), (0, 0), (1, 0), (0, 0, 0)]")

TREE_FAULTS: dict[TreeFaultPreset, Fault] = {
    TreeFaultPreset.TREE_PATH_NOT_COMPACTED: Fault(
        TreeFaultPreset.TREE_PATH_NOT_COMPACTED,
        (Citation(thread(SGLANG, 30775), date(2026, 9, 16),
                  "The output relay carries acceptance lengths and the next draft tree, but not the accepted node "
                  "indices.", "the PP + spec tree consistency test failing: 1.95 % accuracy at PP 2 against 23.44 %"),
         Citation(thread(SGLANG, 26866), date(2026, 6, 1), "compact the accepted tree path to the front of each "
                  "per-req block", "the compaction SGLang's last stage runs")),
        "no release read: vLLM never verified a tree in its target (PR #22752 closed) and removed tree attention "
        "(PR #42121); minispec's compaction is minispec/v1/worker/tree_kv.py, whose stages derive the accepted "
        "path from the tokens their hand-over brings (SGLang's proposed fix relays the node indices)",
        "only the last stage moves the accepted path's KV into the committed positions; the earlier stages keep "
        "the KV of the nodes stored there, a rejected sibling's where the path skipped one",
        "every stage derives the accepted path from the tokens it learns and compacts it before its next forward",
        THREAD_TREE,
        FirstViolation(Invariant.COMMITTED_KV, 4, 0, "A",
                       "stage 0's KV at A's position 12 holds the root's rejected child (1,), stored at position 11"),
        runs_on=ModelRunner.RELAY,
    ),
}

EVERY_FAULT: dict[FaultPreset | RelayFaultPreset | V1FaultPreset | BeyondTokensFaultPreset | TreeFaultPreset, Fault] = {
    **FAULTS, **RELAY_FAULTS, **V1_FAULTS, **BEYOND_TOKENS_FAULTS, **TREE_FAULTS}
