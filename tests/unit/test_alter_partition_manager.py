"""AlterPartitionManager (after Kafka's): ISR changes submitted in one loop turn go in one
AlterPartition request, those submitted while a request is in flight go together in the next,
one request in flight per broker; the broker epoch is read when the request goes (rule 17);
request-level errors reach every partition of the batch (rule 18 decides retries)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.core.partition_state import IsrProposal, ProposalKind
from broker.runtime.alter_partition_manager import AlterPartitionManager
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.errors import Errors, KafkaError
from metadata.partition_registration import LeaderRecoveryState

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)


def proposal(isr: tuple[int, ...], proposal_id: int = 1) -> IsrProposal:
    return IsrProposal(
        proposal_id=proposal_id,
        kind=ProposalKind.SHRINK,
        leader_epoch=3,
        partition_epoch=5,
        new_isr_with_epochs=tuple(lifecycle.broker_state(b, 10 * b) for b in isr),
        leader_recovery_state=LeaderRecoveryState.RECOVERED,
    )


class Controller:
    """Answers every partition asked with its ISR, after `gate` opens."""

    def __init__(self) -> None:
        self.requests: list[lifecycle.AlterPartitionRequest] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.error = Errors.NONE
        self.drop: set[tuple[uuid.UUID, int]] = set()

    async def __call__(self, request: lifecycle.AlterPartitionRequest) -> lifecycle.AlterPartitionResponse:
        self.requests.append(request)
        await self.gate.wait()
        if self.error is Errors.REQUEST_TIMED_OUT:
            raise KafkaError(self.error, "no answer")
        if self.error is not Errors.NONE:
            return lifecycle.alter_partition_response(self.error)
        return lifecycle.alter_partition_response(
            Errors.NONE,
            [
                (
                    topic.topic_id,
                    [
                        lifecycle.alter_partition_result(
                            p.partition_index,
                            Errors.NONE,
                            leader_id=1,
                            leader_epoch=p.leader_epoch,
                            isr=[b.broker_id for b in p.new_isr_with_epochs],
                            partition_epoch=p.partition_epoch + 1,
                        )
                        for p in topic.partitions
                        if (topic.topic_id, p.partition_index) not in self.drop
                    ],
                )
                for topic in request.topics
            ],
        )


def asked(request: lifecycle.AlterPartitionRequest) -> set[tuple[uuid.UUID, int]]:
    return {(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions}


async def test_one_turns_submissions_go_in_one_request() -> None:
    controller = Controller()
    epoch = [10]
    manager = AlterPartitionManager(1, lambda: epoch[0], controller)
    futures = [
        manager.submit(A, 0, proposal((1, 2))),
        manager.submit(A, 1, proposal((1,))),
        manager.submit(B, 0, proposal((1, 3))),
    ]
    epoch[0] = 11  # read when the request goes, not when submitted
    outcomes = await asyncio.wait_for(asyncio.gather(*futures), 2)
    assert len(controller.requests) == 1 and manager.requests_sent == 1
    request = controller.requests[0]
    assert request.broker_id == 1 and request.broker_epoch == 11
    assert asked(request) == {(A, 0), (A, 1), (B, 0)}
    assert [(error, result.isr if result else None) for error, result in outcomes] == [
        (Errors.NONE, (1, 2)),
        (Errors.NONE, (1,)),
        (Errors.NONE, (1, 3)),
    ]
    sent = request.topics[0].partitions[0]
    assert sent.new_isr_with_epochs == (lifecycle.broker_state(1, 10), lifecycle.broker_state(2, 20))
    assert (sent.leader_epoch, sent.partition_epoch, sent.leader_recovery_state) == (3, 5, 0)
    await manager.close()


async def test_submissions_during_a_request_wait_and_go_together() -> None:
    controller = Controller()
    controller.gate.clear()
    manager = AlterPartitionManager(1, lambda: 10, controller)
    first = manager.submit(A, 0, proposal((1, 2)))
    await asyncio.sleep(0.01)
    assert len(controller.requests) == 1
    later = [manager.submit(A, 1, proposal((1,))), manager.submit(B, 0, proposal((1,)))]
    await asyncio.sleep(0.01)
    assert len(controller.requests) == 1  # one in flight per broker
    controller.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *later), 2)
    assert [asked(r) for r in controller.requests] == [{(A, 0)}, {(A, 1), (B, 0)}]
    await manager.close()


async def test_errors_reach_every_partition_of_the_batch() -> None:
    controller = Controller()
    manager = AlterPartitionManager(1, lambda: 10, controller)
    controller.error = Errors.NOT_CONTROLLER
    outcomes = await asyncio.gather(manager.submit(A, 0, proposal((1,))), manager.submit(B, 0, proposal((1,))))
    assert outcomes == [(Errors.NOT_CONTROLLER, None)] * 2
    controller.error = Errors.REQUEST_TIMED_OUT
    outcomes = await asyncio.gather(manager.submit(A, 0, proposal((1,))))
    assert outcomes == [(Errors.REQUEST_TIMED_OUT, None)]
    # A partition missing from the answer is the controller's bug, not a silent success.
    controller.error = Errors.NONE
    controller.drop = {(B, 0)}
    kept, dropped = await asyncio.gather(
        manager.submit(A, 0, proposal((1,))), manager.submit(B, 0, proposal((1,)))
    )
    assert kept[0] is Errors.NONE and kept[1] is not None
    assert dropped == (Errors.UNKNOWN_SERVER_ERROR, None)
    await manager.close()


async def test_a_newer_proposal_supersedes_a_queued_one() -> None:
    controller = Controller()
    controller.gate.clear()
    manager = AlterPartitionManager(1, lambda: 10, controller)
    inflight = manager.submit(B, 0, proposal((1,)))
    await asyncio.sleep(0.01)
    old = manager.submit(A, 0, proposal((1, 2), proposal_id=1))
    new = manager.submit(A, 0, proposal((1,), proposal_id=2))
    assert old.done() and old.result() == (Errors.OPERATION_NOT_ATTEMPTED, None)
    controller.gate.set()
    error, result = await asyncio.wait_for(new, 2)
    await inflight
    assert error is Errors.NONE and result is not None and result.isr == (1,)
    assert len(controller.requests[1].topics[0].partitions) == 1
    await manager.close()


def test_a_proposal_is_built_without_kios_range_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A returning broker's leaders propose 100,000 expansions (issue 35): each partition's
    entry is built from plain ints, without a range check per field or kio's frozen __init__
    (through its slots, kafkawire.slots), into the same bytes; and so is each partition's
    result on the controller."""
    from kio.static.primitive import i8, i32

    from kafkawire.messages import encode_request, encode_response, error_code

    states = (lifecycle.broker_state(1, 10), lifecycle.broker_state(3, 30))
    checked = lifecycle.AlterPartitionPartition(
        partition_index=i32(7), leader_epoch=i32(3), new_isr_with_epochs=states,
        leader_recovery_state=i8(0), partition_epoch=i32(5),
    )
    checked_result = lifecycle.AlterPartitionPartitionResult(
        partition_index=i32(7), error_code=error_code(Errors.NONE), leader_id=lifecycle.BrokerId(1),
        leader_epoch=i32(3), isr=(lifecycle.BrokerId(1), lifecycle.BrokerId(3)),
        leader_recovery_state=i8(0), partition_epoch=i32(6),
    )

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("range-checked or built through the frozen __init__")

    monkeypatch.setattr(lifecycle, "i32", refuse, raising=False)
    monkeypatch.setattr(lifecycle, "i8", refuse, raising=False)
    monkeypatch.setattr(lifecycle.AlterPartitionPartition, "__init__", refuse)
    monkeypatch.setattr(lifecycle.AlterPartitionPartitionResult, "__init__", refuse)
    plain = lifecycle.alter_partition_partition(7, 3, states, 0, 5)
    plain_result = lifecycle.alter_partition_result(
        7, Errors.NONE, leader_id=1, leader_epoch=3, isr=[1, 3], partition_epoch=6
    )
    monkeypatch.undo()
    assert plain == checked and plain_result == checked_result
    requests = [lifecycle.alter_partition_request(1, 10, [(A, (data,))]) for data in (plain, checked)]
    assert encode_request(requests[0], 1, "b") == encode_request(requests[1], 1, "b")
    answers = [
        lifecycle.alter_partition_response(Errors.NONE, [(A, (result,))])
        for result in (plain_result, checked_result)
    ]
    assert encode_response(answers[0], 1) == encode_response(answers[1], 1)


async def test_callbacks_get_one_answers_outcomes_together_inside_delivering() -> None:
    """submit_with (issue 35): an answer's outcomes go to their callbacks in one go, inside
    `delivering` (the broker's journal buffer); a superseded proposal's callback hears
    OPERATION_NOT_ATTEMPTED on a later turn, not inside the submit; one callback's failure
    leaves the others theirs; after close, none is called."""
    controller = Controller()
    controller.gate.clear()
    inside: list[bool] = []
    depth = [0]

    @contextlib.contextmanager
    def delivering() -> Iterator[None]:
        depth[0] += 1
        yield
        depth[0] -= 1

    manager = AlterPartitionManager(1, lambda: 10, controller, delivering)
    heard: list[tuple[str, Errors]] = []

    def on(name: str, fail: bool = False) -> Callable[[Any], None]:
        def outcome(result: Any) -> None:
            heard.append((name, result[0]))
            inside.append(depth[0] == 1)
            if fail:
                raise RuntimeError("a bug")
        return outcome

    manager.submit_with(A, 0, proposal((1, 2)), on("a0-old"))
    manager.submit_with(A, 0, proposal((1, 2, 3), 2), on("a0"))
    assert heard == []  # the superseded one hears it later
    manager.submit_with(A, 1, proposal((1,)), on("a1", fail=True))
    manager.submit_with(B, 0, proposal((1, 3)), on("b0"))
    await asyncio.sleep(0.01)
    assert heard == [("a0-old", Errors.OPERATION_NOT_ATTEMPTED)]
    controller.gate.set()
    await asyncio.sleep(0.01)
    assert heard[1:] == [("a0", Errors.NONE), ("a1", Errors.NONE), ("b0", Errors.NONE)]
    assert inside == [False, True, True, True]
    controller.gate.clear()
    manager.submit_with(A, 0, proposal((1,), 3), on("late"))
    await manager.close()
    await asyncio.sleep(0.01)
    assert len(heard) == 4
