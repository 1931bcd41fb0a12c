"""A principal's daily spend: parsed budgets, a tally counted once per task, kept in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm_ray.core.model._errors import InvalidSpecError
from swarm_ray.core.model._subtask import TokenUsage
from swarm_ray.runtime._spend import DailySpend, parse_daily_budgets
from swarm_ray.runtime._store import SQLiteStateStore

DAY = 1_796_256_000.0  # 2026-12-03 00:00 UTC


def test_budgets_come_as_json_or_a_yaml_file_and_bad_ones_are_named(tmp_path: Path) -> None:
    inline = parse_daily_budgets('{"alice": {"max_cost": 5}, "*": {"max_tokens": 100}}')
    assert inline["alice"].max_cost == 5 and inline["*"].max_tokens == 100
    path = tmp_path / "daily.yaml"
    path.write_text("bob:\n  max_cost: 0.5\n")
    assert parse_daily_budgets(str(path))["bob"].max_cost == 0.5
    for bad in ('{"alice": {"max_cost": -1}}', '{"alice": 3}', str(tmp_path / "missing.yaml")):
        with pytest.raises(InvalidSpecError, match="SWARM_RAY_DAILY_BUDGETS"):
            parse_daily_budgets(bad)


def test_the_tally_counts_each_task_once_survives_a_restart_and_starts_afresh_each_day(
    tmp_path: Path,
) -> None:
    now = [DAY + 3600]
    store = SQLiteStateStore(tmp_path / "state.db")
    limits = parse_daily_budgets('{"*": {"max_cost": 1.0}, "vip": {"max_cost": 10.0}}')
    spend = DailySpend(limits, store, clock=lambda: now[0])
    assert spend.limit_of(None) is None and spend.limit_of("vip").max_cost == 10.0  # type: ignore[union-attr]
    spend.ended("alice", "t1", TokenUsage(cost=0.6, prompt_tokens=10))
    spend.ended("alice", "t1", TokenUsage(cost=0.6, prompt_tokens=10))  # replayed: once
    assert spend.today("alice").cost == pytest.approx(0.6)
    assert spend.over("alice") is None
    assert spend.over("alice", [TokenUsage(cost=0.4)], new=True) is not None  # all spent
    assert spend.over("alice", [TokenUsage(cost=0.4)]) is None  # a running task may end
    error = spend.over("alice", [TokenUsage(cost=0.5)])
    assert error is not None and error.details["limit"] == "daily.max_cost"
    assert "alice" in error.message and "1.1" in error.message
    assert spend.over("vip", [TokenUsage(cost=5.0)]) is None  # its own budget, not `*`

    again = DailySpend(limits, SQLiteStateStore(tmp_path / "state.db"), clock=lambda: now[0])
    assert again.today("alice").cost == pytest.approx(0.6)  # read back from the store
    now[0] += 86_400  # the next UTC day
    assert again.today("alice").cost == 0.0 and again.over("alice", new=True) is None

    unlimited = DailySpend({}, store, clock=lambda: now[0])
    unlimited.ended("carol", "t2", TokenUsage(cost=3.0))  # no budgets set: nothing written
    assert store.read_log("~spend/carol/2026-12-04") == []


def test_compute_prices_come_from_the_operators_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swarm_ray.llm._settings import LLMSettings
    from swarm_ray.runtime._config import compute_prices

    monkeypatch.delenv("SWARM_RAY_LLM_CONFIG", raising=False)
    assert compute_prices() == {}
    config = tmp_path / "llm.yaml"
    config.write_text("compute_prices:\n  documents.extract.pdf: 0.002\n")
    monkeypatch.setenv("SWARM_RAY_LLM_CONFIG", str(config))
    assert compute_prices() == {"documents.extract.pdf": 0.002}
    assert LLMSettings.load(config).compute_prices == {"documents.extract.pdf": 0.002}
    config.write_text("compute_prices:\n  documents.extract.pdf: -1\n")
    with pytest.raises(InvalidSpecError, match="negative"):
        compute_prices()
