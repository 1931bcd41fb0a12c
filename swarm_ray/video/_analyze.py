"""`analyze_segment`: one worker, one time range, decoded once, start to end.

The worker opens the file itself, seeks to the keyframe at or before its start and
decodes forward until the first frame of the next segment: it never touches the rest of
the file, and it reports what it decoded (`frames_decoded`, the pre-roll before its start
included) so tests can prove it. Video and audio come from one demuxing pass. Memory is
bounded by the segment's bucket count, never by its length or the file's: curves are
accumulated per bucket, cut detection keeps a few frames of context, thumbnails are
written as soon as they are chosen.

A range that cannot be decoded raises `SegmentDecodeError` naming the file, the segment
and its time range; isolated bad packets are counted and reported as a warning.
"""

from __future__ import annotations

import math
import time
from collections import deque
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from swarm_ray.video._curves import AudioLevels, Buckets, loudness_peaks
from swarm_ray.video._errors import SegmentDecodeError, VideoFailureReason, VideoProbeError
from swarm_ray.video._features import (
    CutDetector,
    CutScore,
    FrameSignature,
    SignatureReader,
    content_delta,
)
from swarm_ray.video._io import open_video
from swarm_ray.video._models import (
    Cut,
    EdgeFrames,
    SegmentAnalysis,
    SegmentAnalysisRequest,
    SegmentJob,
    Thumbnail,
)

__all__ = ["analyze_segment", "intensity_score"]

_EPS = 1e-4
"""Frames shown less than this before a boundary still belong after it (float noise)."""
_EDGE_STEP = 5
"""Edge signatures keep every fifth sample of the worker's own: a few KB of JSON."""


def intensity_score(motion: float, cuts_per_minute: float, loudness_db: float | None) -> float:
    """Absolute 0-1 intensity: fast motion, quick cutting and loud sound.

    The scales are those of fast gameplay: a mean motion of 8 (0-255 content delta per
    frame), 30 cuts a minute and -10 dBFS each reach 1.
    """
    m = min(1.0, motion / 8.0)
    c = min(1.0, cuts_per_minute / 30.0)
    if loudness_db is None:
        return round(0.75 * m + 0.25 * c, 4)
    loud = min(1.0, max(0.0, (loudness_db + 50.0) / 40.0))
    return round(0.5 * m + 0.2 * c + 0.3 * loud, 4)


def _is_black(frame: Any, sig: FrameSignature, level: float) -> bool:
    luma = sig.luma_mean()
    if frame.color_range != 2 and not frame.format.name.startswith("yuvj"):
        luma = (luma - 16.0) * 255.0 / 219.0  # limited ("TV") range: black is 16
    return luma < level


def _coarse(sig: FrameSignature) -> dict[str, list[list[int]] | list[float]]:
    sig = sig.counted()
    step = _EDGE_STEP
    return {
        "y": sig.y[::step, ::step].tolist(),
        "u": sig.u[::step, ::step].tolist(),
        "v": sig.v[::step, ::step].tolist(),
        "hist": [round(float(h), 5) for h in sig.hist],
    }


def _thumbnail(frame: Any, job: SegmentJob, out: Path, reason: str, width: int) -> Thumbnail:
    height = max(2, round(frame.height * width / frame.width) // 2 * 2)
    # swscale; an area average is the right filter for a 4x shrink, and cheaper than the
    # default bilinear one.
    image = frame.reformat(
        width=width, height=height, format="rgb24", interpolation="AREA"
    ).to_image()
    if job.rotation:
        image = image.rotate(-job.rotation, expand=True)
    t = float(frame.time)
    path = out / f"seg{job.index:04d}_{t:010.3f}s_{reason}.jpg"
    image.save(path, format="JPEG", quality=80)
    return Thumbnail(t_s=round(t, 4), path=str(path), reason=reason)


class _Scan:
    """Everything measured while the segment's frames stream past."""

    def __init__(self, request: SegmentAnalysisRequest) -> None:
        self.job, self.settings = request.job, request.settings
        job, settings = self.job, self.settings
        self.out = Path(request.out_dir) / "thumbnails" if request.out_dir else None
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
        step, points = settings.curve_step_s, settings.max_curve_points
        self.motion = Buckets(job.start_s, job.end_s, step, points)
        self.audio = AudioLevels(job, Buckets(job.start_s, job.end_s, step, points))
        self.detector: CutDetector[Any] = CutDetector(
            threshold=settings.cut_threshold,
            ratio=settings.cut_ratio,
            min_gap_s=settings.min_scene_s,
        )
        self.signature = SignatureReader()
        self.cuts: list[Cut] = []
        self.thumbs: list[Thumbnail] = []
        self.blacks: list[tuple[float, float]] = []
        self.black_from: float | None = None
        self.decoded = self.preroll = self.in_range = self.errors = 0
        self.first: tuple[float, FrameSignature, bool] | None = None
        self.last: tuple[float, FrameSignature, bool] | None = None
        self.head_scores: list[CutScore] = []
        self.tail_scores: deque[CutScore] = deque(maxlen=2)
        self.motion_sum = 0.0
        self.last_motion = 0.0
        self.peak: tuple[float, Any] = (-1.0, None)

    def _thumb(self, frame: Any, reason: str) -> None:
        if self.out is not None and len(self.thumbs) < self.settings.max_thumbnails:
            self.thumbs.append(
                _thumbnail(frame, self.job, self.out, reason, self.settings.thumbnail_width)
            )

    def _cuts(self, found: list[tuple[float, float, Any]]) -> None:
        for t, score, frame in found:
            self.cuts.append(Cut(t_s=round(t, 4), score=round(score, 2)))
            if len(self.thumbs) < self.settings.max_thumbnails - 1:  # keep one for the peak
                self._thumb(frame, "cut")

    def video(self, frame: Any, t: float) -> bool:
        """Take one decoded frame; False once past the segment's end."""
        self.decoded += 1
        if t < self.job.start_s - _EPS:
            self.preroll += 1
            return True
        if t >= self.job.end_s - _EPS:
            return False
        self.in_range += 1
        sig = self.signature(frame, histogram=False)  # counted where a cut is possible
        black = _is_black(frame, sig, self.settings.black_level)
        if black and self.black_from is None:
            self.black_from = t
        elif not black and self.black_from is not None:
            self.blacks.append((self.black_from, t))
            self.black_from = None
        if self.first is None:
            self.first = (t, sig, black)
            self._thumb(frame, "start")
        if self.last is not None:
            previous = self.last[1]
            delta = content_delta(previous, sig)
            score = CutScore(delta, previous, sig)
            if len(self.head_scores) < 2:
                self.head_scores.append(score)
            self.tail_scores.append(score)
            self._cuts(self.detector.push(t, score, frame))
            if score.at_least(self.settings.cut_threshold):  # a cut is not motion: hold
                delta = self.last_motion
            self.last_motion = delta
            self.motion.add(t, delta)
            self.motion_sum += delta
            if delta > self.peak[0]:
                self.peak = (delta, frame)
        self.last = (t, sig, black)
        return True

    def fail(self, reason: VideoFailureReason, why: str) -> SegmentDecodeError:
        job = self.job
        return SegmentDecodeError(
            f"segment {job.index} of `{job.path}` ({job.start_s:.2f}-{job.end_s:.2f} s) {why}",
            path=job.path,
            segment=job.index,
            reason=reason,
            start_s=job.start_s,
            end_s=job.end_s,
            frames_decoded=self.decoded,
            decode_errors=self.errors,
        )

    def result(self, seconds: float) -> SegmentAnalysis:
        job = self.job
        expected = max(1.0, (job.end_s - job.start_s) * job.frame_rate)
        if self.in_range == 0 or self.first is None or self.last is None:
            why = "holds no decodable frame"
            raise self.fail(
                VideoFailureReason.NO_FRAMES
                if not self.errors
                else VideoFailureReason.CORRUPT_DATA,
                why,
            )
        if self.errors and self.in_range < self.settings.min_decoded_fraction * expected:
            raise self.fail(
                VideoFailureReason.CORRUPT_DATA,
                f"is corrupted: {self.errors} packet(s) failed to decode and only "
                f"{self.in_range} of about {expected:.0f} frames came out",
            )
        self._cuts(self.detector.finish())
        if self.black_from is not None:
            self.blacks.append((self.black_from, self.last[0] + 1.0 / job.frame_rate))
        if self.peak[1] is not None and self.settings.max_thumbnails:
            self.thumbs = self.thumbs[: self.settings.max_thumbnails - 1]
            self._thumb(self.peak[1], "peak")
        warnings = []
        if self.errors:
            warnings.append(
                f"segment {job.index}: {self.errors} packet(s) of `{job.path}` failed to "
                "decode; the rest was analysed"
            )
        length = max(1e-6, job.end_s - job.start_s)
        motion_mean = self.motion_sum / max(1, self.in_range - 1)
        cpm = len(self.cuts) * 60.0 / length
        db = self.audio.mean_db()
        first_t, first_sig, first_black = self.first
        last_t, last_sig, last_black = self.last
        return SegmentAnalysis(
            index=job.index,
            start_s=job.start_s,
            end_s=job.end_s,
            frames_decoded=self.decoded,
            frames_in_range=self.in_range,
            preroll_frames=self.preroll,
            first_frame_s=round(first_t, 4),
            last_frame_s=round(last_t, 4),
            cuts=tuple(self.cuts),
            black_spans=tuple((round(a, 4), round(b, 4)) for a, b in self.blacks),
            activity_curve=self.motion.points(),
            loudness_curve=self.audio.buckets.points(),
            loudness_peaks=loudness_peaks(self.audio.windows),
            motion_mean=round(motion_mean, 4),
            loudness_mean_db=None if db is None else round(db, 2),
            cuts_per_minute=round(cpm, 3),
            intensity=intensity_score(motion_mean, cpm, db),
            thumbnails=tuple(self.thumbs),
            edges=EdgeFrames(
                first=_coarse(first_sig),
                last=_coarse(last_sig),
                first_deltas=[round(s.value(), 3) for s in self.head_scores],
                last_deltas=[round(s.value(), 3) for s in self.tail_scores],
                first_black=first_black,
                last_black=last_black,
            ),
            decode_errors=self.errors,
            decode_seconds=round(seconds, 4),
            warnings=tuple(warnings),
        )


def stop_dts(end_s: float, time_base: Fraction) -> int:
    """The first decoding time, in `time_base` ticks, of a packet shown past `end_s`.

    Decoding order: every frame shown before the end has an earlier decoding time, so a
    segment stops reading video at the first packet at or past it and drains its decoder.
    """
    return math.ceil(Fraction(end_s - _EPS) / time_base)


def _run(scan: _Scan, container: Any) -> None:
    job = scan.job
    video = container.streams.video[0]
    video.codec_context.thread_count = scan.settings.decode_threads
    sound = container.streams.audio[0] if container.streams.audio else None
    target = job.start_s + 0.25 / job.frame_rate  # a hair past: rounding must not land earlier
    container.seek(int(target / video.time_base), stream=video, backward=True)
    video_done = False
    # Times as integers over the stream's time base, not Fractions: `stream.time_base`
    # builds a new Fraction at each access, and Fraction arithmetic per packet and per
    # frame cost more than the rest of the loop. The end test below stays exact.
    num, den = video.time_base.numerator, video.time_base.denominator
    end_dts = stop_dts(job.end_s, video.time_base)
    for packet in container.demux([s for s in (video, sound) if s is not None]):
        is_video = packet.stream is video
        if is_video and video_done:
            continue
        if is_video and packet.dts is not None and packet.dts >= end_dts:
            # Decoding order: every frame shown before the end has an earlier decoding time,
            # so none is in this packet or after it. Drain the decoder and stop reading
            # video: the next segment's packets (maybe a corrupted region) stay untouched.
            frames: list[Any] = list(video.decode(None))
            video_done = True
        else:
            try:
                frames = list(packet.decode())
            except (av.error.InvalidDataError, av.error.UndefinedError):
                scan.errors += 1
                continue
        for frame in frames:
            if frame.pts is None:
                continue
            if is_video:
                if not scan.video(frame, frame.pts * num / den):  # the stream's time base
                    video_done = True
                    break
                continue
            # Frames drained from the decoder come without a time base: use the stream's.
            base = frame.time_base if frame.time_base is not None else packet.stream.time_base
            if float(frame.pts * base) >= job.end_s - _EPS:
                sound = None  # audio is past the end too
            else:
                scan.audio.add(frame)
        if video_done and sound is None:
            return


def analyze_segment(request: SegmentAnalysisRequest) -> SegmentAnalysis:
    """Decode one segment's time range and measure it (see the module docstring).

    Raises:
        SegmentDecodeError: The file cannot be opened or the range cannot be decoded.
    """
    scan = _Scan(request)
    job = request.job
    started = time.perf_counter()
    try:
        with open_video(job.path) as container:
            try:
                _run(scan, container)
            except av.error.FFmpegError as exc:
                scan.errors += 1
                if scan.in_range == 0:
                    raise scan.fail(
                        VideoFailureReason.CORRUPT_DATA,
                        f"cannot be decoded: {type(exc).__name__}: {exc}",
                    ) from None
    except VideoProbeError as exc:
        raise SegmentDecodeError(
            f"segment {job.index} of `{job.path}` cannot be opened: {exc.message}",
            path=job.path,
            segment=job.index,
            reason=exc.reason,
        ) from None
    return scan.result(time.perf_counter() - started)
