"""Synthetic videos with a known truth, and longer files remuxed from copies of a clip.

Tests, the benchmark and the job's demo mode need videos whose scene cuts and active
spans are known exactly, without shipping binary files. `generate_sample_video` paints
them with numpy and encodes them with PyAV (H.264 + AAC in MP4):

- each scene has its own background (colour, gradient and stripes), so a cut changes the
  whole frame at once, as a cut does in real footage;
- inside an *active span* several bright blocks race across the frame and the audio is
  loud noise; outside it one small block drifts slowly over a still scene and the audio
  is a quiet tone. Active spans may cross cuts, as fights do in gameplay.

`remux_repeat` concatenates copies of a file's packets with shifted timestamps and no
re-encoding: a long file in seconds, for checking that memory does not grow with length.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SampleVideo", "corrupt_range", "generate_sample_video", "remux_repeat"]

_AUDIO_RATE = 16000
"""Low but plenty for loudness; keeps the samples small."""


class SampleVideo(BaseModel):
    """A generated video and the truth it was painted from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    """The MP4 file."""
    duration_s: float
    """Length in seconds (frames / fps)."""
    fps: int
    """Constant frame rate."""
    frame_count: int
    """Frames written."""
    cut_frames: tuple[int, ...]
    """Index of the first frame of every scene but the first."""
    active_spans_s: tuple[tuple[float, float], ...]
    """`[start, end)` of every active span, in seconds."""
    gop: int = Field(ge=1)
    """Largest keyframe interval asked of the encoder, in frames."""

    @property
    def cut_times_s(self) -> tuple[float, ...]:
        """Cut positions in seconds."""
        return tuple(f / self.fps for f in self.cut_frames)


def _default_truth(
    duration_s: float, seed: int
) -> tuple[tuple[float, ...], tuple[tuple[float, float], ...]]:
    """Cuts about every 7 s and active spans about a third of the time, off the grid."""
    rng = np.random.default_rng(seed)
    cuts: list[float] = []
    t = 4.0 + float(rng.uniform(0, 3))
    while t < duration_s - 3:
        cuts.append(round(t, 2))
        t += float(rng.uniform(5.5, 9.0))
    spans: list[tuple[float, float]] = []
    t = 2.0 + float(rng.uniform(0, 2))
    while t < duration_s - 4:
        length = float(rng.uniform(3.0, 6.0))
        spans.append((round(t, 2), round(min(t + length, duration_s - 1), 2)))
        t += length + float(rng.uniform(5.0, 10.0))
    return tuple(cuts), tuple(spans)


def _background(scene: int, width: int, height: int) -> np.ndarray:
    """A scene's still picture: a hue, a gradient and stripes that differ per scene.

    Scenes alternate dark and bright, so every planted cut is a clear one: the truth
    must not contain cuts a careful viewer would miss.
    """
    rng = np.random.default_rng(1000 + scene)
    base = rng.integers(20, 90, size=3) if scene % 2 else rng.integers(120, 190, size=3)
    yy, xx = np.mgrid[0:height, 0:width]
    angle = rng.uniform(0, math.pi)
    ramp = (np.cos(angle) * xx + np.sin(angle) * yy) / max(width, height)
    period = int(rng.integers(12, 40))
    stripes = ((xx + yy * (scene % 3)) // period) % 2
    img = base[None, None, :] + 50 * ramp[..., None] + 25 * stripes[..., None]
    return np.asarray(np.clip(img, 0, 255), dtype=np.uint8)


def _blocks(
    frame: np.ndarray, t: float, count: int, speed: float, size: int, seed: int
) -> np.ndarray:
    """Draw `count` blocks bouncing across the frame at `speed` frame-widths per second."""
    height, width = frame.shape[:2]
    rng = np.random.default_rng(seed)
    out = frame.copy()
    for _ in range(count):
        x0, y0 = rng.uniform(0, 1, size=2)
        vx, vy = rng.uniform(0.6, 1.0, size=2) * speed * rng.choice([-1, 1], size=2)
        colour = rng.integers(0, 256, size=3)
        x = abs(((x0 + vx * t) % 2) - 1) * (width - size)
        y = abs(((y0 + vy * t * width / height) % 2) - 1) * (height - size)
        out[int(y) : int(y) + size, int(x) : int(x) + size] = colour
    return out


def _audio(n: int, start: int, spans: Sequence[tuple[float, float]], seed: int) -> np.ndarray:
    """Mono float samples `[start, start + n)`: loud noise in active spans, else a soft tone."""
    t = (start + np.arange(n)) / _AUDIO_RATE
    rng = np.random.default_rng(seed + start)
    quiet = 0.01 * np.sin(2 * np.pi * 220 * t)
    loud = 0.5 * rng.uniform(-1, 1, size=n) + 0.2 * np.sin(2 * np.pi * 440 * t)
    active = np.zeros(n, dtype=bool)
    for a, b in spans:
        active |= (t >= a) & (t < b)
    return np.where(active, loud, quiet).astype(np.float32)


def generate_sample_video(
    path: str | os.PathLike[str],
    *,
    duration_s: float = 30.0,
    fps: int = 15,
    width: int = 320,
    height: int = 240,
    cuts_s: Sequence[float] | None = None,
    active_spans_s: Sequence[tuple[float, float]] | None = None,
    gop: int = 30,
    audio: bool = True,
    seed: int = 0,
) -> SampleVideo:
    """Write a synthetic H.264/AAC MP4 with known cuts and active spans.

    Args:
        path: Where to write it (parent directories are created).
        duration_s: Length in seconds.
        fps: Constant frame rate.
        width: Frame width (even).
        height: Frame height (even).
        cuts_s: Scene cut times; default: drawn from `seed`, every 5.5 to 9 s.
        active_spans_s: `[start, end)` of active spans; default: drawn from `seed`.
        gop: Largest keyframe interval in frames (the encoder adds keyframes at cuts).
        audio: Add an AAC track whose loudness follows the active spans.
        seed: Makes the default truth and the pictures reproducible.

    Returns:
        The file and its truth; cut times are rounded to whole frames.
    """
    default_cuts, default_spans = _default_truth(duration_s, seed)
    cuts = tuple(cuts_s) if cuts_s is not None else default_cuts
    spans = tuple(active_spans_s) if active_spans_s is not None else default_spans
    frame_count = round(duration_s * fps)
    cut_frames = tuple(sorted({round(c * fps) for c in cuts if 0 < round(c * fps) < frame_count}))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(out), mode="w") as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.codec_context.gop_size = gop
        video.options = {"preset": "ultrafast", "crf": "30", "tune": "zerolatency"}
        sound = container.add_stream("aac", rate=_AUDIO_RATE, layout="mono") if audio else None
        backgrounds: dict[int, np.ndarray] = {}
        audio_written = 0
        for index in range(frame_count):
            t = index / fps
            scene = sum(1 for c in cut_frames if c <= index)
            if scene not in backgrounds:
                backgrounds[scene] = _background(scene, width, height)
            active = any(a <= t < b for a, b in spans)
            if active:
                img = _blocks(backgrounds[scene], t, 6, 1.5, height // 6, seed + 7)
            else:
                img = _blocks(backgrounds[scene], t, 1, 0.02, height // 10, seed + 3)
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            container.mux(video.encode(frame))
            if sound is not None:
                until = round((index + 1) / fps * _AUDIO_RATE)
                while audio_written + 1024 <= until or (
                    index == frame_count - 1 and audio_written < until
                ):
                    n = min(1024, until - audio_written)
                    chunk = _audio(n, audio_written, spans, seed)
                    aframe = av.AudioFrame.from_ndarray(
                        chunk[None, :], format="fltp", layout="mono"
                    )
                    aframe.sample_rate = _AUDIO_RATE
                    aframe.pts = audio_written
                    aframe.time_base = Fraction(1, _AUDIO_RATE)
                    container.mux(sound.encode(aframe))
                    audio_written += n
        container.mux(video.encode(None))
        if sound is not None:
            container.mux(sound.encode(None))
    return SampleVideo(
        path=str(out),
        duration_s=frame_count / fps,
        fps=fps,
        frame_count=frame_count,
        cut_frames=cut_frames,
        active_spans_s=spans,
        gop=gop,
    )


def remux_repeat(
    source: str | os.PathLike[str], target: str | os.PathLike[str], copies: int
) -> Path:
    """Write `copies` back-to-back copies of `source` into `target`, without re-encoding.

    Packets are copied as they are, their timestamps shifted by the length of each copy
    per stream, so the result is a valid file `copies` times as long that costs no
    encoding time.
    """
    out = Path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    with av.open(os.fspath(source)) as src, av.open(str(out), mode="w") as dst:
        streams = [s for s in src.streams if s.type in ("video", "audio")]
        mapping = {s.index: dst.add_stream_from_template(s) for s in streams}
        packets = [
            (p, p.stream_index, p.pts, p.dts)
            for p in src.demux(streams)
            if p.dts is not None and p.size
        ]
        span: dict[int, int] = {}
        for stream in streams:
            own = [(pts or 0, dts or 0, p) for p, i, pts, dts in packets if i == stream.index]
            end_pts = max(pts + (p.duration or 0) for pts, _, p in own)
            span[stream.index] = end_pts - min(dts for _, dts, _ in own)
        for copy in range(copies):
            for packet, index, pts, dts in packets:
                shift = copy * span[index]
                packet.stream = mapping[index]
                packet.pts = None if pts is None else pts + shift
                packet.dts = None if dts is None else dts + shift
                dst.mux(packet)
    return out


def corrupt_range(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    start_s: float,
    end_s: float,
    seed: int = 0,
) -> Path:
    """Copy `source` to `target` with the video packets shown in `[start_s, end_s)` garbled.

    The container (header, index, other packets) stays intact, so the file opens and
    probes fine and only that region fails to decode: the damage a bad disk sector or an
    interrupted upload leaves in the middle of a long recording.
    """
    with av.open(os.fspath(source)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        assert base is not None
        spans = [
            (e.pos, e.size)
            for e in stream.index_entries
            if start_s <= float(e.timestamp * base) < end_s
        ]
    data = bytearray(Path(source).read_bytes())
    rng = np.random.default_rng(seed)
    for pos, size in spans:
        data[pos : pos + size] = rng.integers(0, 256, size=size, dtype=np.uint8).tobytes()
    out = Path(target)
    out.write_bytes(bytes(data))
    return out
