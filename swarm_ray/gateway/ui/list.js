// The task list: GET /v1/tasks, refreshed every few seconds.
"use strict";

(() => {
  const { api, el, signIn, percent, when } = SwarmUI;
  const rows = document.getElementById("task-rows");
  const empty = document.getElementById("empty");
  const section = document.getElementById("tasks");
  let timer = null;

  function row(task) {
    const link = el("a", { href: `/ui/tasks/${encodeURIComponent(task.task_id)}` }, task.task_id);
    const bar = el("div", { class: "progress" }, el("div", { class: "fill" }));
    bar.firstChild.style.width = percent(task.progress);
    return el(
      "tr",
      { "data-task": task.task_id },
      el("td", { class: "mono" }, link),
      el("td", {}, el("span", { class: `badge t-${task.state}` }, task.state)),
      el("td", {}, bar, el("span", { class: "muted small" }, ` ${percent(task.progress)}`)),
      el("td", {}, task.template || "–"),
      el("td", { class: "query", title: task.query }, task.query || ""),
      el("td", { class: "muted" }, when(task.updated_at)),
    );
  }

  async function refresh() {
    const tasks = await api("/v1/tasks?limit=100");
    rows.replaceChildren(...tasks.map(row));
    empty.hidden = tasks.length > 0;
  }

  const login = signIn(async () => {
    await refresh();
    section.hidden = false;
    clearInterval(timer);
    timer = setInterval(() => {
      refresh().catch((error) => {
        clearInterval(timer);
        if (error instanceof SwarmUI.AuthError) {
          section.hidden = true;
          login.ask("That key was refused; paste another.");
        }
      });
    }, 3000);
  });
})();
