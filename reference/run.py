"""The check: minispec's runs, vLLM's code on the same schedules, and the verdicts.

``check(num_random)`` runs every scenario under each preset in minispec (in
this process), hands the recorded schedules to one subprocess per vLLM release
(``worker.py`` in the environment ``environment.py`` builds), compares the
buffers stage-step by stage-step and returns one ``CheckRow`` per release,
preset and scenario; then replays the ``vllm-0.9.2`` runs into vLLM 0.9.2's own
``Scheduler`` (``scheduler_check``). ``PAIRINGS`` says which must be equal on every
stage-step and which must differ (so the check cannot pass vacuously).

vLLM twin: none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from minispec.instruments.trace import RowPath
from minispec.lab.experiments.scenarios import forum_thread
from minispec.lab.experiments.schedule import Schedule, run_schedule
from reference import environment
from reference.capture import Capture, capturing
from reference.compare import Comparison, Difference, compare
from reference.reference_schedules import reference_schedule
from reference.scheduler_check import SchedulerRow, check_scheduler

WORKER = Path(__file__).with_name("worker.py")
THREAD, RANDOM = "thread", "random"


def resumes_holding_a_row(capture: Capture) -> bool:
    """A request resumed from preemption while its row was still in every stage's batch: it was
    in the last executed batch before it resumed (minispec's scheduler preempted it in a schedule
    with nothing to execute, which no stage runs, so no stage removed its row). vLLM 0.9.2 keeps
    that row and appends the new blocks to it; minispec evicts it first under every preset, as
    0.14.0 does (``minispec/v1/worker/gpu_model_runner.py``'s module docstring)."""
    executed = sorted({ss.step for ss in capture.stage_steps})
    for before, step in zip(executed, executed[1:]):
        cached = capture.schedules[step]["cached"]
        resumed = {r for r, flag in zip(cached["req_ids"], cached["resumed_from_preemption"]) if flag}
        if resumed & set(capture.schedules[before]["num_scheduled_tokens"]):
            return True
    return False


@dataclass(frozen=True)
class Pairing:
    release: str
    preset: str
    scenario: str
    expect_equal: bool
    why: str
    # runs a documented departure applies to: expected to differ, counted apart, never equal-required
    departs: Callable[[Capture], bool] | None = None
    departure: str = ""


PAIRINGS = (
    Pairing("0.9.2", "vllm-0.9.2", THREAD, True, "minispec mirrors 0.9.2"),
    Pairing("0.9.2", "vllm-0.9.2", RANDOM, True, "minispec mirrors 0.9.2", resumes_holding_a_row,
            "a request resumed while it held a row: minispec evicts it, 0.9.2 appends to it"),
    Pairing("0.14.0", "vllm-0.14", THREAD, True, "minispec mirrors 0.14.0's runner"),
    Pairing("0.14.0", "vllm-0.14", RANDOM, True, "minispec mirrors 0.14.0's runner"),
    Pairing("0.9.2", "vllm-0.14", THREAD, False, "fix 1 is not in 0.9.2"),
    Pairing("0.14.0", "vllm-0.9.2", THREAD, False, "0.14.0 has fix 1"),
    Pairing("0.14.0", "all", THREAD, False, "fix 2 is not in 0.14.0"),
    Pairing("0.33.0", "vllm-0.14", THREAD, True, "0.33.0's _update_states is 0.30.0's: fix 1 in, fault 2 not fixed"),
    Pairing("0.33.0", "vllm-0.14", RANDOM, False, "0.33.0 writes the relay from num_tokens_no_spec on (PR #41133, "
            "gpu_model_runner.py 1459-1479), which minispec leaves out"),
    Pairing("0.33.0", "vllm-0.9.2", THREAD, False, "0.33.0 has fix 1"),
)


@dataclass
class ScenarioRun:
    """One scenario under one preset in minispec: every run's capture, by name."""

    scenario: str
    preset: str
    captures: dict[str, Capture] = field(default_factory=dict)
    schedules: dict[str, Schedule] = field(default_factory=dict)  # random runs: what each one was


def run_minispec(scenario: str, preset: str, num_random: int) -> ScenarioRun:
    out = ScenarioRun(scenario, preset)
    with capturing() as captures:
        if scenario == THREAD:
            forum_thread(preset)
            names = ["thread"]
        else:
            schedules = [reference_schedule(seed) for seed in range(num_random)]
            for s in schedules:
                run_schedule(s, preset)
            names = [s.name for s in schedules]
            out.schedules = {s.name: s for s in schedules}
    out.captures = dict(zip(names, captures))
    return out


def coverage(run: ScenarioRun) -> dict[str, int]:
    """What a scenario's runs exercised, counted."""
    schedules = list(run.schedules.values())
    steps = [step for c in run.captures.values() for step in c.trace.steps]
    rows = [row for step in steps for stage in step.stages for row in stage.rows]
    stopped = sum(out[-1] in s.stop_token_ids for name, s in run.schedules.items()
                  for out in run.captures[name].trace.outputs.values() if out)
    return {
        "runs": len(run.captures),
        "with 2 stages": sum(c.pipeline_parallel_size == 2 for c in schedules),
        "with 3 stages": sum(c.pipeline_parallel_size == 3 for c in schedules),
        "ngram": sum(c.method == "ngram" for c in schedules),
        "draft_model": sum(c.method == "draft_model" for c in schedules),
        "stage-steps": sum(len(c.stage_steps) for c in run.captures.values()),
        "prefill chunks": sum(s.schedule.num_computed_tokens[r] + n < s.schedule.num_prompt_tokens[r]
                              for s in steps for r, n in s.schedule.num_scheduled_tokens.items()),
        "resumed after preemption": sum(sum(c.schedules[s]["cached"]["resumed_from_preemption"])
                                        for c in run.captures.values() for s in c.schedules),
        "re-added rows with drafts": sum(r.path == RowPath.READDED and r.num_drafts > 0 for r in rows),
        "requests ended by a stop token": stopped,
    }


def run_jobs(release: str, worker: Path, jobs: dict[tuple[str, str, str], dict], **options) -> tuple[dict, dict]:
    """``jobs``, keyed (scenario, preset, run name), through ``worker`` in
    ``release``'s environment, in one subprocess; returns the worker's provenance
    and its results by the same keys."""
    data = environment.run_worker(release, worker, {**options, "jobs": {"|".join(k): j for k, j in jobs.items()}})
    return data["provenance"], {tuple(k.split("|", 2)): v for k, v in data["results"].items()}


def run_vllm(release: str, runs: list[ScenarioRun]) -> tuple[dict, dict[tuple[str, str, str], list[dict]]]:
    """Every capture of ``runs`` through ``release``'s own code; returns its
    provenance and, per (scenario, preset, run name), its stage-steps."""
    jobs = {(r.scenario, r.preset, name): c.job() for r in runs for name, c in r.captures.items()}
    return run_jobs(release, WORKER, jobs, version=release)


class Verdict:
    """A row's verdict: its ``comparison`` is all equal, or not, as its ``pairing`` expects."""

    pairing: Pairing
    comparison: Comparison

    @property
    def ok(self) -> bool:
        equal = self.comparison.equal == self.comparison.total
        return equal if self.pairing.expect_equal else not equal

    @property
    def first(self) -> Difference | None:
        return self.comparison.first


@dataclass
class CheckRow(Verdict):
    pairing: Pairing
    runs: int
    runs_equal: int
    comparison: Comparison  # all runs' stage-steps added up
    first_run: str | None  # the run holding the first difference
    first_buffers: dict | None  # vLLM's buffers at that stage-step
    provenance: dict
    vllm_steps: dict[str, list[dict]]  # run name -> vLLM's stage-steps
    departing: list[str] = field(default_factory=list)  # runs left out: the pairing's departure applies


def _row(pairing: Pairing, run: ScenarioRun, results: dict, provenance: dict) -> CheckRow:
    total = equal = runs_equal = 0
    differences, first_run, first_buffers, departing = [], None, None, []
    for name, capture in run.captures.items():
        if pairing.departs is not None and pairing.departs(capture):
            departing.append(name)
            continue
        theirs = results[(run.scenario, run.preset, name)]
        c = compare([s.__dict__ for s in capture.stage_steps], theirs)
        total, equal, runs_equal = total + c.total, equal + c.equal, runs_equal + (c.equal == c.total)
        if c.differences and first_run is None:
            first_run = name
            first_buffers = next(r["buffers"] for r in theirs if (r["step"], r["stage"]) == (c.first.step, c.first.stage))
        differences += c.differences
    return CheckRow(pairing, len(run.captures) - len(departing), runs_equal, Comparison(total, equal, differences),
                    first_run, first_buffers, provenance, {n: results[(run.scenario, run.preset, n)] for n in run.captures},
                    departing)


@dataclass
class CheckResult:
    rows: list[CheckRow]
    runs: dict[tuple[str, str], ScenarioRun]  # (scenario, preset) -> minispec's runs
    scheduler_rows: list[SchedulerRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows) and all(r.ok for r in self.scheduler_rows)


def check(num_random: int = 200, pairings=PAIRINGS, scheduler: bool = True) -> CheckResult:
    """The runner pairings; with ``scheduler``, also vLLM 0.9.2's Scheduler on
    the ``vllm-0.9.2`` runs of every scenario the pairings ran."""
    runs = {}
    for p in pairings:
        if (p.scenario, p.preset) not in runs:
            runs[(p.scenario, p.preset)] = run_minispec(p.scenario, p.preset, num_random)
    rows = []
    for release in dict.fromkeys(p.release for p in pairings):
        mine = [p for p in pairings if p.release == release]
        needed = list({(p.scenario, p.preset): runs[(p.scenario, p.preset)] for p in mine}.values())
        provenance, results = run_vllm(release, needed)
        rows += [_row(p, runs[(p.scenario, p.preset)], results, provenance) for p in mine]
    scheduler_rows = [check_scheduler(run) for (_, preset), run in runs.items()
                      if scheduler and preset == "vllm-0.9.2" and run.captures]
    return CheckResult(rows, runs, scheduler_rows)
