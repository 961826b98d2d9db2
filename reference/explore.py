"""The explorer's schedules through vLLM's own state code: ``python -m reference explore``.

``explore_vllm(targets, scope)`` takes the schedules the small-scope explorer runs
(``minispec.lab.explorer.explorer.schedules``, smallest first), runs each in minispec
under the preset that mirrors a release (``TARGETS``), captures every stage-step as
``python -m reference`` does (``capture`` for V1, ``v2_capture`` for Model Runner V2),
replays them through that release's own ``InputBatch``/``_update_states`` (``worker.py``)
or V2 request state, ``PPHandler`` and ``post_update`` (``v2_worker.py``), and compares
every buffer after every stage-step. Runs go in chunks, one subprocess per release and
chunk, so memory stays bounded.

A schedule that differs is classed (``Divergence.kind``):

* a named departure (``DEPARTURES``: one of ``docs/checked_against_vllm.md``'s), by a
  predicate on the run;
* else a known fault: the schedule run again in minispec under each fault preset of the
  design (``candidates``) and replayed, the first preset whose run vLLM's code matches
  stage by stage (``classify``);
* else new.

The minimal counterexample of a class is its schedule with the fewest requests, then the
fewest steps (``Divergence.size``). Left out: V1 under asynchronous scheduling (``MODES``),
which no V1 release runs with pipeline parallelism, and the explorer's ``search`` past its scope.

vLLM twin: none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from minispec.distributed.parallel_state import MessageMismatch
from minispec.lab.experiments.schedule import Schedule, run_schedule
from minispec.lab.explorer.explorer import DEFAULT, Scope, schedules
from reference import run, v2_run
from reference.capture import capturing
from reference.compare import Comparison, compare
from reference.v2_capture import capturing_v2

V1, V2 = "V1", "V2"
# The scheduling each design is run under. No V1 release runs async scheduling with PP (0.9.2 has
# none; 0.14.0 and 0.33.0 refuse it: docs/checked_against_vllm.md), and V1's worker runs none of
# vLLM's async bookkeeping (worker.StandInRunner: use_async_scheduling False; PP + async relays
# through prev_sampled_token_ids, which it does not build); V2's replays minispec's stage-steps in the
# order they ran and takes each broadcast when minispec did (v2_worker.apply_broadcasts), async or not.
MODES = {V1: (False,), V2: (False, True)}


@dataclass(frozen=True)
class Target:
    """One release and design, and minispec's preset that mirrors it there."""

    release: str
    design: str  # V1 or V2
    preset: str  # V1: fixes=; V2: v2_run's FIXED or a fault preset
    sampler_width: str = "vllm"  # V2: a key of v2_run.SAMPLER_WIDTHS

    @property
    def label(self) -> str:
        return f"{self.release} {self.design} ({self.preset})"


TARGETS = (
    Target("0.9.2", V1, "vllm-0.9.2"), Target("0.14.0", V1, "vllm-0.14"), Target("0.33.0", V1, "vllm-0.14"),
    Target("0.29.0", V2, v2_run.BROADCAST_WIDTH), Target("0.30.0", V2, v2_run.FIXED),
    Target("0.33.0", V2, v2_run.FIXED),
)


# A target whose departure is recognised by comparing with another release on the same run:
# 0.33.0's V1 relay write holds where 0.14.0 is equal (``_holds_41133``).
NEEDS = {Target("0.33.0", V1, "vllm-0.14"): Target("0.14.0", V1, "vllm-0.14")}


def with_needed(targets) -> tuple[Target, ...]:
    """``targets``, each preceded by the one it is compared with (``NEEDS``), so that one is
    replayed first. Without 0.14.0, each of 0.33.0's relay-write divergences would be new."""
    out: list[Target] = []
    for target in targets:
        out += [t for t in (NEEDS.get(target), target) if t is not None and t not in out]
    return tuple(out)


def _holds_41133(target: Target, capture, comparison: Comparison, others: dict) -> bool:
    """0.33.0's V1 writes a non-last stage's relayed tokens over the span from
    ``num_tokens_no_spec`` to ``num_computed_tokens`` plus the relay, and never lowers
    ``num_tokens_no_spec`` (PR #41133; 0.33.0 ``gpu_model_runner.py`` 1459-1479), which
    minispec's ``vllm-0.14`` leaves out. So: 0.14.0 is equal on the same run, only a non-last
    stage's rows differ, in ``num_tokens_no_spec`` (vLLM's no lower; ``num_tokens`` with it, the
    drafts alike) or in token slots (``_relay_slots``, given the stage's previous step)."""
    last = capture.trace.pipeline_parallel_size - 1
    fourteen = others.get("0.14.0")
    if target.release != "0.33.0" or fourteen is None or fourteen.equal != fourteen.total:
        return False
    allowed = ("token_ids_cpu", "num_tokens_no_spec", "num_tokens")
    if any(d.buffer not in allowed or d.stage == last for d in comparison.differences):
        return False
    mine, theirs = others["buffers"]
    return all(_kept_longer(mine[key], theirs[key]) and _relay_slots(mine[key], theirs[key], _before(theirs, key))
               for key in {(d.step, d.stage) for d in comparison.differences})


def _before(steps: dict, key: tuple[int, int]) -> dict | None:
    """The buffers of the same stage's previous step, if it ran one."""
    earlier = [k for k in steps if k[1] == key[1] and k[0] < key[0]]
    return steps[max(earlier)] if earlier else None


def _kept_longer(mine: dict, theirs: dict) -> bool:
    """Each row's ``num_tokens_no_spec`` no lower in vLLM, and as many drafts on top."""
    return all(b >= a and tb - b == ta - a for a, b, ta, tb in zip(
        mine["num_tokens_no_spec"], theirs["num_tokens_no_spec"], mine["num_tokens"], theirs["num_tokens"]))


def _relay_slots(mine: dict, theirs: dict, before: dict | None = None) -> bool:
    """Each token slot where the rows differ
    - lies past minispec's ``num_tokens_no_spec`` (its history ends sooner);
    - or holds, in vLLM, the token of the next slot where the two agree: the relay holds one
      token, and the span also covers the drafts accepted the step before, so that one token
      fills them all (docs/vllm_0330_relay_write.md);
    - or lies below where vLLM's write started (its ``num_tokens_no_spec`` at the stage's
      previous step, ``before``) and holds what vLLM held there: 0.33.0 never rewrites those
      slots, where 0.14.0 rewrites from ``num_computed_tokens`` (a resumed request's chunk)."""
    ends = mine["num_tokens_no_spec"]
    for row, (a, b) in enumerate(zip(mine["token_ids_cpu"], theirs["token_ids_cpu"])):
        kept = _kept_row(theirs["req_ids"][row], before) if row < len(theirs.get("req_ids", ())) else None
        for i, (x, y) in enumerate(zip(a, b)):
            if x == y or (row < len(ends) and i >= ends[row]) or (kept and i < len(kept) and kept[i] == y):
                continue
            if next((v for u, v in zip(a[i + 1:], b[i + 1:]) if u == v), None) != y:
                return False
    return True


def _kept_row(req_id: str, before: dict | None) -> list[int] | None:
    """The request's tokens in vLLM at the stage's previous step, up to its ``num_tokens_no_spec``."""
    if before is None or req_id not in before["req_ids"]:
        return None
    row = before["req_ids"].index(req_id)
    return before["token_ids_cpu"][row][: before["num_tokens_no_spec"][row]]


def _unwaited(target: Target, capture, comparison: Comparison, others: dict) -> bool:
    """A V2 broadcast that did not fit, which vLLM's code took off its FIFO without waiting
    on it (``v2_run.unwaited_mismatch``)."""
    return target.design == V2 and others["unwaited"]


# Named departures: (name, applies to a run). Each is documented in docs/checked_against_vllm.md.
DEPARTURES: tuple[tuple[str, Callable], ...] = (
    ("departure: a request resumed while it held a row (minispec evicts it, 0.9.2 appends)",
     lambda t, c, comp, o: t.release == "0.9.2" and run.resumes_holding_a_row(c)),
    ("departure: PR #41133's relay write from num_tokens_no_spec (0.33.0), left out by vllm-0.14", _holds_41133),
    ("departure: a misfit broadcast vLLM's code never waited on (every row freed)", _unwaited),
)


def candidates(target: Target) -> tuple[str, ...]:
    """The fault presets a divergence of ``target`` is tried against, in order."""
    if target.design == V1:
        return tuple(p for p in ("vllm-0.14", "vllm-0.9.2", "all") if p != target.preset)
    from minispec.lab.faults.catalogue import EVERY_FAULT

    v2 = [name for name, f in EVERY_FAULT.items() if f.design == "v2" and "eagle" not in name]
    return tuple(p for p in (v2_run.FIXED, *v2) if p != target.preset)


@dataclass
class Divergence:
    index: int  # the schedule's place in the explorer's order
    schedule: Schedule
    comparison: Comparison
    kind: str = "new"

    @property
    def size(self) -> tuple:
        """Fewest requests, then fewest steps (last arrival plus tokens), then the explorer's order."""
        s = self.schedule
        return len(s.requests), max(r.arrival_step for r in s.requests) + s.max_tokens, self.index

    def describe(self) -> str:
        first = self.comparison.first
        return f"schedule {self.index} ({self.schedule.details}): {first.describe() if first else 'no difference'}"


@dataclass
class TargetResult:
    target: Target
    runs: int = 0
    runs_equal: int = 0
    stage_steps: int = 0
    stage_steps_equal: int = 0
    seconds: float = 0.0
    divergences: list[Divergence] = field(default_factory=list)

    def classes(self) -> dict[str, list[Divergence]]:
        out: dict[str, list[Divergence]] = {}
        for d in self.divergences:
            out.setdefault(d.kind, []).append(d)
        return out

    def minimal(self) -> dict[str, Divergence]:
        return {kind: min(ds, key=lambda d: d.size) for kind, ds in self.classes().items()}


def explorer_schedules(scope: Scope = DEFAULT, per_shape: int | None = None, limit: int | None = None,
                       modes: tuple[bool, ...] = (False,)) -> list:
    """(index, schedule) of the scope's schedules whose ``async_scheduling`` is among ``modes``
    (synchronous only, unless told), in the explorer's order, each named by its index;
    ``per_shape``: only the first that many of each engine shape."""
    out, seen = [], {}
    for index, s in enumerate(schedules(scope)):
        if s.async_scheduling not in modes:
            continue
        shape = (s.pipeline_parallel_size, s.num_gpu_blocks, s.max_num_batched_tokens, s.max_num_seqs,
                 s.async_scheduling)
        seen[shape] = seen.get(shape, 0) + 1
        if per_shape is None or seen[shape] <= per_shape:
            out.append((index, replace(s, name=f"schedule {index}", check_invariants=False)))
        if limit is not None and len(out) >= limit:
            break
    return out


def capture_runs(design: str, preset: str, batch: list) -> dict[str, object]:
    """Each schedule of ``batch`` run in minispec under ``preset``, captured, by name. A
    run that raises is kept up to where it stopped."""
    capturing_ = capturing if design == V1 else capturing_v2
    kwargs = {"fixes": preset} if design == V1 else {
        "fixes": "all", "model_runner": "v2", "faults": None if preset == v2_run.FIXED else preset}
    with capturing_() as captures:
        for _, s in batch:
            try:
                run_schedule(s, **kwargs)
            except MessageMismatch:
                pass  # v2-broadcast-width ends here; the capture holds the misfit
    return {s.name: c for (_, s), c in zip(batch, captures)}


def replay(target: Target, captures: dict) -> dict[str, list[dict]]:
    """Every capture through the target release's own code; its stage-steps by run name."""
    if target.design == V1:
        jobs = {("explore", target.preset, name): c.job() for name, c in captures.items()}
        _, results = run.run_jobs(target.release, run.WORKER, jobs, version=target.release)
    else:
        keyed = {("explore", target.preset, name): c for name, c in captures.items()}
        _, results = v2_run.run_vllm(target.release, target.sampler_width, keyed)
    return {name: steps for (_, _, name), steps in results.items()}


def comparison_of(design: str, capture, theirs: list[dict]) -> tuple[Comparison, bool]:
    """The run's comparison, and (V2) whether its one difference is an unwaited misfit."""
    mine = [s.__dict__ for s in capture.stage_steps]
    if design == V1:
        return compare(mine, theirs), False
    c = v2_run.compare_until_stopped(mine, theirs)
    return c, v2_run.unwaited_mismatch(mine, theirs, c)


def _depart(target: Target, capture, comparison: Comparison, others: dict) -> str | None:
    return next((name for name, applies in DEPARTURES if applies(target, capture, comparison, others)), None)


def explore_batch(targets, batch: list, results: dict[Target, TargetResult]) -> None:
    """One chunk of schedules under every target, tallied into ``results``."""
    by_run: dict[str, dict[str, Comparison]] = {}  # run name -> release -> its V1 comparison
    for (design, preset) in dict.fromkeys((t.design, t.preset) for t in targets):
        start = time.monotonic()
        captures = capture_runs(design, preset, batch)
        share = (time.monotonic() - start) / sum(1 for t in targets if (t.design, t.preset) == (design, preset))
        for target in (t for t in targets if (t.design, t.preset) == (design, preset)):
            start = time.monotonic()
            theirs = replay(target, captures)
            tally = results[target]
            for index, s in batch:
                comparison, unwaited = comparison_of(design, captures[s.name], theirs[s.name])
                by_run.setdefault(s.name, {})[target.release] = comparison
                tally.runs += 1
                tally.stage_steps += comparison.total
                tally.stage_steps_equal += comparison.equal
                if comparison.equal == comparison.total:
                    tally.runs_equal += 1
                    continue
                keyed = [{(r["step"], r["stage"]): r["buffers"] for r in steps}
                         for steps in ([ss.__dict__ for ss in captures[s.name].stage_steps], theirs[s.name])]
                others = {**by_run[s.name], "unwaited": unwaited, "buffers": keyed}
                d = Divergence(index, s, comparison)
                d.kind = _depart(target, captures[s.name], comparison, others) or "new"
                tally.divergences.append(d)
            tally.seconds += share + time.monotonic() - start


def classify(target: Target, divergence: Divergence) -> str:
    """The first fault preset under which minispec's run of the schedule equals vLLM's
    code stage by stage, or "new"."""
    batch = [(divergence.index, divergence.schedule)]
    for preset in candidates(target):
        captures = capture_runs(target.design, preset, batch)
        theirs = replay(replace(target, preset=preset), captures)
        name = divergence.schedule.name
        comparison, _ = comparison_of(target.design, captures[name], theirs[name])
        if comparison.total and comparison.equal == comparison.total:
            return f"known fault: minispec under {preset!r} matches"
    return "new"


def explore_vllm(targets=TARGETS, scope: Scope = DEFAULT, per_shape: dict[str, int | None] | None = None,
                 limit: int | None = None, chunk: int = 500, progress=print,
                 modes: dict[str, tuple[bool, ...]] | None = None) -> dict[Target, TargetResult]:
    """Every target on the scope's schedules (``modes``: per design, which of synchronous and
    asynchronous scheduling, ``MODES`` unless given; ``per_shape``: per design, the first that
    many of each engine shape; ``limit``: at most that many); the new divergences of each
    target classed by ``classify``, smallest first, one per first differing buffer. A target that
    needs another to be recognised brings it along (``with_needed``)."""
    targets = with_needed(targets)
    results = {t: TargetResult(t) for t in targets}
    for design in dict.fromkeys(t.design for t in targets):
        mine = [t for t in targets if t.design == design]
        todo = explorer_schedules(scope, (per_shape or {}).get(design), limit, (modes or MODES)[design])
        for at in range(0, len(todo), chunk):
            explore_batch(mine, todo[at : at + chunk], results)
            progress(f"{design}: {min(at + chunk, len(todo))}/{len(todo)} schedules; "
                     + "; ".join(f"{t.label} {results[t].runs - results[t].runs_equal} differ" for t in mine))
    for result in results.values():
        _classify_new(result)
    return results


def _classify_new(result: TargetResult) -> None:
    """Each first differing buffer among the new divergences: its smallest schedule classed,
    and that class given to every new divergence with the same first buffer."""
    groups: dict[str, list[Divergence]] = {}
    for d in result.divergences:
        if d.kind == "new":
            groups.setdefault(d.comparison.first.buffer, []).append(d)
    for buffer, ds in groups.items():
        kind = classify(result.target, min(ds, key=lambda d: d.size))
        for d in ds:
            d.kind = kind if kind == "new" else f"{kind} (first differing buffer {buffer})"


def render(results: dict[Target, TargetResult]) -> str:
    """The table (release x design), then each class's minimal counterexample."""
    lines = ["| release | design | preset | schedules | runs equal | stage-steps equal | divergences | classes | s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t, r in results.items():
        classes = "; ".join(f"{kind}: {len(ds)}" for kind, ds in r.classes().items()) or "none"
        lines.append(f"| {t.release} | {t.design} | {t.preset} | {r.runs} | {r.runs_equal}/{r.runs} | "
                     f"{r.stage_steps_equal}/{r.stage_steps} | {len(r.divergences)} | {classes} | {r.seconds:.0f} |")
    for t, r in results.items():
        for kind, d in r.minimal().items():
            lines.append(f"\n{t.label}, {kind}: minimal counterexample {d.describe()}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m reference explore``: exit 1 if a divergence is neither a named departure nor a
    known fault (a new one: in 0.33.0, a finding for upstream)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m reference explore", description=__doc__.split("\n\n")[0])
    parser.add_argument("--design", choices=(V1, V2), action="append", help="only this design (repeatable)")
    parser.add_argument("--release", action="append", help="only this release's targets (repeatable)")
    parser.add_argument("--per-shape", type=int, default=None,
                        help="the first N schedules of each engine shape (default: every schedule)")
    parser.add_argument("--limit", type=int, default=None, help="at most N schedules per design")
    parser.add_argument("--chunk", type=int, default=500, help="schedules per vLLM subprocess (default 500)")
    parser.add_argument("--scheduling", choices=("sync", "async"), default=None,
                        help="only synchronous or only asynchronous schedules (default: V1 sync, V2 both)")
    args = parser.parse_args(argv)
    for name, value in (("--per-shape", args.per_shape), ("--limit", args.limit), ("--chunk", args.chunk)):
        if value is not None and value < 1:
            parser.error(f"{name}={value}: expected a number >= 1")
    targets = tuple(t for t in TARGETS if (not args.design or t.design in args.design)
                    and (not args.release or t.release in args.release))
    if not targets:
        parser.error(f"no target is release {args.release} and design {args.design}: expected among "
                     + ", ".join(t.label for t in TARGETS))
    from reference import environment

    for added in set(with_needed(targets)) - set(targets):
        print(f"{added.label} runs too: a departure of the others is recognised by comparing with it (NEEDS)",
              flush=True)
    environment.ensure(tuple(dict.fromkeys(t.release for t in with_needed(targets))))
    start = time.monotonic()
    per_shape = dict.fromkeys((V1, V2), args.per_shape)
    modes = MODES if args.scheduling is None else dict.fromkeys(MODES, (args.scheduling == "async",))
    if args.scheduling == "async" and V1 in {t.design for t in targets}:
        parser.error("--scheduling async: V1's worker runs no asynchronous scheduling; expected --design V2")
    results = explore_vllm(targets, DEFAULT, per_shape, args.limit, args.chunk, lambda s: print(s, flush=True), modes)
    print(render(results))
    new = [d for r in results.values() for d in r.divergences if d.kind == "new"]
    print(f"\nran in {time.monotonic() - start:.0f} s: " + (f"{len(new)} new divergences" if new else "no new divergence"))
    return 1 if new else 0
