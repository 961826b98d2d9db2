"""``python -m minispec gpu-check`` on a machine without CUDA, and its logic with the GPU stood in for.

No GPU has ever run minispec: these tests prove what can be proved on the CPU --
the one line without CUDA, which runs are made or skipped for 1 and 2 GPUs, how a
difference is judged, and that ``measure`` runs a configuration (on the CPU).
"""

import pytest
import torch

import minispec.entrypoints.cli.gpu_check as cli
from minispec.entrypoints.cli.gpu_check import GPU_CASES, Measured, Verdict, gpu_plan, gpu_verdict, measure
from minispec.entrypoints.cli.main import main
from minispec.sampling_params import SamplingParams
from minispec.v1.worker.designs import DESIGNS


def test_without_cuda_it_prints_one_line_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    main(["gpu-check"])  # returns: exit status 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check: skipped, no CUDA device (torch ")
    assert lines[0].endswith("nothing was run")


def test_the_plan_runs_every_design_and_two_gpu_cases_only_on_two_gpus():
    one = gpu_plan(1)
    one_gpu_cases = [("uni", "1 stage"), ("uni", "2 stages on one GPU"), ("mp", "1 stage"), ("mp", "2 stages on one GPU")]
    assert [(r.model_runner, r.backend, r.case.label) for r in one if r.skip is None] == [
        (design, backend, label) for design in DESIGNS for backend, label in one_gpu_cases]
    assert {r.skip for r in one if r.skip} == {"needs 2 GPUs, this machine has 1"}
    assert all(r.skip is None for r in gpu_plan(2)) and len(gpu_plan(2)) == len(DESIGNS) * 2 * len(GPU_CASES)
    assert [c.device for c in GPU_CASES] == ["cuda:0", "cuda:0", None]  # None: stage i on cuda:i
    refusing = {d for d in DESIGNS if not DESIGNS[d].accepts("draft_model")}  # replicated drafting
    assert refusing and {r.drafts["method"] for r in one if r.model_runner in refusing} == {"ngram"}


def test_a_difference_is_a_note_only_where_the_gpu_without_drafts_differs_too():
    cpu, gpu_plain = [[1, 2, 3], [4, 5, 6]], [[1, 2, 3], [4, 9, 9]]
    assert gpu_verdict(cpu, cpu, gpu_plain).verdict is Verdict.OK
    note = gpu_verdict([[1, 2, 3], [4, 9, 9]], cpu, gpu_plain)
    assert note.verdict is Verdict.NOTE and note.detail.startswith("prompt 1 differs from the CPU at token 1")
    fail = gpu_verdict([[1, 7, 3], [4, 5, 6]], cpu, gpu_plain)
    assert fail.verdict is Verdict.FAIL and "at token 1: [7, 3] where the CPU has [2, 3]" in fail.detail


def fake_gpu(monkeypatch, n_gpus, drafted_tokens):
    """CUDA present, ``measure`` stood in for: what gpu-check runs and prints."""
    calls = []

    def fake_measure(params, stages=1, device="cpu", backend="uni", drafts=None, prompts=(), model_runner=None):
        calls.append((stages, device, backend, bool(drafts), model_runner))
        tokens = drafted_tokens if drafts and device != "cpu" else [[1, 2, 3]]
        return Measured(tokens, 100.0 if device == "cpu" else 900.0)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n_gpus)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"GPU{i}")
    monkeypatch.setattr(cli, "measure", fake_measure)
    return calls


def test_with_one_gpu_every_run_is_compared_and_timed_beside_the_cpu(monkeypatch, capsys):
    calls = fake_gpu(monkeypatch, 1, [[1, 2, 3]])
    main(["gpu-check", "--max-tokens", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("1 GPU: GPU0") and "900 on cuda:0" in out[1]
    assert out[2] == "ok   v1 uni 1 stage, draft model k=3: greedy equal to the CPU; 900 tokens/s on cuda, 100 on the CPU"
    assert "ok   v2 mp  2 stages on one GPU, draft model k=3: greedy equal to the CPU; 900 tokens/s on cuda, " \
           "100 on the CPU" in out
    assert sum(line.startswith("skip") for line in out) == 2 * len(DESIGNS) and out[-1] == "gpu-check passed"
    assert "ok   replicated uni 1 stage, n-gram k=3: greedy equal to the CPU; 900 tokens/s on cuda, 100 on the CPU" in out
    for design in DESIGNS:
        assert (2, "cuda:0", "mp", True, design) in calls and (2, "cpu", "mp", True, design) in calls
        assert (2, None, "uni", True, design) not in calls  # two stages on two GPUs: skipped


def test_a_wrong_token_on_the_gpu_fails_with_exit_status_1(monkeypatch, capsys):
    calls = fake_gpu(monkeypatch, 2, [[1, 2, 4]])
    with pytest.raises(SystemExit) as exit_info:
        main(["gpu-check"])
    assert exit_info.value.code == 1 and (2, None, "mp", True, "v2") in calls
    out = capsys.readouterr().out
    runs = len(DESIGNS) * 2 * 3  # every design x 2 executors x 3 cases
    assert out.count("FAIL") == runs and f"gpu-check: {runs} run(s) failed" in out


def test_measure_runs_a_configuration_on_the_cpu():
    plain = measure(SamplingParams(temperature=0, max_tokens=8), prompts=("The for ",))
    for run in gpu_plan(1):
        if run.backend != "uni" or run.case.stages != 2:
            continue
        drafted = measure(SamplingParams(temperature=0, max_tokens=8), 2, "cpu", "uni", run.drafts, ("The for ",),
                          model_runner=run.model_runner)
        assert drafted.tokens == plain.tokens
    assert len(plain.tokens[0]) == 8 and plain.tokens_per_s > 0
