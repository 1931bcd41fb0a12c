"""Opening a video from a path or URI, with every failure turned into a named error.

Each worker opens the file itself (nothing decoded is shipped between processes), so the
file must be reachable from every node: a shared file system path, a URL FFmpeg reads
itself (`http://`, `https://`), or any URI `pyarrow.fs` understands (`s3://`, `gs://`,
`hdfs://`), read through a seekable pyarrow file so a worker fetches only the byte
ranges of its own segment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import av
import av.container

from swarm_ray.video._errors import VideoFailureReason, VideoProbeError

__all__ = ["file_size", "index_keyframes", "open_video", "pts_offset_s"]

_FFMPEG_SCHEMES = ("http", "https", "rtsp", "rtmp", "ftp", "file")
"""URL schemes FFmpeg opens on its own."""
_MP4_BRANDS = (b"ftyp", b"moov", b"mdat", b"free", b"wide")
"""First box types of an ISO media file: a file that starts with one but will not open
was most likely cut short (its index, written last, is missing)."""


def _scheme(path: str) -> str | None:
    return path.split("://", 1)[0].lower() if "://" in path else None


def file_size(path: str) -> int | None:
    """Size in bytes, or None when it cannot be known cheaply."""
    scheme = _scheme(path)
    if scheme is None:
        try:
            return os.path.getsize(path)
        except OSError:
            return None
    if scheme in _FFMPEG_SCHEMES:
        return None
    import pyarrow.fs as pafs  # type: ignore[import-untyped]

    fs, inner = pafs.FileSystem.from_uri(path)
    size = fs.get_file_info(inner).size
    return None if size is None else int(size)


def _looks_like_mp4(path: str) -> bool:
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        return handle.read(8)[4:8] in _MP4_BRANDS
    return False


def _check_local(path: str) -> None:
    if not os.path.exists(path):
        raise VideoProbeError(
            f"video `{path}` does not exist", path=path, reason=VideoFailureReason.NOT_FOUND
        )
    if os.path.isdir(path) or not os.access(path, os.R_OK):
        raise VideoProbeError(
            f"video `{path}` is not a readable file",
            path=path,
            reason=VideoFailureReason.UNREADABLE,
        )
    if os.path.getsize(path) == 0:
        raise VideoProbeError(
            f"video `{path}` is empty (0 bytes)", path=path, reason=VideoFailureReason.EMPTY
        )


def _open(path: str) -> tuple[av.container.InputContainer, Any]:
    scheme = _scheme(path)
    if scheme is None:
        _check_local(path)
        return av.open(path, mode="r"), None
    if scheme in _FFMPEG_SCHEMES:
        return av.open(path, mode="r"), None
    import pyarrow.fs as pafs

    fs, inner = pafs.FileSystem.from_uri(path)
    handle = fs.open_input_file(inner)
    try:
        return av.open(handle, mode="r"), handle
    except BaseException:
        handle.close()
        raise


@contextlib.contextmanager
def open_video(path: str) -> Iterator[av.container.InputContainer]:
    """Open `path` for reading; raise `VideoProbeError` naming it when that fails.

    The container (and the pyarrow file behind it, if any) is closed on exit: FFmpeg
    holds buffers and the file until then, and a long-lived worker opens many files.
    """
    try:
        container, handle = _open(path)
    except VideoProbeError:
        raise
    except (FileNotFoundError, av.error.FileNotFoundError) as exc:
        raise VideoProbeError(
            f"video `{path}` does not exist: {exc}", path=path, reason=VideoFailureReason.NOT_FOUND
        ) from None
    except (PermissionError, av.error.PermissionError) as exc:
        raise VideoProbeError(
            f"video `{path}` cannot be read: {exc}", path=path, reason=VideoFailureReason.UNREADABLE
        ) from None
    except av.error.InvalidDataError as exc:
        truncated = _scheme(path) is None and _looks_like_mp4(path)
        reason = VideoFailureReason.TRUNCATED if truncated else VideoFailureReason.NOT_A_VIDEO
        hint = "an MP4 without its index: probably cut short" if truncated else "not a video"
        raise VideoProbeError(
            f"video `{path}` cannot be opened ({hint}): {exc}", path=path, reason=reason
        ) from None
    except (av.error.FFmpegError, OSError) as exc:
        raise VideoProbeError(
            f"video `{path}` cannot be opened: {type(exc).__name__}: {exc}",
            path=path,
            reason=VideoFailureReason.MALFORMED,
        ) from None
    try:
        yield container
    finally:
        container.close()
        if handle is not None:
            handle.close()


def pts_offset_s(container: av.container.InputContainer, stream: Any) -> float:
    """How far presentation times run ahead of decoding times (B-frame reordering delay).

    Container indexes hold decoding timestamps while frames come out with presentation
    timestamps (which is also what seeks take): index time + offset = time shown.
    """
    container.seek(0, stream=stream, backward=True)
    for packet in container.demux(stream):
        if packet.pts is not None and packet.dts is not None:
            return max(0.0, float((packet.pts - packet.dts) * stream.time_base))
    return 0.0


def index_keyframes(stream: Any, offset_s: float) -> list[float]:
    """Presentation times of the keyframes in the container's index (empty without one)."""
    entries = stream.index_entries
    if entries is None or len(entries) < 2:
        return []
    base = stream.time_base
    return sorted(float(e.timestamp * base) + offset_s for e in entries if e.is_keyframe)
