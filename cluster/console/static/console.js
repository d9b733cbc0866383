// minikraft console: plain JavaScript, no dependencies. One EventSource stream per filter; the
// server sends every selected row once ("full"), then only changes ("tick"). The partition
// table is virtualized: only the rows in view are in the DOM, so 10,000 partitions stay fast.
"use strict";

const ROW_H = 22;
const LOG_MAX = 1000;
const CHANGED_MS = 3000;
const FAULT_COLORS = {kill: "#d1242f", terminate: "#d1242f", pause: "#bf8700", resume: "#d4a72c",
  partition: "#8250df", isolate: "#8250df", net: "#8250df", netem: "#a475f9", restart: "#1a7f37",
  heal: "#57606a", election: "#00838f", unclean: "#00838f", wipe: "#cf222e", add: "#0969da",
  remove: "#0969da", workload: "#6e7781"};

const S = {
  rows: [], index: new Map(), changedAt: new Map(), selected: "", log: [], faults: [],
  quorum: {}, brokers: [], scenario: null, scenarios: [], workload: null, actions: [],
  audits: [], timeline: [], total: 0, es: null, renderQueued: false, ticks: 0,
};
window.minikraftConsole = S;  // for the browser tests and the curious

const $ = (id) => document.getElementById(id);
const esc = (v) => String(v === null || v === undefined ? "" : v)
  .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const list = (a) => "[" + (a || []).join(",") + "]";

function filterParams() {
  const p = new URLSearchParams();
  const topic = $("f-topic").value.trim(), part = $("f-partition").value.trim(), only = $("f-only").value;
  if (topic) p.set("topic", topic);
  if (part) p.set("partition", part);
  if (only) p.set("only", only);
  if (S.selected) p.set("select", S.selected);
  return p;
}

function connect() {
  if (S.es) S.es.close();
  const es = new EventSource("/events?" + filterParams().toString());
  S.es = es;
  es.addEventListener("full", (ev) => { setConn(true); onFull(JSON.parse(ev.data)); });
  es.addEventListener("tick", (ev) => { setConn(true); onTick(JSON.parse(ev.data)); });
  es.onerror = () => setConn(false);
}

function setConn(live) {
  const c = $("conn");
  c.textContent = live ? "live" : "reconnecting…";
  c.className = "conn " + (live ? "live" : "lost");
}

function onFull(m) {
  S.rows = m.rows; S.total = m.total;
  S.index = new Map(S.rows.map((r, i) => [r.key, i]));
  S.log = m.log || [];
  S.faults = m.faults || [];
  if (m.scenarios) S.scenarios = m.scenarios;
  S.timeline = (m.timeline && m.timeline[S.selected]) || [];
  applyCommon(m, true);
  renderLog(true);
  renderScenarioPicker();
  queueRender();
}

function onTick(m) {
  S.ticks += 1;
  const now = Date.now();
  let reorder = false;
  for (const key of m.removed || []) {
    if (S.index.has(key)) { S.rows[S.index.get(key)] = null; reorder = true; }
  }
  for (const row of m.changed || []) {
    S.changedAt.set(row.key, now);
    const i = S.index.get(row.key);
    if (i === undefined || S.rows[i] === null) { S.rows.push(row); reorder = true; }
    else S.rows[i] = row;
  }
  if (reorder) {
    S.rows = S.rows.filter((r) => r !== null).sort((a, b) =>
      a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition);
    S.index = new Map(S.rows.map((r, i) => [r.key, i]));
  }
  S.total += 0;
  if (m.log && m.log.length) { S.log.push(...m.log); renderLog(false, m.log); }
  if (m.faults && m.faults.length) S.faults.push(...m.faults);
  if (m.timeline && m.timeline[S.selected]) S.timeline.push(m.timeline[S.selected]);
  applyCommon(m, false);
  queueRender();
}

function applyCommon(m, full) {
  if (m.quorum) S.quorum = m.quorum;
  if (m.brokers) S.brokers = m.brokers;
  if ("scenario" in m) S.scenario = m.scenario;
  if ("workload" in m) S.workload = m.workload;
  if ("actions" in m) S.actions = m.actions;
  if ("audits" in m) S.audits = m.audits;
  if ("poll_ms" in m) $("poll").textContent = "poll " + m.poll_ms + " ms";
  const down = $("down");
  if (m.down) { down.hidden = false; down.textContent = m.down; }
  else if (full || "down" in m) down.hidden = true;
  renderQuorum(); renderBrokers(); renderScenario(); renderWorkload(); renderActions();
}

function queueRender() {
  if (S.renderQueued) return;
  S.renderQueued = true;
  requestAnimationFrame(() => { S.renderQueued = false; renderRows(); renderSelected(); });
}

// -- quorum and brokers -----------------------------------------------------------------------

function nodeButtons(name, role, state) {
  const b = (act, label, cls) => `<button data-act="${act}" data-node="${name}" class="${cls || ""}">${label}</button>`;
  let out = "";
  if (state === "running" || state === "silent") out += b("kill", "kill -9", "danger") + b("stop", "stop") + b("pause", "pause") + b("isolate", "isolate");
  if (state === "paused") out += b("resume", "resume");
  if (state === "stopped") out += b("restart", "restart");
  if (role === "controller") out += b("replace-controller", "replace disk", "danger");
  return out;
}

function renderQuorum() {
  const q = S.quorum || {};
  const nodes = q.nodes || {};
  $("cluster").textContent = q.cluster_id ? `cluster ${q.cluster_id} · ${q.network}` : "";
  $("quorum-summary").textContent = q.leader_id !== undefined && q.leader_id !== null
    ? `active controller ${q.leader_id}, epoch ${q.leader_epoch}, HWM ${q.high_watermark}` : "no active controller";
  $("controllers").tBodies[0].innerHTML = (q.controllers || []).map((c) => {
    const name = "controller-" + c.id, st = nodes[name] || (c.up ? "running" : "stopped");
    const lead = c.id === q.leader_id ? ' <span class="leader-badge">active</span>' : "";
    return `<tr data-node="${name}"><td>${c.id}${lead}</td><td class="state-${st}">${st}</td><td>${esc(c.role)}</td>` +
      `<td>${esc(c.epoch)}</td><td>${esc(c.log_end_offset)}</td><td>${esc(c.high_watermark)}</td>` +
      `<td class="mono">${esc(c.directory_id)}</td><td class="acts">${nodeButtons(name, "controller", st)}</td></tr>`;
  }).join("");
  const feats = Object.entries(q.features || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  $("voters").innerHTML =
    `<div>voters: <code id="voter-keys">${(q.voters || []).map((v) => `(${v.id}, ${v.directory_id})`).join(" ")}</code></div>` +
    `<div>observers: <code>${(q.observers || []).map((v) => `(${v.id}, ${v.directory_id})`).join(" ") || "none"}</code></div>` +
    `<div>kraft.version <code>${esc(q.kraft_version)}</code> · finalized features <code>${esc(feats || "none")}</code> · metadata offset <code>${esc(q.metadata_offset)}</code></div>`;
}

function renderBrokers() {
  const nodes = (S.quorum || {}).nodes || {};
  $("brokers").tBodies[0].innerHTML = (S.brokers || []).map((b) => {
    const name = "broker-" + b.id, st = nodes[name] || (b.up ? "running" : "stopped");
    const clean = b.up ? (b.started_after_clean_shutdown === null || b.started_after_clean_shutdown === undefined
      ? "" : (b.started_after_clean_shutdown ? "last start clean" : "last start unclean"))
      : (b.clean_shutdown_file ? "file present" : "no file");
    return `<tr data-node="${name}"><td>${b.id}</td><td class="state-${st}">${st}</td><td>${esc(b.epoch)}</td>` +
      `<td>${b.fenced ? "fenced" : (b.fenced === false ? "unfenced" : "")}</td><td>${b.in_controlled_shutdown ? "yes" : ""}</td>` +
      `<td>${clean}</td><td>${b.partitions}</td><td class="acts">${nodeButtons(name, "broker", st)}</td></tr>`;
  }).join("");
}

// -- partitions (virtualized) -----------------------------------------------------------------

function rowHtml(r, top, now) {
  const cls = ["prow"];
  if (r.leader < 0) cls.push("offline");
  else if (r.leader_recovery_state === "RECOVERING") cls.push("recovering");
  else if (r.isr.length < r.min_isr) cls.push("undermin");
  if (now - (S.changedAt.get(r.key) || 0) < CHANGED_MS) cls.push("changed");
  if (r.key === S.selected) cls.push("selected");
  const offs = r.offsets.map((o) => `${o[0]}:${o[1] === null ? "–" : o[1]}/${o[2] === null ? "–" : o[2]}`).join(" ");
  return `<div class="${cls.join(" ")}" data-key="${esc(r.key)}" style="top:${top}px">` +
    `<span data-col="key">${esc(r.key)}</span><span data-col="leader">${r.leader}</span>` +
    `<span data-col="leader_epoch">${r.leader_epoch}</span><span data-col="partition_epoch">${r.partition_epoch}</span>` +
    `<span data-col="isr">${list(r.isr)}</span><span data-col="elr">${list(r.elr)}</span>` +
    `<span data-col="last_known_elr">${list(r.last_known_elr)}</span><span data-col="last_known_leader">${r.last_known_leader}</span>` +
    `<span data-col="leader_recovery_state">${r.leader_recovery_state}</span><span data-col="hwm">${r.hwm === null ? "–" : r.hwm}</span>` +
    `<span data-col="offsets">${offs}</span></div>`;
}

function renderRows() {
  const scroll = $("pscroll"), space = $("pspace");
  space.style.height = S.rows.length * ROW_H + "px";
  scroll.style.height = Math.min(330, Math.max(2 * ROW_H, S.rows.length * ROW_H + 4)) + "px";
  const first = Math.max(0, Math.floor(scroll.scrollTop / ROW_H) - 4);
  const last = Math.min(S.rows.length, first + Math.ceil(scroll.clientHeight / ROW_H) + 8);
  const now = Date.now();
  let html = "";
  for (let i = first; i < last; i++) html += rowHtml(S.rows[i], i * ROW_H, now);
  space.innerHTML = html;
  $("part-count").textContent = `${S.rows.length} shown of ${S.total}`;
}

// -- selected partition: actions and timeline --------------------------------------------------

function select(key) {
  if (key === S.selected) return;
  S.selected = key;
  S.timeline = [];
  $("sel-name").textContent = key;
  const row = S.rows[S.index.get(key)];
  $("designated").innerHTML = (row ? row.replicas : []).map((b) => `<option value="${b}">broker ${b}</option>`).join("");
  connect();  // the stream carries the selected partition's timeline
}

function renderSelected() {
  const svg = $("timeline");
  const pts = S.timeline;
  if (!S.selected || !pts.length) { svg.innerHTML = `<text x="10" y="20" fill="#6e7781">select a partition to see its timeline</text>`; return; }
  const W = 900, H = 190, L = 40, R = 10;
  const t1 = Math.max(Date.now(), pts[pts.length - 1][0]);
  const t0 = Math.min(pts[0][0], t1 - 60000);
  const x = (t) => L + (W - L - R) * (t - t0) / Math.max(1, t1 - t0);
  const row = S.rows[S.index.get(S.selected)];
  const replicas = row ? row.replicas : [...new Set(pts.map((p) => p[1]).filter((v) => v >= 0))];
  const lane = (id) => id < 0 ? 60 : 14 + 40 * (replicas.indexOf(id) + 0.5) / Math.max(1, replicas.length);
  const maxSize = Math.max(3, ...pts.map((p) => Math.max(p[2], p[3])));
  const yS = (v) => 130 - 55 * v / maxSize;
  const hw = pts.map((p) => p[4]).filter((v) => v !== null);
  const hmax = Math.max(1, ...hw), hmin = Math.min(hmax - 1, ...hw);
  const yH = (v) => 180 - 35 * (v - hmin) / Math.max(1, hmax - hmin);
  const step = (f) => { let d = ""; pts.forEach((p, i) => { const xx = x(p[0]), yy = f(p); d += i ? `H${xx.toFixed(1)}V${yy.toFixed(1)}` : `M${xx.toFixed(1)},${yy.toFixed(1)}`; }); return d + `H${x(t1).toFixed(1)}`; };
  let out = `<text x="2" y="30" font-size="10" fill="#57606a">leader</text><text x="2" y="105" font-size="10" fill="#57606a">ISR/ELR</text><text x="2" y="170" font-size="10" fill="#57606a">HWM</text>`;
  replicas.forEach((id) => { out += `<text x="${W - R - 2}" y="${lane(id) + 3}" font-size="9" text-anchor="end" fill="#8c959f">${id}</text>`; });
  out += `<path d="${step((p) => lane(p[1]))}" stroke="#0969da" stroke-width="2.5" fill="none" class="tl-leader"/>`;
  out += `<path d="${step((p) => yS(p[2]))}" stroke="#1a7f37" stroke-width="2" fill="none" class="tl-isr"/>`;
  out += `<path d="${step((p) => yS(p[3]))}" stroke="#bf8700" stroke-width="2" fill="none" stroke-dasharray="4 2" class="tl-elr"/>`;
  const hp = pts.filter((p) => p[4] !== null);
  if (hp.length) out += `<path d="${hp.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + "," + yH(p[4]).toFixed(1)).join("")}H${x(t1).toFixed(1)}" stroke="#8c959f" stroke-width="1.5" fill="none" class="tl-hwm"/>`;
  pts.forEach((p) => { if (p[1] < 0) out += `<rect x="${x(p[0]).toFixed(1)}" y="8" width="3" height="52" fill="#cf222e" opacity=".5"/>`; });
  for (const f of S.faults) {
    if (f.ts_ms < t0) continue;
    const kind = String(f.action).split("-")[0];
    const color = FAULT_COLORS[kind] || "#57606a";
    out += `<line class="fault fault-${esc(kind)}" x1="${x(f.ts_ms).toFixed(1)}" x2="${x(f.ts_ms).toFixed(1)}" y1="4" y2="186" stroke="${color}" stroke-width="1.5" stroke-dasharray="3 2"><title>${esc(f.action)} ${esc(f.node || "")}</title></line>`;
  }
  svg.innerHTML = out;
}

// -- metadata log -----------------------------------------------------------------------------

function entryText(e) {
  const d = Object.assign({}, e.data);
  delete d.TopicId;
  let where = "";
  if (d.TopicName !== undefined && d.PartitionId !== undefined) { where = `${d.TopicName}-${d.PartitionId} `; delete d.TopicName; delete d.PartitionId; }
  const fields = Object.entries(d).map(([k, v]) => `${k}=${Array.isArray(v) ? list(v.map((x) => typeof x === "object" ? JSON.stringify(x) : x)) : (typeof v === "object" && v !== null ? JSON.stringify(v) : v)}`).join(" ");
  return `<span class="off">${e.offset}</span> <span class="typ">${esc(e.type)}</span> ${esc(where)}${esc(fields)}`;
}

function renderLog(full, added) {
  const box = $("log");
  if (full) {
    box.innerHTML = S.log.slice(-LOG_MAX).map((e) => `<div class="entry ${esc(e.type)}" data-offset="${e.offset}">${entryText(e)}</div>`).join("");
  } else {
    const frag = document.createDocumentFragment();
    for (const e of added) {
      const div = document.createElement("div");
      div.className = "entry new " + e.type;
      div.dataset.offset = e.offset;
      div.innerHTML = entryText(e);
      frag.appendChild(div);
    }
    box.appendChild(frag);
    while (box.childElementCount > LOG_MAX) box.removeChild(box.firstChild);
    if (S.log.length > 4 * LOG_MAX) S.log = S.log.slice(-LOG_MAX);
  }
  $("log-count").textContent = S.log.length ? `last offset ${S.log[S.log.length - 1].offset}` : "";
  if ($("log-follow").checked) box.scrollTop = box.scrollHeight;
}

// -- scenarios, workload, actions -------------------------------------------------------------

function renderScenarioPicker() {
  const pick = $("sc-pick");
  if (pick.options.length === S.scenarios.length) return;
  pick.innerHTML = S.scenarios.map((s) => `<option value="${s.name}">seed ${s.seed} · ${esc(s.title)}</option>`).join("");
}

function renderScenario() {
  const sc = S.scenario, box = $("scenario");
  if (!sc) { box.innerHTML = `<div class="small">Pick a scenario and start it: each step sets a situation up and says what to look at; the console checks it holds.</div>`; return; }
  const roles = Object.entries(sc.roles || {}).map(([k, v]) => `${k}=${v}`).join(" ");
  box.innerHTML = `<div id="sc-title"><b>${esc(sc.title)}</b> <span class="small">${esc(roles)}</span></div><div class="small">${esc(sc.intro)}</div>` +
    `<ol class="steps">` + sc.steps.map((st, i) => {
      const s = sc.status[i] || {state: "pending", detail: ""};
      return `<li data-step="${i}" data-state="${s.state}"><span class="st st-${s.state}">${s.state}</span> ${esc(st.title)}<div class="look">look at: ${esc(st.look_at)}</div>` +
        (s.detail && s.state !== "ok" ? `<div class="detail">${esc(s.detail)}</div>` : "") + `</li>`;
    }).join("") + `</ol>`;
}

function renderWorkload() {
  const w = S.workload, box = $("workload");
  if (!w) { box.innerHTML = `<div class="small">no workload started</div>`; return; }
  const r = w.result;
  box.innerHTML = `<div>topic <code>${esc(w.topic)}</code> acks=${w.acks} ${w.records_per_s}/s · ${w.running ? "running" : "stopped"}</div>` +
    `<div>sent <b id="w-sent">${w.sent}</b> · acked <b id="w-acked">${w.acked}</b> · errors <code>${esc(JSON.stringify(w.errors))}</code></div>` +
    (r ? `<div>read back: lost <b id="w-lost">${r.lost}</b>, duplicated ${r.duplicated}${r.recovering_elections.length ? ` · RECOVERING elections on the topic: ${r.recovering_elections.length} (loss allowed, rule 23)` : ""}</div>` : "");
}

function renderActions() {
  const a = S.audits || [];
  $("audits").innerHTML = a.map((x) => `<div>audit #${x.number}: ${esc(x.verdict || "exit " + x.exit)} ${x.report ? `<a href="${x.report}" target="_blank">report</a>` : ""}</div>`).join("");
  $("actions-log").innerHTML = (S.actions || []).slice().reverse().map((x) =>
    `<div class="entry">${new Date(x.ts_ms).toLocaleTimeString()} <b>${esc(x.action)}</b> ${esc(JSON.stringify(x.result)).slice(0, 300)}</div>`).join("");
}

function note(text, error) {
  const box = $("actions-log");
  const div = document.createElement("div");
  div.className = "entry";
  div.innerHTML = `${new Date().toLocaleTimeString()} ${error ? '<span class="err">' + esc(text) + "</span>" : esc(text)}`;
  box.prepend(div);
}

async function post(url, body) {
  note("→ " + JSON.stringify(body));
  try {
    const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    const data = await r.json();
    if (!r.ok) note(data.error || r.statusText, true);
    return data;
  } catch (e) { note(String(e), true); return null; }
}

const action = (body) => post("/api/action", body);

document.addEventListener("click", (ev) => {
  const t = ev.target;
  if (!(t instanceof HTMLElement)) return;
  if (t.dataset.act) {
    if (t.dataset.act === "replace-controller" && !confirm(`Wipe ${t.dataset.node}'s disk and replace it (seed 003)?`)) return;
    action({action: t.dataset.act, node: t.dataset.node});
  } else if (t.dataset.elect && S.selected) {
    const row = S.rows[S.index.get(S.selected)];
    if (!row) return;
    const body = {action: "elect", type: t.dataset.elect, topic: row.topic, partition: row.partition};
    if (t.dataset.elect === "DESIGNATED") body.leader = parseInt($("designated").value, 10);
    action(body);
  } else {
    const row = t.closest(".pspace .prow");
    if (row) { select(row.dataset.key); queueRender(); }
  }
});

$("pscroll").addEventListener("scroll", queueRender);
$("filter").addEventListener("submit", (ev) => { ev.preventDefault(); connect(); });
$("recover").addEventListener("click", () => action({action: "unclean-recovery", duration_ms: 4000}));
$("audit").addEventListener("click", () => action({action: "audit"}));
$("heal").addEventListener("click", () => action({action: "heal"}));
$("w-start").addEventListener("click", () => action({action: "workload-start", acks: parseInt($("w-acks").value, 10), records_per_s: parseFloat($("w-rate").value)}));
$("w-stop").addEventListener("click", () => action({action: "workload-stop"}));
$("sc-start").addEventListener("click", () => post("/api/scenario", {start: $("sc-pick").value}));
$("sc-all").addEventListener("click", () => post("/api/scenario", {all: true}));
$("sc-next").addEventListener("click", () => {
  const sc = S.scenario;
  if (!sc) return;
  const i = sc.status.findIndex((s) => s.state !== "ok");
  if (i >= 0) post("/api/scenario", {step: i});
});
setInterval(queueRender, 1000);  // ages the "changed" highlight and the timeline's right edge; no request
connect();
