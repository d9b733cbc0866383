"""The conformance table: what a user observes on Apache Kafka and on minikraft, scenario by
scenario, and whether the two are the same, a deliberate difference, an open one, or a minikraft
extension Kafka lacks. docs/CONFORMANCE.md is rendered from ROWS
(`python -m tests.conformance.table > docs/CONFORMANCE.md`; test_table_doc.py keeps the two
equal), and every scenario run asserts its observations against ROWS, so a difference nobody
recorded fails, and so does one that went away (update the row, and the doc with it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cluster.apache_kafka import deps

SAME = "same"
DELIBERATE = "deliberate"
OPEN = "open"
EXTENSION = "extension"
STATUSES = (SAME, DELIBERATE, OPEN, EXTENSION)

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONFORMANCE.md"
OBSERVED_DIR = Path(__file__).resolve().parents[2] / "build" / "conformance"


@dataclass(frozen=True)
class Row:
    scenario: str
    observable: str
    kafka: str
    minikraft: str
    status: str = SAME
    why: str = ""

    def __post_init__(self) -> None:
        assert self.status in STATUSES, self.status
        if self.status == SAME:
            assert self.kafka == self.minikraft, f"{self.observable}: 'same' with two values"
        else:
            assert self.why, f"{self.observable}: a {self.status} row says why"


def _same(scenario: str, observable: str, value: str) -> Row:
    return Row(scenario, observable, value, value)



ELR = "elr-system-test"
HWM = "hwm-under-min-isr"
MIN_ISR = "min-isr-change"
UNCLEAN = "unclean-election"
INVALID = "invalid-requests"
EXTENSIONS = "extensions"
QUORUM = "quorum-reconfiguration"

# INVARIANTS.md "Where we differ": LastKnownELR follows KIP-966 (ELR members that restarted
# uncleanly); Kafka 4.4 puts the last leader there, which minikraft keeps in LastKnownLeader.
_LAST_KNOWN_ELR = ("INVARIANTS rule 11 / Where we differ: minikraft's LastKnownELR follows "
                   "KIP-966 (ELR members that restarted uncleanly); Kafka stores the last leader "
                   "there, minikraft in its own LastKnownLeader field")

ROWS: list[Row] = [
    # -- Kafka's ELR system test (RF 3, min ISR 2) ---------------------------------------------
    _same(ELR, "acks=all writes with the full ISR", "50 acked; none failed"),
    _same(ELR, "after a clean stop of 103", "leader 101, ISR 101,102, ELR -, LastKnownELR -"),
    _same(ELR, "after a clean stop of 102", "leader 101, ISR 101, ELR 102, LastKnownELR -"),
    Row(ELR, "after kill -9 of leader 101, 103 restarted",
        "leader -1, ISR -, ELR 101,102, LastKnownELR 101",
        "leader -1, ISR -, ELR 101,102, LastKnownELR -", DELIBERATE, _LAST_KNOWN_ELR),
    _same(ELR, "after restarting 102: leader, and was it in the ELR", "102, True"),
    _same(ELR, "leader epoch bumps since the stops", "2"),
    _same(ELR, "then", "leader 102, ISR 102,103, ELR -, LastKnownELR -"),
    _same(ELR, "acked records a consumer reads", "50 of 50"),
    _same(ELR, "after restarting 101", "leader 102, ISR 101,102,103, ELR -, LastKnownELR -"),
    # -- acks=1 / acks=all while ISR < min ISR ------------------------------------------------
    _same(HWM, "acks=all writes with the full ISR", "50 acked; none failed"),
    _same(HWM, "acks=1 writes while ISR 101 < min ISR 2", "5 acked; none failed"),
    _same(HWM, "acks=all writes while ISR < min ISR (librdkafka retries until its timeout)",
          "0 acked; _MSG_TIMED_OUT x3"),
    _same(HWM, "acks=all write with retries=0: the broker's error",
          "0 acked; NOT_ENOUGH_REPLICAS x1"),
    _same(HWM, "high watermark before / after those writes", "50 / 50"),
    _same(HWM, "records a consumer reads", "50"),
    _same(HWM, "after every broker is back", "leader 102, ISR 101,102,103, ELR -, LastKnownELR -"),
    _same(HWM, "records read at the end: acks=all before / acks=1 under min ISR", "50 / 0"),
    # -- min ISR changes with ELR on ------------------------------------------------------------
    _same(MIN_ISR, "acks=all writes with the full ISR", "50 acked; none failed"),
    _same(MIN_ISR, "before: ISR / ELR", "101 / 102"),
    _same(MIN_ISR, "kafka-configs: topic min.insync.replicas 2 -> 3",
          "rc 0: Completed updating config for topic min-isr-change."),
    Row(MIN_ISR, "after raising it: ISR / ELR / LastKnownELR", "101 / - / -", "101 / 102 / -",
        DELIBERATE, "INVARIANTS rule 15 / Where we differ: minikraft clears the ELR only when "
        "the new min ISR is at most the ISR size (KIP-966); Kafka clears it on any change"),
    _same(MIN_ISR, "kafka-configs: min.insync.replicas on broker 101",
          "rc 1: ExecutionException: org.apache.kafka.common.errors.InvalidConfigurationException:"
          " Broker-level min.insync.replicas cannot be altered while ELR is enabled."),
    _same(MIN_ISR, "kafka-configs: cluster-wide min.insync.replicas (--entity-default)",
          "rc 0: Completed updating default config for brokers in the cluster."),
    _same(MIN_ISR, "kafka-configs: cluster-wide min.insync.replicas deleted",
          "rc 1: ExecutionException: org.apache.kafka.common.errors.InvalidConfigurationException:"
          " Cluster-level min.insync.replicas cannot be removed while ELR is enabled."),
    # -- UNCLEAN election with Kafka's tool -----------------------------------------------------
    _same(UNCLEAN, "acks=all writes with the full ISR", "50 acked; none failed"),
    _same(UNCLEAN, "acks=all writes while 103 is stopped (ISR 101,102)", "10 acked; none failed"),
    Row(UNCLEAN, "before the election", "leader -1, ISR -, ELR 101,102, LastKnownELR 101",
        "leader -1, ISR -, ELR 101,102, LastKnownELR -", DELIBERATE, _LAST_KNOWN_ELR),
    _same(UNCLEAN, "kafka-leader-election --election-type UNCLEAN",
          "rc 0: Successfully completed leader election (UNCLEAN) for partitions "
          "unclean-election-0"),
    _same(UNCLEAN, "after the election", "leader 103, ISR 103, ELR -, LastKnownELR -"),
    _same(UNCLEAN, "ListOffsets latest right after the election (60 acked)",
          "at most 50, or OFFSET_NOT_AVAILABLE"),
    _same(UNCLEAN, "after every broker is back",
          "leader 103, ISR 101,102,103, ELR -, LastKnownELR -"),
    _same(UNCLEAN, "high watermark at the end", "50"),
    _same(UNCLEAN, "acked records a consumer reads at the end", "50 of 60"),
    # -- invalid requests -------------------------------------------------------------------
    _same(INVALID, "CreateTopics name 'bad name!'", "TOPIC_EXCEPTION"),
    _same(INVALID, "CreateTopics name of 250 characters", "TOPIC_EXCEPTION"),
    _same(INVALID, "CreateTopics name '..'", "TOPIC_EXCEPTION"),
    _same(INVALID, "CreateTopics replication factor 4 on 3 brokers", "INVALID_REPLICATION_FACTOR"),
    _same(INVALID, "CreateTopics unknown config", "INVALID_CONFIG"),
    _same(INVALID, "CreateTopics min.insync.replicas=0", "INVALID_CONFIG"),
    _same(INVALID, "CreateTopics an existing topic", "TOPIC_ALREADY_EXISTS"),
    _same(INVALID, "CreatePartitions to fewer partitions", "INVALID_PARTITIONS"),
    _same(INVALID, "DeleteTopics an unknown topic", "UNKNOWN_TOPIC_OR_PART"),
    _same(INVALID, "IncrementalAlterConfigs unknown topic config", "INVALID_CONFIG"),
    _same(INVALID, "IncrementalAlterConfigs unknown topic", "UNKNOWN_TOPIC_OR_PART"),
    _same(INVALID, "kafka-topics --create --partitions 100000",
          "rc 1: PolicyViolationException: Excessively large number of partitions per request."),
    _same(INVALID, "kafka-leader-election on an unknown topic",
          "rc 1: UnknownTopicOrPartitionException: No such topic as no-such-topic"),
    # -- quorum reconfiguration (KIP-853) ----------------------------------------------------
    _same(QUORUM, "formatted: 1 --standalone, 2 and 3 --no-initial-controllers",
          "leader 1, voters 1, observers 2,3,101"),
    _same(QUORUM, "AddRaftVoter 2", "OK"),
    _same(QUORUM, "after adding 2", "voters 1,2, observers 3,101"),
    _same(QUORUM, "AddRaftVoter 3", "OK"),
    _same(QUORUM, "after adding 3", "voters 1,2,3, observers 101"),
    _same(QUORUM, "AddRaftVoter 3 again", "DUPLICATE_VOTER"),
    _same(QUORUM, "RemoveRaftVoter 2 with a wrong directory id", "VOTER_NOT_FOUND"),
    _same(QUORUM, "the wiped follower, restarted: an observer / still a voter (its old key)",
          "True / True"),
    Row(QUORUM, "AddRaftVoter the new disk before removing the old key", "DUPLICATE_VOTER", "OK",
        DELIBERATE, "Kafka 4.4.0's AddVoterHandler refuses an id that already votes, whatever its "
        "directory id; minikraft adds the new key beside the old one (seed 003's "
        "add-then-remove order, INVARIANTS rule 5, tests/integration/test_seed003_replacement_processes.py)"),
    _same(QUORUM, "RemoveRaftVoter the old key", "OK"),
    Row(QUORUM, "AddRaftVoter the new disk", "OK", "DUPLICATE_VOTER", DELIBERATE,
        "follows from the row above: minikraft's new key already votes"),
    _same(QUORUM, "after the replacement", "voters 1,2,3, the new disk votes: True"),
    _same(QUORUM, "RemoveRaftVoter the leader", "OK"),
    _same(QUORUM, "after removing the leader: voters, a new leader among them",
          "2 voters, True"),
    # -- minikraft's extensions, as a client sees them --------------------------------------
    Row(EXTENSIONS, "ApiVersions: ElectLeaders versions", "0-2", "0-3", EXTENSION,
        "ElectLeaders v3 carries DESIGNATED elections (KAFKA-20098), which the unclean-recovery "
        "tool uses; Kafka 4.4.0 serves v0-2"),
    Row(EXTENSIONS, "ApiVersions: GetReplicaLogInfo versions", "not served", "0-0", EXTENSION,
        "the question the unclean-recovery tool asks every broker (seed 004), at minikraft's "
        "extension api key 10000"),
    Row(EXTENSIONS, "kafka-configs: cluster-wide unclean.recovery.manager.enabled=true",
        "rc 0: Completed updating default config for brokers in the cluster.",
        "rc 1: ExecutionException: org.apache.kafka.common.errors.InvalidConfigurationException:"
        " Unknown broker config name: unclean.recovery.manager.enabled", DELIBERATE,
        "Kafka 4.4.0 takes the KIP-966 recovery manager's switch as a dynamic cluster config "
        "(it has no recovery manager to switch); minikraft's manager is real and reads it from "
        "the active controller's properties only, so it refuses the dynamic config rather than "
        "accept one it would not honour"),
]


def rows_of(scenario: str) -> list[Row]:
    return [r for r in ROWS if r.scenario == scenario]


def check(scenario: str, observed: dict[str, dict[str, str]], record: bool = True) -> list[str]:
    """Differences between this run and the table (empty when it matches): every observable
    of the scenario has its row, with the values each cluster showed, and no row is left
    unobserved. With record, prints this run's lines and writes them to
    build/conformance/<scenario>.md, whatever the outcome."""
    kafka, mk = observed["kafka"], observed["minikraft"]
    rows = {r.observable: r for r in rows_of(scenario)}
    problems = []
    for name in sorted(set(kafka) | set(mk), key=lambda n: list(kafka).index(n)
                       if n in kafka else len(kafka)):
        row = rows.get(name)
        k, m = kafka.get(name, "(not observed)"), mk.get(name, "(not observed)")
        if row is None:
            problems.append(f"{scenario} / {name}: not in the table (kafka {k!r}, minikraft {m!r})")
        elif (row.kafka, row.minikraft) != (k, m):
            problems.append(
                f"{scenario} / {name}: table says kafka {row.kafka!r} minikraft {row.minikraft!r}"
                f" ({row.status}); this run kafka {k!r} minikraft {m!r}"
            )
    for name in rows:
        if name not in kafka and name not in mk:
            problems.append(f"{scenario} / {name}: in the table, not observed by this run")
    if record:
        _write_observed(scenario, kafka, mk)
    return problems


def assert_table(observed: dict[str, dict[str, dict[str, str]]]) -> None:
    """observed: engine -> scenario -> observations; every scenario checked against ROWS."""
    problems = []
    for scenario in observed["kafka"]:
        problems += check(
            scenario, {e: observed[e].get(scenario, {}) for e in ("kafka", "minikraft")})
    assert not problems, "\n".join(problems)


def _write_observed(scenario: str, kafka: dict[str, str], mk: dict[str, str]) -> None:
    OBSERVED_DIR.mkdir(parents=True, exist_ok=True)
    lines = [f"| {scenario} | {n} | {kafka.get(n, '')} | {mk.get(n, '')} |"
             for n in dict.fromkeys([*kafka, *mk])]
    (OBSERVED_DIR / f"{scenario}.md").write_text("\n".join(lines) + "\n")
    print(f"\nconformance {scenario} (Apache Kafka {deps.kafka_version()} | minikraft):")
    print("\n".join(lines))


def counts() -> dict[str, int]:
    """Scenarios by their worst row: same < extension < deliberate < open."""
    order = [SAME, EXTENSION, DELIBERATE, OPEN]
    worst: dict[str, str] = {}
    for r in ROWS:
        now = worst.get(r.scenario, SAME)
        worst[r.scenario] = max(now, r.status, key=order.index)
    return {s: sum(1 for w in worst.values() if w == s) for s in order}


def render() -> str:
    version = deps.kafka_version()
    n = counts()
    rows = {s: sum(1 for r in ROWS if r.status == s) for s in STATUSES}
    out = [
        "# minikraft beside Apache Kafka: the conformance table",
        "",
        f"Generated from `tests/conformance/table.py` (`python -m tests.conformance.table >"
        f" docs/CONFORMANCE.md`); the scenarios in `tests/conformance/` run each line on a real"
        f" Apache Kafka {version} cluster and on a minikraft cluster planned alike"
        f" (`cluster/apache_kafka/`, `make kafka-deps`) and fail on any value not written here."
        f" Broker ids are 101-103, controller ids 1-3, on both.",
        "",
        f"Scenarios: {n[SAME]} equal, {n[EXTENSION]} equal apart from minikraft extensions,"
        f" {n[DELIBERATE]} with a deliberate difference, {n[OPEN]} with an open one"
        f" (rows: {rows[SAME]} same, {rows[EXTENSION]} extension, {rows[DELIBERATE]} deliberate,"
        f" {rows[OPEN]} open).",
        "",
        f"| scenario | observable | Apache Kafka {version} | minikraft | status | why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in ROWS:
        out.append(f"| {r.scenario} | {r.observable} | {r.kafka} | {r.minikraft} | {r.status} |"
                   f" {r.why} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
