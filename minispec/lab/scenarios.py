"""The forum thread's scenario (July 2025), as a function that returns its trace.

Two pipeline stages, speculative decoding on. ``batch_0`` = {A, B} arrives and
prefills; ``batch_1`` = {C, D} arrives while batch_0 is still in flight and
prefills; from then on decode batches alternate batch_0, batch_1, batch_0, ...
Each stage's persistent batch therefore holds only the other batch's requests
whenever a batch comes round again, so every decode request is re-added every
step.

Drafts come from the shipped draft model by default (``method="ngram"`` is the
proposer July-2025 V1 itself had; its EAGLE/MTP heads were learned drafters like
this one). The prompts are chosen so the stale slots are easy to read: C's prompt is
longer than A's, so when A is re-added into the row C just left, A's draft
slots still hold C's prompt characters (and likewise B and D).
"""

from __future__ import annotations

from minispec.sampling_params import SamplingParams

PROMPTS = {
    "A": "A list is ",
    "B": "Strings are ",
    "C": "The for statement is used to iterate",
    "D": "Exceptions are raised when",
}
BATCH_0, BATCH_1 = ("A", "B"), ("C", "D")


def batch_label(req_ids) -> str:
    """The thread's name for a batch: "batch_0 = {A, B}" (or just its requests)."""
    names = {frozenset(BATCH_0): "batch_0", frozenset(BATCH_1): "batch_1"}
    members = "{" + ", ".join(sorted(req_ids)) + "}"
    name = names.get(frozenset(req_ids))
    return f"{name} = {members}" if name else members


def forum_thread_llm(fixes="vllm-0.9.2", num_speculative_tokens: int = 3, method: str = "draft_model",
                     max_tokens: int = 16, check_invariants: bool = False):
    """The engine with the four requests queued but not yet run (for stepping)."""
    from minispec.entrypoints.llm import LLM

    llm = LLM(
        pipeline_parallel_size=2,
        speculative_config={"method": method, "num_speculative_tokens": num_speculative_tokens},
        fixes=fixes, record=True, check_invariants=check_invariants, max_num_seqs=4,
    )
    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    for arrival, batch in enumerate((BATCH_0, BATCH_1)):
        for req_id in batch:
            llm.add_request(PROMPTS[req_id], params, arrival_step=arrival, request_id=req_id)
    return llm


def run_recorded(llm):
    """Run a recording engine to completion; return its ``Trace`` with every
    request's output and the engine's stats filled in."""
    llm.engine.run()
    trace = llm.trace
    # finished requests leave the scheduler; the engine keeps them
    trace.outputs = {req.request_id: list(req.output_token_ids) for req in llm.engine.finished}
    trace.stats = llm.stats()
    return trace


def forum_thread(fixes="vllm-0.9.2", **kwargs):
    """Run the scenario to completion and return its ``Trace`` (with outputs)."""
    return run_recorded(forum_thread_llm(fixes, **kwargs))


def forum_thread_reference(max_tokens: int = 16) -> dict[str, list[int]]:
    """Each request's output from plain greedy decoding (one stage, no drafts): what
    every preset must reproduce token for token."""
    from minispec.entrypoints.llm import LLM

    outputs = LLM().generate(list(PROMPTS.values()), SamplingParams(temperature=0, max_tokens=max_tokens))
    return {req_id: out.outputs[0].token_ids for req_id, out in zip(PROMPTS, outputs)}
