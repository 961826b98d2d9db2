"""The command line, run as a user would."""

import subprocess
import sys


def run(*args):
    return subprocess.run([sys.executable, "-m", "minispec", *args], capture_output=True, text=True, check=True).stdout


def test_replay_shows_the_stale_slots_and_their_cure():
    buggy = run("replay", "--fixes", "vllm-0.9.2", "--steps", "3")
    assert "row 0 A re-added" in buggy and "draft slots=[tem]" in buggy and "STALE" in buggy
    assert "first: invariant 2 (draft agreement) violated at step 2, stage 0, request A" in buggy
    fixed = run("replay", "--fixes", "all", "--steps", "3")
    assert "STALE" not in fixed and "invariant violations: 0" in fixed


def test_generate_prints_text_and_rates():
    out = run("generate", "The for statement ", "--pp", "2", "-k", "3", "--max-tokens", "12")
    assert "'The for statement ' -> '" in out and "tokens per target forward" in out
