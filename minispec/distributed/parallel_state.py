"""Point-to-point messages between pipeline stages (vLLM: ``GroupCoordinator``
in ``vllm/distributed/parallel_state.py``: ``send_object``, ``recv_object``,
``send_tensor_dict``).

vLLM's ``send_object`` sends an object as two blocking messages, its size and
then its bytes, and ``recv_object`` receives them in the same order (0.9.2 to
0.16.0, from reading the code). minispec's stages run one batch ahead of each
other, so it does two things differently:

- **Sends are asynchronous.** gloo completes a send only when the peer
  receives it; a blocking send from a stage that is one batch ahead would wait
  on a peer that is itself waiting on it.
- **Receives are posted before the message is sent** (``post`` and
  ``post_object``, then ``take``). gloo delivers a message once the receiver has
  posted a buffer for it. If the buffer is posted late, the sender's gloo
  thread must wake to deliver it, and while the sender's own thread is busy in a
  forward pass that took 4 to 8 ms a message on this 2-core machine, against
  0.06 ms posted ahead (``benchmarks/bench_messages.py``). Posted early, the
  send goes out at once.
  A posted buffer has a fixed size, so an object travels as one frame: its
  length, then its pickled bytes; bytes beyond ``FRAME_BYTES`` follow in a
  second message on a tag of their own.

A tensor message can also travel *checked* (``send_checked`` / ``post_checked``, on either
group): a small header with its shape and dtype goes first, and the receive compares it
with the buffer it posted before it takes the message. A raw gloo receive cannot tell:
a shorter message fills the front of the posted buffer and the rest keeps what it held
(``[n, 1]`` rows land packed in row 0), and a longer one aborts the receiving process
(``gloo::EnforceNotMet``, "op.preamble.length <= op.nbytes", transport/tcp/pair.cc, torch
2.13.0); NCCL does not compare element counts either and hangs (vLLM PR #46994, comment
of 2026-09-01). A checked receive names the mismatch instead.

Every checked message also says which step it belongs to and where it falls on its channel
(sender, receiver, tag): the header carries the scheduler step the sender was at and the
sender's sequence number on that channel, and the receive was posted for a step and with its
own count of receives on the channel. Any difference (tag, step, sequence number, shape or
dtype) breaks invariant 7, message-schedule agreement (``minispec.instruments.invariants``):
``MessageMismatch`` carries the ``Violation`` (``violation``: the channel and both headers); out
of schedule (another step or sequence number) its text names the channel, the step each side
was at and what each expected; in schedule but of another size it keeps the size mismatch's
text, which the runner prefixes with its stage and step. A sender that posts a message twice
shifts every later message on the channel by one; a sender at another step than the receive
was posted for is caught on the first message. vLLM 0.30.0's own broadcasts carry no such header (from reading
``vllm/v1/worker/gpu/pp_utils.py``: tensors only).
For a switch that intervenes here: ``send_checked(..., step=)`` and ``post_checked(..., step=)``
take the step, and each group's ``message_seqs`` holds the counts per channel.

Left out: tensor parallelism's groups, NCCL and device communicators, the
shared-memory broadcast vLLM uses for control messages on one machine.
"""

from __future__ import annotations

import datetime
import os
import pickle
import socket
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

IDLE = datetime.timedelta(days=365)  # a stage may wait this long for its next batch
FRAME_BYTES = 1 << 16  # a posted object receive: enough for a SchedulerOutput of a few dozen requests
SPILL_TAG = 1000  # added to a tag for the bytes of an object that did not fit its frame
MAX_PENDING_SENDS = 64  # older sends are waited for, so their buffers can be freed
HEADER = 8  # the frame's first bytes: the pickled object's length
CHECK_TAG = 2000  # added to a tag for a checked message's header
MAX_DIMS = 4  # a checked message has at most this many dimensions
DTYPES = (torch.int64, torch.int32, torch.float32, torch.float16, torch.bfloat16, torch.uint8)


class Receive:
    """A posted receive: ``take`` waits for its message."""

    def __init__(self, group: "StageGroup", buffer: torch.Tensor, src: int, tag: int):
        self.group, self.buffer, self.src, self.tag = group, buffer, src, tag
        self.work = group.pg.recv([buffer], src, tag)

    def take(self, idle: bool = False) -> torch.Tensor:
        self.work.wait(IDLE if idle else self.group.timeout)
        return self.buffer


class ObjectReceive(Receive):
    def take(self, idle: bool = False):
        frame = super().take(idle).numpy()
        size = int.from_bytes(frame[:HEADER].tobytes(), "little")
        data = frame[HEADER:HEADER + size].tobytes()
        if size > len(data):  # the rest follows on the spill tag
            rest = Receive(self.group, torch.empty(size - len(data), dtype=torch.uint8), self.src,
                           self.tag + SPILL_TAG)
            data += rest.take().numpy().tobytes()
        return pickle.loads(data)


def _clock_origin(store, rank: int) -> int:
    """Where this rank's ``now()`` counts from. Ranks on one machine read one monotonic clock, so
    they take rank 0's origin and their spans line up exactly. A rank on another machine starts
    its own as it leaves the barrier; ranks leave it up to milliseconds apart under load, so its
    spans are that far off."""
    machine = Path("/proc/sys/kernel/random/boot_id")
    here = machine.read_text().strip() if machine.exists() else socket.gethostname()
    if rank == 0:
        origin = time.perf_counter_ns()
        store.set("clock_origin", f"{here} {origin}")
        return origin
    there, origin = store.get("clock_origin").decode().split()
    return int(origin) if there == here else time.perf_counter_ns()


class StageGroup:
    """The ranks of one pipeline on a private gloo process group.

    Private (a ``ProcessGroupGloo`` rather than ``init_process_group``'s global
    one) so that one process can hold several pipelines, one after another or at once."""

    def __init__(self, store, rank: int, world_size: int, timeout_s: float, hostname: str | None = None):
        opts = dist.ProcessGroupGloo._Options()
        opts._timeout = IDLE
        opts._devices = [_gloo_device(hostname)]
        self.pg = dist.ProcessGroupGloo(store, rank, world_size, opts)
        self.rank, self.timeout = rank, datetime.timedelta(seconds=timeout_s)
        self.sending: deque = deque()  # (work, tensor): a tensor must live until its send completes
        self.message_seqs: dict[tuple, int] = {}  # checked messages so far, per channel side (next_seq)
        self.pg.barrier().wait()
        self.origin_ns = _clock_origin(store, rank)

    def now(self) -> float:
        return (time.perf_counter_ns() - self.origin_ns) / 1e9

    def send(self, tensor: torch.Tensor, dst: int, tag: int) -> None:
        # gloo's send works never report completion on their own; waiting on the
        # oldest (long since received) bounds what is kept alive.
        while len(self.sending) > MAX_PENDING_SENDS:
            self.sending.popleft()[0].wait(self.timeout)
        self.sending.append((self.pg.send([tensor], dst, tag), tensor))

    def post(self, buffer: torch.Tensor, src: int, tag: int) -> Receive:
        """Post a receive now; a message no larger than ``buffer`` fills its front."""
        return Receive(self, buffer, src, tag)

    def send_object(self, obj, dst: int, tag: int) -> None:
        data = pickle.dumps(obj)
        head = len(data).to_bytes(HEADER, "little") + data[:FRAME_BYTES - HEADER]
        self.send(torch.frombuffer(bytearray(head), dtype=torch.uint8), dst, tag)
        if len(data) > FRAME_BYTES - HEADER:
            self.send(torch.frombuffer(bytearray(data[FRAME_BYTES - HEADER:]), dtype=torch.uint8), dst,
                      tag + SPILL_TAG)

    def post_object(self, src: int, tag: int) -> ObjectReceive:
        return ObjectReceive(self, torch.empty(FRAME_BYTES, dtype=torch.uint8), src, tag)

    def recv_object(self, src: int, tag: int, idle: bool = False):
        return self.post_object(src, tag).take(idle)


@dataclass(frozen=True)
class Header:
    """What a checked message says of itself, or what its receive expected."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    step: int  # the scheduler step the sender was at (or the receive was posted for); -1: none given
    seq: int  # its place on the channel (sender, receiver, tag), from 0

    def encode(self) -> torch.Tensor:
        if len(self.shape) > MAX_DIMS or self.dtype not in DTYPES:
            raise ValueError(f"a checked message of shape {self.shape} and dtype {self.dtype}: expected at most "
                             f"{MAX_DIMS} dimensions and one of {DTYPES}")
        shape = list(self.shape) + [-1] * (MAX_DIMS - len(self.shape))
        return torch.tensor([DTYPES.index(self.dtype), len(self.shape), *shape, self.step, self.seq],
                            dtype=torch.int64)

    @classmethod
    def decode(cls, header: torch.Tensor) -> "Header":
        dtype, ndim, *rest = header.tolist()
        return cls(tuple(rest[:ndim]), DTYPES[dtype], rest[MAX_DIMS], rest[MAX_DIMS + 1])

    def describe(self) -> str:
        return f"{list(self.shape)} {self.dtype} of step {self.step}, message #{self.seq}"


HEADER_LEN = 2 + MAX_DIMS + 2  # dtype, ndim, the shape padded with -1, step, seq


class MessageMismatch(RuntimeError):
    """A checked message is not the one its receive was posted for: invariant 7, message-schedule
    agreement. ``sent`` and ``posted`` are the two shapes; ``violation`` the invariant's record
    (its ``expected`` and ``actual``: the two headers, each a ``Header``) or None where no header was read."""

    def __init__(self, message: str, sent: tuple[int, ...] = (), posted: tuple[int, ...] = (), violation=None):
        super().__init__(message)
        self.sent, self.posted, self.violation = tuple(sent), tuple(posted), violation


def next_seq(group, key: tuple) -> int:
    """The next sequence number on one side of a channel (``key``: its direction, peer and tag)."""
    seq = group.message_seqs.get(key, 0)
    group.message_seqs[key] = seq + 1
    return seq


def send_checked(group, tensor: torch.Tensor, dst: int, tag: int, step: int = -1) -> None:
    """Send ``tensor`` after its header (shape, dtype, ``step``, sequence number on the channel),
    on ``group`` (a ``StageGroup`` or ``InProcStageGroup``)."""
    header = Header(tuple(tensor.shape), tensor.dtype, step, next_seq(group, ("send", dst, tag)))
    group.send(header.encode(), dst, tag + CHECK_TAG)
    group.send(tensor.contiguous(), dst, tag)


def post_checked(group, buffer: torch.Tensor, src: int, tag: int, step: int = -1) -> "CheckedReceive":
    """Post a receive for the message ``src`` sends on ``tag`` for ``step`` into ``buffer``."""
    return CheckedReceive(group, buffer, src, tag, step)


class CheckedReceive:
    """The header's receive is posted now; the message's only once the header matched, so a
    longer message is never received into a buffer it would overrun."""

    def __init__(self, group, buffer: torch.Tensor, src: int, tag: int, step: int = -1):
        self.group, self.buffer, self.src, self.tag = group, buffer, src, tag
        self.expected = Header(tuple(buffer.shape), buffer.dtype, step, next_seq(group, ("recv", src, tag)))
        self.header = group.post(torch.empty(HEADER_LEN, dtype=torch.int64), src, tag + CHECK_TAG)

    def take(self, idle: bool = False) -> torch.Tensor:
        sent = Header.decode(self.header.take(idle))
        if sent != self.expected:
            raise self._mismatch(sent)
        return self.group.post(self.buffer, self.src, self.tag).take(idle)

    def _mismatch(self, sent: Header) -> MessageMismatch:
        from minispec.instruments.invariants import Invariant, Violation

        want, channel = self.expected, f"rank {self.src} -> rank {self.group.rank}, tag {self.tag}"
        violation = Violation(Invariant.MESSAGE_SCHEDULE, want.step, self.group.rank, channel, want, sent)
        text = (f"rank {self.src} sent a {list(sent.shape)} {sent.dtype} message to rank {self.group.rank} (tag "
                f"{self.tag}), which posted a {list(want.shape)} {want.dtype} receive for it: ")
        if (sent.step, sent.seq) == (want.step, want.seq):  # in schedule, the wrong size (the runner adds the step)
            text += ("expected the same shape and dtype (raw gloo would pack a shorter message into the buffer's "
                     "front silently and abort on a longer one; NCCL would hang)")
        else:
            text += (f"expected the same tag, step, sequence number, shape and dtype (invariant 7, message-schedule "
                     f"agreement, on channel {channel}: the sender was at step {sent.step} and sent "
                     f"{sent.describe()}; the receiver expected {want.describe()})")
        return MessageMismatch(text, sent.shape, want.shape, violation)


def _gloo_device(hostname: str | None):
    """Loopback for "mp"; across machines the interface ``GLOO_SOCKET_IFNAME`` names, as torch's own."""
    if hostname:
        return dist.ProcessGroupGloo.create_device(hostname=hostname)
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return dist.ProcessGroupGloo.create_device(interface=os.environ["GLOO_SOCKET_IFNAME"])
    return dist.ProcessGroupGloo.create_default_device()


class InProcStageGroup:
    """One rank's view of an in-process pipeline's messages, with ``StageGroup``'s
    ``send`` / ``post`` / ``take`` and gloo's matching rules, so code that talks
    over a ``StageGroup`` (Model Runner V2's sampled-token broadcast,
    ``minispec/v1/worker/gpu/pp_utils.py``) runs unchanged in ``UniProcExecutor``,
    where every stage is an object in one thread (minispec's; vLLM has no twin).

    As gloo does, a message goes to the oldest receive posted for its source and
    tag, and fills the front of a larger buffer. Where gloo would wait, this
    raises ``NotSentYet``: in one thread a receive nobody has sent to yet cannot complete
    until another stage runs (the in-process executor then runs the others first).
    """

    def __init__(self, rank: int, mailbox: dict | None = None):
        self.rank = rank
        # (src, dst, tag) -> receives posted and not yet filled, and messages not yet received
        self.mailbox = {} if mailbox is None else mailbox
        self.message_seqs: dict[tuple, int] = {}  # this rank's checked messages so far, per channel side

    def for_rank(self, rank: int) -> "InProcStageGroup":
        """Another rank's view of the same messages."""
        return InProcStageGroup(rank, self.mailbox)

    def _queues(self, src: int, dst: int, tag: int) -> tuple[deque, deque]:
        return self.mailbox.setdefault((src, dst, tag), (deque(), deque()))

    def send(self, tensor: torch.Tensor, dst: int, tag: int) -> None:
        posted, unreceived = self._queues(self.rank, dst, tag)
        if posted:
            posted.popleft().fill(tensor)
        else:
            unreceived.append(tensor.clone())

    def post(self, buffer: torch.Tensor, src: int, tag: int) -> "InProcReceive":
        receive = InProcReceive(buffer, src, self.rank, tag)
        posted, unreceived = self._queues(src, self.rank, tag)
        if unreceived:
            receive.fill(unreceived.popleft())
        else:
            posted.append(receive)
        return receive

    def reset(self) -> None:
        """Forget every message and posted receive (after the engine discarded its batches)."""
        self.mailbox.clear()
        self.message_seqs.clear()


class NotSentYet(RuntimeError):
    """In one process, a receive whose message no stage has sent yet: gloo would wait. The
    in-process executor runs the other stages first and tries again (``UniProcExecutor.tick``);
    where no stage can run, it raises this."""


class InProcReceive:
    def __init__(self, buffer: torch.Tensor, src: int, dst: int, tag: int):
        self.buffer, self.src, self.dst, self.tag, self.filled = buffer, src, dst, tag, False

    def fill(self, tensor: torch.Tensor) -> None:
        if tensor.numel() * tensor.element_size() > self.buffer.numel() * self.buffer.element_size():
            # gloo's receiving process aborts here ("op.preamble.length <= op.nbytes",
            # transport/tcp/pair.cc, with torch 2.13.0): say which message did not fit instead
            raise RuntimeError(f"rank {self.src} sent {tuple(tensor.shape)} to rank {self.dst} (tag {self.tag}), "
                               f"larger than the {tuple(self.buffer.shape)} buffer it posted")
        flat = self.buffer.view(-1).view(torch.uint8)
        data = tensor.contiguous().view(-1).view(torch.uint8)
        flat[: data.numel()] = data
        self.filled = True

    def take(self, idle: bool = False) -> torch.Tensor:
        if not self.filled:
            raise NotSentYet(f"rank {self.dst} waits for a message from rank {self.src} (tag {self.tag}) that "
                               "was never sent: in one process it would wait forever")
        return self.buffer
