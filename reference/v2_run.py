"""Model Runner V2's check: minispec's V2 runs, vLLM's V2 code on the same schedules.

``check(num_random, first_seed=0)`` runs the forum thread's schedule and
``num_random`` random ones, seeds from ``first_seed`` on (``reference_schedule``,
as V1's check), with ``model_runner="v2"`` under each preset (``FIXED``: no fault; ``v2-stale-drafts``;
``v2-broadcast-width``), hands the captures (``v2_capture``) to one subprocess
per vLLM release and sampler width (``v2_worker.py``), and compares every live
request slot of every stage-step (``compare.compare_until_stopped``).

The releases: 0.30.0 has PR #50514 (the draft broadcast and the fixed width);
0.29.0 has neither. With the sampler's own width (``"vllm"``), 0.29.0 stops at
its first broadcast of a batch without drafts, which is the width fault, before
any decode could embed a broadcast draft; run with a stand-in sampler that always
returns ``k + 1`` columns (``"k+1"``), it cannot hit the width fault and shows the
other. ``PAIRINGS`` says which pairings must be equal and which must differ.

When a non-last stage applies a broadcast is the one thing minispec's run decides
for vLLM's code: vLLM's FIFO takes each entry ``pp_size`` of the stage's steps
after its receive, which its asynchronous scheduler makes the step a request is
next scheduled; minispec's scheduler is synchronous, so minispec's runner takes
entries on first need (``minispec/v1/worker/gpu/pp_utils.py``, whose docstring
says why). The worker takes each entry when minispec's run took it
(``v2_worker.apply_broadcasts``), and what taking it does is vLLM's own. How often
the two timings part is measured (``V2Capture.departures``): the runs where they
do are listed as "timing departs" (the thread's do, at step 16, where A and B
finish).

vLLM twin: none.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from minispec.distributed.parallel_state import MessageMismatch
from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import run_schedule
from reference.compare import Comparison, compare_until_stopped
from reference.reference_schedules import reference_schedule
from reference.run import Verdict, run_jobs
from reference.v2_capture import V2Capture, capturing_v2

WORKER = Path(__file__).with_name("v2_worker.py")
THREAD, RANDOM = "thread", "random"
FIXED, STALE_DRAFTS, BROADCAST_WIDTH = "fixed", "v2-stale-drafts", "v2-broadcast-width"
SAMPLER_WIDTHS = {"vllm": "vLLM's", "k+1": "k + 1"}


@dataclass(frozen=True)
class Pairing:
    release: str
    sampler_width: str  # a key of SAMPLER_WIDTHS
    preset: str
    scenario: str
    expect_equal: bool
    why: str


PAIRINGS = (
    Pairing("0.30.0", "vllm", FIXED, THREAD, True, "minispec's V2 mirrors 0.30.0"),
    Pairing("0.30.0", "vllm", FIXED, RANDOM, True, "minispec's V2 mirrors 0.30.0"),
    Pairing("0.29.0", "vllm", BROADCAST_WIDTH, THREAD, True, "0.29.0 broadcasts the sampler's width"),
    Pairing("0.29.0", "vllm", BROADCAST_WIDTH, RANDOM, True, "0.29.0 broadcasts the sampler's width"),
    Pairing("0.29.0", "k+1", STALE_DRAFTS, THREAD, True, "0.29.0 broadcasts no drafts"),
    Pairing("0.29.0", "k+1", STALE_DRAFTS, RANDOM, True, "0.29.0 broadcasts no drafts"),
    Pairing("0.29.0", "vllm", FIXED, THREAD, False, "PR #50514's fixed width is not in 0.29.0"),
    Pairing("0.29.0", "k+1", FIXED, THREAD, False, "PR #50514's draft broadcast is not in 0.29.0"),
    Pairing("0.30.0", "vllm", STALE_DRAFTS, THREAD, False, "0.30.0 broadcasts the drafts"),
    Pairing("0.30.0", "vllm", BROADCAST_WIDTH, THREAD, False, "0.30.0 pads to k + 1"),
    Pairing("0.33.0", "vllm", FIXED, THREAD, True, "0.33.0 keeps 0.30.0's slots; the drafts restore in post_update"),
    Pairing("0.33.0", "vllm", FIXED, RANDOM, True, "0.33.0 keeps 0.30.0's slots; the drafts restore in post_update"),
    Pairing("0.33.0", "vllm", STALE_DRAFTS, THREAD, False, "0.33.0 broadcasts the drafts"),
    Pairing("0.33.0", "vllm", BROADCAST_WIDTH, THREAD, False, "0.33.0 sizes both ends from the batch's drafts"),
)
# The mismatched pairings on random schedules too: the long run's (``--v2-mismatched``), not CI's.
MISMATCHED_RANDOM = tuple(replace(p, scenario=RANDOM) for p in PAIRINGS if not p.expect_equal)


def run_minispec(scenario: str, preset: str, seeds: range) -> dict[str, V2Capture]:
    """Every run of ``scenario`` under ``preset`` (random: one per seed), by name. A
    run that a broadcast which does not fit stops (``v2-broadcast-width``) is kept
    up to there."""
    schedules = [thread_schedule()] if scenario == THREAD else [reference_schedule(s) for s in seeds]
    faults = None if preset == FIXED else preset
    with capturing_v2() as captures:
        for s in schedules:
            try:
                run_schedule(s, "all", model_runner="v2", faults=faults)
            except MessageMismatch:
                if preset != BROADCAST_WIDTH:
                    raise
    return {("thread" if scenario == THREAD else s.name): c for s, c in zip(schedules, captures)}


def run_vllm(release: str, sampler_width: str, runs: dict[tuple[str, str, str], V2Capture]) -> tuple[dict, dict]:
    """Every capture through ``release``'s V2 code in one subprocess; returns
    its provenance and, per (scenario, preset, run name), its stage-steps."""
    return run_jobs(release, WORKER, {key: c.job() for key, c in runs.items()}, sampler_width=sampler_width)


def unwaited_mismatch(mine: list[dict], theirs: list[dict], comparison: Comparison) -> bool:
    """Is ``comparison``'s one differing stage-step minispec's last, where its
    transport named a broadcast that did not fit and vLLM's code took the same
    entry off its FIFO without waiting on it (every row freed since its receive:
    0.29.0 ``pp_utils.py`` 110-113, the wait at 118)? minispec takes every entry
    in order, since its checked receive takes the message off the channel only
    then (``parallel_state.CheckedReceive``); vLLM's rank stalls there all the
    same, its broadcast stream behind the receive, and hangs at its next wait."""
    if not comparison.differences or not mine:
        return False
    last = mine[-1]
    where = {(d.step, d.stage) for d in comparison.differences}
    vllm = next((r["buffers"] for r in theirs if (r["stage"], r["step"]) == (last["stage"], last["step"])), None)
    return (where == {(last["step"], last["stage"])} and vllm is not None
            and last["buffers"]["broadcast_mismatch"] is not None
            and vllm.get("broadcast_unwaited") == last["buffers"]["broadcast_mismatch"])


@dataclass
class V2Row(Verdict):
    pairing: Pairing
    runs: int
    runs_equal: int
    timing_departs: list[str]  # runs where minispec took a broadcast entry at another step than vLLM's FIFO would
    comparison: Comparison  # every run's stage-steps, added up
    first_run: str | None
    provenance: dict
    vllm_steps: dict[str, list[dict]] = field(repr=False)
    # runs whose one difference is a misfit broadcast vLLM's code did not wait on (``unwaited_mismatch``)
    unwaited: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """As ``Verdict``'s, a run's ``unwaited`` stage-step set aside: there both
        sides have stalled on the same broadcast, and only minispec says so yet."""
        unexplained = self.comparison.total - self.comparison.equal - len(self.unwaited)
        return unexplained == 0 if self.pairing.expect_equal else unexplained > 0


def _row(pairing: Pairing, captures: dict[str, V2Capture], results: dict, provenance: dict) -> V2Row:
    total = equal = runs_equal = 0
    differences, first_run, departs, unwaited = [], None, [], []
    theirs_by_run = {name: results[(pairing.scenario, pairing.preset, name)] for name in captures}
    for name, capture in captures.items():
        mine = [s.__dict__ for s in capture.stage_steps]
        c = compare_until_stopped(mine, theirs_by_run[name])
        runs_equal += c.equal == c.total
        departs += [name] if capture.departures() else []
        unwaited += [name] if unwaited_mismatch(mine, theirs_by_run[name], c) else []
        total, equal = total + c.total, equal + c.equal
        if c.differences and first_run is None:
            first_run = name
        differences += c.differences
    return V2Row(pairing, len(captures), runs_equal, departs, Comparison(total, equal, differences), first_run,
                 provenance, theirs_by_run, unwaited)


@dataclass
class V2Result:
    rows: list[V2Row]
    runs: dict[tuple[str, str], dict[str, V2Capture]]  # (scenario, preset) -> minispec's runs

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


def check(num_random: int = 200, pairings=PAIRINGS, first_seed: int = 0) -> V2Result:
    """The pairings on the thread and on the random seeds ``first_seed`` to
    ``first_seed + num_random - 1``."""
    if first_seed < 0:
        raise ValueError(f"first_seed={first_seed}: expected a seed >= 0")
    seeds, runs = range(first_seed, first_seed + num_random), {}
    for p in pairings:
        if (p.scenario, p.preset) not in runs:
            runs[(p.scenario, p.preset)] = run_minispec(p.scenario, p.preset, seeds)
    rows = []
    for release, width in dict.fromkeys((p.release, p.sampler_width) for p in pairings):
        mine = [p for p in pairings if (p.release, p.sampler_width) == (release, width)]
        needed = {(p.scenario, p.preset, name): c for p in mine for name, c in runs[(p.scenario, p.preset)].items()}
        provenance, results = run_vllm(release, width, needed)
        rows += [_row(p, runs[(p.scenario, p.preset)], results, provenance) for p in mine]
    return V2Result(rows, runs)
