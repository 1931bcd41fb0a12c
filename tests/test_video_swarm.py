"""The video workload end to end on the real local Ray: one task, one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import swarm_ray
from swarm_ray import SwarmClient, SwarmRuntimeError
from swarm_ray.core.guards._watermark import read_claims
from swarm_ray.core.model._signals import SubTaskDone
from swarm_ray.video import (
    SampleVideo,
    VideoRun,
    analyze_video,
    corrupt_range,
    generate_sample_video,
)
from swarm_ray.video._job import main
from tests.support import wait_until

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def video_swarm(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    client = swarm_ray.connect(
        catalogs=["swarm_ray.video:video_catalog"],
        state_dir=tmp_path_factory.mktemp("video-state"),
        name="swarm-video",
    )
    yield client
    client.shutdown()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleVideo:
    out = tmp_path_factory.mktemp("video-swarm") / "sample.mp4"
    # 640x480, so a segment's analysis takes long enough (a few tenths of a second) for
    # Ray Data to have the next one running before it ends, even on a loaded machine.
    return generate_sample_video(out, duration_s=30, width=640, height=480, gop=10, seed=5)


@pytest.fixture(scope="module")
def clean_stage(
    video_swarm: SwarmClient, sample: SampleVideo, tmp_path_factory: pytest.TempPathFactory
) -> tuple[VideoRun, list[dict[int, dict[str, float]]]]:
    """The clean run, and the bundles of each placement group made while it ran."""
    import ray
    from ray.util.placement_group import placement_group_table

    # Segments run in parallel only where two decoders fit: earlier tests' idle agents
    # and replicas may still hold the session's logical CPUs, so wait for them to go.
    wait_until(
        lambda: ray.available_resources().get("CPU", 0.0) >= 2,
        timeout_s=120,
        what="two free logical CPUs for the segment decoders",
    )
    before = set(placement_group_table())
    out = tmp_path_factory.mktemp("video-report")
    run = analyze_video(video_swarm, sample.path, str(out), target_segments=5, min_segment_s=2)
    made = [g["bundles"] for i, g in placement_group_table().items() if i not in before]
    return run, made


@pytest.fixture(scope="module")
def clean_run(clean_stage: tuple[VideoRun, list[dict[int, dict[str, float]]]]) -> VideoRun:
    return clean_stage[0]


def test_report_finds_the_planted_cuts_and_spans(clean_run: VideoRun, sample: SampleVideo) -> None:
    report = clean_run.report
    # The target is 5; the longest-segment bound (twice the mean) may add one or two.
    assert 5 <= report.segments_ok == len(clean_run.plan.segments) <= 7
    cuts = [c.t_s for c in report.timeline.cuts if c.kind != "fade"]
    assert len(cuts) == len(sample.cut_times_s)
    assert all(
        abs(a - b) <= 1 / sample.fps + 1e-6 for a, b in zip(cuts, sample.cut_times_s, strict=True)
    )
    spans = [(s.start_s, s.end_s) for s in report.timeline.active_spans]
    assert len(spans) == len(sample.active_spans_s)
    for (a, b), (ta, tb) in zip(spans, sample.active_spans_s, strict=True):
        assert abs(a - ta) <= 0.75 and abs(b - tb) <= 0.75
    markdown = Path(report.markdown_path).read_text()
    assert "## Where it is intense" in markdown and "## Pacing" in markdown
    assert Path(report.plot_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads(Path(report.json_path).read_text())
    assert len(document["segments"]) == report.segments_ok and document["timeline"]["ranking"]
    thumbs = [t for o in clean_run.outcomes if o.analysis for t in o.analysis.thumbnails]
    assert thumbs and all(Path(t.path).exists() for t in thumbs)
    print(f"\nvideo run: {clean_run.seconds}")


def test_every_segment_keeps_its_watermark(clean_run: VideoRun, video_swarm: SwarmClient) -> None:
    markdown = Path(clean_run.report.markdown_path).read_text()
    document = json.loads(Path(clean_run.report.json_path).read_text())
    for outcome, written in zip(clean_run.outcomes, document["segments"], strict=True):
        assert outcome.watermark is not None and written["watermark"] == outcome.watermark
        assert f"`{outcome.watermark}`" in markdown
        claims = read_claims(outcome.watermark)
        assert claims.task_id == clean_run.task_id
        assert claims.subtask_id == outcome.subtask_id == f"analyze[{outcome.index}]"
        assert claims.capability_id == "video.analysis.segment"
    # The same tokens the orchestrator accepted, read back from the task's record.
    accepted = {
        e.result.subtask_id: e.result.watermark
        for e in video_swarm.task(clean_run.task_id).record().log
        if isinstance(e, SubTaskDone)
    }
    assert [accepted[o.subtask_id] for o in clean_run.outcomes] == [
        o.watermark for o in clean_run.outcomes
    ]


def test_segments_ran_as_one_streaming_data_stage(
    clean_run: VideoRun, video_swarm: SwarmClient
) -> None:
    status = video_swarm.task(clean_run.task_id).status().model_dump(mode="json")
    count = len(clean_run.plan.segments)
    analysed = {k for k, v in status["subtasks"].items() if v["stage"] == "analyze"}
    assert analysed == {f"analyze[{i}]" for i in range(count)}
    assert set(status["subtasks"]) - analysed == {"probe", "segment", "timeline"}
    for outcome in clean_run.outcomes:
        assert outcome.analysis is not None and outcome.attempts == 1
        # each worker decoded its own range: at most one keyframe interval of pre-roll
        assert outcome.analysis.preroll_frames < 10
    plan = clean_run.plan
    assert plan.frames_decoded < plan.metadata.frame_count / 4
    fanned = [e for e in video_swarm.task(clean_run.task_id).events_so_far() if e.kind == "fanout"]
    assert [e.subtask_id for e in fanned] == ["segment"] and f"{count} sub-tasks" in fanned[
        0
    ].summary


def test_segments_are_given_a_decoder_each_at_once(
    clean_stage: tuple[VideoRun, list[dict[int, dict[str, float]]]],
) -> None:
    """The stage reserves a slot per segment (as many as fit), and runs its rows in them.

    Whether two rows then overlap in time is the worker pool's matter, not the stage's:
    Ray hands the next row to a worker that just finished when a new worker process is
    slower to start than a row is to run (a few tenths of a second here, against 1 to 4 s
    for a worker's start on a loaded 2-core host); 3 of 14 full runs saw no overlap. The
    throughput the slots buy is timed in `bench/video.py`, against a plain process pool.
    """
    run, made = clean_stage
    # One group, for the one stage whose rows need a CPU (the other agents reserve none).
    [bundles] = made
    assert 2 <= len(bundles) <= len(run.plan.segments)
    assert all(b["CPU"] == 1.0 for b in bundles.values())


def test_a_corrupted_segment_fails_alone_and_only_it_is_retried(
    video_swarm: SwarmClient, clean_run: VideoRun, sample: SampleVideo, tmp_path: Path
) -> None:
    plan = clean_run.plan
    target = plan.segments[len(plan.segments) // 2]
    bad = corrupt_range(sample.path, tmp_path / "bad.mp4", target.start_s, target.end_s)
    run = analyze_video(
        video_swarm, str(bad), str(tmp_path / "out"), target_segments=5, min_segment_s=2
    )

    # The damaged file is probed and segmented anew, so the damaged range may fall in one
    # segment or straddle two: exactly the segments that overlap it fail, each alone.
    def hit(o: object) -> bool:
        return o.start_s < target.end_s and o.end_s > target.start_s  # type: ignore[attr-defined]

    failed = [o for o in run.outcomes if o.analysis is None]
    assert failed and all(hit(o) for o in failed), [(o.index, o.error) for o in run.outcomes]
    for broken in failed:
        assert broken.error is not None and f"`{bad}`" in broken.error
        assert f"segment {broken.index} of" in broken.error and broken.watermark is None
        assert broken.attempts == 2  # retried once: a read may fail once on network storage
    assert all(o.attempts == 1 and o.watermark for o in run.outcomes if o not in failed)
    assert all(o.analysis is not None for o in run.outcomes if not hit(o))
    # The whole workload on the damaged file still ends in a report, the gap named.
    assert run.report.segments_failed == len(failed)
    assert run.report.segments_ok + run.report.segments_failed == len(run.outcomes)
    assert Path(run.report.markdown_path).exists()


def test_an_unreadable_file_is_a_named_error(video_swarm: SwarmClient, tmp_path: Path) -> None:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(SwarmRuntimeError) as caught:
        analyze_video(video_swarm, str(empty), str(tmp_path / "out"))
    assert f"`{empty}`" in caught.value.message and "empty" in caught.value.message


def test_job_generates_a_sample_and_scores_it(
    ray_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["--out", str(tmp_path), "--sample-seconds", "24", "--segments", "4", "--min-segment", "2"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "'cuts_matched': " in out and "report: " in out
    assert (tmp_path / "timeline.md").exists()


def test_the_notebook_runs(
    ray_cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "analyze_video.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    monkeypatch.setenv("SWARM_RAY_STATE_DIR", str(tmp_path / "state"))
    namespace: dict[str, object] = {}
    try:
        for cell in cells:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), namespace)
    finally:
        if isinstance(namespace.get("swarm"), SwarmClient):
            namespace["swarm"].shutdown()  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "most intense first" in out and "report: " in out
    run = namespace["run"]
    assert isinstance(run, VideoRun) and run.report.segments_failed == 0
    assert Path(run.report.plot_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sample = namespace["sample"]
    assert isinstance(sample, SampleVideo)
    assert namespace["score"] == {
        "cuts_planted": len(sample.cut_times_s),
        "cuts_found": len(sample.cut_times_s),
        "cuts_matched": len(sample.cut_times_s),
        "spans_planted": len(sample.active_spans_s),
        "spans_found": len(sample.active_spans_s),
        "spans_matched": len(sample.active_spans_s),
    }
