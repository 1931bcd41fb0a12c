"""What a document request asks, counted for the orchestrator's request limits.

The orchestrator bounds the fields a request asks of each item (`max_fields`, see
`swarm_ray.core.RequestLimits`); each workload counts its own requests' fields
(`Catalog.count_fields`), as only it knows where a request names them.
"""

from __future__ import annotations

from swarm_ray.core import TaskRequest

__all__: list[str] = []


def count_fields(request: TaskRequest) -> int:
    """The fields a request asks of each document, for the `max_fields` limit.

    Its dimensions (the extraction fans out over them) and its inline fields (each one is
    read in every document).
    """
    return sum(
        len(value) if isinstance(value, list) else 0
        for value in (request.params.get("dimensions"), request.params.get("fields"))
    )
