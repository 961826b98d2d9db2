"""A stage's persistent batch built by hand (notebook 03): requests' records made from text, and
the batch whose freed row a re-added request inherits.

No vLLM twin: this is workshop tooling (the batch is ``minispec/v1/worker/gpu_input_batch.py``).
"""

from __future__ import annotations


def cached_request(req_id: str, prompt: str, output: str = "", drafts: str = ""):
    """A stage's record of a request (``CachedRequestState``): prompt, output so far, and the drafts
    it was last given, as text in the shipped tokenizer."""
    from minispec.config import DEFAULT_TARGET
    from minispec.sampling_params import SamplingParams
    from minispec.transformers_utils.tokenizer import load_tokenizer
    from minispec.v1.worker.gpu_input_batch import CachedRequestState

    def encode(text):
        return load_tokenizer(DEFAULT_TARGET).encode(text).ids

    state = CachedRequestState(req_id, encode(prompt), SamplingParams(temperature=0), generator=None,
                               block_ids=[0], num_computed_tokens=len(encode(prompt)), output_token_ids=encode(output))
    state.spec_token_ids = encode(drafts)
    return state


def readded_batch():
    """03's batch of 3 rows: C and D added, C removed, then A (output ``s``, drafts ``' st'``) added
    into the row C left. Returns the batch and A's row."""
    from minispec.lab.experiments.scenarios import PROMPTS
    from minispec.v1.worker.gpu_input_batch import InputBatch

    batch = InputBatch(max_num_reqs=3, max_model_len=40, max_num_blocks_per_req=3)
    batch.add_request(cached_request("C", PROMPTS["C"]))
    batch.add_request(cached_request("D", PROMPTS["D"]))
    batch.remove_request("C")
    return batch, batch.add_request(cached_request("A", PROMPTS["A"], output="s", drafts=" st"))
