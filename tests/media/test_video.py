"""The bot's video work on real files: last frames, joins by copy and by re-encoding, fitting.

The clips are the emulator's (``bot.sandbox.clips``): real H.264 MP4s whose every frame's
colour says which clip and which frame it is, so a test reads back exactly what it got.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import av
import av.video.frame
import pytest

from bot.media.video import (
    FrameBounds,
    MediaError,
    MediaTimeout,
    MediaTooLarge,
    first_frame_png,
    fit_to_size,
    in_media_thread,
    join_clips,
    last_frame_png,
    probe,
)
from bot.sandbox.clips import FRAME_CYCLE, identify, make_clip


def clip(tmp_path: Path, seed: int, **options: object) -> Path:
    path = tmp_path / f"clip-{seed}.mp4"
    path.write_bytes(make_clip(seed, **options))  # type: ignore[arg-type]
    return path


def centre(frame: av.video.frame.VideoFrame) -> tuple[int, int]:
    """Which (clip seed, frame index) the colour at the frame's centre says."""
    rgb = frame.reformat(format="rgb24")
    plane = rgb.planes[0]
    at = (rgb.height // 2) * plane.line_size + (rgb.width // 2) * 3
    pixel = bytes(plane)[at : at + 3]
    return identify((pixel[0], pixel[1], pixel[2]))


def corner(frame: av.video.frame.VideoFrame) -> tuple[int, int, int]:
    rgb = frame.reformat(format="rgb24")
    pixel = bytes(rgb.planes[0])[:3]
    return pixel[0], pixel[1], pixel[2]


def frames_of(path: Path) -> list[av.video.frame.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def test_the_last_frame_is_the_clips_last_even_past_several_keyframes(tmp_path: Path) -> None:
    path = clip(tmp_path, 7, seconds=3.0)  # 72 frames; x264 puts keyframes within them
    with av.open(io.BytesIO(last_frame_png(path))) as image:
        (frame,) = image.decode(video=0)
        assert image.streams.video[0].codec_context.name == "png"
    assert centre(frame) == (7, 71 % FRAME_CYCLE)
    assert (frame.width, frame.height) == (128, 72)


def test_the_first_frame_is_the_clips_first(tmp_path: Path) -> None:
    path = clip(tmp_path, 5, seconds=1.0)
    with av.open(io.BytesIO(first_frame_png(path))) as image:
        (frame,) = image.decode(video=0)
        assert image.streams.video[0].codec_context.name == "png"
    assert centre(frame) == (5, 0)
    assert (frame.width, frame.height) == (128, 72)


def test_a_file_that_is_not_a_video_is_refused_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "notes.mp4"
    path.write_bytes(b"not a video at all")
    with pytest.raises(MediaError) as raised:
        last_frame_png(path)
    assert raised.value.sentence == "That file is not a video the bot can read."


def test_clips_of_one_set_up_join_by_stream_copy_in_order_with_their_sound(
    tmp_path: Path,
) -> None:
    paths = [clip(tmp_path, seed, audio=True) for seed in (3, 4, 5)]
    joined = join_clips(paths, tmp_path / "film.mp4")
    assert joined.copied and joined.has_audio
    assert joined.duration == pytest.approx(3.0, abs=0.1)
    frames = [centre(f) for f in frames_of(joined.path)]
    assert frames == [(seed, index) for seed in (3, 4, 5) for index in range(24)]


def test_clips_of_other_sizes_are_re_encoded_to_the_first_letterboxed_not_stretched(
    tmp_path: Path,
) -> None:
    first = clip(tmp_path, 3, audio=True)
    square = clip(tmp_path, 9, width=96, height=96, fps=30, audio=True)
    last = clip(tmp_path, 4, audio=True)
    joined = join_clips([first, square, last], tmp_path / "film.mp4")
    info = probe(joined.path)
    assert not joined.copied and joined.has_audio
    assert (info.width, info.height, info.fps) == (128, 72, 24)
    assert joined.duration == pytest.approx(3.0, abs=0.1)
    frames = frames_of(joined.path)
    assert [centre(f)[0] for f in frames] == [3] * 24 + [9] * 24 + [4] * 24
    # The square clip fits the height: black bars left and right, its colour in the middle.
    assert max(corner(frames[30])) < 24
    assert min(corner(frames[0])) > 0


def test_a_film_keeps_sound_only_when_every_clip_has_it(tmp_path: Path) -> None:
    paths = [clip(tmp_path, 3, audio=True), clip(tmp_path, 4, audio=False)]
    joined = join_clips(paths, tmp_path / "film.mp4")
    assert not joined.has_audio
    assert joined.duration == pytest.approx(2.0, abs=0.1)


def test_a_join_past_its_deadline_stops_and_leaves_no_file(tmp_path: Path) -> None:
    paths = [clip(tmp_path, 3), clip(tmp_path, 9, width=96, height=96)]
    with pytest.raises(MediaTimeout):
        join_clips(paths, tmp_path / "film.mp4", deadline=10.0, monotonic=lambda: 11.0)
    assert not (tmp_path / "film.mp4").exists()


def test_progress_is_reported_up_to_the_whole(tmp_path: Path) -> None:
    seen: list[float] = []
    join_clips([clip(tmp_path, 3), clip(tmp_path, 4)], tmp_path / "film.mp4", progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_a_film_over_a_limit_is_re_encoded_under_it_or_refused(tmp_path: Path) -> None:
    source = clip(tmp_path, 3, seconds=2.0)
    fitted = fit_to_size(source, tmp_path / "small.mp4", 40_000)
    assert fitted.stat().st_size <= 40_000
    assert probe(fitted).duration == pytest.approx(2.0, abs=0.1)
    with pytest.raises(MediaError):
        fit_to_size(source, tmp_path / "tiny.mp4", 5_000)


def test_fitting_past_its_deadline_stops_and_leaves_no_file(tmp_path: Path) -> None:
    source = clip(tmp_path, 3, seconds=2.0)
    with pytest.raises(MediaTimeout):
        fit_to_size(source, tmp_path / "small.mp4", 40_000, deadline=10.0, monotonic=lambda: 11.0)
    assert not (tmp_path / "small.mp4").exists()


def test_a_clip_over_the_frame_size_bound_is_refused_before_any_work(tmp_path: Path) -> None:
    path = clip(tmp_path, 3)  # 128 x 72, 24 frames
    small = FrameBounds(max_pixels=128 * 72 - 1, max_frames=1000)
    with pytest.raises(MediaTooLarge) as raised:
        last_frame_png(path, bounds=small)
    assert raised.value.bounds == small
    with pytest.raises(MediaTooLarge):
        join_clips([path, clip(tmp_path, 4)], tmp_path / "film.mp4", bounds=small)
    assert not (tmp_path / "film.mp4").exists()


def test_a_clip_over_the_frame_count_bound_is_refused(tmp_path: Path) -> None:
    paths = [clip(tmp_path, 3), clip(tmp_path, 4, seconds=2.0)]  # 24 and 48 frames
    with pytest.raises(MediaTooLarge):
        join_clips(paths, tmp_path / "film.mp4", bounds=FrameBounds(max_frames=30))
    assert not (tmp_path / "film.mp4").exists()
    assert probe(paths[1]).frames == 48
    assert join_clips(paths, tmp_path / "film.mp4", bounds=FrameBounds(max_frames=48)).copied


async def test_pyav_work_runs_in_one_dedicated_thread_not_the_default_pool() -> None:
    names = {await in_media_thread(lambda: threading.current_thread().name) for _ in range(3)}
    assert len(names) == 1 and names.pop().startswith("genbot-media")
