"""The same stages launched by torchrun (c10d rendezvous on 127.0.0.1, one node,
two processes): rank 0 runs the engine and stage 0, rank 1 the last stage, and
the tokens are transformers' greedy ones."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import torch

from minispec.config import DEFAULT_TARGET

PROMPT_IDS = [[5, 17, 33, 2, 9], [40, 41, 7]]
MAX_TOKENS = 12
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
    import json, sys
    from minispec import LLM, SamplingParams

    llm = LLM(pipeline_parallel_size=2, distributed_executor_backend="torchrun")  # ranks > 0 serve and exit here
    outs = llm.generate({prompts}, SamplingParams(temperature=0, max_tokens={max_tokens}, ignore_eos=True))
    llm.shutdown()
    with open(sys.argv[1], "w") as f:
        json.dump([o.outputs[0].token_ids for o in outs], f)
"""


def transformers_greedy():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(DEFAULT_TARGET)
    out = []
    for ids in PROMPT_IDS:
        gen = model.generate(torch.tensor([ids]), max_new_tokens=MAX_TOKENS, min_new_tokens=MAX_TOKENS,
                             do_sample=False)
        out.append(gen[0, len(ids):].tolist())
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_ranks_match_transformers(tmp_path):
    script, result = tmp_path / "pipeline.py", tmp_path / "tokens.json"
    script.write_text(textwrap.dedent(SCRIPT.format(prompts=PROMPT_IDS, max_tokens=MAX_TOKENS)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(script), str(result)]
    env = dict(os.environ, PYTHONPATH=ROOT, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(result.read_text()) == transformers_greedy()
