"""`OpenAIEngine` over real HTTP: llama.cpp's own server, and a stub server for failures.

No Ray here: the engine alone, against servers these tests start (the budget actor is
tested in `test_llm_budget.py`).
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from swarm_ray.core.model._errors import AgentUnavailableError, InvalidSpecError
from swarm_ray.llm import (
    EngineConfig,
    EngineKind,
    GenerationParams,
    LLMSettings,
    McpServer,
    Message,
    OpenAIEngine,
    ToolAgentIn,
    engine_config_for,
    generate_structured,
    load_engine,
    run_tool_agent,
    use_engine,
)
from swarm_ray.testing.llm_stubs import BRAIN, serve_in_thread, stub_app

ASK = [Message(role="user", content="Review: 'Great pump, works fine.' Rate it.")]
REVIEW = {
    "type": "object",
    "properties": {"stars": {"type": "integer"}, "spam": {"type": "boolean"}},
    "required": ["stars", "spam"],
}
ADD = {
    "name": "add",
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


_open: list[OpenAIEngine] = []


@pytest.fixture(autouse=True)
def _close_engines() -> Iterator[None]:
    yield
    while _open:
        _open.pop().close()


def engine(url: str, **fields: object) -> OpenAIEngine:
    loaded = load_engine(EngineConfig(kind="openai", base_url=url, **fields))  # type: ignore[arg-type]
    built = loaded.wrapped  # type: ignore[attr-defined]  # under the call accounting
    assert isinstance(built, OpenAIEngine)
    _open.append(built)
    return built


def test_llama_cpp_server_chat_structured_and_tools(llama_server: str) -> None:
    llama = engine(llama_server)
    assert llama.model.endswith(".gguf")  # found on its `/models`
    reply = llama.complete(ASK, GenerationParams(max_tokens=8))
    assert reply.text and 0 < reply.usage.completion_tokens <= 8 and reply.usage.calls == 1
    structured = generate_structured(llama, ASK, REVIEW, GenerationParams(max_tokens=32))
    assert structured.ok, structured.error
    assert set(structured.value or {}) >= {"stars", "spam"}
    assert llama.stats["requests"] == 3  # json_schema refused once, json_object taken
    generate_structured(llama, ASK, REVIEW, GenerationParams(max_tokens=32))
    assert llama.stats["requests"] == 4  # the form that works is remembered
    asked = [Message(role="user", content="What is 2 plus 3? Use the tool.")]
    forced = {"type": "function", "function": {"name": "add"}}
    call = llama.complete_tools(asked, [ADD], GenerationParams(max_tokens=40), tool_choice=forced)
    (tool,) = call.tool_calls
    assert tool.name == "add" and set(json.loads(tool.arguments)) <= {"a", "b"}


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="needs the `mcp` SDK")
def test_the_tool_agent_on_the_real_model_answers_its_schema(llama_server: str) -> None:
    class DemoIn(ToolAgentIn):
        MCP_SERVERS = {"demo": McpServer.stdio(sys.executable, "-m", "swarm_ray.testing.mcp_demo")}

    use_engine(engine(llama_server))
    try:
        schema = {
            "type": "object",
            "properties": {"planet": {"type": "string"}, "moons": {"type": "integer"}},
            "required": ["planet", "moons"],
        }
        task = "How many moons has Mars? Look it up with the planet tool."
        data = DemoIn(task=task, mcp_servers=("demo",), output_schema=schema, max_steps=2)
        out = run_tool_agent(data).output
    finally:
        use_engine(None)
    assert set(out.data or {}) >= {"planet", "moons"}  # its values are the model's business
    assert 1 <= out.steps <= 2 and out.usage.model_calls >= 2


def test_json_schema_is_kept_where_the_endpoint_takes_it() -> None:
    with serve_in_thread(stub_app()) as url:
        stub = engine(f"{url}/v1")
        assert stub.model == "stub-model"
        generate_structured(stub, ASK, REVIEW, GenerationParams())
        generate_structured(stub, ASK, REVIEW, GenerationParams())
        assert stub.stats["requests"] == 2 and stub._json_form == "json_schema"


def test_429_waits_as_told_and_5xx_is_retried() -> None:
    with serve_in_thread(stub_app(rps=2)) as url:
        stub = engine(f"{url}/v1", model="m")
        started = time.monotonic()
        for _ in range(6):
            stub.complete(ASK, GenerationParams())
        elapsed = time.monotonic() - started
        seen = httpx.get(f"{url}/stats").json()
    assert seen["ok"] == 6 and seen["rate_limited"] == stub.stats["rate_limited"] > 0
    assert elapsed >= 1.9  # six requests at two a second: it waited, it did not fail
    with serve_in_thread(stub_app(fail_first=2)) as url:
        stub = engine(f"{url}/v1", model="m")
        assert stub.complete(ASK, GenerationParams()).text
        assert stub.stats == {"requests": 3, "retries": 2, "rate_limited": 0}
    with serve_in_thread(stub_app(fail_first=5)) as url:
        stub = engine(f"{url}/v1", model="m", max_retries=1)
        with pytest.raises(AgentUnavailableError, match="HTTP 503"):
            stub.complete(ASK, GenerationParams())


def test_the_api_key_never_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret, wrong = "sk-right-0123456789", "sk-wrong-9876543210"
    key_file = tmp_path / "key"
    key_file.write_text(secret + "\n")
    with serve_in_thread(stub_app(api_key=secret)) as url:
        good = engine(f"{url}/v1", model="m", api_key_file=str(key_file))
        assert good.complete(ASK, GenerationParams()).text
        monkeypatch.setenv("MY_KEY", wrong)
        bad = engine(f"{url}/v1", model="m", api_key_env="MY_KEY")
        with pytest.raises(InvalidSpecError) as refused:
            bad.complete(ASK, GenerationParams())
    error = refused.value
    shown = [
        str(error),
        repr(error),
        json.dumps(error.details),
        repr(pickle.loads(pickle.dumps(error))),
    ]
    assert "HTTP 401" in shown[0] and "***" in shown[0]
    for text in [*shown, repr(good), repr(bad), repr(good.__dict__)]:
        assert secret not in text and wrong not in text
    with pytest.raises(TypeError):
        pickle.dumps(good._key)
    assert secret not in EngineConfig(api_key_file=str(key_file)).model_dump_json()


def test_settings_select_the_engine_globally_and_per_capability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWARM_RAY_LLM_URL", "https://api.example.com/v1")
    monkeypatch.setenv("SWARM_RAY_LLM_MODEL", "big-model")
    monkeypatch.setenv("SWARM_RAY_LLM_API_KEY_FILE", "/run/secrets/llm")
    monkeypatch.setenv("SWARM_RAY_LLM_RPM", "600")
    config = EngineConfig.from_env()
    assert config.kind is EngineKind.OPENAI and config.base_url == "https://api.example.com/v1"
    assert config.model == "big-model" and config.api_key_file == "/run/secrets/llm"
    assert config.limits.requests_per_minute == 600 and config.limits.any
    settings = tmp_path / "llm.yaml"
    settings.write_text(
        "endpoints:\n  local: {kind: llama_cpp}\n"
        "capabilities:\n  llm.planning.plan: local\n"
        "mcp_servers:\n  demo: {command: [python, -m, swarm_ray.testing.mcp_demo]}\n"
    )
    monkeypatch.setenv("SWARM_RAY_LLM_CONFIG", str(settings))
    assert engine_config_for("llm.planning.plan").kind is EngineKind.LLAMA_CPP
    assert engine_config_for("llm.generation.chat").kind is EngineKind.OPENAI
    with pytest.raises(ValueError, match="unknown endpoint"):
        LLMSettings.model_validate({"capabilities": {"llm.planning.plan": "nowhere"}})
    with pytest.raises(ValueError, match="exactly one of"):
        McpServer.model_validate({})


@pytest.fixture(scope="module")
def mcp_http() -> Iterator[str]:
    """The demo MCP server over streamable HTTP, in its own process."""
    from swarm_ray.testing.llm_stubs import free_port

    port = free_port()
    command = [sys.executable, "-m", "swarm_ray.testing.mcp_demo", "--http", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("the demo MCP server did not come up") from None
            time.sleep(0.1)
    yield url
    from swarm_ray.llm._mcp import close_mcp_pool

    close_mcp_pool()  # end the session while its server still listens
    server.terminate()
    server.wait(timeout=10)


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="needs the `mcp` SDK")
def test_mcp_over_streamable_http_with_a_per_tool_timeout(mcp_http: str) -> None:
    class HttpIn(ToolAgentIn):
        MCP_SERVERS = {"web": McpServer.http(mcp_http)}

    steps = [
        {"tool": "web__planet", "arguments": {"name": "{item}"}},
        {"tool": "web__slow", "arguments": {"seconds": 2}},
        {"tool": "web__planet", "arguments": {"name": "Vulcan"}},
        {"tool": "final", "arguments": {"answer": "done"}},
    ]
    task = f"SCRIPT: {json.dumps(steps)}\nItem: Saturn"
    use_engine(load_engine(EngineConfig(kind="scripted", script=("call:" + BRAIN,))))
    try:
        data = HttpIn(task=task, mcp_servers=("web",), tool_timeout_s=0.5, max_steps=6)
        out = run_tool_agent(data).output
    finally:
        use_engine(None)
    planet, slow, unknown = (e.outcome for e in out.transcript if e.outcome is not None)
    assert planet.ok and json.loads(planet.content)["moons"] == 146
    assert not slow.ok and "no answer in 0.5 s" in slow.content
    assert not unknown.ok and "no planet called 'Vulcan'" in unknown.content
    assert out.finished and out.answer == "done" and out.usage.tool_errors == 2
