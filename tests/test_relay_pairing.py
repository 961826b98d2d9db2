"""The "masked at PP = 2" data (minispec/lab/faults/relay_pairing.py) and its figure
(minispec/lab/viz/pairing.py): each payload's pairing agrees with what the relay's own
handler applies in a real run, at PP 2 and 3, with and without ``relay-pairing``; the
figure says it in words and marks, and is legible on a projected 1280x720 screen."""

from __future__ import annotations

import dataclasses

import pytest

from minispec.lab.experiments.schedule import build_llm
from minispec.lab.faults.catalogue import RELAY_FAULTS, RelayFaultPreset
from minispec.lab.faults.relay_pairing import held, pairings
from minispec.lab.viz.legible import too_small
from minispec.lab.viz.pairing import plot_pairing
from minispec.v1.worker.relay.pp_relay import RelayHandler

PAIRING = RelayFaultPreset.RELAY_PAIRING


def test_at_pp_2_the_wrong_slot_holds_the_right_batch_and_at_pp_3_the_next_one():
    assert [p.applied_batch for p in pairings(2, 4, faulty=True)] == [0, 1, 2, 3]
    assert all(p.right for p in pairings(2, 4, faulty=True))
    assert [p.applied_batch for p in pairings(3, 4, faulty=True)] == [1, 2, 3, 4]
    assert [p.applied_slot for p in pairings(3, 4, faulty=True)] == [1, 2, 0, 1]
    assert all(p.right for n in (2, 3, 4) for p in pairings(n, 6, faulty=False))


def test_a_slot_holds_the_newest_batch_run_there():
    assert held(1, 4, 3) == 4 and held(2, 4, 3) == 2 and held(0, 4, 3) == 3
    assert held(2, 1, 3) is None  # no batch ran in slot 2 yet


@pytest.mark.parametrize("pp,batches,message", [
    (1, 3, "pp_size=1: expected an int >= 2"), (2.0, 3, "pp_size=2.0: expected an int >= 2"),
    (2, 0, "num_batches=0: expected an int >= 1"),
])
def test_bad_input_is_refused(pp, batches, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        pairings(pp, batches, faulty=True)


def _applied(monkeypatch, pp: int, faulty: bool) -> list[tuple[int, int | None]]:
    """(payload's batch, the batch whose rows it was applied to) on stage 0 of a real run."""
    ordinal_of, applied = {}, []
    receive, take = RelayHandler.receive, RelayHandler._take

    def receiving(self, batch):
        receive(self, batch)
        if self.group.rank == 0:
            ordinal_of[id(self.mbs[(self.num_batches - 1) % self.pp_size])] = self.num_batches - 1

    def taking(self, entry):
        if self.group.rank == 0:
            rows = self.mbs[self.pairing(entry.ordinal, self.pp_size)]
            applied.append((entry.ordinal, ordinal_of.get(id(rows))))
        return take(self, entry)

    monkeypatch.setattr(RelayHandler, "receive", receiving)
    monkeypatch.setattr(RelayHandler, "_take", taking)
    schedule = dataclasses.replace(RELAY_FAULTS[PAIRING].scenario, pipeline_parallel_size=pp, check_invariants=False,
                                   max_tokens=6)
    build_llm(schedule, model_runner="relay", faults=PAIRING if faulty else None).wait_for_completion()
    return applied


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("faulty", [False, True], ids=["fixed", "relay-pairing"])
def test_the_data_is_what_the_engine_applies(monkeypatch, pp, faulty):
    applied = _applied(monkeypatch, pp, faulty)
    assert len(applied) >= 4
    expected = {p.batch: p.applied_batch for p in pairings(pp, max(b for b, _ in applied) + 1, faulty)}
    assert applied == [(b, expected[b]) for b, _ in applied]
    assert any(b != a for b, a in applied) == (faulty and pp == 3)


def test_the_figure_says_it_in_words_and_is_legible():
    fig = plot_pairing({n: pairings(n, 5, faulty=True) for n in (2, 3)}, "relay-pairing: which rows get each payload")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert (texts.count("✓"), texts.count("✗")) == (5, 5)  # PP 2 all right, PP 3 all wrong
    assert "payload of 0\nto slot 1" in texts
    assert too_small(fig) == []
    from minispec.lab.viz.figure import describe
    assert "PP = 2" in describe(fig) and "PP = 3" in describe(fig)


def test_the_figure_refuses_nothing_to_draw():
    with pytest.raises(ValueError, match="plot_pairing: expected at least one pipeline depth"):
        plot_pairing({}, "x")


def test_run_fault_runs_the_catalogued_scenario_at_another_depth():
    from minispec.lab.faults.reproduce import run_fault
    from minispec.lab.viz.faults import render_fault_run

    masked = run_fault(PAIRING, pipeline_parallel_size=2)
    assert not masked.catalogued and masked.fault.scenario.pipeline_parallel_size == 2
    assert (masked.violation, masked.transport_error, masked.fixed_clean) == (None, None, True)
    text = render_fault_run(masked)
    assert "nothing caught: the faulty run finished clean" in text and "where FAULTS says" not in text
    assert run_fault(PAIRING, pipeline_parallel_size=3).catalogued  # the catalogue's own depth
