"""The same stages launched by torchrun: rank 0 runs the engine and stage 0, rank
1 the last stage, and the tokens are transformers' greedy ones. Once on one node
(two processes, 127.0.0.1), and once on two "machines": two network namespaces
joined by a virtual Ethernet pair, each with its own address and interface, one
torchrun agent in each, as the two-machine launch in docs/executors.md does it."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from minispec.config import DEFAULT_TARGET
from minispec.v1.worker.designs import DESIGNS

pytestmark = pytest.mark.torchrun

PROMPT_IDS = [[5, 17, 33, 2, 9], [40, 41, 7]]
MAX_TOKENS = 12
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from lab_screenshots import free_port  # noqa: E402  (one free-port helper for every test)

SCRIPT = """
    import json, os, sys
    from minispec import LLM, SamplingParams
    from minispec.entrypoints.cli.serve import run_headless

    engine = dict(distributed_executor_backend="torchrun", **{engine!r})
    if int(os.environ["RANK"]) > 0:
        run_headless(**engine)  # serves this rank's stage until rank 0 shuts the pipeline down
    else:
        llm = LLM(**engine)
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


@pytest.mark.parametrize("engine", [{}, {"model_runner": "v2", "async_scheduling": True,
                                     "speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}],
                         ids=["sync", "v2-async"])
def test_torchrun_two_ranks_match_transformers(tmp_path, engine):
    _torchrun_matches_transformers(tmp_path, dict(pipeline_parallel_size=2, **engine))


RING = [d for d in DESIGNS if d not in ("v1", "v2")]  # V1's and V2's: the tests above


@pytest.mark.parametrize("design", RING)
def test_torchrun_relay_designs_match_transformers(tmp_path, design):
    """Three ranks, one process each: the payload goes last -> 0 -> 1 over gloo (issue 25)."""
    method = "draft_model" if DESIGNS[design].accepts("draft_model") else "ngram"
    _torchrun_matches_transformers(tmp_path, dict(pipeline_parallel_size=3, model_runner=design,
                                                  speculative_config={"method": method, "num_speculative_tokens": 3}))


def test_torchrun_v1_async_on_three_ranks_matches_transformers(tmp_path):
    """V1 under pipeline parallelism with async scheduling: the last stage's broadcast of the
    previous sampled tokens goes over gloo between processes (issue 22)."""
    _torchrun_matches_transformers(tmp_path, dict(pipeline_parallel_size=3, model_runner="v1", async_scheduling=True,
                                                  speculative_config={"method": "draft_model",
                                                                      "num_speculative_tokens": 3}))


def _torchrun_matches_transformers(tmp_path, engine: dict):
    script, result = tmp_path / "pipeline.py", tmp_path / "tokens.json"
    script.write_text(textwrap.dedent(SCRIPT.format(prompts=PROMPT_IDS, max_tokens=MAX_TOKENS, engine=engine)))
    nproc = str(engine["pipeline_parallel_size"])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", nproc,
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(script), str(result)]
    env = dict(os.environ, PYTHONPATH=ROOT, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(result.read_text()) == transformers_greedy()


INTERRUPTED = """
    import os, sys
    from minispec import LLM, SamplingParams
    from minispec.entrypoints.cli.serve import run_headless

    engine = dict(pipeline_parallel_size=2, distributed_executor_backend="torchrun")
    if int(os.environ["RANK"]) > 0:
        run_headless(**engine)
        sys.exit(0)
    llm = LLM(**engine)
    update = llm.engine._update

    def interrupted_update(*args):
        raise KeyboardInterrupt

    llm.engine._update = interrupted_update
    params = SamplingParams(temperature=0, max_tokens=4)
    try:
        llm.generate([[5, 17, 33]], params)
    except KeyboardInterrupt:
        pass
    llm.engine._update = update
    try:
        llm.generate([[5, 17, 33]], params)
    except RuntimeError as e:
        with open(sys.argv[1], "w") as f:
            f.write(str(e))
"""


def test_an_interrupted_torchrun_job_says_it_must_be_started_again(tmp_path):
    """The abort stops the other ranks' stages, which rank 0 did not start: the next call says so."""
    script, result = tmp_path / "interrupted.py", tmp_path / "message.txt"
    script.write_text(textwrap.dedent(INTERRUPTED))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(script), str(result)]
    env = dict(os.environ, PYTHONPATH=ROOT, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert result.read_text() == ("generate was interrupted under torchrun, which stopped the stages on the other "
                                  "ranks; they cannot be restarted from here: start the job again")


@pytest.fixture
def two_hosts():
    """Two network namespaces, 10.77.0.1 and 10.77.0.2, on the two ends of a veth pair."""
    tag = str(os.getpid() % 100000)
    hosts = [(f"msa{tag}", "10.77.0.1", f"va{tag}"), (f"msb{tag}", "10.77.0.2", f"vb{tag}")]
    (na, ipa, va), (nb, ipb, vb) = hosts
    setup = [f"netns add {na}", f"netns add {nb}", f"link add {va} type veth peer name {vb}",
             f"link set {va} netns {na}", f"link set {vb} netns {nb}"]
    for ns, ip, dev in hosts:
        setup += [f"-n {ns} addr add {ip}/24 dev {dev}", f"-n {ns} link set {dev} up", f"-n {ns} link set lo up"]

    def teardown():
        for ns, _, _ in hosts:  # deleting a namespace deletes its end of the pair, and so the pair
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    why = "needs root and iproute2 to create network namespaces"
    if os.geteuid() == 0 and shutil.which("ip"):
        for cmd in setup:
            done = subprocess.run(["ip", *cmd.split()], capture_output=True, text=True)
            if done.returncode:
                why = f"ip {cmd}: {done.stderr.strip()}"
                break
        else:
            why = None
    if why:
        teardown()
        if os.environ.get("MINISPEC_REQUIRE_NETNS"):
            pytest.fail(f"two-host torchrun test cannot run: {why}")
        pytest.skip(why)
    yield hosts
    teardown()


def test_torchrun_across_two_hosts_matches_transformers(tmp_path, two_hosts):
    script = tmp_path / "pipeline.py"
    script.write_text(textwrap.dedent(SCRIPT.format(prompts=PROMPT_IDS, max_tokens=MAX_TOKENS,
                                                    engine=dict(pipeline_parallel_size=2))))
    (_, host_ip, _), _ = two_hosts
    agents = []
    for node, (ns, ip, dev) in enumerate(two_hosts):
        # The namespaces share one hostname, so the agents cannot find the rendezvous host by
        # name: is_host says which one serves it, --local-addr what each advertises.
        cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
               "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{host_ip}:29400",
               "--rdzv-id", "minispec-test", "--rdzv-conf", f"is_host={int(node == 0)}", "--local-addr", ip,
               str(script), str(tmp_path / f"tokens{node}.json")]
        env = dict(os.environ, PYTHONPATH=ROOT, GLOO_SOCKET_IFNAME=dev, OMP_NUM_THREADS="1")
        agents.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                       cwd=tmp_path))
    try:
        logs = [agent.communicate(timeout=180)[0] for agent in agents]
    finally:
        for agent in agents:  # a hung agent must not outlive the test (or its namespace)
            agent.kill()
    assert [agent.returncode for agent in agents] == [0, 0], "\n".join(log[-3000:] for log in logs)
    assert json.loads((tmp_path / "tokens0.json").read_text()) == transformers_greedy()
    assert not (tmp_path / "tokens1.json").exists()  # rank 1 served its stage (run_headless) and wrote nothing
