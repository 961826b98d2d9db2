"""StageGroup's messages, between two ranks on threads of this process: objects
of any size arrive whole and in order, posted receives fill in the order they
were posted, and the sends kept alive stay bounded however long a run is."""

import datetime
import threading
import time

import pytest
import torch
import torch.distributed as dist

from minispec.distributed.parallel_state import FRAME_BYTES, MAX_PENDING_SENDS, StageGroup, _clock_origin


def pair():
    """Two connected ranks; rank 1 is built on a thread because the constructor waits on a barrier."""
    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    client, peer = dist.TCPStore("127.0.0.1", store.port, 2, is_master=False), {}
    thread = threading.Thread(target=lambda: peer.update(g=StageGroup(client, 1, 2, 10.0, "127.0.0.1")))
    thread.start()
    rank0 = StageGroup(store, 0, 2, 10.0, "127.0.0.1")
    thread.join()
    return rank0, peer["g"]


@pytest.fixture(scope="module")
def groups():
    return pair()


@pytest.mark.parametrize("size", [0, 100, FRAME_BYTES - 20, FRAME_BYTES, 5 * FRAME_BYTES + 3])
def test_objects_arrive_whole_whatever_their_size(groups, size):
    a, b = groups
    obj = {"payload": bytes(range(256)) * (size // 256) + b"x" * (size % 256), "size": size}
    a.send_object(obj, 1, tag=3)
    assert b.recv_object(0, tag=3) == obj


def test_posted_receives_fill_in_posting_order(groups):
    a, b = groups
    posted = [b.post_object(0, tag=4) for _ in range(3)]  # before anything is sent
    big = "y" * (2 * FRAME_BYTES)  # spills: its rest must not land in the next posted frame
    for obj in ("first", big, "third"):
        a.send_object(obj, 1, tag=4)
    assert [p.take() for p in posted] == ["first", big, "third"]


def test_a_posted_tensor_receive_takes_a_shorter_message(groups):
    a, b = groups
    receive = b.post(torch.full((8, 4), -1.0), 0, tag=5)
    a.send(torch.arange(12.0).reshape(3, 4), 1, tag=5)
    got = receive.take()
    assert got[:3].flatten().tolist() == list(range(12))
    assert (got[3:] == -1).all()


def test_sends_kept_alive_stay_bounded(groups):
    a, b = groups
    for i in range(3 * MAX_PENDING_SENDS):
        a.send_object(i, 1, tag=6)
        assert b.recv_object(0, tag=6) == i
    assert len(a.sending) <= MAX_PENDING_SENDS + 1


def test_a_silent_peer_times_out_instead_of_hanging():
    a, _ = pair()
    a.timeout = datetime.timedelta(seconds=0.3)
    with pytest.raises(RuntimeError, match="Timed out"):
        a.recv_object(1, tag=7)


def test_ranks_on_one_machine_count_from_one_origin(groups):
    rank0, rank1 = groups
    assert rank0.origin_ns == rank1.origin_ns  # each leaving the barrier on its own clock differs


def test_a_rank_on_another_machine_starts_its_own_clock():
    store = dist.HashStore()
    origin = _clock_origin(store, 0)
    time.sleep(0.002)
    assert _clock_origin(store, 1) == origin  # same machine: rank 0's, however late it asks
    store.set("clock_origin", f"another-boot {origin}")
    assert _clock_origin(store, 1) >= origin + 2_000_000  # its own, counted from now
