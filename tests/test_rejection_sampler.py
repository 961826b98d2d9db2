"""Rejection sampler: greedy edge cases, and the target distribution is kept."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from minispec.sampling_params import SamplingParams
from minispec.v1.sample.rejection_sampler import RejectionSampler
from minispec.v1.sample.sampler import compute_probs

GREEDY = SamplingParams(temperature=0)
rejection_sampler = RejectionSampler()


def one_hot_logits(tokens, vocab=8):
    logits = torch.full((len(tokens), vocab), -5.0)
    logits[torch.arange(len(tokens)), torch.tensor(tokens)] = 5.0
    return logits


def test_greedy_all_accepted_gives_bonus():
    assert rejection_sampler([3, 1, 4], one_hot_logits([3, 1, 4, 6]), GREEDY) == [3, 1, 4, 6]


def test_greedy_first_rejected_gives_recovered():
    assert rejection_sampler([2, 1, 4], one_hot_logits([3, 1, 4, 6]), GREEDY) == [3]


def test_greedy_middle_rejected():
    assert rejection_sampler([3, 5, 4], one_hot_logits([3, 1, 4, 6]), GREEDY) == [3, 1]


def test_no_drafts_is_plain_sampling():
    assert rejection_sampler([], one_hot_logits([7]), GREEDY) == [7]


def test_wrong_number_of_logit_rows_is_refused():
    with pytest.raises(ValueError, match="expected 3"):
        rejection_sampler([1, 2], one_hot_logits([1]), GREEDY)


TRIALS = 20_000


@pytest.mark.slow
@pytest.mark.parametrize("proposer", ["ngram", "draft_model"])
def test_random_sampling_keeps_target_distribution(proposer):
    """The first emitted token must follow p0 whatever the drafts are. n-gram
    drafts are a fixed token with one-hot q; draft-model drafts are sampled
    from their own q and passed with it."""
    g = torch.Generator().manual_seed(1234)
    vocab, k = 6, 2
    params = SamplingParams(temperature=0.8, top_k=5)
    target_logits = torch.randn(k + 1, vocab, generator=g) * 1.5
    p0 = compute_probs(target_logits, params)[0]
    q = torch.softmax(torch.randn(k, vocab, generator=g), -1)
    counts = np.zeros(vocab)
    accepted = 0
    for _ in range(TRIALS):
        if proposer == "ngram":
            drafts, probs = [int(p0.argmin()), 2], None  # a poor, fixed guess
        else:
            drafts = [int(torch.multinomial(q[i], 1, generator=g)) for i in range(k)]
            probs = q
        out = rejection_sampler(drafts, target_logits, params, probs, g)
        counts[out[0]] += 1
        accepted += len(out) - 1
    p0 = p0.double().numpy()
    support = p0 > 0
    expected = p0[support] / p0[support].sum() * TRIALS
    assert counts[~support].sum() == 0  # top-k removed token never appears
    assert chisquare(counts[support], expected).pvalue > 0.001
    if proposer == "draft_model":
        # acceptance of the first draft is sum_x min(p, q): check it, loosely
        rate = float(np.minimum(p0, q[0].double().numpy()).sum())
        assert accepted / TRIALS >= rate - 0.02
