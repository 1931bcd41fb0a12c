"""The gateway's pure parts: health book and score, API keys, audit trail, metrics text,
watermark tracing (no Ray)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm_ray import CapabilitySpec, InvalidSpecError, TaskRequest
from swarm_ray.core.guards._principal import LOCAL, Principal
from swarm_ray.core.guards._watermark import WatermarkKey, issue_watermark
from swarm_ray.core.model._plan import Plan, expand
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import Start, SubTaskDone
from swarm_ray.core.model._subtask import SubTaskResult, Timings
from swarm_ray.core.scheduling._scheduler import Scheduler
from swarm_ray.core.views._trace import find_tokens, short_id, trace_tokens
from swarm_ray.gateway import ApiKeys, render_metrics
from swarm_ray.runtime._audit import AuditTrail, sampled
from swarm_ray.runtime._health import PROBE_FAILURES_TO_EJECT, HealthBook, health_score
from swarm_ray.runtime._metrics import SwarmMetrics
from swarm_ray.testing import testing_catalog as catalog_of_tests


def _specs() -> list[CapabilitySpec]:
    return list(catalog_of_tests().capabilities)


# ---- health ------------------------------------------------------------------------


def test_health_score_formula_and_bounds() -> None:
    assert health_score(1, 1, 1) == 1.0
    assert health_score(0, 0, 0) == 0.0
    assert health_score(0.5, 1.0, 0.0) == pytest.approx(0.5)
    assert health_score(1.0, 0.0, 1.0) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="`latency_score` must be in"):
        health_score(1, 1.5, 1)


def test_health_book_success_latency_and_availability() -> None:
    book = HealthBook(_specs())
    assert book.report()["swarm_health_score"] == 1.0  # nothing happened yet
    for _ in range(3):
        book.attempt("test.echo.text", ok=True, duration_s=3.0)  # timeout 30 s: 0.1 of it
    book.attempt("test.echo.text", ok=False, duration_s=3.0)
    report = book.report()
    assert report["success_rate"] == 0.75
    assert report["latency_score"] == pytest.approx(0.9)
    assert report["availability"] == 1.0
    assert report["swarm_health_score"] == pytest.approx(0.4 * 0.75 + 0.3 * 0.9 + 0.3)
    echo = report["capabilities"]["test.echo.text"]
    assert echo["attempts"] == 4 and echo["latency_ms"] == 3000.0 and echo["status"] == "ok"


def test_a_callers_mistake_or_a_cancel_does_not_lower_the_swarms_health() -> None:
    """Only the agent's own failures count: a tenant sending bad input again and again
    (or cancelling) leaves the success rate where the agent's real work put it."""
    from swarm_ray.core.model._errors import ErrorCode
    from swarm_ray.core.model._subtask import SubTaskError
    from swarm_ray.runtime._upkeep import Observer

    book = HealthBook(_specs())
    observer = Observer(SwarmMetrics(), book, audit=None)

    def result(code: ErrorCode | None) -> SubTaskResult:
        error = None if code is None else SubTaskError(code=code, message="x")
        return SubTaskResult(
            task_id="t",
            subtask_id="s",
            capability_id="test.echo.text",
            attempt=1,
            output={"text": "X"} if code is None else None,
            error=error,
            timings=Timings(started_at=1.0, finished_at=1.5),
            watermark="w",
        )

    observer.result(result(None), "trace")
    for code in (ErrorCode.INVALID_INPUT, ErrorCode.INPUT_NOT_ALLOWED, ErrorCode.CANCELLED):
        observer.result(result(code), "trace")
    assert book.report()["success_rate"] == 1.0
    observer.result(result(ErrorCode.AGENT_ERROR), "trace")  # the agent's own: counted
    assert book.report()["success_rate"] == 0.5


def test_three_failed_probes_take_a_capability_out_until_one_passes() -> None:
    book = HealthBook(_specs())
    cid = "test.echo.serve"
    for i in range(PROBE_FAILURES_TO_EJECT - 1):
        assert book.probe(cid, ok=False, detail={"error": f"boom {i}"}) is True
    assert book.capability(cid)["status"] == "degraded"
    assert book.probe(cid, ok=False, detail={"error": "boom last"}) is False
    assert not book.in_dispatch(cid)
    assert "last error: boom last" in book.why_out(cid)
    n = len(_specs())
    assert book.report()["availability"] == pytest.approx((n - 1) / n)
    assert book.capability(cid)["status"] == "unavailable"
    assert book.probe(cid, ok=True, detail={"status": "ok", "model": "m-1"}) is True
    assert book.capability(cid)["model"] == "m-1"
    assert book.capability(cid)["status"] == "ok"


# ---- API keys ----------------------------------------------------------------------


def test_api_keys_accept_only_listed_keys_and_hide_them(tmp_path: Path) -> None:
    good = "k" * 20
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# comment\n\n{good}\n{'z' * 24}\n")
    keys = ApiKeys.from_file(keys_file)
    assert len(keys) == 2
    assert keys.accepts(good) and keys.accepts("z" * 24)
    assert not keys.accepts(good + "x") and not keys.accepts("") and not keys.accepts(None)
    assert good not in repr(keys) and good not in str(keys)


def test_api_keys_belong_to_principals(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"{'k' * 20}\nalice:{'a' * 20}\nalice:{'b' * 20}\nroot:{'r' * 20}:admin\n")
    keys = ApiKeys.from_file(keys_file)
    bare = keys.principal("k" * 20)
    assert bare is not None and bare.id.startswith("key-") and not bare.admin
    assert "k" * 8 not in bare.id  # the name is a digest, not the key
    assert keys.principal("a" * 20) == keys.principal("b" * 20) == Principal(id="alice")
    assert keys.principal("r" * 20) == Principal(id="root", admin=True)
    assert keys.principal("alice:" + "a" * 20) is None  # the whole line is not a key
    for line, problem in [
        (f"al ice:{'a' * 20}", "principal name"),
        (f"alice:{'a' * 20}:owner", "unknown role"),
        (f"a:b:{'a' * 20}:admin", "colons"),
    ]:
        with pytest.raises(InvalidSpecError, match=problem):
            ApiKeys([line], source="test")


def test_api_keys_refuse_short_or_missing(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="shorter than 16"):
        ApiKeys(["short"], source="test")
    with pytest.raises(InvalidSpecError, match="no API keys"):
        ApiKeys([], source="test")
    with pytest.raises(InvalidSpecError, match="cannot be read"):
        ApiKeys.from_file(tmp_path / "missing")


def test_api_keys_generated_once_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWARM_RAY_API_KEYS", raising=False)
    monkeypatch.delenv("SWARM_RAY_API_KEYS_FILE", raising=False)
    first = ApiKeys.from_config(state_dir=tmp_path)
    path = tmp_path / "api_keys"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    name, key, role = path.read_text().splitlines()[-1].split(":")
    assert (name, role) == ("admin", "admin")
    assert first.accepts(key) and ApiKeys.from_config(state_dir=tmp_path).accepts(key)
    assert first.principal(key) == Principal(id="admin", admin=True)
    monkeypatch.setenv("SWARM_RAY_API_KEYS", "a" * 16 + ", " + "b" * 16)
    from_env = ApiKeys.from_config(state_dir=tmp_path)
    assert from_env.accepts("b" * 16) and not from_env.accepts(key)


# ---- audit trail --------------------------------------------------------------------


def test_debug_sampling_is_per_trace_and_proportional() -> None:
    traces = [f"{i:08x}" + "0" * 24 for i in range(0, 0xFFFFFFFF, 0xFFFFFFFF // 1000)]
    kept = sum(sampled(t, 0.1) for t in traces)
    assert 80 <= kept <= 120
    assert all(sampled(t, 1.0) for t in traces) and not any(sampled(t, 0.0) for t in traces)
    assert sampled(traces[5], 0.3) == sampled(traces[5], 0.3)


def test_audit_trail_writes_task_and_agent_lines(tmp_path: Path) -> None:
    trail = AuditTrail(tmp_path, debug_sample=0.0)
    assert trail.write("INFO", {"event": "x"}, task_id="t1", trace_id="ab" * 16, agent="a.b.c")
    assert not trail.write("DEBUG", {"event": "y"}, task_id="t1", trace_id="ab" * 16)
    trail.write("INFO", {"event": "z"}, task_id="../evil", trace_id="cd" * 16)
    trail.close()
    [line] = (tmp_path / "tasks" / "t1.jsonl").read_text().splitlines()
    assert json.loads(line) == {
        "level": "INFO",
        "trace_id": "ab" * 16,
        "task_id": "t1",
        "agent": "a.b.c",
        "event": "x",
    }
    assert (tmp_path / "agents" / "a.b.c.jsonl").read_text() == line + "\n"
    assert (tmp_path / "tasks" / ".._evil.jsonl").exists()  # no escaping the directory
    # A record serialised already (a task event's JSON) makes the same kind of line.
    assert trail.write_json("INFO", '{"kind":"state","n":1}', task_id="t3", trace_id="ef" * 16)
    assert not trail.write_json("DEBUG", '{"kind":"x"}', task_id="t3", trace_id="ef" * 16)
    trail.close()
    [line] = (tmp_path / "tasks" / "t3.jsonl").read_text().splitlines()
    assert json.loads(line) == {
        "level": "INFO",
        "trace_id": "ef" * 16,
        "task_id": "t3",
        "agent": None,
        "kind": "state",
        "n": 1,
    }
    with pytest.raises(ValueError, match="debug_sample"):
        AuditTrail(tmp_path, debug_sample=2)


# ---- metrics text -------------------------------------------------------------------


def test_metrics_render_round_trips_through_the_prometheus_parser() -> None:
    metrics = SwarmMetrics()
    metrics._m = _NullRayMetrics()  # type: ignore[misc]  # only the tallies matter here
    metrics.duration("a.b.c", 0.02)
    metrics.duration("a.b.c", 2.0)
    metrics.error("a.b.c", "timeout")
    metrics.transition("created", "routing")
    metrics.rejection("forged")
    metrics.retry("a.b.c", "retry")
    metrics.breaker("a.b.c", 2)
    metrics.cost("a.b.c", 0.25)
    metrics.cost("a.b.c", 0.5)
    snapshot = metrics.snapshot()
    snapshot["tasks"] = {"completed": 3}
    snapshot["health"] = HealthBook(_specs()).report()
    families = {
        f.name: f for f in text_string_to_metric_families(render_metrics(snapshot).decode())
    }
    duration = {
        (s.name, s.labels.get("le")): s.value
        for s in families["agent_task_duration_seconds"].samples
    }
    assert duration[("agent_task_duration_seconds_bucket", "0.05")] == 1
    assert duration[("agent_task_duration_seconds_bucket", "+Inf")] == 2
    assert duration[("agent_task_duration_seconds_sum", None)] == pytest.approx(2.02)
    [error] = [s for s in families["agent_error"].samples if s.name == "agent_error_total"]
    assert error.labels == {"agent": "a.b.c", "error_type": "timeout"} and error.value == 1
    assert families["swarm_breaker_state"].samples[0].value == 2
    [cost] = [s for s in families["swarm_cost"].samples if s.name == "swarm_cost_total"]
    assert cost.labels == {"agent": "a.b.c"} and cost.value == pytest.approx(0.75)
    assert families["swarm_tasks"].samples[0].labels == {"state": "completed"}
    assert families["swarm_health_score"].samples[0].value == 1.0


def test_counters_reach_ray_as_increases_since_the_last_flush() -> None:
    """Ray's counters are handed the tallies' increases once a flush, never twice."""
    handed: list[tuple[str, float, dict[str, str]]] = []

    class Sink:
        def __init__(self, name: str) -> None:
            self.name = name

        def inc(self, value: float, tags: dict[str, str]) -> None:
            handed.append((self.name, value, tags))

    metrics = SwarmMetrics()
    metrics._m = {n: Sink(n) for n in ("errors", "transitions", "retries", "cost")}  # type: ignore[misc]
    for _ in range(3):
        metrics.transition("created", "routing")
    metrics.cost("a.b.c", 0.25)
    assert handed == []  # nothing per call
    metrics.flush()
    assert sorted(handed) == [
        ("cost", 0.25, {"agent": "a.b.c"}),
        ("transitions", 3.0, {"from_state": "created", "to_state": "routing"}),
    ]
    handed.clear()
    metrics.flush()
    assert handed == []  # the same totals are not handed again
    metrics.transition("created", "routing")
    metrics.error("a.b.c", "timeout")
    metrics.flush()
    assert sorted(handed) == [
        ("errors", 1.0, {"agent": "a.b.c", "error_type": "timeout"}),
        ("transitions", 1.0, {"from_state": "created", "to_state": "routing"}),
    ]


class _NullRayMetrics(dict):  # type: ignore[type-arg]
    def __missing__(self, _key: str) -> _NullRayMetrics:
        return self

    def observe(self, *_a: object, **_k: object) -> None: ...
    def inc(self, *_a: object, **_k: object) -> None: ...
    def set(self, *_a: object, **_k: object) -> None: ...


# ---- watermark tracing ---------------------------------------------------------------


def test_find_tokens_in_a_passage() -> None:
    key = WatermarkKey.generate()
    token = issue_watermark(
        key, task_id="t", subtask_id="s", capability_id="a.b.c", input={}, issued_ms=1
    )
    text = f"| 75 kWh | {token} |\nagain {token}, and a fake eyJabc.def"
    assert find_tokens(text) == [token]
    assert find_tokens("nothing") == []


class _Driver:
    """What tracing reads of a task: its scheduler and its record's owner."""

    def __init__(self, scheduler: Scheduler, owner: str | None) -> None:
        self.scheduler = scheduler
        self.record = type("R", (), {"owner": owner})()


def _traced_task() -> tuple[WatermarkKey, str, Scheduler, Plan]:
    catalog = catalog_of_tests()
    registry = Registry(catalog.capabilities)
    template = next(t for t in catalog.templates if t.name == "echo_fanout")
    request = TaskRequest(template="echo_fanout", items=("x",))
    plan: Plan = expand(template, request, task_id="t-trace")
    scheduler = Scheduler(plan, registry)
    [intent, *_] = scheduler.handle(Start(at=1.0))
    key = WatermarkKey.generate()
    token = issue_watermark(
        key,
        task_id=plan.task_id,
        subtask_id=intent.subtask_id,  # type: ignore[attr-defined]
        capability_id="test.echo.text",
        input=intent.input,  # type: ignore[attr-defined]
        issued_ms=1000,
    )
    result = SubTaskResult(
        task_id=plan.task_id,
        subtask_id=intent.subtask_id,  # type: ignore[attr-defined]
        capability_id="test.echo.text",
        output={"text": "X", "pid": 1},
        timings=Timings(started_at=1.5, finished_at=2.0),
        watermark=token,
        agent="agent-7",
    )
    scheduler.handle(SubTaskDone(at=2.0, result=result))
    return key, token, scheduler, plan


def test_trace_tokens_finds_the_agent_and_gives_the_input_only_when_asked() -> None:
    key, token, scheduler, plan = _traced_task()
    mine = _Driver(scheduler, owner=None)
    [found] = trace_tokens(key, [token], lambda t: mine if t == plan.task_id else None, LOCAL)
    assert found["valid"] and found["known"] and found["accepted_result"]
    assert found["agent"] == "agent-7" and found["finished_at"] == 2.0
    assert "input" not in found  # only on request
    [full] = trace_tokens(key, [token], lambda _t: mine, LOCAL, include_input=True)
    assert full["input"]["text"] == "x" and full["input_verified"] is True
    [other] = trace_tokens(WatermarkKey.generate(), [token], lambda _t: mine, LOCAL)
    assert other["valid"] is False and other["reason"] == "forged" and "agent" not in other
    [unknown] = trace_tokens(key, [token], lambda _t: None, LOCAL)
    assert unknown["valid"] and unknown["known"] is False and "agent" not in unknown


def test_trace_tokens_gives_inputs_to_the_owner_alone() -> None:
    key, token, scheduler, _plan = _traced_task()
    owned = _Driver(scheduler, owner="alice")
    alice, admin = Principal(id="alice"), Principal(id="root", admin=True)
    [to_owner] = trace_tokens(key, [token], lambda _t: owned, alice, include_input=True)
    assert to_owner["input"]["text"] == "x"
    [to_admin] = trace_tokens(key, [token], lambda _t: owned, admin, include_input=True)
    assert to_admin["agent"] == "agent-7" and "input" not in to_admin


def test_short_ids_are_found_and_traced_like_tokens() -> None:
    key, token, scheduler, plan = _traced_task()
    short = short_id(token)
    assert short.startswith(f"wm:{plan.task_id}:") and len(short) < 40
    assert find_tokens(f"| 75 kWh | {short} |") == [short]
    [found] = trace_tokens(key, [short], lambda _t: _Driver(scheduler, None), LOCAL)
    assert found["valid"] and found["agent"] == "agent-7" and found["full_token"] == token
    [missing] = trace_tokens(key, [f"wm:{plan.task_id}:AAAAAAAAAA"], lambda _t: None, LOCAL)
    assert missing["valid"] is False and missing["reason"] == "unknown"


def test_find_tokens_is_linear_on_hostile_text() -> None:
    import time

    started = time.perf_counter()
    assert find_tokens("eyJ" * 100_000) == []  # 300 KB: quadratic backtracking took 15 s
    assert find_tokens(("eyJ" * 20 + ".") * 10_000) == []
    assert time.perf_counter() - started < 1.0


# ---- Serve config files ------------------------------------------------------------


@pytest.mark.parametrize("name", ["gateway-local.yaml", "gateway-gpu-cluster.yaml"])
def test_gateway_serve_configs_build_through_serves_own_loader(name: str) -> None:
    import yaml
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve.schema import ServeDeploySchema

    from swarm_ray.gateway import GatewayConfig

    root = Path(__file__).resolve().parent.parent
    config = ServeDeploySchema.model_validate(
        yaml.safe_load((root / "deployments" / name).read_text())
    )
    apps = {app.name: app for app in config.applications}
    gateway = apps["swarm-gateway"]
    assert gateway.route_prefix == "/"
    for app in apps.values():  # what `serve run` / `serve deploy` do with each entry
        built = call_user_app_builder_with_args_if_necessary(import_attr(app.import_path), app.args)
        assert built._bound_deployment is not None
    args = GatewayConfig.model_validate(gateway.args)
    bound = call_user_app_builder_with_args_if_necessary(
        import_attr(gateway.import_path), gateway.args
    )._bound_deployment
    assert bound.num_replicas == args.num_replicas
    assert bound.max_ongoing_requests == args.max_ongoing_requests


def test_coalescer_batches_concurrent_calls_and_answers_each_alone() -> None:
    import asyncio

    from swarm_ray.gateway._coalesce import Coalescer

    sent: list[list[int]] = []

    async def send(items: list[int]) -> list[int | BaseException]:
        sent.append(items)
        await asyncio.sleep(0.01)
        return [ValueError(f"{i} is odd") if i % 2 else i * 10 for i in items]

    async def main() -> None:
        calls = Coalescer(send, max_size=8, max_inflight=1)
        # Alone, a call goes at once, by itself.
        assert await calls(2) == 20 and sent == [[2]]
        outcomes = await asyncio.gather(*(calls(i) for i in range(20)), return_exceptions=True)
        for i, outcome in enumerate(outcomes):
            if i % 2:
                assert isinstance(outcome, ValueError) and str(outcome) == f"{i} is odd"
            else:
                assert outcome == i * 10
        batches = sent[1:]
        assert sorted(i for batch in batches for i in batch) == list(range(20))
        assert max(map(len, batches)) == 8 and len(batches) == 3

        async def broken(items: list[int]) -> list[int | BaseException]:
            raise ConnectionError("orchestrator away")

        failing = Coalescer(broken)
        errors = await asyncio.gather(*(failing(i) for i in range(3)), return_exceptions=True)
        assert all(isinstance(e, ConnectionError) for e in errors)
        # The coalescer is not stuck after a failed batch.
        assert failing.batches == 1
        assert isinstance(
            (await asyncio.gather(failing(9), return_exceptions=True))[0], ConnectionError
        )
        assert failing.batches == 2

    asyncio.run(main())


def test_gc_thresholds_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from swarm_ray.runtime._config import tune_gc

    before = gc.get_threshold()
    try:
        monkeypatch.setenv("SWARM_RAY_GC_THRESHOLD", "default")
        tune_gc()
        assert gc.get_threshold() == before
        monkeypatch.setenv("SWARM_RAY_GC_THRESHOLD", "5000,7,9")
        tune_gc()
        assert gc.get_threshold() == (5000, 7, 9)
        monkeypatch.setenv("SWARM_RAY_GC_THRESHOLD", "lots")
        with pytest.raises(ValueError, match="SWARM_RAY_GC_THRESHOLD.*'lots'"):
            tune_gc()
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_a_spent_budget_is_429_naming_its_limit_and_bad_input_stays_422() -> None:
    from swarm_ray.core.model._errors import BudgetExceededError, InvalidSpecError
    from swarm_ray.gateway._http import http_error

    spent = http_error(BudgetExceededError("spent", limit="daily.max_cost", value=2, maximum=1))
    assert spent.status_code == 429
    assert spent.detail == {"detail": "spent", "code": "budget_exceeded", "limit": "daily.max_cost"}
    assert http_error(InvalidSpecError("bad")).status_code == 422
