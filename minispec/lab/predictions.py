"""The notebooks' predictions: each question, what gives its answer away, and what its reveal shows.

Every evidence function recomputes from the thread's scenario (run once per session by
``thread_trace``), so a reveal needs nothing from earlier cells. ``tools/spoilers.py`` reads
``answers`` and ``figures`` from here. The mechanism is ``minispec.lab.prediction``. A notebook
imports ``reveal`` (``from minispec.lab.predictions import reveal``).

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

from minispec.lab.prediction import _UNSET, Prediction, show

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
    from minispec.config import DEFAULT_TARGET
    from minispec.lab.experiments.scenarios import PROMPTS
    from minispec.sampling_params import SamplingParams
    from minispec.transformers_utils.tokenizer import load_tokenizer
    from minispec.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    tokenizer = load_tokenizer(DEFAULT_TARGET)

    def state(req_id, prompt, output="", drafts=""):
        s = CachedRequestState(req_id, tokenizer.encode(prompt).ids, SamplingParams(), generator=None,
                               block_ids=[0], num_computed_tokens=0, output_token_ids=tokenizer.encode(output).ids)
        s.spec_token_ids = tokenizer.encode(drafts).ids
        return s

    batch = InputBatch(max_num_reqs=2, max_model_len=40, max_num_blocks_per_req=4)
    batch.add_request(state("C", PROMPTS["C"]))
    batch.remove_request("C")  # C's turn is over; its tokens stay
    row = batch.add_request(state("A", PROMPTS["A"], output="a", drafts=" st"))
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


def _judge(name: str):
    def check(guess):
        from minispec.lab.exercises import checkers

        return getattr(checkers, name)(guess)
    return check


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
        answers=STALE, figures=("plot_step_rows", "plot_strip_diff", "trace_stepper"), evidence=_draft_slots),
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
        "10-pairing-depth", "pairing-depth", "guess_rows",
        "at PP = 2 batch c's own rows (nothing caught); at PP = 3 the next batch's rows (invariant 3 caught)",
        "at PP = 2, (c - 2) % 2 == c % 2: the wrong slot is the right one, and the fault is masked. At PP = 3, "
        "A's payload goes to the next batch's rows, and A's history on stage 0 keeps a zero (<unk>). Tests that "
        "run only two stages never see it: test at three or more",
        answers=(r"wrong slot is the right one", r"batch c \+ 1", r"next batch's rows", r"nothing caught"),
        figures=("plot_pairing",), evidence=_pairing),
)}


def reveal(prediction_id: str, guess=_UNSET) -> None:
    """Reveal one of ``PREDICTIONS`` (after a guess is made). It lives beside the catalogue, so
    the mechanism (``minispec.lab.prediction``) never imports the questions it serves."""
    if prediction_id not in PREDICTIONS:
        raise ValueError(f"reveal({prediction_id!r}): expected one of {sorted(PREDICTIONS)}")
    show(PREDICTIONS[prediction_id].screen(guess))
