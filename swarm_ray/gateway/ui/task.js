// One task's live DAG: GET /v1/tasks/{id} for the plan and details, then its events
// over WS /v1/tasks/{id}/events (the key goes in the first message, not the URL).
"use strict";

(() => {
  const { api, el, svg, signIn, when, seconds, percent, money, shortToken, TERMINAL } = SwarmUI;
  const taskId = decodeURIComponent(location.pathname.replace(/^\/ui\/tasks\//, "").replace(/\/$/, ""));
  // A sub-task only moves forward: pending -> running/held -> settled. Merging by rank lets
  // a status fetched from REST and events replayed from the socket arrive in any order.
  const RANK = { pending: 0, running: 1, held: 1, waiting: 1, succeeded: 2, failed: 2, skipped: 2, cancelled: 2 };
  const LEGEND = ["pending", "running", "held", "waiting", "succeeded", "failed", "skipped", "cancelled"];
  const TASK_ORDER = [
    "created", "routing", "dispatching", "executing", "aggregating", "finalizing",
    "completed", "failed", "cancelled",
  ];
  const MANY = 48; // above this many sub-tasks, nodes are small squares without labels

  const view = {
    status: null,
    signature: "",
    live: {},
    since: {},
    nodes: {},
    stages: {},
    critical: [],
    selected: null,
    lastSeq: 0,
    state: null,
    progress: 0,
    retry: 0,
    refreshTimer: null,
    lastRefresh: 0,
    dirty: false,
    frame: 0,
    endedAt: null,
    forms: {},
  };

  const $ = (id) => document.getElementById(id);

  // ---- drawing the DAG -------------------------------------------------------------

  function stageColumns(subtasks) {
    const members = new Map();
    for (const [sid, sub] of Object.entries(subtasks)) {
      if (!members.has(sub.stage)) members.set(sub.stage, []);
      members.get(sub.stage).push(sid);
    }
    const upstream = new Map();
    for (const [stage, ids] of members) {
      const deps = new Set();
      for (const sid of ids) {
        for (const dep of subtasks[sid].depends_on) {
          const other = subtasks[dep] && subtasks[dep].stage;
          if (other && other !== stage) deps.add(other);
        }
      }
      upstream.set(stage, deps);
    }
    const level = new Map();
    const visiting = new Set();
    function levelOf(stage) {
      if (level.has(stage)) return level.get(stage);
      if (visiting.has(stage)) return 0; // a feedback loop between stages: break the cycle
      visiting.add(stage);
      let best = 0;
      for (const dep of upstream.get(stage)) best = Math.max(best, levelOf(dep) + 1);
      visiting.delete(stage);
      level.set(stage, best);
      return best;
    }
    const columns = [];
    for (const stage of members.keys()) {
      const at = levelOf(stage);
      while (columns.length <= at) columns.push([]);
      columns[at].push(stage);
    }
    return { columns: columns.filter((c) => c.length), members, upstream };
  }

  function draw(status) {
    const subtasks = status.subtasks || {};
    const total = Object.keys(subtasks).length;
    const small = total > MANY;
    const W = small ? 13 : 176;
    const H = small ? 13 : 24;
    const GAP = small ? 3 : 6;
    const PAD = 12;
    const HEAD = 46;
    const COL_GAP = small ? 32 : 64;
    const MIN_W = small ? 150 : 196; // room for a stage's name and counts
    const { columns, members, upstream } = stageColumns(subtasks);
    const boxes = new Map();
    const place = new Map();
    let x = 8;
    let height = 0;
    for (const column of columns) {
      let y = 8;
      let width = 0;
      const sized = column.map((stage) => {
        const n = members.get(stage).length;
        const perRow = small ? Math.max(1, Math.min(24, Math.ceil(Math.sqrt(n * 2.5)))) : 1;
        const rows = Math.ceil(n / perRow);
        const w = Math.max(MIN_W, perRow * (W + GAP) - GAP + 2 * PAD);
        const h = HEAD + rows * (H + GAP) - GAP + PAD;
        width = Math.max(width, w);
        return { stage, n, perRow, h };
      });
      for (const { stage, perRow, h } of sized) {
        boxes.set(stage, { x, y, w: width, h });
        members.get(stage).forEach((sid, i) => {
          place.set(sid, {
            x: x + PAD + (i % perRow) * (W + GAP),
            y: y + HEAD + Math.floor(i / perRow) * (H + GAP),
          });
        });
        y += h + 18;
      }
      height = Math.max(height, y);
      x += width + COL_GAP;
    }
    const root = svg("svg", {
      width: x,
      height: height,
      viewBox: `0 0 ${x} ${height}`,
      class: small ? "dag small" : "dag",
    });
    const edges = svg("g", { class: "edges" });
    const critical = svg("g", { class: "edges critical-edges" });
    if (small) root.append(edges); // stage-to-stage edges pass behind the stage boxes
    view.stages = {};
    for (const [stage, box] of boxes) {
      const g = svg("g", { class: "stage", "data-stage": stage });
      g.append(svg("rect", { class: "stagebox", x: box.x, y: box.y, width: box.w, height: box.h, rx: 8 }));
      g.append(svg("text", { class: "stagename", x: box.x + PAD, y: box.y + 18, text: stage }));
      const counts = svg("text", { class: "counts", x: box.x + PAD, y: box.y + 33 });
      g.append(counts);
      const track = svg("rect", { class: "track", x: box.x + PAD, y: box.y + 37, width: box.w - 2 * PAD, height: 4, rx: 2 });
      const fill = svg("rect", { class: "bar", x: box.x + PAD, y: box.y + 37, width: 0, height: 4, rx: 2 });
      const bad = svg("rect", { class: "bar bad", x: box.x + PAD, y: box.y + 37, width: 0, height: 4, rx: 2 });
      g.append(track, fill, bad);
      root.append(g);
      view.stages[stage] = { ids: members.get(stage), counts, fill, bad, width: box.w - 2 * PAD };
    }
    const curve = (a, b) => {
      const mid = (a.x + b.x) / 2;
      return `M${a.x},${a.y} C${mid},${a.y} ${mid},${b.y} ${b.x},${b.y}`;
    };
    if (small) {
      for (const [stage, deps] of upstream) {
        const to = boxes.get(stage);
        for (const dep of deps) {
          const from = boxes.get(dep);
          if (from.x >= to.x) continue;
          edges.append(svg("path", {
            class: "edge",
            d: curve({ x: from.x + from.w, y: from.y + 24 }, { x: to.x, y: to.y + 24 }),
          }));
        }
      }
    } else {
      for (const [sid, sub] of Object.entries(subtasks)) {
        const to = place.get(sid);
        for (const dep of sub.depends_on) {
          const from = place.get(dep);
          if (!from || from.x >= to.x) continue;
          edges.append(svg("path", {
            class: "edge",
            "data-from": dep,
            "data-to": sid,
            d: curve({ x: from.x + W, y: from.y + H / 2 }, { x: to.x, y: to.y + H / 2 }),
          }));
        }
      }
    }
    if (!small) root.append(edges); // node-to-node edges: over the boxes, under the nodes
    root.append(critical);
    view.nodes = {};
    for (const [sid, sub] of Object.entries(subtasks)) {
      const at = place.get(sid);
      const g = svg("g", { class: "node", "data-id": sid, tabindex: 0 });
      g.append(svg("rect", { x: at.x, y: at.y, width: W, height: H, rx: small ? 2 : 5 }));
      g.append(svg("title", { text: `${sid}\n${sub.capability}` }));
      if (!small) {
        const label = sid.length > 24 ? `${sid.slice(0, 23)}…` : sid;
        g.append(svg("text", { x: at.x + 8, y: at.y + H / 2 + 4, text: label }));
      }
      g.addEventListener("click", () => select(sid));
      g.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") select(sid);
      });
      root.append(g);
      view.nodes[sid] = { g, center: { x: at.x + W / 2, y: at.y + H / 2 }, left: { x: at.x, y: at.y + H / 2 }, right: { x: at.x + W, y: at.y + H / 2 } };
    }
    view.criticalLayer = critical;
    $("graph").replaceChildren(root);
    fit(root, x, height);
  }

  // Shrink a wide DAG to the width of its frame (down to 60 %), so every stage shows.
  function fit(root, width, height) {
    const room = $("graph").clientWidth - 2;
    const scale = room > 0 && width > room ? Math.max(0.6, room / width) : 1;
    root.setAttribute("width", Math.round(width * scale));
    root.setAttribute("height", Math.round(height * scale));
  }

  // ---- live state ------------------------------------------------------------------

  function setStatus(sid, status, at) {
    const current = view.live[sid];
    if (current !== undefined && (RANK[status] ?? 0) < (RANK[current] ?? 0)) return;
    if (status === "running" && current !== "running" && at) view.since[sid] = at;
    view.live[sid] = status;
    const node = view.nodes[sid];
    if (!node) {
      scheduleRefresh(300); // a sub-task added while the task runs (a rule, a feedback round)
      return;
    }
    if (current !== status) {
      node.g.setAttribute("data-status", status);
      node.g.classList.remove(`s-${current}`);
      node.g.classList.add(`s-${status}`);
      view.dirty = true;
    }
  }

  function paintStages() {
    for (const info of Object.values(view.stages)) {
      const tally = {};
      for (const sid of info.ids) {
        const status = view.live[sid] || "pending";
        tally[status] = (tally[status] || 0) + 1;
      }
      const n = info.ids.length;
      const good = tally.succeeded || 0;
      const bad = (tally.failed || 0) + (tally.skipped || 0) + (tally.cancelled || 0);
      const parts = [`${good}/${n} done`];
      if (tally.running) parts.push(`${tally.running} running`);
      if (tally.failed) parts.push(`${tally.failed} failed`);
      if (tally.skipped) parts.push(`${tally.skipped} skipped`);
      if (tally.cancelled) parts.push(`${tally.cancelled} cancelled`);
      if (tally.held) parts.push(`${tally.held} held`);
      info.counts.textContent = parts.join(" · ");
      info.fill.setAttribute("width", (info.width * good) / n);
      info.bad.setAttribute("x", Number(info.fill.getAttribute("x")) + (info.width * good) / n);
      info.bad.setAttribute("width", (info.width * bad) / n);
      info.counts.parentNode.setAttribute("data-settled", String(good + bad));
    }
  }

  function paintCritical() {
    const subtasks = (view.status && view.status.subtasks) || {};
    const chain = Object.keys(subtasks)
      .filter((sid) => subtasks[sid].critical)
      .sort((a, b) => (subtasks[a].ended_at || Infinity) - (subtasks[b].ended_at || Infinity));
    view.critical = chain;
    for (const [sid, node] of Object.entries(view.nodes)) {
      node.g.classList.toggle("critical", Boolean(subtasks[sid] && subtasks[sid].critical));
    }
    const layer = view.criticalLayer;
    if (!layer) return;
    layer.replaceChildren();
    for (let i = 1; i < chain.length; i += 1) {
      const from = view.nodes[chain[i - 1]];
      const to = view.nodes[chain[i]];
      if (!from || !to) continue;
      const a = from.right;
      const b = to.left.x > a.x ? to.left : to.center;
      const mid = (a.x + b.x) / 2;
      layer.append(svg("path", { class: "edge critical", d: `M${a.x},${a.y} C${mid},${a.y} ${mid},${b.y} ${b.x},${b.y}` }));
    }
  }

  function taskRank(state) {
    const at = TASK_ORDER.indexOf(state);
    return at < 0 ? 0 : at;
  }

  function paintSummary() {
    const status = view.status;
    if (!status) return;
    const state = view.state || status.state;
    $("task-id").textContent = status.task_id;
    $("crumb-task").textContent = status.task_id;
    document.title = `swarm-ray · ${status.task_id} · ${state}`;
    const badge = $("task-state");
    badge.textContent = state;
    badge.className = `badge t-${state}`;
    const progress = state === "completed" ? 1 : view.progress;
    $("task-progress").style.width = percent(progress);
    const subtasks = status.subtasks || {};
    const ids = Object.keys(subtasks);
    let end = Date.now() / 1000;
    if (TERMINAL.has(status.state)) end = status.updated_at;
    else if (view.endedAt) end = view.endedAt; // ended by the events; the details follow
    const chainTime = view.critical.reduce((sum, sid) => sum + (subtasks[sid].run_s || 0), 0);
    const chainSteps = view.critical.reduce((sum, sid) => sum + (subtasks[sid].attempts || 0), 0);
    const usage = status.usage || {};
    const facts = [
      ["template", status.template || "–"],
      ["progress", percent(progress)],
      ["sub-tasks", String(ids.length)],
      ["stages", String(Object.keys(view.stages).length)],
      ["wall time", seconds(end - status.created_at)],
      [
        "critical path",
        view.critical.length
          ? `${view.critical.length} sub-tasks · ${chainSteps} steps · ${seconds(chainTime)}`
          : "–",
      ],
      ["tokens", `${usage.prompt_tokens || 0} in · ${usage.completion_tokens || 0} out`],
      ["cost", money(usage.cost)],
    ];
    $("task-facts").replaceChildren(
      ...facts.map(([name, value]) => el("span", { class: "fact" }, el("b", {}, name), " ", value)),
    );
    const warnings = status.warnings || [];
    $("warnings").hidden = warnings.length === 0;
    $("warnings-title").textContent = `${warnings.length} warning${warnings.length === 1 ? "" : "s"}`;
    $("warnings-list").replaceChildren(...warnings.map((w) => el("li", {}, w)));
    const error = status.error;
    $("task-error").hidden = !error;
    $("task-error").textContent = error ? `${error.code}: ${error.message}` : "";
  }

  function soon() {
    view.dirty = true;
    if (!view.frame) {
      view.frame = requestAnimationFrame(() => {
        view.frame = 0;
        paint();
      });
    }
  }

  function paint() {
    if (!view.dirty) return;
    view.dirty = false;
    paintStages();
    paintSummary();
    if (view.selected) paintPanel(view.selected);
  }

  // ---- the side panel --------------------------------------------------------------

  function select(sid) {
    if (view.selected && view.nodes[view.selected]) {
      view.nodes[view.selected].g.classList.remove("selected");
    }
    view.selected = sid;
    if (view.nodes[sid]) view.nodes[sid].g.classList.add("selected");
    paintPanel(sid);
  }

  function paintPanel(sid) {
    const sub = (view.status.subtasks || {})[sid];
    if (!sub) return;
    const status = view.live[sid] || sub.status;
    const origin = view.status.created_at;
    const rel = (t) => (t ? `${when(t)} (+${seconds(t - origin)})` : "–");
    const rows = [
      ["status", el("span", { class: `badge s-${status}` }, status)],
      ["stage", sub.stage],
      ["capability", el("code", {}, sub.capability)],
      ["agent", el("code", { class: "wrap" }, sub.agent || "–")],
      ["attempts", String(sub.attempts ?? "–")],
      ["queued", rel(sub.queued_at)],
      ["started", rel(sub.started_at || (status === "running" ? view.since[sid] : null))],
      ["ended", rel(sub.ended_at)],
      ["run time", seconds(sub.run_s)],
      ["tokens", sub.tokens ? `${sub.tokens.prompt} in · ${sub.tokens.completion} out` : "–"],
      ["cost", money(sub.cost)],
      ["watermark", el("code", { title: sub.watermark || "" }, shortToken(sub.watermark))],
      ["critical path", sub.critical ? "yes" : "no"],
    ];
    const list = el("dl", {});
    for (const [name, value] of rows) list.append(el("dt", {}, name), el("dd", {}, value));
    const deps = el(
      "div",
      { class: "deps" },
      ...sub.depends_on.map((dep) => el("button", { type: "button", class: "chip", onclick: () => select(dep) }, dep)),
    );
    const parts = [el("h2", { class: "mono" }, sid), list];
    if (sub.error) {
      parts.push(el("div", { class: "error-box" }, el("b", {}, sub.error.code), " ", sub.error.message));
    }
    if (sub.depends_on.length) parts.push(el("h3", {}, "depends on"), deps);
    const wait = (view.status.waiting || []).find((w) => w.subtask_id === sid);
    if (wait && status === "waiting") parts.push(answerForm(wait));
    $("panel").replaceChildren(...parts);
  }

  // A sub-task waiting for a person: its question and a JSON answer, checked by the
  // server against the wait's schema. The form is kept across repaints (what was typed
  // stays) until the wait is answered.
  function answerForm(wait) {
    const id = `${wait.subtask_id}#${wait.since}`;
    if (view.forms[id]) return view.forms[id];
    const text = el("textarea", { id: "answer-text", rows: 4, spellcheck: "false", class: "mono" });
    text.value = JSON.stringify(skeleton(wait.answer_schema));
    const note = el("p", { id: "answer-note", class: "muted" });
    const send = el("button", { type: "button", id: "answer-send" }, "answer");
    send.addEventListener("click", async () => {
      let answer;
      try {
        answer = JSON.parse(text.value);
      } catch (err) {
        note.textContent = `not JSON: ${err.message}`;
        return;
      }
      send.disabled = true;
      note.textContent = "sending…";
      try {
        const path = `/v1/tasks/${encodeURIComponent(taskId)}/subtasks/${encodeURIComponent(wait.subtask_id)}/answer`;
        await api(path, { answer });
        note.textContent = "answered";
        scheduleRefresh(0);
      } catch (err) {
        send.disabled = false;
        note.textContent = err.message;
      }
    });
    const due = wait.deadline ? `answer by ${when(wait.deadline)}` : "no deadline";
    const form = el(
      "div",
      { class: "answer-box", id: "answer-form" },
      el("h3", {}, "waiting for you"),
      el("p", { id: "answer-prompt" }, wait.prompt),
      el("p", { class: "muted" }, due),
      text,
      send,
      note,
    );
    view.forms[id] = form;
    return form;
  }

  function skeleton(schema) {
    const out = {};
    for (const [name, prop] of Object.entries((schema && schema.properties) || {})) {
      out[name] = prop.type === "boolean" ? false : prop.type === "number" || prop.type === "integer" ? 0 : "";
    }
    return out;
  }

  // ---- data: REST for the plan and details, the socket for changes -----------------

  async function refresh() {
    view.lastRefresh = Date.now();
    const status = await api(`/v1/tasks/${encodeURIComponent(taskId)}`);
    view.status = status;
    if (taskRank(status.state) >= taskRank(view.state)) view.state = status.state;
    view.progress = Math.max(view.progress, status.progress);
    const signature = Object.keys(status.subtasks || {}).join("\n");
    if (signature !== view.signature) {
      view.signature = signature;
      draw(status);
      const known = view.live;
      view.live = {};
      for (const sid of Object.keys(status.subtasks || {})) {
        setStatus(sid, "pending");
        if (known[sid]) setStatus(sid, known[sid]);
      }
      if (view.selected && view.nodes[view.selected]) view.nodes[view.selected].g.classList.add("selected");
    }
    for (const [sid, sub] of Object.entries(status.subtasks || {})) setStatus(sid, sub.status);
    paintCritical();
    view.dirty = true;
    paint();
  }

  function scheduleRefresh(delayMs) {
    if (view.refreshTimer) return;
    const wait = Math.max(delayMs, 1500 - (Date.now() - view.lastRefresh));
    view.refreshTimer = setTimeout(() => {
      view.refreshTimer = null;
      refresh().catch(fail);
    }, wait);
  }

  function apply(event) {
    view.progress = Math.max(view.progress, event.progress || 0);
    if (event.kind === "subtask" && event.subtask_id) {
      setStatus(event.subtask_id, event.status, event.at);
      if (RANK[event.status] === 2) scheduleRefresh(2000);
    } else if (event.kind === "state") {
      if (taskRank(event.status) >= taskRank(view.state)) view.state = event.status;
      if (TERMINAL.has(event.status)) {
        view.endedAt = event.at;
        scheduleRefresh(0);
      }
    } else if (["rule", "feedback", "warning", "human"].includes(event.kind)) {
      scheduleRefresh(500);
    }
    soon();
  }

  function setLive(mode, text) {
    const badge = $("live");
    badge.className = `live ${mode}`;
    badge.textContent = text;
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const path = `/v1/tasks/${encodeURIComponent(taskId)}/events?after_seq=${view.lastSeq}`;
    const socket = new WebSocket(`${scheme}//${location.host}${path}`);
    socket.addEventListener("open", () => {
      socket.send(JSON.stringify({ type: "auth", api_key: SwarmUI.key() }));
      setLive("on", "live");
      view.retry = 0;
    });
    socket.addEventListener("message", (message) => {
      const event = JSON.parse(message.data);
      if (event.seq <= view.lastSeq) return;
      view.lastSeq = event.seq;
      apply(event);
    });
    socket.addEventListener("close", (closed) => {
      if (closed.code === 4401) {
        setLive("off", "signed out");
        $("task").hidden = true;
        login.ask("That key was refused; paste another.");
      } else if (closed.code === 1000 || closed.code === 4404) {
        setLive("done", closed.code === 1000 ? "ended" : "unknown task");
        scheduleRefresh(0);
      } else {
        setLive("off", "reconnecting");
        view.retry += 1;
        setTimeout(connect, Math.min(10000, 400 * 2 ** view.retry));
      }
    });
  }

  function fail(error) {
    if (error instanceof SwarmUI.AuthError) {
      $("task").hidden = true;
      login.ask("That key was refused; paste another.");
      return;
    }
    $("task-error").hidden = false;
    $("task-error").textContent = String(error.message || error);
  }

  function legend() {
    const items = LEGEND.map((s) => el("span", { class: "key" }, el("i", { class: `swatch s-${s}` }), s));
    items.push(el("span", { class: "key" }, el("i", { class: "swatch critical" }), "critical path"));
    $("legend").replaceChildren(...items);
  }

  const login = signIn(async () => {
    legend();
    $("task").hidden = false;
    await refresh();
    connect();
  });
  setInterval(paint, 250);
  setInterval(() => {
    if (view.status && !TERMINAL.has(view.state)) {
      view.dirty = true;
    }
  }, 1000);
})();
