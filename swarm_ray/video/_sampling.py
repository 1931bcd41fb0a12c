"""The cheap first pass: a bounded number of frame pairs and audio windows, by seeking.

A sample at time t is two consecutive frames (their difference is the motion at t) and
a short audio window (its loudness). Reaching t means seeking to the keyframe before it
and decoding forward, so the cost of a sample is the distance from that keyframe. Two
things keep the pass cheap whatever the file's length:

- sample times snap to a keyframe inside their grid cell when there is one, which makes
  a sample cost two decoded frames; long gameplay recordings have keyframes every few
  seconds, far denser than a grid of at most `max_samples` points;
- before decoding anything, the cost of the plan is estimated from the keyframe index and
  the number of samples is cut until it fits `max_decode_fraction` of the file's frames.

`frames_decoded` in the result is counted, not estimated, so tests can hold it to that.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import av
import av.container
import numpy as np

from swarm_ray.video._features import (
    FrameSignature,
    SignatureReader,
    audio_samples,
    loudness_db,
)
from swarm_ray.video._io import index_keyframes, open_video

__all__ = ["RawSample", "SamplingResult", "keyframe_times", "plan_sample_times", "take_samples"]


@dataclass(frozen=True)
class RawSample:
    """What was read at one sample time."""

    t: float
    """Time of the first frame of the pair."""
    first: FrameSignature
    """The frame at `t`."""
    second: FrameSignature | None
    """The frame after it (None at the very end)."""
    loudness_db: float | None
    """Audio level over the window after `t` (None without audio)."""


@dataclass(frozen=True)
class SamplingResult:
    """Samples in time order and what they cost."""

    samples: list[RawSample]
    frames_decoded: int
    seeks: int


def keyframe_times(path: str, fallback: Sequence[float], offset_s: float) -> list[float]:
    """Every keyframe time from the container's index, else `fallback` (the probe's)."""
    with open_video(path) as container:
        found = index_keyframes(container.streams.video[0], offset_s)
    return found or sorted(fallback)


def _snap(grid: list[float], keyframes: list[float], cell: float) -> list[float]:
    times = []
    for t in grid:
        i = bisect.bisect_left(keyframes, t - cell / 2)
        inside = [k for k in keyframes[i : i + 3] if t - cell / 2 <= k < t + cell / 2]
        times.append(min(inside, key=lambda k: abs(k - t)) if inside else t)
    return sorted(set(times))


def _before(keyframes: list[float], t: float) -> float:
    i = bisect.bisect_right(keyframes, t + 1e-6)
    return keyframes[i - 1] if i else -math.inf


def plan_sample_times(
    start: float, duration: float, keyframes: list[float], fps: float, n: int
) -> tuple[list[float], float]:
    """`n` grid times snapped to keyframes, and the frames their decoding should cost."""
    cell = duration / n
    grid = [start + (i + 0.5) * cell for i in range(n)]
    times = _snap(grid, keyframes, cell) if keyframes else grid
    cost, position = 0.0, -math.inf
    for t in times:
        key = _before(keyframes, t) if keyframes else start
        if key <= position < t:  # same GOP, already past the keyframe: keep decoding
            cost += (t - position) * fps + 1
        else:
            cost += max(0.0, t - max(key, start)) * fps + 2
        position = t + 1 / fps
    return times, cost


class _Reader:
    """Demuxes video (and audio) forward from the last seek, decoding what is wanted.

    Once a sample has its two frames, video packets are skipped until the audio window is
    complete; the decoder then misses references, so the next sample must seek (`broken`).
    """

    def __init__(self, container: av.container.InputContainer, audio: bool, fps: float) -> None:
        self.container = container
        self.video: Any = container.streams.video[0]
        self.video.codec_context.thread_count = 1
        self.audio = container.streams.audio[0] if audio and container.streams.audio else None
        self.fps = fps
        self.frames_decoded = 0
        self.seeks = 0
        self.want_video = True
        self.broken = False
        self.signature = SignatureReader()
        self._frames: Iterator[tuple[str, Any]] | None = None

    def seek(self, t: float) -> None:
        target = t + 0.25 / self.fps  # a hair past t: float rounding must not land earlier
        self.container.seek(int(target / self.video.time_base), stream=self.video, backward=True)
        self.seeks += 1
        self.broken = False
        self.want_video = True
        self._frames = None

    def frames(self) -> Iterator[tuple[str, Any]]:
        if self._frames is None:
            self._frames = self._decode()
        return self._frames

    def _decode(self) -> Iterator[tuple[str, Any]]:
        streams = [s for s in (self.video, self.audio) if s is not None]
        for packet in self.container.demux(streams):
            is_video = packet.stream is self.video
            if is_video and not self.want_video:
                self.broken = True
                continue
            try:
                decoded: list[Any] = list(packet.decode())
            except av.error.InvalidDataError:
                continue
            for frame in decoded:
                if frame.time is None:
                    continue
                if is_video:
                    self.frames_decoded += 1
                    yield "video", frame
                else:
                    yield "audio", frame


def _read_one(reader: _Reader, t: float, window: float, fps: float) -> RawSample | None:
    first: FrameSignature | None = None
    second: FrameSignature | None = None
    first_t = t
    chunks: list[np.ndarray] = []
    audio_done = reader.audio is None
    reader.want_video = True
    for kind, frame in reader.frames():
        if kind == "video" and second is None:
            if frame.time < t - 0.5 / fps:
                continue
            if first is None:
                first, first_t = reader.signature(frame), float(frame.time)
            else:
                second = reader.signature(frame)
                reader.want_video = False
        elif kind == "audio" and not audio_done:
            begin = float(frame.time)
            if begin >= t + window:
                audio_done = True
            elif begin + frame.samples / frame.sample_rate > t:
                chunks.append(audio_samples(frame))
        if second is not None and audio_done:
            break
        if float(frame.time) > t + window + 5:  # the audio stream ended early or is sparse
            break
    if first is None:
        return None
    level = None
    if reader.audio is not None:
        level = loudness_db(np.concatenate(chunks, axis=1)) if chunks else None
    return RawSample(t=first_t, first=first, second=second, loudness_db=level)


def take_samples(
    path: str,
    times: Sequence[float],
    *,
    keyframes: Sequence[float],
    fps: float,
    audio: bool,
    window_s: float = 0.5,
) -> SamplingResult:
    """Read a frame pair and an audio window at each of `times` (sorted), seeking as needed.

    Between two samples in the same keyframe interval the reader keeps decoding forward
    rather than seeking back to the keyframe it already passed.
    """
    keys = sorted(keyframes)
    samples: list[RawSample] = []
    with open_video(path) as container:
        reader = _Reader(container, audio, fps)
        position = -math.inf
        for t in times:
            if reader.broken:
                same_gop = False
            elif keys:
                same_gop = _before(keys, t) <= position < t
            else:  # unknown keyframes: keep decoding only across short gaps
                same_gop = 0 <= t - position < 1.0
            if not same_gop:
                reader.seek(t)
            sample = _read_one(reader, t, window_s, fps)
            if sample is None:
                continue
            samples.append(sample)
            position = sample.t + 1 / fps
        return SamplingResult(
            samples=samples, frames_decoded=reader.frames_decoded, seeks=reader.seeks
        )
