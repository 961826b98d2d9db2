"""What the reveals of notebooks 03, 04, 06, 07, 09 and 10 show, recomputed on the spot.

Each function yields a reveal's evidence (printed lines, figures) from the lab's own runs, so a
reveal needs no variable of an earlier cell: a notebook closed and reopened reveals the same.
``minispec.lab.predictions`` declares the questions these answer.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator


def _show(visible_spaces: bool = False):
    from minispec.lab.exercises.attempts import decoder

    return decoder(visible_spaces)


def _text(ids, decode) -> str:
    return "".join(decode(t) for t in ids)


# -- 03: the persistent batch, built by hand ---------------------------------------------------
def readded_rows() -> Iterator[str]:
    from minispec.lab.experiments.hand_batch import readded_batch
    from minispec.lab.viz.batch import render_batch

    cell = _show(visible_spaces=True)
    batch, row = readded_batch()
    no_spec = batch.num_tokens_no_spec[row]
    yield render_batch(batch, cell)
    yield (f"A is in row {row}; its draft slots {no_spec}..{no_spec + 2} hold "
           f"{_text(batch.token_ids_cpu[row, no_spec:no_spec + 3], cell)!r}")


def condensed_rows() -> Iterator[str]:
    from minispec.lab.experiments.hand_batch import cached_request, readded_batch
    from minispec.lab.viz.batch import render_batch

    cell = _show(visible_spaces=True)
    batch, _ = readded_batch()
    batch.add_request(cached_request("E", "def f(x):"))
    batch.remove_request("D")
    yield render_batch(batch, cell, title="before condense")
    batch.condense()
    yield render_batch(batch, cell, title="after condense")
    yield f"req_id_to_index: {batch.req_id_to_index}"


def gathered_at_step2() -> Iterator[str]:
    """The forum thread's step 2 under "vllm-0.9.2" and "all": what stage 0's ``_prepare_inputs``
    gathers, then what stage 1 verified and emitted."""
    from minispec.instruments.events import Event, EventKind
    from minispec.lab.experiments.scenarios import forum_thread_llm
    from minispec.lab.viz.batch import render_gather

    cell = _show(visible_spaces=True)
    verified = []
    for fixes in ("vllm-0.9.2", "all"):
        llm = forum_thread_llm(fixes)
        events = llm.engine.iter_events()
        next(e for e in events if e == Event(EventKind.STAGE, step=2, stage=0))
        step2 = next(b.scheduler_output for b in llm.engine.batch_queue if b.scheduler_output.step == 2)
        runner = llm.engine.executor.runners[0]
        yield f"preset {fixes}:\n" + render_gather(runner.input_batch, runner._prepare_inputs(step2), cell)
        next(e for e in events if e == Event(EventKind.STAGE, step=2, stage=1))
        last = runner.recorder.trace.step(2).stages[1]
        verified.append(f"preset {fixes}: stage 1 verified "
                        f"{ {r: _text(d, cell) for r, d in last.verified_drafts.items()} }, "
                        f"emitted { {r: _text(t, cell) for r, t in last.sampled.items()} }")
    yield from verified


# -- 04: the batch queue -----------------------------------------------------------------------
def second_batch() -> Iterator[str]:
    from minispec.lab.experiments.batch_queue import STAGGERED, batches, queued

    runs = {"all at step 0": queued(dict.fromkeys(STAGGERED, 0)), "C, D one step later": queued(STAGGERED)}
    for run in runs.values():
        run.engine.run()
    for name, run in runs.items():
        yield f"{name:20}: " + " ".join(batches(run)[:6])
    for name, run in runs.items():
        yield f"{name:20}: {len(batches(run))} batches in {run.timeline().makespan:.0f} ticks"


def serial_idle() -> Iterator[object]:
    from minispec.lab.experiments.batch_queue import STAGGERED, queued
    from minispec.lab.viz.gantt import plot_gantt

    runs = {"2 in flight": queued(STAGGERED), "1 in flight": queued(STAGGERED, max_concurrent_batches=1)}
    for name, run in runs.items():
        run.engine.run()
        tl = run.timeline()
        yield f"{name}: {tl.makespan:.0f} ticks, idle stage 0 {tl.idle_fraction(0):.0%}, stage 1 {tl.idle_fraction(1):.0%}"
    yield plot_gantt(runs["1 in flight"].timeline(), title="PP=2, one batch in flight", max_step=12)


def overlap_measured() -> Iterator[object]:
    from minispec.lab.experiments.overlap import first_batches, measure_overlap
    from minispec.lab.viz.gantt import plot_gantt_compare

    overlap = measure_overlap()  # the model lives in a temporary directory, removed afterwards
    yield str(overlap)
    if not overlap.stopped:
        yield plot_gantt_compare({f"{n} in flight, first 12 batches": (run.timeline, first_batches(run.timeline, 12))
                                  for n, run in overlap.runs.items()})


def rows_each_step() -> Iterator[str]:
    from minispec.lab.experiments.batch_queue import STAGGERED, queued, watch_rows

    yield from watch_rows(queued(STAGGERED))


# -- 06: invariants as a debugger -------------------------------------------------------------
def _thread(preset):
    from minispec.lab.exercises.checkers import thread_trace

    return thread_trace(preset)


def _own_invariant(name: str, trace) -> str:
    from minispec.lab.experiments.same_inputs import same_inputs_on_every_stage

    broken = same_inputs_on_every_stage(trace)
    return (f"{name:>20}: same inputs on every stage "
            + (f"first breaks at step {broken[0][0]}, request {broken[0][1]}" if broken else "holds"))


def copies_compared() -> Iterator[str]:
    from minispec.lab.experiments.same_inputs import same_inputs_on_every_stage, stage_inputs

    show, trace = _show(), _thread("vllm-0.9.2")
    broken = same_inputs_on_every_stage(trace)
    yield f"{len(broken)} break(s): {[(s, r, {k: _text(v, show) for k, v in seen.items()}) for s, r, seen in broken]}"
    yield f"step 2, request A, per stage: { {st.stage: _text(stage_inputs(st)['A'], show) for st in trace.step(2).stages} }"


def offline_checks() -> Iterator[str]:
    from minispec.instruments.invariants import check_trace
    from minispec.lab.experiments.same_inputs import same_inputs_on_every_stage

    for preset in ("vllm-0.9.2", "vllm-0.14", "all"):
        trace = _thread(preset)
        violations = check_trace(trace)
        counts = {i: sum(v.invariant == i for v in violations) for i in (2, 3, 4, 5)}
        accepted = f"{trace.stats['accepted_tokens']} of {trace.stats['draft_tokens']} drafts accepted"
        yield f"{preset:>10}: {len(violations):3} violations by invariant {counts}; {accepted}"
    yield f"the first of them under vllm-0.14: {check_trace(_thread('vllm-0.14'))[0].headline}"
    step, req_id, seen = same_inputs_on_every_stage(_thread("vllm-0.14"))[0]
    yield f"our own invariant on vllm-0.14: first breaks at step {step}, request {req_id}:"
    yield from (f"  stage {stage} gathered {_text(ids, _show())!r}" for stage, ids in seen.items())


def bisected() -> Iterator[str]:
    from minispec.instruments.invariants import check_trace
    from minispec.lab.experiments.scenarios import forum_thread
    from minispec.lab.viz.bisect import render_bisect
    from minispec.v1.worker.runner_fixes import RunnerFixes

    runs = {"neither (vllm-0.9.2)": _thread("vllm-0.9.2"), "fix 1 (vllm-0.14)": _thread("vllm-0.14"),
            "fix 2 only": forum_thread(RunnerFixes(readd_spec_tokens=False, sync_accepted_tokens=True)),
            "both (all)": _thread("all")}
    yield render_bisect({name: check_trace(trace) for name, trace in runs.items()}) + "\n"
    yield from (_own_invariant(name, trace) for name, trace in runs.items())


SMALLEST_START = {"step": 2}  # where 06's stepper opens: A's first decode, the break


def smallest_break_runs():
    """The explorer's smallest schedule that breaks ``"vllm-0.9.2"``, run under that preset and
    under every fix: the exploration, the runs and their decoder. 06's reveal steps through these
    runs and the site's frames (``tools/stepper_frames.py``) are drawn from the same ones."""
    from minispec.lab.explorer.explorer import explore
    from minispec.lab.viz.stepper import schedule_runs
    from minispec.lab.viz.text import char_decoder

    found = explore({"fixes": "vllm-0.9.2"})
    runs = schedule_runs(found.counterexample.schedule,
                         {preset: {"fixes": preset} for preset in ("vllm-0.9.2", "all")})
    return found, runs, char_decoder(found.counterexample.tokenizer, visible_spaces=True)


def smallest_break() -> Iterator[object]:
    """The first breaking schedule, printed, then in the stepper: the stepper shows its two
    requests, so it is part of the reveal, never on screen before the guess."""
    from minispec.lab.viz.exploration import render_counterexample
    from minispec.lab.viz.widgets import trace_stepper

    found, runs, decode = smallest_break_runs()
    yield f"schedule {found.schedules_run} of the scope is the first to break:"
    yield render_counterexample(found.counterexample)
    yield "the same schedule, step by step (switch the preset to `all` to see it fixed):"
    yield trace_stepper(runs, decode=decode, **SMALLEST_START)


MUTANTS_SHOWN = ("v1-readd-no-drafts", "v1-move-without-drafts", "v2-slot-reuse")


def rule_against_invariants() -> Iterator[object]:
    from minispec.lab.explorer.explorer import Scope
    from minispec.lab.explorer.mutants import acceptance_catch, explorer_catch, mutant
    from minispec.lab.viz.catches import catch_table

    yield catch_table({name: {"invariants (explorer)": explorer_catch(mutant(name), Scope(max_requests=2)),
                              "vLLM's 95 % rule": acceptance_catch(mutant(name))} for name in MUTANTS_SHOWN},
                      slips={name: mutant(name).slip for name in MUTANTS_SHOWN})


# -- 07: vLLM's code read ----------------------------------------------------------------------
def draft_slots_by_preset() -> Iterator[str]:
    from minispec.lab.experiments.scenarios import forum_thread
    from minispec.lab.viz.text import render_stage

    for preset in ("vllm-0.9.2", "vllm-0.14"):
        step = forum_thread(preset, max_tokens=4).step(2)
        stage0 = next(st for st in step.stages if st.stage == 0)
        yield f"{preset:>10}: " + render_stage(stage0, step, _show()).splitlines()[1].strip()


def vllm_stale_drafts() -> Iterator[str]:
    from minispec.lab.records.artifact import load_artifact, render_moment

    yield render_moment(load_artifact()["moments"]["stale_drafts"], _show())


# -- 09 and 10: the 2026 family ----------------------------------------------------------------
def relay_v1_v2() -> Iterator[str]:
    from minispec.lab.experiments.scenarios import FIRST_DECODE, forum_thread, thread_schedule
    from minispec.lab.experiments.v2_watch import run_watched

    show, step4 = _show(), FIRST_DECODE + 2  # stage 0 next works on A two steps after its first decode
    v2 = run_watched(thread_schedule())
    scheduled = v2.trace.step(step4).schedule.all_token_ids["A"][-8:]
    yield f"the scheduler's tokens for A at step 4 end with {_text(scheduled, show)!r}"
    relayed = forum_thread("vllm-0.14").step(step4).schedule.new_token_ids["A"]
    yield f"V1 relays to stage 0 for A at step 4: {_text(relayed, show)!r}"


def broadcast_and_slots() -> Iterator[str]:
    from minispec.lab.experiments.scenarios import FIRST_DECODE, thread_schedule
    from minispec.lab.experiments.v2_watch import run_watched
    from minispec.lab.viz.slots import render_broadcast, render_slots

    v2 = run_watched(thread_schedule())
    yield render_broadcast(v2.broadcast(FIRST_DECODE), _show())
    yield render_slots(v2.slots[FIRST_DECODE + 2], _show(), req_ids=["A", "C"])


def fault_run(name: str) -> Callable[[], Iterator[str]]:
    """The evidence of a fault preset's reveal: the preset run, caught, and run again without it."""
    def lines():
        from minispec.lab.faults.reproduce import run_fault
        from minispec.lab.viz.faults import render_fault_run

        yield render_fault_run(run_fault(name), _show())
    return lines


def placeholders() -> Iterator[str]:
    from minispec.lab.experiments.async_scheduling import run_ahead
    from minispec.lab.experiments.scenarios import thread_schedule
    from minispec.lab.viz.placeholders import render_ahead

    ahead = run_ahead(thread_schedule())  # the four requests, async scheduling, watched (about 5 s)
    yield render_ahead(ahead.first_decode("A"), _show(), ahead.max_concurrent_batches)
    yield f"every output equals plain greedy decoding: {ahead.equals_greedy}"


def placeholders_at_step4() -> Iterator[str]:
    from minispec.lab.experiments.async_scheduling import run_ahead
    from minispec.lab.experiments.scenarios import thread_schedule
    from minispec.lab.viz.placeholders import render_ahead

    ahead = run_ahead(thread_schedule())
    yield render_ahead(ahead.step(4, "A"), _show(), ahead.max_concurrent_batches)


def posted_twice_ahead() -> Iterator[str]:
    """``v2-drafts-posted-twice`` with async scheduling on: the transport's error as the engine raises it."""
    import textwrap

    from minispec.distributed.parallel_state import MessageMismatch
    from minispec.lab.experiments.async_scheduling import run_ahead
    from minispec.lab.experiments.scenarios import thread_schedule

    try:
        run_ahead(thread_schedule(), faults="v2-drafts-posted-twice")
    except MessageMismatch as caught:
        yield textwrap.fill(str(caught), 96)
    else:
        yield "no MessageMismatch: the preset did not misalign a receive"
