"""Why minispec posts its receives ahead: how long a message takes to arrive
when the receive is posted before it is sent, and when after, while the
sender is busy computing (as a pipeline stage is, in its next forward pass).

Two ranks on one ``StageGroup`` (gloo over loopback), one thread each. Each
round the sender sends one object, then computes for ``--busy-ms``; the
receiver computes for a quarter of that (the message is sent meanwhile) and
then wants the message. Its receive was either posted before the send
("ahead") or is posted only now ("late"). Printed: the median and 90th
percentile of how long the receiver then waits, and the ratio of the medians.
Late, delivery needs the sender's gloo thread, which has to get a core while
the sender's own thread computes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from minispec.distributed.parallel_state import StageGroup  # noqa: E402

SEND, GO = 1, 2  # tags: the measured message, and "start the next round"


def busy(ms: float) -> None:
    x, w = torch.randn(8, 640), torch.randn(640, 1792)
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        x @ w


def sender(port: int, rounds: int, busy_ms: float) -> None:
    torch.set_num_threads(1)
    group = StageGroup(dist.TCPStore("127.0.0.1", port, 2, is_master=False), 1, 2, 30.0, "127.0.0.1")
    for _ in range(rounds):
        group.recv_object(0, GO)
        group.send_object(("sent at", group.now()), 0, SEND)
        busy(busy_ms)
    time.sleep(0.5)  # let the last message go before this process leaves


def measure(mode: str, rounds: int, busy_ms: float) -> list[float]:
    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    peer = mp.get_context("spawn").Process(target=sender, args=(store.port, rounds, busy_ms))
    peer.start()
    group = StageGroup(store, 0, 2, 30.0, "127.0.0.1")
    waits = []
    for _ in range(rounds):
        receive = group.post_object(1, SEND) if mode == "ahead" else None
        group.send_object("go", 1, GO)
        busy(busy_ms / 4)  # as a stage does: the message is sent while both compute
        wanted = group.now()
        receive = receive or group.post_object(1, SEND)
        receive.take()
        waits.append(group.now() - wanted)
        time.sleep(busy_ms / 1e3)  # the sender finishes its round
    peer.join()
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--busy-ms", type=float, default=20.0)
    args = parser.parse_args()
    print(f"{args.rounds} messages each; the sender computes {args.busy_ms:g} ms after each send, "
          f"the receiver {args.busy_ms / 4:g} ms before it wants the message")
    medians = {}
    for mode in ("ahead", "late"):
        ms = sorted(1e3 * w for w in measure(mode, args.rounds, args.busy_ms))
        medians[mode] = statistics.median(ms)
        print(f"  receive posted {mode:5}: median {medians[mode]:.2f} ms, 90th percentile "
              f"{ms[int(0.9 * len(ms))]:.2f} ms")
    print(f"  late / ahead (medians): {medians['late'] / max(medians['ahead'], 1e-3):.0f}x")


if __name__ == "__main__":
    main()
