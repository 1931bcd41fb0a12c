"""Child sub-tasks in the sans-I/O scheduler: dispatched like any, replayed alike. No Ray."""

from __future__ import annotations

import json

from swarm_ray import TaskRequest
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._signals import ChildAdded, Dispatch, FinishTask, Start, Warn
from swarm_ray.core.model._subtask import SubTaskSpec
from swarm_ray.core.scheduling._scheduler import EVENT_ADAPTER, Scheduler
from tests.support import done, pipeline, registry

REQ = TaskRequest(query="compare", items=("a",), params={"dimensions": ["battery"]})


def child(parent: str, key: str, data: dict[str, object]) -> ChildAdded:
    spec = SubTaskSpec(
        id=f"{parent}>{key}",
        stage="parse.child",
        capability_id="doc.extract.text",
        input=data,
        parent=parent,
        item=0,
    )
    return ChildAdded(at=2.0, spec=spec)


def test_a_child_is_dispatched_and_the_task_waits_for_it() -> None:
    scheduler = Scheduler(expand(pipeline(), REQ, task_id="t1"), registry())
    (parse,) = [i for i in scheduler.handle(Start(at=1.0)) if isinstance(i, Dispatch)]
    (run,) = scheduler.handle(child(parse.subtask_id, "a1-1", {"text": "hi"}))
    assert isinstance(run, Dispatch) and run.reason == "child"
    assert run.subtask_id == "parse[0]>a1-1" and run.input == {"text": "hi", "feedback": None}
    assert scheduler.handle(child(parse.subtask_id, "a1-1", {"text": "again"})) == []  # once
    bad = scheduler.handle(child(parse.subtask_id, "a1-2", {"words": 3}))
    (warning,) = [i for i in bad if isinstance(i, Warn)]
    assert "parse[0]>a1-2" in warning.message and "invalid" in warning.message
    assert str(scheduler.status("parse[0]>a1-2")) == "failed"
    pending, seen = [parse], []
    while pending:  # finish the plan's own sub-tasks: the child still runs
        intents = scheduler.handle(done(pending.pop()))
        pending += [i for i in intents if isinstance(i, Dispatch)]
        seen += intents
    assert not any(isinstance(i, FinishTask) for i in seen)
    assert any(isinstance(i, FinishTask) for i in scheduler.handle(done(run)))
    assert "parse[0]>a1-1" not in scheduler.specs()[-1].depends_on  # nothing waits on it

    log = [EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(e)) for e in scheduler.log]
    replayed = Scheduler.replay(scheduler.plan, registry(), log)
    assert json.dumps(replayed.snapshot(), sort_keys=True, default=str) == json.dumps(
        scheduler.snapshot(), sort_keys=True, default=str
    )


def test_an_input_refused_before_dispatch_is_not_retried_whatever_retry_on_says() -> None:
    """A capability that retries `invalid_input` (an agent's own validation, say) does not
    retry an input the scheduler refused before dispatch: it would fail the same way
    forever (it recursed until Python's limit)."""
    from swarm_ray.core.model._capability import RetryPolicy
    from swarm_ray.core.model._errors import ErrorCode
    from tests.support import spec

    retrying = spec(
        "doc.extract.text",
        retry=RetryPolicy(max_attempts=3, retry_on=frozenset({ErrorCode.INVALID_INPUT})),
    )
    scheduler = Scheduler(expand(pipeline(), REQ, task_id="t1"), registry(retrying))
    (parse,) = [i for i in scheduler.handle(Start(at=1.0)) if isinstance(i, Dispatch)]
    out = scheduler.handle(child(parse.subtask_id, "a1-1", {"words": 3}))
    assert not [i for i in out if isinstance(i, Dispatch)]
    assert str(scheduler.status("parse[0]>a1-1")) == "failed"
    error = scheduler.error("parse[0]>a1-1")
    assert error is not None and error.code is ErrorCode.INVALID_INPUT
