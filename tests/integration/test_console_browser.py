"""`minikraft console` in headless Chromium (DevTools protocol) over one real 3+3 cluster:
the page loads and shows the quorum, brokers and a partition; kill -9 of the partition's leader
clicked on the page moves leadership and the row shows it within 2 s of the commit; the ELR
guided scenario (two followers stopped cleanly, the leader killed, restarts) shows ELR,
LastKnownELR and LastKnownLeader as seed 001 and tests/scenarios/03 say, each step checked
against `minikraft topics describe`; the unclean-recovery guided scenario ends RECOVERED with
the page showing each step. The other actions: pause (SIGSTOP: the broker is fenced) and
resume (unfenced again), a workload started and stopped from the page with its sent/acked/lost
counters, "run the audit" linking a report that lists what the page did (slow: a Spark audit),
and isolate on a `--network netns` cluster of its own (nftables in the node's namespace: fenced,
then heal; skipped with the reason where namespaces or nft are missing). Screenshots go to
test-artifacts/console/ (MINIKRAFT_ARTIFACTS). Skipped without Chromium (make system-deps)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.launch.local_cluster import LocalCluster, free_ports
from cluster.launch.readiness import wait_until_ready
from tests.integration.conftest import REPO, minikraft
from tests.integration.devtools_browser import CHROMIUM, DevToolsBrowser

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (make system-deps)")

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
}
ARTIFACTS = Path(os.environ.get("MINIKRAFT_ARTIFACTS", REPO / "test-artifacts")) / "console"
STEP_TIMEOUT_S = 60.0


@dataclass
class Env:
    cluster: LocalCluster
    browser: DevToolsBrowser
    url: str


def _wait_console(url: str, process: subprocess.Popen[str], timeout_s: float = 30) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"console exited: {process.communicate()[1][-2000:]}")
        try:
            with urllib.request.urlopen(url + "api/state", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the console never answered")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    directory = tmp_path_factory.mktemp("console") / "c"
    cluster = LocalCluster.plan(directory, controllers=3, brokers=3, base_port=0,
                                overrides=dict(OVERRIDES))
    cluster.format()
    cluster.start()
    console: subprocess.Popen[str] | None = None
    browser: DevToolsBrowser | None = None
    try:
        asyncio.run(wait_until_ready(cluster, 60))
        console, url = _start_console(directory)
        browser = DevToolsBrowser()
        browser.goto(url)
        yield Env(cluster, browser, url)
    finally:
        if browser is not None:
            browser.close()
        if console is not None:
            _stop_console(console)
        # Anything the page restarted is in cluster.json: stop by the pids recorded there.
        LocalCluster.load(directory).stop()
        cluster.stop()
        assert not LocalCluster.load(directory).running(), "processes left behind"


def row(env: Env, key: str) -> dict[str, Any] | None:
    """The partition row as the page's DOM shows it (null when not rendered)."""
    value: dict[str, Any] | None = env.browser.js(f"""(() => {{
        const el = document.querySelector('.pspace .prow[data-key="{key}"]');
        if (!el) return null;
        const out = {{}};
        for (const span of el.querySelectorAll('span[data-col]')) out[span.dataset.col] = span.textContent;
        out.cls = el.className;
        return out;
    }})()""")
    return value


def ids(text: str) -> list[int]:
    return json.loads(text)


def filter_topic(env: Env, topic: str) -> None:
    env.browser.js(f"""(() => {{ document.getElementById('f-topic').value = '^{topic}$';
        document.querySelector('#filter button').click(); return true; }})()""")
    env.browser.wait_js(f"!!document.querySelector('.pspace .prow[data-key=\"{topic}-0\"]')", 20)


def described(env: Env, topic: str) -> dict[str, Any]:
    """`minikraft topics describe` through the controllers: the state the page must match."""
    result = minikraft("topics", "--bootstrap-controller", env.cluster.bootstrap_controller,
                       "describe", "--topic", topic, "--output", "json")
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows[0]


def create_topic(env: Env, topic: str) -> None:
    created = minikraft("topics", "--bootstrap-controller", env.cluster.bootstrap_controller,
                        "create", "--topic", topic, "--partitions", "1",
                        "--replication-factor", "3", "--config", "min.insync.replicas=2")
    assert created.returncode == 0, created.stderr


def wait_full_isr(env: Env, topic: str, timeout_s: float) -> None:
    """Until the page's row of `topic`-0 shows an ISR of all three brokers."""
    env.browser.wait_js(
        f"(() => {{ const r = document.querySelector('.prow[data-key=\"{topic}-0\"] "
        f"[data-col=isr]'); return r && JSON.parse(r.textContent).length === 3; }})()", timeout_s)


def shown_topic(env: Env, topic: str) -> dict[str, Any]:
    """`topic` created (RF 3), filtered to, and its row once the page shows the full ISR."""
    create_topic(env, topic)
    filter_topic(env, topic)
    wait_full_isr(env, topic, 20)
    shown = row(env, f"{topic}-0")
    assert shown is not None
    return shown


def shot(env: Env, name: str) -> Path:
    return env.browser.screenshot(ARTIFACTS / f"{name}.png")


def test_page_loads_with_quorum_brokers_and_partitions(env: Env) -> None:
    b = env.browser
    b.wait_js("document.querySelectorAll('#controllers tbody tr').length === 3", 20)
    b.wait_js("document.querySelectorAll('#brokers tbody tr .state-running').length === 3", 20)
    assert b.js("document.getElementById('conn').textContent") == "live"
    voters = b.wait_js("document.getElementById('voter-keys')?.textContent", 10)
    dirs = {c.node_id: c.directory_id for c in env.cluster.controllers}
    for node_id, directory_id in dirs.items():
        assert f"({node_id}, {directory_id})" in voters
    assert b.js("document.querySelectorAll('#controllers .leader-badge').length") == 1
    assert "kraft.version" in b.js("document.getElementById('voters').textContent")
    shown = shown_topic(env, "shown")
    truth = described(env, "shown")
    assert int(shown["leader"]) == truth["leader"] and ids(shown["isr"]) == truth["isr"]
    assert shown["leader_recovery_state"] == "RECOVERED" and ids(shown["elr"]) == []
    # The metadata log lists the topic's records, decoded, as they committed.
    log_text = b.wait_js("(() => { const t = document.getElementById('log').textContent; "
                         "return t.includes('PartitionRecord') && t; })()", 10)
    assert "TopicRecord" in log_text and "shown-0" in log_text
    shot(env, "01-loaded")


def test_killing_the_leader_from_the_page_moves_leadership_within_2s(env: Env) -> None:
    b = env.browser
    start = shown_topic(env, "kill")
    leader = int(start["leader"])
    b.js(f"document.querySelector('#brokers tr[data-node=\"broker-{leader}\"] "
         f"button[data-act=\"kill\"]').click()")
    # Watch the row from the test's side: when did the page first show a new leader?
    deadline = time.monotonic() + 30
    shown_at = None
    while time.monotonic() < deadline:
        now = row(env, "kill-0")
        if now is not None and int(now["leader"]) not in (leader,):
            shown_at = time.time()
            break
        time.sleep(0.02)
    assert shown_at is not None, "the row never showed a new leader"
    now = row(env, "kill-0")
    assert now is not None
    assert int(now["leader"]) >= 0 and int(now["leader"]) != leader
    assert leader not in ids(now["isr"])
    assert "changed" in now["cls"]  # the row is highlighted
    # The record that moved leadership, as the page's log has it: committed at ts.
    committed_ms = b.js(f"""(() => {{
        const e = window.minikraftConsole.log.find(e => e.type === 'PartitionChangeRecord'
            && e.data.TopicName === 'kill' && e.data.Leader !== undefined && e.data.Leader !== {leader});
        return e ? e.ts : null; }})()""")
    assert committed_ms is not None
    lag_s = shown_at - committed_ms / 1000
    assert lag_s < 2.0, f"the row changed {lag_s:.2f}s after the record was written"
    truth = described(env, "kill")
    assert truth["leader"] == int(now["leader"])
    shot(env, "02-leader-killed")
    b.js(f"document.querySelector('#brokers tr[data-node=\"broker-{leader}\"] "
         f"button[data-act=\"restart\"]')?.click()")
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"broker-{leader}\"] .state-running')", 30)
    wait_full_isr(env, "kill", 30)


def _cell(value: str, want: Any) -> Any:
    if isinstance(want, list):
        return sorted(ids(value))
    return value if isinstance(want, str) else int(value)


def agree_with_describe(env: Env, topic: str, columns: list[str], what: str,
                        timeout_s: float = 6.0) -> dict[str, Any]:
    """The page's row and `topics describe` agree on `columns` (both read again until they do:
    the two are taken a moment apart, and an ISR may grow in between)."""
    deadline = time.monotonic() + timeout_s
    while True:
        shown = row(env, f"{topic}-0")
        assert shown is not None
        if not columns:
            return shown
        truth = described(env, topic)
        wrong = {c: (_cell(shown[c], truth[c]), truth[c]) for c in columns
                 if _cell(shown[c], truth[c]) != (sorted(truth[c]) if isinstance(truth[c], list)
                                                 else truth[c])}
        if not wrong:
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: page vs describe differ: {wrong}")
        time.sleep(0.3)


def run_guided(env: Env, name: str, compare: dict[int, list[str]] | None = None,
               topic_rows: bool = True) -> list[dict[str, Any]]:
    """Start a guided scenario on the page and click "run next step" step by step; after each,
    the page's row of the scenario's topic is checked against `topics describe` for the
    columns named in `compare` (by step). A screenshot per step."""
    b = env.browser
    b.wait_js("document.getElementById('sc-pick').options.length >= 5", 10)
    b.js(f"(() => {{ document.getElementById('sc-pick').value = '{name}'; "
         f"document.getElementById('sc-start').click(); return true; }})()")
    b.wait_js(f"window.minikraftConsole.scenario?.name === '{name}'", 10)
    steps = b.js("window.minikraftConsole.scenario.steps.length")
    results = []
    for index in range(steps):
        b.js("document.getElementById('sc-next').click()")
        state = b.wait_js(
            f"(() => {{ const li = document.querySelector('#scenario li[data-step=\"{index}\"]');"
            f" const s = li && li.dataset.state; return (s === 'ok' || s === 'failed') && s; }})()",
            STEP_TIMEOUT_S, poll_s=0.2)
        detail = b.js(f"window.minikraftConsole.scenario.status[{index}].detail")
        assert state == "ok", f"{name} step {index}: {detail}"
        topic = b.js("window.minikraftConsole.scenario.roles.topic")
        if not topic_rows:  # a scenario on the quorum: no partition of its own
            results.append({"step": index, "row": None})
            shot(env, f"{name}-step{index + 1}")
            continue
        if index == 0:
            filter_topic(env, topic)
            b.js(f"document.querySelector('.prow[data-key=\"{topic}-0\"]').click()")
        b.wait_js(f"!!document.querySelector('.prow[data-key=\"{topic}-0\"]')", 10)
        shown = agree_with_describe(env, topic, (compare or {}).get(index, []),
                                    f"{name} step {index}")
        results.append({"step": index, "row": shown})
        shot(env, f"{name}-step{index + 1}")
    return results


def test_elr_guided_scenario_shows_elr_and_last_known_elr(env: Env) -> None:
    heal(env)  # a scenario starts from a whole cluster, whatever ran before it
    all_columns = ["leader", "isr", "elr", "last_known_elr", "last_known_leader",
                   "leader_recovery_state"]
    results = run_guided(env, "elr", {i: all_columns for i in (2, 3, 4, 5)})
    roles = env.browser.js("window.minikraftConsole.scenario.roles")
    leader, b = roles["leader"], roles["b"]
    # Seed 001 / tests/scenarios/01 and 03: after the leader's kill the ELR holds B (stopped
    # cleanly once ISR fell below min ISR) and the leader; the leader's unclean restart moves it
    # to LastKnownELR; B's clean restart elects it from the ELR.
    killed = results[3]["row"]
    assert int(killed["leader"]) == -1 and ids(killed["isr"]) == []
    assert sorted(ids(killed["elr"])) == sorted([b, leader])
    assert int(killed["last_known_leader"]) == leader
    restarted = results[4]["row"]
    assert ids(restarted["elr"]) == [b] and ids(restarted["last_known_elr"]) == [leader]
    assert int(results[5]["row"]["leader"]) == b


def heal(env: Env) -> None:
    """The page's "heal everything": every stopped node restarted, all three brokers unfenced."""
    env.browser.js("document.getElementById('heal').click()")
    env.browser.wait_js("[...document.querySelectorAll('#brokers tbody tr')].filter(tr => "
                        "tr.querySelector('.state-running') && tr.textContent.includes('unfenced'))"
                        ".length === 3", 60, poll_s=0.2)


def test_broker_epoch_guided_scenario(env: Env) -> None:
    """KIP-903: the restarted follower registers again (a new RegisterBrokerRecord in the page's
    log) and is back in the ISR under that new, higher broker epoch."""
    heal(env)  # a scenario starts from a whole cluster, whatever ran before it
    results = run_guided(env, "broker-epoch", {2: ["isr"]})
    roles = env.browser.js("window.minikraftConsole.scenario.roles")
    a = roles["a"]
    assert a in ids(results[-1]["row"]["isr"])
    # The page's stream is filtered to the scenario's topic; the unfiltered log, as the page's
    # server sends it to a new subscriber:
    registrations = env.browser.js(f"""fetch('/api/state').then(r => r.json()).then(m =>
        m.log.filter(e => e.type === 'RegisterBrokerRecord' && e.data.BrokerId === {a})
        .map(e => e.data.BrokerEpoch >= 0 ? e.data.BrokerEpoch : e.offset))""")
    epoch = env.browser.js(f"window.minikraftConsole.brokers.find(b => b.id === {a}).epoch")
    assert len(registrations) >= 2 and epoch == registrations[-1] > registrations[-2], (
        registrations, epoch)


def test_unclean_election_guided_scenario_goes_recovering_then_recovered(env: Env) -> None:
    """KIP-704: an UNCLEAN election of a replica outside the ISR: RECOVERING in the log, then
    RECOVERED on the page and in `topics describe`."""
    heal(env)  # a scenario starts from a whole cluster, whatever ran before it
    results = run_guided(env, "unclean-election", {5: ["leader", "leader_recovery_state"]})
    roles = env.browser.js("window.minikraftConsole.scenario.roles")
    assert int(results[-1]["row"]["leader"]) == roles["a"]
    assert results[-1]["row"]["leader_recovery_state"] == "RECOVERED"
    heal(env)


def test_controller_disk_guided_scenario_replaces_the_voter_key(env: Env) -> None:
    """KIP-856 / seed 003: the standby's voter key keeps its id with a new directory id; the
    page's voters are what `metadata-quorum describe --status` lists."""
    heal(env)  # a scenario starts from a whole cluster, whatever ran before it
    run_guided(env, "controller-disk", topic_rows=False)
    roles = env.browser.js("window.minikraftConsole.scenario.roles")
    status = minikraft("metadata-quorum", "--bootstrap-controller",
                       env.cluster.bootstrap_controller, "describe", "--status",
                       "--output", "json")
    assert status.returncode == 0, status.stderr
    keys = sorted((v["id"], v["directory_id"]) for v in json.loads(status.stdout)["current_voters"])
    assert len(keys) == 3 and (roles["victim"], roles["old_dir"]) not in keys
    assert [k[0] for k in keys].count(roles["victim"]) == 1
    voters = env.browser.wait_js("document.getElementById('voter-keys').textContent", 10)
    assert all(f"({i}, {d})" in voters for i, d in keys), (voters, keys)
    assert voters.count("(") == 3
    heal(env)


def test_unclean_recovery_guided_scenario_ends_recovered(env: Env) -> None:
    heal(env)  # a scenario starts from a whole cluster, whatever ran before it
    compare = {i: ["leader", "isr", "leader_recovery_state"] for i in (3, 5)}
    results = run_guided(env, "unclean-recovery", compare)
    roles = env.browser.js("window.minikraftConsole.scenario.roles")
    offline = results[3]["row"]
    assert int(offline["leader"]) == -1 and "offline" in offline["cls"]
    final = results[-1]["row"]
    assert int(final["leader"]) == roles["a"] and final["leader_recovery_state"] == "RECOVERED"
    # The page's log shows the election that set RECOVERING, and the one that cleared it.
    states = env.browser.js(f"""window.minikraftConsole.log.filter(e =>
        e.type === 'PartitionChangeRecord' && e.data.TopicName === '{roles["topic"]}'
        && e.data.LeaderRecoveryState !== undefined).map(e => e.data.LeaderRecoveryState)""")
    assert states[:1] == [1] and states[-1] == 0, states
    every = env.browser.js("[...document.querySelectorAll('#scenario li')].map(l => l.dataset.state)")
    assert every == ["ok"] * len(every)
    shot(env, "unclean-recovery-final")


def test_page_stays_responsive_at_10000_partitions_and_says_when_the_cluster_is_down(
    env: Env, tmp_path: Path
) -> None:
    """A console over a cluster directory whose nodes are not running, with a metadata view
    of 10,000 partitions: the page says the cluster is down and how to start it, renders only
    the rows in view, scrolls and filters (server-side) without delay."""
    import threading
    import uuid as uuid_mod

    from cluster.console.runtime.server import ConsoleServer
    from metadata.records import PartitionRecord, TopicRecord, encode_record
    from storage.core.record_batch import Record, decode_batch, encode_batch

    directory = tmp_path / "down"
    directory.mkdir()
    LocalCluster.plan(directory, controllers=1, brokers=3, base_port=0).write_cluster_file()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = ConsoleServer(directory)
    topic_id = uuid_mod.uuid4()
    records = [TopicRecord("many", topic_id)] + [
        PartitionRecord(p, topic_id, replicas=(101, 102, 103), isr=(101, 102, 103),
                        leader=101 + p % 3) for p in range(10_000)]
    batches = [decode_batch(encode_batch(i, 1, 0, [Record(None, encode_record(r))
                                                    for r in records[i:i + 1000]]))[0]
               for i in range(0, len(records), 1000)]
    server.watcher.view.apply(batches)
    port = asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(30)
    b = env.browser
    try:
        b.goto(f"http://127.0.0.1:{port}/")
        started = time.monotonic()
        b.wait_js("document.getElementById('part-count').textContent.startsWith('10000 shown')", 30)
        loaded_s = time.monotonic() - started
        down = b.wait_js("!document.getElementById('down').hidden && "
                         "document.getElementById('down').textContent", 10)
        assert "No node of the cluster" in down and "minikraft up --dir" in down
        in_dom = b.js("document.querySelectorAll('.pspace .prow').length")
        assert 0 < in_dom < 60, in_dom  # virtualized: only the rows in view
        # Scroll to the end and to the middle: each re-render touches only the rows in view
        # (a few ms on an idle machine; the bound leaves room for a loaded 2-core CI host).
        timings = b.js("""(() => {
            const s = document.getElementById('pscroll'), out = [];
            for (const top of [s.scrollHeight, s.scrollHeight / 2, 0, 123456]) {
                s.scrollTop = top;
                const t = performance.now(); renderRows(); out.push(performance.now() - t);
            }
            return out; })()""")
        assert max(timings) < 250, timings
        b.js("document.getElementById('pscroll').scrollTop = 1e9; renderRows(); true")
        assert b.wait_js("!!document.querySelector('.prow[data-key=\"many-9999\"]')", 5)
        b.js("""(() => { document.getElementById('f-topic').value = 'many';
            document.getElementById('f-partition').value = '4242';
            document.querySelector('#filter button').click(); return true; })()""")
        b.wait_js("document.getElementById('part-count').textContent === '1 shown of 10000'", 15)
        # The count is written before the rows are drawn: wait for the one row itself.
        assert b.wait_js("document.querySelector('.pspace .prow')?.dataset.key === 'many-4242'", 5)
        shot(env, "10000-partitions-filtered")
        print(f"10,000 partitions: first full render {loaded_s:.2f}s, re-renders {timings} ms")
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        b.goto(env.url)


# ---- the other actions: pause/resume, the workload, the audit, isolate (netns) ----------------


def _process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat: T once SIGSTOPped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _broker_row(env: Env, broker_id: int) -> str:
    text: str = env.browser.js(
        f"document.querySelector('#brokers tr[data-node=\"broker-{broker_id}\"]')?.textContent"
        " || ''")
    return text


def test_pausing_a_broker_from_the_page_fences_it_and_resuming_unfences_it(env: Env) -> None:
    """pause is SIGSTOP (the process holds its sockets, answers nothing): its heartbeats stop,
    the controller fences it after broker.session.timeout.ms (3 s here); resume is SIGCONT."""
    b = env.browser
    heal(env)  # the guided scenarios before may leave brokers stopped
    broker = env.cluster.brokers[-1]
    pid = LocalCluster.load(env.cluster.dir).node(f"broker-{broker.node_id}").pid
    assert pid is not None
    name = f"broker-{broker.node_id}"
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"{name}\"] "
              f"button[data-act=\"pause\"]')", 20)
    b.js(f"document.querySelector('#brokers tr[data-node=\"{name}\"] "
         f"button[data-act=\"pause\"]').click()")
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"{name}\"] .state-paused')", 10)
    assert _process_state(pid) == "T"
    b.wait_js(f"(() => {{ const t = document.querySelector('#brokers tr[data-node=\"{name}\"]')"
              f"?.textContent || ''; return t.includes('fenced') && !t.includes('unfenced'); }})()",
              30, poll_s=0.2)
    shot(env, "pause-fenced")
    b.js(f"document.querySelector('#brokers tr[data-node=\"{name}\"] "
         f"button[data-act=\"resume\"]').click()")
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"{name}\"] .state-running')", 10)
    assert _process_state(pid) != "T"
    b.wait_js(f"(document.querySelector('#brokers tr[data-node=\"{name}\"]')?.textContent || '')"
              ".includes('unfenced')", 30, poll_s=0.2)
    # Both went to the console's chaos journal, which the audit's report reads.
    events = [json.loads(line) for path in (env.cluster.dir / "chaos").glob("console-*.jsonl")
              for line in path.read_text().splitlines()]
    assert [e["action"] for e in events if e.get("node") == name][-2:] == ["pause", "resume"]


def test_a_workload_started_from_the_page_counts_acked_and_lost_writes(env: Env) -> None:
    """acks=all at 100 records/s; stop reads the topic back: the page shows sent, acked, and
    lost acked writes (0 here: no fault), the same numbers as the console's workload result."""
    b = env.browser
    heal(env)
    b.js("(() => { document.getElementById('w-acks').value = '-1'; "
         "document.getElementById('w-rate').value = '100'; "
         "document.getElementById('w-start').click(); return true; })()")
    acked = b.wait_js("(() => { const a = document.getElementById('w-acked'); "
                      "return a && parseInt(a.textContent, 10) >= 100 && a.textContent; })()",
                      60, poll_s=0.2)
    assert int(acked) >= 100
    b.js("document.getElementById('w-stop').click()")
    lost = b.wait_js("document.getElementById('w-lost')?.textContent", 60, poll_s=0.2)
    workload = b.js("window.minikraftConsole.workload")
    result = workload["result"]
    assert int(lost) == result["lost"] == 0, result
    assert result["acked"] >= 100 and result["sent"] >= result["acked"], result
    assert int(b.js("document.getElementById('w-acked').textContent")) == workload["acked"]
    assert workload["running"] is False and workload["acks"] == -1
    # Every acked write is in the workload's journal, where the audit finds them.
    journal = env.cluster.dir / "journal" / "console-acks.journal"
    assert journal.exists() and journal.stat().st_size > 0
    shot(env, "workload-stopped")


def _pause_and_resume(env: Env, name: str) -> None:
    b = env.browser
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"{name}\"] "
              f"button[data-act=\"pause\"]')", 20)
    b.js(f"document.querySelector('#brokers tr[data-node=\"{name}\"] "
         f"button[data-act=\"pause\"]').click()")
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"{name}\"] .state-paused')", 10)
    b.js(f"document.querySelector('#brokers tr[data-node=\"{name}\"] "
         f"button[data-act=\"resume\"]').click()")
    b.wait_js(f"!!document.querySelector('#brokers tr[data-node=\"{name}\"] .state-running')", 10)


@pytest.mark.slow  # a Spark audit: 100-360 s on this 2-core machine under load
@pytest.mark.timeout(1200)
def test_the_audit_button_runs_minikraft_audit_and_links_its_report(env: Env) -> None:
    """`minikraft audit` over the cluster directory (Spark, local[2]); the page links the report,
    whose faults include what was done from the page (the console's chaos journal)."""
    b = env.browser
    heal(env)
    _pause_and_resume(env, f"broker-{env.cluster.brokers[0].node_id}")
    b.js("document.getElementById('audit').click()")
    href = b.wait_js("document.querySelector('#audits a')?.getAttribute('href')", 1000, poll_s=1.0)
    assert href.startswith("/audit/") and href.endswith("/index.html")
    verdict = b.js("document.getElementById('audits').textContent")
    audit = b.js("window.minikraftConsole.audits.at(-1)")
    assert audit["verdict"] in ("clean", "violations") and audit["verdict"] in verdict, audit
    page = b.js(f"fetch('{href}').then(r => r.status)")
    assert page == 200
    report = b.js(f"fetch('{href.replace('index.html', 'audit.json')}').then(r => r.json())")
    assert report["verdict"] == audit["verdict"]
    actions = {f.get("action") for f in report["faults"]}
    assert {"pause", "resume"} <= actions, actions
    shot(env, "audit-linked")


def _start_console(directory: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_ports(1)[0]
    console = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli.main", "console", "--dir", str(directory),
         "--port", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_console(url, console)
    except BaseException:
        _stop_console(console)  # the caller never gets it to stop
        raise
    return console, url


def _stop_console(console: subprocess.Popen[str]) -> None:
    console.send_signal(signal.SIGINT)
    try:
        console.wait(15)
    except subprocess.TimeoutExpired:
        console.kill()
        console.wait(5)


def test_isolating_a_broker_in_netns_mode_fences_it_and_heal_brings_it_back(
    env: Env, tmp_path: Path
) -> None:
    """A `--network netns` cluster (1 controller, 2 brokers, each node in its own namespace):
    the page's isolate cuts the broker off from every other node with nftables in its
    namespace; its heartbeats stop reaching the controller, which fences it; heal removes the
    rules and it is unfenced again."""
    from cluster.launch.netns import NetnsPlan, network_faults_unavailable_reason

    reason = network_faults_unavailable_reason()
    if reason is not None:
        pytest.skip(f"isolate needs a netns cluster and its fault tools: {reason}")
    directory = tmp_path / "netns"
    started = minikraft(
        "up", "--dir", str(directory), "--network", "netns", "--controllers", "1",
        "--brokers", "2", "--detach", "--base-port", "0", "--timeout-s", "90",
        *[a for k, v in OVERRIDES.items() for a in ("--set", f"{k}={v}")], timeout=150)
    console: subprocess.Popen[str] | None = None
    b = env.browser
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        console, url = _start_console(directory)
        b.goto(url)
        b.wait_js("(document.getElementById('cluster').textContent || '').includes('netns')", 30)
        b.wait_js("[...document.querySelectorAll('#brokers tbody tr')].filter(tr => "
                  "tr.querySelector('.state-running') && tr.textContent.includes('unfenced'))"
                  ".length === 2", 60, poll_s=0.2)
        name = "broker-102"
        b.js(f"document.querySelector('#brokers tr[data-node=\"{name}\"] "
             f"button[data-act=\"isolate\"]').click()")
        done = b.wait_js("(() => { const a = window.minikraftConsole.actions.at(-1); "
                         "return a && a.action === 'isolate' && a.result; })()", 30, poll_s=0.2)
        assert done == {"node": name, "how": "nftables"}, done
        b.wait_js(f"(() => {{ const t = document.querySelector('#brokers tr[data-node=\"{name}\"]')"
                  f"?.textContent || ''; return t.includes('fenced') && !t.includes('unfenced'); }})()",
                  30, poll_s=0.2)
        shot(env, "netns-isolated")
        b.js("document.getElementById('heal').click()")
        b.wait_js(f"(document.querySelector('#brokers tr[data-node=\"{name}\"]')?.textContent"
                  " || '').includes('unfenced')", 60, poll_s=0.2)
        events = [json.loads(line) for path in (directory / "chaos").glob("console-*.jsonl")
                  for line in path.read_text().splitlines()]
        assert [e["action"] for e in events][-2:] == ["net-partition", "net-heal"], events
    finally:
        if console is not None:
            _stop_console(console)
        b.goto(env.url)
        if (directory / "cluster.json").exists():
            stopped = minikraft("down", "--dir", str(directory), "--output", "json", timeout=90)
            final = LocalCluster.load(directory)
            assert json.loads(stopped.stdout)["still_running"] == [], stopped.stderr[-2000:]
            assert NetnsPlan.for_directory(directory, final.netns_subnet).leftovers() == []
