"""Property-based schedules (issue 9, part 3), with ``hypothesis``.

Each example draws a whole configuration -- pipeline stages 1-3, k 0-5, either
proposer, token budget, ``max_num_seqs``, block size, a KV pool small enough to
preempt, ``max_model_len``, prompts of 1 ... ``max_model_len - 1`` tokens,
``max_tokens`` from 1, arrival steps, stop tokens -- and a preset, with every
invariant checked live:

* under ``"all"`` the run must finish with the reference tokens;
* under the faulty presets it may raise ``InvariantViolation``, but if it
  finishes its tokens must be the reference's: a divergence the checker let
  through fails the test.

The relay designs (``model_runner="relay"`` and ``"replicated"``, issue 25) run the same
schedules on 1-4 stages (``relay_configurations``), with their own presets: the relay's
faults may be caught, never let through; every fix must finish with the reference tokens.
Replicated drafting draws the n-gram proposer only (it refuses a draft model).

The reference is a one-stage, no-draft minispec engine (greedy), cached per
prompt (``minispec.lab.experiments.schedule.greedy_reference``); ``tests/test_greedy_equivalence.py`` checks that engine against
transformers' ``generate`` token for token. (transformers itself costs ~0.1 s
per prompt here, too much for hundreds of examples per run.)

``test_any_configuration_is_greedy_with_async_scheduling`` draws the same configurations
with ``async_scheduling=True`` (V1 and V2 at 1-4 stages) under ``"all"``; a few of them run in
the fast tier (``test_a_few_configurations_are_greedy_with_async_scheduling``).

Profiles (``tests/conftest.py``): ``ci`` (default, 300 examples) and ``long``
(``pytest tests/test_properties.py --hypothesis-profile=long``).
"""

from __future__ import annotations

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from minispec import LLM, SamplingParams
from minispec.instruments.invariants import InvariantViolation
from minispec.lab.experiments.schedule import greedy_reference
from minispec.training.corpus import split_text
from minispec.v1.worker.designs import DESIGNS

MAX_LEN = 64  # largest max_model_len drawn: keeps one example well under a second
MAX_TOKENS = 16
TEXT = split_text()[1]  # held-out text: prompts the target was not trained on
OFFSETS = [0, 531, 1207, 2290, 3318, 4402, 5573, 6610]  # a few, so references are reused


def greedy(prompt: tuple[int, ...]) -> list[int]:
    """Plain greedy continuation, as long as any drawn request can ask for."""
    return greedy_reference({0: prompt}, min(MAX_TOKENS, MAX_LEN - len(prompt)))[0]


def expected(prompt: list[int], max_tokens: int, max_model_len: int, stop: list[int]) -> list[int]:
    tokens = greedy(tuple(prompt))[: min(max_tokens, max_model_len - len(prompt))]
    for i, t in enumerate(tokens):
        if t in stop:
            return tokens[: i + 1]
    return tokens


@st.composite
def configurations(draw):
    block_size = draw(st.sampled_from([1, 2, 4, 8, 16]))
    max_model_len = draw(st.integers(8, MAX_LEN))
    min_blocks = -(-max_model_len // block_size)
    k = draw(st.integers(0, 5))
    engine = dict(
        pipeline_parallel_size=draw(st.integers(1, 3)),
        speculative_config={"method": draw(st.sampled_from(["ngram", "draft_model"])), "num_speculative_tokens": k}
        if k else None,
        fixes=draw(st.sampled_from(["all", "all", "vllm-0.14", "vllm-0.9.2"])),
        max_num_seqs=draw(st.integers(1, 6)),
        max_num_batched_tokens=draw(st.integers(1, 96)),
        max_model_len=max_model_len,
        block_size=block_size,
        num_gpu_blocks=draw(st.integers(min_blocks, 3 * min_blocks)),
    )
    requests = []
    for _ in range(draw(st.integers(1, 5))):
        offset = draw(st.sampled_from(OFFSETS))
        length = draw(st.integers(1, max_model_len - 1))
        requests.append(dict(
            prompt=TEXT[offset : offset + length],
            max_tokens=draw(st.integers(1, MAX_TOKENS)),
            arrival=draw(st.integers(0, 4)),
            stop=draw(st.lists(st.integers(2, 104), max_size=2)),
        ))
    return engine, requests


@st.composite
def relay_configurations(draw):
    """``configurations`` on a relay design, 1-4 stages, under "all" and maybe one of the
    relay's fault presets (replicated drafting has none, and drafts with n-grams only)."""
    engine, requests = draw(configurations())
    design = draw(st.sampled_from([d for d in DESIGNS if d not in ("v1", "v2")]))  # V1's, V2's: their own tests
    presets = DESIGNS[design].fault_presets
    faults = draw(st.sampled_from([None, None, *map(str, presets)])) if presets else None
    engine = dict(engine, model_runner=design, fixes="all", faults=faults, speculative_config=_accepted(engine, design),
                  pipeline_parallel_size=draw(st.integers(1, 4)))
    return engine, requests


def _accepted(engine: dict, design: str) -> dict | None:
    """The drawn proposer, or n-gram drafts where the design's record refuses it (replicated drafting)."""
    spec = engine["speculative_config"]
    return dict(spec, method="ngram") if spec and not DESIGNS[design].accepts(spec["method"]) else spec


def _preset(engine: dict) -> str:
    """The run's presets, as one label: "all", "vllm-0.9.2", "all+relay-pairing"."""
    return engine["fixes"] + (f"+{engine['faults']}" if engine.get("faults") else "")


@st.composite
def async_configurations(draw):
    """The same draws under async scheduling, with the fixes on (the faults are V1's July 2025
    ones, stated for a synchronous schedule; the in-flight family's are ``V1_FAULTS`` and ``FAULTS``
    in ``minispec.lab.faults.catalogue``, each run where it bites): every registered design at 1-4
    stages."""
    engine, requests = draw(configurations())
    model_runner = draw(st.sampled_from(list(DESIGNS)))
    return dict(engine, fixes="all", pipeline_parallel_size=draw(st.integers(1, 4)), model_runner=model_runner,
                speculative_config=_accepted(engine, model_runner), async_scheduling=True), requests


def run(engine: dict, requests: list[dict]) -> str:
    """Run one configuration with every invariant checked live (2-5 by the trace's checker,
    under async scheduling too; 7 by the transport); say how it ended."""
    llm = LLM(check_invariants=True, **engine)
    ids = [llm.tokenizer.encode(r["prompt"]).ids for r in requests]
    params = [SamplingParams(temperature=0, max_tokens=r["max_tokens"], stop_token_ids=r["stop"]) for r in requests]
    want = [expected(p, r["max_tokens"], engine["max_model_len"], r["stop"]) for p, r in zip(ids, requests)]
    try:
        outputs = llm.generate(ids, params, arrival_steps=[r["arrival"] for r in requests])
    except InvariantViolation as e:
        assert _preset(engine) != "all", "an invariant broke under the fixed preset"
        return f"{_preset(engine)}: invariant {e.violation.invariant} fired"
    got = [o.outputs[0].token_ids for o in outputs]
    assert got == want, "tokens diverged from greedy" + (" and no invariant fired" if _preset(engine) != "all" else "")
    return f"{_preset(engine)}: finished"


def _forum_like(fixes: str) -> tuple[dict, list[dict]]:
    """Two waves of two requests under PP=2 with drafts: each faulty preset diverges
    here, so every run checks at least once that the checker catches it."""
    engine = dict(pipeline_parallel_size=2, speculative_config={"method": "draft_model", "num_speculative_tokens": 3},
                  fixes=fixes, max_num_seqs=4, max_num_batched_tokens=96, max_model_len=64, block_size=8,
                  num_gpu_blocks=32)
    requests = [dict(prompt=TEXT[o : o + n], max_tokens=12, arrival=a, stop=[])
                for o, n, a in [(0, 10, 0), (531, 12, 0), (1207, 30, 1), (2290, 27, 1)]]
    return engine, requests


@pytest.mark.slow
@given(configurations())
@example(_forum_like("vllm-0.9.2"))
@example(_forum_like("vllm-0.14"))
@example(_forum_like("all"))
def test_any_configuration_is_greedy_or_caught(config):
    event(run(*config))  # counted by --hypothesis-show-statistics


def _relay_forum_like(design: str, faults: str | None = None, pp: int = 3) -> tuple[dict, list[dict]]:
    engine, requests = _forum_like("all")
    method = "draft_model" if DESIGNS[design].accepts("draft_model") else "ngram"
    return dict(engine, model_runner=design, faults=faults, pipeline_parallel_size=pp,
                speculative_config={"method": method, "num_speculative_tokens": 3}), requests


@settings(max_examples=6, deadline=None)
@given(relay_configurations())
@example(_relay_forum_like("relay", "relay-pairing"))
@example(_relay_forum_like("relay", "relay-no-seq-lens", pp=2))
def test_any_configuration_on_a_relay_design_is_greedy_or_caught(config):
    event(run(*config))


@pytest.mark.slow
@given(relay_configurations())
@example(_relay_forum_like("relay"))
@example(_relay_forum_like("replicated"))
def test_any_configuration_on_a_relay_design_is_greedy_or_caught_full_profile(config):
    event(run(*config))


def test_the_property_fails_when_the_checker_is_blind(monkeypatch):
    """The test above can fail: with the checker silenced, a faulty preset's divergence is reported."""
    import pytest

    from minispec.instruments.invariants import InvariantChecker

    monkeypatch.setattr(InvariantChecker, "_fail", lambda self, *args: None)
    with pytest.raises(AssertionError, match="tokens diverged from greedy and no invariant fired"):
        run(*_forum_like("vllm-0.9.2"))


def _async_forum_like(model_runner: str, pp: int) -> tuple[dict, list[dict]]:
    engine, requests = _forum_like("all")
    return dict(engine, model_runner=model_runner, pipeline_parallel_size=pp, async_scheduling=True,
                speculative_config=_accepted(engine, model_runner)), requests


@pytest.mark.slow
@given(async_configurations())
@example(_async_forum_like("v1", 3))
@example(_async_forum_like("relay", 4))
@example(_async_forum_like("replicated", 3))
def test_any_configuration_is_greedy_with_async_scheduling(config):
    event(f"{config[0]['model_runner']} on {config[0]['pipeline_parallel_size']} stages")
    event(run(*config))


@settings(max_examples=4, deadline=None)
@given(async_configurations())
@example(_async_forum_like("v1", 2))
def test_a_few_configurations_are_greedy_with_async_scheduling(config):
    event(run(*config))
