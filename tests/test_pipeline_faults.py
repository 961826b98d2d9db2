"""Stage faults under the multi-process executor: a stage that dies, raises or
hangs fails ``generate`` within 30 s with an error naming the stage and the
cause; no worker is left behind; the failed ``LLM`` refuses further calls;
workers outlive neither their engine nor the interpreter; and a script without
a ``__main__`` guard is told what to add."""

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from minispec import LLM, SamplingParams
from minispec.v1.core.sched.output import SchedulerOutput
from minispec.v1.executor.multiproc_executor import WorkerError

pytestmark = pytest.mark.slow

PROMPTS = ["The for statement ", "A class ", "x = "]
PARAMS = SamplingParams(temperature=0, max_tokens=16)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def alive(pid: int) -> bool:
    """In the process table and not a zombie (a container's PID 1 may never reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_within(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(alive(p) for p in pids)


def mp_llm(pp=2, **kw):
    return LLM(pipeline_parallel_size=pp, distributed_executor_backend="mp", **kw)


def assert_refuses_afterwards(llm):
    with pytest.raises(WorkerError, match="failed earlier and was shut down .*create a new LLM"):
        llm.generate(PROMPTS, PARAMS)


def test_killed_stage_is_named_with_its_signal():
    llm = mp_llm(pp=3)
    pids = [w.pid for w in llm.engine.executor.workers]
    os.kill(pids[0], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError, match="pipeline stage 1 was killed by SIGKILL"):
        llm.generate(PROMPTS, PARAMS)
    assert time.monotonic() - start < 30
    assert gone_within(pids, 1)
    assert_refuses_afterwards(llm)


def _explode(message):
    raise ValueError(message)


@dataclasses.dataclass
class ExplodesInWorker(SchedulerOutput):
    """A real batch for stage 0; unpickling it in a worker raises, as a bug in a stage would."""

    def __reduce__(self):
        return _explode, ("stage raised on purpose",)


def test_raising_stage_sends_its_traceback():
    llm = mp_llm()
    pids = [w.pid for w in llm.engine.executor.workers]
    schedule = llm.scheduler.schedule

    def schedule_then_break():
        out = schedule()
        return ExplodesInWorker(**vars(out)) if out.step > 0 and out.total_num_scheduled_tokens else out

    llm.scheduler.schedule = schedule_then_break
    with pytest.raises(WorkerError, match=r"pipeline stage 1 raised:[\s\S]*ValueError: stage raised on purpose"):
        llm.generate(PROMPTS, PARAMS)
    assert gone_within(pids, 1)
    assert_refuses_afterwards(llm)


@pytest.mark.parametrize("pp", [2, 3])
def test_hung_stage_times_out(monkeypatch, pp):
    monkeypatch.setenv("MINISPEC_EXECUTE_MODEL_TIMEOUT_SECONDS", "3")
    llm = mp_llm(pp)
    pids = [w.pid for w in llm.engine.executor.workers]
    os.kill(pids[0], signal.SIGSTOP)  # alive, holding its sockets, answering nothing
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"pipeline stage 1 is hung: nothing arrived from it within 3 s"):
        llm.generate(PROMPTS, PARAMS)
    assert time.monotonic() - start < 30
    assert gone_within(pids, 1)
    assert_refuses_afterwards(llm)


def test_shutdown_stops_workers_and_refuses():
    llm = mp_llm()
    pids = [w.pid for w in llm.engine.executor.workers]
    llm.shutdown()
    assert gone_within(pids, 1)
    for _ in range(2):  # the refused call's abort does not start the workers again
        with pytest.raises(WorkerError, match="this LLM was shut down: create a new LLM"):
            llm.generate(PROMPTS, PARAMS)


def run_script(body: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


SCRIPT_WITH_WORKERS = """
    from minispec import LLM
    if __name__ == "__main__":
        llm = LLM(pipeline_parallel_size=2, distributed_executor_backend="mp")
        print(*[w.pid for w in llm.engine.executor.workers], flush=True)
        {then}
"""


def test_workers_stop_at_interpreter_exit():
    done = run_script(SCRIPT_WITH_WORKERS.format(then="pass  # no shutdown: the interpreter exits"))
    assert done.returncode == 0, done.stderr
    assert gone_within([int(p) for p in done.stdout.split()], 5)


def test_workers_exit_when_the_engine_is_killed():
    script = textwrap.dedent(SCRIPT_WITH_WORKERS.format(then="import time; time.sleep(600)"))
    engine = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    try:
        pids = [int(p) for p in engine.stdout.readline().split()]
        assert pids and all(alive(p) for p in pids)
    finally:
        engine.kill()
        engine.wait()
    assert gone_within(pids, 30)


def test_script_without_main_guard_is_told_what_to_add(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text("from minispec import LLM\nLLM(pipeline_parallel_size=2, distributed_executor_backend='mp')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode != 0
    assert 'put the code that creates the LLM under `if __name__ == "__main__":`' in done.stderr
