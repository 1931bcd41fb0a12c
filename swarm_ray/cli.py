"""The `swarm-ray` command line.

    swarm-ray status              the orchestrator: capabilities, agents, open tasks
    swarm-ray tasks               newest tasks, one line each
    swarm-ray show TASK           plan, each sub-task's state, warnings and the audit log
    swarm-ray cancel TASK         cancel a running task
    swarm-ray answer TASK JSON    answer a sub-task waiting for a person (`--subtask SID`)
    swarm-ray run TEMPLATE ITEM.. submit a task, follow its events, print the result
    swarm-ray serve [...]         the HTTP gateway on Ray Serve (REST, WebSocket, /health)
    swarm-ray compare [...]       the document comparison job (`swarm-ray compare -h`)
    swarm-ray video [...]         the video analysis job (`swarm-ray video -h`)

It joins the running cluster (`--address`, `RAY_ADDRESS`, or a cluster started with
`ray start` on this machine) or starts a local one. Tasks live in the state store, so a
new local cluster still lists and shows earlier tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from swarm_ray.core.model._errors import SwarmError
from swarm_ray.runtime._client import (
    DEFAULT_CATALOGS,
    ORCHESTRATOR_NAME,
    SwarmClient,
    connect,
    local_cluster,
)
from swarm_ray.runtime._progress import follow_with_progress

__all__ = ["main"]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _connect(args: argparse.Namespace) -> SwarmClient:
    import ray

    address = args.address or os.environ.get("RAY_ADDRESS")
    if address is None and not ray.is_initialized():
        # As Ray's "auto": a `ray start` head, or any other cluster running on this
        # machine; None when there is none, and connect() starts a local one.
        address = local_cluster(any_cluster=True)
    return connect(
        address,
        catalogs=args.catalog or DEFAULT_CATALOGS,
        state_dir=args.state_dir,
        name=args.name,
        orchestrators=args.orchestrators,
    )


def _cmd_status(client: SwarmClient, args: argparse.Namespace) -> int:
    info = client.info()
    print(f"orchestrator up since {_when(info['started_at'])} UTC")
    print(f"open tasks: {info['open_tasks']}")
    if "shards" in info:
        each = ", ".join(f"{k}: {v['open_tasks']}" for k, v in info["shards"].items())
        print(f"shards ({len(info['shards'])}), open tasks by shard: {each}")
    print(f"capabilities ({len(info['capabilities'])}): {', '.join(info['capabilities'])}")
    print(f"templates: {', '.join(info['templates'])}")
    print(f"agents: {len(info['agents'])}")
    rejected = {k: v for k, v in info["watermark_rejections"].items() if v}
    print(f"watermark rejections: {rejected or 'none'}")
    return 0


def _cmd_tasks(client: SwarmClient, args: argparse.Namespace) -> int:
    tasks = client.tasks(args.limit)
    if not tasks:
        print("no tasks yet")
        return 0
    print(f"{'TASK':18} {'STATE':11} {'PROGRESS':>8}  {'TEMPLATE':18} {'UPDATED (UTC)':19}  QUERY")
    for t in tasks:
        waits = f"  [waits for {len(t.waiting)} answer(s)]" if t.waiting else ""
        print(
            f"{t.task_id:18} {t.state:11} {t.progress:>8.0%}  "
            f"{t.template or '-':18} {_when(t.updated_at)}  {t.query[:40]}{waits}"
        )
    return 0


def _cmd_show(client: SwarmClient, args: argparse.Namespace) -> int:
    task = client.task(args.task)
    status = task.status()
    record = task.record()
    if args.json:
        both = {"status": status.model_dump(mode="json"), "record": record.model_dump(mode="json")}
        print(json.dumps(both, indent=2))
        return 0
    print(f"task {record.task_id}  state {status.state}  progress {status.progress:.0%}")
    print(f"trace {record.trace_id}  template {status.template}")
    print(f"query {record.request.query!r}  items {len(record.request.items)}")
    if status.usage is not None:
        used = status.usage
        print(
            f"spent {used.total_tokens} tokens ({used.prompt_tokens} prompt, "
            f"{used.completion_tokens} completion), cost {used.cost:.6g}, "
            f"{used.compute_s:.1f} s of agent time"
        )
    if status.subtasks:
        print("\nsub-tasks:")
        for sid, info in status.subtasks.items():
            deps = f" <- {', '.join(info.depends_on)}" if info.depends_on else ""
            print(f"  {info.status:10} {sid:28} {info.capability}{deps}")
    for wait in status.waiting:
        until = f"until {_when(wait.deadline)} UTC" if wait.deadline is not None else "no deadline"
        then = "then its default" if wait.has_default else "then human_timeout"
        print(
            f"\nwaiting for {wait.owner or 'a trusted caller'}: {wait.subtask_id} ({until}, {then})"
        )
        print(f"  {wait.prompt}")
        print(f"  answer: swarm-ray answer {status.task_id} --subtask '{wait.subtask_id}' JSON")
        print(f"  schema: {json.dumps(wait.answer_schema)}")
    for warning in status.warnings:
        print(f"warning: {warning}")
    if status.error:
        print(f"error: [{status.error['code']}] {status.error['message']}")
    print("\naudit log:")
    for entry in record.machine.audit:
        print(f"  {_when(entry.at)}  {entry.from_state:>11} -> {entry.to_state:11} {entry.reason}")
    if status.output is not None:
        print("\noutput:")
        print(json.dumps(status.output, indent=2)[:4000])
    elif status.output_ref:
        print(f"\noutput stored at {status.output_ref}")
    return 0


def _cmd_cancel(client: SwarmClient, args: argparse.Namespace) -> int:
    record = client.task(args.task).cancel()
    print(f"task {record.task_id}: {record.machine.state}")
    return 0


def _cmd_answer(client: SwarmClient, args: argparse.Namespace) -> int:
    try:
        answer = json.loads(args.answer)
    except json.JSONDecodeError as exc:
        print(f"swarm-ray: error: the answer is not JSON: {exc.msg}", file=sys.stderr)
        return 2
    status = client.task(args.task).answer(answer, args.subtask)
    left = ", ".join(w.subtask_id for w in status.waiting) or "none"
    print(f"task {status.task_id}: {status.state}; still waiting: {left}")
    return 0


def _cmd_run(client: SwarmClient, args: argparse.Namespace) -> int:
    params = json.loads(args.params) if args.params else {}
    budget = {k: v for k, v in (("max_cost", args.max_cost), ("max_tokens", args.max_tokens)) if v}
    task = client.start(
        template=args.template,
        items=tuple(args.items),
        params=params,
        query=args.query or "",
        budget=budget or None,
    )
    print(f"task {task.id} submitted", file=sys.stderr)
    for _event in follow_with_progress(task, stream=sys.stderr):
        pass  # a bar per stage on a terminal, plain lines otherwise
    status = task.status()
    result: dict[str, Any] = {"task_id": task.id, "state": status.state, "output": status.output}
    if status.usage is not None:
        result["usage"] = status.usage.model_dump(mode="json")
    if status.error:
        result["error"] = status.error
    print(json.dumps(result, indent=2))
    return 0 if status.state == "completed" else 1


def _cmd_serve(client: SwarmClient, args: argparse.Namespace) -> int:
    import time

    from ray import serve

    from swarm_ray.gateway import ApiKeys, GatewayConfig, build_app
    from swarm_ray.runtime._config import state_dir

    config = GatewayConfig(
        orchestrator=args.name,
        catalogs=tuple(args.catalog or DEFAULT_CATALOGS),
        state_dir=args.state_dir,
        api_keys_file=args.keys_file,
        num_replicas=args.replicas,
    )
    keys = ApiKeys.from_config(args.keys_file, state_dir=args.state_dir or state_dir())
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(build_app(config), name=args.app_name, route_prefix="/")
    print(f"swarm-ray gateway on http://{args.host}:{args.port}/ (OpenAPI at /docs)")
    print(f"API keys from {keys.source}; send `Authorization: Bearer <key>`", file=sys.stderr)
    if args.detach:
        return 0
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.delete(args.app_name)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="swarm-ray", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="Ray cluster address (default: running cluster or local)")
    parser.add_argument(
        "--state-dir", help="state directory (default: $SWARM_RAY_STATE_DIR or ~/.swarm-ray)"
    )
    parser.add_argument(
        "--catalog", action="append", help="catalog import path (repeatable; default: built-ins)"
    )
    parser.add_argument("--name", default=ORCHESTRATOR_NAME, help="orchestrator actor name")
    parser.add_argument(
        "--orchestrators",
        type=int,
        help="orchestrator shards taking new tasks (default: $SWARM_RAY_ORCHESTRATORS or 1)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status", help="the orchestrator and its counters")
    tasks = sub.add_parser("tasks", help="newest tasks")
    tasks.add_argument("--limit", type=int, default=20)
    show = sub.add_parser("show", help="one task in full")
    show.add_argument("task")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    cancel = sub.add_parser("cancel", help="cancel a task")
    cancel.add_argument("task")
    answer = sub.add_parser("answer", help="answer a sub-task waiting for a person")
    answer.add_argument("task")
    answer.add_argument("answer", help="the answer, a JSON object matching its schema")
    answer.add_argument("--subtask", help="the waiting sub-task (needed when several wait)")
    run = sub.add_parser("run", help="submit a task and follow it")
    run.add_argument("template")
    run.add_argument("items", nargs="*")
    run.add_argument("--params", help="JSON object of template parameters")
    run.add_argument("--query", help="the request in words")
    run.add_argument("--max-cost", type=float, help="stop the task past this cost (its budget)")
    run.add_argument("--max-tokens", type=int, help="stop the task past this many model tokens")
    gateway = sub.add_parser("serve", help="run the HTTP gateway on Ray Serve")
    gateway.add_argument("--host", default="127.0.0.1", help="address to listen on")
    gateway.add_argument("--port", type=int, default=8000)
    gateway.add_argument("--replicas", type=int, default=1, help="gateway replicas")
    gateway.add_argument("--keys-file", help="API keys, one per line (default: generated)")
    gateway.add_argument("--app-name", default="swarm-gateway", help="Serve application name")
    gateway.add_argument(
        "--detach", action="store_true", help="return once deployed (the cluster keeps it)"
    )
    sub.add_parser("compare", help="compare documents (the main job; see `compare -h`)")
    sub.add_parser("video", help="analyse a long video (see `video -h`)")
    sub.add_parser(
        "train-extractor",
        help="train the document extractor's scorer from labeled datasheets (see its `-h`)",
    )
    return parser


_COMMANDS = {
    "status": _cmd_status,
    "tasks": _cmd_tasks,
    "show": _cmd_show,
    "cancel": _cmd_cancel,
    "answer": _cmd_answer,
    "run": _cmd_run,
    "serve": _cmd_serve,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `swarm-ray` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        from swarm_ray.documents._job import main as compare

        return compare(argv[1:])
    if argv[:1] == ["train-extractor"]:
        from swarm_ray.documents._training import main as train

        return train(argv[1:])
    if argv[:1] == ["video"]:
        from swarm_ray.video._job import main as video

        return video(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        client = _connect(args)
        return _COMMANDS[args.command](client, args)
    except SwarmError as exc:
        print(f"swarm-ray: error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
