"""The command line, run as a user would."""

import subprocess
import sys
from types import SimpleNamespace

import pytest

import minispec


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


def test_generate_drafts_a_tree():
    out = run("generate", "The for statement ", "--pp", "2", "--model-runner", "v2", "--max-tokens", "8",
              "--speculative-token-tree", "[(0,), (1,), (0, 0)]")
    assert "== pp=2 tree [(0,), (1,), (0, 0)] draft_model" in out and "tokens per target forward" in out


@pytest.mark.parametrize("args,message", [
    (("generate", "x", "--pp", "0"), "argument --pp: 0: expected an integer >= 1"),
    (("generate", "x", "--pp", "9"), "pipeline_parallel_size=9: expected an integer from 1 to the model's 4 layers"),
    (("generate", "x", "-k", "-1"), "argument -k: -1: expected an integer >= 0"),
    (("generate", "x", "--temperature", "nan"), "argument --temperature: nan: expected a finite number >= 0"),
    (("generate", "x", "--max-tokens", "0"), "argument --max-tokens: 0: expected an integer >= 1"),
    (("generate", "x", "--seed", "-3"), "argument --seed: -3: expected an integer >= 0"),
    (("generate", "x", "--speculative-token-tree", "[(0,), (2,)]"),
     "speculative_config['speculative_token_tree']='[(0,), (2,)]': expected children numbered from 0"),
    (("generate", "x", "--model", "/nonexistent"),
     "model='/nonexistent': expected a checkpoint directory, but it does not exist"),
    (("generate", ""), "prompts[0] is empty: expected at least one token"),
    (("generate", "ok", "x" * 600), "prompts[1] has 600 tokens: expected at most max_model_len - 1 = 511"),
    (("demo", "-k", "-1"), "argument -k: -1: expected an integer >= 1"),
    (("replay", "--steps", "-1"), "argument --steps: -1: expected an integer >= 1"),
    (("replay", "--steps", "0"), "argument --steps: 0: expected an integer >= 1"),
    (("replay", "--fixes", "nope"), "argument --fixes: invalid choice: 'nope'"),
])
def test_bad_values_give_one_line_and_status_2(args, message, capsys):
    """In-process for speed: any exception other than SystemExit(2) fails the test."""
    from minispec.entrypoints.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"minispec: error: {message}")


def test_an_engine_error_is_one_line_from_the_shell_too():
    result = subprocess.run([sys.executable, "-m", "minispec", "generate", "x", "--pp", "9"],
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "minispec: error: pipeline_parallel_size=9: expected an integer from 1 to the model's 4 layers\n"
@pytest.mark.slow
def test_demo_shows_the_thread_before_and_after_and_saves_its_figures(tmp_path):
    out = run("demo", "--max-tokens", "8", "--out", str(tmp_path))
    before, after = out.split("-- after")[0], out.split("-- after")[1].split("==")[0]
    assert "-- before: preset vllm-0.9.2, step 2" in before and "draft slots=[tem] scheduled=[ st]  STALE" in before
    assert "draft slots=[ st] scheduled=[ st]  ok" in after and "STALE" not in after
    table = out.split("== Presets")[1]
    assert "vllm-0.9.2" in table and "1/4 (A@12)" in table and "0/4\n" in table
    assert "greedy output identical with and without drafts: yes" in out
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert "step2-vllm-0.9.2-vs-all-stage0.png" in pngs and "step2-all.png" in pngs and "presets-accepted-drafts.png" in pngs and len(pngs) == 5
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in tmp_path.glob("*.png"))
    assert str(tmp_path) in out


@pytest.mark.slow
def test_check_proves_the_install_and_prints_no_answer(tmp_path):
    out = run("check", "--out", str(tmp_path))
    lines = out.splitlines()
    assert [line[:4] for line in lines[:4]] == ["ok  "] * 4 and lines[-1].startswith("set-up check passed")
    assert (tmp_path / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # What the workshop asks learners to predict: A's stale slots and the acceptance rates.
    for spoiler in ("tem", "%", "acceptance", "accepted", "STALE", "vllm-0.9.2"):
        assert spoiler not in out


def test_check_names_what_failed_and_exits_1(tmp_path, monkeypatch, capsys):
    import minispec.entrypoints.cli.check as cli
    from minispec.entrypoints.cli.main import main

    monkeypatch.setattr(cli, "_check_import", lambda module: cli.OK if module == "jupyterlab"
                        else cli.Outcome(cli.Verdict.FAIL, f"no {module}"))
    monkeypatch.setattr(cli, "_check_figure", lambda folder: 1 / 0)
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert exit_.value.code == 1 and lines[0].startswith("ok   greedy generate")
    assert lines[1] == f"FAIL a figure saved ({tmp_path / 'map.png'}): ZeroDivisionError: division by zero"
    assert lines[2].startswith("ok   JupyterLab") and lines[3] == "FAIL notebook widgets importable: no ipywidgets"
    assert lines[4] == "set-up check: 2 of 4 failed"


def test_check_tells_a_reference_difference_from_a_broken_engine(monkeypatch):
    """Another PyTorch build may round differently: a note, not a failure. Speculative
    decoding that changes greedy tokens is a failure."""
    import minispec.entrypoints.cli.check as cli

    monkeypatch.setattr(cli, "CHECK_TOKENS", cli.CHECK_TOKENS[:5] + [0] + cli.CHECK_TOKENS[6:])
    outcome = cli._check_generate()
    assert outcome.verdict is cli.Verdict.NOTE and outcome.detail.startswith("token 5 differs from the reference")

    class DraftsBreakToken3:  # stands in for an engine whose speculative path is broken
        def __init__(self, **kwargs):
            self.stages = kwargs.get("pipeline_parallel_size", 1)

        def generate(self, prompts, params):
            tokens = list(cli.CHECK_TOKENS[: params.max_tokens])
            tokens[3] += self.stages - 1
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=tokens)])]

    monkeypatch.setattr(minispec, "LLM", DraftsBreakToken3)
    assert cli._check_generate() == cli.Outcome(cli.Verdict.FAIL, "2 stages with draft tokens differ from 1 stage at token 3")
