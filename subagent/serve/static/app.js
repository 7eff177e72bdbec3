// subagent serve: the page. Every text from the server is inserted as text
// (textContent / text nodes), never as HTML. The token goes in a header, never a cookie.
"use strict";

const state = { token: null, selected: null, events: new Map(), lastId: null, refresh: null };
const MAX_EVENTS_PER_RUN = 200;

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function $(id) { return document.getElementById(id); }

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + state.token };
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) showLogin("the token was refused");
  if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
  return data;
}

function indented(cell, depth) {
  cell.style.paddingLeft = (depth * 1.2) + "em";  // CSSOM, allowed by the page's CSP
  return cell;
}

function money(cost) { return cost === null ? "unknown" : "$" + cost.toFixed(6); }

// -- the tree ------------------------------------------------------------------

function renderTree(data) {
  const body = $("tree").tBodies[0];
  body.replaceChildren();
  const totals = new Map(data.trees.map(t => [t.root, t]));
  let root = null;
  const closeTree = () => {
    if (root === null) return;
    const t = totals.get(root);
    body.append(el("tr", { class: "total" },
      el("td", {}, "tree " + root + " (" + t.runs + (t.runs === 1 ? " run)" : " runs)")), el("td"), el("td"),
      el("td", {}, String(t.input_tokens + t.output_tokens)), el("td", {}, money(t.cost)),
      el("td"), el("td")));
  };
  for (const run of data.runs) {
    if (run.path.length === 1) { closeTree(); root = run.path[0]; }
    const key = run.path.join("/");
    const row = el("tr", { dataset: { path: key }, class: key === state.selected ? "selected" : "",
                            onclick: () => select(key) },
      indented(el("td", {}, run.path[run.path.length - 1]), run.path.length),
      el("td", { class: "status-" + run.status.replace(" ", "-") }, run.status),
      el("td", {}, String(run.turn)),
      el("td", {}, String(run.input_tokens + run.output_tokens)),
      el("td", {}, money(run.cost)),
      el("td", {}, run.activity),
      el("td"));
    if (run.path.length === 1 && (run.status === "running" || run.status === "queued")) {
      row.lastChild.append(el("button", { onclick: (e) => { e.stopPropagation(); cancel(run.path[0]); } }, "Cancel"));
    }
    body.append(row);
  }
  closeTree();
}

async function cancel(id) {
  try { await api("POST", "/api/tasks/" + id + "/cancel", {}); } catch (e) { alert(e.message); }
  scheduleRefresh();
}

// -- approvals -----------------------------------------------------------------

function renderApprovals(data) {
  const box = $("approvals");
  box.replaceChildren();
  $("approval-count").textContent = String(data.approvals.length);
  for (const a of data.approvals) {
    let shown = a.arguments;
    try { shown = JSON.stringify(JSON.parse(a.arguments), null, 2); } catch (e) { /* as written */ }
    const reason = el("input", { size: "30", placeholder: "reason (for a denial)", class: "reason" });
    const status = el("span", { class: "error" });
    const answer = async (verb) => {
      try {
        await api("POST", "/api/approvals/" + verb, { tree: a.tree, call_id: a.call_id, path: a.path,
          reason: reason.value, by: $("by").value });
      } catch (e) { status.textContent = e.message; }
      scheduleRefresh();
    };
    box.append(el("div", { class: "approval", dataset: { callId: a.call_id } },
      el("div", { class: "call" }, el("b", {}, a.tool), " from ", a.path.join(" / "),
         "  (call ", a.call_id, ")"),
      el("pre", { class: "arguments" }, shown),
      el("div", { class: "hint" }, "deferred: ", a.reason),
      el("div", {}, el("button", { class: "approve", onclick: () => answer("approve") }, "Approve"), " ",
        el("button", { class: "deny", onclick: () => answer("deny") }, "Deny"), " ", reason, " ", status)));
  }
}

// -- tasks and events ----------------------------------------------------------

function renderTasks(data) {
  const box = $("tasks");
  box.replaceChildren();
  for (const t of data.tasks.slice().reverse()) {
    const usage = t.usage ? (t.usage.input_tokens + t.usage.output_tokens) + " tokens, " + money(t.usage.cost) : "";
    box.append(el("div", { class: "task", dataset: { task: t.id } },
      el("b", {}, t.id), " ", el("span", { class: "status-" + t.status }, t.status), " ", usage,
      t.output !== null ? el("div", { class: "output" }, t.output) : null,
      t.error !== null ? el("div", { class: "output error" }, t.error) : null));
  }
}

function describe(ev) {
  if (ev.message && ev.message.tool_calls && ev.message.tool_calls.length)
    return ev.message.tool_calls.map(c => c.name + " " + c.arguments).join("; ");
  if (ev.message) return ev.message.content;
  if (ev.call) return ev.call.name + " " + ev.call.arguments + (ev.decision ? " → " + ev.decision.reason : "");
  if (ev.summary) return ev.summary.end_reason + " after " + ev.summary.turns + " turns";
  return ev.error || ev.output || ev.text || ev.budget || "";
}

function select(key) {
  state.selected = key;
  $("events-of").textContent = "of " + key;
  renderEvents();
  scheduleRefresh();
}

function renderEvents() {
  const list = $("events");
  list.replaceChildren();
  const shown = state.selected === null ? [] : (state.events.get(state.selected) || []);
  for (const ev of shown) list.append(el("li", {}, ev.kind + "  ", describe(ev)));
}

function takeEvent(ev) {
  const key = ev.path.join("/");
  if (!state.events.has(key)) state.events.set(key, []);
  const list = state.events.get(key);
  list.push(ev);
  if (list.length > MAX_EVENTS_PER_RUN) list.shift();
  if (key === state.selected) $("events").append(el("li", {}, ev.kind + "  ", describe(ev)));
  scheduleRefresh();
}

// -- the event stream (fetch, so that the token goes in a header) ----------------

async function stream() {
  for (;;) {
    try {
      const headers = { "Authorization": "Bearer " + state.token };
      if (state.lastId !== null) headers["Last-Event-ID"] = state.lastId;
      const response = await fetch("/api/events", { headers });
      if (response.status === 401) { showLogin("the token was refused"); return; }
      if (!response.ok) throw new Error("HTTP " + response.status);
      $("conn").textContent = "live"; $("conn").className = "badge ok";
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id = null, kind = "message", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("id: ")) id = line.slice(4);
            else if (line.startsWith("event: ")) kind = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (id !== null) state.lastId = id;
          if (kind === "event") takeEvent(JSON.parse(data));
          else if (kind === "dropped") $("conn").textContent = "live (missed " + JSON.parse(data).dropped + ")";
        }
      }
    } catch (e) { /* reconnect below */ }
    $("conn").textContent = "reconnecting"; $("conn").className = "badge bad";
    await new Promise(r => setTimeout(r, 1000));
  }
}

function scheduleRefresh() {
  if (state.refresh !== null) return;
  state.refresh = setTimeout(async () => {
    state.refresh = null;
    try {
      const [tree, approvals, tasks, stats] = await Promise.all([
        api("GET", "/api/tree"), api("GET", "/api/approvals"), api("GET", "/api/tasks"),
        api("GET", "/api/stats")]);
      renderTree(tree); renderApprovals(approvals); renderTasks(tasks);
      const p = stats.pool;
      $("stats").textContent = "running " + p.running + ", queued " + p.queued + ", finished " +
        p.finished + ", paused " + p.paused + (stats.budget ? ", budget left: " +
        Object.entries(stats.budget).map(([k, v]) => k + " " + (v.left === null ? "unknown" : v.left)).join(", ") : "");
    } catch (e) { /* shown by the connection badge */ }
  }, 150);
}

// -- start -----------------------------------------------------------------------

function showLogin(why) {
  $("main").hidden = true; $("login").hidden = false;
  if (why) $("conn").textContent = why;
}

async function start() {
  $("login").hidden = true; $("main").hidden = false;
  const agents = await api("GET", "/api/agents");
  $("agent").replaceChildren(...agents.agents.map(a => el("option", { value: a }, a)));
  scheduleRefresh();
  setInterval(scheduleRefresh, 3000);
  stream();
}

document.addEventListener("DOMContentLoaded", () => {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    sessionStorage.setItem("subagent-token", fragment.get("token"));
    history.replaceState(null, "", location.pathname + location.search);
  }
  $("by").value = sessionStorage.getItem("subagent-by") || "";
  $("by").addEventListener("change", () => sessionStorage.setItem("subagent-by", $("by").value));
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("subagent-token", $("token").value);
    state.token = $("token").value;
    start().catch(err => showLogin(err.message));
  });
  $("submit-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("submit-error").textContent = "";
    try {
      await api("POST", "/api/tasks", { agent: $("agent").value, text: $("text").value });
      $("text").value = "";
    } catch (err) { $("submit-error").textContent = err.message; }
    scheduleRefresh();
  });
  state.token = sessionStorage.getItem("subagent-token");
  if (state.token) start().catch(err => showLogin(err.message));
  else showLogin();
});
