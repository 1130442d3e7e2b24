// barca serve's web UI: plain JavaScript over the server's JSON API, no build step and no
// library. Every text from the API goes into the page as textContent (never as HTML); the one
// piece of markup taken from the server is the graph's SVG, which barca itself draws.
"use strict";

const API = new URL("../", document.baseURI);   // the UI lives at /ui/, the API one level up
const POLL_MS = 2000;
const $ = (sel) => document.querySelector(sel);

const ui = {
  page: "graph",
  nodes: [],          // /list's nodes: the target picker
  stateTag: null,     // ETag of the last /state answer
  states: new Map(),  // node id -> its /state entry
  selected: "",       // the target picked (a node id; "" = everything)
  runId: null,        // the run shown on the runs page
  follow: null,       // the AbortController of the event stream being read
};

// ------------------------------------------------------------------ the API

function token() { return sessionStorage.getItem("barca-token") || ""; }

async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  if (token()) headers.Authorization = "Bearer " + token();
  if (options.body !== undefined && typeof options.body !== "string") {
    options = Object.assign({}, options, { body: JSON.stringify(options.body) });
    headers["Content-Type"] = "application/json";
  }
  const res = await fetch(new URL(path.replace(/^\//, ""), API), Object.assign({}, options, { headers }));
  if (res.status === 401) {
    askToken();
    throw new Error("this server asks for a token");
  }
  return res;
}

async function json(path, options) {
  const res = await api(path, options);
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (!res.ok) {
    const why = body && body.error ? body.error : `HTTP ${res.status}`;
    const err = new Error(why);
    err.envelope = body;
    throw err;
  }
  return body;
}

function askToken() {
  const dialog = $("#token-dialog");
  if (!dialog.open) dialog.showModal();
}

// ------------------------------------------------------------------ small DOM helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function chip(word) { return el("span", { class: "chip " + String(word || "").replace(/[^a-z_]/g, ""), text: word || "-" }); }

function shortName(id) { const i = String(id).lastIndexOf(":"); return i < 0 ? String(id) : String(id).slice(i + 1); }

function shortTime(ts) {  // 12-01 17:08:30: a list's column (the full time in its title)
  const full = when(ts);
  return full.length > 10 ? full.slice(5, 19) : full;
}

function targets(t) { return String(t || "").split(",").map(shortName).join(", "); }

const SUMMARY = { cached: "cached", stale: "stale", never_run: "never run", partial: "partial",
  unknown: "unknown", always_runs: "always run" };

function when(ts) {
  if (ts === null || ts === undefined || ts === "") return "-";
  const d = typeof ts === "number" ? new Date(ts * 1000) : new Date(ts);
  if (isNaN(d)) return String(ts);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

function say(text, error = false) {
  const box = $("#message");
  box.textContent = text;
  box.className = "message" + (error ? " error" : "");
  box.hidden = !text;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// ------------------------------------------------------------------ pages

function show(page) {
  ui.page = page;
  for (const a of document.querySelectorAll(".tabs a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  for (const s of document.querySelectorAll(".page")) s.hidden = s.id !== "page-" + page;
  refresh();
}

function route() {
  const hash = location.hash.replace(/^#/, "");
  if (hash.startsWith("run/")) {
    showRun(decodeURIComponent(hash.slice(4)));
    show("runs");
    return;
  }
  show(["graph", "status", "runs", "queue"].includes(hash) ? hash : "graph");
}

async function refresh() {
  try {
    await pollState();
    if (ui.page === "graph") await drawGraph();
    if (ui.page === "status") await drawStatus();
    if (ui.page === "runs") await drawRuns();
    if (ui.page === "queue") await drawQueue();
  } catch (e) {
    say(e.message, true);
  }
}

// ------------------------------------------------------------------ live state

async function pollState() {
  const headers = ui.stateTag ? { "If-None-Match": ui.stateTag } : {};
  const res = await api("state", { headers });
  if (res.status === 304) return false;
  if (!res.ok) throw new Error(`/state answered HTTP ${res.status}`);
  ui.stateTag = res.headers.get("ETag");
  const rows = await res.json();
  ui.states = new Map(rows.map((n) => [n.id, n]));
  const busy = rows.filter((n) => n.running);
  const live = $("#live");
  live.replaceChildren(el("span", { class: "dot" }),
    busy.length ? `running: ${busy.map((n) => shortName(n.id)).join(", ")}` : "idle");
  live.classList.toggle("busy", busy.length > 0);
  ui.graphStale = true;
  return true;
}

// ------------------------------------------------------------------ graph

async function drawGraph() {
  if (!ui.graphStale && $("#graph svg")) return;
  const res = await api("graph.svg");
  if (!res.ok) throw new Error(`/graph.svg answered HTTP ${res.status}`);
  const doc = new DOMParser().parseFromString(await res.text(), "image/svg+xml");
  const svg = doc.documentElement;
  if (svg.nodeName !== "svg") throw new Error("the graph is not an SVG picture");
  // barca draws this picture itself; still, nothing active may come along with it
  for (const bad of svg.querySelectorAll("script, foreignObject")) bad.remove();
  for (const node of svg.querySelectorAll("*")) {
    for (const attr of [...node.attributes]) if (/^on/i.test(attr.name)) node.removeAttribute(attr.name);
  }
  const picture = document.importNode(svg, true);
  for (const g of picture.querySelectorAll("g.barca-node")) {
    g.addEventListener("click", () => pick(g.getAttribute("data-node")));
    g.classList.toggle("selected", g.getAttribute("data-node") === ui.selected);
  }
  $("#graph").replaceChildren(picture);
  ui.graphStale = false;
}

function colourOf(id) {
  const rect = document.querySelector(`#graph g.barca-node[data-node="${CSS.escape(id)}"] rect`);
  return rect ? rect.getAttribute("fill") : null;
}

// ------------------------------------------------------------------ status

// The SHAPE cell of `barca status`'s table, from the JSON's shape object (store/shapes.py
// `label` says the same words): "3 rows x 2 cols", "dict (2 keys)", "list (3 items)", "str".
function shapeLabel(s) {
  if (!s) return "-";
  if (typeof s === "string") return s;     // a server of an older barca
  const legacy = "recorded by an older barca: ";
  if (typeof s.note === "string" && s.note.startsWith(legacy)) return s.note.slice(legacy.length);
  const type = String(s.type ?? "?").split(".").pop();   // a class by its own name: Model
  const count = (n, one) => `${n} ${one}${n === 1 ? "" : "s"}`;
  const cols = s.column_count ?? (s.columns || []).length;
  const keys = s.key_count ?? (s.keys ? s.keys.length : null);
  if (s.type === "table") return `${s.rows} rows x ${cols} cols`;
  if (s.type === "list" && s.rows != null) return `list (${count(s.rows, "item")})`;
  if (s.rows != null) return cols ? `${type} (${s.rows} rows x ${cols} cols)` : `${type} (${s.rows} rows)`;
  if (keys != null) return `${type} (${count(keys, "key")})`;
  return type;
}

async function drawStatus() {
  if (!$("#graph svg")) await drawGraph();   // the colours come from the picture
  const body = await json("nodes");
  fill($("#status-table tbody"), body.nodes.map((n) => {
    const state = el("span", { class: "chip", text: SUMMARY[n.cache.state] || n.cache.state });
    const c = colourOf(n.id);
    if (c) state.style.background = c;
    const lm = n.last_materialization;
    // (the document's times are UTC, written without a zone as barca's JSON writes them)
    const last = lm ? `${lm.status} ${lm.created_at ? lm.created_at + " UTC" : ""}` : "-";
    const row = el("tr", { class: "clickable", "data-node": n.id, onclick: () => pick(n.id) },
      el("td", { class: "nowrap", text: n.name, title: n.id }),
      el("td", { text: n.kind }),
      el("td", {}, state),
      el("td", { class: "why", text: (n.cache.detail || "").split("\n")[0] }),
      el("td", { class: "nowrap", text: last }),
      el("td", { class: "nowrap", text: shapeLabel(n.shape) }));
    if (n.id === ui.selected) row.classList.add("current");
    return row;
  }));
  const s = body.summary || {};
  $("#status-summary").textContent = Object.entries(s).map(([k, v]) => `${v} ${SUMMARY[k] || k}`).join(", ");
}

// ------------------------------------------------------------------ target and actions

async function loadNodes() {
  const body = await json("list");
  ui.nodes = body.nodes || [];
  const select = $("#target");
  const all = el("option", { value: "", text: "everything (all assets)" });
  select.replaceChildren(all, ...ui.nodes.map((n) =>
    el("option", { value: n.id, text: `${n.name || shortName(n.id)} (${n.kind})` })));
  select.value = ui.selected;
}

function pick(id) {
  ui.selected = id || "";
  $("#target").value = ui.selected;
  for (const g of document.querySelectorAll("#graph g.barca-node")) {
    g.classList.toggle("selected", g.getAttribute("data-node") === ui.selected);
  }
  for (const tr of document.querySelectorAll("#status-table tbody tr")) {
    tr.classList.toggle("current", tr.dataset.node === ui.selected);
  }
}

function request(extra) {
  const node = ui.nodes.find((n) => n.id === ui.selected);
  const body = { command: node && node.kind === "task" ? "run" : "get" };
  if (node) body.targets = [node.id];
  return Object.assign(body, extra(node));
}

async function start(extra) {
  say("");
  try {
    const body = request(extra);
    const answer = await json("runs", { method: "POST", body });
    if (body.dry_run && !answer.run_id) {
      showPlan(answer);
      location.hash = "runs";
      return;
    }
    location.hash = "run/" + encodeURIComponent(answer.run_id);
  } catch (e) {
    say(e.message + (e.envelope && e.envelope.remediation ? "\n" + e.envelope.remediation : ""), true);
  }
}

// ------------------------------------------------------------------ runs

async function drawRuns() {
  const body = await json("runs?limit=50");
  fill($("#runs-table tbody"), (body.runs || []).map((r) => {
    const row = el("tr", { class: "clickable", onclick: () => { location.hash = "run/" + encodeURIComponent(r.run_id); } },
      el("td", { class: "mono", text: r.run_id }),
      el("td", { class: "nowrap", text: `${r.command} ${targets(r.target)}`, title: r.target || "" }),
      el("td", {}, chip(r.status)),
      el("td", { text: r.triggered_by || "-" }),
      el("td", { class: "nowrap", text: shortTime(r.started_at), title: when(r.started_at) }));
    if (r.run_id === ui.runId) row.classList.add("current");
    return row;
  }));
}

function showPlan(plan) {
  stopFollowing();
  ui.runId = null;
  const rows = (plan.steps || []).map((s) => el("tr", {},
    // the plan's JSON says "run" (barca 0.30.2's word); a person reads "will run"
    el("td", {}, chip(s.action === "run" ? "will run" : s.action)), el("td", { class: "why", text: s.detail || "" }),
    el("td", { class: "nowrap", text: shortName(s.id), title: s.id })));
  const sum = plan.summary || {};
  $("#run").replaceChildren(
    el("h2", {}, "Dry run: ", el("code", { text: plan.command || "" })),
    el("p", { class: "muted", text: `nothing executed, nothing written — ${sum.will_run || 0} will run, ${sum.cached || 0} cached, ${sum.unknown || 0} unknown` }),
    el("div", { class: "scroll" }, el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, el("th", { text: "Status" }), el("th", { text: "Why" }), el("th", { text: "Step" }))),
      el("tbody", {}, ...rows))));
}

function stopFollowing() {
  if (ui.follow) ui.follow.abort();
  ui.follow = null;
}

async function showRun(runId) {
  if (ui.runId === runId && ui.follow) return;
  stopFollowing();
  ui.runId = runId;
  const panel = $("#run");
  const head = el("h2", {}, el("code", { text: runId }), chip("…"));
  const facts = el("dl");
  const cancel = el("button", { type: "button", class: "small", ...(ui.readOnly ? { disabled: "" } : {}), text: "Cancel", hidden: "",
    onclick: () => json("runs/" + encodeURIComponent(runId), { method: "DELETE" }).catch((e) => say(e.message, true)) });
  const logs = el("pre", { class: "logs", "aria-label": "logs" });
  const result = el("div");
  panel.replaceChildren(head, facts, el("p", {}, cancel), el("h3", { text: "Logs" }), logs, result);
  let shown = "";
  const setStatus = (status) => {
    // a replayed run_started never takes a finished run back to running
    if (status === "running" && shown && !["…", "pending"].includes(shown)) return;
    shown = status;
    head.replaceChildren(el("code", { text: runId }), chip(status));
    if (["pending", "running"].includes(status)) cancel.removeAttribute("hidden");
    else cancel.setAttribute("hidden", "");
  };
  ui.settle = async () => {  // the stream may lag behind the run's row: the row settles it
    const run = await json("runs/" + encodeURIComponent(runId));
    if (ui.runId !== runId || ["pending", "running"].includes(run.status)) return;
    const cut = ui.follow;  // a stream still open is behind the row: it may miss lines
    if (ui.follow) { ui.follow.abort(); ui.follow = null; }
    if (shown !== run.status) {
      setStatus(run.status);
      showOutcome(result, run.outcome, run.status);
    }
    if (cut && (run.logs || []).length) {  // the lines the run recorded, all of them
      logs.replaceChildren();
      for (const l of run.logs) logLine(logs, l.stream, `[${shortName(l.node_id)}] ${l.line}`);
    }
    if (!logs.textContent) logLine(logs, "barca", "no output recorded for this run");
  };
  try {
    const run = await json("runs/" + encodeURIComponent(runId));
    setStatus(run.status);
    const fact = (k, v) => facts.append(el("dt", { text: k }), el("dd", { text: v }));
    fact("command", `${run.command} ${targets(run.target)}`);
    fact("triggered by", run.triggered_by || "-");
    fact("started", when(run.started_at));
    fact("finished", when(run.finished_at));
    await follow(runId, logs, setStatus, (outcome, status) => showOutcome(result, outcome, status));
  } catch (e) {
    if (e.name !== "AbortError") say(e.message, true);
  }
}

function logLine(pre, cls, text) {
  pre.append(el("span", { class: cls, text: text + "\n" }));
  pre.scrollTop = pre.scrollHeight;
}

// The run's events (server-sent events read with fetch, so the token goes in a header).
async function follow(runId, pre, setStatus, done) {
  const ctl = new AbortController();
  ui.follow = ctl;
  const res = await api("runs/" + encodeURIComponent(runId) + "/events", { signal: ctl.signal, headers: { Accept: "text/event-stream" } });
  if (!res.ok) {  // no stream held for it: its recorded lines and outcome
    const run = await json("runs/" + encodeURIComponent(runId));
    for (const l of run.logs || []) logLine(pre, l.stream, `[${shortName(l.node_id)}] ${l.line}`);
    if (!pre.textContent) logLine(pre, "barca", "no output recorded for this run");
    setStatus(run.status);
    done(run.outcome, run.status);
    ui.follow = null;
    return;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const chunk = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = chunk.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (!data) continue;
      let e;
      try { e = JSON.parse(data); } catch (err) { continue; }
      if (e.type === "run_started") setStatus("running");
      else if (e.type === "log") logLine(pre, e.stream === "stderr" ? "stderr" : "stdout", `[${shortName(e.node_id)}] ${e.line}`);
      else if (e.type === "line") logLine(pre, "barca", e.line);
      else if (e.type === "step_finished") {
        const key = e.key ? `[${e.key}]` : "";
        logLine(pre, "step", `${e.ok ? "✓" : "✗"} ${shortName(e.node_id)}${key}` + (e.elapsed_seconds != null ? ` ${Number(e.elapsed_seconds).toFixed(2)}s` : ""));
      } else if (e.type === "run_finished") {
        const status = e.status || (e.ok ? "success" : "failed");
        setStatus(status);
        done(e.outcome, status);
        ui.follow = null;
        ctl.abort();
        if (!pre.textContent) logLine(pre, "barca", "no output recorded for this run");
        refresh();
        return;
      }
    }
  }
  ui.follow = null;
}

function showOutcome(box, outcome, status) {
  if (!outcome) { box.replaceChildren(); return; }
  const parts = [el("h3", { text: "Outcome" })];
  const line = outcome.steps ? `${status} in ${Number(outcome.elapsed_seconds || 0).toFixed(3)}s — ${outcome.steps_executed || 0} of ${outcome.steps_total || 0} steps executed` : status;
  parts.push(el("p", { text: line }));
  const err = (outcome.envelope && outcome.envelope.error) || outcome.error;
  if (err) parts.push(el("p", { class: "error-text", text: err }));
  const rows = (outcome.steps || []).map((s) => el("tr", {},
    el("td", {}, chip(s.status)), el("td", { class: "nowrap", text: shortName(s.id), title: s.id }),
    el("td", { class: "why", text: (s.detail || "").split("\n")[0] })));
  if (rows.length) {
    parts.push(el("div", { class: "scroll" }, el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, el("th", { text: "Status" }), el("th", { text: "Step" }), el("th", { text: "Why" }))),
      el("tbody", {}, ...rows))));
  }
  box.replaceChildren(...parts);
}

// ------------------------------------------------------------------ queue and schedules

async function drawQueue() {
  const q = await json("queue");
  $("#queue-state").replaceWith(Object.assign(chip(q.draining ? "draining" : q.paused ? "paused" : "active"), { id: "queue-state" }));
  $("#queue-pause").disabled = q.paused || ui.readOnly;
  $("#queue-resume").disabled = !q.paused || ui.readOnly;
  const runs = [...(q.running || []), ...(q.queued || [])];
  fill($("#queue-table tbody"), runs.length ? runs.map((r) => el("tr", {},
    el("td", { class: "mono" }, el("a", { href: "#run/" + encodeURIComponent(r.run_id), text: r.run_id })),
    el("td", { class: "nowrap", text: `${r.command} ${targets(r.target)}` }),
    el("td", {}, chip(r.status)),
    el("td", { text: r.position == null ? "-" : String(r.position) }),
    el("td", {}, el("button", { type: "button", class: "small", ...(ui.readOnly ? { disabled: "" } : {}), text: "Cancel",
      onclick: () => json("runs/" + encodeURIComponent(r.run_id), { method: "DELETE" }).then(refresh, (e) => say(e.message, true)) }))))
    : [el("tr", {}, el("td", { colspan: "5", class: "muted", text: "nothing running or waiting" }))]);
  const entries = await json("schedule");
  fill($("#schedule-table tbody"), entries.length ? entries.map((s) => {
    const state = s.paused ? "paused" : s.failing ? "failing" : "active";
    const verb = s.paused ? "resume" : "pause";
    return el("tr", {},
      el("td", { class: "nowrap", text: shortName(s.id), title: s.id }),
      el("td", { class: "mono", text: s.cron }),
      el("td", { class: "nowrap", text: when(s.next_fire) }),
      el("td", {}, s.last_status ? chip(s.last_status) : "-"),
      el("td", {}, chip(state)),
      el("td", {}, el("button", { type: "button", class: "small", ...(ui.readOnly ? { disabled: "" } : {}), text: verb === "pause" ? "Pause" : "Resume",
        onclick: () => json(`schedule/${encodeURIComponent(s.id)}/${verb}`, { method: "POST" }).then(refresh, (e) => say(e.message, true)) })));
  }) : [el("tr", {}, el("td", { colspan: "6", class: "muted", text: "no scheduled nodes" }))]);
}

// ------------------------------------------------------------------ start

async function main() {
  $("#token-form").addEventListener("submit", () => {
    sessionStorage.setItem("barca-token", $("#token").value.trim());
    boot();
  });
  $("#target").addEventListener("change", (e) => pick(e.target.value));
  $("#act-get").addEventListener("click", () => start(() => ({})));
  $("#act-refresh").addEventListener("click", () => start((node) => node ? { refresh: [node.id] } : { refresh_all: true }));
  $("#act-dry").addEventListener("click", () => start(() => ({ dry_run: true })));
  $("#queue-pause").addEventListener("click", () => json("queue/pause", { method: "POST" }).then(refresh, (e) => say(e.message, true)));
  $("#queue-resume").addEventListener("click", () => json("queue/resume", { method: "POST" }).then(refresh, (e) => say(e.message, true)));
  window.addEventListener("hashchange", route);
  await boot();
  setInterval(async () => {
    try {
      const changed = await pollState();
      if (ui.page === "graph" && changed) await drawGraph();
      if (ui.page === "status" && changed) await drawStatus();
      if (ui.page === "runs") await drawRuns();
      if (ui.page === "runs" && ui.runId && ui.settle) await ui.settle();
      if (ui.page === "queue") await drawQueue();
    } catch (e) { /* the next turn tries again; the message stays */ }
  }, POLL_MS);
}

async function boot() {
  try {
    const health = await json("health");
    $("#server").textContent = `${health.version || ""} · env ${health.env || "default"}` +
      (health.read_only ? " · read-only" : "") + (health.status === "draining" ? " · draining" : "");
    // a read-only server runs, cancels and pauses nothing: its buttons say so
    for (const id of ["#act-get", "#act-refresh", "#queue-pause", "#queue-resume"]) {
      $(id).disabled = Boolean(health.read_only);
      if (health.read_only) $(id).title = "this server is read-only";
    }
    ui.readOnly = Boolean(health.read_only);
    const errors = health.load_errors || [];
    if (errors.length) say("Not loaded: " + errors.map((e) => `${e.file}: ${e.error}`).join("; "), true);
    await loadNodes();
    route();
  } catch (e) {
    say(e.message, true);
  }
}

main();
