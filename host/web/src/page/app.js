// Latch's page: renders the server's reducers (GET /api/sessions/{id}) and
// follows the session's event stream. Durable events carry `id: <seq>`, so
// a dropped stream resumes with Last-Event-ID; transient deltas (streamed
// text) are shown until the commit lands.
//
// Auth: `latch serve` prints /#token=CODE, a link good for one tab; the
// fragment never reaches a server. The page clears it from the address bar
// at once, exchanges the code (POST /api/tab, once) for this tab's own
// credential, keeps that in sessionStorage (per tab, per origin, so per
// port) and sends it as `Authorization: Bearer` on every request. The link
// left in the browser's history opens nothing. No cookie carries the
// credential: cookies reach every port of the host. The event stream is
// read with fetch, since EventSource cannot set that header.
//
// A tab's credential holds until `latch serve --new-token`, so after a
// restart the stream reconnects by itself; until then the page says the
// server is unreachable. The draft in the input is kept in localStorage, and a
// message that could not be sent goes back into it, as do its attached
// images (attach.js); each user message can rewind the files (rewind.js).
"use strict";

const SLASH = ["/context", "/compact", "/recall ", "/resume", "/group", "/interrupt", "/help"];
let CUSTOM = [];        // custom commands: [{usage, help}] from GET /api/commands
const TOKEN_KEY = "latch-token";
let current = null;     // session id
let stream = null;      // AbortController of the open event stream
let lastSeq = 0;        // last durable seq rendered
let streamSeq = 0;      // last durable seq the stream delivered
let refreshTimer = null;
let wantedSession = ""; // the session the URL names, if any
let queued = [];        // messages queued during a running turn: {text, users}
let userCount = 0;      // user messages in the rendered transcript
let lastTurn = "idle";  // the header's turn state
let canStart = true;    // the server has a provider (GET /api/server)
const DRAFT_KEY = "latch-draft";
let imagesBySeq = {};   // the user messages' images, by seq (state.images)
let linkRefused = false; // the URL's link was used already (its notice stays)

// Take the link's code from the URL (`#token=…[&session=…]`, or an older
// `?token=…`), leave the address bar without it, and exchange it for this
// tab's credential. A used link opens nothing: the page says so (a tab that
// already has its credential, reloaded, keeps it).
async function takeToken() {
  const hash = location.hash.slice(1);
  const params = new URLSearchParams(hash.includes("=") ? hash : "");
  const query = new URLSearchParams(location.search);
  const code = params.get("token") || query.get("token");
  wantedSession = hash.includes("=") ? (params.get("session") || "") : hash;
  if (code || query.has("token")) {
    history.replaceState(null, "", "/" + (wantedSession ? "#" + wantedSession : ""));
  }
  if (!code) return;
  let r;
  try {
    r = await fetch("/api/tab", {
      method: "POST", credentials: "omit", cache: "no-store",
      headers: { authorization: "Bearer " + code },
    });
  } catch (e) {
    unreachable();
    return;
  }
  let body = null;
  try { body = await r.json(); } catch (_) { body = null; }
  if (r.ok && body && body.credential) {
    sessionStorage.setItem(TOKEN_KEY, body.credential);
    return;
  }
  if (sessionStorage.getItem(TOKEN_KEY)) return;
  notice("This link opens nothing: " + ((body && body.error) ||
    "open the newest link `latch serve` printed") + ".");
  linkRefused = true;
}

function authHeaders(extra) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const h = Object.assign({}, extra || {});
  if (token) h.authorization = "Bearer " + token;
  return h;
}

const $ = (id) => document.getElementById(id);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

async function api(path, options) {
  const o = Object.assign({ credentials: "omit", cache: "no-store" }, options || {});
  o.headers = authHeaders(o.headers);
  let r;
  try {
    r = await fetch("/api" + path, o);
  } catch (e) {
    unreachable();
    throw e;
  }
  let body = null;
  try { body = await r.json(); } catch (_) { body = null; }
  if (r.status === 401) {
    if (!linkRefused) {
      notice("Not authorized: open the URL that `latch serve` printed (it carries the token). " +
        ((body && body.error) || ""));
    }
    throw new Error("401");
  }
  if (!r.ok) {
    const msg = (body && body.error) || ("HTTP " + r.status);
    notice(msg);
    throw new Error(msg);
  }
  return body;
}

function notice(text) {
  const n = $("notice");
  n.textContent = text;
  n.hidden = !text;
}

function status(text) { $("status").textContent = text; }

// The server did not answer: say so, and how the page recovers.
function unreachable() {
  status("server unreachable");
  notice("The Latch server is not answering (stopped or restarting). This tab reconnects by " +
    "itself once `latch serve` runs again in this workspace; your draft is kept. If it " +
    "was started with --new-token, open the URL it printed.");
  document.body.dataset.unreachable = "1";
}

// The header's turn state, from the reducers' activity.
function turnState(kind, label) {
  const b = $("turn-state");
  const words = { idle: "ready", interrupted: "interrupted" };
  b.dataset.state = kind;
  b.textContent = words[kind] || ("working: " + label);
  lastTurn = kind;
}

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return new Date(ms).toLocaleDateString();
}

const STATE_WORDS = { running: "running", busy: "in use elsewhere", interrupted: "interrupted", ready: "ready" };

async function loadSessions() {
  const data = await api("/sessions");
  const list = $("session-list");
  list.replaceChildren();
  const add = (parent, s) => {
    const li = el("li", s.id === current ? "current" : "");
    const row = el("button", "session");
    row.type = "button";
    row.appendChild(el("span", "first", s.first_message || "(no messages yet)"));
    const meta = el("span", "meta");
    meta.appendChild(el("span", "state state-" + s.state, STATE_WORDS[s.state] || s.state));
    meta.appendChild(el("span", "when", ago(s.updated_ms)));
    row.appendChild(meta);
    row.title = s.id + " · " + s.provider + " · " + s.model + (s.driver ? " · driven by " + s.driver : "");
    li.appendChild(row);
    li.dataset.session = s.id;
    li.addEventListener("click", (ev) => { ev.stopPropagation(); open(s.id); });
    if (s.children && s.children.length) {
      const ul = el("ul");
      s.children.forEach((c) => add(ul, c));
      li.appendChild(ul);
    }
    parent.appendChild(li);
  };
  data.sessions.forEach((s) => add(list, s));
  return data.sessions;
}

function renderItem(i) {
  switch (i.kind) {
    case "user": {
      // The message (its images as thumbnails) and its Rewind button.
      const row = el("div", "user-row");
      row.dataset.seq = i.seq;
      const images = imagesBySeq[i.seq] || [];
      // The thumbnails stand for the text's `[image …]` placeholders.
      const d = el("div", "item user", images.length ? i.text.replace(/\s*\[image image\/[a-z]+ [0-9a-f]+\]/g, "") : i.text);
      if (images.length) {
        const strip = el("div", "thumbs");
        images.forEach((m) => strip.appendChild(thumb(current, m)));
        d.appendChild(strip);
      }
      const b = el("button", "rewind", "Rewind");
      b.type = "button";
      b.title = "Put the files back to their state before this message (shows what changes first)";
      b.addEventListener("click", () => rewindTo(i.seq, i.text).catch(() => {}));
      row.append(d, b);
      return row;
    }
    case "assistant": return el("div", "item assistant", i.text);
    case "tool": {
      const d = el("div", "item tool");
      d.dataset.call = i.call_id;
      d.appendChild(el("span", "status-" + i.status, "[" + i.status + "] "));
      d.appendChild(el("span", "", i.name + " " + i.summary));
      if (i.diff && i.diff.length) {
        const pre = el("pre", "diff");
        i.diff.forEach(([k, line]) => pre.appendChild(el("div", k, (k === "added" ? "+ " : k === "removed" ? "- " : "") + line)));
        d.appendChild(pre);
      } else if (i.output) {
        d.appendChild(el("pre", "output", i.output));
      }
      return d;
    }
    case "divider": return el("div", "item divider", i.divider + (i.detail ? ": " + i.detail : ""));
    case "notification": return el("div", "item notification", i.source + ": " + i.text);
    case "denied": return el("div", "item denied", "denied " + i.tool + ": " + i.reason);
    case "validation": return el("div", "item validation", (i.passed ? "✓ " : "✗ ") + i.command);
    case "certification": return el("div", "item certification", i.certified ? "certified" : "not certified: " + i.blockers.join("; "));
    case "reground": return el("div", "item reground", "↺ re-ground: " + i.text);
    case "child": return el("div", "item child", "agent " + i.role + " (" + i.child + "): " + i.task);
    default: return el("div", "item", JSON.stringify(i));
  }
}

function kv(parent, k, v) {
  const row = el("div", "kv");
  row.appendChild(el("b", "", k + ": "));
  row.appendChild(document.createTextNode(typeof v === "string" ? v : JSON.stringify(v)));
  parent.appendChild(row);
}

function render(state) {
  const d = state.durable;
  lastSeq = Math.max(lastSeq, d.seq);
  const t = $("transcript");
  imagesBySeq = state.images || {};
  t.replaceChildren(...d.transcript.map(renderItem));
  renderPermission(state.permission, d.permission);
  $("streaming").textContent = state.streaming || "";
  t.scrollTop = t.scrollHeight;
  $("activity").textContent = state.activity.label;
  turnState(state.activity.kind, state.activity.label);
  running(!["idle", "interrupted"].includes(state.activity.kind));
  renderTask(d.task || {});
  const ctx = $("context");
  ctx.replaceChildren();
  const r = state.report;
  if (r) {
    ctx.appendChild(el("div", "kv", "≈" + r.total_tokens + " of " + r.limit_tokens + " tokens"));
    if (r.request_tokens > 0) {
      ctx.appendChild(el("div", "kv", "cacheable ≈" + Math.round(100 * r.common_prefix_tokens / r.request_tokens) + "%"));
    }
  } else {
    ctx.appendChild(el("div", "kv dim", "no report yet (/context)"));
  }
  ctx.appendChild(el("div", "kv", "workspace generation " + d.generation));
  const u = $("usage");
  u.replaceChildren();
  const known = (n) => (n === null || n === undefined ? "–" : String(n));
  u.appendChild(el("div", "kv", d.usage.requests.length + " requests · " + known(d.usage.input_tokens) + " in · " + known(d.usage.output_tokens) + " out"));
  u.appendChild(el("div", "kv", d.usage.hit_rate === null ? "cache hit rate unknown" : "cache hit rate " + (100 * d.usage.hit_rate).toFixed(1) + "%"));
  if (d.usage.cost) {
    const cost = el("div", "kv", "cost " + d.usage.cost.text);
    cost.id = "cost";
    u.appendChild(cost);
  }
  const users = d.transcript.filter((i) => i.kind === "user").map((i) => i.text);
  userCount = users.length;
  // A queued message is delivered once the transcript has it.
  queued = queued.filter((q) => users.slice(q.users).every((t) => !t.includes(q.text)));
  renderQueue();
  const ch = $("children");
  ch.replaceChildren(...d.children.map((c) => el("div", "kv", c.role + " · " + c.status + " · " + c.task)));
  const g = $("group");
  g.replaceChildren();
  if (d.group) { g.appendChild(el("div", "kv", d.group.title)); d.group.lines.forEach((l) => g.appendChild(el("div", "kv", l))); }
}

// The task state as the terminal's sidebar shows it: goal, constraints,
// decisions, hypotheses (rejected ones struck), evidence, failures.
function renderTask(t) {
  const box = $("task");
  box.replaceChildren();
  const entry = (mark, text, cls) => {
    const row = el("div", "entry " + (cls || ""));
    row.appendChild(el("span", "mark", mark));
    row.appendChild(el("span", "", text));
    box.appendChild(row);
  };
  if (t.goal && t.goal.text) entry("goal", t.goal.text);
  else box.appendChild(el("div", "kv dim", "no goal recorded yet"));
  (t.constraints || []).slice(-6).forEach((c) => entry("!", c.text));
  (t.decisions || []).slice(-6).forEach((c) => entry("→", c.text));
  const is = (v, w) => String(v).toLowerCase() === w;
  (t.hypotheses || []).slice(-6).forEach((h) => entry(is(h.status, "rejected") ? "✗" : "?", h.text, is(h.status, "rejected") ? "rejected" : ""));
  (t.evidence || []).slice(-6).forEach((e) => entry(is(e.outcome, "passed") ? "✓" : "✗",
    e.requirement + (e.stale ? " (stale)" : "") + " @gen " + e.generation, e.stale ? "dim" : is(e.outcome, "passed") ? "passed" : "failed"));
  (t.failures || []).slice(-6).forEach((f) => entry("⚠" + f.count, f.summary, "warn"));
  (t.disproofs || []).slice(-6).forEach((p) => entry("⊘", p.text, "dim"));
}

function renderQueue() {
  const box = $("queue");
  box.replaceChildren(...queued.map((q) => {
    const d = el("div", "item user queued");
    d.appendChild(el("span", "tag", "queued"));
    d.appendChild(el("span", "", q.text));
    return d;
  }));
}

// A panel for a command's answer (/context, /recall, /group): it stays
// until its close button (or Esc in it) closes it.
function panel(kind, title, body) {
  let p = $("panel-" + kind);
  if (!p) {
    p = el("section", "panel");
    p.id = "panel-" + kind;
    p.setAttribute("role", "region");
    p.setAttribute("aria-label", title);
    $("panels").appendChild(p);
  }
  p.replaceChildren();
  const head = el("div", "panel-head");
  head.appendChild(el("strong", "", title));
  const close = el("button", "close", "Close");
  close.type = "button";
  close.setAttribute("aria-label", "Close " + title);
  close.addEventListener("click", () => p.remove());
  head.appendChild(close);
  p.appendChild(head);
  const content = el("div", "panel-body");
  body.forEach((n) => content.appendChild(n));
  p.appendChild(content);
  return p;
}

// Every string inside a recalled event, in order: its readable text.
function texts(v, out) {
  if (typeof v === "string") out.push(v);
  else if (Array.isArray(v)) v.forEach((x) => texts(x, out));
  else if (v && typeof v === "object") Object.entries(v).forEach(([k, x]) => { if (k !== "kind") texts(x, out); });
  return out;
}

// The permission prompt: the command or the edit's diff in full, why it is
// asked, and the three answers (a denial may carry a reason for the model).
function renderPermission(request, prompt) {
  const box = $("permission");
  if (!request || !prompt) {
    box.hidden = true;
    box.replaceChildren();
    delete box.dataset.request;
    return;
  }
  if (box.dataset.request === request.call_id) return; // keep a reason being typed
  box.dataset.request = request.call_id;
  box.replaceChildren();
  box.appendChild(el("div", "title", request.tool + " asks: " + prompt.subject));
  const pre = el("pre", request.kind === "edit" ? "diff" : "command");
  prompt.detail.forEach((line) => {
    const k = request.kind !== "edit" ? "" : line.startsWith("+") && !line.startsWith("+++") ? "added"
      : line.startsWith("-") && !line.startsWith("---") ? "removed" : line.startsWith("@@") ? "header" : "";
    pre.appendChild(el("div", k, line));
  });
  if (prompt.detail.length) box.appendChild(pre);
  box.appendChild(el("div", "why", "asked because " + prompt.reason));
  const reason = el("input", "reason");
  reason.id = "permission-reason";
  reason.placeholder = "reason for a denial (optional)";
  const answer = (decision) => async () => {
    box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    try {
      await api("/sessions/" + current + "/permissions/" + encodeURIComponent(request.call_id), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ decision, reason: reason.value || null }),
      });
    } catch (_) {
      box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    }
  };
  const row = el("div", "answers");
  [["allow", "Allow"], ["always", "Always (this session)"], ["deny", "Deny"]].forEach(([d, label]) => {
    const b = el("button", "answer-" + d, label);
    b.type = "button";
    b.id = "permission-" + d;
    b.addEventListener("click", answer(d));
    row.appendChild(b);
  });
  row.appendChild(reason);
  box.appendChild(row);
  box.hidden = false;
}

async function interrupt() {
  if (!current) return;
  const r = await api("/sessions/" + current + "/interrupt", { method: "POST" });
  status((r.stopped ? "interrupted · " : "stopping · ") + current);
  scheduleRefresh();
}

async function showGroup() {
  const g = await api("/sessions/" + current + "/group");
  const pre = el("pre", "", g.text.trimEnd());
  panel("group", "Agent group", [pre]);
}

function running(on) {
  $("interrupt").hidden = !on;
}

async function refresh() {
  if (!current) return;
  const id = current;
  const data = await api("/sessions/" + id);
  if (id === current) { render(data.state); viewOnly(data.driver); }
}

// A session another process drives (a terminal, a parent agent) is viewed
// read-only: say who drives it; its messages would be refused.
function viewOnly(driver) {
  const n = $("notice");
  if (driver && !driver.this_server) {
    notice("View only: " + driver.surface + " (pid " + driver.pid + " on " + driver.host + ") drives this session.");
  } else if (n.textContent.startsWith("View only:")) {
    notice("");
  }
}

function scheduleRefresh() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; refresh().catch(() => {}); }, 100);
}

async function open(id) {
  if (stream) stream.abort();
  stream = null;
  if (current !== id) { queued = []; renderQueue(); }
  current = id;
  lastSeq = 0;
  streamSeq = 0;
  history.replaceState(null, "", "/#" + id);
  await loadSessions();
  await refresh();
  // Resume after what was rendered.
  follow(id, new AbortController());
}

// One server-sent event of the session's stream.
function onEvent(name, data) {
  if (name === "event") {
    const ev = JSON.parse(data);
    // An event received twice (read by the browser test: a reconnect
    // resumes after the last one).
    if (ev.seq <= streamSeq) document.body.dataset.duplicates = Number(document.body.dataset.duplicates || 0) + 1;
    streamSeq = ev.seq;
    lastSeq = Math.max(lastSeq, ev.seq);
    if (ev.event.kind === "assistant_message") $("streaming").textContent = "";
    scheduleRefresh();
  } else if (name === "snapshot") {
    const snap = JSON.parse(data);
    streamSeq = snap.seq;
    render(snap.state);
  } else if (name === "delta") {
    const d = JSON.parse(data);
    if (d.text) {
      $("streaming").textContent += d.text;
      // How much text arrived streamed (read by the browser test).
      document.body.dataset.streamed = Number(document.body.dataset.streamed || 0) + d.text.length;
    }
    if (d.reasoning) $("activity").textContent = "reasoning reported";
    if (d.retrying) $("activity").textContent = "retrying (attempt " + d.retrying.attempt + "): " + d.retrying.reason;
  } else if (name === "queued") {
    const q = JSON.parse(data);
    if (!queued.some((x) => x.receipt === q.receipt)) {
      queued.push({ text: q.text, users: userCount, receipt: q.receipt });
      renderQueue();
    }
  } else if (name === "turn") {
    const t = JSON.parse(data);
    if (t.unsent && t.unsent.length) {
      // Queued messages the stopped turn never delivered: back to the input.
      const input = $("input");
      input.value = t.unsent.join("\n") + (input.value ? "\n" + input.value : "");
      saveDraft();
      queued = [];
      renderQueue();
    }
    if (t.state === "failed") notice("The turn failed: " + t.error);
    if (t.state === "interrupted") notice("Interrupted: " + t.reason);
    running(false);
    scheduleRefresh();
    loadSessions().catch(() => {});
  } else if (name === "deleted" || name === "error") {
    notice(JSON.parse(data).error);
  }
}

// Read the session's event stream with the token header, and reconnect
// after a drop with Last-Event-ID (what EventSource would do, had it a way
// to send the header). A refusal (401, 403, 404) ends it with the reason.
async function follow(id, ctrl) {
  stream = ctrl;
  let delay = 500;
  while (!ctrl.signal.aborted) {
    try {
      const r = await fetch("/api/sessions/" + id + "/events", {
        credentials: "omit",
        cache: "no-store",
        signal: ctrl.signal,
        headers: authHeaders({ accept: "text/event-stream", "last-event-id": String(lastSeq) }),
      });
      if ([401, 403, 404].includes(r.status)) {
        let body = null;
        try { body = await r.json(); } catch (_) { body = null; }
        const restarted = r.status === 401 && document.body.dataset.unreachable
          ? "The server restarted with a new token: open the URL `latch serve` printed. " : "";
        notice(restarted + ((body && body.error) || ("HTTP " + r.status)));
        status("not connected");
        return;
      }
      if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
      status("live · " + id);
      if (document.body.dataset.unreachable) {
        delete document.body.dataset.unreachable;
        notice("");
        status("live · " + id + " (reconnected)");
        scheduleRefresh();
        loadSessions().catch(() => {});
      }
      document.body.dataset.connects = Number(document.body.dataset.connects || 0) + 1;
      delay = 500;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          let name = "message";
          const data = [];
          block.split("\n").forEach((line) => {
            if (!line || line.startsWith(":")) return;
            const at = line.indexOf(":");
            const k = at < 0 ? line : line.slice(0, at);
            let v = at < 0 ? "" : line.slice(at + 1);
            if (v.startsWith(" ")) v = v.slice(1);
            if (k === "event") name = v;
            else if (k === "data") data.push(v);
          });
          if (data.length && !ctrl.signal.aborted) onEvent(name, data.join("\n"));
        }
      }
    } catch (_) {
      if (ctrl.signal.aborted) return;
    }
    if (ctrl.signal.aborted) return;
    if (Number(document.body.dataset.connects || 0) > 0) unreachable();
    status("reconnecting…");
    await new Promise((done) => setTimeout(done, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

async function send(text) {
  notice("");
  // No session selected: the task starts one (never discarded).
  if (!current) {
    if (text.startsWith("/")) { notice(text.split(" ")[0] + " needs a session: pick one on the left, or type a task to start one"); throw new Error("no session"); }
    const s = await api("/sessions", { method: "POST" });
    await open(s.id);
  }
  const id = current;
  if (text.startsWith("/")) {
    const [cmd, ...rest] = text.split(" ");
    const arg = rest.join(" ").trim();
    if (cmd === "/context") {
      const r = await api("/sessions/" + id + "/context");
      const dl = el("div", "kvs");
      Object.entries(r.report).forEach(([k, v]) => kv(dl, k.replace(/_/g, " "), v === null ? "–" : v));
      panel("context", "Context of the next request", [dl]);
    } else if (cmd === "/compact") {
      await api("/sessions/" + id + "/compact", { method: "POST" });
    } else if (cmd === "/recall") {
      if (!arg) { notice("/recall needs a query: /recall <words>"); return; }
      const r = await api("/sessions/" + id + "/recall?q=" + encodeURIComponent(arg));
      const rows = r.events.map((e) => {
        const row = el("div", "hit");
        row.appendChild(el("span", "seq", "#" + e.seq));
        const t = texts(e.body, []).join(" ");
        row.appendChild(el("span", "", t.length > 400 ? t.slice(0, 399) + "…" : t));
        return row;
      });
      if (!rows.length) rows.push(el("div", "dim", "nothing recalled"));
      panel("recall", r.events.length + " event(s) recalled for “" + arg + "”", rows);
    } else if (cmd === "/resume") {
      await api("/sessions/" + id + "/resume", { method: "POST" });
    } else if (cmd === "/group") {
      await showGroup();
      return;
    } else if (cmd === "/interrupt") {
      await interrupt();
      return;
    } else if (cmd === "/help") {
      const box = $("completions"); box.replaceChildren();
      SLASH.concat(CUSTOM.map((c) => c.usage + " — " + c.help))
        .forEach((c) => box.appendChild(el("div", "help-line", c)));
      return;
    } else if (customNames().includes(cmd)) {
      // The server expands it (`$ARGUMENTS`) and runs the prompt.
      await api("/sessions/" + id + "/messages", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text }),
      });
      status("running · " + id);
      running(true);
      return;
    } else {
      notice("Unknown command " + cmd + ": try " + SLASH.concat(customNames()).join(" "));
    }
    scheduleRefresh();
    return;
  }
  const images = attachedImages();
  const r = await api("/sessions/" + id + "/messages", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(images.length ? { text, images } : { text }),
  });
  if (images.length) clearAttachments();
  if (r.queued) {
    if (!queued.some((x) => x.receipt === r.receipt)) queued.push({ text, users: userCount, receipt: r.receipt });
    renderQueue();
    return;
  }
  turnState("running", "starting the turn");
  running(true);
}

function saveDraft() {
  try { localStorage.setItem(DRAFT_KEY, $("input").value); } catch (_) { /* storage off */ }
}

function complete() {
  const v = $("input").value;
  const box = $("completions");
  box.replaceChildren();
  if (!v.startsWith("/") || v.includes(" ")) return;
  SLASH.concat(customNames()).filter((c) => c.startsWith(v) && c.trim() !== v)
    .forEach((c) => box.appendChild(el("div", "", c)));
}

function customNames() {
  return CUSTOM.map((c) => c.usage.split(" ")[0]);
}

// Whether a turn can start: without a provider the page says why, and
// history stays browsable.
async function serverState() {
  const info = await api("/server");
  canStart = info.provider.configured;
  const n = $("server-notice");
  n.textContent = canStart ? "" : info.provider.reason;
  n.hidden = canStart;
}

function theme(next) {
  if (next) { document.documentElement.dataset.theme = next; try { localStorage.setItem("latch-theme", next); } catch (_) { /* off */ } }
}

async function main() {
  // A link pasted into an open tab changes only the fragment: start over
  // with it.
  window.addEventListener("hashchange", () => {
    if (location.hash.includes("token=")) location.reload();
  });
  await takeToken();
  try { theme(localStorage.getItem("latch-theme")); } catch (_) { /* storage off */ }
  $("theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme
      ? document.documentElement.dataset.theme === "dark"
      : matchMedia("(prefers-color-scheme: dark)").matches;
    theme(dark ? "light" : "dark");
  });
  if (!sessionStorage.getItem(TOKEN_KEY) && !linkRefused) {
    notice("No token: open the link that `latch serve` printed (http://…/#token=…).");
  }
  try { $("input").value = localStorage.getItem(DRAFT_KEY) || ""; } catch (_) { /* storage off */ }
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value.trim();
    if (!text && !attachments.length) return;
    $("input").value = "";
    saveDraft();
    complete();
    send(text).catch(() => {
      // Not sent (the server is down, or refused it): the text is kept
      // (and so are the attached images).
      const input = $("input");
      if (text && !input.value.includes(text)) input.value = text + (input.value ? "\n" + input.value : "");
      saveDraft();
    });
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("input").addEventListener("input", () => { complete(); saveDraft(); });
  setupAttach();
  $("interrupt").addEventListener("click", () => interrupt().catch(() => {}));
  // Esc closes the panel it is in, else stops the running turn.
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    const p = e.target.closest && e.target.closest(".panel");
    if (p) { e.preventDefault(); p.remove(); return; }
    if (!$("interrupt").hidden) { e.preventDefault(); interrupt().catch(() => {}); }
  });
  $("new-session").addEventListener("click", async () => {
    const s = await api("/sessions", { method: "POST" });
    await open(s.id);
  });
  try {
    await serverState();
    const sessions = await loadSessions();
    CUSTOM = (await api("/commands")).commands;
    status("ready");
    const wanted = wantedSession;
    if (wanted) await open(wanted);
    else if (sessions.length) await open(sessions[0].id);
  } catch (_) { status("not connected"); }
}

main();
