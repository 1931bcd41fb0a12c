"""Bounded per-segment curves: running means per time bucket, and audio loudness.

A worker's memory must not grow with its segment's length, so nothing here keeps
per-frame data: motion and loudness are summed into at most `max_points` buckets, and
only the 100 ms loudness windows (ten floats a second) are kept to find peaks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from swarm_ray.video._features import audio_samples, loudness_db
from swarm_ray.video._models import CurvePoint, LoudnessPeak, SegmentJob

__all__ = ["AudioLevels", "Buckets", "loudness_peaks"]

_PEAK_WINDOW_S = 0.1
"""Loudness peaks are measured over 100 ms windows."""


class Buckets:
    """Running means per fixed-width time bucket.

    Plain lists, not numpy arrays: one value is added per frame, and indexing a numpy
    array from Python costs more than the addition.
    """

    def __init__(self, start: float, end: float, step: float, max_points: int) -> None:
        self.start = start
        self.step = max(step, (end - start) / max_points)
        n = max(1, math.ceil((end - start) / self.step))
        self.sums = [0.0] * n
        self.counts = [0] * n

    def add(self, t: float, value: float) -> None:
        i = min(len(self.sums) - 1, max(0, int((t - self.start) / self.step)))
        self.sums[i] += value
        self.counts[i] += 1

    def points(self) -> tuple[CurvePoint, ...]:
        return tuple(
            # numpy's rounding, as when the sums were numpy arrays: the same curves
            CurvePoint(t_s=round(self.start + i * self.step, 4), value=float(np.round(s / c, 4)))
            for i, (s, c) in enumerate(zip(self.sums, self.counts, strict=True))
            if c
        )


def loudness_peaks(levels: list[tuple[float, float]], top: int = 5) -> tuple[LoudnessPeak, ...]:
    """Local maxima (within 1 s) at least 10 dB over the median and above -40 dBFS."""
    if not levels:
        return ()
    values = np.array([v for _, v in levels])
    floor = max(float(np.median(values)) + 10.0, -40.0)
    reach = round(1.0 / _PEAK_WINDOW_S)
    found = []
    for i, (t, v) in enumerate(levels):
        if v >= floor and v == values[max(0, i - reach) : i + reach + 1].max():
            found.append(LoudnessPeak(t_s=round(t, 3), db=round(v, 2)))
    return tuple(sorted(found, key=lambda p: -p.db)[:top])


class AudioLevels:
    """Loudness per curve bucket and per 100 ms window of the segment's audio."""

    def __init__(self, job: SegmentJob, buckets: Buckets) -> None:
        self.job = job
        self.buckets = buckets
        self.windows: list[tuple[float, float]] = []
        self._pending: list[np.ndarray] = []
        self._pending_start: float | None = None
        self.square_sum = 0.0
        self.count = 0

    def add(self, frame: Any) -> None:
        data = audio_samples(frame).mean(axis=0)
        rate = frame.sample_rate
        t0 = float(frame.time)
        offset = max(0, int(np.ceil((self.job.start_s - t0) * rate)))
        keep = max(0, min(data.size, int(np.ceil((self.job.end_s - t0) * rate))))
        data = data[offset:keep]
        if data.size == 0:
            return
        t0 += offset / rate
        self.square_sum += float(np.square(data, dtype=np.float64).sum())
        self.count += data.size
        width = max(1, int(rate * _PEAK_WINDOW_S))
        for i in range(0, data.size, width):
            chunk = data[i : i + width]
            t = t0 + i / rate
            level = loudness_db(chunk)
            self.windows.append((t, level))
            self.buckets.add(t, level)

    def mean_db(self) -> float | None:
        if not self.count:
            return None
        return loudness_db(np.array([np.sqrt(self.square_sum / self.count)]))
