"""The multi-process executor: one process per stage, hidden states over
torch.distributed (gloo). Same tokens as the in-process pipeline, which the
greedy-equivalence tests tie to transformers."""

import pytest

from minispec import LLM, SamplingParams
from minispec.lab.experiments.schedule import greedy_reference
from minispec.v1.executor.multiproc_executor import WorkerError
from minispec.v1.worker.designs import DESIGNS

pytestmark = pytest.mark.slow

PROMPTS = ["The for statement ", "A class ", "Exceptions are raised ", "x = ", "The import ", "Strings ", "If ", "def "]
PARAMS = SamplingParams(temperature=0, max_tokens=24)
ARRIVALS = [i // 2 for i in range(len(PROMPTS))]


@pytest.fixture(scope="module")
def reference():
    return list(greedy_reference(dict(enumerate(PROMPTS)), PARAMS.max_tokens).values())


def _method(design: str) -> str:
    return "draft_model" if DESIGNS[design].accepts("draft_model") else "ngram"  # replicated drafting: n-grams


# Every registered design at 3 stages, synchronous and async (the relay's payload under async:
# issue 32), and a few more shapes.
MP_CONFIGS = [(d, 3, _method(d), a) for d in DESIGNS for a in (False, True)] + [
    ("v1", 2, "draft_model", False), ("v2", 2, "draft_model", True), ("relay", 4, "ngram", False)]


@pytest.mark.parametrize("design,pp,method,async_scheduling", MP_CONFIGS,
                         ids=[f"{d}-pp{p}-{m}" + ("-async" if a else "") for d, p, m, a in MP_CONFIGS])
def test_multiproc_pipeline_matches_greedy(reference, design, pp, method, async_scheduling):
    """Each design's stages over gloo; the relay's payload goes around the ring between processes."""
    with LLM(pipeline_parallel_size=pp, speculative_config={"method": method, "num_speculative_tokens": 3},
             distributed_executor_backend="mp", block_size=8, num_gpu_blocks=64, model_runner=design,
             async_scheduling=async_scheduling) as llm:
        outs = llm.generate(PROMPTS, PARAMS, arrival_steps=ARRIVALS)
        assert [o.outputs[0].token_ids for o in outs] == reference
        assert llm.stats()["accepted_tokens"] > 0
    assert not any(w.is_alive() for w in llm.engine.executor.workers)


def test_multiproc_yields_the_in_process_events():
    """Rank 0 hears of the other stages' forwards only with the last one's output, so the
    order differs; the events, one per schedule, stage forward and update, are the same."""
    def events(backend):
        with LLM(pipeline_parallel_size=2, distributed_executor_backend=backend) as llm:
            for i, prompt in enumerate(PROMPTS[:4]):
                llm.add_request(prompt, PARAMS, arrival_step=i // 2)
            return list(llm.engine.iter_events())

    mp, uni = events("mp"), events("uni")
    assert mp != uni and sorted(mp, key=str) == sorted(uni, key=str)
    assert [str(e) for e in mp[:5]] == ["schedule step 0", "schedule step 1", "stage 0 runs step 0",
                                        "stage 1 runs step 0", "update step 0"]


def test_worker_failure_reaches_the_engine(tmp_path):
    import shutil

    from minispec.config import DEFAULT_TARGET

    broken = tmp_path / "broken"
    shutil.copytree(DEFAULT_TARGET, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(WorkerError, match=r"pipeline stage 1 raised:[\s\S]*header"):
        LLM(model=broken, pipeline_parallel_size=2, distributed_executor_backend="mp")


def test_traces_need_the_in_process_executor():
    with pytest.raises(ValueError, match="record/check_invariants: expected distributed_executor_backend='uni'"):
        LLM(pipeline_parallel_size=2, distributed_executor_backend="mp", record=True)
    with pytest.raises(ValueError, match="distributed_executor_backend='ray': expected 'uni', 'mp' or 'torchrun'"):
        LLM(distributed_executor_backend="ray")


def test_dropped_engine_stops_its_workers():
    import gc
    import time

    llm = LLM(pipeline_parallel_size=2, distributed_executor_backend="mp")
    workers = llm.engine.executor.workers
    del llm
    gc.collect()
    deadline = time.monotonic() + 15
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(w.is_alive() for w in workers)
