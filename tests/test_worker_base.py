"""The runner contract (``minispec/v1/worker/worker_base.py``): every design is a
``WorkerBase``, the recorder is handed rows as data, and both designs describe the
same run the same way."""

from dataclasses import fields
from types import SimpleNamespace

import pytest

from minispec.config import DEFAULT_DRAFT
from minispec.engine.arg_utils import EngineArgs
from minispec.instruments.invariants import check_trace
from minispec.instruments.trace import RowPath, RowRecord, TraceRecorder
from minispec.lab.experiments.scenarios import forum_thread
from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.gpu import ENV_VAR
from minispec.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2
from minispec.v1.worker.gpu_worker import make_runner
from minispec.v1.worker.worker_base import WorkerBase


def drafts_for(design: str) -> str:
    """The draft model where the design's record accepts it, else n-gram drafts (replicated drafting)."""
    return "draft_model" if DESIGNS[design].accepts("draft_model") else "ngram"


def check_builds_as_worker_base(model_runner: str) -> None:
    config = EngineArgs(pipeline_parallel_size=2, max_model_len=64, model_runner=model_runner,
                        speculative_config={"method": drafts_for(model_runner), "num_speculative_tokens": 2,
                                            "model": str(DEFAULT_DRAFT)}).create_engine_config()
    first, last = (make_runner(config, rank) for rank in range(2))
    assert type(first) is DESIGNS[model_runner].runner_class and isinstance(first, WorkerBase)
    assert (first.pp_rank, first.is_last_rank, last.pp_rank, last.is_last_rank) == (0, False, 1, True)


@pytest.mark.parametrize("model_runner", list(DESIGNS))
def test_make_runner_builds_each_design_as_a_worker_base(model_runner):
    check_builds_as_worker_base(model_runner)


def test_a_design_that_leaves_out_a_method_cannot_be_built():
    class Incomplete(WorkerBase):  # a new design that forgot to describe its rows and bind its group
        def execute_model(self, scheduler_output, intermediate_tensors=None): ...
        def drop_all_requests(self): ...

    config = EngineArgs(max_model_len=64).create_engine_config()
    with pytest.raises(TypeError, match="bind_pp_group.*describe_rows|describe_rows.*bind_pp_group"):
        Incomplete(config, 0, "cpu")


def _recorder(steps: int) -> TraceRecorder:
    """A recorder that has seen ``steps`` schedules of one request, ``A``."""
    recorder = TraceRecorder("all", 1)
    request = SimpleNamespace(num_computed_tokens=2, all_token_ids=[5, 6], prompt_token_ids=[5, 6])
    scheduler = SimpleNamespace(requests={"A": request},
                                kv_cache_manager=SimpleNamespace(get_block_ids=lambda req_id: [0]))
    for step in range(steps):
        out = SimpleNamespace(step=step, num_scheduled_tokens={"A": 2}, scheduled_spec_decode_tokens={},
                              scheduled_cached_reqs=SimpleNamespace(req_ids=[], new_token_ids=[]),
                              scheduled_new_reqs=[])
        recorder.on_schedule(out, scheduler)
    return recorder


def _row(req_id: str, row: int, slot: int | None, tokens: list[int]) -> RowRecord:
    return RowRecord(row=row, req_id=req_id, path=RowPath.NEW, token_ids=tokens, num_tokens=len(tokens),
                     num_tokens_no_spec=len(tokens), num_computed_tokens=0, num_scheduled_tokens=2, num_drafts=0,
                     block_ids=[0], slot=slot)


@pytest.mark.parametrize("slot_of", [lambda row: None, lambda row: 3 - row], ids=["persistent batch", "slots"])
def test_the_recorder_keeps_copies_and_names_each_buffer_index_s_previous_occupant(slot_of):
    recorder = _recorder(2)
    given = [_row("A", 0, slot_of(0), [5, 6]), _row("B", 1, slot_of(1), [7, 8])]
    assert recorder.on_stage(0, 0, True, given, [5, 6, 7, 8], {}) is None  # nothing handed back
    # the next step: the two requests swap rows, so each index has a previous occupant
    swapped = [_row("B", 0, slot_of(0), [7, 8, 9]), _row("A", 1, slot_of(1), [5, 6, 4])]
    recorder.on_stage(1, 0, True, swapped, [9, 4], {"A": [4]})
    recorder.on_sampled(1, 0, {"A": [1, 2]})
    assert [(r.prev_req_id, r.prev_token_ids) for r in given] == [(None, [])] * 2  # the caller's rows untouched
    first, second = recorder.trace.step(0).stages[0], recorder.trace.step(1).stages[0]
    assert [r.prev_req_id for r in first.rows] == [None, None]
    assert [(r.prev_req_id, r.prev_token_ids) for r in second.rows] == [("A", [5, 6]), ("B", [7, 8])]
    assert second.verified_drafts == {"A": [4]} and second.sampled == {"A": [1, 2]} and first.sampled == {}
    given[0].token_ids.append(99)  # the caller's list is not the record's
    assert first.rows[0].token_ids == [5, 6]


SLOT_DESIGNS = [d for d in DESIGNS if d != "v1" and DESIGNS[d].accepts("draft_model")]


@pytest.mark.parametrize("design", SLOT_DESIGNS)
def test_every_design_describes_the_same_rows_as_v1(monkeypatch, design):
    """The forum thread with every fix: V1's persistent batch and the slots of V2 (or of the
    relay, built on them) hold the same history, drafts, counts and blocks for every request
    on every stage, and the checker finds both clean. Only how a request got its row
    differs: V1 re-adds a request the other batch displaced, a slot design keeps its slot.
    (A design whose record refuses the thread's draft model, replicated drafting, is left out.)"""
    check_same_rows_as_v1(monkeypatch, design)


def check_same_rows_as_v1(monkeypatch, design: str) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    v1 = forum_thread("all")
    monkeypatch.setattr("minispec.engine.arg_utils.default_model_runner", lambda: design)
    v2 = forum_thread("all")
    assert v1.outputs == v2.outputs and check_trace(v1) == [] == check_trace(v2)
    same = [f.name for f in fields(RowRecord) if f.name not in ("row", "path", "prev_req_id", "prev_token_ids", "slot")]
    paths = set()
    for s1, s2 in zip(v1.steps, v2.steps, strict=True):
        for st1, st2 in zip(s1.stages, s2.stages, strict=True):
            rows1, rows2 = ({r.req_id: r for r in st.rows} for st in (st1, st2))
            assert rows1.keys() == rows2.keys()
            for req_id, r1 in rows1.items():
                r2 = rows2[req_id]
                assert {f: getattr(r1, f) for f in same} == {f: getattr(r2, f) for f in same}, (s1.step, req_id)
                paths.add((r1.path, r2.path))
                assert r1.slot is None and r2.slot is not None
            assert (st1.verified_drafts, st1.sampled) == (st2.verified_drafts, st2.sampled)
    assert (RowPath.READDED, RowPath.STAYED) in paths


class _Silent(GPUModelRunnerV2):
    """A design that forgets both recording calls: Model Runner V2 with them as no-ops."""

    def _record_stage(self, *args): ...
    def _record_sampled(self, *args): ...


class _NoStageRecord(GPUModelRunnerV2):
    """One that forgets only ``_record_stage``."""

    def _record_stage(self, *args): ...


def _stale_drafts_run(worker_cls=None):
    from minispec import LLM, SamplingParams

    llm = LLM(model_runner="v2", worker_cls=worker_cls, pipeline_parallel_size=2, faults="v2-stale-drafts",
              record=True, speculative_config={"method": "draft_model", "num_speculative_tokens": 3},
              max_num_seqs=8, max_model_len=128)
    prompts = ["the quick brown fox", "once upon a time", "in the beginning", "a b c d e f"]
    llm.generate(prompts, SamplingParams(temperature=0, max_tokens=16), arrival_steps=[i % 2 for i in range(4)])
    return llm.trace


@pytest.mark.parametrize("worker_cls,message", [
    (_Silent, r"^stage 0 ran step 0 and recorded nothing: its runner must call _record_stage "),
    (_NoStageRecord, r"^stage 1 handed over what it sampled at step 0 but recorded no rows for it: its runner must "
                     r"call _record_stage "),
])
def test_a_design_that_does_not_record_is_refused_not_called_clean(worker_cls, message):
    """Planted: under v2-stale-drafts the checker finds violations on V2's own records; the same
    runner with its recording calls made no-ops used to get "0 violations from 0 stage records"
    (and forgetting only _record_stage a StopIteration). The recorder now names stage, step and call."""
    from minispec.instruments.trace import MissingRecord

    assert check_trace(_stale_drafts_run()) != []  # the fault is there to be found
    with pytest.raises(MissingRecord, match=message):
        _stale_drafts_run(worker_cls)
