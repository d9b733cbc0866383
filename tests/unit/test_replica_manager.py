"""ReplicaManager in process (no network): acks and HWM at min ISR (rule 20), follower fetch with
broker epochs (rule 17), leader recovery refusal (rule 21), named errors, GetReplicaLogInfo,
DeleteRecords' log start offset on the leader and its followers."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from kio.static.primitive import i32

from broker.core import messages as bm
from broker.runtime.partition_log import LogDirCheckpoints, read_partition_metadata
from broker.runtime.replica_manager import ReplicaManager, ReplicaSettings, wait_for_change
from kafkawire import broker_lifecycle as lifecycle
from kafkawire import get_replica_log_info as grli
from kafkawire.errors import Errors, KafkaError
from metadata.metadata_image import (
    MIN_INSYNC_REPLICAS,
    BrokerRegistration,
    MetadataImage,
    TopicImage,
)
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import CONFIG_RESOURCE_TOPIC
from storage.core.record_batch import encode_batch, iter_batches

TOPIC_ID = uuid.UUID(int=7)


def image(registration: PartitionRegistration, min_isr: int = 2) -> MetadataImage:
    brokers = {
        b: BrokerRegistration(b, epoch=10 * b, incarnation_id=uuid.uuid4(), fenced=False,
                              in_controlled_shutdown=False)
        for b in (1, 2, 3)
    }
    topic = TopicImage("t", TOPIC_ID, MappingProxyType({0: registration}))
    return MetadataImage(
        brokers=MappingProxyType(brokers),
        topics=MappingProxyType({TOPIC_ID: topic}),
        topics_by_name=MappingProxyType({"t": topic}),
        configs=MappingProxyType(
            {(CONFIG_RESOURCE_TOPIC, "t"): MappingProxyType({MIN_INSYNC_REPLICAS: str(min_isr)})}
        ),
    )


class Controller:
    def __init__(self) -> None:
        self.requests: list[lifecycle.AlterPartitionRequest] = []

    async def __call__(self, request: lifecycle.AlterPartitionRequest) -> lifecycle.AlterPartitionResponse:
        self.requests.append(request)
        return lifecycle.alter_partition_response(Errors.NOT_CONTROLLER)


def manager(tmp_path: Path, controller: Controller) -> ReplicaManager:
    return ReplicaManager(
        ReplicaSettings(
            broker_id=1, log_dirs=[tmp_path], static_configs={"message.max.bytes": "1000"}
        ),
        None,
        controller,
        lambda: 10,
    )


def hosting(
    tmp_path: Path, isr: tuple[int, ...] = (1, 2), leader: int = 1, min_isr: int = 2
) -> ReplicaManager:
    """A manager (broker 1) with t-0 (replicas 1, 2, 3) in its image."""
    rm = manager(tmp_path, Controller())
    rm.apply_image(image(PartitionRegistration(replicas=(1, 2, 3), isr=isr, leader=leader),
                         min_isr=min_isr))
    return rm


def batch(value: bytes) -> bytes:
    return encode_batch(0, 0, 0, [value])


async def test_hwm_waits_for_min_isr_and_followers(tmp_path: Path) -> None:
    rm = hosting(tmp_path)
    produced = await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1))
    assert produced.error_code == 0 and produced.base_offset == 0
    # acks=1 is appended but invisible to consumers until a follower has it (rule 20).
    consumer = await rm.fetch(bm.FetchRequest("t", 0, 0))
    assert consumer.error_code == 0 and consumer.records == b"" and consumer.high_watermark == 0
    follower = await rm.fetch(bm.FetchRequest("t", 0, 0, replica_id=2, replica_epoch=20))
    assert follower.records != b""
    await rm.fetch(bm.FetchRequest("t", 0, 1, replica_id=2, replica_epoch=20))
    consumer = await rm.fetch(bm.FetchRequest("t", 0, 0))
    assert consumer.high_watermark == 1 and consumer.records != b""
    # acks=all completes once the follower fetches past the batch.
    waiting = asyncio.ensure_future(
        rm.produce(bm.ProduceRequest("t", 0, batch(b"b"), acks=-1, timeout_ms=2000))
    )
    await asyncio.sleep(0.01)
    assert not waiting.done()
    await rm.fetch(bm.FetchRequest("t", 0, 2, replica_id=2, replica_epoch=20))
    response = await asyncio.wait_for(waiting, 1)
    assert response.error_code == 0 and response.high_watermark == 2
    await rm.close()


async def test_named_errors(tmp_path: Path) -> None:
    rm = manager(tmp_path, Controller())
    rm.apply_image(image(PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1,
                                               leader_epoch=3)))
    under = await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=-1))
    assert Errors.of(under.error_code) is Errors.NOT_ENOUGH_REPLICAS
    unknown = await rm.produce(bm.ProduceRequest("t", 5, batch(b"a")))
    assert Errors.of(unknown.error_code) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    large = await rm.produce(bm.ProduceRequest("t", 0, batch(b"x" * 2000), acks=1))
    assert Errors.of(large.error_code) is Errors.MESSAGE_TOO_LARGE
    fenced = await rm.fetch(bm.FetchRequest("t", 0, 0, current_leader_epoch=2))
    assert Errors.of(fenced.error_code) is Errors.FENCED_LEADER_EPOCH
    ok = await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1))
    assert ok.error_code == 0
    await rm.close()


async def test_recovering_leader_refuses_then_asks_recovered(tmp_path: Path) -> None:
    controller = Controller()
    rm = manager(tmp_path, controller)
    rm.apply_image(image(PartitionRegistration(
        replicas=(1, 2, 3), isr=(1,), leader=1, leader_epoch=4,
        leader_recovery_state=LeaderRecoveryState.RECOVERING,
    ), min_isr=1))
    for response in (
        await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1)),
        await rm.fetch(bm.FetchRequest("t", 0, 0, replica_id=2, replica_epoch=20)),
        await rm.fetch(bm.FetchRequest("t", 0, 0)),
    ):
        assert Errors.of(response.error_code) is Errors.NOT_LEADER_OR_FOLLOWER
    await asyncio.sleep(0.05)
    sent = controller.requests[0].topics[0].partitions[0]
    assert sent.leader_recovery_state == int(LeaderRecoveryState.RECOVERED)
    assert [b.broker_id for b in sent.new_isr_with_epochs] == [1]
    await rm.close()


async def test_replica_log_info(tmp_path: Path) -> None:
    rm = manager(tmp_path, Controller())
    rm.apply_image(image(PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2), leader=1,
                                               leader_epoch=6)))
    await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1))
    response = rm.replica_log_info(grli.GetReplicaLogInfoRequest(
        topic_partitions=(grli.TopicPartitions(topic_id=TOPIC_ID, partitions=(i32(0), i32(9))),)
    ))
    assert response.broker_epoch == 10 and not response.truncated
    infos = {i.partition: i for i in response.topic_partition_log_info_list[0].partition_log_info}
    assert (infos[0].current_leader_epoch, infos[0].last_written_leader_epoch,
            infos[0].log_end_offset) == (6, 6, 1)
    assert Errors.of(infos[9].error_code) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    await rm.close()


async def test_delete_records_advances_the_log_start_offset_durably(tmp_path: Path) -> None:
    """KIP-107 on the leader: the start moves up to the offset (never down, never past the
    HWM: OFFSET_OUT_OF_RANGE; -1 is the HWM), reads below it are OFFSET_OUT_OF_RANGE, earliest
    is the new start, and the start survives a restart (log-start-offset-checkpoint)."""
    rm = hosting(tmp_path, isr=(1,), min_isr=1)
    for value in (b"a", b"b", b"c", b"d"):
        assert (await rm.produce(bm.ProduceRequest("t", 0, batch(value), acks=-1))).error_code == 0
    assert rm.hosted("t", 0).state.high_watermark == 4
    assert rm.delete_records("t", 0, 2) == 2
    assert rm.delete_records("t", 0, 1) == 2  # never backwards
    with pytest.raises(KafkaError) as beyond:
        rm.delete_records("t", 0, 5)
    assert beyond.value.error is Errors.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError) as unknown:
        rm.delete_records("t", 3, 0)
    assert unknown.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    below = await rm.fetch(bm.FetchRequest("t", 0, 1))
    assert Errors.of(below.error_code) is Errors.OFFSET_OUT_OF_RANGE
    at_start = await rm.fetch(bm.FetchRequest("t", 0, 2))
    assert at_start.error_code == 0 and at_start.log_start_offset == 2 and at_start.records
    earliest = rm.list_offsets(bm.ListOffsetsRequest("t", 0, bm.EARLIEST_TIMESTAMP))
    assert earliest.offset == 2
    assert rm.delete_records("t", 0, -1) == 4  # -1: up to the high watermark
    await rm.close()
    assert LogDirCheckpoints(tmp_path).read_log_start_offsets() == {("t", 0): 4}

    again = manager(tmp_path, Controller())
    again.load_logs()
    again.apply_image(image(PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1),
                            min_isr=1))
    earliest = again.list_offsets(bm.ListOffsetsRequest("t", 0, bm.EARLIEST_TIMESTAMP))
    assert earliest.offset == 4
    await again.close()


async def test_delete_records_on_a_follower_is_refused_and_it_follows_the_leader(
    tmp_path: Path,
) -> None:
    rm = hosting(tmp_path, leader=2)
    hosted = rm.hosted("t", 0)
    hosted.log.append_as_follower(encode_batch(0, 0, 0, [b"a", b"b", b"c"]))
    with pytest.raises(KafkaError) as refused:
        rm.delete_records("t", 0, 1)
    assert refused.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    rm.follow_log_start_offset(hosted, 2)  # the leader's LogStartOffset in a Fetch response
    assert hosted.log.log_start_offset == 2
    rm.follow_log_start_offset(hosted, 9)  # never past its own log end
    assert hosted.log.log_start_offset == 3
    assert LogDirCheckpoints(tmp_path).read_log_start_offsets() == {("t", 0): 3}
    await rm.close()


async def test_periodic_checkpoint_writes_a_snapshot_in_a_thread(tmp_path: Path) -> None:
    rm = hosting(tmp_path)
    await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1))
    await rm.fetch(bm.FetchRequest("t", 0, 0, replica_id=2, replica_epoch=20))
    await rm.fetch(bm.FetchRequest("t", 0, 1, replica_id=2, replica_epoch=20))
    hosted = rm.hosted("t", 0)
    await hosted.commit.sync()
    checkpoints = LogDirCheckpoints(tmp_path)
    # The snapshot is taken on the loop: a produce racing the thread's write is not in it.
    write = rm.write_checkpoints_off_loop()
    task = asyncio.ensure_future(write)
    await asyncio.sleep(0)
    await rm.produce(bm.ProduceRequest("t", 0, batch(b"b"), acks=1))
    await task
    assert checkpoints.read_high_watermarks() == {("t", 0): 1}
    assert checkpoints.read_recovery_points() == {("t", 0): 1}
    assert checkpoints.read_log_start_offsets() == {("t", 0): 0}
    # Unchanged log start offsets are not rewritten; the next tick catches up on the rest.
    before = checkpoints.log_start_offset_path.stat().st_mtime_ns
    await hosted.commit.sync()
    await rm.write_checkpoints_off_loop()
    assert checkpoints.log_start_offset_path.stat().st_mtime_ns == before
    assert checkpoints.read_recovery_points() == {("t", 0): 2}
    await rm.close()


async def test_a_partition_never_written_has_no_checkpoint_line(tmp_path: Path) -> None:
    # Issue 35: a new partition's log is lazy (no directory until its first append), and its
    # offsets are those of a log a restart does not find; the checkpoints skip it, so a
    # broker of 100,000 empty partitions writes nothing of them every 5 s.
    rm = hosting(tmp_path)
    checkpoints = LogDirCheckpoints(tmp_path)
    await rm.write_checkpoints_off_loop()
    rm.checkpoints.write_all(rm.partitions.values())
    assert checkpoints.read_high_watermarks() == {}
    assert checkpoints.read_recovery_points() == {}
    await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1))
    await rm.hosted("t", 0).commit.sync()
    await rm.write_checkpoints_off_loop()
    assert checkpoints.read_recovery_points() == {("t", 0): 1}
    assert checkpoints.read_log_start_offsets() == {("t", 0): 0}
    await rm.close()


async def test_a_woken_fetch_reads_after_what_this_turn_appends(tmp_path: Path) -> None:
    # The append that wakes a parked fetch and the ones already queued in the same loop turn
    # reach the follower in one answer (replica_manager._TURNS_BEFORE_READ).
    rm = hosting(tmp_path)
    hosted = rm.hosted("t", 0)
    seen: list[str] = []

    async def parked_fetch() -> list[str]:
        await wait_for_change([hosted], 5, follower=True)
        return list(seen)  # what the fetch would read now

    parked = asyncio.ensure_future(parked_fetch())
    await asyncio.sleep(0)
    hosted.notify()
    asyncio.get_running_loop().call_soon(seen.append, "queued append")
    assert await asyncio.wait_for(parked, 1) == ["queued append"]
    assert not hosted.follower_waiters  # the parked fetch left no waiter behind
    await rm.close()


async def test_acks_all_produces_of_one_turn_share_one_leader_fsync_and_one_follower_answer(
    tmp_path: Path,
) -> None:
    # Group commit on the leader (group_commit: a grouped sync lets one loop turn pass): the
    # produces handled in the same turn append, one fsync covers them, and the parked follower
    # fetch, reading after it, carries both batches. The acks wait for the follower (rule 20).
    rm = hosting(tmp_path)
    hosted = rm.hosted("t", 0)
    fetch = asyncio.ensure_future(
        rm.fetch(bm.FetchRequest("t", 0, 0, replica_id=2, replica_epoch=20, max_wait_ms=5000))
    )
    await asyncio.sleep(0)
    assert len(hosted.follower_waiters) == 1  # parked
    produces = [
        asyncio.ensure_future(rm.produce(bm.ProduceRequest("t", 0, batch(b"%d" % i), acks=-1)))
        for i in range(3)
    ]
    answer = await asyncio.wait_for(fetch, 2)
    assert [b.base_offset for b, _ in iter_batches(answer.records)] == [0, 1, 2]
    assert hosted.commit.fsyncs == 1 and hosted.log.flushed_offset == 3
    assert not any(p.done() for p in produces)  # the follower has not reported offset 3 yet
    await rm.fetch(bm.FetchRequest("t", 0, 3, replica_id=2, replica_epoch=20))
    results = await asyncio.wait_for(asyncio.gather(*produces), 2)
    assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, 1), (0, 2)]
    await rm.close()


def count_reads(rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> dict[int, int]:
    """How many times each replica id's fetch read the log (a wake re-reads)."""
    reads: dict[int, int] = {}
    read = rm._fetch_once

    def counting(hosted: Any, request: bm.FetchRequest, record_progress: bool) -> bm.FetchResponse:
        reads[request.replica_id] = reads.get(request.replica_id, 0) + 1
        return read(hosted, request, record_progress)

    monkeypatch.setattr(rm, "_fetch_once", counting)
    return reads


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_leader_append_wakes_followers_and_a_new_hwm_wakes_consumers_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A consumer reads to the HWM and a follower to the log end: each parked fetch is woken by
    # its own news only, never to find nothing and park again.
    rm = hosting(tmp_path, isr=(1, 2, 3))
    reads = count_reads(rm, monkeypatch)

    def parked_fetch(replica_id: int, offset: int) -> asyncio.Future[bm.FetchResponse]:
        epoch = 10 * replica_id if replica_id > 0 else bm.NO_EPOCH
        return asyncio.ensure_future(rm.fetch(bm.FetchRequest(
            "t", 0, offset, replica_id=replica_id, replica_epoch=epoch, max_wait_ms=5000
        )))

    consumer, follower2, follower3 = parked_fetch(-1, 0), parked_fetch(2, 0), parked_fetch(3, 0)
    await turns(1)
    assert reads == {-1: 1, 2: 1, 3: 1}
    produce = asyncio.ensure_future(rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=-1)))
    await turns(5)
    # The append woke both followers, which got the batch; the consumer slept on.
    assert follower2.done() and follower3.done() and not consumer.done()
    assert reads == {-1: 1, 2: 2, 3: 2}
    follower3 = parked_fetch(3, 1)  # reports offset 1 and parks
    await turns(1)
    await rm.fetch(bm.FetchRequest("t", 0, 1, replica_id=2, replica_epoch=20))  # HWM 0 -> 1
    assert rm.hosted("t", 0).state.high_watermark == 1
    assert (await asyncio.wait_for(produce, 1)).error_code == 0  # acked with the new HWM
    answer = await asyncio.wait_for(consumer, 1)
    assert [b.base_offset for b, _ in iter_batches(answer.records)] == [0]
    await turns(5)
    assert not follower3.done() and reads[3] == 3  # the new HWM did not wake it
    await rm.close()
    follower3.cancel()


def image_with_id(registration: PartitionRegistration, topic_id: uuid.UUID) -> MetadataImage:
    """image() with topic `t` under another id: the name deleted and created again."""
    base = image(registration)
    topic = TopicImage("t", topic_id, MappingProxyType({0: registration}))
    return MetadataImage(
        brokers=base.brokers,
        topics=MappingProxyType({topic_id: topic}),
        topics_by_name=MappingProxyType({"t": topic}),
        configs=base.configs,
    )


async def test_restart_deletes_delete_dirs_and_moves_stray_logs_aside(tmp_path: Path) -> None:
    """Issue 38, Kafka's LogManager at start-up and once caught up: a `-delete` directory is
    removed after file.delete.delay.ms, a log without partition.metadata and a log whose topic
    id the image no longer has under its name are strays (`-stray`, kept), and the name's new
    partition starts with an empty log of its own."""
    leading = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1)
    rm = manager(tmp_path, Controller())
    rm.apply_image(image(leading, min_isr=1))
    assert (await rm.produce(bm.ProduceRequest("t", 0, batch(b"old"), acks=-1))).error_code == 0
    await rm.close()
    (tmp_path / "gone-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "orphan-0").mkdir()  # no partition.metadata: no topic id

    again = ReplicaManager(
        ReplicaSettings(broker_id=1, log_dirs=[tmp_path], file_delete_delay_ms=0),
        None, Controller(), lambda: 10,
    )
    assert again.load_logs() == 1
    assert list(again.partitions) == [(TOPIC_ID, 0)]
    new_id = uuid.UUID(int=8)
    again.apply_image(image_with_id(leading, new_id))
    recreated = again.hosted("t", 0)
    assert recreated.topic_id == new_id and recreated.log.log_end_offset == 0
    assert list(again.partitions) == [(new_id, 0)]
    await asyncio.sleep(0.05)  # the delay (0 ms here) and the removal in a thread
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    strays = [n for n in names if n.endswith("-stray")]
    assert sorted(n.split(".")[0] for n in strays) == ["orphan-0", "t-0"], names
    # The -delete one is gone; the new t-0 has no directory before its first append (issue
    # 35), then one naming the new topic id.
    assert sorted(set(names) - set(strays)) == [], names
    assert (await again.produce(bm.ProduceRequest("t", 0, batch(b"new"), acks=1))).error_code == 0
    assert read_partition_metadata(tmp_path / "t-0") == new_id
    # Once caught up, a hosted log its image lacks is a stray too.
    again.image = image_with_id(leading, uuid.UUID(int=9))
    assert again.remove_strays() == 1 and not again.partitions
    await again.close()


async def test_latest_offset_is_not_available_while_the_hwm_lags_the_new_epochs_start(
    tmp_path: Path,
) -> None:
    """Kafka's Partition.fetchOffsetForTimestamp: a leader whose HWM is below the start offset
    of its leader epoch answers a client's latest with OFFSET_NOT_AVAILABLE (the client asks
    again); here it cannot catch up, the ISR (1) being below min ISR 2, as after an unclean
    election. Earliest, and the log end for a replica's request, still answer."""
    rm = hosting(tmp_path, isr=(1,))
    for value in (b"a", b"b"):
        assert (await rm.produce(bm.ProduceRequest("t", 0, batch(value), acks=1))).error_code == 0
    latest = rm.list_offsets(bm.ListOffsetsRequest("t", 0, bm.LATEST_TIMESTAMP))
    assert latest.offset == 0  # the same epoch began at 0: the HWM, held under min ISR
    rm.apply_image(image(PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1,
                                               leader_epoch=1)))
    with pytest.raises(KafkaError) as lagging:
        rm.list_offsets(bm.ListOffsetsRequest("t", 0, bm.LATEST_TIMESTAMP))
    assert lagging.value.error is Errors.OFFSET_NOT_AVAILABLE
    assert rm.list_offsets(bm.ListOffsetsRequest("t", 0, bm.EARLIEST_TIMESTAMP)).offset == 0
    log_end = rm.list_offsets(
        bm.ListOffsetsRequest("t", 0, bm.LATEST_TIMESTAMP, isolation_committed=False))
    assert log_end.offset == 2
    await rm.close()


async def test_the_isr_shrink_pass_walks_the_led_partitions_in_slices(tmp_path: Path) -> None:
    """Issue 35: one synchronous walk of every led partition held a 100,000-partition broker's
    loop for seconds; tick_steps yields every TICK_SLICE_PARTITIONS partitions (the broker
    drives it with the applier's time budget)."""
    from broker.runtime.replica_manager import TICK_SLICE_PARTITIONS

    rm = manager(tmp_path, Controller())
    base = image(PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1))
    topic = base.topics[TOPIC_ID]
    count = TICK_SLICE_PARTITIONS * 2 + 1
    partitions = {p: topic.partitions[0] for p in range(count)}
    wide = TopicImage("t", TOPIC_ID, MappingProxyType(partitions))
    rm.apply_image(MetadataImage(
        brokers=base.brokers, topics=MappingProxyType({TOPIC_ID: wide}),
        topics_by_name=MappingProxyType({"t": wide}), configs=base.configs,
    ))
    assert len(rm.partitions) == count
    assert sum(1 for _ in rm.tick_steps()) == 2


async def test_a_new_partition_log_is_opened_without_looking_at_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a partition this broker just became a replica of has nothing on disk (its
    name was freed by moving any hosted log aside), so its lazy log does not stat its
    directory: one stat per new partition, 100,000 at scale. Its first append still creates
    the directory and partition.metadata."""
    looked: list[Path] = []
    real = Path.exists

    def exists(path: Path, *args: object, **kwargs: object) -> bool:
        looked.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "exists", exists)
    rm = hosting(tmp_path, isr=(1,), min_isr=1)
    assert looked == [] and not (tmp_path / "t-0").exists()
    monkeypatch.undo()
    assert (await rm.produce(bm.ProduceRequest("t", 0, batch(b"a"), acks=1))).error_code == 0
    assert read_partition_metadata(tmp_path / "t-0") == TOPIC_ID
    await rm.close()
