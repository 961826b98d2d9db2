"""The benchmark scripts still run and print what ``make bench`` promises, on
settings small enough for the test suite (their figures are not checked: a
benchmark is a script that prints ratios, not a timed test)."""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def run(script: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_bench_messages_prints_both_postings_and_their_ratio():
    out = run("bench_messages.py", "--rounds", "4", "--busy-ms", "4")
    assert re.search(r"receive posted ahead: median [\d.]+ ms, 90th percentile [\d.]+ ms", out)
    assert re.search(r"receive posted late : median [\d.]+ ms", out)
    assert re.search(r"late / ahead \(medians\): \d+x", out)


def test_bench_pipeline_reports_ratios_idle_fractions_and_gantt_files(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_pipeline
    from bench_pipeline import Setting

    from minispec.config import DEFAULT_TARGET, LlamaArchitecture

    args = argparse.Namespace(requests=4, max_tokens=4, repeat=2, together=False, threads=1)
    vocab = LlamaArchitecture.from_pretrained(DEFAULT_TARGET).vocab_size
    settings = (Setting("v2", False, 1), Setting("v2", True, 3), Setting("v1", False, 1), Setting("v1", True, 2))
    result = bench_pipeline.compare(DEFAULT_TARGET, vocab, args, settings)
    assert list(result.runs) == list(settings)
    paths = bench_pipeline.report("tiny check", result, tmp_path)
    out = capsys.readouterr().out
    assert re.search(r"v2 sync  1 in flight: best +[\d.]+ s   ratio 1.00 \(per run 1.00, 1.00; median 1.00\); "
                     r"idle \(last run\) stage 0 \d+%, stage 1 \d+%; load before each run [\d.]+, [\d.]+", out)
    assert re.search(r"v2 async 3 in flight: best +[\d.]+ s   ratio [\d.]+ \(per run [\d.]+, [\d.]+; median", out)
    # V1 under PP with async scheduling is built (its last stage broadcasts the sampled tokens)
    assert re.search(r"v1 async 2 in flight: best +[\d.]+ s   ratio [\d.]+ \(per run [\d.]+, [\d.]+; median", out)
    assert len(paths) == 6 and all(p.stat().st_size > 10_000 for p in paths)


def test_the_engine_builds_every_setting(monkeypatch):
    """Every setting of the table is a pipeline the engine builds at PP=2 "mp" (V1 with PP and
    async scheduling included, since issue 22)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from bench_pipeline import SETTINGS, Setting

    from minispec.config import DEFAULT_TARGET
    from minispec.engine.arg_utils import EngineArgs

    assert len(SETTINGS) == 12 and Setting("v2", True, 3).baseline == Setting("v2", False, 1)
    for s in SETTINGS:
        EngineArgs(model=DEFAULT_TARGET, pipeline_parallel_size=2, distributed_executor_backend="mp",
                   **s.engine_args()).create_engine_config()


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")))
def test_every_benchmark_imports(script):
    """Each benchmark's imports still resolve: a renamed engine or lab name breaks a script no
    other test runs (benchmarks/presets.py once imported a removed PRESETS)."""
    path = ROOT / "benchmarks" / script
    done = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r}, run_name='imported')"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]


def test_bench_explorer_prints_a_row_per_preset_and_the_fixed_designs():
    out = run("bench_explorer.py", "--max-requests", "1", "--workers", "1", "--small", "--rate-schedules", "10")
    presets = re.findall(r"^\| `([\w.-]+)` \|", out, re.MULTILINE)
    assert presets == ["vllm-0.9.2", "vllm-0.14", "v2-stale-drafts", "v2-optimistic-num-computed",
                       "v2-slot-reuse", "v2-broadcast-width", "v2-drafts-posted-twice"]
    # one request is enough for V2's stale drafts; V1's faults need a second request in the row
    assert "| `v2-stale-drafts` | 1 req, 2 prompt tokens, 2 steps" in out
    assert "| `vllm-0.9.2` | nothing within the scope | - | schedule 40" in out
    assert re.search(r"\| v1 \| whole, 1 request \| 40 \| \d+ s .* \| nothing breaks \| a row or slot changed hands;", out)
    assert "(a request keeps its slot for its life (Model Runner V2's RequestState): nothing is re-added)" in out
    assert re.search(r"\| replicated \| whole, 1 request \| 8 \|", out)  # n-gram drafts: no scripts to vary
    assert re.search(r"the default scope \(DEFAULT\): 10 schedules .* distinct states", out)


def test_bench_sharing_checks_its_state_keys_by_what_follows_them(monkeypatch):
    """A key is sound when two runs that reach equal keys run the same from there. The
    scheduler's view alone is planted as the unsound one (it leaves out the script's unread
    drafts and the runners' buffers): equal views go on differently; the sound key's never do.
    Three schedules run twice: the sound key sees each of their states again (it depends on the
    state, not on the objects holding it or on leftover bytes in buffers, which are allocated
    zeroed for the measurement).
    The trie of inputs runs fewer engine steps than the schedules one by one."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_sharing

    group = bench_sharing.groups(1, seed=1)[0][:60]
    once = bench_sharing.measure(group)
    assert once["view differed"] > 0 and once["view repeat"] > 0
    assert once["sound differed"] == 0
    assert 0 < once["trie engine steps"] < once["engine_steps"]
    twice = bench_sharing.measure(group + group[-3:])
    rerun = twice["keyed"] - once["keyed"]
    assert twice["sound repeat"] == once["sound repeat"] + rerun and rerun > 0 and twice["sound differed"] == 0
