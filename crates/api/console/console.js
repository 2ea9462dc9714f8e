// trawl console (docs/specs/api.md, "The console"): the operator's workflow in one page, plain
// JavaScript, no build step. A per-second chart of the interface with the alarms drawn on it;
// an alarm or a dragged range picks a window; the flows of the window come from /api/v1/query;
// a row gives the packets of that window and conversation from /api/v1/packets. On a
// coordinator (`trawl serve --probes`) a probe selector picks the fleet (summed series) or one
// probe, and a query streams (/api/v1/query/stream): each probe's status and the running
// top-N as the probes answer, fastest first.
// Elements the browser test uses have stable ids and data attributes.
"use strict";

const NS = 1e9;
/// How long after its 5-minute block ends the flow database has stored it (flow_store's grace).
const BLOCK_S = 300;
const GRACE_S = 40;
const TOKEN_KEY = "trawl.token";

const S = {
  token: sessionStorage.getItem(TOKEN_KEY),
  iface: null,
  range: 900,
  rows: new Map(), // second -> series row, of the shown interface
  newest: 0, // newest second the server has a row for
  serverNow: 0, // the server's clock (its answers' Date), not the browser's
  mode: "run", // a monitor (`trawl run`) or stored data (`trawl serve`)
  alarms: new Map(), // incident key -> incident
  alarmsFrom: 0, // ns: alarms are read from here on
  chart: null,
  selected: null, // incident key
  window: null, // {from, to} as the query fields say them
  victim: null,
  timer: null,
  probes: null, // a coordinator's probe names (null: a probe's own API)
  probe: "", // the probe shown ("": the whole fleet)
};

const $ = (id) => document.getElementById(id);

// ---- the API ----

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/// A GET of the API with the token, when there is one. A 401 asks for the token.
async function api(path) {
  const headers = S.token ? { Authorization: "Bearer " + S.token } : {};
  const r = await fetch(path, { headers, cache: "no-store" });
  const date = Date.parse(r.headers.get("Date"));
  if (date) S.serverNow = date / 1000;
  if (r.status === 401) {
    askToken(S.token ? "the token was refused" : "");
    throw new ApiError("a token is required", 401);
  }
  if (!r.ok) {
    let message = r.status + " " + r.statusText;
    try {
      const body = await r.json();
      if (body.error) message = body.error;
    } catch (_) {
      // not JSON: the status line says it
    }
    throw new ApiError(message, r.status);
  }
  return r;
}

const getJSON = async (path) => (await api(path)).json();

function askToken(error) {
  clearTimeout(S.timer);
  $("main").hidden = true;
  $("token-form").hidden = false;
  $("token-error").textContent = error;
  setStatus("token required", "auth");
  $("token-input").focus();
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  S.token = $("token-input").value.trim();
  sessionStorage.setItem(TOKEN_KEY, S.token);
  $("token-form").hidden = true;
  boot();
});

// ---- formatting ----

function si(v) {
  if (v == null) return "";
  const a = Math.abs(v);
  for (const [d, u] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= d) return (v / d).toFixed(a >= 10 * d ? 0 : 1) + u;
  }
  return String(Math.round(v * 10) / 10);
}

/// RFC 3339 in UTC with milliseconds: what the API's `from`/`to` read back exactly.
const iso = (ns) => new Date(Math.floor(ns / 1e6)).toISOString();
const clock = (ns) => iso(ns).slice(11, 19);

function setStatus(text, state) {
  $("status").textContent = text;
  $("status").dataset.state = state;
}

// ---- status ----

async function refreshStatus() {
  const st = await getJSON("/api/v1/status");
  const c = st.capture;
  const live = st.mode === "run" ? ` · ${si(c.packets)} packets · ${c.kernel_drops} drops` : "";
  const fleet = st.probes ? ` · coordinator of ${st.probes.length} probes` : "";
  setStatus(`${st.mode}${fleet}${live} · up ${Math.round(st.uptime_s)} s`, "ok");
  $("status").dataset.mode = st.mode;
  S.mode = st.mode;
  if (st.probes && !S.probes) showProbes(st.probes);
  return st;
}

// ---- the probes of a coordinator ----

/// The probe selector: the whole fleet (series summed by second) or one probe.
function showProbes(names) {
  S.probes = names;
  const sel = $("probe");
  sel.replaceChildren(new Option("all probes", ""), ...names.map((n) => new Option(n, n)));
  sel.value = S.probe;
  $("probe-label").hidden = false;
}

/// `q` (URLSearchParams) for the chosen probe's series.
function withProbe(q) {
  if (S.probe) q.set("probe", S.probe);
  return q;
}

$("probe").addEventListener("change", async () => {
  S.probe = $("probe").value;
  S.iface = null;
  await discover().catch(report);
  loadSeries().catch(report);
});

// ---- series and chart ----

function step() {
  return S.range <= 3600 ? "1s" : S.range <= 2 * 86400 ? "1m" : "1h";
}

const stepSeconds = () => ({ "1s": 1, "1m": 60, "1h": 3600 })[step()];

/// Interfaces with rows, and the newest second, from the rollups (a served database may be
/// old) and the last minutes (a run's live rows are not rolled up yet).
async function discover() {
  const recent = await getJSON("/api/v1/series?" + withProbe(new URLSearchParams({ from: "-" + S.range + "s", step: step() })));
  let rows = recent.rows;
  if (rows.length === 0) rows = (await getJSON("/api/v1/series?" + withProbe(new URLSearchParams({ step: "1h" })))).rows;
  const names = [...new Set(rows.map((r) => r.iface))].sort();
  const sel = $("iface");
  sel.replaceChildren(...names.map((n) => new Option(n, n)));
  S.iface = names.includes(S.iface) ? S.iface : names[0] || null;
  if (S.iface) sel.value = S.iface;
  S.newest = rows.reduce((m, r) => Math.max(m, r.second), 0);
}

async function loadSeries() {
  S.rows.clear();
  if (!S.iface) return draw();
  const end = rightEdge();
  const q = new URLSearchParams({ iface: S.iface, from: end - S.range, to: end, step: step() });
  const body = await getJSON("/api/v1/series?" + withProbe(q));
  for (const r of body.rows) S.rows.set(r.second, r);
  S.alarmsFrom = (end - S.range) * NS;
  S.alarms.clear();
  await loadAlarms();
  draw();
}

/// The live part: the seconds since the newest shown, merged in, the oldest dropped.
async function pollSeries() {
  if (!S.iface || step() !== "1s") return;
  const q = new URLSearchParams({ iface: S.iface, from: Math.max(S.newest - 2, 0) });
  const body = await getJSON("/api/v1/series?" + withProbe(q));
  for (const r of body.rows) {
    S.rows.set(r.second, r);
    S.newest = Math.max(S.newest, r.second);
  }
  for (const s of S.rows.keys()) if (s <= S.newest - S.range) S.rows.delete(s);
  draw();
}

function chartData() {
  const xs = [...S.rows.keys()].sort((a, b) => a - b);
  const per = stepSeconds();
  const col = (f) => xs.map((s) => S.rows.get(s)[f] / per);
  const flows = xs.map((s) => S.rows.get(s).active_flows);
  return [xs, col("packets"), col("bytes"), flows, col("new_flows")];
}

function makeChart() {
  const el = $("chart");
  const opts = {
    width: Math.max(el.clientWidth, 300),
    height: 300,
    cursor: { drag: { x: true, y: false, setScale: false } },
    // The whole range up to the newest second, however few rows it has.
    scales: { x: { time: true, range: () => [rightEdge() - S.range, rightEdge()] }, n: {}, b: {}, f: {} },
    series: [
      {},
      { label: "packets/s", scale: "n", stroke: "#1f6feb", width: 1.5, value: (u, v) => si(v) },
      { label: "bytes/s", scale: "b", stroke: "#8250df", width: 1, value: (u, v) => si(v) },
      { label: "active flows", scale: "f", stroke: "#1a7f37", width: 1, value: (u, v) => si(v) },
      { label: "new flows/s", scale: "f", stroke: "#9a6700", width: 1, dash: [4, 3], value: (u, v) => si(v) },
    ],
    axes: [
      {},
      { scale: "n", label: "packets/s", values: (u, vs) => vs.map(si) },
      { scale: "b", side: 1, label: "bytes/s", values: (u, vs) => vs.map(si), grid: { show: false } },
      { scale: "f", side: 1, label: "flows", values: (u, vs) => vs.map(si), grid: { show: false } },
    ],
    hooks: {
      draw: [drawAlarms],
      setSelect: [brushed],
    },
  };
  S.chart = new uPlot(opts, chartData(), el);
  window.addEventListener("resize", () => S.chart.setSize({ width: Math.max(el.clientWidth, 300), height: 300 }));
}

function draw() {
  const data = chartData();
  $("chart").dataset.rows = data[0].length;
  $("chart-message").textContent = data[0].length
    ? ""
    : "No per-second rows for this interface in this range.";
  if (!S.chart) makeChart();
  else S.chart.setData(data);
  renderAlarmList();
}

/// A dragged range of the chart is a window, as an alarm's is.
function brushed(u) {
  if (u.select.width < 3) return;
  const from = u.posToVal(u.select.left, "x");
  const to = u.posToVal(u.select.left + u.select.width, "x");
  u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
  selectWindow(Math.floor(from) * NS, Math.ceil(to) * NS, null);
}

// ---- alarms ----

/// Stored alarms are events: a start and, later, an end of the same incident (same detector,
/// cause and start). Heavy-hitter reports are reports, not alarms: not drawn.
function incidentOf(a) {
  const e = a.event || {};
  const cause = e.victim || (e.metric ? e.metric + " " + e.term + "-term" : "");
  return { key: `${a.detector}|${a.iface || ""}|${cause}|${a.start_ns}`, cause };
}

async function loadAlarms() {
  // A coordinator holds no alarms (they stay on the probes).
  if (S.probes) return;
  const q = new URLSearchParams({ from: S.alarmsFrom });
  if (S.iface && S.iface !== "all") q.set("iface", S.iface);
  const body = await getJSON("/api/v1/alarms?" + q);
  for (const a of body.alarms) {
    S.alarmsFrom = Math.max(S.alarmsFrom, a.ts_ns + 1);
    if (a.detector === "heavy_hitters") continue;
    const { key, cause } = incidentOf(a);
    const inc = S.alarms.get(key) || { key, detector: a.detector, cause, iface: a.iface, start_ns: a.start_ns };
    if (a.end_ns != null) inc.end_ns = a.end_ns;
    inc.rate = Math.max(inc.rate || 0, a.rate || 0);
    inc.victim = (a.event && a.event.victim) || inc.victim;
    // A flood's end names its top sources.
    inc.sources = (a.event && a.event.top_sources) || inc.sources;
    inc.metric = (a.event && a.event.metric) || inc.metric;
    S.alarms.set(key, inc);
  }
}

/// Room a flag takes on the chart (px).
const FLAG_W = 40;

/// The chart's right edge: now on a monitor, the newest stored second otherwise.
const rightEdge = () => (S.mode === "run" ? Math.max(S.newest + 1, Math.floor(S.serverNow)) : S.newest + stepSeconds());

/// The end of an incident still under way: the chart's right edge.
const endOf = (inc) => inc.end_ns ?? rightEdge() * NS;

/// The alarms on the chart: a band over each incident's time with a flag to click. Elements
/// are kept per incident and moved as the chart scrolls, so a flag stays the same element.
function drawAlarms(u) {
  let layer = u.over.querySelector(".alarms");
  if (!layer) {
    layer = document.createElement("div");
    layer.className = "alarms";
    u.over.appendChild(layer);
  }
  const [min, max] = [u.scales.x.min, u.scales.x.max];
  const shown = new Set();
  // Flags that would overlap go one row lower: each row's right-most flag edge so far.
  const rows = [];
  const incs = [...S.alarms.values()].sort((a, b) => a.start_ns - b.start_ns);
  for (const inc of incs) {
    if (endOf(inc) / NS < min || inc.start_ns / NS > max) continue;
    shown.add(inc.key);
    let band = [...layer.children].find((b) => b.dataset.alarm === inc.key);
    if (!band) {
      band = document.createElement("div");
      band.dataset.alarm = inc.key;
      const flag = document.createElement("div");
      flag.className = "flag";
      flag.textContent = inc.detector === "synflood" ? "SYN" : "Δ";
      // Not the start of a drag on the chart: a click on the flag.
      flag.addEventListener("mousedown", (e) => e.stopPropagation());
      flag.addEventListener("click", () => selectAlarm(inc.key));
      band.appendChild(flag);
      layer.appendChild(band);
    }
    const left = u.valToPos(Math.max(inc.start_ns / NS, min), "x");
    const right = u.valToPos(Math.min(endOf(inc) / NS, max), "x");
    band.className = "alarm" + (inc.key === S.selected ? " selected" : "");
    // A flag near the right edge hangs to the left of its band's end, inside the chart.
    const end = left + FLAG_W > u.over.clientWidth;
    band.firstChild.classList.toggle("end", end);
    const x = end ? right - FLAG_W : left;
    let row = rows.findIndex((edge) => edge <= x);
    if (row < 0) row = rows.push(0) - 1;
    rows[row] = x + FLAG_W;
    band.firstChild.style.top = row * 18 + "px";
    band.style.left = left + "px";
    band.style.width = Math.max(right - left, 2) + "px";
    band.firstChild.title = describe(inc);
    tag(band.firstChild, inc);
  }
  for (const b of [...layer.children]) if (!shown.has(b.dataset.alarm)) b.remove();
}

/// The stable attributes of an alarm's elements (the flag on the chart, the list item).
function tag(el, inc) {
  el.dataset.alarm = inc.key;
  el.dataset.detector = inc.detector;
  if (inc.victim) el.dataset.victim = inc.victim;
  if (inc.sources) el.dataset.sources = inc.sources.map((s) => s.ip).join(" ");
  el.dataset.startNs = inc.start_ns;
  if (inc.end_ns != null) el.dataset.endNs = inc.end_ns;
}

function describe(inc) {
  const end = inc.end_ns != null ? clock(inc.end_ns) : "now";
  const what = inc.detector === "synflood" ? "SYN flood on " + inc.victim : inc.detector + " " + inc.cause;
  const from = inc.sources && inc.sources.length ? ", from " + inc.sources.map((s) => `${s.ip} (${si(s.syns)})`).join(", ") : "";
  return `${what}, ${clock(inc.start_ns)}–${end} UTC, ${si(inc.rate)}/s${from}`;
}

/// The alarms as a list, newest first; an item stays the same element while its alarm lasts.
function renderAlarmList() {
  const list = $("alarms");
  const incs = [...S.alarms.values()].sort((a, b) => b.start_ns - a.start_ns);
  list.dataset.count = incs.length;
  const items = incs.map((inc) => {
    let li = [...list.children].find((x) => x.dataset.alarm === inc.key);
    if (!li) {
      li = document.createElement("li");
      li.addEventListener("click", () => selectAlarm(inc.key));
    }
    li.textContent = describe(inc);
    li.className = inc.key === S.selected ? "selected" : "";
    tag(li, inc);
    return li;
  });
  items.forEach((li, i) => {
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
  });
  while (list.children.length > items.length) list.lastChild.remove();
}

/// An alarm's window, with the query that names its cause: a SYN flood's victim among the top
/// destinations by packets; a rate change's top conversations by its metric.
function selectAlarm(key) {
  const inc = S.alarms.get(key);
  if (!inc) return;
  S.selected = key;
  const sort = { packets: "packets", bytes: "bytes", new_flows: "flows" }[inc.metric] || "packets";
  const attrs = inc.detector === "synflood" ? "dip" : "sip,dip,dport,proto";
  $("q-attrs").value = attrs;
  $("q-sort").value = sort;
  selectWindow(inc.start_ns, endOf(inc), inc.victim || null);
  S.chart && S.chart.redraw(false, false);
  renderAlarmList();
}

// ---- the flows of a window ----

function selectWindow(fromNs, toNs, victim) {
  S.victim = victim;
  $("q-from").value = iso(fromNs);
  $("q-to").value = iso(toNs);
  $("query-panel").hidden = false;
  runQuery();
}

for (const b of document.querySelectorAll(".presets button")) {
  b.addEventListener("click", () => {
    $("q-attrs").value = b.dataset.attrs;
    runQuery();
  });
}

$("query-form").addEventListener("submit", (e) => {
  e.preventDefault();
  runQuery();
});

const ATTR_ORDER = ["time", "probe", "iface", "vlan", "src_ip", "dst_ip", "src_port", "dst_port", "proto"];

async function runQuery() {
  const w = { from: $("q-from").value.trim(), to: $("q-to").value.trim() };
  S.window = w;
  $("window").textContent = `${w.from} – ${w.to}`;
  $("packets").hidden = true;
  const q = new URLSearchParams({
    attrs: $("q-attrs").value.trim(),
    from: w.from,
    to: w.to,
    sort: $("q-sort").value,
    limit: $("q-limit").value || "10",
  });
  const cond = $("q-condition").value.trim();
  // One probe of a fleet: a condition on the `probe` field (the coordinator asks it alone).
  const probeCond = S.probe ? `probe = ${S.probe}` : "";
  const both = probeCond && cond ? `${probeCond} and (${cond})` : probeCond || cond;
  if (both) q.set("condition", both);
  if (S.iface && S.iface !== "all") q.set("iface", S.iface);
  const msg = $("q-message");
  msg.dataset.state = "running";
  msg.textContent = "querying…";
  let body;
  try {
    body = S.probes ? await streamQuery(q, msg) : await getJSON("/api/v1/query?" + q);
  } catch (e) {
    msg.dataset.state = "error";
    msg.textContent = e.message;
    renderRows([]);
    return;
  }
  renderRows(body.rows);
  if (body.rows.length) {
    msg.dataset.state = body.incomplete ? "incomplete" : "done";
    msg.textContent = `${body.totals.groups} groups, ${si(body.stats.rows_scanned)} flow rows scanned ` +
      `in ${body.stats.duration_ms.toFixed(1)} ms (whole 5-minute blocks around the window)` +
      (body.incomplete ? `; INCOMPLETE: no data from ${missing(body.probes).join(", ")}` : "");
  } else {
    pendingOrEmpty(msg);
  }
}

const missing = (probes) => probes.filter((p) => !["ok", "skipped"].includes(p.status)).map((p) => p.name);

/// A fleet query as it streams (Server-Sent Events read from fetch: EventSource cannot send
/// the token): each probe's status as it answers, and the running merged top-N. The `result`
/// event, the answer of /api/v1/query, is returned.
async function streamQuery(q, msg) {
  const r = await api("/api/v1/query/stream?" + q);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new ApiError("the stream ended without a result", 502);
    buf += value;
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const ev = /^event: ?(.*)$/m.exec(block);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (!ev || !data) continue; // a keep-alive comment
      const body = JSON.parse(data);
      if (ev[1] === "error") throw new ApiError(body.error, 500);
      if (ev[1] === "partial" || ev[1] === "result") {
        renderProbes(body.probes);
        if (ev[1] === "result") return body;
        renderRows(body.rows);
        const waiting = body.probes.filter((p) => p.status === "pending").length;
        msg.textContent = `${waiting} probes still to answer…`;
      }
    }
  }
}

/// Each probe's part of a fleet answer: status, groups, time, reason.
function renderProbes(probes) {
  const table = $("q-probes");
  table.hidden = false;
  table.tHead.innerHTML = "<tr><th>probe</th><th>status</th><th class=n>groups</th><th class=n>ms</th><th>reason</th></tr>";
  table.tBodies[0].replaceChildren(
    ...probes.map((p) => {
      const tr = document.createElement("tr");
      tr.dataset.probe = p.name;
      tr.dataset.status = p.status;
      for (const [v, cls] of [[p.name, ""], [p.status, "status"], [p.groups, "n"], [p.time_ms.toFixed(0), "n"], [p.message || "", ""]]) {
        const td = tr.insertCell();
        td.textContent = v;
        td.className = cls;
      }
      return tr;
    }),
  );
}

/// No rows: either there are none, or the window's last 5-minute block is not stored yet (the
/// flow database writes a block when it ends, plus the grace for flows still open, on the
/// monitor's clock: the time of its packets). A live monitor publishes the flows of open
/// blocks every 10 s (recent parts), each once it has ended.
function pendingOrEmpty(msg) {
  const toS = Date.parse(S.window.to) / 1000;
  const stored = Math.ceil(toS / BLOCK_S) * BLOCK_S + GRACE_S;
  if (stored > S.serverNow) {
    msg.dataset.state = "pending";
    msg.textContent = `No flows stored for this window yet. A live probe stores a flow within ` +
      `10 s of its end (an idle flow ends 30 s after its last packet); the window's 5-minute ` +
      `block is complete at ${clock(stored * NS)} UTC. Query again.`;
  } else {
    msg.dataset.state = "empty";
    msg.textContent = "No flows stored for this window (its block is stored once the link " +
      "has carried packets after " + clock(stored * NS) + " UTC).";
  }
}

function renderRows(rows) {
  const table = $("q-table");
  const attrs = rows.length ? ATTR_ORDER.filter((a) => a in rows[0]) : [];
  const head = [...attrs, "packets", "bytes", "flows"];
  const th = head.map((h, i) => `<th class="${i >= attrs.length ? "n" : ""}">${h}</th>`).join("");
  table.tHead.innerHTML = rows.length ? `<tr>${th}</tr>` : "";
  table.dataset.rows = rows.length;
  table.tBodies[0].replaceChildren(
    ...rows.map((r, n) => {
      const tr = document.createElement("tr");
      tr.id = "q-row-" + n;
      for (const a of attrs) {
        const td = tr.insertCell();
        td.textContent = r[a];
        tr.dataset[a] = r[a];
      }
      for (const v of [r.fwd_packets + r.rev_packets, r.fwd_bytes + r.rev_bytes, r.flows]) {
        const td = tr.insertCell();
        td.className = "n";
        td.textContent = si(v);
        td.title = v;
      }
      if (S.victim && (r.dst_ip === S.victim || r.src_ip === S.victim)) tr.classList.add("victim");
      tr.addEventListener("click", () => selectRow(tr, r));
      return tr;
    }),
  );
}

// ---- the packets of a row ----

const PROTO_BPF = { tcp: "tcp", udp: "udp", icmp: "icmp", icmpv6: "icmp6", sctp: "sctp" };

/// The tcpdump filter of a row: both directions of what it names (hosts, ports, protocol).
function bpfOf(r) {
  const terms = [];
  if (r.vlan != null && r.vlan !== "") terms.push("vlan " + r.vlan);
  if (r.proto != null && r.proto !== "") {
    if (PROTO_BPF[r.proto]) terms.push(PROTO_BPF[r.proto]);
    else if (/^\d+$/.test(String(r.proto))) terms.push(`(ip proto ${r.proto} or ip6 proto ${r.proto})`);
  }
  for (const f of ["src_ip", "dst_ip"]) if (r[f]) terms.push("host " + r[f]);
  for (const f of ["src_port", "dst_port"]) if (r[f] != null && r[f] !== "") terms.push("port " + r[f]);
  return terms.join(" and ");
}

function selectRow(tr, r) {
  for (const x of tr.parentNode.children) x.classList.remove("selected");
  tr.classList.add("selected");
  const filter = bpfOf(r);
  const q = new URLSearchParams({ from: S.window.from, to: S.window.to });
  if (filter) q.set("filter", filter);
  const iface = r.iface || (S.iface !== "all" ? S.iface : null);
  if (iface) q.set("iface", iface);
  // A coordinator proxies the packets of one probe: the row's or the one chosen.
  const probe = r.probe || S.probe;
  if (S.probes && probe) q.set("probe", probe);
  const noProbe = S.probes && !probe;
  const a = $("download");
  a.href = "/api/v1/packets?" + q;
  a.download = ("trawl-" + S.window.from + "-" + (filter || "all")).replace(/[^A-Za-z0-9.-]+/g, "_") + ".pcap";
  a.dataset.filter = filter;
  $("p-filter").textContent = filter || "(all)";
  $("p-window").textContent = `${S.window.from} to ${S.window.to}`;
  $("p-state").textContent = noProbe ? "packets stay on the probe that captured them: pick a probe, or group by probe" : "";
  $("p-state").dataset.state = noProbe ? "error" : "idle";
  $("download").hidden = noProbe;
  $("packets").hidden = false;
}

/// With a token the browser cannot follow a plain link (no header): the file is fetched with
/// it and handed to the browser as a download.
$("download").addEventListener("click", async (e) => {
  if (!S.token) return;
  e.preventDefault();
  const a = e.currentTarget;
  const state = $("p-state");
  state.dataset.state = "running";
  state.textContent = "downloading…";
  try {
    const blob = await (await api(a.getAttribute("href"))).blob();
    const url = URL.createObjectURL(blob);
    const save = document.createElement("a");
    save.href = url;
    save.download = a.download;
    document.body.appendChild(save);
    save.click();
    save.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    state.dataset.state = "done";
    state.textContent = `${si(blob.size)}B saved`;
  } catch (err) {
    state.dataset.state = "error";
    state.textContent = err.message;
  }
});

// ---- controls and start ----

$("iface").addEventListener("change", () => {
  S.iface = $("iface").value;
  loadSeries().catch(report);
});

$("range").addEventListener("change", async () => {
  S.range = Number($("range").value);
  await discover().catch(report);
  loadSeries().catch(report);
});

function report(e) {
  if (e.status !== 401) setStatus(e.message, "error");
}

let ticks = 0;
async function tick() {
  ticks++;
  if (!$("follow").checked) return;
  if (!S.iface) {
    // A run that has seen no packet yet has no rows: look again until it has.
    if (ticks % 2 === 0) {
      await discover();
      if (S.iface) await loadSeries();
    }
    return;
  }
  await pollSeries();
  if (ticks % 2 === 0) {
    await loadAlarms();
    draw();
  }
  if (ticks % 5 === 0) await refreshStatus();
}

/// One tick a second, the next armed when this one is done: on a slow server the polls wait
/// for each other instead of piling up ahead of the operator's queries.
async function loop() {
  try {
    await tick();
  } catch (e) {
    report(e);
  }
  if (!$("main").hidden) S.timer = setTimeout(loop, 1000);
}

async function boot() {
  clearTimeout(S.timer);
  try {
    await refreshStatus();
    $("main").hidden = false;
    await discover();
    await loadSeries();
  } catch (e) {
    return report(e);
  }
  S.timer = setTimeout(loop, 1000);
}

boot();
