"""Invariant 7, message-schedule agreement: every checked message names its step and its place
on the channel, and a receive that gets another message than the one it was posted for says
which channel, the step each side was at and what each expected. Hand-made mismatches (a
message posted twice, one posted at the wrong step, one of the wrong width) are caught, on
both transports; clean runs of both designs, synchronous and async, raise nothing."""

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.distributed.parallel_state import Header, InProcStageGroup, MessageMismatch, post_checked, send_checked
from minispec.instruments.invariants import Invariant

TAG = 17


def _groups(kind: str):
    """(sender rank 1, receiver rank 0)."""
    if kind == "gloo":
        from test_parallel_state import pair

        rank0, rank1 = pair()
        return rank1, rank0
    receiver = InProcStageGroup(0)
    return receiver.for_rank(1), receiver


def _message(step: int, width: int = 4) -> torch.Tensor:
    return torch.arange(3 * width, dtype=torch.int64).reshape(3, width) + 100 * step


def _caught(receive) -> MessageMismatch:
    with pytest.raises(MessageMismatch) as caught:
        receive.take()
    violation = caught.value.violation
    assert violation.invariant is Invariant.MESSAGE_SCHEDULE
    assert violation.req_id == f"rank 1 -> rank 0, tag {TAG}" and violation.stage == 0
    return caught.value


def _out_of_schedule(error: MessageMismatch) -> None:
    assert f"(invariant 7, message-schedule agreement, on channel rank 1 -> rank 0, tag {TAG}: " in str(error)


@pytest.mark.parametrize("kind", ["in-process", "gloo"])
def test_in_schedule_messages_arrive_whole(kind):
    sender, receiver = _groups(kind)
    receives = [post_checked(receiver, torch.empty(3, 4, dtype=torch.int64), 1, TAG, step) for step in (5, 6)]
    for step in (5, 6):
        send_checked(sender, _message(step), 0, TAG, step)
    assert [r.take().tolist() for r in receives] == [_message(5).tolist(), _message(6).tolist()]


@pytest.mark.parametrize("kind", ["in-process", "gloo"])
def test_a_message_posted_twice_shifts_the_channel_and_is_caught(kind):
    sender, receiver = _groups(kind)
    receives = [post_checked(receiver, torch.empty(3, 4, dtype=torch.int64), 1, TAG, step) for step in (5, 6)]
    send_checked(sender, _message(5), 0, TAG, 5)
    send_checked(sender, _message(5), 0, TAG, 5)  # the duplicate: step 6's receive gets it
    assert receives[0].take().tolist() == _message(5).tolist()
    error = _caught(receives[1])
    _out_of_schedule(error)
    assert error.violation.expected == Header((3, 4), torch.int64, 6, 1)
    assert error.violation.actual == Header((3, 4), torch.int64, 5, 1)
    assert "the sender was at step 5 and sent [3, 4] torch.int64 of step 5, message #1" in str(error)
    assert "the receiver expected [3, 4] torch.int64 of step 6, message #1" in str(error)


@pytest.mark.parametrize("kind", ["in-process", "gloo"])
def test_a_message_sent_at_the_wrong_step_is_caught(kind):
    sender, receiver = _groups(kind)
    receive = post_checked(receiver, torch.empty(3, 4, dtype=torch.int64), 1, TAG, 8)
    send_checked(sender, _message(9), 0, TAG, 9)
    error = _caught(receive)
    _out_of_schedule(error)
    assert (error.violation.step, error.violation.actual.step, error.violation.expected.step) == (8, 9, 8)


@pytest.mark.parametrize("kind", ["in-process", "gloo"])
def test_a_message_of_the_wrong_width_is_caught(kind):
    sender, receiver = _groups(kind)
    receive = post_checked(receiver, torch.empty(3, 4, dtype=torch.int64), 1, TAG, 2)
    send_checked(sender, _message(2, width=1), 0, TAG, 2)
    error = _caught(receive)
    assert (error.sent, error.posted) == ((3, 1), (3, 4))
    # in schedule, so the text is the size mismatch's (the runner prefixes its stage and step);
    # the violation still carries both headers, steps included
    assert str(error).startswith(f"rank 1 sent a [3, 1] torch.int64 message to rank 0 (tag {TAG}), which posted "
                                 "a [3, 4] torch.int64 receive for it: expected the same shape and dtype")
    assert (error.violation.expected.step, error.violation.actual.step) == (2, 2)


@pytest.mark.parametrize("async_scheduling", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("model_runner", ["v1", "v2"])
def test_clean_runs_break_no_message_schedule(model_runner, async_scheduling):
    """Every broadcast of a clean pipelined run with drafts is received in schedule (V2 sends
    them; V1's stages send none without async scheduling)."""
    pp = 3 if model_runner == "v2" or not async_scheduling else 1
    llm = LLM(pipeline_parallel_size=pp, speculative_config={"method": "ngram", "num_speculative_tokens": 2},
              model_runner=model_runner, async_scheduling=async_scheduling, max_num_batched_tokens=64)
    outputs = llm.generate([[5, 6, 7, 5, 6, 7, 5], [9, 10, 11, 12], [3, 4, 3, 4, 3]],
                           SamplingParams(temperature=0, max_tokens=12))
    assert all(len(o.outputs[0].token_ids) == 12 for o in outputs)
