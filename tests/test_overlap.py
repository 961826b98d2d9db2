"""What the overlap benchmark and notebook 04 measure with: PP=2 "mp" pipelines, one per
setting (two batches in flight and one, by default), made through the engine arguments and run
alternately, on the shipped target (the random 52M model is the benchmark's, too slow to make in a test)."""

import os
import signal

import pytest
import torch

from minispec.config import DEFAULT_TARGET
from minispec.instruments.timeline import StageSpan, Timeline
from minispec.lab.experiments.overlap import (
    QUIET_MACHINE,
    Comparison,
    OverlapRun,
    compare_in_flight,
    first_batches,
    random_prompts,
    threads_per_stage,
)


def overlapped(timeline) -> int:
    """How many batches stage 0 started while stage 1 was still on an earlier one."""
    last = {s.step: s for s in timeline.spans if s.stage == 1}
    return sum(1 for s in timeline.spans if s.stage == 0
               and any(other.step < s.step and other.end > s.start for other in last.values()))


@pytest.mark.slow
def test_stages_overlap_with_two_in_flight_and_never_with_one():
    result = compare_in_flight(DEFAULT_TARGET, random_prompts(4, 64), max_tokens=8, rounds=2)
    assert result.stopped is None and result.cores >= 1 and result.load_before >= 0
    two, one = result.runs[2], result.runs[1]
    assert len(two.seconds) == len(one.seconds) == 2 and all(s > 0 for s in two.seconds + one.seconds)
    for run in (two, one):  # the timeline holds the last round only, both stages, in seconds
        tl = run.timeline
        assert tl.clock == "seconds" and {s.stage for s in tl.spans} == {0, 1}
        # one clock for all ranks (parallel_state._clock_origin); with one per rank, CI saw 0.7 ms over
        assert tl.makespan <= run.seconds[-1]
    assert overlapped(two.timeline) > 0  # how many depends on the load; one batch in flight can give none
    assert overlapped(one.timeline) == 0
    steps = sorted({s.step for s in two.timeline.spans})
    assert first_batches(two.timeline, 3) == steps[2]
    assert result.ratio == min(one.seconds) / min(two.seconds)


def comparison(one: float, two: float, load: float = 2.7) -> Comparison:
    return Comparison({2: OverlapRun(2, [two, two * 1.1]), 1: OverlapRun(1, [one, one * 1.2])}, load, 2, 1)


def test_the_verdict_says_slower_below_one_and_why():
    slow = comparison(one=0.87, two=1.0)
    assert slow.lines()[0] == (
        "the batch queue was 1.15x slower than one batch in flight (ratio 0.87; best of 2 runs each; load 2.7 on 2 "
        "cores before the run): other work shares the cores, so the two stages could not run at the same time and "
        "two batches only added handing over between them")
    assert "faster" not in str(slow)
    fast = comparison(one=1.55, two=1.0, load=0.3)
    assert fast.lines()[0] == ("the batch queue finished the same work 1.55x faster than one batch in flight "
                               "(ideal 2.0; best of 2 runs each; load 0.3 on 2 cores before the run)")
    assert fast.lines()[2:4] == ["  2 in flight: best 1.00 s (runs 1.00, 1.10)", "  1 in flight: best 1.55 s (runs 1.55, 1.86)"]
    assert fast.lines()[-1] == f"on a quiet machine: {QUIET_MACHINE}"
    assert "measured ahead of time (2026-11-30" in fast.lines()[-1]


MEASURE_UNTIL_INTERRUPTED = """
from minispec.config import DEFAULT_TARGET
from minispec.lab.experiments.overlap import compare_in_flight, random_prompts
if __name__ == "__main__":
    print("started", flush=True)
    print(compare_in_flight(DEFAULT_TARGET, random_prompts(8, 64), max_tokens=64, rounds=100), flush=True)
"""


@pytest.mark.slow  # starts worker processes and interrupts them: about 15 s
def test_interrupt_kernel_stops_the_measurement_in_a_few_lines(tmp_path):
    """SIGINT to the whole process group, as Jupyter's Interrupt Kernel sends it to a kernel
    (which runs in a session of its own): the worker ignores it, rank 0 aborts and shuts it
    down, and all that is printed is what was stopped."""
    import subprocess
    import sys
    import time

    script = tmp_path / "measure.py"
    script.write_text(MEASURE_UNTIL_INTERRUPTED)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout.readline() == "started\n"
        time.sleep(8)  # the worker started, warmed up, and rounds are running
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    lines = out.splitlines()
    # Where the interrupt lands depends on the machine's load (still starting the worker, or
    # in a round); either way it is one line saying what was stopped, then one about the worker.
    stopped = ("stopped: Interrupt Kernel stopped the measurement in round ",
               "stopped: Interrupt Kernel stopped the measurement while the pipeline started")
    assert lines[0].startswith(stopped), out
    assert len(lines) == 2 and "Traceback" not in out and "Process stage-1" not in out
    assert proc.returncode == 0


def test_threads_per_stage_is_undone_afterwards(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    with threads_per_stage():
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    with threads_per_stage(2):
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
    assert torch.get_num_threads() == before and "OMP_NUM_THREADS" not in os.environ


def test_a_ratio_above_the_ideal_says_it_is_noise():
    from minispec.lab.experiments.overlap import Comparison, OverlapRun

    above = Comparison({2: OverlapRun(2, [1.0]), 1: OverlapRun(1, [2.09])}, 3.2, 2, 1).verdict()
    assert above.startswith("the batch queue finished the same work 2.09x faster than one batch in flight "
                            "(1 run each; load 3.2 on 2 cores before the run): more than the ideal 2.0")
    assert "noise" in above and "about 2x" in above
    below = Comparison({2: OverlapRun(2, [1.0]), 1: OverlapRun(1, [1.7])}, 3.2, 2, 1).verdict()
    assert "ideal 2.0;" in below and "noise" not in below


def test_the_measurement_reports_its_own_noise():
    """The largest spread of one setting's runs, and whether a ratio that close to 1.0 is a gain."""
    small = comparison(one=1.55, two=1.0)  # runs 1.00, 1.10 and 1.55, 1.86: up to 20% apart
    assert small.noise == pytest.approx(0.2)
    assert small.lines()[1] == ("noise: the runs of one setting differed by up to 20% with the same work, "
                                "less than the ratio's distance from 1.0, so the difference is real")
    near = comparison(one=1.1, two=1.0)  # ratio 1.10, within the 20%
    assert near.lines()[1].endswith("so a ratio this close to 1.0 is no measured gain or loss")
    single = Comparison({2: OverlapRun(2, [1.0]), 1: OverlapRun(1, [1.7])}, 3.2, 2, 1)
    assert single.noise is None and single.lines()[1].startswith("noise: unknown, with one run each")


@pytest.mark.slow
def test_the_budget_stops_further_rounds_but_runs_one():
    result = compare_in_flight(DEFAULT_TARGET, random_prompts(4, 64), max_tokens=4, rounds=3, budget_s=0)
    assert [len(r.seconds) for r in result.runs.values()] == [1, 1]


def test_the_random_llama_is_made_without_transformers(tmp_path):
    """04's measured cell makes its model without ``import transformers`` (12 s of the cell at
    load 15); the checkpoint is a tied Llama of the asked-for sizes, as transformers writes one."""
    import json
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from minispec.lab.experiments.overlap import random_llama, "
            "num_params; p = random_llama(Path(sys.argv[1]), num_hidden_layers=2, hidden_size=64, "
            "intermediate_size=96, num_attention_heads=4, num_key_value_heads=4, vocab_size=101); "
            "print(num_params(p), 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    # embeddings 101×64 (lm_head tied: stored once) + per layer 4 attention 64×64, 3 MLP 64×96, 2 norms + final norm
    assert out.stdout.split() == [str(101 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 96 + 2 * 64) + 64), "False"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True


class FakeLLM:
    """Stands in for ``LLM``: records the engine arguments each pipeline was made with, and has no
    ``engine`` to set attributes on."""

    made: list[dict] = []

    def __init__(self, **kwargs):
        self.kwargs, self.spans = kwargs, []
        FakeLLM.made.append(kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def generate(self, prompts, params, arrival_steps=None):
        self.spans.append(StageSpan(0, len(self.spans), ("0",), 0.0, 1e-3))

    def timeline(self):
        return Timeline(2, clock="seconds", spans=self.spans)


def test_each_setting_is_a_pipeline_made_through_its_engine_arguments(monkeypatch):
    from minispec.lab.experiments import overlap

    FakeLLM.made = []
    monkeypatch.setattr(overlap, "LLM", FakeLLM)
    settings = {"async": dict(model_runner="v2", async_scheduling=True, max_concurrent_batches=3),
                1: dict(max_concurrent_batches=1)}
    result = compare_in_flight(DEFAULT_TARGET, random_prompts(4, 64), max_tokens=2, rounds=2, settings=settings)
    assert result.stopped is None
    assert [{k: m[k] for k in ("model_runner", "async_scheduling", "max_concurrent_batches") if k in m}
            for m in FakeLLM.made] == list(settings.values())
    assert all(m["pipeline_parallel_size"] == 2 and m["distributed_executor_backend"] == "mp" for m in FakeLLM.made)
    assert [r.in_flight for r in result.runs.values()] == [3, 1]
    assert all(len(r.seconds) == len(r.loads) == 2 for r in result.runs.values())
    # The default is notebook 04's: two in flight and one, keyed by the number.
    FakeLLM.made = []
    assert list(compare_in_flight(DEFAULT_TARGET, random_prompts(4, 64), 2, rounds=1).runs) == [2, 1]
    assert [m["max_concurrent_batches"] for m in FakeLLM.made] == [2, 1]
