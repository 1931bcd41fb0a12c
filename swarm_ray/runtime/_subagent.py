"""The pooled sub-agent actor: the agent-process side of `ActorPoolExecutor`.

A `SubAgent` runs attempts of one capability, one at a time, on a fresh input each
(nothing is carried between sub-tasks). The orchestrator sends it one attempt (`run`)
or a chunk of them (`run_stream`), whose results stream back as they finish.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterator

from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.core.model._subtask import SubTask, SubTaskResult
from swarm_ray.runtime._agent import run_subtask
from swarm_ray.runtime._rlimits import limited, run_limited

__all__: list[str] = []

BACKGROUND_NICE = 10
"""How much lower a `background` capability's sub-agents run (see `Resources`)."""

BUNCH_S = 0.002
"""Longest a streaming agent holds a fast sub-task's result for the ones after it."""


class SubAgent:
    """A sub-agent actor: runs attempts of one capability, one at a time."""

    def __init__(self, spec: CapabilitySpec, name: str) -> None:
        self._spec = spec
        self._name = name
        if spec.resources.background:
            os.nice(BACKGROUND_NICE)  # this actor's own worker process

    def run(self, subtask: SubTask) -> SubTaskResult:
        """Run one attempt (fresh input, no state kept between calls)."""
        if limited(self._spec.resources, subtask):  # untrusted work: in a limited child process
            return run_limited(self._spec, subtask, agent=self._name)
        return run_subtask(self._spec, subtask, agent=self._name)

    def run_stream(self, subtasks: list[SubTask]) -> Iterator[list[SubTaskResult]]:
        """Run attempts in order on a worker thread; yield their results in bunches.

        Every streamed item costs the orchestrator the same, whatever it holds: Ray
        announces it, the orchestrator fetches and deserialises it. For sub-tasks that
        take a fraction of a millisecond that price was most of the orchestrator's work.
        So a result goes out with every other one finished by then, and after a fast one
        (quicker than `BUNCH_S`) the stream waits for the next ones up to `BUNCH_S`.
        No result is held back longer than that, and a slow sub-task's result goes out
        alone the moment it exists.

        Only fast sub-tasks run ahead of the stream. After a slow one the worker starts
        the next once the stream has sent this result, as a plain generator would: when
        the orchestrator has died, sending fails, the stream ends, and the agent starts
        nothing more that a restarted orchestrator would run again.
        """
        done: queue.SimpleQueue[tuple[SubTaskResult | BaseException, bool]] = queue.SimpleQueue()
        stop = threading.Event()
        sent = threading.Condition()  # notified as `left` falls, and on stopping
        left = len(subtasks)

        def work() -> None:
            for index, subtask in enumerate(subtasks):
                if stop.is_set():
                    return
                began = time.perf_counter()
                try:
                    result: SubTaskResult | BaseException = self.run(subtask)
                except BaseException as exc:  # handed to the stream, which raises it
                    result = exc
                fast = time.perf_counter() - began < BUNCH_S
                done.put((result, fast))
                if isinstance(result, BaseException):
                    return
                if not fast:  # wait until this result is sent (`index` of them were before)
                    with sent:
                        while len(subtasks) - left <= index and not stop.is_set():
                            sent.wait()

        threading.Thread(target=work, name=f"subtasks:{self._name}", daemon=True).start()
        try:
            while left:
                bunch: list[SubTaskResult] = []
                item, fast = done.get()
                until = time.perf_counter() + BUNCH_S if fast else 0.0
                while True:
                    if isinstance(item, BaseException):
                        if bunch:
                            yield bunch
                        raise item
                    bunch.append(item)
                    if len(bunch) == left:
                        break
                    try:
                        wait = until - time.perf_counter()
                        item, _ = done.get(timeout=wait) if wait > 0 else done.get_nowait()
                    except queue.Empty:
                        break
                yield bunch
                with sent:
                    left -= len(bunch)
                    sent.notify()
        finally:
            stop.set()
            with sent:
                sent.notify()

    def pid(self) -> int:
        """This agent's process id (tests kill agents by it)."""
        return os.getpid()
