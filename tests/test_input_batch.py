"""InputBatch: rows, stale data, condense -- and the thread's question about add_request."""

import numpy as np
from conftest import cached_state as state

from minispec.v1.worker.gpu_input_batch import InputBatch


def test_add_request_copies_prompt_and_output_but_not_drafts():
    batch = InputBatch(4, 32, 4)
    s = state("A", [1, 2, 3], output=[4])
    s.spec_token_ids = [7, 8, 9]  # the drafts this stage was given
    row = batch.add_request(s)
    assert batch.token_ids_cpu[row, :4].tolist() == [1, 2, 3, 4]
    assert batch.token_ids_cpu[row, 4:7].tolist() == [0, 0, 0]  # no drafts copied
    assert batch.num_tokens[row] == batch.num_tokens_no_spec[row] == 4


def test_remove_leaves_stale_tokens_and_add_takes_smallest_free_row():
    batch = InputBatch(4, 32, 4)
    for req_id, prompt in [("C", range(10, 20)), ("D", range(20, 30)), ("E", [5])]:
        batch.add_request(state(req_id, prompt))
    batch.remove_request("D")
    batch.remove_request("C")
    assert batch.token_ids_cpu[0, :10].tolist() == list(range(10, 20))  # still there
    row = batch.add_request(state("A", [1, 2]))
    assert row == 0
    assert batch.token_ids_cpu[0, :5].tolist() == [1, 2, 12, 13, 14]  # C's leftovers after A


def test_condense_moves_highest_rows_into_holes():
    batch = InputBatch(6, 16, 4)
    for i, req_id in enumerate("ABCDE"):
        batch.add_request(state(req_id, [i + 1] * 3, blocks=[i]))
    batch.remove_request("A")
    batch.remove_request("C")
    batch.condense()
    assert batch.req_ids == ["E", "B", "D"]
    assert batch.req_id_to_index == {"E": 0, "B": 1, "D": 2}
    assert batch.token_ids_cpu[0, :3].tolist() == [5, 5, 5]
    assert batch.block_table.block_table_np[0, 0] == 4
    assert np.all(batch.num_tokens[:3] == 3)


def test_condense_moves_only_num_tokens_slots():
    batch = InputBatch(3, 16, 4)
    batch.add_request(state("A", [1, 1, 1, 1, 1, 1]))
    batch.add_request(state("B", [2, 2]))
    batch.remove_request("A")
    batch.condense()
    # B (2 tokens) moved into row 0; A's tail is still behind it.
    assert batch.token_ids_cpu[0, :6].tolist() == [2, 2, 1, 1, 1, 1]


def test_condense_moves_rows_with_the_plugged_move_row():
    moves = []

    def move_row(batch, src, tgt):
        moves.append((src, tgt))
        InputBatch._move_row(batch, src, tgt)

    batch = InputBatch(3, 16, 4, move_row=move_row)
    for i, req_id in enumerate("ABC"):
        batch.add_request(state(req_id, [i + 1] * 3, blocks=[i]))
    batch.remove_request("A")
    batch.condense()
    assert moves == [(2, 0)] and batch.req_ids == ["C", "B"]
