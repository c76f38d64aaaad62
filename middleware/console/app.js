// trustmsg console: a small page over the admin API (docs/console.md).
//
// Everything a producer sent (payloads, headers, keys, errors) is put on the
// page with textContent, never as HTML: the `h` helper below is the only way
// this file builds elements, and it has no way to insert markup. The admin
// token lives in sessionStorage only (gone when the tab closes).
"use strict";

const TOKEN_KEY = "trustmsg.admin_token";
const OPERATOR_KEY = "trustmsg.operator";
const PAGE_SIZE = 50;
const PAYLOAD_PREVIEW = 4096;
const REFRESH_MS = 5000;

// The overview's refresh loop while it is on screen (null elsewhere).
let refresh = null;

// ---------------------------------------------------------------- elements

/** Builds an element; strings among the children become text nodes. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Builds an SVG element, as `h` does: attributes set one by one, text as text. */
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
  main.focus({ preventScroll: true });
}

function banner(text, kind) {
  const b = document.getElementById("banner");
  if (!text) {
    b.hidden = true;
    b.replaceChildren();
    return;
  }
  b.className = kind || "error";
  b.replaceChildren(text);
  b.hidden = false;
}

// ---------------------------------------------------------------- API

class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function api(method, path, body) {
  const headers = { authorization: "Bearer " + token() };
  const operator = sessionStorage.getItem(OPERATOR_KEY);
  if (operator) headers["x-trustmsg-operator"] = operator;
  if (body !== undefined) headers["content-type"] = "application/json";
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiFailure(0, "unreachable", "The trustmsg service could not be reached (" + e.message + ").");
  }
  let data = null;
  try {
    data = await res.json();
  } catch (_) {
    data = null;
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    throw new ApiFailure(res.status, err.code || "http_" + res.status, err.message || res.statusText || "request failed");
  }
  return data;
}

/** Shows a failure; a refused token sends the operator back to sign in. */
function failed(e) {
  if (e instanceof ApiFailure && (e.status === 401 || e.status === 403)) {
    // No refresh may redraw the sign-in form under the operator's typing.
    stopRefresh();
    sessionStorage.removeItem(TOKEN_KEY);
    signIn("The admin token was refused: " + e.message);
    return;
  }
  const prefix = e instanceof ApiFailure && e.status ? e.status + " " + e.code + ": " : "";
  banner(prefix + e.message);
}

// ---------------------------------------------------------------- formats

function age(ms) {
  if (ms === null || ms === undefined) return "—";
  let s = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hr = Math.floor(s / 3600);
  s -= hr * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return d + "d" + hr + "h";
  if (hr) return hr + "h" + m + "m";
  if (m) return m + "m" + s + "s";
  return s + "s";
}

function since(iso) {
  return iso ? age(Date.now() - Date.parse(iso)) : "—";
}

function when(iso) {
  return iso ? new Date(iso).toISOString().replace("T", " ").replace("Z", " UTC") : "—";
}

// A delayed message's time: "due at …" while it is ahead (the message is
// scheduled, not late), "was due at …" once it has passed.
function dueAt(m) {
  if (!m.deliver_at) return null;
  const ahead = Date.parse(m.deliver_at) > Date.now();
  return h("span", { class: "due" + (ahead ? " scheduled" : "") }, (ahead ? "due at " : "was due at ") + when(m.deliver_at));
}

// Committed, its send PENDING and its time still ahead: waiting for its deliver_at.
function scheduled(m) {
  return m.send_status === "PENDING" && !!m.deliver_at && Date.parse(m.deliver_at) > Date.now();
}

function stateBadge(value) {
  if (!value) return h("span", { class: "muted" }, "—");
  const bad = value === "VERIFY_FAILED" || value === "SEND_FAILED";
  return h("span", { class: "badge " + (bad ? "bad" : value.toLowerCase()) }, value);
}

function clip(text, n) {
  if (!text) return "";
  return text.length > n ? text.slice(0, n) + "…" : text;
}

function table(headings, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "div",
    { class: "scroll" },
    h("table", {}, h("thead", {}, h("tr", {}, headings.map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows)),
  );
}

function base64ToBytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function hex(bytes) {
  const parts = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const line = Array.from(bytes.slice(i, i + 16), (b) => b.toString(16).padStart(2, "0")).join(" ");
    parts.push(i.toString(16).padStart(8, "0") + "  " + line);
  }
  return parts.join("\n");
}

// ---------------------------------------------------------------- routing

function route() {
  stopRefresh();
  banner(null);
  if (!token()) return signIn();
  document.getElementById("nav").hidden = false;
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.page === (parts[0] || "overview"));
  }
  if (parts[0] === "messages" && parts[1]) return messagePage(parts[1]);
  if (parts[0] === "messages") return messagesPage(params);
  if (parts[0] === "producers" && parts[1] === "new") return producerForm(null);
  if (parts[0] === "producers" && parts[1]) return producerForm(parts[1]);
  if (parts[0] === "producers") return producersPage();
  if (parts[0] === "alerts") return alertsPage(params);
  if (parts[0] === "outbox") return outboxPage();
  return overviewPage();
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// ---------------------------------------------------------------- sign in

function signIn(problem) {
  document.getElementById("nav").hidden = true;
  banner(problem || null);
  const tokenInput = h("input", { id: "token", type: "password", autocomplete: "off", required: true });
  const operatorInput = h("input", {
    id: "operator",
    type: "text",
    maxlength: 64,
    value: sessionStorage.getItem(OPERATOR_KEY) || "",
  });
  const form = h(
    "form",
    {
      class: "card narrow",
      onsubmit: async (ev) => {
        ev.preventDefault();
        const t = tokenInput.value.trim();
        if (!t) return banner("Enter the admin token.");
        sessionStorage.setItem(TOKEN_KEY, t);
        const op = operatorInput.value.trim();
        if (op) sessionStorage.setItem(OPERATOR_KEY, op);
        else sessionStorage.removeItem(OPERATOR_KEY);
        try {
          await api("GET", "/v1/admin/summary");
        } catch (e) {
          sessionStorage.removeItem(TOKEN_KEY);
          if (e instanceof ApiFailure && (e.status === 401 || e.status === 403)) {
            return signIn("That token was refused (" + e.status + "): " + e.message);
          }
          return signIn(e.message);
        }
        go("#/");
      },
    },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "The admin token is kept for this browser tab only."),
    h("label", { for: "token" }, "Admin token"),
    tokenInput,
    h("label", { for: "operator" }, "Your name (recorded in the audit trail; optional)"),
    operatorInput,
    h("button", { type: "submit", id: "sign-in" }, "Sign in"),
  );
  show(form);
  tokenInput.focus();
}

// ---------------------------------------------------------------- overview

async function overviewPage() {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  show(h("h1", {}, "Overview"), body);
  const load = async () => {
    let summary, flow, consumers, storage;
    try {
      [summary, flow, consumers, storage] = await Promise.all([
        api("GET", "/v1/admin/summary"),
        optional("/v1/admin/flow?minutes=" + FLOW_MINUTES),
        optional("/v1/admin/consumer-groups"),
        optional("/v1/admin/storage"),
      ]);
    } catch (e) {
      return failed(e);
    }
    banner(null);
    const producers = summary.producers || [];
    const windowMin = Math.round((summary.recent_window_secs || 0) / 60) + " min";
    const n = (m, k) => (m && m[k]) || 0;
    const rows = producers.map((p) => {
      const st = p.by_status || {};
      const ss = p.by_send_status || {};
      const cell = (v, bad, link) =>
        h("td", { class: "num" + (bad && v ? " bad" : "") }, link && v ? h("a", { href: link }, String(v)) : String(v));
      const q = (k, v) => "#/messages?biz_id=" + encodeURIComponent(p.biz_id) + "&" + k + "=" + v;
      return h(
        "tr",
        {},
        h("th", { scope: "row" }, h("a", { href: "#/messages?biz_id=" + encodeURIComponent(p.biz_id) }, p.biz_id)),
        cell(n(st, "PREPARED"), false, q("status", "PREPARED")),
        cell(n(st, "VERIFY_FAILED"), true, q("status", "VERIFY_FAILED")),
        cell(n(ss, "PENDING"), false, q("send_status", "PENDING")),
        cell(p.scheduled || 0),
        cell(n(ss, "SEND_FAILED"), true, q("send_status", "SEND_FAILED")),
        cell(p.sent_recently || 0),
        cell(p.rolled_back_recently || 0),
        h("td", { class: "num" }, age(p.oldest_prepared_age_ms)),
        h("td", { class: "num" }, age(p.oldest_pending_send_age_ms)),
      );
    });
    body.replaceChildren(
      ...[
        table(
          ["Producer", "Prepared", "Verify failed", "Pending send", "Scheduled", "Send failed", "Sent (" + windowMin + ")", "Rolled back (" + windowMin + ")", "Oldest prepared", "Oldest pending send"],
          rows,
          "Nothing waiting and nothing finished in the last " + windowMin + ".",
        ),
        summary.submit_waiting
          ? h(
              "p",
              { class: "warning", id: "submit-waiting" },
              summary.submit_waiting + " commit(s) submitted through Kafka wait for their prepare; each is dead-lettered (message_not_found) if it does not come in time (GET /v1/admin/submit/waiting lists them).",
            )
          : null,
        consumers && (consumers.items || []).length ? consumersTable(consumers.items) : null,
        flow ? flowCharts(flow.minutes || []) : null,
        storage ? storagePanel(storage) : null,
        h(
          "p",
          { class: "muted small" },
          "Waiting messages are counted exactly; finished ones over the last " + windowMin +
            ". Refreshes 5 s after each answer, paused while this tab is hidden · " + new Date().toLocaleTimeString(),
        ),
      ].filter(Boolean),
    );
  };
  startRefresh(load);
}

// The storage panel: how much the large tables hold, how old the oldest
// message is, and the retention that bounds them (GET /v1/admin/storage).
function storagePanel(s) {
  const rows = (s.tables || []).map((t) =>
    h("tr", {}, h("th", { scope: "row" }, t.table), h("td", { class: "num" }, count(t.rows)), h("td", { class: "num" }, bytes(t.bytes))),
  );
  const retention = s.retention_secs
    ? "Retention " + age(s.retention_secs * 1000) + ": finished messages older than that are removed."
    : "Retention is off: every message is kept and these tables grow without bound (--retention).";
  const oldest = s.oldest_partition
    ? " · oldest partition " + s.oldest_partition.name + " (from " + when(s.oldest_partition.from) + ")"
    : "";
  return h(
    "section",
    { id: "storage" },
    h("h2", {}, "Storage"),
    h("p", { class: s.retention_secs ? "muted" : "warning" }, retention),
    table(["Table", "Rows (estimate)", "Size"], rows, "No table sizes."),
    h("p", { class: "muted small" }, "Oldest message " + age(s.oldest_message_age_secs * 1000) + " old" + oldest + " · read " + when(s.at)),
  );
}

// `n` bytes in the largest binary unit that keeps it above 1.
function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n || 0;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return (i ? v.toFixed(1) : String(v)) + " " + units[i];
}

// What a service without that endpoint (an older one) answers 404 to: null.
async function optional(path) {
  try {
    return await api("GET", path);
  } catch (e) {
    if (e instanceof ApiFailure && e.status === 404) return null;
    throw e;
  }
}

// ---------------------------------------------------------------- charts

const FLOW_MINUTES = 60;

// The flow charts: what each series is, in the order drawn.
const FLOW_CHARTS = [
  {
    id: "chart-messages",
    title: "Messages per minute",
    unit: "messages / min",
    series: [
      ["prepared", "prepared"],
      ["committed", "committed"],
      ["sent", "sent"],
      ["failed", "failed (verify + send)"],
    ],
    total: true,
  },
  {
    id: "chart-backlog",
    title: "Backlog",
    unit: "messages waiting",
    series: [
      ["backlog_prepared", "PREPARED"],
      ["backlog_pending", "PENDING send"],
    ],
    total: false,
  },
  {
    id: "chart-checks",
    title: "Check-back answers per minute",
    unit: "calls / min",
    series: [
      ["checks_commit", "commit"],
      ["checks_rollback", "rollback"],
      ["checks_unknown", "unknown"],
      ["checks_failed", "failed (no answer)"],
    ],
    total: true,
  },
];

// The smallest of 1, 2, 5 × 10^k at least `v` (at least 1: counts are whole).
function niceStep(v) {
  if (v <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function hhmm(iso) {
  return new Date(iso).toISOString().slice(11, 16);
}

// One line chart over the minutes: labelled axes, a dot per minute with
// its value (data-value, and a title shown on hover), a gap where a value
// is null (not sampled).
function lineChart(spec, minutes) {
  const W = 440, H = 240, L = 46, R = 12, T = 10, B = 40;
  const n = minutes.length;
  const values = spec.series.map(([key]) => minutes.map((m) => (m[key] === null || m[key] === undefined ? null : m[key])));
  const highest = Math.max(0, ...values.flat().filter((v) => v !== null));
  const step = niceStep(highest / 4);
  const top = step * 4;
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const grid = [];
  for (let k = 0; k <= 4; k++) {
    const v = step * k;
    grid.push(
      svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toLocaleString()),
    );
  }
  minutes.forEach((m, i) => {
    // A label every 10 minutes, but none cut off at the right edge.
    if (new Date(m.at).getUTCMinutes() % 10 !== 0 || x(i) > W - R - 16) return;
    grid.push(
      svg("line", { class: "grid x", x1: x(i), x2: x(i), y1: T, y2: H - B }),
      svg("text", { class: "tick", x: x(i), y: H - B + 16, "text-anchor": "middle" }, hhmm(m.at)),
    );
  });
  const axes = [
    svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }),
    svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }),
    svg("text", { class: "axis-title", x: -(T + (H - T - B) / 2), y: 14, transform: "rotate(-90)", "text-anchor": "middle" }, spec.unit),
    svg("text", { class: "axis-title", x: L + (W - L - R) / 2, y: H - 6, "text-anchor": "middle" }, "minute (UTC)"),
  ];
  const drawn = spec.series.map(([key, label], s) => {
    const vs = values[s];
    // A polyline per run of sampled minutes.
    const runs = [];
    let run = [];
    vs.forEach((v, i) => {
      if (v === null) {
        if (run.length) runs.push(run);
        run = [];
      } else run.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
    });
    if (run.length) runs.push(run);
    const dots = vs.map((v, i) =>
      v === null
        ? null
        : svg(
            "circle",
            { class: "pt s-" + key, cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: v ? 3 : 1.5, "data-series": key, "data-at": minutes[i].at, "data-value": v },
            svg("title", {}, hhmm(minutes[i].at) + " UTC · " + label + ": " + v),
          ),
    );
    return svg(
      "g",
      { class: "series s-" + key, "data-series": key },
      runs.map((r) => svg("polyline", { class: "line s-" + key, points: r.join(" ") })),
      dots,
    );
  });
  const legend = h(
    "ul",
    { class: "legend" },
    spec.series.map(([key, label], s) => {
      const vs = values[s].filter((v) => v !== null);
      const figure = spec.total
        ? vs.reduce((a, b) => a + b, 0).toLocaleString() + " in " + n + " min"
        : vs.length
          ? "now " + vs[vs.length - 1].toLocaleString()
          : "not sampled";
      return h("li", { "data-series": key }, h("span", { class: "swatch s-" + key }), label + ": ", h("strong", {}, figure));
    }),
  );
  return h(
    "figure",
    { class: "card chart-card", id: spec.id },
    h("figcaption", {}, spec.title),
    svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": spec.title + ", last " + n + " minutes" }, grid, axes, drawn),
    legend,
  );
}

function flowCharts(minutes) {
  return h(
    "section",
    { id: "flow" },
    h("h2", {}, "The last hour"),
    h("div", { class: "charts" }, FLOW_CHARTS.map((spec) => lineChart(spec, minutes))),
  );
}

// Consumer groups of the consumption ledger; failing and lag highlighted.
// Shown only once a group is registered: most deployments use none.
function consumersTable(items) {
  const rows = items.map((g) =>
    h(
      "tr",
      { class: g.failing ? "failed" : null },
      h("th", { scope: "row" }, g.group),
      h("td", { class: "topics" }, (g.topics || []).join(", ") || "—"),
      h("td", { class: "num" }, String(g.processed || 0)),
      h("td", { class: "num" + (g.failing ? " bad" : "") }, String(g.failing || 0)),
      h("td", { class: "num" }, String(g.in_progress || 0)),
      h("td", { class: "num" + (g.lag ? " warn" : "") }, String(g.lag || 0)),
    ),
  );
  return h(
    "section",
    { id: "consumers" },
    h("h2", {}, "Consumers"),
    table(["Group", "Topics", "Processed", "Failing", "In progress", "Lag"], rows, ""),
  );
}

// Reloads with `load` every REFRESH_MS, counted from the end of the last
// load: a slow answer delays the next request instead of stacking requests
// up behind it. Nothing is requested while the tab is hidden; showing it
// again reloads at once.
function startRefresh(load) {
  stopRefresh();
  const r = { timer: null, busy: false, stopped: false };
  r.tick = async () => {
    r.timer = null;
    if (r.stopped || r.busy || document.hidden) return;
    r.busy = true;
    try {
      await load();
    } finally {
      r.busy = false;
    }
    if (!r.stopped && !document.hidden) r.timer = setTimeout(r.tick, REFRESH_MS);
  };
  refresh = r;
  r.tick();
}

function stopRefresh() {
  if (!refresh) return;
  refresh.stopped = true;
  clearTimeout(refresh.timer);
  refresh = null;
}

document.addEventListener("visibilitychange", () => {
  if (refresh && !document.hidden && refresh.timer === null) refresh.tick();
});

// ---------------------------------------------------------------- alerts

const ALERT_STATES = ["", "pending", "delivered", "no_webhook"];

// The alert outbox: what reached the webhook and what still waits (pending
// first by default, with why its last POST failed).
async function alertsPage(params) {
  const state = params.has("state") ? params.get("state") : "pending";
  const cursor = params.get("cursor");
  const filter = state ? { state } : {};
  const select = h(
    "select",
    { id: "f-alert-state", name: "state" },
    ALERT_STATES.map((o) => h("option", { value: o, selected: state === o }, o || "any")),
  );
  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: (ev) => {
        ev.preventDefault();
        go("#/alerts?" + query({ state: select.value }));
      },
    },
    h("label", {}, "State ", select),
    h("button", { type: "submit", id: "apply-alert-filter" }, "Apply"),
  );
  const list = h("section", {}, h("p", { class: "muted" }, "Loading…"));
  show(h("h1", {}, "Alerts"), form, list);
  let page;
  try {
    page = await api("GET", "/v1/admin/alerts?" + query(filter, cursor ? { limit: PAGE_SIZE, cursor } : { limit: PAGE_SIZE }));
  } catch (e) {
    return failed(e);
  }
  const rows = page.items.map((a) =>
    h(
      "tr",
      { class: a.state === "pending" ? "failed" : null },
      h("td", { class: "num" }, String(a.alert_id)),
      h("td", {}, a.kind),
      h("td", { class: "num" }, h("a", { href: "#/messages/" + a.message_id }, String(a.message_id))),
      h("td", {}, a.biz_id),
      h("td", { class: "key" }, a.message_key),
      h("td", {}, h("span", { class: "badge " + (a.state === "pending" ? "bad" : a.state) }, a.state)),
      h("td", { class: "num" }, String(a.delivery_attempts)),
      h("td", { class: "num" }, since(a.created_at)),
      h("td", { class: "err" }, clip(a.last_delivery_error, 120)),
      h("td", { class: "key" }, a.trace_id || "—"),
    ),
  );
  const nav = h(
    "p",
    { class: "pager" },
    cursor ? h("a", { href: "#/alerts?" + query({ state }), class: "button secondary" }, "First page") : null,
    page.next_cursor
      ? h("a", { href: "#/alerts?" + query({ state }, { cursor: page.next_cursor }), class: "button" }, "Next page")
      : h("span", { class: "muted" }, "End of list"),
  );
  list.replaceChildren(
    table(
      ["Alert", "Kind", "Message", "Producer", "Key", "State", "POSTs", "Age", "Last delivery error", "Trace id"],
      rows,
      state === "pending" ? "Every alert has reached the webhook." : "No alert matches.",
    ),
    nav,
  );
}

// ---------------------------------------------------------------- outbox sources

// The producers' outbox tables this instance relays (the local message
// table way): each source's relay state and figures, and its failed rows,
// each with Retry and Give up (a reason and a confirmation first).
async function outboxPage() {
  const title = h("h1", {}, "Outbox sources");
  show(title, h("p", { class: "muted" }, "Loading…"));
  let list;
  try {
    list = await api("GET", "/v1/admin/outbox-sources");
  } catch (e) {
    return failed(e);
  }
  const items = list.items || [];
  if (!items.length) {
    return show(
      title,
      h("p", { class: "empty", id: "no-outbox-source" }, "This instance relays no outbox source: trustmsg serve --outbox-source BIZ_ID=DATABASE_URL starts one."),
    );
  }
  let sources;
  try {
    sources = await Promise.all(items.map(outboxSource));
  } catch (e) {
    return failed(e);
  }
  show(
    title,
    h(
      "p",
      { class: "muted" },
      "As this instance sees them: with several instances, one relays each source and the others stand by. Counts are since this instance started; the rows are counted every --backlog-interval.",
    ),
    ...sources,
    h("p", {}, h("button", { type: "button", class: "secondary", id: "outbox-refresh", onclick: () => outboxPage() }, "Refresh")),
  );
}

const RELAY_STATES = {
  starting: "starting",
  relaying: "relaying",
  standby: "standby: another instance relays it",
  waiting_for_producer: "waiting: its producer is not registered",
  down: "down: retried with backoff",
};

function count(n) {
  return n === null || n === undefined ? "not counted yet" : String(n);
}

// One source: its figures, then its failed rows (read from its database;
// a source that does not answer says so here, the others still show).
async function outboxSource(s) {
  const path = "/v1/admin/outbox-sources/" + encodeURIComponent(s.biz_id);
  const healthy = s.state === "relaying" || s.state === "standby";
  const badge = h("span", { class: "badge " + (s.state === "relaying" ? "sent" : healthy ? "pending" : "bad"), id: "outbox-state-" + s.biz_id }, RELAY_STATES[s.state] || s.state);
  const figures = kv([
    ["Database", h("span", { class: "url" }, s.database)],
    ["Table", s.table],
    ["Pending rows", count(s.pending_rows)],
    ["Oldest pending", age(s.oldest_pending_age_ms)],
    ["Failed rows", s.failed_rows ? h("strong", { class: "bad", id: "outbox-failed-" + s.biz_id }, String(s.failed_rows)) : count(s.failed_rows)],
    ["Relayed", s.relayed_total + " (" + (s.relayed_per_s || 0).toFixed(1) + " per second lately)"],
    ["Failed by this instance", String(s.failed_total)],
    ["Errors", String(s.errors_total)],
    ["Last error", s.last_error ? h("span", { class: "bad" }, s.last_error + " (" + since(s.last_error_at) + " ago)") : "—"],
    ["Last relayed", s.last_relayed_at ? when(s.last_relayed_at) + " (" + since(s.last_relayed_at) + " ago)" : "—"],
    ["Rows counted", s.stats_at ? since(s.stats_at) + " ago" : "not yet"],
  ]);
  const out = h("div", { class: "result", role: "status", id: "outbox-action-" + s.biz_id });
  let rows;
  try {
    const page = await api("GET", path + "/rows?status=failed&limit=" + PAGE_SIZE);
    const more = page.next_after
      ? h("p", { class: "muted small" }, "The first " + PAGE_SIZE + " failed rows; trustmsg admin outbox-rows " + s.biz_id + " --after " + page.next_after + " lists the next.")
      : null;
    rows = [table(["Id", "Key", "Topic", "Record key", "Retries", "Failed at", "Created", "Why", ""], page.items.map((r) => outboxRow(s, r, out)), "No failed row."), more];
  } catch (e) {
    if (e instanceof ApiFailure && (e.status === 401 || e.status === 403)) throw e;
    rows = [h("p", { class: "bad", id: "outbox-rows-error-" + s.biz_id }, "Its rows could not be read: " + (e.status ? e.status + " " + e.code + ": " : "") + e.message)];
  }
  return h(
    "section",
    { class: "card", id: "outbox-" + s.biz_id },
    h("h2", {}, "Producer " + s.biz_id + " ", badge),
    figures,
    h("h3", {}, "Failed rows"),
    rows,
    out,
  );
}

function outboxRow(s, r, out) {
  const ask = (action, label, hint) => () => {
    const reason = h("textarea", { id: "outbox-reason-" + s.biz_id, rows: 2, placeholder: "why (required, audited)", required: true });
    const result = h("div", {});
    out.replaceChildren(
      h("p", {}, label + " row " + r.id + " (key " + r.message_key + ", topic " + r.topic + ") of " + s.biz_id + "? " + hint),
      h("label", { for: "outbox-reason-" + s.biz_id }, "Reason"),
      reason,
      h(
        "button",
        {
          type: "button",
          id: "outbox-confirm-" + s.biz_id,
          class: "danger",
          onclick: async () => {
            const why = reason.value.trim();
            if (!why) return result.replaceChildren(h("p", { class: "bad" }, "A reason is required."));
            try {
              const done = await api("POST", "/v1/admin/outbox-sources/" + encodeURIComponent(s.biz_id) + "/rows/" + r.id + "/" + action, { reason: why });
              out.replaceChildren(h("p", { class: "ok" }, "Done: row " + r.id + " is now " + (done.row ? done.row.status : "relayed and deleted") + "."));
              setTimeout(() => {
                if (location.hash.startsWith("#/outbox")) outboxPage();
              }, 1500);
            } catch (e) {
              const lost = e instanceof ApiFailure && e.status === 409;
              result.replaceChildren(h("p", { class: "bad" }, (lost ? "Not done, the row changed first: " : "Not done: ") + e.message));
            }
          },
        },
        "Confirm",
      ),
      h("button", { type: "button", class: "secondary", onclick: () => out.replaceChildren() }, "Cancel"),
      result,
    );
    reason.focus();
  };
  return h(
    "tr",
    { class: "failed" },
    h("td", { class: "num" }, String(r.id)),
    h("td", { class: "key" }, r.message_key),
    h("td", {}, r.topic),
    h("td", { class: "key" }, r.record_key === null || r.record_key === undefined ? "—" : r.record_key),
    h("td", { class: "num" }, String(r.retry_count)),
    h("td", { class: "num" }, r.last_execute_time ? since(r.last_execute_time) + " ago" : "—"),
    h("td", {}, r.created ? r.created.replace("T", " ") : "—"),
    h("td", { class: "err" }, r.fail_reason || ""),
    h(
      "td",
      {},
      h("button", { type: "button", id: "outbox-retry-" + s.biz_id + "-" + r.id, onclick: ask("retry", "Retry", "It is relayed again as a new attempt: fix what its reason names first.") }, "Retry…"),
      h("button", { type: "button", class: "secondary", id: "outbox-give-up-" + s.biz_id + "-" + r.id, onclick: ask("give-up", "Give up", "It is never relayed; the source's retention deletes it later.") }, "Give up…"),
    ),
  );
}

// ---------------------------------------------------------------- messages

const FILTERS = ["status", "send_status", "biz_id", "topic", "created_after", "created_before"];
const STATUSES = ["", "PREPARED", "COMMITTED", "ROLLED_BACK", "VERIFY_FAILED"];
const SEND_STATUSES = ["", "PENDING", "SENT", "SEND_FAILED"];

function filterOf(params) {
  const f = {};
  for (const k of FILTERS) if (params.get(k)) f[k] = params.get(k);
  return f;
}

function query(filter, extra) {
  const q = new URLSearchParams({ ...filter, ...(extra || {}) });
  return q.toString();
}

function messageRows(items) {
  return items.map((m) =>
    h(
      "tr",
      { class: m.status === "VERIFY_FAILED" || m.send_status === "SEND_FAILED" ? "failed" : null },
      h("td", { class: "num" }, h("a", { href: "#/messages/" + m.id }, String(m.id))),
      h("td", {}, m.biz_id),
      h("td", { class: "key" }, m.message_key),
      h("td", {}, m.topic || "—"),
      h("td", {}, stateBadge(m.status)),
      h("td", {}, stateBadge(m.send_status), m.deliver_at ? h("br") : null, dueAt(m)),
      h("td", { class: "num" }, m.verify_attempts + " / " + m.send_attempts),
      h("td", { class: "num" }, since(m.created_at)),
      h("td", { class: "err" }, clip(m.last_error, 120)),
    ),
  );
}

const MESSAGE_HEADINGS = ["Id", "Producer", "Key", "Topic", "Status", "Send", "Attempts (check / send)", "Age", "Last error"];

async function messagesPage(params) {
  const filter = filterOf(params);
  const cursor = params.get("cursor");
  const select = (name, options) =>
    h(
      "select",
      { id: "f-" + name, name },
      options.map((o) => h("option", { value: o, selected: filter[name] === o }, o || "any")),
    );
  const input = (name, type, placeholder) =>
    h("input", { id: "f-" + name, name, type, value: filter[name] || "", placeholder });
  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: (ev) => {
        ev.preventDefault();
        const f = {};
        for (const k of FILTERS) {
          const v = form.elements[k].value.trim();
          if (v) f[k] = k.startsWith("created_") ? new Date(v).toISOString() : v;
        }
        go("#/messages?" + query(f));
      },
    },
    h("label", {}, "Status ", select("status", STATUSES)),
    h("label", {}, "Send status ", select("send_status", SEND_STATUSES)),
    h("label", {}, "Producer ", input("biz_id", "text", "biz_id")),
    h("label", {}, "Topic ", input("topic", "text", "topic")),
    h("label", {}, "Created after ", input("created_after", "text", "2026-01-01T00:00:00Z")),
    h("label", {}, "Created before ", input("created_before", "text", "2026-12-31T00:00:00Z")),
    h("button", { type: "submit", id: "apply-filter" }, "Apply"),
    h("a", { href: "#/messages", class: "button secondary" }, "Clear"),
  );
  const attention = h("section", {});
  const list = h("section", {}, h("p", { class: "muted" }, "Loading…"));
  const bulk = h("section", {});
  show(h("h1", {}, "Messages"), form, attention, list, bulk);

  // With no status filter, what needs a person comes first.
  if (!filter.status && !filter.send_status && !cursor) {
    try {
      const base = { ...filter, limit: PAGE_SIZE };
      const [vf, sf] = await Promise.all([
        api("GET", "/v1/admin/messages?" + query(base, { status: "VERIFY_FAILED" })),
        api("GET", "/v1/admin/messages?" + query(base, { send_status: "SEND_FAILED" })),
      ]);
      const failedItems = [...vf.items, ...sf.items].sort((a, b) => b.id - a.id);
      if (failedItems.length) {
        attention.replaceChildren(
          h("h2", { class: "bad" }, "Needs attention (" + failedItems.length + (vf.next_cursor || sf.next_cursor ? "+" : "") + ")"),
          table(MESSAGE_HEADINGS, messageRows(failedItems), ""),
        );
      }
    } catch (e) {
      return failed(e);
    }
  }

  let page;
  try {
    page = await api("GET", "/v1/admin/messages?" + query(filter, cursor ? { limit: PAGE_SIZE, cursor } : { limit: PAGE_SIZE }));
  } catch (e) {
    return failed(e);
  }
  const nav = h(
    "p",
    { class: "pager" },
    cursor ? h("a", { href: "#/messages?" + query(filter), class: "button secondary" }, "First page") : null,
    page.next_cursor
      ? h("a", { href: "#/messages?" + query(filter, { cursor: page.next_cursor }), class: "button", id: "next-page" }, "Next page")
      : h("span", { class: "muted" }, "End of list"),
  );
  list.replaceChildren(
    h("h2", {}, "All matching, newest first"),
    table(MESSAGE_HEADINGS, messageRows(page.items), "No message matches these filters."),
    nav,
  );
  bulk.replaceChildren(bulkActions(filter));
}

function bulkActions(filter) {
  const reason = h("input", { id: "bulk-reason", type: "text", placeholder: "why (required)", required: true });
  const out = h("div", { class: "result", role: "status" });
  const run = (action) => async () => {
    out.replaceChildren();
    const why = reason.value.trim();
    if (!why) return out.replaceChildren(h("p", { class: "bad" }, "A reason is required."));
    let dry;
    try {
      dry = await api("POST", "/v1/admin/messages/" + action, { filter, reason: why, dry_run: true });
    } catch (e) {
      return out.replaceChildren(h("p", { class: "bad" }, e.message));
    }
    const verb = action === "reverify" ? "Re-verify" : "Redeliver";
    if (!dry.matched) return out.replaceChildren(h("p", {}, "No message matches: nothing to " + verb.toLowerCase() + "."));
    out.replaceChildren(
      h("p", {}, "Dry run: " + dry.matched + " message(s) match."),
      h(
        "button",
        {
          type: "button",
          id: "bulk-confirm",
          class: "danger",
          onclick: async () => {
            try {
              const done = await api("POST", "/v1/admin/messages/" + action, { filter, reason: why, dry_run: false });
              out.replaceChildren(h("p", { class: "ok" }, verb + ": " + done.changed + " of " + done.matched + " changed."));
            } catch (e) {
              out.replaceChildren(h("p", { class: "bad" }, e.message));
            }
          },
        },
        "Confirm: " + verb.toLowerCase() + " " + dry.matched,
      ),
      h("button", { type: "button", class: "secondary", onclick: () => out.replaceChildren() }, "Cancel"),
    );
  };
  return h(
    "details",
    { class: "card" },
    h("summary", {}, "Bulk actions on every message matching these filters"),
    h("p", { class: "muted" }, "Re-verify applies to VERIFY_FAILED messages, redeliver to SEND_FAILED ones; a dry run shows the count first."),
    h("label", { for: "bulk-reason" }, "Reason"),
    reason,
    h("div", { class: "actions" },
      h("button", { type: "button", id: "bulk-reverify", onclick: run("reverify") }, "Re-verify…"),
      h("button", { type: "button", id: "bulk-redeliver", onclick: run("redeliver") }, "Redeliver…"),
    ),
    out,
  );
}

// ---------------------------------------------------------------- one message

function payloadView(d) {
  const box = h("div", {});
  if (d.payload_encoding === "base64") {
    const bytes = base64ToBytes(d.payload || "");
    let mode = "hex";
    const pre = h("pre", { class: "payload", id: "payload" });
    const render = () => {
      const text = mode === "hex" ? hex(bytes) : d.payload;
      pre.textContent = text;
    };
    render();
    box.append(
      h("p", { class: "muted" }, "Binary payload, " + bytes.length + " bytes. "),
      h("button", { type: "button", class: "secondary", onclick: () => { mode = mode === "hex" ? "base64" : "hex"; render(); } }, "Hex / base64"),
      pre,
    );
    return box;
  }
  const text = d.payload || "";
  const pre = h("pre", { class: "payload", id: "payload" });
  pre.textContent = text.length > PAYLOAD_PREVIEW ? text.slice(0, PAYLOAD_PREVIEW) : text;
  box.append(pre);
  if (text.length > PAYLOAD_PREVIEW) {
    const more = h("button", { type: "button", class: "secondary", id: "show-all" }, "Show all " + text.length + " characters");
    more.addEventListener("click", () => {
      pre.textContent = text;
      more.remove();
    });
    box.append(more);
  }
  return box;
}

// The message's story, in order: prepared, decided (by whom, from the
// audit trail), sent (partition, offset), then what each consumer group
// did with it (the consumption ledger's `consumptions`, absent when none).
function story(d) {
  const m = d.message;
  const lines = [];
  const line = (step, at, bad, ...text) => lines.push({ step, at: at ? Date.parse(at) : Infinity, bad, text });
  line("prepared", m.created_at, false, "Prepared by producer ", h("strong", {}, m.biz_id), " at ", h("time", {}, when(m.created_at)));
  for (const a of d.audit || []) {
    const by = [" by ", h("strong", {}, a.actor)];
    const at = [" at ", h("time", {}, when(a.at))];
    const why = a.reason ? h("span", { class: "reason" }, a.reason) : null;
    if (a.to_status === "COMMITTED" && a.from_status !== "COMMITTED") line("decided", a.at, false, "Committed", by, at, why);
    else if (a.to_status === "ROLLED_BACK" && a.from_status !== "ROLLED_BACK") line("decided", a.at, false, "Rolled back", by, at, why);
    else if (a.to_status === "VERIFY_FAILED" && a.from_status !== "VERIFY_FAILED") line("verify-failed", a.at, true, "No decision from check-back: VERIFY_FAILED", at, why);
    else if (a.to_send_status === "SEND_FAILED" && a.from_send_status !== "SEND_FAILED") line("send-failed", a.at, true, "Sending failed: SEND_FAILED", at, why);
    else if (a.action !== "commit" && a.action !== "rollback") line("action", a.at, false, a.action, by, at, why);
  }
  if (m.kafka_partition !== null && m.kafka_partition !== undefined) {
    line("sent", m.sent_at, false, "Sent to ", h("strong", {}, m.topic || "—"), ", partition " + m.kafka_partition + ", offset " + m.kafka_offset, m.sent_at ? [" at ", h("time", {}, when(m.sent_at))] : null);
  } else if (m.status === "COMMITTED" && m.send_status === "PENDING") {
    line("waiting", null, false, scheduled(m) ? ["Waiting for its delivery time: ", dueAt(m)] : "Waiting to be sent");
  }
  const consumed = [];
  for (const c of d.consumptions || []) {
    const group = h("strong", {}, c.group);
    const tries = c.attempts + (c.attempts === 1 ? " attempt" : " attempts");
    if (c.state === "done") {
      consumed.push({ step: "consumed", at: Date.parse(c.finished_at || c.updated_at), bad: false, text: ["Processed by ", group, " at ", h("time", {}, when(c.finished_at || c.updated_at)), " (" + tries + ")"] });
    } else if (c.state === "failed") {
      consumed.push({
        step: "consume-failed",
        at: Date.parse(c.last_began_at || c.updated_at),
        bad: true,
        text: ["Failing in ", group, " (" + tries + ", last at ", h("time", {}, when(c.last_began_at || c.updated_at)), ")", c.last_error ? h("span", { class: "reason" }, "last error: " + c.last_error) : null],
      });
    } else {
      consumed.push({ step: "consuming", at: Date.parse(c.last_began_at || c.updated_at), bad: false, text: ["In progress in ", group, " since ", h("time", {}, when(c.last_began_at || c.updated_at)), " (" + tries + ")"] });
    }
  }
  // Prepared, decided and sent in the order they happened; what consumers
  // did comes after, by time.
  const ordered = lines.sort((a, b) => a.at - b.at).concat(consumed.sort((a, b) => a.at - b.at));
  return h(
    "ol",
    { class: "timeline story", id: "story" },
    ordered.map((l) => h("li", { "data-step": l.step, class: l.bad ? "bad" : null }, l.text)),
  );
}

function kv(pairs) {
  return h("dl", { class: "kv" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

async function messagePage(id) {
  show(h("p", { class: "muted" }, "Loading…"));
  let d;
  try {
    d = await api("GET", "/v1/admin/messages/" + encodeURIComponent(id));
  } catch (e) {
    if (e instanceof ApiFailure && e.status === 404) return show(h("h1", {}, "Message " + id), h("p", { class: "empty" }, "No such message."));
    return failed(e);
  }
  const m = d.message;
  const headers = Object.entries(d.headers || {});
  const audit = (d.audit || []).map((a) =>
    h(
      "li",
      {},
      h("time", {}, when(a.at || a.created_at)),
      " ",
      h("strong", {}, a.action),
      " by ",
      a.actor,
      ": ",
      (a.from_status || "—") + " → " + (a.to_status || "—"),
      a.from_send_status || a.to_send_status ? " (send " + (a.from_send_status || "—") + " → " + (a.to_send_status || "—") + ")" : "",
      a.reason ? h("div", { class: "reason" }, a.reason) : null,
    ),
  );
  const attempts = (d.check_attempts || []).map((c) =>
    h(
      "tr",
      { class: c.outcome === "failed" ? "failed" : null },
      h("td", { class: "num" }, String(c.attempt)),
      h("td", {}, when(c.at)),
      h("td", { class: "num" }, c.duration_ms + " ms"),
      h("td", { class: "num" }, c.http_status === null || c.http_status === undefined ? "—" : String(c.http_status)),
      h("td", {}, c.outcome),
      h("td", { class: "err" }, c.error || ""),
    ),
  );
  show(
    h("p", {}, h("a", { href: "#/messages" }, "← Messages")),
    h("h1", {}, "Message " + m.id),
    h("div", { class: "state" }, stateBadge(m.status), " ", stateBadge(m.send_status)),
    h("h2", {}, "Story"),
    story(d),
    kv([
      ["Producer", m.biz_id],
      ["Message key", h("span", { class: "key" }, m.message_key)],
      ["Topic", m.topic || "—"],
      ["Record key", m.key === null || m.key === undefined ? "—" : m.key],
      ["Check-back attempts", String(m.verify_attempts)],
      ["Send attempts", String(m.send_attempts)],
      ["Last error", m.last_error || "—"],
      ...(m.order_seq ? [["Place in its key", String(m.order_seq) + " (ordered producer: sent in commit order)"]] : []),
      ...(d.blocked_by
        ? [["Blocked by", h("span", { id: "blocked-by" }, "message ", h("a", { href: "#/messages/" + d.blocked_by }, String(d.blocked_by)), ", the earliest message of this key not yet sent: this one goes once it is SENT or skipped")]]
        : []),
      ["Kafka partition / offset", m.kafka_partition === null || m.kafka_partition === undefined ? "not sent yet" : m.kafka_partition + " / " + m.kafka_offset],
      ["Trace id", m.trace_id ? h("span", { class: "key", id: "trace-id" }, m.trace_id) : "— (prepared without a traceparent)"],
      ["Created", when(m.created_at) + " (" + since(m.created_at) + " ago)"],
      ["Decided", when(m.decided_at)],
      ["Delivery time", m.deliver_at ? dueAt(m) : "at once (not delayed)"],
      ["Sent", when(m.sent_at)],
    ]),
    actions(m),
    h("h2", {}, "Payload"),
    payloadView(d),
    h("h2", {}, "Headers"),
    table(["Name", "Value"], headers.map(([k, v]) => h("tr", {}, h("td", { class: "key" }, k), h("td", {}, v))), "No headers."),
    h("h2", {}, "Check-back attempts"),
    table(["#", "At", "Took", "HTTP", "Outcome", "Error"], attempts, "No check-back call yet."),
    h("h2", {}, "Audit trail"),
    audit.length ? h("ol", { class: "timeline" }, audit) : h("p", { class: "empty" }, "Nothing recorded yet."),
  );
}

function actions(m) {
  const possible = [];
  if (m.status === "PREPARED" || m.status === "VERIFY_FAILED") {
    possible.push(["resolve-commit", "Commit", "resolve", { decision: "commit" }]);
    possible.push(["resolve-rollback", "Roll back", "resolve", { decision: "rollback" }]);
  }
  if (m.status === "VERIFY_FAILED") possible.push(["reverify", "Re-verify", "reverify", {}]);
  if (m.send_status === "SEND_FAILED") possible.push(["redeliver", "Redeliver", "redeliver", {}]);
  // The SEND_FAILED head of an ordered key: give up on it, the messages
  // waiting behind it go.
  if (m.send_status === "SEND_FAILED" && m.order_seq) possible.push(["skip", "Skip (let the key's later messages go)", "skip", {}]);
  if (scheduled(m)) possible.push(["send-now", "Send now", "send-now", {}]);
  if (!possible.length) return null;
  const reason = h("textarea", { id: "reason", rows: 2, placeholder: "why (required, audited)", required: true });
  const out = h("div", { class: "result", role: "status", id: "action-result" });
  const buttons = possible.map(([id, label, path, extra]) =>
    h(
      "button",
      {
        type: "button",
        id: "action-" + id,
        onclick: () => {
          const why = reason.value.trim();
          if (!why) return out.replaceChildren(h("p", { class: "bad" }, "A reason is required."));
          out.replaceChildren(
            h("p", {}, label + " message " + m.id + " (" + m.biz_id + " / " + m.message_key + ")?"),
            h(
              "button",
              {
                type: "button",
                id: "confirm",
                class: "danger",
                onclick: async () => {
                  try {
                    const view = await api("POST", "/v1/admin/messages/" + m.id + "/" + path, { ...extra, reason: why });
                    const v = view.message || view;
                    out.replaceChildren(h("p", { class: "ok" }, "Done: the message is now " + v.status + (v.send_status ? " / " + v.send_status : "") + "."));
                    setTimeout(() => messagePage(String(m.id)), 1200);
                  } catch (e) {
                    const lost = e instanceof ApiFailure && e.status === 409;
                    out.replaceChildren(h("p", { class: "bad" }, (lost ? "Not done, the message changed first: " : "Not done: ") + e.message));
                  }
                },
              },
              "Confirm",
            ),
            h("button", { type: "button", class: "secondary", onclick: () => out.replaceChildren() }, "Cancel"),
          );
        },
      },
      label + "…",
    ),
  );
  return h("section", { class: "card" }, h("h2", {}, "Actions"), h("label", { for: "reason" }, "Reason"), reason, h("div", { class: "actions" }, buttons), out);
}

// ---------------------------------------------------------------- producers

async function producersPage() {
  show(h("h1", {}, "Producers"), h("p", { class: "muted" }, "Loading…"));
  let list;
  try {
    list = await api("GET", "/v1/producers");
  } catch (e) {
    return failed(e);
  }
  const items = Array.isArray(list) ? list : list.items || list.producers || [];
  const unlisted = items.filter((p) => p.topics_missing);
  const rows = items.map((p) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, h("a", { href: "#/producers/" + encodeURIComponent(p.biz_id) }, p.biz_id)),
      h("td", { class: "topics" }, topicsCell(p)),
      h("td", { class: "url" }, p.verify_url),
      h("td", { class: "num" }, p.verify_timeout_ms + " ms"),
      h("td", { class: "num" }, p.first_verify_after_ms + " ms"),
      h("td", { class: "num" }, String(p.max_verify_attempts)),
      h("td", {}, p.ordered ? "in order per key" : "—"),
    ),
  );
  show(
    h("h1", {}, "Producers"),
    h("p", {}, h("a", { href: "#/producers/new", class: "button", id: "register" }, "Register a producer")),
    ...(unlisted.length
      ? [
          h(
            "p",
            { class: "warning", id: "unlisted-warning", role: "alert" },
            unlisted.length + (unlisted.length === 1 ? " producer has" : " producers have") +
              " no topic allow-list and may publish to any topic: " + unlisted.map((p) => p.biz_id).join(", ") +
              ". Open each one and list its topics.",
          ),
        ]
      : []),
    table(["Producer", "Topics", "Check-back URL", "Timeout", "First check after", "Max attempts", "Ordered"], rows, "No producer is registered yet."),
  );
}

// A registration's topic allow-list; a missing one is a warning badge.
function topicsCell(p) {
  if (p.topics_missing || !p.topics) {
    return h("span", { class: "badge warn", title: "No topic allow-list: this producer may publish to any topic" }, "any topic (no allow-list)");
  }
  return p.topics.join(", ");
}

// What the topics field holds: comma- or space-separated entries.
function topicsOf(text) {
  return text.split(/[\s,]+/).filter((t) => t.length > 0);
}

function secretBox(label, value, id) {
  const code = h("code", { id }, value);
  return h(
    "div",
    { class: "secret" },
    h("p", {}, label),
    code,
    h("button", { type: "button", class: "secondary", onclick: () => navigator.clipboard && navigator.clipboard.writeText(value) }, "Copy"),
  );
}

async function producerForm(bizId) {
  let p = null;
  if (bizId) {
    try {
      p = await api("GET", "/v1/producers/" + encodeURIComponent(bizId));
    } catch (e) {
      if (e instanceof ApiFailure && e.status === 404) return show(h("h1", {}, bizId), h("p", { class: "empty" }, "No such producer."));
      return failed(e);
    }
  }
  const field = (name, label, type, value, attrs) =>
    [h("label", { for: "p-" + name }, label), h("input", { id: "p-" + name, name, type, value: value === undefined || value === null ? "" : value, ...(attrs || {}) })];
  const out = h("div", { class: "result", role: "status", id: "producer-result" });
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        const el = form.elements;
        const id = bizId || el.biz_id.value.trim();
        if (!id) return out.replaceChildren(h("p", { class: "bad" }, "A producer id (biz_id) is required."));
        const body = { verify_url: el.verify_url.value.trim() };
        for (const k of ["verify_timeout_ms", "first_verify_after_ms", "max_verify_attempts"]) {
          if (el[k].value.trim()) body[k] = Number(el[k].value);
        }
        // Left empty: no allow-list (an update then removes the list).
        const topics = topicsOf(el.topics.value);
        if (topics.length) body.topics = topics;
        if (el.ordered.checked) body.ordered = true;
        try {
          const saved = await api("PUT", "/v1/producers/" + encodeURIComponent(id), body);
          out.replaceChildren(
            h("p", { class: "ok" }, bizId ? "Saved." : "Registered " + id + "."),
            saved.topics_missing ? h("p", { class: "warning" }, "It has no topic allow-list: it may publish to any topic.") : null,
            saved.token ? secretBox("Its token, shown once: copy it now.", saved.token, "new-token") : null,
            saved.signing_secret ? secretBox("Its check-back signing secret (shown again only on request):", saved.signing_secret, "new-signing-secret") : null,
          );
        } catch (e) {
          out.replaceChildren(h("p", { class: "bad" }, e.message));
        }
      },
    },
    h("h1", {}, bizId ? "Producer " + bizId : "Register a producer"),
    bizId ? null : field("biz_id", "Producer id (biz_id)", "text", "", { required: true, maxlength: 64 }),
    field("verify_url", "Check-back URL", "url", p && p.verify_url, { required: true }),
    field("verify_timeout_ms", "Check-back timeout (ms)", "number", p && p.verify_timeout_ms, { min: 1 }),
    field("first_verify_after_ms", "First check after (ms)", "number", p && p.first_verify_after_ms, { min: 0 }),
    field("max_verify_attempts", "Max check-back attempts", "number", p && p.max_verify_attempts, { min: 1 }),
    field("topics", "Topics it may publish to (exact names or prefixes ending in *, comma-separated; * for any)", "text", p && p.topics ? p.topics.join(", ") : "", {
      placeholder: "orders, shop.*",
    }),
    p && p.topics_missing ? h("p", { class: "warning", id: "topics-missing" }, "No topic allow-list: this producer may publish to any topic.") : null,
    h(
      "label",
      { for: "p-ordered", class: "check" },
      h("input", { id: "p-ordered", name: "ordered", type: "checkbox", checked: !!(p && p.ordered) }),
      " In order per key: the messages of one topic and record key are sent one after the other, in commit order",
    ),
    h("button", { type: "submit", id: "save-producer" }, bizId ? "Save" : "Register"),
  );
  const danger = bizId ? producerDanger(bizId, out) : null;
  show(h("p", {}, h("a", { href: "#/producers" }, "← Producers")), form, danger, out);
}

function producerDanger(bizId, out) {
  const confirmDelete = () =>
    out.replaceChildren(
      h("p", {}, "Delete the registration of " + bizId + "? Its token stops working and its messages are no longer checked back."),
      h(
        "button",
        {
          type: "button",
          class: "danger",
          id: "confirm",
          onclick: async () => {
            try {
              await api("DELETE", "/v1/producers/" + encodeURIComponent(bizId));
              go("#/producers");
            } catch (e) {
              out.replaceChildren(h("p", { class: "bad" }, e.message));
            }
          },
        },
        "Delete",
      ),
      h("button", { type: "button", class: "secondary", onclick: () => out.replaceChildren() }, "Cancel"),
    );
  const rotate = () =>
    out.replaceChildren(
      h("p", {}, "Issue a new token for " + bizId + "? The current one stops working at once."),
      h(
        "button",
        {
          type: "button",
          class: "danger",
          id: "confirm",
          onclick: async () => {
            try {
              const r = await api("POST", "/v1/producers/" + encodeURIComponent(bizId) + "/rotate-token");
              out.replaceChildren(secretBox("The new token, shown once: copy it now.", r.token, "new-token"));
            } catch (e) {
              out.replaceChildren(h("p", { class: "bad" }, e.message));
            }
          },
        },
        "Rotate",
      ),
      h("button", { type: "button", class: "secondary", onclick: () => out.replaceChildren() }, "Cancel"),
    );
  const reveal = async () => {
    try {
      const r = await api("POST", "/v1/producers/" + encodeURIComponent(bizId) + "/reveal-signing-secret");
      out.replaceChildren(secretBox("Its check-back signing secret (this reveal is logged):", r.signing_secret, "signing-secret"));
    } catch (e) {
      out.replaceChildren(h("p", { class: "bad" }, e.message));
    }
  };
  return h(
    "section",
    { class: "card" },
    h("h2", {}, "Token and registration"),
    h("div", { class: "actions" },
      h("button", { type: "button", id: "rotate-token", onclick: rotate }, "Rotate token…"),
      h("button", { type: "button", id: "reveal-signing-secret", class: "secondary", onclick: reveal }, "Reveal signing secret"),
      h("button", { type: "button", id: "delete-producer", class: "danger", onclick: confirmDelete }, "Delete…"),
    ),
  );
}

// ---------------------------------------------------------------- start

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    go("#/");
  });
  route();
});
