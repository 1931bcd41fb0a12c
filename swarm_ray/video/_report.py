"""`render_timeline`: the video report as Markdown, JSON and an intensity plot.

The Markdown answers the user's question first (where are the intense parts, how are
they paced), then lists every segment with its thumbnails, and ends with provenance:
each segment's sub-task and watermark, so any line of the report can be traced back to
the agent and input that produced it. `timeline.json` holds the same facts for
programs, curves included. matplotlib is imported on first use, with the Agg backend:
workers have no display.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swarm_ray.core import WritePath
from swarm_ray.video._models import AnalysisSettings, SegmentAnalysis
from swarm_ray.video._probe import VideoMetadata
from swarm_ray.video._segment import SegmentPlan
from swarm_ray.video._timeline import SegmentOutcome, Timeline, build_timeline

__all__ = ["TimelineReport", "TimelineRequest", "render_timeline"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class TimelineRequest(BaseModel):
    """Input of `report.render.timeline`.

    Give `segments` directly, or `plan` and `analyses` (what the `analyze_video`
    template passes: the segment plan and each analysis sub-task's outcome, failures
    included), from which `segments` is built.
    """

    model_config = _FROZEN
    metadata: VideoMetadata
    segments: tuple[SegmentOutcome, ...] = ()
    """Every planned segment: analysed or failed."""
    plan: SegmentPlan | None = None
    """The segment plan (`$from.segment`)."""
    analyses: tuple[dict[str, Any], ...] = ()
    """Each analysis sub-task's outcome (`$from.analyze.@outcome`): `each` (its segment's
    position in the plan), `status`, `output`, `error`, `watermark`, `attempts`."""
    out_dir: WritePath
    """Where `timeline.md`, `timeline.json` and `intensity.png` go."""
    settings: AnalysisSettings = AnalysisSettings()
    """The settings the segments were analysed with (for boundary cut decisions)."""
    top: int = Field(default=5, ge=1)
    """How many intense segments the summary ranks."""
    provenance: dict[str, str] = Field(default_factory=dict)
    """Task ids that produced the inputs, for a report made outside one task."""

    @model_validator(mode="before")
    @classmethod
    def _outcomes_from_the_plan(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("segments") or not data.get("plan"):
            return data
        plan = SegmentPlan.model_validate(data["plan"])
        by_position = {o.get("each"): o for o in data.get("analyses") or ()}
        outcomes = []
        for position, segment in enumerate(plan.segments):
            found = by_position.get(position, {})
            ok = found.get("status") == "succeeded" and found.get("output") is not None
            outcomes.append(
                SegmentOutcome(
                    index=segment.index,
                    start_s=segment.start_s,
                    end_s=segment.end_s,
                    subtask_id=found.get("subtask_id", f"analyze[{position}]"),
                    watermark=found.get("watermark") if ok else None,
                    attempts=max(1, int(found.get("attempts") or 1)),
                    analysis=SegmentAnalysis.model_validate(found["output"]) if ok else None,
                    error=None if ok else (found.get("error") or "no result"),
                )
            )
        return {**data, "segments": outcomes}


class TimelineReport(BaseModel):
    """Output of `report.render.timeline`."""

    model_config = _FROZEN
    markdown_path: str
    json_path: str
    plot_path: str
    timeline: Timeline
    segments_ok: int
    segments_failed: int
    warnings: tuple[str, ...] = ()
    outcomes: tuple[SegmentOutcome, ...] = ()
    """Every planned segment's outcome the report was made from (analysis or error,
    watermark, attempts)."""


def _clock(t: float) -> str:
    minutes, seconds = divmod(t, 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours:d}:{minutes:02d}:{seconds:05.2f}" if hours else f"{minutes:d}:{seconds:05.2f}"


def _plot(request: TimelineRequest, timeline: Timeline, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = request.metadata
    fig, ax = plt.subplots(figsize=(12, 3.6), dpi=100)
    try:
        curve = timeline.intensity_curve
        ax.plot([p.t_s for p in curve], [p.value for p in curve], lw=1.0, color="tab:blue")
        for span in timeline.active_spans:
            ax.axvspan(span.start_s, span.end_s, color="tab:orange", alpha=0.25, lw=0)
        for seg in request.segments:
            if seg.analysis is None:
                ax.axvspan(seg.start_s, seg.end_s, color="tab:red", alpha=0.2, hatch="//", lw=0)
            else:
                a = seg.analysis
                ax.hlines(a.intensity, a.start_s, a.end_s, colors="black", lw=1.5)
            ax.axvline(seg.start_s, color="grey", ls="--", lw=0.5)
        for cut in timeline.cuts:
            ax.axvline(cut.t_s, color="tab:green", lw=0.6, alpha=0.7)
        ax.set_xlim(meta.start_time_s, meta.start_time_s + meta.duration_s)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("intensity")
        ax.set_title(
            f"{os.path.basename(meta.path)}: intensity (blue), segment score (black), "
            "active spans (orange), cuts (green), failed segments (red)",
            fontsize=9,
        )
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def _markdown(request: TimelineRequest, timeline: Timeline, plot: Path, out: Path) -> str:
    meta, pacing = request.metadata, timeline.pacing
    by_index = {s.index: s for s in request.segments}
    failed = [s for s in request.segments if s.analysis is None]
    lines = [
        f"# Timeline of `{os.path.basename(meta.path)}`",
        "",
        f"{_clock(meta.duration_s)} of {meta.codec} {meta.width}x{meta.height} at "
        f"{meta.frame_rate:.2f} fps{' (variable)' if meta.variable_frame_rate else ''}, "
        f"{len(request.segments)} segments ({len(failed)} failed).",
        "",
        "## Where it is intense",
        "",
    ]
    if timeline.active_spans:
        lines += [
            f"- {_clock(s.start_s)} to {_clock(s.end_s)} ({s.end_s - s.start_s:.1f} s), "
            f"intensity {s.intensity:.2f}"
            for s in timeline.active_spans
        ]
    else:
        lines.append("No stretch stands out: the pace is even throughout.")
    lines += [
        "",
        "## Pacing",
        "",
        f"- {pacing.cuts_per_minute:.1f} cuts per minute, mean shot {pacing.mean_shot_s:.1f} s",
        f"- {pacing.active_share:.0%} of the analysed time is active"
        + (
            f", with {pacing.mean_calm_gap_s:.1f} s of calm between active spans on average"
            if pacing.mean_calm_gap_s is not None
            else ""
        ),
        "",
        f"![intensity]({os.path.relpath(plot, out)})",
        "",
        f"## Most intense segments (top {request.top})",
        "",
        "| rank | segment | time | intensity | cuts/min | motion | loudness | thumbnails |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, index in enumerate(timeline.ranking[: request.top], 1):
        a = by_index[index].analysis
        assert a is not None
        thumbs = " ".join(
            f"![{t.reason} {t.t_s:.1f}s]({os.path.relpath(t.path, out)})" for t in a.thumbnails
        )
        loud = "-" if a.loudness_mean_db is None else f"{a.loudness_mean_db:.1f} dBFS"
        lines.append(
            f"| {rank} | {index} | {_clock(a.start_s)}-{_clock(a.end_s)} | {a.intensity:.2f} "
            f"| {a.cuts_per_minute:.1f} | {a.motion_mean:.2f} | {loud} | {thumbs} |"
        )
    lines += ["", "## Scene changes", ""]
    lines += [
        f"- {_clock(c.t_s)} (frame {c.frame}): {c.kind}, segment {c.segment}" for c in timeline.cuts
    ] or ["None found."]
    if failed:
        lines += ["", "## Not analysed", ""]
        lines += [
            f"- segment {s.index} ({_clock(s.start_s)}-{_clock(s.end_s)}): {s.error}"
            for s in failed
        ]
    lines += [
        "",
        "## Provenance",
        "",
        *(f"- {k}: `{v}`" for k, v in sorted(request.provenance.items())),
        "",
        "| segment | sub-task | attempts | watermark |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {s.index} | `{s.subtask_id}` | {s.attempts} | `{s.watermark or 'none'}` |"
        for s in request.segments
    ]
    return "\n".join(lines) + "\n"


def render_timeline(request: TimelineRequest) -> TimelineReport:
    """Stitch the segments and write `timeline.md`, `timeline.json` and `intensity.png`."""
    out = Path(request.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timeline = build_timeline(request.metadata, request.segments, request.settings)
    plot = out / "intensity.png"
    _plot(request, timeline, plot)
    markdown = out / "timeline.md"
    markdown.write_text(_markdown(request, timeline, plot, out))
    failed = sum(1 for s in request.segments if s.analysis is None)
    warnings = tuple(
        f"segment {s.index} ({s.start_s:.1f}-{s.end_s:.1f} s) not analysed: {s.error}"
        for s in request.segments
        if s.analysis is None
    )
    document = {
        "video": request.metadata.model_dump(mode="json"),
        "timeline": timeline.model_dump(mode="json"),
        "segments": [s.model_dump(mode="json") for s in request.segments],
        "provenance": request.provenance,
        "warnings": list(warnings),
    }
    json_path = out / "timeline.json"
    json_path.write_text(json.dumps(document, indent=1))
    return TimelineReport(
        markdown_path=str(markdown),
        json_path=str(json_path),
        plot_path=str(plot),
        timeline=timeline,
        segments_ok=len(request.segments) - failed,
        segments_failed=failed,
        warnings=warnings,
        outcomes=request.segments,
    )
