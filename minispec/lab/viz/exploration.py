"""The explorer's findings as text (``minispec.lab.explorer.explorer``): a counterexample
as the workshop's step table, and a search's report.

Renderers sit above the runs they draw (the lab's layers: records, experiments, faults, explorer,
viz, exercises), so the explorer returns data and these turn it into words.
vLLM twin: none.
"""

from __future__ import annotations

from minispec.lab.explorer.explorer import Counterexample, ExploreResult
from minispec.lab.viz.text import char_decoder, render_trace


def render_counterexample(found: Counterexample) -> str:
    """The schedule, the failure, and the steps up to it as the workshop's step table."""
    steps = None if found.failure.step is None else found.failure.step + 1
    decode = char_decoder(found.tokenizer) if found.tokenizer is not None else None
    return f"{found.schedule.details}\n{found.failure}\n\n" + render_trace(found.trace, decode, max_steps=steps)


def render_exploration(result: ExploreResult) -> str:
    """What a search tried, how fast, and its minimal counterexample or that nothing broke."""
    design = ", ".join(f"{k}={getattr(v, '__qualname__', None) or repr(v)}"
                       for k, v in result.engine_args.items()) or "the defaults"
    rate = f"{result.schedules_run} schedules in {result.seconds:.1f} s ({result.schedules_run / result.seconds:.0f}/s)"
    if result.searched:
        rate += f", the last {result.searched} drawn at random from a wider scope"
    warned = "".join(f"\nwarning: {w}" for w in result.warnings)
    if result.counterexample is None:
        done = "every schedule in the scope" if result.exhausted else "the schedules asked for"
        return f"{design}: nothing breaks: {done}, {rate}; {result.coverage()}.{warned}\nscope: {result.scope}"
    return (f"{design}: minimal counterexample, schedule {result.schedules_run} ({rate}):{warned}\n"
            + render_counterexample(result.counterexample))
