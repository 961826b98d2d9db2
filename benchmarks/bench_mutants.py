"""Which kind of test catches which slip in a runner design: a mutation benchmark.

Each mutant is one fault preset of the switchboard or one learner plug (``RunnerFixes``'
``readd_spec_tokens``, ``sync_accepted_tokens``, ``move_row``) that changes one thing in the
protocol, modelled on a reported fault or a slip of the same kind. For each, three kinds of
test are run:

* invariants: the explorer (``minispec.lab.experiments.explorer``) with the invariant checker, over the
  default scope cut to ``--max-requests`` (2 unless told, so that a mutant that nothing
  catches costs minutes, not a quarter of an hour): the size of its minimal counterexample (requests, last arrival + tokens)
  and the time to find it;
* greedy equality alone: the same explorer with the checker off, outputs compared with the
  stand-in's greedy continuation (PP = 1 without drafts);
* vLLM's end-to-end rule (``tests/v1/e2e/spec_decode/eagle/test_eagle3_pp.py``): acceptance
  at PP 2 at least 95 % of PP 1's, on the forum thread's scenario with the shipped models.

Not run here: the project's own test suite per mutant (each mutant would need a plug the
suite's fixtures take; the suite's tests take presets only).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from minispec.lab.experiments.explorer import Scope, explore
from minispec.lab.experiments.scenarios import thread_schedule
from minispec.lab.experiments.schedule import build_llm, intra_op_threads, run_recorded
from minispec.v1.worker.gpu_input_batch import InputBatch
from minispec.v1.worker.gpu_model_runner import GPUModelRunner
from minispec.v1.worker.runner_fixes import RunnerFixes, take_accepted_drafts


def drafts_one_short(runner, row, spec_token_ids):
    """A re-added row is given all but its last draft (a slice off by one)."""
    GPUModelRunner._write_spec_tokens(runner, row, spec_token_ids[:-1])


def drafts_one_late(runner, row, spec_token_ids):
    """A re-added row's drafts written one slot late (from num_tokens_no_spec + 1)."""
    runner.input_batch.num_tokens_no_spec[row] += 1
    GPUModelRunner._write_spec_tokens(runner, row, spec_token_ids)
    runner.input_batch.num_tokens_no_spec[row] -= 1


def relay_one_short(state, num_computed_tokens, new_token_ids):
    """The accepted drafts recovered, the relayed token dropped (a relay sliced by one)."""
    return take_accepted_drafts(state, num_computed_tokens, new_token_ids)[:-1] or list(new_token_ids)


def relay_twice(state, num_computed_tokens, new_token_ids):
    """The relayed token appended twice (a message posted twice)."""
    return take_accepted_drafts(state, num_computed_tokens, new_token_ids) + list(new_token_ids[-1:])


def move_without_drafts(batch: InputBatch, src: int, tgt: int) -> None:
    """condense moves a row's history but leaves its draft slots behind (num_tokens as no_spec)."""
    drafts = batch.num_tokens[src] - batch.num_tokens_no_spec[src]
    batch.num_tokens[src] -= drafts
    InputBatch._move_row(batch, src, tgt)
    batch.num_tokens[tgt] += drafts


MUTANTS = {  # name -> (LLM's switches, what it is, its reference)
    "vllm-0.9.2": ({"fixes": "vllm-0.9.2"}, "both July-2025 faults", "the forum thread, vLLM 0.9.2"),
    "fault-1": ({"fixes": RunnerFixes(readd_spec_tokens=False)}, "a re-added row gets no drafts",
                "vLLM 0.9.2 gpu_model_runner.py (fixed in 0.14.0)"),
    "fault-2": ({"fixes": "vllm-0.14"}, "accepted drafts never relayed to non-last ranks", "vLLM 0.14.0"),
    "drafts-one-short": ({"fixes": RunnerFixes(readd_spec_tokens=drafts_one_short)}, drafts_one_short.__doc__, ""),
    "drafts-one-late": ({"fixes": RunnerFixes(readd_spec_tokens=drafts_one_late)}, drafts_one_late.__doc__, ""),
    "relay-one-short": ({"fixes": RunnerFixes(sync_accepted_tokens=relay_one_short)}, relay_one_short.__doc__, ""),
    "relay-twice": ({"fixes": RunnerFixes(sync_accepted_tokens=relay_twice)}, relay_twice.__doc__, ""),
    "move-without-drafts": ({"fixes": RunnerFixes(move_row=move_without_drafts)}, move_without_drafts.__doc__, ""),
    "v2-stale-drafts": ({"model_runner": "v2", "faults": "v2-stale-drafts"}, "", "vLLM PR #52295"),
    "v2-optimistic-num-computed": ({"model_runner": "v2", "faults": "v2-optimistic-num-computed"}, "",
                                   "vLLM RFC #44697"),
    "v2-slot-reuse": ({"model_runner": "v2", "faults": "v2-slot-reuse"}, "", "vLLM PR #39833"),
    "v2-broadcast-width": ({"model_runner": "v2", "faults": "v2-broadcast-width"}, "", "vLLM PR #46994"),
}


def caught(result) -> str:
    if result.counterexample is None:
        return f"no ({result.schedules_run} schedules)"
    s = result.counterexample.schedule
    size = f"{len(s.requests)} req, {max(s.arrival_steps) + s.max_tokens} steps"
    return f"yes: {size}, schedule {result.schedules_run}, {result.seconds:.1f} s"


def acceptance_rule(switches: dict) -> str:
    """vLLM's rule: PP 2's acceptance at least 95 % of PP 1's, same workload (shipped models)."""
    rates = []
    for pp in (1, 2):
        schedule = dataclasses.replace(thread_schedule(), pipeline_parallel_size=pp)
        try:
            rates.append(run_recorded(build_llm(schedule, **switches)).stats["acceptance_rate"])
        except Exception as e:  # a crash fails any test
            return f"caught (raised {type(e).__name__})"
    verdict = "caught" if rates[1] < 0.95 * rates[0] else "passes"
    return f"{verdict} ({rates[1]:.0%} vs {rates[0]:.0%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="mutant names")
    parser.add_argument("--max-requests", type=int, default=2)
    args = parser.parse_args()
    scope = Scope(max_requests=args.max_requests)
    print("| mutant | invariants | greedy equality alone | vLLM's 95 % acceptance rule |")
    print("|---|---|---|---|")
    with intra_op_threads():
        for name, (switches, _, _) in MUTANTS.items():
            if args.only and name not in args.only:
                continue
            start = time.perf_counter()
            with_invariants = explore(switches, scope)
            greedy = explore(switches, scope, invariants=False)
            rule = acceptance_rule(switches)
            print(f"| {name} | {caught(with_invariants)} | {caught(greedy)} | {rule} |  "
                  f"<!-- {time.perf_counter() - start:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
