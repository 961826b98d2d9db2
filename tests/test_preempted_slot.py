"""A late commit reviving a preempted request's slot (tenstorrent/vllm-tt-plugin#131's second shape),
in Model Runner V2: a request preempted with a batch in flight has its slot freed at once (vLLM
0.30.0 ``finish_requests``), and the broadcast entry of that batch arrives later. The slot's
generation counter (``PPHandler``, vLLM 0.30.0 ``vllm/v1/worker/gpu/pp_utils.py`` 79-82, 130-134)
drops it. Without the counter (preset ``v2-slot-reuse``) the entry lands in the freed slot.
V1 has no such slot: a preempted request keeps its state and loses its row, so a late entry only
extends its history, which the scheduler's stale delivery extends alike."""

import dataclasses

import numpy as np
import pytest

from minispec.instruments.invariants import Invariant, check_trace
from minispec.lab.experiments.scenarios import exercise_schedule
from minispec.lab.experiments.schedule import build_llm, run_recorded
from minispec.v1.worker.gpu import pp_utils
from minispec.v1.worker.gpu.model_runner_base import GPUModelRunnerBase

SCHEDULE = dataclasses.replace(exercise_schedule(3, 2, "ngram"), check_invariants=False)


@pytest.fixture
def freed_slots(monkeypatch):
    """(handler, slot, generation once freed) -> (request, freed by a preemption?)"""
    freed = {}
    finish = GPUModelRunnerBase.finish_requests

    def recording(self, out):
        leaving = {r: self.req_states.req_id_to_index.get(r) for r in out.finished_req_ids | out.preempted_req_ids}
        finish(self, out)
        for req_id, slot in leaving.items():
            if self.pp_handler is not None and slot is not None:
                freed[(id(self.pp_handler), slot, int(self.pp_handler.req_idx_gen_np[slot]))] = (
                    req_id, req_id in out.preempted_req_ids)

    monkeypatch.setattr(GPUModelRunnerBase, "finish_requests", recording)
    return freed


def _late_rows(handler, entry, freed):
    """The entry's rows whose slot was freed since the receive, each with who held it."""
    gone = entry.need_sampled_mask & (handler.req_idx_gen_np[entry.idx_mapping_np] != entry.gen_at_receive_np)
    return [(i, freed[(id(handler), int(entry.idx_mapping_np[i]), int(entry.gen_at_receive_np[i]) + 1)])
            for i in np.flatnonzero(gone)]


def test_the_generation_check_drops_late_entries_for_preempted_slots(monkeypatch, freed_slots):
    dropped, take = [], pp_utils.PPHandler._take

    def watching(self, entry):
        dropped.extend(who for _, who in _late_rows(self, entry, freed_slots))
        return take(self, entry)

    monkeypatch.setattr(pp_utils.PPHandler, "_take", watching)
    assert check_trace(run_recorded(build_llm(SCHEDULE, model_runner="v2"))) == []
    assert [r for r, preempted in dropped if preempted] == ["C", "B", "D"]  # and three of finished requests


def test_a_late_entry_landing_in_a_preempted_slot_breaks_invariant_4(monkeypatch, freed_slots):
    """Only the rows of slots freed by a preemption are let through: the stage's count for C, whose
    slot took its own late entry, runs behind the scheduler's."""
    take = pp_utils.PPHandler._take

    def reviving(self, entry):
        for i, (_, preempted) in _late_rows(self, entry, freed_slots):
            if preempted:
                entry.gen_at_receive_np[i] = self.req_idx_gen_np[entry.idx_mapping_np[i]]
        return take(self, entry)

    monkeypatch.setattr(pp_utils.PPHandler, "_take", reviving)
    first = check_trace(run_recorded(build_llm(SCHEDULE, model_runner="v2")))[0]
    assert (first.invariant, first.step, first.stage, first.req_id) == (Invariant.SHARED_ACCOUNTING, 33, 0, "C")


def test_the_slot_reuse_preset_revives_them_too():
    """``v2-slot-reuse`` drops the check for every freed slot, finished or preempted: it breaks
    the same invariant for the same request two steps earlier."""
    first = check_trace(run_recorded(build_llm(SCHEDULE, model_runner="v2", faults="v2-slot-reuse")))[0]
    assert (first.invariant, first.step, first.stage, first.req_id) == (Invariant.SHARED_ACCOUNTING, 31, 0, "C")
