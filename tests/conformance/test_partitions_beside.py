"""Partition scenarios on Apache Kafka and minikraft side by side (one cluster of each for the
module: controllers 1-3, brokers 101-103, every topic's replicas 101,102,103 with 101 preferred).

One broker fault sequence serves four scenarios, each on its own topic with its own
observations (a Kafka broker restart costs tens of seconds here, so they share them): stop 103
cleanly, stop 102 cleanly (the ISR falls below min ISR 2), kill -9 the leader 101, restart 103,
then 102, then 101.
- elr-system-test: Kafka's ELR system test: an ELR member leads, nothing acked is lost.
- hwm-under-min-isr: acks=1 and acks=all writes while ISR < min ISR; the HWM is held.
- min-isr-change: min ISR changed with ELR on (the ELR cleared or kept), node-level refused.
- unclean-election: kafka-leader-election --election-type UNCLEAN elects the stale replica.
Then invalid-requests runs on the restored clusters. Every observation is checked against
tests/conformance/table.py (docs/CONFORMANCE.md), so a new difference fails.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from cluster.apache_kafka import tools
from cluster.client.bootstrap import new_client
from kafkawire.api_keys import ApiKey
from tests.conformance.harness import Observed, Pair, Target, cluster_pair, ids, run_beside
from tests.conformance.table import assert_table

# A Kafka cluster starts in 30-70 s on two shared cores and a broker restarts in 10-30 s.
pytestmark = [
    pytest.mark.skipif(tools.skip_reason() is not None, reason=str(tools.skip_reason())),
    pytest.mark.timeout(900),
]

ASSIGNMENT = [[101, 102, 103]]
MIN_ISR_2 = {"min.insync.replicas": "2"}
ELR, HWM, MIN_ISR, UNCLEAN = "elr-system-test", "hwm-under-min-isr", "min-isr-change", (
    "unclean-election")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    yield from cluster_pair(Path(tmp_path_factory.mktemp("beside")))


def state(row: dict[str, Any]) -> str:
    return (f"leader {row['leader']}, ISR {ids(row['isr'])}, ELR {ids(row['elr'])},"
            f" LastKnownELR {ids(row['last_known_elr'])}")


def errors_text(acked: list[str], errors: dict[str, int]) -> str:
    failed = ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())) or "none failed"
    return f"{len(acked)} acked; {failed}"


def alter(t: Target, resource: ConfigResource) -> str:
    """IncrementalAlterConfigs through confluent-kafka: OK or the error's name."""
    admin = t.admin()
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=60)
        return "OK"
    except KafkaException as exc:
        return exc.args[0].name()


def set_config(kind: ConfigResource.Type, name: str, key: str, value: str | None) -> ConfigResource:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    return ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])


def configs(t: Target, *args: str) -> str:
    """kafka-configs --alter: its exit code and the line saying what happened."""
    result = t.tool(tools.CONFIGS, "--bootstrap-server", "{bs}", "--alter", *args)
    return f"rc {result.rc}: {_error_line(result.stdout + result.stderr)}"


def broker_faults(t: Target) -> dict[str, Observed]:
    o: dict[str, Observed] = {ELR: {}, HWM: {}, MIN_ISR: {}, UNCLEAN: {}}
    for topic in (ELR, HWM, MIN_ISR, UNCLEAN):
        t.create_topic(topic, ASSIGNMENT, MIN_ISR_2)
    acked: dict[str, list[str]] = {}
    for topic in (ELR, HWM, MIN_ISR, UNCLEAN):
        acked[topic], errors = t.produce(topic, 50)
        o[topic]["acks=all writes with the full ISR"] = errors_text(acked[topic], errors)

    # -- stop 103 cleanly: the ISR shrinks to 101,102, still min ISR -------------------------
    t.stop_broker(103)
    for topic in (ELR, UNCLEAN):
        row = t.wait_partition(topic, 0, lambda r: r["isr"] == [101, 102], "ISR 101,102")
    o[ELR]["after a clean stop of 103"] = state(t.describe(ELR)[0])
    more, errors = t.produce(UNCLEAN, 10, prefix="while-103-down")
    acked[UNCLEAN] += more
    o[UNCLEAN]["acks=all writes while 103 is stopped (ISR 101,102)"] = errors_text(more, errors)

    # -- stop 102 cleanly: ISR 101 < min ISR 2, 102 becomes eligible (ELR) --------------------
    t.stop_broker(102)
    for topic in (ELR, HWM, MIN_ISR, UNCLEAN):
        row = t.wait_partition(topic, 0, lambda r: r["isr"] == [101], "ISR 101")
    o[ELR]["after a clean stop of 102"] = state(t.describe(ELR)[0])
    epoch_before = t.describe(ELR)[0]["leader_epoch"]

    hwm_before = t.watermarks(HWM)[1]
    ones, errors = t.produce(HWM, 5, acks="1", prefix="acks1")
    o[HWM]["acks=1 writes while ISR 101 < min ISR 2"] = errors_text(ones, errors)
    alls, errors = t.produce(HWM, 3, acks="all", prefix="acksall", timeout_s=8)
    o[HWM]["acks=all writes while ISR < min ISR (librdkafka retries until its timeout)"] = (
        errors_text(alls, errors))
    alls, errors = t.produce(HWM, 1, acks="all", prefix="noretry", extra={"retries": 0})
    o[HWM]["acks=all write with retries=0: the broker's error"] = errors_text(alls, errors)
    hwm_after = t.watermarks(HWM)[1]
    o[HWM]["high watermark before / after those writes"] = f"{hwm_before} / {hwm_after}"
    o[HWM]["records a consumer reads"] = str(len(t.consume_all(HWM)))

    row = t.describe(MIN_ISR)[0]
    o[MIN_ISR]["before: ISR / ELR"] = f"{ids(row['isr'])} / {ids(row['elr'])}"
    o[MIN_ISR]["kafka-configs: topic min.insync.replicas 2 -> 3"] = configs(
        t, "--entity-type", "topics", "--entity-name", MIN_ISR, "--add-config",
        "min.insync.replicas=3")
    row = t.wait_partition(MIN_ISR, 0, lambda r: True, "a row")
    o[MIN_ISR]["after raising it: ISR / ELR / LastKnownELR"] = (
        f"{ids(row['isr'])} / {ids(row['elr'])} / {ids(row['last_known_elr'])}")
    o[MIN_ISR]["kafka-configs: min.insync.replicas on broker 101"] = configs(
        t, "--entity-type", "brokers", "--entity-name", "101", "--add-config",
        "min.insync.replicas=1")

    # -- kill -9 the leader 101; bring back 103 (neither ISR nor ELR) ------------------------
    t.kill_broker(101)
    t.start_broker(103)
    t.wait_brokers_registered()
    row = t.wait_partition(ELR, 0, lambda r: r["leader"] == -1, "no leader")
    o[ELR]["after kill -9 of leader 101, 103 restarted"] = state(row)
    row = t.wait_partition(UNCLEAN, 0, lambda r: r["leader"] == -1, "no leader")
    o[UNCLEAN]["before the election"] = state(row)
    result = t.tool(tools.LEADER_ELECTION, "--bootstrap-server", "{bs}", "--election-type",
                    "UNCLEAN", "--topic", UNCLEAN, "--partition", "0")
    o[UNCLEAN]["kafka-leader-election --election-type UNCLEAN"] = (
        f"rc {result.rc}: {result.stdout.strip() or result.stderr.strip().splitlines()[-1]}")
    row = t.wait_partition(UNCLEAN, 0, lambda r: r["leader"] >= 0, "a leader")
    o[UNCLEAN]["after the election"] = state(row)
    # The new leader's HWM is what it last learned as a follower (Kafka checkpoints it): 50 if
    # its last fetch before the stop carried the final HWM, less otherwise, and below the
    # epoch's start offset (50) ListOffsets answers OFFSET_NOT_AVAILABLE; which one is timing,
    # on both clusters. It can only say at most 50: the 10 records 103 never had are gone.
    latest = t.high_watermark(UNCLEAN)
    o[UNCLEAN]["ListOffsets latest right after the election (60 acked)"] = (
        "at most 50, or OFFSET_NOT_AVAILABLE" if latest == "OFFSET_NOT_AVAILABLE"
        or (latest.isdigit() and int(latest) <= 50) else latest)

    # -- restart 102 (the ELR member) ---------------------------------------------------------
    t.start_broker(102)
    row = t.wait_partition(ELR, 0, lambda r: r["leader"] >= 0, "a leader again")
    o[ELR]["after restarting 102: leader, and was it in the ELR"] = (
        f"{row['leader']}, {row['leader'] in (102,)}")
    o[ELR]["leader epoch bumps since the stops"] = str(row["leader_epoch"] - epoch_before)
    row = t.wait_partition(ELR, 0, lambda r: len(r["isr"]) == 2, "ISR of two")
    o[ELR]["then"] = state(row)
    read = t.consume_all(ELR)
    o[ELR]["acked records a consumer reads"] = (
        f"{len(set(read) & set(acked[ELR]))} of {len(acked[ELR])}")

    # -- restart 101 -------------------------------------------------------------------------
    t.start_broker(101)
    row = t.wait_partition(ELR, 0, lambda r: len(r["isr"]) == 3, "the full ISR")
    o[ELR]["after restarting 101"] = state(row)
    row = t.wait_partition(HWM, 0, lambda r: len(r["isr"]) == 3, "the full ISR")
    o[HWM]["after every broker is back"] = state(row)
    read = t.consume_all(HWM)
    o[HWM]["records read at the end: acks=all before / acks=1 under min ISR"] = (
        f"{len(set(read) & set(acked[HWM]))} / {len(set(read) & set(ones))}")
    row = t.wait_partition(UNCLEAN, 0, lambda r: len(r["isr"]) == 3, "the full ISR")
    o[UNCLEAN]["after every broker is back"] = state(row)
    o[UNCLEAN]["high watermark at the end"] = str(t.watermarks(UNCLEAN)[1])
    read = t.consume_all(UNCLEAN)
    o[UNCLEAN]["acked records a consumer reads at the end"] = (
        f"{len(set(read) & set(acked[UNCLEAN]))} of {len(acked[UNCLEAN])}")
    t.wait_brokers_registered()
    # Last: Kafka clears the ELR of every partition on a cluster-wide min ISR change (topic
    # overrides or not), which would have ended the ELR system test above.
    o[MIN_ISR]["kafka-configs: cluster-wide min.insync.replicas (--entity-default)"] = configs(
        t, "--entity-type", "brokers", "--entity-default", "--add-config",
        "min.insync.replicas=1")
    o[MIN_ISR]["kafka-configs: cluster-wide min.insync.replicas deleted"] = configs(
        t, "--entity-type", "brokers", "--entity-default", "--delete-config",
        "min.insync.replicas")
    return o


def test_broker_fault_scenarios(pair: Pair) -> None:
    assert_table(run_beside(pair, broker_faults))


def invalid_requests(t: Target) -> dict[str, Observed]:
    o: Observed = {}
    admin = t.admin()

    def create(topic: NewTopic) -> str:
        try:
            admin.create_topics([topic], request_timeout=60)[topic.topic].result(timeout=60)
            return "OK"
        except KafkaException as exc:
            return exc.args[0].name()

    o["CreateTopics name 'bad name!'"] = create(NewTopic("bad name!", 1, 1))
    o["CreateTopics name of 250 characters"] = create(NewTopic("x" * 250, 1, 1))
    o["CreateTopics name '..'"] = create(NewTopic("..", 1, 1))
    o["CreateTopics replication factor 4 on 3 brokers"] = create(NewTopic("rf-four", 1, 4))
    o["CreateTopics unknown config"] = create(
        NewTopic("unknown-config", 1, 1, config={"no.such.config": "1"}))
    o["CreateTopics min.insync.replicas=0"] = create(
        NewTopic("min-isr-zero", 1, 1, config={"min.insync.replicas": "0"}))
    o["CreateTopics an existing topic"] = create(NewTopic(ELR, 1, 1))
    o["CreatePartitions to fewer partitions"] = _create_partitions(admin, ELR, 1)
    o["DeleteTopics an unknown topic"] = _delete(admin, "no-such-topic")
    o["IncrementalAlterConfigs unknown topic config"] = alter(
        t, set_config(ConfigResource.Type.TOPIC, ELR, "no.such.config", "1"))
    o["IncrementalAlterConfigs unknown topic"] = alter(
        t, set_config(ConfigResource.Type.TOPIC, "no-such-topic", "retention.ms", "1"))
    result = t.tool(tools.TOPICS, "--bootstrap-server", "{bs}", "--create", "--topic",
                    "too-many", "--partitions", "100000", "--replication-factor", "1")
    o["kafka-topics --create --partitions 100000"] = (
        f"rc {result.rc}: {_error_line(result.stdout + result.stderr)}")
    result = t.tool(tools.LEADER_ELECTION, "--bootstrap-server", "{bs}", "--election-type",
                    "PREFERRED", "--topic", "no-such-topic", "--partition", "0")
    o["kafka-leader-election on an unknown topic"] = (
        f"rc {result.rc}: {_error_line(result.stdout + result.stderr)}")
    return {"invalid-requests": o, "extensions": extensions(t)}


def extensions(t: Target) -> Observed:
    """What minikraft adds to Kafka, as a client sees it: ApiVersions' ElectLeaders v3
    (DESIGNATED elections) and GetReplicaLogInfo (the unclean-recovery tool's question), and
    the KIP-966 recovery manager's switch as a cluster config."""
    o: Observed = {}
    versions = asyncio.run(_api_versions(t.bootstrap_server.split(",")[0]))
    for key, name in ((ApiKey.ELECT_LEADERS, "ElectLeaders"),
                      (ApiKey.GET_REPLICA_LOG_INFO, "GetReplicaLogInfo")):
        o[f"ApiVersions: {name} versions"] = versions.get(int(key), "not served")
    o["kafka-configs: cluster-wide unclean.recovery.manager.enabled=true"] = configs(
        t, "--entity-type", "brokers", "--entity-default", "--add-config",
        "unclean.recovery.manager.enabled=true")
    configs(t, "--entity-type", "brokers", "--entity-default", "--delete-config",
            "unclean.recovery.manager.enabled")
    return o


async def _api_versions(address: str) -> dict[int, str]:
    client = new_client("conformance-api-versions")
    try:
        answer = await client.request(address, ApiVersionsRequest(
            client_software_name="conformance", client_software_version="1"))
    finally:
        await client.close()
    return {int(k.api_key): f"{int(k.min_version)}-{int(k.max_version)}" for k in answer.api_keys}


def _create_partitions(admin: Any, topic: str, count: int) -> str:
    from confluent_kafka.admin import NewPartitions

    try:
        admin.create_partitions([NewPartitions(topic, count)])[topic].result(timeout=60)
        return "OK"
    except KafkaException as exc:
        return exc.args[0].name()


def _delete(admin: Any, topic: str) -> str:
    try:
        admin.delete_topics([topic], request_timeout=60)[topic].result(timeout=60)
        return "OK"
    except KafkaException as exc:
        return exc.args[0].name()


def _error_line(text: str) -> str:
    """What a tool's output says went wrong: the first `SomeException: message` (the class
    without its package), else the first line naming an error, else the first line."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    for line in lines:
        found = re.search(r"(\w+(?:Exception|Error)): (.*)", line)
        if found:
            return f"{found.group(1)}: {found.group(2)}"[:200]
    for line in lines:
        if "Error" in line or "error" in line:
            return line[:200]
    return lines[0][:200] if lines else ""


def test_invalid_requests(pair: Pair) -> None:
    assert_table(run_beside(pair, invalid_requests))
