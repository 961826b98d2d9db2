"""``generate`` is all-or-nothing for the engine's state (issue 9, part 1).

An exception can leave ``generate`` at any line: a ``KeyboardInterrupt`` from
the notebook's *Interrupt kernel*, an ``InvariantViolation``, a bug. Whatever
the line, the requests in the engine are aborted everywhere and the same ``LLM``
then generates exactly what a fresh one does, within a time limit.

The sweep counts the line events of minispec's own code during one whole run
(``sys.settrace``), then for each of ``n`` points spread evenly over that count
raises ``KeyboardInterrupt`` at that line in a fresh ``LLM`` and generates
again. The reference is a fresh ``LLM``'s uninterrupted run of the same
configuration; under ``"all"`` that run is greedy-equal to transformers
(``tests/test_greedy_equivalence.py``), under the faulty presets it is the
faulty output a fresh engine gives, and an aborted engine must give that too.
"""

from __future__ import annotations

import functools
import signal
import sys
from dataclasses import dataclass

import pytest

from minispec import LLM, SamplingParams

PROMPTS = ["The for statement ", "A class ", "Exceptions are raised ", "The import "]
ARRIVALS = [0, 0, 1, 1]  # two batches in flight under PP=2
PARAMS = SamplingParams(temperature=0, max_tokens=10)
# A run takes ~0.2 s in process; "mp" also starts its workers again (seconds on a
# shared machine). An unrecovered engine spins or waits for ever.
RECOVERY_LIMIT_S = {"uni": 20, "mp": 120}


def make_llm(preset: str, backend: str = "uni", check: bool = False) -> LLM:
    # 12 blocks of 8 for four requests of up to 32 tokens: preemption happens too.
    return LLM(pipeline_parallel_size=2, speculative_config={"method": "draft_model", "num_speculative_tokens": 3},
               fixes=preset, max_num_seqs=4, max_model_len=64, block_size=8, num_gpu_blocks=12,
               check_invariants=check, distributed_executor_backend=backend)


def tokens(outputs) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in outputs]


class LineInterrupt:
    """A ``sys.settrace`` hook that counts line events in minispec's own code and
    raises ``KeyboardInterrupt`` at event number ``at`` (``None``: only count)."""

    def __init__(self, at: int | None = None):
        self.at, self.count, self.where = at, 0, None

    def __call__(self, frame, event, arg):
        return self._line if "/minispec/" in frame.f_code.co_filename else None

    def _line(self, frame, event, arg):
        if event == "line":
            self.count += 1
            if self.count == self.at:
                self.where = f"{frame.f_code.co_filename.rsplit('/minispec/', 1)[1]}:{frame.f_lineno} " \
                             f"{frame.f_code.co_name}"
                raise KeyboardInterrupt  # Python then drops this hook, as after any error in one
        return self._line


def run_traced(llm: LLM, hook: LineInterrupt) -> None:
    sys.settrace(hook)
    try:
        llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)


@functools.lru_cache(maxsize=None)
def reference(preset: str, backend: str = "uni") -> tuple[list[list[int]], int]:
    """A fresh engine's tokens, and how many line events (in this process) its run takes."""
    with make_llm(preset, backend) as llm:
        hook = LineInterrupt()
        sys.settrace(hook)
        try:
            want = tokens(llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS))
        finally:
            sys.settrace(None)
    return want, hook.count


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


@dataclass
class Outcome:
    at: int
    where: str
    kind: str  # "ok", "hang", "raised", "wrong tokens"
    detail: str = ""


def interrupt_at(preset: str, at: int, backend: str = "uni", check: bool = False) -> Outcome:
    """Interrupt a fresh engine's run at line event ``at``, then generate again on it."""
    want, _ = reference(preset, backend)
    llm = make_llm(preset, backend, check)
    hook = LineInterrupt(at)
    try:
        run_traced(llm, hook)
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(RECOVERY_LIMIT_S[backend])
        try:
            got = tokens(llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS))
        except _Timeout:
            return Outcome(at, hook.where, "hang", f"> {RECOVERY_LIMIT_S[backend]} s")
        except Exception as e:  # noqa: BLE001 -- the outcome records it
            return Outcome(at, hook.where, "raised", f"{type(e).__name__}: {str(e)[:120]}")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        return Outcome(at, hook.where, "ok" if got == want else "wrong tokens")
    finally:
        llm.shutdown()


def sweep(preset: str, n: int, backend: str = "uni", check: bool = False, offset: float = 0.5) -> list[Outcome]:
    """``n`` interruption points spread evenly over one run's line events."""
    _, total = reference(preset, backend)
    return [interrupt_at(preset, int(total * (i + offset) / n) + 1, backend, check) for i in range(n)]


# -- the tests -----------------------------------------------------------------------------------

SWEEP = {"all": (14, 0.5), "vllm-0.14": (8, 0.25), "vllm-0.9.2": (8, 0.75)}  # points, where in each interval


@pytest.mark.slow
@pytest.mark.parametrize("preset", SWEEP)
def test_interrupt_sweep_in_process(preset):
    n, offset = SWEEP[preset]
    outcomes = sweep(preset, n, check=preset == "all")  # under "all" every invariant is checked live too
    assert all(o.where for o in outcomes), "every point lies inside the run"
    assert [o for o in outcomes if o.kind != "ok"] == []


@pytest.mark.slow
def interrupt_third_update(monkeypatch, llm) -> None:
    """``KeyboardInterrupt`` at the engine's third update (batches in flight), until ``monkeypatch.undo()``."""
    update, calls = llm.engine._update, []

    def interrupted_update(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return update(*args)

    monkeypatch.setattr(llm.engine, "_update", interrupted_update)


def test_interrupt_multiproc(monkeypatch):
    """In "mp" the abort stops the workers and the next call starts them again. One
    point, injected at an engine event (the third update, batches in the workers),
    because each worker start costs seconds; ``sweep(..., backend="mp")`` runs more."""
    llm = make_llm("vllm-0.9.2", "mp")
    try:
        interrupt_third_update(monkeypatch, llm)
        with pytest.raises(KeyboardInterrupt):
            llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)
        monkeypatch.undo()
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(RECOVERY_LIMIT_S["mp"])
        got = tokens(llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS))
    finally:
        signal.alarm(0)
        llm.shutdown()
    assert got == reference("vllm-0.9.2")[0]  # the in-process engine's: "mp" computes the same


def test_an_abort_leaves_nothing_behind():
    llm = make_llm("all", check=True)
    run_traced(llm, LineInterrupt(reference("all")[1] // 2))
    assert llm.scheduler.requests == {}  # aborted requests leave the scheduler, as finished ones do
    assert llm.scheduler.kv_cache_manager.num_free_blocks == llm.scheduler.kv_cache_manager.num_blocks
    assert not (llm.scheduler.running or llm.scheduler.waiting or llm.engine.batch_queue or llm.engine.arrivals)
    for runner in llm.engine.executor.runners:
        assert runner.requests == {} and runner.input_batch.num_reqs == 0
    assert llm.engine.executor.runners[-1].drafter.req_blocks == {}


def test_an_interrupted_abort_is_finished_by_the_next_call(monkeypatch):
    """A second Ctrl-C inside the abort itself: the next call completes the abort first."""
    llm = make_llm("vllm-0.14")
    executor = llm.engine.executor
    abort_all = executor.abort_all

    def interrupted_abort():
        monkeypatch.setattr(executor, "abort_all", abort_all)
        raise KeyboardInterrupt

    monkeypatch.setattr(executor, "abort_all", interrupted_abort)
    run_traced(llm, LineInterrupt(reference("vllm-0.14")[1] // 3))
    assert tokens(llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)) == reference("vllm-0.14")[0]


def test_an_invariant_violation_aborts_too():
    """Under the faulty preset the live checker raises mid-step; the engine is left clean
    and raises the same violation again on the next call, rather than hanging."""
    from minispec.instruments.invariants import InvariantViolation

    llm = make_llm("vllm-0.9.2", check=True)
    for _ in range(2):
        with pytest.raises(InvariantViolation, match="invariant 2"):
            llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)
        assert not llm.scheduler.has_unfinished_requests()
        assert llm.scheduler.kv_cache_manager.num_free_blocks == llm.scheduler.kv_cache_manager.num_blocks


def test_queued_requests_run_to_completion_as_generate_runs_them(monkeypatch):
    """``add_request`` then ``wait_for_completion`` (vLLM 0.30.0's ``enqueue`` then
    ``wait_for_completion``): the outputs ``generate`` gives, and the same clean abort."""
    llm = make_llm("all")
    interrupt_third_update(monkeypatch, llm)
    for prompt, arrival in zip(PROMPTS, ARRIVALS):
        llm.add_request(prompt, PARAMS, arrival)
    with pytest.raises(KeyboardInterrupt):
        llm.wait_for_completion()
    assert not llm.scheduler.has_unfinished_requests() and not llm.engine.arrivals
    monkeypatch.undo()
    queued = [llm.add_request(prompt, PARAMS, arrival) for prompt, arrival in zip(PROMPTS, ARRIVALS)]
    outputs = {o.request_id: o for o in llm.wait_for_completion()}
    assert sorted(outputs) == sorted(r.request_id for r in queued) and llm.wait_for_completion() == []
    assert [outputs[r.request_id].prompt for r in queued] == PROMPTS
    assert tokens(outputs[r.request_id] for r in queued) == reference("all")[0]
