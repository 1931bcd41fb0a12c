// swarm-ray task pages: the API key, calls to the public API, small DOM helpers.
// The key lives in sessionStorage (this tab only) and travels in an Authorization
// header (REST) or the first WebSocket message, never in a URL.
"use strict";

const SwarmUI = (() => {
  const KEY = "swarm-ray-api-key";

  class AuthError extends Error {}

  function key() {
    return sessionStorage.getItem(KEY);
  }

  function forget() {
    sessionStorage.removeItem(KEY);
  }

  async function api(path, body) {
    const init = { headers: { Authorization: "Bearer " + key() }, cache: "no-store" };
    if (body !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    if (response.status === 401) {
      forget();
      throw new AuthError("the API key was refused");
    }
    if (!response.ok) {
      let detail = response.statusText;
      try {
        const body = await response.json();
        if (typeof body.detail === "string") detail = body.detail;
        else if (Array.isArray(body.detail)) {
          // FastAPI's field errors: `answer.text: 7 is not of type 'string'`
          detail = body.detail
            .map((d) => `${(d.loc || []).filter((part) => part !== "body").join(".")}: ${d.msg}`)
            .join("; ");
        } else detail = JSON.stringify(body.detail);
      } catch (_) {
        // not JSON: keep the status text
      }
      const error = new Error(`${response.status}: ${detail}`);
      error.status = response.status;
      throw error;
    }
    return response.json();
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = value;
      else if (name === "onclick") node.addEventListener("click", value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined) {
        node.append(child instanceof Node ? child : document.createTextNode(String(child)));
      }
    }
    return node;
  }

  const SVG_NS = "http://www.w3.org/2000/svg";

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, String(value));
    }
    return node;
  }

  // Show the login form until a key that the API accepts is entered, then call `ready`.
  function signIn(ready) {
    const form = document.getElementById("login");
    const input = document.getElementById("login-key");
    const problem = document.getElementById("login-error");
    const logout = document.getElementById("logout");
    logout.addEventListener("click", () => {
      forget();
      location.reload();
    });
    async function start() {
      form.hidden = true;
      logout.hidden = false;
      try {
        await ready();
      } catch (error) {
        if (error instanceof AuthError) ask("That key was refused; paste another.");
        else throw error;
      }
    }
    function ask(message) {
      logout.hidden = true;
      form.hidden = false;
      problem.hidden = !message;
      problem.textContent = message || "";
      input.value = "";
      input.focus();
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault(); // the key is never submitted as a form, so never in a URL
      const typed = input.value.trim();
      if (!typed) return;
      sessionStorage.setItem(KEY, typed);
      input.value = "";
      start();
    });
    if (key()) start();
    else ask("");
    return { ask };
  }

  function when(ts) {
    if (ts === null || ts === undefined) return "–";
    return new Date(ts * 1000).toLocaleTimeString([], { hour12: false });
  }

  function seconds(value) {
    if (value === null || value === undefined) return "–";
    if (value < 1) return `${(value * 1000).toFixed(0)} ms`;
    if (value < 120) return `${value.toFixed(2)} s`;
    return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
  }

  function percent(fraction) {
    return `${Math.round((fraction || 0) * 100)}%`;
  }

  function money(value) {
    // in the unit of the endpoints' `prices`; 0 where none are set
    if (!value) return "0";
    return value < 0.01 ? value.toPrecision(2) : value.toFixed(value < 10 ? 4 : 2);
  }

  function shortToken(token) {
    if (!token) return "–";
    return token.length > 22 ? `${token.slice(0, 10)}…${token.slice(-8)}` : token;
  }

  const TERMINAL = new Set(["completed", "failed", "cancelled"]);

  return { AuthError, api, el, svg, signIn, when, seconds, percent, money, shortToken, key, TERMINAL };
})();
