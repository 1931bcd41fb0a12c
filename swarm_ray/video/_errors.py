"""The video workload's errors: a bad file is the caller's problem, a bad region is not.

::

    InvalidInputError (swarm_ray)
    └── VideoProbeError       the file cannot be analysed at all: missing, empty, not a
                              video, truncated, no duration. Not retried: the same
                              bytes fail the same way.
    AgentExecutionError (swarm_ray)
    └── SegmentDecodeError    one segment's time range cannot be decoded (a corrupted
                              region). Retried, that segment alone: on a network file
                              system or object store a read can fail once and succeed
                              next time, and the other segments are unaffected.

Both name the file and carry a `VideoFailureReason`, and both survive pickling (their
keyword details rebuild them), so Ray re-raises them as themselves.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from swarm_ray.core import AgentExecutionError, InvalidInputError

__all__ = ["SegmentDecodeError", "VideoFailureReason", "VideoProbeError"]


class VideoFailureReason(StrEnum):
    """Why a file or a segment yields no analysis."""

    NOT_FOUND = "not_found"
    UNREADABLE = "unreadable"
    EMPTY = "empty"
    NOT_A_VIDEO = "not_a_video"
    NO_VIDEO_STREAM = "no_video_stream"
    NO_DURATION = "no_duration"
    TRUNCATED = "truncated"
    MALFORMED = "malformed"
    UNSUPPORTED_CODEC = "unsupported_codec"
    CORRUPT_DATA = "corrupt_data"
    NO_FRAMES = "no_frames"


class VideoProbeError(InvalidInputError):
    """A file that cannot be analysed at all; details `path` and `reason` say which and why.

    Args:
        message: What went wrong, naming the file.
        path: The file as given.
        reason: A `VideoFailureReason` value.
        **details: Further context (FFmpeg's message).
    """

    def __init__(self, message: str, *, path: str, reason: str, **details: Any) -> None:
        super().__init__(message, path=path, reason=reason, **details)


class SegmentDecodeError(AgentExecutionError):
    """One segment of a file could not be decoded.

    Args:
        message: What went wrong, naming the file, the segment and its time range.
        path: The file.
        segment: The segment's index.
        reason: A `VideoFailureReason` value.
        **details: Further context (time range, frames decoded, FFmpeg's message).
    """

    def __init__(
        self, message: str, *, path: str, segment: int, reason: str, **details: Any
    ) -> None:
        super().__init__(message, path=path, segment=segment, reason=reason, **details)
