"""Invariant 6 end to end: with temperature > 0, speculative decoding through
the whole engine (two stages, draft-model drafts with their probabilities,
rejection sampling) produces the same distribution of continuations as plain
sampling. Two independent samples of 2,000 three-token continuations of one
prompt are compared with a chi-square test of homogeneity."""

from collections import Counter

import pytest
from scipy.stats import chi2_contingency

from minispec import LLM, SamplingParams

pytestmark = pytest.mark.slow

N = 2000
PARAMS = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=3)


def continuations(seed, **engine):
    llm = LLM(max_num_seqs=128, max_num_batched_tokens=2048, seed=seed, **engine)
    outs = llm.generate(["The "] * N, PARAMS)
    return Counter(tuple(o.outputs[0].token_ids) for o in outs), llm.stats()


def test_speculative_sampling_keeps_the_distribution():
    plain, _ = continuations(seed=1)
    spec, stats = continuations(seed=2, pipeline_parallel_size=2,
                                speculative_config={"method": "draft_model", "num_speculative_tokens": 3})
    assert stats["accepted_tokens"] > 0.3 * stats["draft_tokens"]  # the drafts really were used
    common = [k for k in set(plain) | set(spec) if plain[k] + spec[k] >= 20]
    table = [[c[k] for k in common] + [N - sum(c[k] for k in common)] for c in (plain, spec)]
    assert len(common) >= 10
    assert chi2_contingency(table).pvalue > 0.001
