"""The batch queue at work (notebook 04): four short requests queued with chosen arrival steps,
and what each stage's batches and rows held as the engine ran them.

No vLLM twin: this is workshop tooling (the engine's ``step_with_batch_queue`` is
``minispec/v1/engine/core.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

SHORT_PROMPTS = {"A": "A list is ", "B": "Strings are ", "C": "The for statement ", "D": "Exceptions are "}
SHORT_TOKENS = 6  # each request's output: enough decode steps to see the batches alternate
STAGGERED = {"A": 0, "B": 0, "C": 1, "D": 1}  # the thread's arrivals: C and D one step later


def queued(arrivals: dict[str, int], pp: int = 2, **kwargs):
    """An in-process engine with one request per name of ``arrivals``, arriving at the given engine
    steps (greedy, ``SHORT_TOKENS`` each); not run yet. ``kwargs`` go to ``LLM``."""
    from minispec import LLM, SamplingParams

    unknown = sorted(set(arrivals) - set(SHORT_PROMPTS))
    if unknown:
        raise ValueError(f"queued: arrivals must name requests of {sorted(SHORT_PROMPTS)}, not {unknown}")
    llm = LLM(pipeline_parallel_size=pp, **kwargs)
    params = SamplingParams(temperature=0, max_tokens=SHORT_TOKENS)
    for name, step in arrivals.items():
        llm.add_request(SHORT_PROMPTS[name], params, arrival_step=step, request_id=name)
    return llm


def batches(llm, stage: int = 0) -> list[str]:
    """The requests of each batch, in the order ``stage`` ran them ("step:requests"), read off the
    recorded timeline of a run engine."""
    return [f"{s.step}:{''.join(s.req_ids)}" for s in llm.timeline().spans if s.stage == stage]


def watch_rows(llm, max_lines: int = 12) -> Iterator[str]:
    """Run ``llm``'s engine; as each stage starts a step, which row holds which request there
    (``req_id_to_index``), for the first ``max_lines`` stage-steps."""
    runners, lines = llm.engine.executor.runners, 0
    for event in llm.engine.iter_events():
        if event.kind == "stage" and lines < max_lines:
            yield f"{event!s:20} -> stage {event.stage} req_id_to_index {runners[event.stage].input_batch.req_id_to_index}"
            lines += 1
