"""The one way in for code that runs inside an agent, or hosts one (its one idea).

Workloads (`swarm_ray.llm`, `swarm_ray.documents`, `swarm_ray.video`, `jobs/`) import
what they need from the runtime here and nothing from a private `swarm_ray.runtime._*`
module (`tests/test_layers.py` holds them to it). The implementations stay in the
runtime; this module only names the seam.

Inside a capability:
    `AgentReply` (an output with confidence, token usage or warnings),
    `current_subtask()` (the attempt being served), `ask_human()` (pausing the
    attempt for the task owner's answer), `record_call()` (a model or tool call, for
    the trace), `run_child()` / `ChildOutcome` (asking the orchestrator for a child
    sub-task), `describe_capabilities()` (the schemas of capabilities it may run as
    children), `task_spend()` (what the task has spent so far), `state_dir()` (the
    swarm's state directory), `ResultStore` (where large outputs live),
    `declared_limits()` (the `extra` a capability declares for memory and CPU limits),
    `CodeField` (an output field holding Python code, which the sanitizer parses and
    checks).

Hosting agents (a Serve deployment, a job's driver):
    `run_subtask()` (the one attempt contract every executor shares),
    `deployment_names()` (a capability's Serve app and deployment), `NAMESPACE`,
    `SwarmClient`, `follow_with_progress()`.
"""

from __future__ import annotations

from swarm_ray.core.guards._sanitize import CodeField
from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.runtime._agent import (
    AgentReply,
    ask_human,
    current_subtask,
    record_call,
    run_subtask,
)
from swarm_ray.runtime._children import (
    ChildOutcome,
    describe_capabilities,
    run_child,
    task_spend,
)
from swarm_ray.runtime._client import NAMESPACE, SwarmClient
from swarm_ray.runtime._config import state_dir
from swarm_ray.runtime._progress import follow_with_progress
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._rlimits import declared_limits

__all__ = [
    "NAMESPACE",
    "AgentReply",
    "ChildOutcome",
    "CodeField",
    "ResultStore",
    "SwarmClient",
    "ask_human",
    "current_subtask",
    "declared_limits",
    "deployment_names",
    "describe_capabilities",
    "follow_with_progress",
    "record_call",
    "run_child",
    "run_subtask",
    "state_dir",
    "task_spend",
]


def deployment_names(spec: CapabilitySpec) -> tuple[str, str]:
    """The Serve application and deployment names of a capability `spec`.

    Imported on call: `runtime._serve_app` imports Ray Serve, which agent code running in
    a plain actor or task should not pay for (nor the warnings Serve's import raises).
    """
    from swarm_ray.runtime._serve_app import deployment_names as names

    return names(spec)
