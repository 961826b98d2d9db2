"""The persistent-batch renderers: rows and markers against hand-built batches, and the
gather against the runner's own _prepare_inputs in the thread's scenario."""

import pytest
from conftest import cached_state

from minispec.instruments.events import Event, EventKind
from minispec.lab.experiments.scenarios import forum_thread_llm
from minispec.lab.viz.batch import render_batch, render_gather
from minispec.v1.worker.gpu_input_batch import InputBatch

LETTERS = " abcdefghijklmnopqrstuvwxyz"  # id i -> LETTERS[i]; id 0 is drawn as never written


def decode(token_id):
    return LETTERS[token_id] if token_id < len(LETTERS) else "<unk>"


def ids(text):
    return [LETTERS.index(c) for c in text]


def state(req_id, prompt, output=""):
    return cached_state(req_id, ids(prompt), ids(output))


def rows_of(text):
    """{row: (req id, no_spec, tokens, cells)} from render_batch's row lines."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            out[int(parts[0])] = (parts[1], parts[2], parts[3], line[len("row req     no_spec tokens  "):])
    return out


def test_free_rows_keep_their_tokens_and_markers_sit_at_no_spec():
    batch = InputBatch(max_num_reqs=3, max_model_len=12, max_num_blocks_per_req=1)
    batch.add_request(state("C", "theforstat"))
    batch.remove_request("C")
    batch.add_request(state("A", "alis", "t"))
    batch.token_ids_cpu[0, 5:7] = ids("xy")  # two drafts written after the history, as _update_states does
    batch.num_tokens[0] += 2
    batch.token_ids_cpu[1, 0] = 99  # a token the decoder labels with more than one character
    text = render_batch(batch, decode, rows=2)
    lines = text.splitlines()
    assert lines[0].split() == ["position", "0", "1"]
    assert lines[1].endswith("012345678901")
    rows = rows_of(text)
    assert rows[0] == ("A", "5", "7", "alistxytat··")  # C's "tat" after the drafts
    assert rows[1] == ("(free)", "-", "-", "?···········")  # one character per cell, always
    marks = lines[3]
    assert marks.index("^") - lines[1].index("0") == 5 and marks.strip() == "^+"
    assert len(lines) == 5  # ruler, ruler, row 0, its marks, row 1 (a free row has no marks)


def test_a_removed_row_shows_free_and_condense_is_visible():
    batch = InputBatch(max_num_reqs=3, max_model_len=8, max_num_blocks_per_req=1)
    for req_id, prompt in [("C", "abcdef"), ("D", "ghijkl"), ("E", "mn")]:
        batch.add_request(state(req_id, prompt))
    batch.remove_request("D")
    assert rows_of(render_batch(batch, decode))[1][0] == "(free)"
    batch.condense()
    rows = rows_of(render_batch(batch, decode, title="after"))
    assert rows[1] == ("E", "2", "2", "mnijkl··")  # only num_tokens slots travel
    assert rows[2][0] == "(free)"
    with pytest.raises(ValueError, match="rows=4"):
        render_batch(batch, decode, rows=4)


@pytest.mark.parametrize("fixes, slots", [("vllm-0.9.2", "tem"), ("all", " st")])
def test_gather_shows_what_prepare_inputs_read(fixes, slots):
    from minispec.lab.exercises.attempts import decoder

    llm = forum_thread_llm(fixes)
    for event in llm.engine.iter_events():
        if event == Event(EventKind.STAGE, step=2, stage=0):
            break
    runner = llm.engine.executor.runners[0]
    out = next(b.scheduler_output for b in llm.engine.batch_queue if b.scheduler_output.step == 2)
    inputs = runner._prepare_inputs(out)
    text = render_gather(runner.input_batch, inputs, decoder())
    lines = text.splitlines()
    assert lines[0] == f"row 0 A: reads positions 10..13 -> 10:a 11:{slots[0]} 12:{slots[1]} 13:{slots[2]}"
    assert lines[1].strip() == (f"the last 3 are the draft slots: [{slots}] "
                                "(what this stage embeds; the last stage gathers and verifies the same way)")
    assert inputs.verified_drafts[0] == inputs.input_ids[1:4].tolist()
