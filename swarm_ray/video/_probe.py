"""`probe_video`: what a video is, read from its headers and a handful of packets.

Probing must stay cheap on a 40 GB file: it reads the container header, demuxes (never
decodes) the first few hundred video packets to judge whether the frame rate is variable,
decodes one frame for the rotation, and finds keyframes either in the container's index
(MP4/MOV carry one for every sample) or by seeking to a few dozen points and reading the
packet the demuxer lands on (a seek lands on a keyframe). Keyframe positions matter
because a worker seeks to its segment: a segment boundary costs up to one keyframe
interval of extra decoding.

A file that cannot be analysed raises `VideoProbeError` naming it and a reason: missing,
empty, not a video, no video stream, no duration (some WebM recorders never write one,
and without it nothing can be split by time), or truncated (its index points past the
end of the file, or the demuxer cannot reach its last part).
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from typing import Any

import av
import av.container
import av.video.stream
from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import ReadPath
from swarm_ray.video._errors import VideoFailureReason, VideoProbeError
from swarm_ray.video._io import file_size, index_keyframes, open_video, pts_offset_s

__all__ = ["AudioInfo", "StreamInfo", "VideoMetadata", "probe_video"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_RATE_PACKETS = 300
"""Video packets demuxed to judge the frame rate (about 10 s at 30 fps)."""


class StreamInfo(BaseModel):
    """One stream of the container."""

    model_config = _FROZEN
    index: int
    type: str
    """`video`, `audio`, `subtitle`, `data`, ..."""
    codec: str | None
    language: str | None = None


class AudioInfo(BaseModel):
    """The first audio stream, the one loudness is measured on."""

    model_config = _FROZEN
    index: int
    codec: str
    sample_rate: int
    channels: int


class VideoMetadata(BaseModel):
    """What `video.probe.metadata` returns."""

    model_config = _FROZEN
    path: ReadPath
    """The file as given (the next stages open it again)."""
    size_bytes: int | None
    """File size, when known."""
    container: str
    """Demuxer name (`mov,mp4,m4a,3gp,3g2,mj2`, `matroska,webm`, ...)."""
    duration_s: float = Field(gt=0)
    """Length in seconds."""
    start_time_s: float = 0.0
    """Timestamp of the first frame (not always 0)."""
    bit_rate: int | None = None
    """Overall bits per second, from the header or size and duration."""
    video_index: int
    """Index of the video stream analysed (the first)."""
    codec: str
    """Video codec (`h264`, `vp9`, ...)."""
    width: int
    height: int
    pixel_format: str | None
    frame_rate: float
    """Average frames per second (frames over duration)."""
    nominal_frame_rate: float | None
    """The container's declared rate; differs from `frame_rate` when frames were dropped."""
    variable_frame_rate: bool
    """True when frame durations vary (screen recordings, phones, dropped frames)."""
    frame_count: int
    """Frames in the stream: from the header when it says, else duration x frame rate."""
    rotation: int
    """Degrees the picture must be turned for display (0, 90, 180, 270)."""
    audio: AudioInfo | None
    """The first audio stream, if any."""
    streams: tuple[StreamInfo, ...]
    """Every stream in the container."""
    keyframes_s: tuple[float, ...]
    """Keyframe times (a sample of at most `max_keyframes`, evenly spread)."""
    keyframe_count: int | None
    """Keyframes in the whole file, when the container's index tells."""
    keyframe_source: str
    """`index` (the container's own) or `seek` (found by seeking)."""
    max_keyframe_gap_s: float
    """Longest interval between the keyframes seen: the worst seek overshoot."""
    pts_offset_s: float = 0.0
    """Presentation minus decoding time of the first packet; container indexes hold
    decoding times, so this is added to them to get the times frames are shown at."""
    warnings: tuple[str, ...] = ()
    """Oddities that still allow analysis."""


def _fail(path: str, reason: VideoFailureReason, why: str, **details: Any) -> VideoProbeError:
    return VideoProbeError(f"video `{path}` {why}", path=path, reason=reason, **details)


def _duration(container: av.container.InputContainer, stream: Any, path: str) -> float:
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    if stream.duration is not None and stream.duration > 0 and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    raise _fail(
        path,
        VideoFailureReason.NO_DURATION,
        "declares no duration (remux it, e.g. `ffmpeg -i in -c copy out.mkv`, to write one)",
    )


def _rate_profile(
    container: av.container.InputContainer, stream: Any
) -> tuple[bool, float | None, int]:
    """(variable?, rate measured from timestamps, packets seen) from the first packets."""
    stamps: list[int] = []
    with contextlib.suppress(av.error.FFmpegError):
        for packet in container.demux(stream):
            if packet.pts is not None:
                stamps.append(packet.pts)
            if len(stamps) >= _RATE_PACKETS:
                break
    stamps.sort()
    steps = [b - a for a, b in itertools.pairwise(stamps) if b > a]
    if len(steps) < 2 or stream.time_base is None:
        return False, None, len(stamps)
    common = Counter(steps).most_common()
    main_step = common[0][0]
    tolerance = max(0.02 * main_step, 1.5)  # millisecond time bases round 41.7 to 41 or 42
    irregular = sum(n for step, n in common if abs(step - main_step) > tolerance)
    measured = 1 / float(main_step * stream.time_base)
    return irregular > 0.05 * len(steps), measured, len(stamps)


def _past_end(stream: Any, size: int | None) -> bool:
    """Whether the container index points past the end of the file (cut short)."""
    entries = stream.index_entries
    if size is None or entries is None or len(entries) < 2:
        return False
    last = entries[len(entries) - 1]
    return bool(last.pos + last.size > size)


def _keyframes_by_seeking(
    container: av.container.InputContainer, stream: Any, duration: float, start: float, n: int
) -> list[float]:
    found: set[float] = set()
    for i in range(n):
        target = start + duration * i / n
        try:
            container.seek(int(target / stream.time_base), stream=stream, backward=True)
            for packet in container.demux(stream):
                if packet.pts is not None:
                    found.add(round(float(packet.pts * stream.time_base), 6))
                    break
        except av.error.FFmpegError:
            continue
    return sorted(found)


def _reaches_end(
    container: av.container.InputContainer, stream: Any, duration: float, start: float
) -> bool:
    """Whether the demuxer can read a packet from the last tenth of the file."""
    target = start + duration * 0.9
    try:
        container.seek(int(target / stream.time_base), stream=stream, backward=True)
        for packet in container.demux(stream):
            if packet.size:
                return True
    except av.error.FFmpegError:
        return False
    return False


def _rotation(container: av.container.InputContainer, stream: Any) -> int:
    with contextlib.suppress(av.error.FFmpegError, StopIteration):
        container.seek(0, stream=stream, backward=True)
        frame = next(container.decode(stream))
        return round(-float(frame.rotation)) % 360
    return 0


def _sample(values: list[float], n: int) -> list[float]:
    if len(values) <= n:
        return values
    return [values[round(i * (len(values) - 1) / (n - 1))] for i in range(n)]


def probe_video(path: str, *, max_keyframes: int = 256, seek_points: int = 48) -> VideoMetadata:
    """Describe the video at `path` (raises `VideoProbeError` naming it and the reason).

    Args:
        path: A local path or a URI (see `open_video`).
        max_keyframes: At most this many keyframe times are returned (evenly spread).
        seek_points: Seeks made to find keyframes when the container has no index.
    """
    size = file_size(path)
    with open_video(path) as container:
        if not container.streams.video:
            raise _fail(path, VideoFailureReason.NO_VIDEO_STREAM, "has no video stream")
        stream: Any = container.streams.video[0]  # PyAV types time_base as optional
        ctx = stream.codec_context
        if ctx is None or not ctx.name:
            raise _fail(path, VideoFailureReason.UNSUPPORTED_CODEC, "has an unknown video codec")
        duration = _duration(container, stream, path)
        start = float(stream.start_time * stream.time_base) if stream.start_time else 0.0
        variable, measured, packets = _rate_profile(container, stream)
        if packets == 0:
            raise _fail(path, VideoFailureReason.TRUNCATED, "holds no video packets")
        warnings: list[str] = []
        nominal = float(stream.base_rate) if stream.base_rate else None
        average = float(stream.average_rate) if stream.average_rate else (measured or nominal)
        if average is None:
            raise _fail(path, VideoFailureReason.MALFORMED, "has no frame rate")
        if nominal and abs(average - nominal) > 0.01 * nominal:
            variable = True
        offset = pts_offset_s(container, stream)
        keys, source = index_keyframes(stream, offset), "index"
        if _past_end(stream, size) or not _reaches_end(container, stream, duration, start):
            raise _fail(
                path,
                VideoFailureReason.TRUNCATED,
                "is truncated: its index or duration reaches past the data in the file",
                size_bytes=size,
            )
        if not keys:
            keys, source = (
                _keyframes_by_seeking(container, stream, duration, start, seek_points),
                "seek",
            )
        if not keys:
            warnings.append("no keyframe found: every segment will decode from the start")
        count = len(keys) if source == "index" else None
        gaps = [b - a for a, b in zip([start, *keys], [*keys, start + duration], strict=False)]
        frames = stream.frames or round(duration * average)
        rotation = _rotation(container, stream)
        audio = None
        if container.streams.audio:
            a = container.streams.audio[0]
            audio = AudioInfo(
                index=a.index,
                codec=a.codec_context.name,
                sample_rate=a.codec_context.sample_rate or a.rate or 0,
                channels=a.codec_context.channels or 0,
            )
        streams = tuple(
            StreamInfo(
                index=s.index,
                type=s.type,
                codec=s.codec_context.name if s.codec_context else None,
                language=s.language,
            )
            for s in container.streams
        )
        bit_rate = container.bit_rate or (round(size * 8 / duration) if size else None)
        return VideoMetadata(
            path=path,
            size_bytes=size,
            container=container.format.name,
            duration_s=duration,
            start_time_s=start,
            bit_rate=bit_rate,
            video_index=stream.index,
            codec=ctx.name,
            width=ctx.width,
            height=ctx.height,
            pixel_format=ctx.pix_fmt,
            frame_rate=average,
            nominal_frame_rate=nominal,
            variable_frame_rate=variable,
            frame_count=frames,
            rotation=rotation,
            audio=audio,
            streams=streams,
            keyframes_s=tuple(_sample(keys, max_keyframes)),
            keyframe_count=count,
            keyframe_source=source,
            max_keyframe_gap_s=max(gaps) if gaps else duration,
            pts_offset_s=offset,
            warnings=tuple(warnings),
        )
