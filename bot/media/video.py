"""Video files as the bot works on them: a clip's last frame, and clips joined into one film.

Everything here is blocking CPU work on files (PyAV, the maintained FFmpeg binding): callers
run it off the event loop in this module's one media thread (:func:`in_media_thread`, a
single-thread executor of its own, not the default pool), so one join or frame at a time uses
a core, and the default pool stays free for the bot's other blocking calls. Files are streamed
packet by packet, never held whole, so memory stays flat whatever their length.

A clip read here is bounded (:class:`FrameBounds`, :data:`DEFAULT_BOUNDS`): at most
:data:`MAX_FRAME_PIXELS` pixels a frame (width × height) and :data:`MAX_CLIP_FRAMES` frames,
checked from its header before any decoding and again on the frames decoded (a header may
lie); a clip over them is refused with :class:`MediaTooLarge`.

- :func:`last_frame_png`: the last decoded frame of a clip, as a PNG, found from the last
  keyframe rather than by decoding the whole clip.
- :func:`first_frame_png`: the first frame of a clip, as a PNG (a video draft's Final).
- :func:`join_clips`: one MP4 of several clips in order: by stream copy when they share codec,
  size, frame rate and codec set-up (nothing re-encoded, no quality lost), else re-encoded to
  the first clip's size and frame rate, letterboxed (never stretched), with audio when every
  clip has it.
- :func:`fit_to_size`: re-encode a film at the bitrate that fits a byte limit (an upload's).
- :func:`sample_frames`: the frames at given shares of a clip and its last frame, each decoded
  from the keyframe before it (what the safety scorer looks at, bot/media/safety.py).
- :func:`poster_frame`: a clip's poster (a frame near its start) and its duration, for its
  thumbnail (bot/media/thumbnails.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Final, ParamSpec, TypeVar

import av
import av.audio.resampler
import av.filter
import av.stream
import av.video.frame

OUTPUT_CODEC: Final = "libx264"
"""The codec of a re-encoded film: H.264, which every Discord client plays."""

AUDIO_RATE: Final = 48_000
"""Samples a second of a re-encoded film's AAC track."""

MIN_VIDEO_BITRATE: Final = 100_000
"""Bits a second below which a film is not re-encoded to fit (it would be unwatchable)."""

MAX_FRAME_PIXELS: Final = 3840 * 2160
"""Pixels a frame of a clip may have (width × height): 4K UHD, twice over what video models
make (1080p); a decoded 4K frame is 12 MB in YUV, 25 MB as RGB."""

MAX_CLIP_FRAMES: Final = 3600
"""Frames a clip may have: a minute at 60 frames a second (video models make 4 to 12 s at 24
or 30)."""

Progress = Callable[[float], None]
"""Called now and then with the share of the work done, 0.0 to 1.0."""

_P = ParamSpec("_P")
_T = TypeVar("_T")

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _media_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="genbot-media")
        return _executor


async def in_media_thread(work: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Run ``work(*args, **kwargs)`` in the media thread and return its result.

    One thread for the whole process (created at first use, never the event loop's default
    pool): PyAV work queues behind the work already there, one job at a time, so joins and
    last frames never take more than one core together, nor the threads other blocking calls
    (``asyncio.to_thread``) need.

    Raises:
        Whatever ``work`` raises.
    """
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_media_executor(), functools.partial(work, *args, **kwargs))


@dataclass(frozen=True)
class FrameBounds:
    """What a clip read here may hold at most.

    Attributes:
        max_pixels: pixels a frame (width × height).
        max_frames: frames in the clip.
    """

    max_pixels: int = MAX_FRAME_PIXELS
    max_frames: int = MAX_CLIP_FRAMES


DEFAULT_BOUNDS: Final = FrameBounds()
"""The bounds every clip is held to (:data:`MAX_FRAME_PIXELS`, :data:`MAX_CLIP_FRAMES`)."""


class MediaError(Exception):
    """A file is not a video PyAV can read, or the work could not be done.

    Attributes:
        sentence: what a member may be told (no path, no library detail).
    """

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


class MediaTimeout(MediaError):
    """The work passed its deadline and was stopped (the partial output is not kept)."""


class MediaTooLarge(MediaError):
    """A clip is over its :class:`FrameBounds`: refused before (or while) decoding it.

    Attributes:
        bounds: the bounds it broke, for the sentence a member reads.
    """

    def __init__(self, bounds: FrameBounds) -> None:
        super().__init__("That video is too large for the bot to work on.")
        self.bounds = bounds


class _Counter:
    """Holds decoding to ``bounds``: each frame's size, and how many frames one clip gave."""

    def __init__(self, bounds: FrameBounds) -> None:
        self.bounds = bounds
        self.frames = 0

    def frame(self, width: int, height: int) -> None:
        self.frames += 1
        if self.frames > self.bounds.max_frames or width * height > self.bounds.max_pixels:
            raise MediaTooLarge(self.bounds)


@dataclass(frozen=True)
class ClipInfo:
    """What decides how clips join.

    Attributes:
        codec: the video codec's name (``h264``).
        frames: frames in the clip, as its header says (else duration × fps, rounded).
        width: pixels.
        height: pixels.
        fps: frames a second (the stream's average rate).
        has_audio: the file has an audio stream.
        duration: seconds.
        extradata: the codec's set-up (H.264's SPS and PPS); clips copied into one stream
            must share it.
    """

    codec: str
    width: int
    height: int
    fps: Fraction
    has_audio: bool
    duration: float
    extradata: bytes
    frames: int = 0

    def check(self, bounds: FrameBounds) -> None:
        """Refuse a clip whose header says it is over ``bounds``.

        Raises:
            MediaTooLarge: too many pixels a frame, or too many frames.
        """
        if self.width * self.height > bounds.max_pixels or self.frames > bounds.max_frames:
            raise MediaTooLarge(bounds)

    def copies_with(self, other: ClipInfo) -> bool:
        """Whether ``other`` can follow this clip by stream copy (same stream set-up)."""
        return (
            self.codec == other.codec
            and (self.width, self.height) == (other.width, other.height)
            and self.fps == other.fps
            and self.extradata == other.extradata
        )


@dataclass(frozen=True)
class JoinResult:
    """A joined film.

    Attributes:
        path: the MP4 written.
        copied: True when joined by stream copy, False when re-encoded.
        duration: seconds.
        has_audio: whether the film kept an audio track.
        size: bytes.
    """

    path: Path
    copied: bool
    duration: float
    has_audio: bool
    size: int


def probe(path: Path) -> ClipInfo:
    """Read what :func:`join_clips` needs to know of a clip.

    Raises:
        MediaError: the file is not a video PyAV can read.
    """
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise MediaError("That file has no video in it.")
            video = container.streams.video[0]
            ctx = video.codec_context
            rate = video.average_rate or video.guessed_rate or Fraction(24)
            duration = _duration(container, video)
            fps = Fraction(rate)
            return ClipInfo(
                codec=ctx.name,
                width=ctx.width,
                height=ctx.height,
                fps=fps,
                has_audio=bool(container.streams.audio),
                duration=duration,
                extradata=bytes(ctx.extradata or b""),
                frames=video.frames or round(duration * fps),
            )
    except av.FFmpegError as exc:
        raise MediaError("That file is not a video the bot can read.") from exc


def last_frame_png(path: Path, *, bounds: FrameBounds = DEFAULT_BOUNDS) -> bytes:
    """The clip's last frame as a PNG (lossless: what the next clip starts from).

    Seeks to the last keyframe before the end and decodes from there, so the cost follows the
    keyframe interval, not the clip's length; falls back to decoding from the start where the
    file cannot seek.

    Raises:
        MediaTooLarge: the clip is over ``bounds`` (its header, or the frames decoded).
        MediaError: the file has no video or no decodable frame.
    """
    with _opened_video(path, bounds) as (container, video):
        video.thread_type = "AUTO"
        last = None
        end = _duration(container, video)
        if end > 0:
            try:
                # Container-level seek: microseconds, to the keyframe at or before it.
                container.seek(max(0, int((end - 0.001) * 1_000_000)), backward=True)
                last = _last_of(container.decode(video), _Counter(bounds))
            except av.FFmpegError:
                last = None
        if last is None:
            container.seek(0)
            last = _last_of(container.decode(video), _Counter(bounds))
        if last is None:
            raise MediaError("That video has no frame the bot can read.")
        return _png(last)


def first_frame_png(path: Path, *, bounds: FrameBounds = DEFAULT_BOUNDS) -> bytes:
    """The clip's first frame as a PNG (lossless: what a draft's Final starts from).

    Decodes from the start until the first frame, so the cost is one frame whatever the clip's
    length.

    Raises:
        MediaTooLarge: the clip is over ``bounds`` (its header, or the frame decoded).
        MediaError: the file has no video or no decodable frame.
    """
    with _opened_video(path, bounds) as (container, video):
        counter = _Counter(bounds)
        for frame in container.decode(video):
            counter.frame(frame.width, frame.height)
            return _png(frame)
        raise MediaError("That video has no frame the bot can read.")


@contextlib.contextmanager
def _opened_video(
    path: Path, bounds: FrameBounds
) -> Iterator[tuple[av.container.InputContainer, av.VideoStream]]:
    """``path`` checked against ``bounds`` and opened: its container and first video stream.

    Raises:
        MediaTooLarge: the clip's header is over ``bounds``.
        MediaError: the file has no video, or PyAV cannot read it (also inside the block).
    """
    probe(path).check(bounds)
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise MediaError("That file has no video in it.")
            yield container, container.streams.video[0]
    except av.FFmpegError as exc:
        raise MediaError("That file is not a video the bot can read.") from exc


def join_clips(
    paths: Sequence[Path],
    output: Path,
    *,
    progress: Progress | None = None,
    deadline: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    bounds: FrameBounds = DEFAULT_BOUNDS,
) -> JoinResult:
    """Join ``paths`` in order into the MP4 ``output``.

    By stream copy when every clip :meth:`ClipInfo.copies_with` the first (audio copied too
    when every clip has it); else re-encoded to the first clip's size and frame rate with
    H.264, each clip scaled to fit and letterboxed (never stretched), with AAC audio when every
    clip has audio.

    Args:
        paths: two or more clips, in the order they are joined.
        output: where the film is written (replaced).
        progress: told the share done now and then.
        deadline: ``monotonic()`` time after which the work stops with :class:`MediaTimeout`.
        monotonic: the clock ``deadline`` is read against.
        bounds: what each clip may hold (checked before anything is written).

    Raises:
        MediaTooLarge: a clip is over ``bounds`` (``output`` is removed).
        MediaError: a clip cannot be read, or the film cannot be written.
        MediaTimeout: the deadline passed (``output`` is removed).
    """
    if not paths:
        raise MediaError("There is nothing to join.")
    infos = [probe(p) for p in paths]
    for info in infos:
        info.check(bounds)
    total = sum(i.duration for i in infos) or 1.0

    reported = 0.0
    late = _deadline_check(deadline, monotonic, "Joining took too long and was stopped.")

    def check(done: float) -> None:
        nonlocal reported
        late()
        share = min(1.0, max(0.0, done / total))
        if progress is not None and share > reported:
            reported = share
            progress(share)

    audio = all(i.has_audio for i in infos)
    copied = all(infos[0].copies_with(i) for i in infos[1:])
    try:
        if copied:
            _copy(paths, infos, output, audio=audio, check=check, bounds=bounds)
        else:
            _encode(paths, infos, output, audio=audio, check=check, bounds=bounds)
    except MediaError:
        output.unlink(missing_ok=True)
        raise
    except av.FFmpegError as exc:
        output.unlink(missing_ok=True)
        raise MediaError("The clips could not be joined.") from exc
    if progress is not None and reported < 1.0:
        progress(1.0)
    joined = probe(output)
    return JoinResult(
        path=output,
        copied=copied,
        duration=joined.duration,
        has_audio=joined.has_audio,
        size=output.stat().st_size,
    )


def fit_to_size(
    source: Path,
    output: Path,
    max_bytes: int,
    *,
    deadline: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> Path:
    """Re-encode ``source`` into ``output`` at the bitrate that keeps it under ``max_bytes``.

    The video gets what the audio (128 kbit/s when present) and a tenth for the container
    leave; the size, frame rate and duration stay. ``source`` is a film made here from
    bounded clips (:func:`join_clips`), so it is not held to :class:`FrameBounds` again.

    Args:
        source: the film.
        output: where the smaller film is written (replaced).
        max_bytes: the limit.
        deadline: ``monotonic()`` time after which the work stops with :class:`MediaTimeout`
            (a join's, which covers its fitting too).
        monotonic: the clock ``deadline`` is read against.

    Raises:
        MediaTimeout: the deadline passed (``output`` is removed).
        MediaError: even :data:`MIN_VIDEO_BITRATE` would not fit (the caller refuses with the
            size and the limit), or the file cannot be read.
    """
    info = probe(source)
    audio_rate = 128_000 if info.has_audio else 0
    budget = max_bytes * 8 * 0.9 / max(info.duration, 0.1) - audio_rate
    if budget < MIN_VIDEO_BITRATE:
        raise MediaError("The film is too long to fit the upload limit.")
    late = _deadline_check(deadline, monotonic, "Fitting took too long and was stopped.")
    try:
        _encode(
            [source],
            [info],
            output,
            audio=info.has_audio,
            check=lambda done: late(),
            bitrate=int(budget),
        )
    except MediaTimeout:
        output.unlink(missing_ok=True)
        raise
    except av.FFmpegError as exc:
        output.unlink(missing_ok=True)
        raise MediaError("The film could not be made smaller.") from exc
    return output


def _deadline_check(
    deadline: float | None, monotonic: Callable[[], float], sentence: str
) -> Callable[[], None]:
    """A check that raises :class:`MediaTimeout` (with ``sentence``) once ``deadline`` passed."""

    def late() -> None:
        if deadline is not None and monotonic() > deadline:
            raise MediaTimeout(sentence)

    return late


def sample_frames(source: Path | bytes, shares: Sequence[float]) -> list[av.video.frame.VideoFrame]:
    """The frames at ``shares`` of a clip (0.0 its first frame, 1.0 its last), in that order.

    One demuxing pass (no decoding) finds the keyframes and the frames' times; then each
    frame wanted is decoded from the keyframe at or before it, and frames of one group of
    pictures are decoded in one run, so a clip of a single group is decoded at most once.
    A share's frame is the first whose time is at or past the share of the span from the
    first frame's time to the last's.

    Args:
        source: the clip, as a file or its bytes.
        shares: each 0.0 to 1.0 (clamped).

    Raises:
        MediaError: the file has no video or no decodable frame.
    """

    def opened() -> av.container.InputContainer:
        return av.open(io.BytesIO(source) if isinstance(source, bytes) else str(source), "r")

    try:
        with opened() as container:
            if not container.streams.video:
                raise MediaError("That file has no video in it.")
            stream = container.streams.video[0]
            keyframes: list[int] = []
            times: list[int] = []
            for packet in container.demux(stream):
                if packet.pts is None:
                    continue
                times.append(packet.pts)
                if packet.is_keyframe:
                    keyframes.append(packet.pts)
        if not times:
            raise MediaError("That video has no frame the bot can read.")
        first, last = min(times), max(times)
        keyframes.sort()
        targets = [first + round(min(1.0, max(0.0, s)) * (last - first)) for s in shares]
        found: dict[int, av.video.frame.VideoFrame] = {}
        with opened() as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            frames: Iterator[av.video.frame.VideoFrame] | None = None
            current: av.video.frame.VideoFrame | None = None
            for target in sorted(set(targets)):
                at = None if current is None else current.pts
                if current is not None and at is not None and at >= target:
                    # No frame lies between the previous target and this one's first frame.
                    found[target] = current
                    continue
                start = max((k for k in keyframes if k <= target), default=first)
                if frames is None or (at is not None and start > at):
                    container.seek(start, stream=stream, backward=True)
                    frames = container.decode(stream)
                for frame in frames:
                    current = frame
                    if frame.pts is not None and frame.pts >= target:
                        break
                if current is None:
                    raise MediaError("That video has no frame the bot can read.")
                found[target] = current
        return [found[t] for t in targets]
    except av.FFmpegError as exc:
        raise MediaError("That file is not a video the bot can read.") from exc


POSTER_SHARE: Final = 0.1
"""Where a clip's poster frame is: this share of its duration in (a clip's first frame is
often black, a fade-in), at most :data:`POSTER_MAX_SECONDS`."""

POSTER_MAX_SECONDS: Final = 1.0
"""The latest a poster frame is taken, seconds from the start (one keyframe interval at most
is decoded to reach it)."""


@dataclass(frozen=True)
class Poster:
    """A clip's poster frame.

    Attributes:
        frame: the decoded frame (``frame.to_image()`` gives it to Pillow).
        duration: the clip's duration, seconds (0.0 when its header does not say).
    """

    frame: av.video.frame.VideoFrame
    duration: float


def poster_frame(source: bytes, *, bounds: FrameBounds = DEFAULT_BOUNDS) -> Poster:
    """The clip's poster frame (:data:`POSTER_SHARE` of it in) and its duration.

    The header is checked against ``bounds`` before any decoding, and each frame decoded on
    the way to the poster too (a header may lie); decoding starts at the keyframe at or before
    the poster's time, so the cost is a few frames, whatever the clip's length.

    Args:
        source: the clip's bytes (as downloaded for its delivery).
        bounds: what the clip may hold.

    Raises:
        MediaTooLarge: the clip is over ``bounds``.
        MediaError: not a video PyAV can read, or no decodable frame.
    """
    try:
        with av.open(io.BytesIO(source), "r") as container:
            if not container.streams.video:
                raise MediaError("That file has no video in it.")
            video = container.streams.video[0]
            ctx = video.codec_context
            frames = video.frames or 0
            if ctx.width * ctx.height > bounds.max_pixels or frames > bounds.max_frames:
                raise MediaTooLarge(bounds)
            duration = _duration(container, video)
            at = min(POSTER_MAX_SECONDS, duration * POSTER_SHARE)
            counter = _Counter(bounds)
            found: av.video.frame.VideoFrame | None = None
            if at > 0 and video.time_base is not None:
                try:
                    container.seek(int(at / video.time_base), stream=video, backward=True)
                except av.FFmpegError:
                    container.seek(0)
            for frame in container.decode(video):
                counter.frame(frame.width, frame.height)
                found = frame
                if frame.time is None or frame.time >= at:
                    break
            if found is None:
                raise MediaError("That video has no frame the bot can read.")
            return Poster(found, duration)
    except av.FFmpegError as exc:
        raise MediaError("That file is not a video the bot can read.") from exc


def _duration(container: av.container.InputContainer, video: av.video.stream.VideoStream) -> float:
    if video.duration is not None and video.time_base is not None:
        return float(video.duration * video.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000
    return 0.0


def _last_of(
    frames: Iterator[av.video.frame.VideoFrame], counter: _Counter
) -> av.video.frame.VideoFrame | None:
    last = None
    for frame in frames:
        counter.frame(frame.width, frame.height)
        last = frame
    return last


def _png(frame: av.video.frame.VideoFrame) -> bytes:
    codec = av.CodecContext.create("png", "w")
    codec.width, codec.height = frame.width, frame.height
    codec.pix_fmt = "rgb24"
    rgb = frame.reformat(format="rgb24")
    rgb.pts = None
    packets = [*codec.encode(rgb), *codec.encode(None)]
    return b"".join(bytes(p) for p in packets)


def _copy(
    paths: Sequence[Path],
    infos: Sequence[ClipInfo],
    output: Path,
    *,
    audio: bool,
    check: Callable[[float], None],
    bounds: FrameBounds = DEFAULT_BOUNDS,
) -> None:
    """Remux every clip's packets into one file, each clip's timestamps after the last's.

    A clip starts where the film's pictures end (the sum of the clips' video durations); a
    stream whose packets reach further (an AAC track's last packet, B-frames' decoding
    timestamps) starts after its own last packet instead, so every stream's timestamps keep
    increasing. The AAC priming packet (negative timestamp) of every clip but the first is
    dropped: in the middle of a film it would be heard.
    """
    with av.open(str(output), "w", format="mp4") as out:
        with av.open(str(paths[0])) as first:
            targets: dict[str, av.stream.Stream] = {
                "video": out.add_stream_from_template(first.streams.video[0])
            }
            if audio:
                targets["audio"] = out.add_stream_from_template(first.streams.audio[0])
        stream_end: dict[str, int] = {}  # the next free decoding timestamp, per stream
        offset = 0.0  # seconds of pictures before this clip
        for number, (path, info) in enumerate(zip(paths, infos, strict=True)):
            with av.open(str(path)) as clip:
                streams: list[av.stream.Stream] = [clip.streams.video[0]]
                if audio:
                    streams.append(clip.streams.audio[0])
                shift: dict[str, int] = {}
                counter = _Counter(bounds)  # a video packet is a frame; the size is the header's
                for count, packet in enumerate(clip.demux(*streams)):
                    kind = packet.stream.type
                    if packet.dts is None or packet.time_base is None:
                        continue  # the demuxer's flush packet
                    if kind == "video":
                        counter.frame(info.width, info.height)
                    if number and kind == "audio" and (packet.pts or 0) < 0:
                        continue
                    if kind not in shift:
                        shift[kind] = max(
                            round(offset / packet.time_base),
                            stream_end.get(kind, packet.dts) - packet.dts,
                        )
                    packet.dts += shift[kind]
                    if packet.pts is not None:
                        packet.pts += shift[kind]
                    stream_end[kind] = packet.dts + max(1, packet.duration or 0)
                    packet.stream = targets[kind]
                    out.mux(packet)
                    if count % 64 == 0:
                        check(float(packet.dts * packet.time_base))
            offset += info.duration
            check(offset)


def _encode(
    paths: Sequence[Path],
    infos: Sequence[ClipInfo],
    output: Path,
    *,
    audio: bool,
    check: Callable[[float], None],
    bitrate: int | None = None,
    bounds: FrameBounds | None = None,
) -> None:
    """Decode every clip and encode one H.264 (+ AAC) film at the first clip's size and rate.

    Each clip's decoded frames are held to ``bounds`` (None: not held, for a film of ours).
    """
    width, height = infos[0].width - infos[0].width % 2, infos[0].height - infos[0].height % 2
    fps = infos[0].fps
    with av.open(str(output), "w", format="mp4") as out:
        video = out.add_stream(OUTPUT_CODEC, rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        if bitrate is None:
            video.options = {"crf": "20", "preset": "veryfast"}
        else:
            video.bit_rate = bitrate
            video.options = {"preset": "veryfast", "maxrate": str(bitrate), "bufsize": str(bitrate)}
        sound = out.add_stream("aac", rate=AUDIO_RATE) if audio else None
        resampler = av.audio.resampler.AudioResampler(
            format="fltp", layout="stereo", rate=AUDIO_RATE
        )
        frame_time = Fraction(1) / fps
        next_pts = 0  # in frames of the film
        next_sample = 0
        done = 0.0
        for path, info in zip(paths, infos, strict=True):
            with av.open(str(path)) as clip:
                source = clip.streams.video[0]
                source.thread_type = "AUTO"
                graph = _letterbox(source, width, height, fps)
                counter = None if bounds is None else _Counter(bounds)
                for frame in clip.decode(source):
                    if counter is not None:
                        counter.frame(frame.width, frame.height)
                    graph.push(frame)
                    next_pts = _drain(graph, out, video, next_pts, frame_time)
                    if next_pts % 48 == 0:
                        check(done + min(info.duration, float(next_pts * frame_time) - done))
                graph.push(None)
                next_pts = _drain(graph, out, video, next_pts, frame_time)
            if sound is not None:
                with av.open(str(path)) as clip:
                    for samples in clip.decode(clip.streams.audio[0]):
                        samples.pts = None
                        for resampled in resampler.resample(samples):
                            resampled.pts = next_sample
                            next_sample += resampled.samples
                            out.mux(sound.encode(resampled))
                # The clip's sound ends where its pictures do: pad or cut to keep them in step.
                next_sample = round(float(next_pts * frame_time) * AUDIO_RATE)
            done += info.duration
            check(done)
        out.mux(video.encode(None))
        if sound is not None:
            out.mux(sound.encode(None))


def _letterbox(
    source: av.video.stream.VideoStream, width: int, height: int, fps: Fraction
) -> av.filter.Graph:
    """Scale to fit ``width`` × ``height`` keeping the aspect, pad the rest black, at ``fps``."""
    graph = av.filter.Graph()
    buffer = graph.add_buffer(template=source)
    scale = graph.add(
        "scale", f"w={width}:h={height}:force_original_aspect_ratio=decrease:force_divisible_by=2"
    )
    pad = graph.add("pad", f"w={width}:h={height}:x=(ow-iw)/2:y=(oh-ih)/2:color=black")
    rate = graph.add("fps", f"fps={fps.numerator}/{fps.denominator}")
    setsar = graph.add("setsar", "1")
    fmt = graph.add("format", "yuv420p")
    sink = graph.add("buffersink")
    buffer.link_to(scale)
    scale.link_to(pad)
    pad.link_to(rate)
    rate.link_to(setsar)
    setsar.link_to(fmt)
    fmt.link_to(sink)
    graph.configure()
    return graph


def _drain(
    graph: av.filter.Graph,
    out: av.container.OutputContainer,
    video: av.video.stream.VideoStream,
    next_pts: int,
    frame_time: Fraction,
) -> int:
    while True:
        try:
            frame = graph.pull()
        except (av.BlockingIOError, av.EOFError):
            return next_pts
        assert isinstance(frame, av.video.frame.VideoFrame)
        frame.pts = next_pts
        frame.time_base = frame_time
        out.mux(video.encode(frame))
        next_pts += 1
