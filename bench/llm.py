"""Tokens/s through the LLMAgent Serve deployment against the bare engine, same prompts.

CPU (default): llama.cpp with the packaged SmolLM2-135M, one replica, requests one at a
time; the bare engine runs in this process. The two sides alternate in rounds in one
run, so drift of the machine's load hits both alike. Goal: serve/bare >= 0.9.

OpenAI-compatible endpoint (`--engine openai`): `OpenAIEngine` inside the LLMAgent
replica (with the endpoint's budget actor in the path: `--budget`, on by default)
against the same server called directly (one httpx POST per request, same body). With
no `--url`, llama-cpp-python's own server is started on the packaged SmolLM2 with one
thread (`llama-cpp-python[server]`).

GPU (`bench/gpu_check.sh` drives this): `--engine vllm --model DIR`, one side per
process (`--side bare` or `--side serve`) because vLLM keeps its GPU memory until the
process exits; `--concurrency` requests in flight at once.

    python bench/llm.py                       # CPU, both sides, prints the ratio
    python bench/llm.py --engine openai       # llama.cpp's OpenAI server: swarm vs direct
    python bench/llm.py [--engine openai] --quick   # CI: 4 requests x 2 rounds, 32 tokens
    python bench/llm.py --engine vllm --model /models/m --side serve \
        --num-gpus 0.25 --replicas 4 --concurrency 64 --requests 256 --json-out serve.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _quick import need

from swarm_ray import Resources, TokenUsage
from swarm_ray.llm import (
    ChatRequest,
    Completion,
    EndpointLimits,
    EngineConfig,
    GenerationParams,
    LLMDeploymentOptions,
    Message,
    llm_app,
    load_engine,
)

PROMPTS = [
    "Write two sentences about rivers.",
    "List three uses of copper.",
    "Describe a bicycle in one paragraph.",
    "Explain what a battery does.",
    "Give advice for a first job interview.",
    "Describe the weather in spring.",
    "Write a short note thanking a colleague.",
    "Explain why the sky looks blue.",
]


def _requests(n: int, max_tokens: int) -> list[ChatRequest]:
    params = GenerationParams(max_tokens=max_tokens)
    return [
        ChatRequest(
            messages=(Message(role="user", content=PROMPTS[i % len(PROMPTS)]),), params=params
        )
        for i in range(n)
    ]


def _measure(call: Any, requests: list[ChatRequest], concurrency: int) -> tuple[int, float]:
    """(completion tokens, wall seconds) for all `requests`, `concurrency` at a time."""
    started = time.perf_counter()
    if concurrency == 1:
        done = [call(r) for r in requests]
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            done = list(pool.map(call, requests))
    seconds = time.perf_counter() - started
    return sum(c.usage.completion_tokens for c in done), seconds


class Side:
    """Totals of one side over all rounds."""

    def __init__(self, name: str, call: Any) -> None:
        self.name, self.call, self.tokens, self.seconds = name, call, 0, 0.0

    def run(self, requests: list[ChatRequest], concurrency: int) -> None:
        tokens, seconds = _measure(self.call, requests, concurrency)
        self.tokens += tokens
        self.seconds += seconds

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "side": self.name,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "tokens_per_s": round(self.tps, 2),
        }


@contextlib.contextmanager
def _llama_server(threads: int) -> Iterator[str]:
    """llama-cpp-python's OpenAI server on the packaged SmolLM2; yields its base URL."""
    import httpx

    from swarm_ray.llm import default_gguf
    from swarm_ray.testing.llm_stubs import free_port

    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf())]
    command += ["--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _direct(url: str, model: str | None) -> Side:
    """The endpoint called straight: one POST per request, the body the engine sends."""
    import httpx

    http = httpx.Client(timeout=300)
    model = model or http.get(f"{url}/models").json()["data"][0]["id"]

    def call(r: ChatRequest) -> Completion:
        body = {
            "model": model,
            "messages": [m.wire() for m in r.messages],
            "max_tokens": r.params.max_tokens,
            "temperature": r.params.temperature,
            "seed": r.params.seed,
        }
        started = time.perf_counter()
        data = http.post(f"{url}/chat/completions", json=body).json()
        usage = TokenUsage(
            completion_tokens=data["usage"]["completion_tokens"],
            calls=1,
            seconds=time.perf_counter() - started,
        )
        text = data["choices"][0]["message"]["content"] or ""
        return Completion(text=text, model=model, usage=usage)

    return Side("direct", call)


def _bare(config: EngineConfig, num_gpus: float) -> Side:
    engine = load_engine(config, num_gpus=num_gpus)

    def call(r: ChatRequest) -> Completion:
        return engine.complete(r.messages, r.params)

    return Side("bare", call)


def _serve(config: EngineConfig, args: argparse.Namespace) -> Side:
    import ray
    from ray import serve

    ray.init(address="local", include_dashboard=False, log_to_driver=False, configure_logging=False)
    resources = Resources(num_cpus=args.num_cpus, num_gpus=args.num_gpus)
    options = LLMDeploymentOptions(
        min_replicas=args.replicas,
        max_replicas=args.replicas,
        max_ongoing_requests=max(1, args.concurrency // args.replicas + 1),
    )
    handle = serve.run(
        llm_app(config, resources=resources, options=options), name="bench-llm", route_prefix=None
    )

    def call(r: ChatRequest) -> Completion:
        return handle.chat.remote(r).result()  # type: ignore[no-any-return]

    return Side("serve", call)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", default="llama_cpp", choices=["llama_cpp", "vllm", "openai"])
    parser.add_argument("--url", default=None, help="OpenAI-compatible base URL (openai)")
    parser.add_argument(
        "--budget",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="openai: route every request through the endpoint's budget actor",
    )
    parser.add_argument("--model", default=None, help="GGUF file or model directory")
    parser.add_argument("--side", default="both", choices=["both", "bare", "serve"])
    parser.add_argument("--requests", type=int, default=8, help="requests per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--num-cpus", type=float, default=1.0)
    parser.add_argument("--num-gpus", type=float, default=0.0)
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads (default: --num-cpus)"
    )
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument(
        "--quick", action="store_true", help="CI: 4 requests x 2 rounds of 32 tokens"
    )
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rounds, args.max_tokens = 4, 2, 32

    # Both sides get the same threads; a replica's default is its `num_cpus`.
    threads = args.threads or max(1, int(args.num_cpus))
    with contextlib.ExitStack() as stack:
        if args.engine == "openai" and args.url is None:
            args.url = stack.enter_context(_llama_server(threads))
        _run(args, threads)


def _run(args: argparse.Namespace, threads: int) -> None:
    config = EngineConfig(
        kind=args.engine,
        model=args.model,
        n_threads=threads if args.engine == "llama_cpp" else None,
        base_url=args.url,
        # a budget that never binds: what its actor hop costs
        limits=EndpointLimits(max_concurrent=64) if args.budget else EndpointLimits(),
    )
    sides: list[Side] = []
    if args.side in ("both", "bare"):
        if args.engine == "openai":
            sides.append(_direct(args.url, args.model))
        else:
            sides.append(_bare(config, args.num_gpus))
    if args.side in ("both", "serve"):
        sides.append(_serve(config, args))
    requests = _requests(args.requests, args.max_tokens)
    for side in sides:  # warm-up: load, first-call costs, Serve routing
        _measure(side.call, requests[: max(1, args.concurrency)], args.concurrency)
    for _ in range(args.rounds):
        for side in sides:
            side.run(requests, args.concurrency)

    print(
        f"engine={args.engine} requests={args.requests}x{args.rounds} "
        f"max_tokens={args.max_tokens} concurrency={args.concurrency} "
        f"replicas={args.replicas} num_gpus={args.num_gpus} threads={threads}"
    )
    for side in sides:
        need(side.tokens or None, f"{side.name}: tokens/s (no completion tokens came back)")
        s = side.summary()
        print(
            f"  {s['side']:>5}: {s['tokens']:6d} tokens in {s['seconds']:8.2f} s "
            f"= {s['tokens_per_s']:8.1f} tokens/s"
        )
    result: dict[str, Any] = {
        "config": vars(args) | {"json_out": None},
        "sides": [s.summary() for s in sides],
    }
    if len(sides) == 2:
        ratio = sides[1].tps / sides[0].tps if sides[0].tps else 0.0
        result["ratio"] = round(ratio, 3)
        print(f"  {sides[1].name}/{sides[0].name} = {ratio:.3f} (goal >= 0.9)")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2))
    if args.side in ("both", "serve"):
        from ray import serve

        serve.delete("bench-llm")


if __name__ == "__main__":
    main()
