"""Seeded random schedules: reproducible, and the checker finds fault 2 in them."""

from minispec.instruments.invariants import check_trace
from minispec.lab.experiments.scenarios import TEXT, random_config
from minispec.lab.experiments.schedule import run_schedule


def test_configs_are_reproducible_and_in_range():
    configs = [random_config(seed) for seed in range(50)]
    assert configs == [random_config(seed) for seed in range(50)]
    assert len(set(configs)) == 50
    for c in configs:
        assert c.pipeline_parallel_size in (2, 3) and 1 <= c.num_speculative_tokens <= 4
        assert len(c.prompts) == len(c.arrival_steps) and 2 <= len(c.prompts) <= 5
        assert all(p in TEXT and 4 <= len(p) <= 30 for p in c.prompts)
        assert list(c.arrival_steps) == sorted(c.arrival_steps)
    # the sweep covers both proposers, both sampling modes and forced preemption
    assert {c.method for c in configs} == {"draft_model", "ngram"}
    assert {c.temperature for c in configs} == {0.0, 0.8}
    assert {c.num_gpu_blocks for c in configs} == {None, 16}


def test_fixed_run_is_clean_and_half_fixed_run_breaks_the_token_history():
    config = random_config(5)  # pp=2, draft model k=2, 4 requests, greedy
    fixed = run_schedule(config, "all")
    assert check_trace(fixed) == []
    assert fixed.stats["accepted_tokens"] > 0
    assert len(fixed.outputs) == len(config.prompts)
    assert all(0 < len(tokens) <= config.max_tokens for tokens in fixed.outputs.values())
    assert {3} <= {v.invariant for v in check_trace(run_schedule(config, "vllm-0.14"))}
