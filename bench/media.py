"""The bot's own video work at real sizes: a clip's last frame, joins by copy and by re-encoding.

Clips are 720p H.264 made with FFmpeg's ``testsrc2`` (moving, detailed pictures, not flat
colours), 10 s each (2 s with ``--quick``). CPU is the process's (every thread), so a speed of
1.0x means one core keeps up with real time. Each join runs in a process of its own, which
reports its peak RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import av.filter
import av.video.frame

from bench.report import Table
from bot.media.video import last_frame_png

WIDTH, HEIGHT, FPS = 1280, 720, 24

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from bot.media.video import join_clips
paths = [Path(p) for p in sys.argv[2:]]
cpu = time.process_time()
result = join_clips(paths, Path(sys.argv[1]))
print(json.dumps({
    "cpu": time.process_time() - cpu,
    "copied": result.copied,
    "duration": result.duration,
    "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}))
"""


def make_test_clip(path: Path, seconds: float, fps: int = FPS) -> Path:
    """A 720p H.264 clip of FFmpeg's ``testsrc2`` pattern, ``seconds`` long."""
    graph = av.filter.Graph()
    source = graph.add("testsrc2", f"size={WIDTH}x{HEIGHT}:rate={fps}:duration={seconds}")
    fmt = graph.add("format", "yuv420p")
    sink = graph.add("buffersink")
    source.link_to(fmt)
    fmt.link_to(sink)
    graph.configure()
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "23", "preset": "veryfast"}
        index = 0
        while True:
            try:
                frame = graph.pull()
            except (av.BlockingIOError, av.EOFError):
                break
            assert isinstance(frame, av.video.frame.VideoFrame)
            frame.pts, frame.time_base = index, Fraction(1, fps)
            out.mux(stream.encode(frame))
            index += 1
        out.mux(stream.encode(None))
    return path


def _join_in_child(output: Path, paths: list[Path]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(output), *map(str, paths)],
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


async def run(workdir: Path, *, quick: bool = False) -> Table:
    """Measure the last frame and both joins; the goals are docs/benchmarks.md's."""
    seconds = 2.0 if quick else 10.0
    table = Table(f"media: 720p H.264 clips of {seconds:.0f} s (testsrc2)")
    clips = [make_test_clip(workdir / f"clip-{n}.mp4", seconds) for n in range(4)]

    cpu = time.process_time()
    runs = 5
    for _ in range(runs):
        last_frame_png(clips[0])
    table.add("last frame: CPU per clip", f"{(time.process_time() - cpu) / runs:.3f} s", "<= 0.3 s")

    copy = _join_in_child(workdir / "copy.mp4", clips)
    assert copy["copied"]
    table.add("join 4 clips by stream copy: CPU", f"{copy['cpu']:.2f} s", "<= 1 s")
    table.add("  its duration", f"{copy['duration']:.2f} s", f"{4 * seconds:.0f} s")
    table.add("  its peak RSS", f"{copy['rss_kib'] / 1024:.0f} MiB", "<= 250 MiB")

    # One clip at another frame rate: the join must re-encode the whole film.
    mixed = [*clips[:3], make_test_clip(workdir / "clip-25.mp4", seconds, fps=25)]
    encode = _join_in_child(workdir / "encode.mp4", mixed)
    assert not encode["copied"]
    speed = encode["duration"] / encode["cpu"]
    table.add("join 4 clips by re-encoding: CPU", f"{encode['cpu']:.1f} s")
    table.add("  speed per core", f"{speed:.2f}x real time", ">= 1x")
    table.add("  its peak RSS", f"{encode['rss_kib'] / 1024:.0f} MiB", "<= 250 MiB")
    return table
