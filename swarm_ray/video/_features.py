"""Cheap per-frame features: a small signature per frame, distances, audio loudness.

Every decoded frame of a segment goes through a `SignatureReader`, so it must cost far
less than decoding the frame (decoding 720p H.264 takes about 1 ms a frame on one core):
it reads the decoder's own planes without any colour conversion or scaling, keeps every
n-th pixel of a plane (about 90 rows of luma) and a 16-bin luma histogram. Two
signatures give

- `content_delta`: mean absolute change of luma and chroma on a 0-255 scale, which is
  what a cut maximises and what motion raises a little;
- `histogram_delta`: half the L1 distance of the histograms (0-1), which a cut raises and
  motion within one scene barely does.

The numpy work is done once per frame, not once per plane: the picks of the three planes
go back to back into one array, and the distance of two frames is one pass over their
arrays. Measured per frame of 720p inside the decoding loop (`bench/video.py`), this is
the analysis's main cost after decoding, so each call counts. The histogram is the
dearest part (a count over every kept luma pixel) and matters only where a frame could
be a cut: the analysis loop leaves it uncounted (`histogram=False`) and scores frames
with `CutScore`, which counts the two histograms only when the content delta alone
could reach the threshold or a possible cut asks for its neighbours' scores. The
scores and cuts are the same as when every histogram is counted.

`CutDetector` is the adaptive rule PySceneDetect's AdaptiveDetector uses: a frame is a
cut when its content delta is high in absolute terms and several times that of its
neighbours, so fast motion (high everywhere) does not read as a run of cuts.
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import numpy as np

__all__ = [
    "CutDetector",
    "CutScore",
    "FrameSignature",
    "SignatureReader",
    "audio_samples",
    "content_delta",
    "cut_score",
    "histogram_delta",
    "loudness_db",
    "signature",
]

_LUMA_ROWS = 90
"""Rows of luma kept per frame: enough to see a cut or motion, cheap to compare."""
_SILENCE_DB = -90.0
"""Loudness reported for digital silence (log of zero)."""
_PLANAR = frozenset(("yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p"))
"""8-bit three-plane formats read as they come from the decoder; others are converted."""
_WORDS: tuple[tuple[int, type[np.unsignedinteger[Any]]], ...] = (
    ((8, np.uint64), (4, np.uint32), (2, np.uint16)) if sys.byteorder == "little" else ()
)
"""Word sizes whose low byte is their first byte, widest first (see `SignatureReader`)."""
_LEVELS = np.arange(256, dtype=np.int64)
"""Luma levels, to sum a frame's luma from its 256-bin count."""
_BINS = np.arange(0, 256, 16)
"""First level of each of the histogram's 16 bins."""

T = TypeVar("T")


@dataclass(frozen=True)
class FrameSignature:
    """What is kept of a frame to compare it with others."""

    y: np.ndarray
    """Subsampled luma (uint8)."""
    u: np.ndarray
    """Subsampled first chroma plane (uint8; grey for single-plane formats)."""
    v: np.ndarray
    """Subsampled second chroma plane (uint8)."""
    hist: np.ndarray
    """16-bin luma histogram, summing to 1; empty when not counted (`counted` counts it)."""
    packed: np.ndarray | None = field(default=None, repr=False, compare=False)
    """`y`, `u` and `v` back to back (they are views of it): one pass compares two frames.
    None for signatures rebuilt from JSON."""
    luma_sum: int | None = None
    """Sum of `y` (None: not counted, sum `y`)."""

    def to_json(self) -> dict[str, Any]:
        """Small enough to ship across processes (segment edges are compared later)."""
        return {
            "y": self.y.tolist(),
            "u": self.u.tolist(),
            "v": self.v.tolist(),
            "hist": self.hist.tolist(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FrameSignature:
        """Inverse of `to_json`."""
        return cls(
            y=np.asarray(data["y"], dtype=np.uint8),
            u=np.asarray(data["u"], dtype=np.uint8),
            v=np.asarray(data["v"], dtype=np.uint8),
            hist=np.asarray(data["hist"], dtype=np.float64),
        )

    def counted(self) -> FrameSignature:
        """This signature with its histogram counted (itself when it is)."""
        if self.hist.size:
            return self
        return replace(self, hist=_histogram(np.bincount(self.y.ravel(), minlength=256), self.y))

    def luma_mean(self) -> float:
        """Mean of the kept luma (0-255)."""
        total = int(self.y.sum()) if self.luma_sum is None else self.luma_sum
        return total / max(1, self.y.size)


@dataclass(frozen=True)
class _Pick:
    """How to take every `step`-th pixel of every `step`-th row of one plane."""

    word: type[np.unsignedinteger[Any]]
    """Read the plane as words of this type (their low byte is the pixel kept)."""
    shape: tuple[int, int]
    """Rows and pixels kept."""
    strides: tuple[int, int]
    """Bytes between kept rows and between kept pixels."""
    start: int
    """Where they go in the packed array."""


_UNCOUNTED = np.zeros(0)
"""The histogram of a signature read with `histogram=False`."""


def _histogram(counts: np.ndarray, y: np.ndarray) -> np.ndarray:
    """16 bins, summing to 1, from a 256-bin count of `y`."""
    return np.add.reduceat(counts, _BINS) / max(1, y.size)


def _pick(plane: Any, step: int, start: int) -> _Pick:
    count, rows = -(-plane.width // step), -(-plane.height // step)
    word: type[np.unsignedinteger[Any]] = np.uint8
    for size, wide in _WORDS:
        if step % size == 0 and plane.line_size % size == 0 and count * step <= plane.line_size:
            word = wide  # the last word read ends inside its row: (count - 1) * step + size
            break
    return _Pick(word, (rows, count), (step * plane.line_size, step), start)


class SignatureReader:
    """`signature` for a stream of frames: the picks are planned once per frame layout.

    Picking single bytes `step` apart is a strided copy numpy does a byte at a time. Read
    as `step`-byte words (or the widest that divides it), each pick is the low byte of a
    word, and a cast to uint8 keeps exactly that byte with a vectorised loop: the same
    pixels for a little over half the time (little-endian machines; others pick bytes).
    The casts write straight into one packed array per frame.

    Args:
        rows: About how many luma rows to keep.
    """

    def __init__(self, rows: int = _LUMA_ROWS) -> None:
        self.rows = rows
        self._layout: tuple[Any, ...] = ()
        self._picks: tuple[_Pick, ...] = ()
        self._size = 0

    def _plan(self, frame: Any, planes: Any, layout: tuple[Any, ...]) -> None:
        step = max(1, frame.height // self.rows)
        picks, start = [], 0
        for index, plane in enumerate(planes[:3]):
            pick = _pick(plane, step if index == 0 else max(1, step // 2), start)
            picks.append(pick)
            start += pick.shape[0] * pick.shape[1]
        self._layout, self._picks, self._size = layout, tuple(picks), start

    def __call__(self, frame: Any, *, histogram: bool = True) -> FrameSignature:
        """Signature of a decoded `av.VideoFrame` (8-bit planar YUV, else converted first).

        Args:
            frame: A decoded video frame.
            histogram: Count the luma histogram now; without, `counted` counts it later.
        """
        if frame.format.name not in _PLANAR:
            frame = frame.reformat(format="yuv420p")
        planes = frame.planes  # a new tuple of plane objects at each access
        layout = (frame.format.name, frame.width, frame.height, *(p.line_size for p in planes))
        if layout != self._layout:
            self._plan(frame, planes, layout)
        packed = np.empty(self._size, dtype=np.uint8)
        kept = []
        for plane, pick in zip(planes, self._picks, strict=False):
            # A strided view of the plane's own buffer, and its place in `packed`: the
            # cast copies the picks straight from the decoder's frame to where they stay.
            taken = np.ndarray(pick.shape, pick.word, plane, 0, pick.strides)
            out = np.ndarray(pick.shape, np.uint8, packed, pick.start)
            np.copyto(out, taken, casting="unsafe")
            kept.append(out)
        y, u, v = kept
        if not histogram:
            luma = int(packed[: y.size].sum())
            return FrameSignature(y=y, u=u, v=v, hist=_UNCOUNTED, packed=packed, luma_sum=luma)
        counts = np.bincount(packed[: y.size], minlength=256)  # histogram and mean at once
        luma = int(counts @ _LEVELS)
        hist = _histogram(counts, y)
        return FrameSignature(y=y, u=u, v=v, hist=hist, packed=packed, luma_sum=luma)


def signature(frame: Any, *, rows: int = _LUMA_ROWS) -> FrameSignature:
    """Signature of a decoded `av.VideoFrame` (8-bit planar YUV, else converted first).

    One frame alone; a stream of frames is cheaper through one `SignatureReader`.

    Args:
        frame: A decoded video frame.
        rows: About how many luma rows to keep.
    """
    return SignatureReader(rows)(frame)


def _mean_abs(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return 255.0
    diff = np.subtract(a, b, dtype=np.int16)
    total = float(np.abs(diff, out=diff).sum())  # sum and divide: no mean() overhead
    return total / max(1, int(a.size))


def content_delta(a: FrameSignature, b: FrameSignature) -> float:
    """Mean absolute change, luma weighted twice, on a 0-255 scale."""
    if (
        a.packed is not None
        and b.packed is not None
        and a.y.shape == b.y.shape
        and a.u.shape == b.u.shape
        and a.v.shape == b.v.shape
    ):
        # One pass over both frames' packed picks: |a - b| stays uint8 (the larger minus
        # the smaller), summed per plane into exact integers.
        diff = np.maximum(a.packed, b.packed)
        np.subtract(diff, np.minimum(a.packed, b.packed), out=diff)
        ny, nu, nv = a.y.size, a.u.size, a.v.size
        totals: list[int] = np.add.reduceat(diff, (0, ny, ny + nu), dtype=np.uint32).tolist()
        sy, su, sv = totals
        return (2 * (sy / ny) + su / nu + sv / nv) / 4
    return (2 * _mean_abs(a.y, b.y) + _mean_abs(a.u, b.u) + _mean_abs(a.v, b.v)) / 4


def histogram_delta(a: FrameSignature, b: FrameSignature) -> float:
    """Half the L1 distance of the luma histograms: 0 same, 1 disjoint."""
    return float(np.abs(a.counted().hist - b.counted().hist).sum() / 2)


def loudness_db(samples: np.ndarray) -> float:
    """RMS level in dBFS of float samples in [-1, 1] (any shape)."""
    if samples.size == 0:
        return _SILENCE_DB
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    return max(_SILENCE_DB, 20 * np.log10(rms)) if rms > 0 else _SILENCE_DB


def audio_samples(frame: Any) -> np.ndarray:
    """Samples of an `av.AudioFrame` as float in [-1, 1], channels first."""
    data = frame.to_ndarray()
    if data.dtype.kind == "i":
        data = data.astype(np.float32) / float(np.iinfo(data.dtype).max)
    elif data.dtype.kind == "u":
        data = (data.astype(np.float32) - 128.0) / 128.0
    if not frame.format.is_planar:
        data = data.reshape(-1, len(frame.layout.channels)).T
    return np.asarray(data, dtype=np.float32)


def cut_score(a: FrameSignature, b: FrameSignature) -> float:
    """Content delta weighted by histogram change: what a cut maximises and motion does not.

    A cut changes both the pixels and their distribution (score about 15 to 60 on real
    footage); fast motion within one scene changes pixels but hardly the histogram (score
    a third of its content delta).
    """
    return content_delta(a, b) * (0.5 + histogram_delta(a, b))


_HIST_BOUND = 1.0 + 1e-9
"""`histogram_delta` is at most 1 (two distributions), give or take float rounding."""


class CutScore:
    """A frame's cut score against the frame before, its histogram part counted on demand.

    The score is content delta x (0.5 + histogram delta), and the histogram delta is at
    most 1, so `upper` (1.5 x the content delta) bounds it without counting anything;
    `value` counts both frames' histograms the first time it is asked for.
    """

    __slots__ = ("_value", "before", "delta", "frame", "upper")

    def __init__(self, delta: float, before: FrameSignature, frame: FrameSignature) -> None:
        self.delta = delta
        self.upper = delta * (0.5 + _HIST_BOUND)
        self.before: FrameSignature | None = before
        self.frame: FrameSignature | None = frame
        self._value: float | None = None

    def value(self) -> float:
        """The exact score (the same as `cut_score` of the two frames)."""
        if self._value is None:
            assert self.before is not None and self.frame is not None
            self._value = self.delta * (0.5 + histogram_delta(self.before, self.frame))
            self.before = self.frame = None  # the signatures are not needed any more
        return self._value

    def at_least(self, threshold: float) -> bool:
        """Whether the score reaches `threshold`, counting histograms only if it can."""
        return self.upper >= threshold and self.value() >= threshold


class CutDetector(Generic[T]):
    """Streaming adaptive cut detection over (time, cut score, payload) triples.

    A frame is a cut when its score is at least `threshold`, at least `ratio` times the
    mean score of the `window` frames on each side, and at least `min_gap_s` after the
    previous cut. Decisions lag `window` frames behind the input, so `push` returns the
    cuts it can now decide (time, exact score, payload) and `finish` the rest. Scores
    are `CutScore`s: only a frame that can pass the threshold has its score and its
    neighbours' counted.

    Args:
        threshold: Smallest cut score that can be a cut.
        ratio: How far above its neighbours' mean a cut must stand.
        window: Neighbours on each side.
        min_gap_s: Shortest scene.
    """

    def __init__(
        self,
        *,
        threshold: float = 10.0,
        ratio: float = 3.0,
        window: int = 2,
        min_gap_s: float = 0.5,
    ) -> None:
        self.threshold = threshold
        self.ratio = ratio
        self.window = window
        self.min_gap_s = min_gap_s
        self._buffer: deque[tuple[float, CutScore, T]] = deque()
        self._last_cut = float("-inf")
        self._full = False

    def push(self, t: float, score: CutScore, payload: T) -> list[tuple[float, float, T]]:
        """Add one frame's score against its predecessor; return cuts now decided."""
        self._buffer.append((t, score, payload))
        if len(self._buffer) < 2 * self.window + 1:
            return []
        decided: list[tuple[float, float, T]] = []
        if not self._full:  # the first frames have neighbours on the right only
            self._full = True
            for index in range(self.window):
                decided.extend(self._decide(index))
        decided.extend(self._decide(self.window))
        self._buffer.popleft()
        return decided

    def finish(self) -> list[tuple[float, float, T]]:
        """Decide the frames still waiting for right-hand neighbours."""
        found: list[tuple[float, float, T]] = []
        first = self.window if self._full else 0
        for index in range(first, len(self._buffer)):
            found.extend(self._decide(index))
        self._buffer.clear()
        self._full = False
        return found

    def _decide(self, index: int) -> list[tuple[float, float, T]]:
        t, lazy, payload = self._buffer[index]
        if t - self._last_cut < self.min_gap_s or not lazy.at_least(self.threshold):
            return []
        score = lazy.value()
        neighbours = [
            s.value()
            for i, (_, s, _) in enumerate(self._buffer)
            if i != index and abs(i - index) <= self.window
        ]
        if neighbours and score < self.ratio * (sum(neighbours) / len(neighbours)):
            return []
        self._last_cut = t
        return [(t, score, payload)]
