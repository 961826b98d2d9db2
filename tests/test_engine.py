"""The engine loop: batch queue interleaving, stage events and device placement."""

import pytest
import torch

from minispec.instruments.events import Event, EventKind
from minispec.lab.experiments.scenarios import BATCH_0, BATCH_1, forum_thread_llm
from minispec.platforms import stage_device


def test_pipeline_interleaving_of_the_thread():
    llm = forum_thread_llm("all", max_tokens=6)
    events = list(llm.engine.iter_events())
    assert [str(e) for e in events[:10]] == [
        "schedule step 0",        # batch_0 prefills
        "schedule step 1",        # batch_1 arrives while batch_0 is in flight
        "stage 0 runs step 0",
        "stage 1 runs step 0",    # in the same tick as the next line: the
        "stage 0 runs step 1",    # pipeline holds two batches at once
        "update step 0",
        "schedule step 2",        # batch_0 decodes with drafts
        "stage 1 runs step 1",
        "stage 0 runs step 2",
        "update step 1",
    ]
    assert events[2] == Event(EventKind.STAGE, step=0, stage=0)
    assert llm.trace.events == events  # the trace records the engine's own events, in the same order
    batches = [tuple(sorted(s.schedule.num_scheduled_tokens)) for s in llm.trace.steps]
    assert batches[:6] == [BATCH_0, BATCH_1] * 3  # decode batches alternate
    # While both batches are alive, every decode request is re-added, every
    # step, on every stage.
    for step in llm.trace.steps[2:6]:
        assert {row.path for stage in step.stages for row in stage.rows} == {"re-added"}


def test_one_stage_keeps_rows_and_steps_in_one_go():
    from minispec import LLM, SamplingParams

    llm = LLM(speculative_config={"method": "ngram", "num_speculative_tokens": 2}, record=True)
    llm.add_request("A list is ", SamplingParams(temperature=0, max_tokens=5), request_id="A")
    assert llm.engine.step_with_batch_queue() == [
        Event(EventKind.SCHEDULE, 0), Event(EventKind.STAGE, 0, stage=0), Event(EventKind.UPDATE, 0)]
    llm.engine.run()
    assert {row.path for s in llm.trace.steps[1:] for st in s.stages for row in st.rows} == {"stayed"}


def test_an_event_has_a_stage_exactly_when_it_is_a_stage_event():
    with pytest.raises(ValueError, match=r"Event\(stage, step=3, stage=None\): expected a stage for a stage event"):
        Event(EventKind.STAGE, 3)
    with pytest.raises(ValueError, match="and none for the others"):
        Event(EventKind.UPDATE, 3, stage=0)


def test_the_engine_and_llm_use_only_the_executor_interface():
    """Each backend owns its recovery: the engine and ``LLM`` touch an executor only through
    ``Executor``'s public names (read from the source, so a new reach-in fails here)."""
    import ast
    import inspect

    from minispec.entrypoints import llm
    from minispec.v1.engine import core
    from minispec.v1.executor.abstract import Executor

    interface = {n for n in dir(Executor) if not n.startswith("_")} | set(Executor.__annotations__)
    for module in (core, llm):
        used = {node.attr for node in ast.walk(ast.parse(inspect.getsource(module)))
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "executor"}
        assert used and used <= interface, (module.__name__, used - interface)


def test_stage_device_placement(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [stage_device(r, 2) for r in range(2)] == [torch.device("cpu")] * 2
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [stage_device(r, 2) for r in range(2)] == [torch.device("cuda:0"), torch.device("cuda:1")]
    assert [stage_device(r, 3) for r in range(3)] == [torch.device("cuda:0")] * 3
    assert stage_device(1, 2, override="cpu") == torch.device("cpu")


def test_drafts_survive_every_row_path():
    """Invariant 2 holds whether a request stayed, was moved by condense, was
    re-added, or was preempted and resumed; this run exercises all four."""
    from minispec import LLM, SamplingParams
    from minispec.instruments.invariants import check_trace
    from minispec.training.corpus import split_text

    _, heldout = split_text()
    prompts = [heldout[300 * i : 300 * i + 10 + 7 * i] for i in range(10)]
    llm = LLM(pipeline_parallel_size=2, speculative_config={"method": "draft_model", "num_speculative_tokens": 3},
              record=True, max_num_batched_tokens=40, block_size=8, num_gpu_blocks=20, max_model_len=128)
    llm.generate(prompts, SamplingParams(temperature=0, max_tokens=30), arrival_steps=list(range(10)))
    with_drafts = {row.path for s in llm.trace.steps for st in s.stages for row in st.rows if row.num_drafts}
    assert with_drafts == {"stayed", "moved", "re-added"}
    resumed = [r for s in llm.trace.steps for r, c in s.schedule.num_computed_tokens.items()
               if c == 0 and r not in s.schedule.new_req_ids]
    assert resumed  # scheduled from position 0 again: preempted, then resumed
    assert llm.stats()["preemptions"] > 0
    assert check_trace(llm.trace) == []


def test_update_states_leaves_a_scheduled_row_it_has_no_entry_for():
    """A row in the persistent batch that is scheduled but listed neither as new nor as
    cached is left alone, as vLLM's ``_update_states`` leaves it: the trace's row-path
    bookkeeping must not be what raises (it raised ``KeyError`` here)."""
    from minispec import LLM, SamplingParams
    from minispec.v1.core.sched.output import CachedRequestData, SchedulerOutput
    from minispec.v1.request import Request

    llm = LLM(pipeline_parallel_size=1, seed=0)
    scheduler, runner = llm.engine.scheduler, llm.engine.executor.runners[0]
    scheduler.add_request(Request("A", [5, 6, 7], SamplingParams(temperature=0, max_tokens=4)))
    runner._update_states(scheduler.schedule())
    before = runner.input_batch.token_ids_cpu[0, :3].tolist()
    out = SchedulerOutput([], CachedRequestData(), {"A": 1}, 1, {}, set())
    runner._update_states(out)
    assert runner.input_batch.req_id_to_index == {"A": 0}
    assert runner.input_batch.token_ids_cpu[0, :3].tolist() == before == [5, 6, 7]


def test_an_llm_reused_for_many_calls_keeps_only_unfinished_requests():
    """vLLM's scheduler forgets a request when it finishes (0.9.2 ``_free_blocks``); so
    does minispec's, and every stage is told: what it holds stays one call's worth."""
    from minispec import LLM, SamplingParams

    llm = LLM(pipeline_parallel_size=2, max_model_len=64,
              speculative_config={"method": "ngram", "num_speculative_tokens": 2}, check_invariants=True)
    params = SamplingParams(temperature=0, max_tokens=3)
    for _ in range(12):
        outputs = llm.generate(["The for ", "A list "], params, arrival_steps=[0, 1])  # two batches in flight
        assert [len(o.outputs[0].token_ids) for o in outputs] == [3, 3]
        assert llm.scheduler.requests == {}
        assert [r.request_id for r in llm.engine.finished] == [o.request_id for o in outputs]  # this call's only
        # the last finishes reach the stages with the next call's first schedule
        assert all(len(runner.requests) <= 2 for runner in llm.engine.executor.runners)
    assert llm.stats()["generated_tokens"] == 12 * 2 * 3
