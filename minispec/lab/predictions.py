"""The notebooks' predictions: each question, what gives its answer away, and what its reveal shows.

Every evidence function recomputes from the thread's scenario (run once per session by
``thread_trace``), so a reveal needs nothing from earlier cells. ``tools/spoilers.py`` reads
``answers`` and ``figures`` from here. The mechanism is ``minispec.lab.prediction``. A notebook
imports ``reveal`` (``from minispec.lab.predictions import reveal``).

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

from minispec.lab import evidence
from minispec.lab.prediction import _UNSET, MAKE_YOUR_GUESS, Prediction, _notebook_guess, show

__all__ = ["reveal"]

STALE = (r"\btem\b", "C's leftovers")


def _text(ids, visible_spaces: bool = True) -> str:
    from minispec.lab.exercises.attempts import decoder

    decode = decoder(visible_spaces)
    return "".join(decode(t) for t in ids)


def _trace(preset: str):
    from minispec.lab.exercises.checkers import thread_trace

    return thread_trace(preset)


def _rows_at_step2():
    from minispec.lab.experiments.scenarios import batch_label
    from minispec.lab.viz.row_log import render_row_log

    log = render_row_log(_trace("vllm-0.9.2"), max_steps=3, label=batch_label)
    yield log[log.index("step 1 "):]  # step 0 is the prefill: every row new


def _draft_slots():
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.experiments.scenarios import PROMPTS
    from minispec.lab.viz.plots import plot_step_rows

    step2 = _trace("vllm-0.9.2").step(2)
    stage0, stage1 = step2.stages
    yield plot_step_rows(step2, decode=decoder(visible_spaces=True))
    yield f"the scheduler sent as A's drafts:   {_text(step2.schedule.scheduled_spec_decode_tokens['A'])!r}"
    yield f"stage 0 embeds at positions 11-13:  {_text(stage0.row_of('A').draft_slots)!r}"
    yield f"stage 1 verifies:                   {_text(stage1.verified_drafts['A'])!r}"
    yield f"C's prompt at positions 11-13:      {PROMPTS['C'][11:14]!r}"


def _relay(preset: str):
    def lines():
        trace = _trace(preset)
        s4 = trace.step(4).schedule
        last = next(st for st in trace.step(2).stages if st.is_last)
        yield f"step 2, the last stage emitted for A:        {_text(last.sampled['A'])!r}"
        yield f"step 4, new_token_ids for A:                 {_text(s4.new_token_ids['A'])!r}"
        yield f"step 4, scheduled_spec_decode_tokens for A:  {_text(s4.scheduled_spec_decode_tokens['A'])!r}"
    return lines


def _add_request():
    """add_request for A, with three drafts in its state, into a row C used."""
    from minispec.lab.experiments.hand_batch import cached_request
    from minispec.lab.experiments.scenarios import PROMPTS
    from minispec.v1.worker.gpu_input_batch import InputBatch

    batch = InputBatch(max_num_reqs=2, max_model_len=40, max_num_blocks_per_req=4)
    batch.add_request(cached_request("C", PROMPTS["C"]))
    batch.remove_request("C")  # C's turn is over; its tokens stay
    row = batch.add_request(cached_request("A", PROMPTS["A"], output="a", drafts=" st"))
    yield f"row {row} positions 0-15: {_text(batch.token_ids_cpu[row, :16])!r}"
    yield f"num_tokens_no_spec = {batch.num_tokens_no_spec[row]}  num_tokens = {batch.num_tokens[row]}"
    yield f"positions 11-13: {_text(batch.token_ids_cpu[row, 11:14])!r}  (A's drafts were ' st')"


def _strip_diff():
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.viz.plots import plot_strip_diff

    yield plot_strip_diff({"vllm-0.9.2": _trace("vllm-0.9.2").step(2), "all": _trace("all").step(2)}, stage=0,
                          decode=decoder(visible_spaces=True))


def _acceptance_table():
    from minispec.lab.experiments.scenarios import forum_thread_reference
    from minispec.lab.viz.text import render_comparison

    traces = [(p, _trace(p)) for p in ("vllm-0.9.2", "vllm-0.14", "all")]
    yield render_comparison([(p, t.stats, t.outputs) for p, t in traces], forum_thread_reference(max_tokens=16))


def _first_break_0_9_2():
    from minispec.instruments.invariants import check_trace
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.viz.text import render_step

    trace = _trace("vllm-0.9.2")
    yield next(v for v in check_trace(trace) if v.invariant == 3).headline
    for step in (20, 22):
        yield "\n" + render_step(trace.step(step), decoder())


def _fault2():
    from minispec.instruments.invariants import check_trace
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.viz.history import plot_history, render_history
    from minispec.lab.viz.text import render_stage

    trace = _trace("vllm-0.14")
    step4 = trace.step(4)
    cell = decoder(visible_spaces=True)
    yield render_history(step4, "A", cell, first=0, window=17)
    yield plot_history(step4, "A", cell, first=0, window=17, title='"vllm-0.14", step 4, request A: stage 0 is short')
    stage0 = next(st for st in step4.stages if st.stage == 0)
    yield render_stage(stage0, step4, decoder()).splitlines()[1].strip()
    violations = check_trace(trace)
    first = violations[0]
    yield "the checker's first breaks:"
    yield from (f"  {v.headline}" for v in violations if (v.step, v.stage, v.req_id) == (first.step, first.stage, first.req_id))


def _pairing():
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.faults.relay_pairing import pairings
    from minispec.lab.faults.reproduce import run_fault
    from minispec.lab.viz.faults import render_fault_run
    from minispec.lab.viz.pairing import plot_pairing

    yield plot_pairing({n: pairings(n, 5, faulty=True) for n in (2, 3)}, "relay-pairing: which rows each payload is applied to")
    for pp in (2, 3):
        yield f"PP = {pp}:\n" + render_fault_run(run_fault("relay-pairing", pipeline_parallel_size=pp), decoder()).split("\n", 1)[1]


def _first_decode():
    from minispec.entrypoints.llm import LLM
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.viz.text import render_step
    from minispec.sampling_params import SamplingParams

    llm = LLM(pipeline_parallel_size=2, record=True)
    llm.generate(["A list is "], SamplingParams(temperature=0, max_tokens=3))
    yield render_step(llm.trace.steps[1], decoder())  # the second step that scheduled anything


def _recovered():
    import numpy as np

    from minispec.lab.experiments.rejection_sampling import P_TARGET, Q_DRAFT, VOCAB, rejection_draws
    from minispec.lab.viz.spec import plot_rejection_example

    draws = rejection_draws()
    expected = sum(min(p, q) for p, q in zip(P_TARGET, Q_DRAFT))
    yield f"accepted (then a bonus token): {draws.accepted / draws.n:.3f}   expected sum(min(p, q)) = {expected:.3f}"
    yield draws.table()
    yield plot_rejection_example(np.array(P_TARGET), np.array(Q_DRAFT), list(VOCAB),
                                 recovered_freq=np.array(draws.recovered_shares()))


def _own_taps():
    from minispec.config import DEFAULT_TARGET, LlamaArchitecture
    from minispec.lab.experiments.beyond_tokens import tap_layout
    from minispec.lab.viz.taps import plot_tap_stages

    layers = LlamaArchitecture.from_pretrained(DEFAULT_TARGET).num_hidden_layers
    yield plot_tap_stages([tap_layout(layers, (1, 2, 3), pp) for pp in (1, 2, 3, 4)],
                          f"EAGLE-3's taps 1, 2, 3 of the {layers}-layer target: which stage captures each")


def _taps_dropped():
    from minispec.lab.experiments.beyond_tokens import TAPS_DROPPED, taps_acceptance
    from minispec.lab.explorer.explorer import TAPS, Scope, explore
    from minispec.lab.faults.reproduce import run_fault
    from minispec.lab.viz.faults import render_fault_run
    from minispec.lab.viz.taps import render_taps_acceptance

    yield render_fault_run(run_fault(TAPS_DROPPED))
    yield "acceptance on the thread's four requests, the shipped EAGLE-3 head, Model Runner V2:"
    yield render_taps_acceptance(taps_acceptance())
    found = explore({"model_runner": "v2", "faults": TAPS_DROPPED},
                    Scope(max_requests=1, eagle_aux_hidden_state_layer_ids=TAPS))
    yield f"the explorer, from nothing: schedule {found.schedules_run} of its scope breaks first"
    yield f"{found.counterexample.schedule.details}: {found.counterexample.failure}"


def _tree_kv():
    from minispec.lab.exercises.attempts import decoder
    from minispec.lab.experiments.beyond_tokens import tree_kv_run
    from minispec.lab.viz.tree_figure import plot_tree_kv

    run, show = tree_kv_run(), decoder(visible_spaces=True)
    yield plot_tree_kv(run, show, "tree-path-not-compacted at PP = 2: only the last stage moves the path into place")
    yield str(run.violation)
    for name in ("fixed", "faulty"):
        texts = ", ".join(f"{r}: {_text(ids)!r}" for r, ids in sorted(run.outputs[name].items()))
        yield f"{name:>6}: acceptance {run.acceptance[name]:.1%}; {texts}"


def _judge(name: str):
    def check(guess):
        from minispec.lab.exercises import checkers

        return getattr(checkers, name)(guess)
    return check


def _judge_condense(guess):
    """08 §7: the learner's move_row, found in the notebook as the guess is, and their guess."""
    from minispec.lab.exercises.checkers import check_condense

    move_row = _notebook_guess("move_row")
    if move_row is _UNSET:
        return (f"{MAKE_YOUR_GUESS}: move_row is not defined in this kernel; run the cell with your "
                "move_row above, then this one")
    return check_condense(move_row, guess)


# where fault 2 first breaks an invariant (what the accepted drafts never reaching stage 0 leads to: the
# question is where, so the fault's own name, in 05's title, gives nothing away)
_FAULT2 = (r"invariant 3\b[^\n]{0,60}step 4", "step 4, stage 0, request A", "stage 0 is two tokens short",
           r"stage 0[^.\n]{0,30} short\b", r"computed=13\s+no_spec=12")
_ACCEPTANCE = (r"\b2\.4 ?%", r"\b5\.1 ?%", r"\b48\.7 ?%", "hardly a draft is accepted")

PREDICTIONS: dict[str, Prediction] = {p.id: p for p in (
    Prediction(
        "00-map-copies", "map-copies", "guess_copies",
        "two copies, one per stage, and they agree",
        "each stage keeps its own copy of prompt and output (history); in notebook 01 they stop agreeing",
        answers=(r"\b[Tt]wo copies", r"one per stage, and they agree"), evidence=_first_decode),
    Prediction(
        "02-recover-which", "recover-which", "guess_recovered",
        "only `a` and `c`, the tokens where p > q",
        "a drafted token x is kept with probability min(1, p(x) / q(x)); a drafted `b` is kept with probability "
        "0.3 / 0.5, and the mass a rejection frees is drawn from the part of p the draft did not cover, so every "
        "emitted token follows p (the first emitted column matches p)",
        answers=(r"[Oo]nly `?a`? and `?c`?", r"where p > q", r"\bb\s+0\.300\s+0\.\d+\s+0\.000"),
        figures=(r"plot_rejection_example\(",), evidence=_recovered),
    Prediction(
        "01-rows-step2", "rows-step2", "guess_rows",
        "stage 0 removes C and D and re-adds A and B, into the rows C and D just left",
        "each stage holds the other batch when a batch comes back, so every decode request is re-added every "
        "step: wZuck is right",
        answers=(r"re-add(ed|s)?\b[^.\n]{0,40}every step", r"C and D (are )?removed", r"remove_request C \(row 0\), D"),
        evidence=_rows_at_step2),
    Prediction(
        "01-draft-slots", "draft-slots", "guess_slots",
        "`tem`, C's leftovers (\"The for sta-tem-ent\")",
        "add_request wrote A's 11 tokens, nothing more, so positions 11-13 keep what C left; stage 1's rejection "
        "sampler verifies the same stale slots",
        answers=STALE, figures=("plot_step_rows", "plot_strip_diff", r"trace_stepper\([^)]*\bstep=2\b"),  # opened at step 2
        evidence=_draft_slots),
    Prediction(
        "01-fix1", "draft-slots", "guess_slots",
        "with fix 1 stage 0's slots hold the scheduled drafts `␣st`; without it, `tem`",
        "fix 1 writes the scheduled drafts on re-add, as the in-batch path does (vLLM v0.14.0, PR #31944)",
        answers=STALE, figures=("plot_strip_diff",), evidence=_strip_diff),
    Prediction(
        "01-acceptance", "acceptance", "guess_rates",
        "2.4% under vllm-0.9.2, 5.1% under vllm-0.14, 48.7% with both fixes",
        "stale drafts are rejected: the target does all the work and tokens per target forward stay near 1; fix 1 "
        "alone exposes fault 2, so hardly more are accepted, and every request's text diverges",
        answers=_ACCEPTANCE, evidence=_acceptance_table),
    Prediction(
        "01-relay", "relay-0.9.2", "guess_relay",
        "one token, the last the last stage emitted for A (`␣`); the drafts travel separately, in "
        "scheduled_spec_decode_tokens",
        "claim 1 is partly true: under PP the scheduler relays in new_token_ids only the last sampled token "
        "(vLLM v0.9.2, scheduler.py, _make_cached_request_data), never drafts",
        answers=(r"new_token_ids for A:\s*'␣'", "One token, the last emitted", r"Partly true"),
        evidence=_relay("vllm-0.9.2")),
    Prediction(
        "01-add-request", "add-request", "guess_positions",
        "`tem` again: add_request copies prompt and output only (num_tokens is 11), so the drafts in the state are dropped",
        "claim 2 is false: vLLM v0.9.2's add_request (gpu_input_batch.py, lines 282-295) copies prompt and output "
        "token ids only, and its CachedRequestState has no field for drafts at all",
        answers=(r"num_tokens_no_spec = 11\s+num_tokens = 11", "Prompt and output only", r"\*\*False\.\*\*"),
        evidence=_add_request),
    Prediction(
        "01-first-break", "first-break-0.9.2", "guess_first_break",
        "invariant 3 (token history), at step 22, stage 0, request A",
        "a stale draft that happens to be right is accepted; the last stage then emits it, but the scheduler "
        "relays only the last token to stage 0: that is fault 2 (05)",
        answers=(r"invariant 3 \(token history\) violated at step 22",), evidence=_first_break_0_9_2),
    Prediction(
        "05-relay", "relay", "guess_relay",
        "just `e`: the recovered token, the last one emitted",
        "the accepted `␣s` never reach stage 0: the scheduler relays one token per decode",
        answers=(r"new_token_ids\['A'\] = 'e'", r"new_token_ids for A:\s*'e'", "Just `'e'`", r"accepted `' s'` never reach"),
        evidence=_relay("vllm-0.14")),
    Prediction(
        "05-fault2", "fault2", "guess_break",
        "invariant 3 (token history) at step 4, stage 0, request A, with invariant 2 (draft agreement) beside it",
        "stage 0 lacks `␣s`, so from position 11 its row is two places left: computed=13 counts the accepted "
        "drafts, no_spec=12 (what stage 0 holds) does not. Invariant 3 is the root; invariant 2 follows: the "
        "right drafts sit at positions 12 to 14, the step reads 14 to 16",
        answers=_FAULT2, figures=(r"plot_history\((half_fixed|step4)\b",), evidence=_fault2),
    Prediction(
        "08-draft-slots", "draft-slots", "slots_guess", "(the checker says)", "(the checker says)",
        answers=STALE, judge=_judge("check_draft_slots")),
    Prediction(
        "08-acceptance", "acceptance", "rates_guess", "(the checker says)", "(the checker says)",
        answers=_ACCEPTANCE, judge=_judge("check_acceptance")),
    Prediction(
        "08-fault2", "fault2", "fault2_guess", "(the checker says)", "(the checker says)",
        answers=_FAULT2, judge=_judge("check_fault2")),
    Prediction(
        "03-add-request", "draft-slots", "guess_slots",
        "`tem`, C's leftovers (\"The for sta-tem-ent\")",
        "add_request copies prompt and output, sets num_tokens and num_tokens_no_spec both to 11, and stops: "
        "the drafts in A's state are never written, so positions 11 to 13 keep what C left there. These are the "
        "forum thread's stale slots",
        answers=STALE, evidence=evidence.readded_rows),
    Prediction(
        "03-condense", "condense-rows", "guess_condense",
        "row 1, with D's leftovers (`s are raised when`) behind E's 9 tokens",
        "condense moves the highest occupied row (E, row 2) into the hole at row 1 and copies only its first "
        "num_tokens slots (vLLM v0.9.2, gpu_input_batch.py, condense, line 543), so what D left stays behind "
        "E, and row 2 keeps a copy of E nobody owns. A moved request keeps its drafts only if num_tokens "
        "counts them",
        answers=(r"def␣f\(x\):s␣are", r"[Rr]ow 1, with D's leftovers"), evidence=evidence.condensed_rows),
    Prediction(
        "03-prepare-inputs", "prepare-inputs", "guess_notices",
        "no: it gathers token_ids_cpu[row, position] for the scheduled positions and never reads num_tokens, "
        "so stage 0 embeds `a t e m` for A",
        "the last stage gathers the same way, and its rejection sampler takes the drafts to verify from those "
        "inputs: under vllm-0.9.2 stage 1 verified `tem` and `e␣r`, C's and D's leftovers, not the "
        "scheduler's drafts; under `all`, the real ones",
        answers=(r"(does not|doesn't|never) (notice|check)", r"verified \{'A': 'tem'"),
        evidence=evidence.gathered_at_step2),
    Prediction(
        "04-second-batch", "second-batch", "guess_second_batch",
        "none: the first batch takes everyone, and nothing overlaps; a second batch can hold only other requests",
        "a decode whose drafts all fit is not rescheduled while it is in flight (a chunked prefill with prompt "
        "left, or a decode none of whose drafts fit, is: vLLM v0.9.2, vllm/v1/core/sched/scheduler.py "
        "230-235 and 301-310, from reading the code). With C and D one step later the halves alternate, "
        "A B / C D, as in the thread",
        answers=(r"second batch (can )?holds? (only )?\*?other\*? requests", "None: the first takes everyone",
                 r"0:ABCD 2:ABCD"),
        evidence=evidence.second_batch),
    Prediction(
        "04-serial-idle", "serial-idle", "guess_idle",
        "half the time each: one stage works while the other waits",
        "with one batch in flight a batch leaves stage 1 before the next enters stage 0. The tick counts stay "
        "close because the scheduler then puts all four requests in each batch from step 1 on (there is no "
        "other batch to leave them for): fewer, larger batches, and ticks count batch-stages, not tokens",
        answers=(r"[Hh]alf the time each", r"idle stage 0 50%"), evidence=evidence.serial_idle),
    Prediction(
        "04-overlap", "overlap-cost", "guess_overlap",
        "filling and draining the pipeline, and the messages between stages (the thin gaps); on a loaded "
        "machine the two stages cannot run at once, and the ratio can fall below 1",
        "the ideal assumes both stages busy all the time on cores of their own. Above 2.0 is noise (the cell "
        "says so): read it as about 2x. The noise line says how far the same work moved from run to run. On "
        "minispec's 2-core machine with nothing else running it gave 1.5-1.7x (benchmarks/bench_pipeline.py: "
        "a median of 1.70)",
        answers=(r"[Ff]illing and draining",), evidence=evidence.overlap_measured),
    Prediction(
        "04-rows-step2", "rows-step2", "guess_rows",
        "A and B are back in rows 0 and 1, which C and D held at step 1: each stage removes the other batch "
        "and re-adds this one, every step",
        "each stage's _update_states first removes the requests not scheduled now (vLLM v0.9.2, "
        "gpu_model_runner.py 387-400), and add_request copies prompt and output, not the drafts: fault 1 "
        "(01_the_thread)",
        answers=(r"re-add(ed|s)?\b[^.\n]{0,40}every step", r"Removed and re-added"), evidence=evidence.rows_each_step),
    Prediction(
        "06-same-inputs", "same-inputs", "guess_step",
        "not at step 2: both stages read `atem` there, so they agree, both wrong; it first fires at step 22 "
        "(fault 2)",
        "each stage has its own persistent batch, but both re-added A into the row C had just left, so both "
        "read the same stale `tem`. An invariant that compares copies with each other misses every fault that "
        "corrupts all copies alike; the checker's invariants compare each stage with the scheduler, which "
        "holds the truth (all_token_ids, scheduled_spec_decode_tokens)",
        answers=("both stages read `atem`", "they agree, both wrong", "both read the same stale",
                 r"per stage: \{0: 'atem', 1: 'atem'\}", r"[Oo]nly at step 22"),
        evidence=evidence.copies_compared),
    Prediction(
        "06-fault2", "fault2", "guess_break",
        "invariant 3 (token history) at step 4, stage 0, request A, with invariant 2 beside it; the stages "
        "disagree there, so our own invariant breaks too",
        "fix 1 writes the drafts, but stage 0 was relayed one token where the last stage accepted two "
        "drafts and sampled a third: its copy is short and its row shifted. Invariants 4 and 5 always hold: "
        "counts right, contents wrong",
        answers=_FAULT2 + (r"\b44 breaks; first at step 4",), evidence=evidence.offline_checks),
    Prediction(
        "06-fix2-only", "fix2-only", "guess_fix2_only",
        "{2}: draft agreement breaks at step 2, as with no fix at all; the token history stays whole",
        "fix 2 keeps stage 0's history whole, but without fix 1 a re-added row's draft slots are still stale. "
        "Fix 1 alone breaks 3, and 2 with it (the shifted row puts wrong tokens in the draft slots); both "
        "fixes: nothing. Our own invariant never sees fault 1: with fix 2 only it holds",
        answers=(r"fix 2 only[^\n]*\{?3\}?", r"Fix 2 alone:\*\* fault 1's stale slots break 2"),
        evidence=evidence.bisected),
    Prediction(
        "06-smallest", "smallest", "guess_requests",
        "two: A, then B one step later, two prompt tokens each",
        "A's first decode is re-added into the row B used a step before, and nothing writes its drafts: stage "
        "0 embeds whatever that row held past B's tokens (here zeros, never written), not the drafts the "
        "scheduler sent. One request alone never leaves its row, and requests that all arrive at step 0 go "
        "into one batch: two requests one step apart are the smallest that alternate",
        answers=("B: 2 tokens at step 1", "Two: A, then B"), figures=(r"trace_stepper\(",),  # any stepper of its schedule
        evidence=evidence.smallest_break),
    Prediction(
        "06-rule-misses", "rule-misses", "guess_missed",
        "`v1-move-without-drafts` and `v2-slot-reuse`; the invariants catch all three with two requests",
        "a row moved without its drafts costs PP 1 as much as PP 2, and the thread's four requests have four "
        "rows, so no slot is ever reused. An acceptance rate says how much a fault costs on one workload, not "
        "whether it is there",
        answers=(r"missed: \d\.\d\d vs", r"[Tt]he rule misses two"), evidence=evidence.rule_against_invariants),
    Prediction(
        "07-draft-slots", "draft-slots", "guess_slots",
        "without fix 1 `tem` (from C's prompt, \"The for sta-tem-ent\"); with it ` st`, the scheduled drafts",
        "0.9.2's add_request copies prompt and output only; 0.14.0 also writes the scheduled drafts on re-add "
        "(PR #31944). Fault 2 stays: on non-last ranks 0.14.0 (gpu_model_runner.py lines 987-1001) still "
        "extends its copy from the one-token relay",
        answers=STALE, evidence=evidence.draft_slots_by_preset),
    Prediction(
        "07-vllm-0.9.2", "draft-slots", "guess_slots",
        "vLLM 0.9.2's own code leaves `tem` in A's draft slots too, as minispec's \"vllm-0.9.2\" does",
        "only vLLM's InputBatch and GPUModelRunner._update_states ran, ahead of time, on minispec's recorded "
        "schedule (make vllm-check); what prints is their stored result, the scheduled drafts after `|`",
        answers=STALE, evidence=evidence.vllm_stale_drafts),
    Prediction(
        "08-condense", "condense", "condense_guess", "(the checker says)", "(the checker says)",
        answers=(r"invariant 2 \(draft agreement\) violated at step 15, stage 0, request C",), judge=_judge_condense),
    Prediction(
        "09-v1-relay", "v1-relay", "guess_relay",
        "only `e`, the last token the last stage emitted",
        "V1's scheduler relays one token per decode (new_token_ids); stage 0 must keep the accepted `␣s` "
        "itself. Fault 2 of 05 was that bookkeeping missing",
        answers=(r"relays to stage 0 for A at step 4: 'e'", r"Only `'e'`"), evidence=evidence.relay_v1_v2),
    Prediction(
        "09-v2-broadcast", "v2-broadcast", "guess_broadcast",
        "`␣se` with num_sampled=3, num_rejected=1; at step 4 stage 0's slot for A has total_len=14 and "
        "num_computed_tokens=13",
        "A's slot ends as the scheduler's tokens do, and its count is total_len less one: `e` is the next "
        "input. C is mid-way: it ran stage 0 at step 3, so its count includes three drafts its history "
        "lacks until step 3's broadcast, applied at step 5",
        answers=(r"num_sampled=3", r"num_rejected=1\b"), evidence=evidence.broadcast_and_slots),
    Prediction(
        "09-v2-stale-drafts", "v2-stale-drafts", "guess_stale_drafts",
        "invariant 2 (draft agreement), at step 2, stage 0, request A: stage 0 embeds `<unk><unk><unk>`",
        "`<unk>` is token id 0, the tokenizer's unknown token: the slots' zeroed drafts. Fault 1's first "
        "violation in 01, again. The fix, PR #50514 (vLLM 0.30.0), broadcasts the drafts",
        answers=(r"stage 0's drafts\s+'<unk>", r"embeds `<unk><unk><unk>`"),
        evidence=evidence.fault_run("v2-stale-drafts")),
    Prediction(
        "09-v2-optimistic-count", "v2-optimistic-count", "guess_count",
        "14, one too many (the scheduler's is 13): the rejected draft is never given back",
        "every later token sits one position too far. vLLM's own V2 gives rejected drafts back by design "
        "(since PR #42187); RFC #44697 found the same gap in its V1 runner",
        answers=(r"got\s+14\b", r"num_computed_tokens=14", r"one position too far"),
        evidence=evidence.fault_run("v2-optimistic-num-computed")),
    Prediction(
        "10-placeholders", "placeholders", "guess_placeholders",
        "only A's 10 prompt tokens, and drafts [-1, -1, -1]: placeholders",
        "num_output_placeholders=5 counts step 0's token and this step's four. Stage 0 never reads them: it "
        "ran step 2 on `a` and `␣st`, which the last stage broadcast after step 0; the scheduler learns them "
        "when the output comes back. `at most 3`: under async scheduling vLLM keeps one batch more in flight "
        "than there are stages",
        answers=(r"drafts \[-1, -1, -1\]", r"holds 10 of A's tokens", r"num_output_placeholders=5"),
        evidence=evidence.placeholders),
    Prediction(
        "10-posted-twice", "posted-twice", "guess_posted_twice",
        "the receive stage 0 posted for step 1's sampled tokens ([2, 4]) takes the copy of step 0's drafts "
        "([2, 3]): invariant 7 reports the sender at step 0, the receiver expecting step 1",
        "the copy sits at the same place on the channel as step 1's sampled tokens, so every later message "
        "would be one off. NCCL sends no header; in PR #56956's words, \"double-posting misaligned the recv "
        "FIFO and hung the pipeline\". Async scheduling is not needed for it; more batches in flight mean "
        "more messages to shift",
        answers=(r"the sender was at step 0", r"expected \[2, 4\] torch\.int64 of step 1"),
        evidence=evidence.fault_run("v2-drafts-posted-twice")),
    Prediction(
        "10-placeholders-step4", "placeholders", "guess_placeholders",
        "at step 4 it holds 11 of A's tokens (step 0's came back); step 2's four are still placeholders and "
        "four more come on top: num_output_placeholders=8, drafts [-1, -1, -1] again",
        "a request in flight keeps being scheduled ahead; each step adds its scheduled tokens as placeholders "
        "until that step's output comes back",
        answers=(r"drafts \[-1, -1, -1\]", r"num_output_placeholders=8"), evidence=evidence.placeholders_at_step4),
    Prediction(
        "10-posted-twice-async", "posted-twice", "guess_posted_twice",
        "with async scheduling on, the copy lands in the same receive: step 1's sampled tokens",
        "three batches in flight put more messages on the channel, but the second copy of step 0's drafts still "
        "meets the next receive stage 0 posted",
        answers=(r"the sender was at step 0", r"expected \[2, 4\] torch\.int64 of step 1"),
        evidence=evidence.posted_twice_ahead),
    Prediction(
        "10-pairing-depth", "pairing-depth", "guess_rows",
        "at PP = 2 batch c's own rows (nothing caught); at PP = 3 the next batch's rows (invariant 3 caught)",
        "at PP = 2, (c - 2) % 2 == c % 2: the wrong slot is the right one, and the fault is masked. At PP = 3, "
        "A's payload goes to the next batch's rows, and A's history on stage 0 keeps a zero (<unk>). Tests that "
        "run only two stages never see it: test at three or more",
        answers=(r"wrong slot is the right one", r"batch c \+ 1", r"next batch's rows", r"nothing caught"),
        figures=("plot_pairing",), evidence=_pairing),
    Prediction(
        "11-own-taps", "own-taps", "guess_own_taps",
        "at PP = 2 one, tap 3; at PP = 4 none: stages 0, 1 and 2 capture taps 1, 2 and 3",
        "tap i is the stream entering layer i, so the stage that runs layer i - 1 captures it. The drafter lives on "
        "the last stage, which runs only the last layers: from PP = 3 on it captures none of the taps it reads, and "
        "each must travel to it with the hidden states",
        answers=(r"computes [01] of 3 taps", r"at PP = 4 none", r"PP = 2 one, tap 3"),
        figures=(r"plot_tap_stages\(",), evidence=_own_taps),
    Prediction(
        "11-taps-dropped", "taps-dropped", "guess_taps",
        "the output stays the same; acceptance falls from 51.3 % to 28.3 % at PP = 2 (5.6 % from PP = 3 on); "
        "invariant 9 (hidden-state hand-over) at step 0, stage 1, request A",
        "the drafter only proposes: the target verifies every draft, so zeros in place of two taps cost accepted "
        "drafts, never a wrong token. Only a check of the hand-over itself (invariant 9: the tap handed over is the "
        "one its stage computed) sees it, at the first forward. At PP = 1 the last stage owns every tap: masked",
        answers=(r"invariant 9 \(hidden-state hand-over\) violated", r"\b28\.3 ?%", r"output stays the same"),
        evidence=_taps_dropped),
    Prediction(
        "11-tree-kv", "tree-kv", "guess_tree_kv",
        "node (1,)'s draft, stored at position 11: a rejected node, left in the place position 12 is committed to; "
        "and the output changes",
        "the tree's nodes were written to KV places 11 to 15 in breadth-first order. The accepted (0, 0) is in place "
        "13; only a stage that compacts moves it into place 12. Stage 0 did not, so its later tokens attend to a "
        "rejected draft at the wrong position: its hidden states change, and so does what the last stage computes "
        "from them. Unlike a dropped tap, this is the target's own state, and no verification guards it",
        answers=(r"got token \d+ stored at 11", r"node \(1,\)'s draft, stored at position 11", r"\bthe output changes"),
        figures=(r"plot_tree_kv\(",), evidence=_tree_kv),
)}


def reveal(prediction_id: str, guess=_UNSET) -> None:
    """Reveal one of ``PREDICTIONS`` (after a guess is made). It lives beside the catalogue, so
    the mechanism (``minispec.lab.prediction``) never imports the questions it serves."""
    if prediction_id not in PREDICTIONS:
        raise ValueError(f"reveal({prediction_id!r}): expected one of {sorted(PREDICTIONS)}")
    show(PREDICTIONS[prediction_id].screen(guess))
