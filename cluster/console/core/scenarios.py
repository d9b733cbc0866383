"""Guided scenarios, one per seed: short steps that set a situation up with the page's actions and
say what to look at. Each step has a check: a predicate over what the console shows (rows,
brokers, quorum, the metadata log since the scenario started) that must hold before the next
step; the runtime waits for it, bounded, and shows which step holds. Pure: actions are returned
as requests for runtime/actions.py, roles (leader, followers) are picked from the state.

The expected states are the seeds' and the controller transcripts' (tests/scenarios/*.txt):
01_elr_fencing and 03_last_known_leader for ELR, LastKnownELR and LastKnownLeader; 07 for the
unclean election's RECOVERING; seed 004 for the unclean-recovery tool; seed 003 for the disk
replacement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Ctx = dict[str, Any]


@dataclass
class Snapshot:
    """What a check sees."""

    rows: dict[str, dict[str, Any]]
    brokers: list[dict[str, Any]]
    quorum: dict[str, Any]
    log: list[dict[str, Any]] = field(default_factory=list)  # entries since the scenario began


Check = Callable[[Ctx, Snapshot], str | None]  # None: holds; else what does not hold yet
Act = Callable[[Ctx, Snapshot], dict[str, Any] | None]


@dataclass(frozen=True)
class Step:
    title: str
    look_at: str
    act: Act
    check: Check
    timeout_s: float = 45.0


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: str
    title: str
    intro: str
    steps: tuple[Step, ...]


def _row(ctx: Ctx, snap: Snapshot) -> dict[str, Any] | None:
    return snap.rows.get(f"{ctx['topic']}-0")


def _broker(snap: Snapshot, broker_id: int) -> dict[str, Any]:
    return next((b for b in snap.brokers if b["id"] == broker_id), {})


def _create(ctx: Ctx, _snap: Snapshot) -> dict[str, Any]:
    return {"action": "create-topic", "topic": ctx["topic"], "partitions": 1,
            "replication_factor": 3, "min_isr": 2}


def _created(ctx: Ctx, snap: Snapshot) -> str | None:
    """The topic exists with a leader and a full ISR; its leader and followers become roles."""
    row = _row(ctx, snap)
    if row is None:
        return "the topic is not in the metadata log yet"
    if row["leader"] < 0 or len(row["isr"]) != 3:
        return f"leader {row['leader']}, ISR {row['isr']}: waiting for a full ISR"
    if not all(o[1] is not None for o in row["offsets"]):
        return "waiting for every replica to report its log"
    ctx.setdefault("leader", row["leader"])
    followers = [r for r in row["replicas"] if r != ctx["leader"]]
    ctx.setdefault("a", followers[0])
    ctx.setdefault("b", followers[1])
    ctx.setdefault("epochs", {b["id"]: b["epoch"] for b in snap.brokers})
    return None


def _produce(ctx: Ctx, _snap: Snapshot) -> dict[str, Any]:
    return {"action": "produce", "topic": ctx["topic"], "num_records": 50}


def _has_data(ctx: Ctx, snap: Snapshot) -> str | None:
    row = _row(ctx, snap)
    if row is None or not row["hwm"]:
        return "the high watermark has not moved yet"
    return None


def _node(role: str, action: str) -> Act:
    return lambda ctx, _snap: {"action": action, "node": f"broker-{ctx[role]}"}


def _stop(role: str) -> Act:
    return _node(role, "stop")


def _kill(role: str) -> Act:
    return _node(role, "kill")


def _restart(role: str) -> Act:
    return _node(role, "restart")


def _expect(**want: Callable[[Ctx, dict[str, Any]], bool]) -> Check:
    """A check on the scenario's partition row: every named predicate holds."""

    def check(ctx: Ctx, snap: Snapshot) -> str | None:
        row = _row(ctx, snap)
        if row is None:
            return "no such partition"
        failing = [name for name, ok in want.items() if not ok(ctx, row)]
        if failing:
            shown = {k: row[k] for k in ("leader", "isr", "elr", "last_known_elr",
                                         "last_known_leader", "leader_recovery_state")}
            return f"not yet: {', '.join(failing)} (now {shown})"
        return None

    return check


def _recovering_logged(ctx: Ctx, snap: Snapshot) -> bool:
    """A committed PartitionChangeRecord of the partition set LeaderRecoveryState RECOVERING."""
    return any(e["type"] in ("PartitionChangeRecord", "PartitionRecord")
               and e.get("topic") == ctx["topic"]
               and e["data"].get("LeaderRecoveryState") == 1 for e in snap.log)


ELR = Scenario(
    "elr", "001", "KIP-966: Eligible Leader Replicas",
    "Two followers stop cleanly, then the leader dies: the ELR keeps the replicas that were in "
    "the ISR when it fell below min.insync.replicas, and an unclean restart moves a member to "
    "LastKnownELR.",
    (
        Step("Create a topic: 1 partition, 3 replicas, min.insync.replicas=2",
             "the new row: ISR of 3, ELR empty", _create, _created),
        Step("Stop follower A cleanly",
             "ISR shrinks to 2, still at min ISR: ELR stays empty (rule 10)", _stop("a"),
             _expect(a_out=lambda c, r: c["a"] not in r["isr"],
                     elr_empty=lambda c, r: r["elr"] == [])),
        Step("Stop follower B cleanly",
             "ISR falls below min ISR: B moves into the ELR", _stop("b"),
             _expect(isr_leader=lambda c, r: r["isr"] == [c["leader"]],
                     elr_b=lambda c, r: r["elr"] == [c["b"]])),
        Step("Kill -9 the leader",
             "no leader; the ISR is empty, the leader joins the ELR and is the LastKnownLeader",
             _kill("leader"),
             _expect(offline=lambda c, r: r["leader"] == -1,
                     isr_empty=lambda c, r: r["isr"] == [],
                     elr=lambda c, r: sorted(r["elr"]) == sorted([c["b"], c["leader"]]),
                     lkl=lambda c, r: r["last_known_leader"] == c["leader"])),
        Step("Restart the old leader (it was killed: no clean-shutdown file)",
             "its unclean restart moves it from the ELR to LastKnownELR; B, fenced, is not "
             "electable, so the partition stays offline", _restart("leader"),
             _expect(offline=lambda c, r: r["leader"] == -1,
                     elr_b=lambda c, r: r["elr"] == [c["b"]],
                     lkelr=lambda c, r: r["last_known_elr"] == [c["leader"]])),
        Step("Restart B (stopped cleanly)",
             "B, an ELR member with a clean shutdown, is elected: leader B, ISR [B]",
             _restart("b"),
             _expect(leader_b=lambda c, r: r["leader"] == c["b"],
                     recovered=lambda c, r: r["leader_recovery_state"] == "RECOVERED")),
        Step("Restart A", "the ISR grows back to all three as the replicas catch up",
             _restart("a"), _expect(isr=lambda c, r: len(r["isr"]) == 3)),
    ),
)


def _dead_isr(ctx: Ctx, _snap: Snapshot) -> dict[str, Any]:
    return {"action": "kill-many", "nodes": [f"broker-{ctx['b']}", f"broker-{ctx['leader']}"]}


_OFFLINE = _expect(offline=lambda c, r: r["leader"] == -1,
                   isr_empty=lambda c, r: r["isr"] == [])
_SPARE_NOT_ELECTABLE = _expect(
    offline=lambda c, r: r["leader"] == -1,
    a_not_in_elr=lambda c, r: c["a"] not in r["elr"],
)


def _spare_back(ctx: Ctx, snap: Snapshot) -> str | None:
    broker = _broker(snap, ctx["a"])
    if not broker.get("up") or broker.get("fenced"):
        return f"broker {ctx['a']} is not up and unfenced yet"
    return _SPARE_NOT_ELECTABLE(ctx, snap)


def _recovered_on_spare(ctx: Ctx, snap: Snapshot) -> str | None:
    row = _row(ctx, snap)
    if row is None or row["leader"] != ctx["a"]:
        return f"leader is {None if row is None else row['leader']}, not {ctx['a']}"
    if not _recovering_logged(ctx, snap):
        return "no committed record set RECOVERING yet"
    if row["leader_recovery_state"] != "RECOVERED":
        return "the new leader is still RECOVERING"
    return None


def _offline_steps(kill_spare_look: str) -> tuple[Step, ...]:
    return (
        Step("Create a topic: 1 partition, 3 replicas, min.insync.replicas=2",
             "the new row: ISR of 3", _create, _created),
        Step("Write 50 records with acks=all", "the high watermark moves", _produce, _has_data),
        Step("Kill -9 follower A", kill_spare_look, _kill("a"),
             _expect(a_out=lambda c, r: c["a"] not in r["isr"], led=lambda c, r: r["leader"] >= 0)),
        Step("Kill -9 the other follower and the leader",
             "no leader, ISR empty: the partition is offline", _dead_isr, _OFFLINE),
        Step("Restart A", "A is back and unfenced but not in the ELR: unclean.leader.election."
             "enable is false, so nobody is elected", _restart("a"), _spare_back),
    )


UNCLEAN_RECOVERY = Scenario(
    "unclean-recovery", "004", "KAFKA-20098: the unclean recovery tool",
    "Every ISR member dies; only a replica that left the ISR comes back. The unclean-recovery "
    "tool asks each broker for its log (GetReplicaLogInfo) and elects the best replica with a "
    "DESIGNATED election: RECOVERING, then RECOVERED once the leader has recovered.",
    (
        *_offline_steps("A leaves the ISR; the leader keeps the partition online"),
        Step("Run unclean-recovery --automated-recovery --all-offline-partitions",
             "A is elected (DESIGNATED): LeaderRecoveryState RECOVERING in the log, then "
             "RECOVERED", lambda c, s: {"action": "unclean-recovery", "duration_ms": 4000},
             _recovered_on_spare),
    ),
)

UNCLEAN_ELECTION = Scenario(
    "unclean-election", "000", "KIP-704: leader recovery state",
    "An UNCLEAN election puts a replica that was not in the ISR in charge: the partition is "
    "RECOVERING until that leader has recovered its log, then RECOVERED; followers fetch only "
    "then.",
    (
        *_offline_steps("A leaves the ISR"),
        Step("Run an UNCLEAN election for the partition",
             "A leads, RECOVERING (in the log), then RECOVERED",
             lambda c, s: {"action": "elect", "type": "UNCLEAN", "topic": c["topic"],
                           "partition": 0},
             _recovered_on_spare),
    ),
)


def _epoch_bumped(ctx: Ctx, snap: Snapshot) -> str | None:
    broker = _broker(snap, ctx["a"])
    before = ctx["epochs"].get(ctx["a"])
    if broker.get("epoch") is None or before is None or broker["epoch"] <= before:
        return f"broker {ctx['a']} epoch {broker.get('epoch')} (was {before})"
    row = _row(ctx, snap)
    if row is None or ctx["a"] not in row["isr"]:
        return f"broker {ctx['a']} not back in the ISR yet"
    return None


BROKER_EPOCH = Scenario(
    "broker-epoch", "002", "KIP-903: broker epochs in the ISR",
    "A follower that restarts gets a new broker epoch; the leader may add it back to the ISR "
    "only with that epoch, so a request carrying the old one is refused (INELIGIBLE_REPLICA).",
    (
        Step("Create a topic: 1 partition, 3 replicas, min.insync.replicas=2",
             "the new row: ISR of 3; note each broker's epoch", _create, _created),
        Step("Kill -9 follower A", "A leaves the ISR once its session expires", _kill("a"),
             _expect(a_out=lambda c, r: c["a"] not in r["isr"])),
        Step("Restart A", "A registers with a new, higher broker epoch and rejoins the ISR",
             _restart("a"), _epoch_bumped),
    ),
)


def _voters_now(ctx: Ctx, snap: Snapshot) -> str | None:
    voters = snap.quorum.get("voters") or []
    if len(voters) < 3 or snap.quorum.get("leader_id") is None:
        return "waiting for the quorum"
    leader = snap.quorum["leader_id"]
    victim = next(v for v in voters if v["id"] != leader)
    ctx.setdefault("victim", victim["id"])
    ctx.setdefault("old_dir", victim["directory_id"])
    return None


def _replaced(ctx: Ctx, snap: Snapshot) -> str | None:
    voters = {(v["id"], v["directory_id"]) for v in snap.quorum.get("voters") or []}
    mine = [d for i, d in voters if i == ctx["victim"]]
    if (ctx["victim"], ctx["old_dir"]) in voters:
        return "the old key is still a voter"
    if len(mine) != 1 or len(voters) != 3:
        return f"voters {sorted(voters)}"
    return None


CONTROLLER_DISK = Scenario(
    "controller-disk", "003", "KIP-856: replace a controller's failed disk",
    "A standby controller loses its disk. Formatted again it has a new directory id; it starts "
    "as an observer, is added as a voter under the new (id, directory id), and the old key is "
    "removed: voters are keyed by both.",
    (
        Step("Look at the voters", "each voter is (id, directory id)",
             lambda c, s: None, _voters_now),
        Step("Wipe a standby controller's disk and walk the replacement",
             "kill, wipe, format, start as observer, add-voter (new key), remove-voter (old "
             "key): the voter set shows the same id with a new directory id",
             lambda c, s: {"action": "replace-controller", "node": f"controller-{c['victim']}"},
             _replaced, timeout_s=120.0),
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (BROKER_EPOCH, ELR, UNCLEAN_ELECTION, CONTROLLER_DISK, UNCLEAN_RECOVERY)
}


def scenario_json(scenario: Scenario) -> dict[str, Any]:
    return {"name": scenario.name, "seed": scenario.seed, "title": scenario.title,
            "intro": scenario.intro,
            "steps": [{"title": s.title, "look_at": s.look_at} for s in scenario.steps]}
