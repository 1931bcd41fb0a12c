"""The live task page in a real headless Chromium, against a real gateway on Ray Serve.

Debian's `chromium` and `chromium-driver` (installed by `.ci/run`) driven by Selenium;
the tests skip where they are not installed. The page gets everything from the public
API with the key typed into its login form; its WebSocket sends that key as its first
message, which the gateway also accepts from any client without the header.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from swarm_ray import SwarmClient
from tests.support import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
GREEN = "rgb(22, 163, 74)"
"""`--succeeded` in the page's style sheet."""


@dataclass(frozen=True)
class Site:
    url: str
    key: str

    def http(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=30, headers={"Authorization": f"Bearer {self.key}"}
        )


@pytest.fixture(scope="module")
def site(
    swarm: SwarmClient, serve_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    from ray import serve

    from swarm_ray.gateway import GatewayConfig, build_app

    key = secrets.token_urlsafe(24)
    keys = tmp_path_factory.mktemp("ui-gateway") / "keys"
    keys.write_text(f"{key}\n")
    config = GatewayConfig(
        orchestrator="swarm-test",
        catalogs=("swarm_ray.testing:testing_catalog",),
        api_keys_file=str(keys),
        event_poll_s=1.0,
    )
    serve.run(build_app(config), name="swarm-ui-gateway", route_prefix="/")
    yield Site(url=f"http://127.0.0.1:{serve_port}", key=key)
    serve.delete("swarm-ui-gateway")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1440,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _sign_in(browser: Any, site: Site, path: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(site.url + path)
    field = wait_until(lambda: _visible(browser, "login-key"), 20, "the login form")
    assert "api_key" not in browser.current_url and site.key not in browser.current_url
    field.send_keys(site.key)
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    assert site.key not in browser.current_url  # never in a URL


def _visible(browser: Any, element_id: str) -> Any:
    from selenium.webdriver.common.by import By

    found = browser.find_elements(By.ID, element_id)
    return found[0] if found and found[0].is_displayed() else None


def _statuses(browser: Any) -> dict[str, str]:
    return dict(
        browser.execute_script(
            "return [...document.querySelectorAll('g.node')]"
            ".map(n => [n.dataset.id, n.dataset.status || ''])"
        )
    )


def _fill(browser: Any, subtask_id: str) -> str:
    fill: str = browser.execute_script(
        "const n = [...document.querySelectorAll('g.node')]"
        ".find(n => n.dataset.id === arguments[0]);"
        "return getComputedStyle(n.querySelector('rect')).fill;",
        subtask_id,
    )
    return fill


def test_the_page_draws_a_running_task_and_colours_nodes_as_they_finish(
    site: Site, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    items = [f"page-{i}" for i in range(8)]
    with site.http() as http:
        body = {"template": "echo_fanout", "items": items, "params": {"delay_s": 1.5}}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
        planned = set(http.get(f"/v1/tasks/{task_id}").json()["subtasks"])
    _sign_in(browser, site, f"/ui/tasks/{task_id}")

    drawn = wait_until(lambda: _statuses(browser) or None, 30, "the DAG")
    assert set(drawn) == planned and len(planned) == len(items) + 1  # every sub-task shown
    stages = browser.execute_script(
        "return [...document.querySelectorAll('g.stage')].map(s => s.dataset.stage)"
    )
    assert stages == ["echo", "join"]
    assert drawn["join"] == "pending" and _fill(browser, "join") != GREEN

    # A node turns green when its sub-task finishes, while the task still runs.
    first = wait_until(
        lambda: next((s for s, v in _statuses(browser).items() if v == "succeeded"), None),
        60,
        "a sub-task to finish on the page",
    )
    wait_until(lambda: _fill(browser, first) == GREEN, 5, "the node to turn green")
    still_open = [s for s, v in _statuses(browser).items() if v != "succeeded"]
    assert "join" in still_open
    shot = tmp_path / "task-running.png"
    browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if target := os.environ.get("SWARM_RAY_UI_SCREENSHOT"):
        browser.save_screenshot(target)  # how docs/task-page.png is made

    wait_until(
        lambda: browser.find_element(By.ID, "task-state").text == "completed", 90, "completed"
    )
    wait_until(lambda: set(_statuses(browser).values()) == {"succeeded"}, 30, "all green")
    wait_until(lambda: _fill(browser, "join") == GREEN, 5, "the join node to turn green")

    def critical() -> list[str]:
        found = browser.find_elements(By.CSS_SELECTOR, "g.node.critical")
        return [c.get_attribute("data-id") for c in found]

    chain = wait_until(lambda: "join" in critical() and critical(), 30, "the critical path")
    assert len(chain) == 2 and chain[0].startswith("echo[")  # the slowest echo, then join
    assert browser.find_elements(By.CSS_SELECTOR, "path.edge.critical")
    counts = browser.find_element(By.CSS_SELECTOR, "g.stage[data-stage=echo] .counts").text
    assert counts.startswith(f"{len(items)}/{len(items)} done")

    # The side panel of a clicked sub-task.
    browser.find_element(By.CSS_SELECTOR, f'g.node[data-id="{first}"]').click()
    panel = wait_until(lambda: _visible(browser, "panel"), 10, "the panel")
    wait_until(lambda: first in panel.text, 10, "the panel to show the sub-task")
    text = panel.text
    assert "test.echo.text" in text and "attempts\n1" in text
    assert "run time" in text and "…" in text  # the short watermark
    browser.save_screenshot(str(tmp_path / "task-done.png"))
    logs = browser.get_log("browser") if hasattr(browser, "get_log") else []
    assert not [entry for entry in logs if entry.get("level") == "SEVERE"], logs


def test_the_task_list_links_to_a_large_task(site: Site, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with site.http() as http:
        body = {"template": "noop_fanout", "items": list(range(120))}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
    browser.get(site.url + "/ui/")  # the key is still in this tab's sessionStorage
    row = wait_until(
        lambda: browser.find_elements(By.CSS_SELECTOR, f'tr[data-task="{task_id}"] a'),
        30,
        "the task in the list",
    )
    row[0].click()
    wait_until(lambda: browser.current_url.endswith(f"/ui/tasks/{task_id}"), 10, "navigation")
    drawn = wait_until(lambda: _statuses(browser), 30, "the DAG")
    assert len(drawn) == 120  # small squares past 48 sub-tasks, every one drawn
    wait_until(lambda: set(_statuses(browser).values()) == {"succeeded"}, 60, "all green")
    wait_until(
        lambda: browser.find_element(By.ID, "task-state").text == "completed", 30, "completed"
    )
    counts = browser.find_element(By.CSS_SELECTOR, "g.stage[data-stage=noop] .counts").text
    assert counts == "120/120 done"
    browser.save_screenshot(str(tmp_path / "large-task.png"))
    browser.find_element(By.ID, "logout").click()
    wait_until(lambda: _visible(browser, "login-key"), 10, "the login form after sign-out")
    assert browser.execute_script("return sessionStorage.length") == 0


def test_pages_are_static_and_strict(site: Site) -> None:
    with httpx.Client(base_url=site.url, timeout=30) as http:
        page = http.get("/ui/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert http.get("/ui/static/task.js").status_code == 200
        for bad in ("/ui/static/nope.js", "/ui/static/..%2F_app.py", "/ui/static/%2e%2e"):
            assert http.get(bad).status_code in (404, 422), bad
        assert "http://" not in http.get("/ui/tasks/abc").text  # nothing from elsewhere
        assert http.get("/v1/tasks").status_code == 401  # the data still needs the key


def test_websocket_takes_the_key_as_its_first_message(site: Site) -> None:
    with site.http() as http:
        body = {"template": "echo_fanout", "items": ["ws1", "ws2"]}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
    url = site.url.replace("http", "ws") + f"/v1/tasks/{task_id}/events"
    seen: list[dict[str, Any]] = []
    with ws_connect(url, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "auth", "api_key": site.key}))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                seen.append(json.loads(ws.recv(timeout=60)))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    assert seen[-1]["status"] == "completed"
    for message in (json.dumps({"type": "auth", "api_key": "x" * 32}), "hello", "{}"):
        with ws_connect(url, open_timeout=30) as ws:
            ws.send(message)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401, message
    with ws_connect(f"{url}?api_key={site.key}", open_timeout=30) as ws:
        ws.send("{}")  # a key in the URL is not a way in
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


def test_a_waiting_sub_task_is_answered_from_its_side_panel(
    site: Site, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    with site.http() as http:
        body = {"template": "echo_asked"}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
    _sign_in(browser, site, f"/ui/tasks/{task_id}")
    wait_until(lambda: _statuses(browser).get("ask") == "waiting", 60, "the ask node to wait")
    browser.find_element(By.CSS_SELECTOR, 'g.node[data-id="ask"]').click()
    prompt = wait_until(lambda: _visible(browser, "answer-prompt"), 10, "the question")
    assert prompt.text == "Which word goes last?"
    text = browser.find_element(By.ID, "answer-text")
    assert json.loads(text.get_attribute("value")) == {"text": ""}  # a skeleton of the schema
    text.clear()
    text.send_keys('{"text": 7}')  # the wrong type: the server's field error is shown
    browser.find_element(By.ID, "answer-send").click()
    note = wait_until(
        lambda: (n := _visible(browser, "answer-note")) is not None and "422" in n.text and n,
        10,
        "the schema error",
    )
    assert "text" in note.text
    browser.save_screenshot(str(tmp_path / "answer-refused.png"))
    text.clear()
    text.send_keys('{"text": "omega"}')
    browser.find_element(By.ID, "answer-send").click()
    wait_until(lambda: _fill(browser, "ask") == GREEN, 60, "the answered node to turn green")
    wait_until(
        lambda: browser.find_element(By.ID, "task-state").text == "completed", 60, "completed"
    )
    wait_until(lambda: _visible(browser, "answer-form") is None, 10, "the form to go")
    with site.http() as http:
        assert http.get(f"/v1/tasks/{task_id}").json()["output"]["text"].split() == [
            "FIRST",
            "OMEGA",
        ]
    browser.save_screenshot(str(tmp_path / "answered.png"))
