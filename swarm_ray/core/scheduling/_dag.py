"""The scheduler's one table of sub-tasks: a record each, and what makes readiness cheap.

`Dag` holds every sub-task's `_Node` in the order added (the dynamically added ones
included), links each to what depends on it, and keeps the counts that spare a scan per
event: how many settled (`settled`, kept by `set`), and how often a settled sub-task
became unsettled or was replaced by a feedback round (`unsettled`, which dates the marks
`settled_deps` leaves). Every status change goes through `set`, every sub-task in
through `add`. The scheduler owns one `Dag` and writes a node's other facts (its
attempts, its capability, its answer) as its policies decide.
"""

from __future__ import annotations

from swarm_ray.core.model._subtask import SubTaskSpec
from swarm_ray.core.scheduling._node import SETTLED, SubTaskStatus, _Node

__all__: list[str] = []


class Dag:
    """Every sub-task of one task, in the order added. Mutable; its scheduler's alone."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        """Every sub-task, the dynamically added ones included, in the order added."""
        self.settled = 0
        """Sub-tasks settled now (`set` keeps it): the task ends when all are."""
        self.unsettled = 0
        """Times a settled sub-task became unsettled or was replaced (`settled_deps`)."""
        self._fresh: list[str] = []
        """Added since the last `take_fresh`: each may be ready at once."""

    def set(self, node: _Node, status: SubTaskStatus) -> None:
        """Move `node` to `status`, counting the settled ones."""
        was, now = node.status in SETTLED, status in SETTLED
        self.settled += now - was
        self.unsettled += was and not now
        node.status = status

    def add(self, spec: SubTaskSpec, *, origin: str, link: bool = True) -> None:
        """Add a pending sub-task; `link` makes it a dependent of its dependencies now."""
        node = self.nodes.get(spec.id)
        if node is None:
            self.nodes[spec.id] = _Node(
                spec=spec,
                origin=origin,
                index=len(self.nodes),
                capability=spec.capability_id,
                tried=[spec.capability_id],
            )
        else:  # an id added again (a fan-out over a later round) starts over where it was
            node.spec, node.origin, node.index = spec, origin, len(self.nodes)
            node.capability, node.tried = spec.capability_id, [spec.capability_id]
            node.attempt = node.cap_attempts = 0
            self.set(node, SubTaskStatus.PENDING)
        self._fresh.append(spec.id)
        if link:
            self.link(spec)

    def link(self, spec: SubTaskSpec) -> None:
        """Make `spec` a dependent of each of its known dependencies."""
        for dep in spec.depends_on:
            node = self.nodes.get(dep)
            if node is not None:  # an unknown one fails at dispatch, naming it
                node.dependents.append(spec.id)

    def wait_also(self, other: _Node, added: tuple[str, ...]) -> None:
        """Make the pending `other` wait on the sub-tasks `added` too."""
        other.spec = other.spec.model_copy(update={"depends_on": (*other.spec.depends_on, *added)})
        for new in added:
            self.nodes[new].dependents.append(other.spec.id)

    def new_round(self, old: str, new: str) -> None:
        """Let the feedback round `new` stand in for `old`: what waited on it waits on `new`."""
        self.nodes[old].replaced_by = new
        self.nodes[new].previous = old

    def rounds_replaced(self) -> None:
        """Count a feedback round started: marks `settled_deps` left before are stale."""
        self.unsettled += 1

    def take_fresh(self) -> list[str]:
        """The sub-tasks added since the last call, and forget them."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def waiting_on(self, sid: str) -> list[str]:
        """Sub-tasks that may have become ready because `sid` (or a round it replaced) settled."""
        node = self.nodes[sid]
        found = list(node.dependents)
        while node.previous is not None:
            node = self.nodes[node.previous]
            found += node.dependents
        return found

    def settled_deps(self, node: _Node) -> list[_Node] | None:
        """The latest rounds of `node`'s dependencies; None while one has not settled.

        A join over n sub-tasks is asked after each of them settles: the scan starts at
        the dependency that was unsettled last time (`_Node.unsettled_at`), so the n asks
        cost O(n) in all, not O(n^2). That mark holds while no settled sub-task became
        unsettled or was replaced by a feedback round (`unsettled`, a counter) and the
        spec is the one it was made for (its `depends_on` grows by new specs).
        """
        nodes, deps = self.nodes, node.spec.depends_on
        mark = node.unsettled_at
        start = (
            mark[2]
            if mark is not None and mark[0] == self.unsettled and mark[1] is node.spec
            else 0
        )
        for position in range(start, len(deps)):
            dep = nodes[deps[position]]
            while dep.replaced_by is not None:
                dep = nodes[dep.replaced_by]
            if dep.status not in SETTLED:
                node.unsettled_at = (self.unsettled, node.spec, position)
                return None
        found = []
        for dep_id in deps:
            dep = nodes[dep_id]
            while dep.replaced_by is not None:
                dep = nodes[dep.replaced_by]
            found.append(dep)
        return found
