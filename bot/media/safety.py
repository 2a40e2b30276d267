"""The safety scorer: how likely a result is to be unsafe, scored on this machine.

A score is a probability from 0.0 (safe) to 1.0 (unsafe), from the model the operator names
with ``SAFETY_MODEL`` (docs/safety.md):

- a folder in Hugging Face Optimum's ONNX export layout, run by ``onnxruntime``
  (:class:`OnnxClassifier`): ``model.onnx`` (input ``pixel_values``, float32
  ``[N, 3, H, W]``; output ``logits``, ``[N, classes]``), ``config.json`` (``id2label``) and
  ``preprocessor_config.json`` (how an image becomes ``pixel_values``: :class:`Preprocessing`).
  The score is the softmax probability summed over the labels named unsafe
  (``SAFETY_UNSAFE_LABELS``, case-insensitive);
- ``nudenet``: NudeNet's bundled detector (:class:`NudeNetDetector`, the optional extra
  ``[nudenet]``, AGPL-3.0); the score is its highest confidence in an exposed-nudity class;
- nothing: :class:`SafetyScorer` says checking is unavailable (:attr:`Outcome.UNAVAILABLE`).

:class:`SafetyScorer` runs a model in its own small thread pool, never on the event loop;
the model is loaded once, by the pool's first task. A video's score is the highest of its
frames at 10 %, 50 % and 90 % of the clip and its last frame (:data:`VIDEO_SHARES`). Verdicts
are kept per file digest (SHA-256) in a bounded LRU. An error or a timeout gives a
:attr:`Outcome.FAILED` verdict, which callers treat as "hold for review" (fail closed); it is
logged and counted (``genbot_safety_scores_total{outcome="failed"}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import numpy as np
import numpy.typing as npt
from PIL import Image

from bot.media.video import MediaError, sample_frames
from bot.ops.metrics import Metrics

log = logging.getLogger(__name__)

Kind = Literal["image", "video"]
"""What a result file is: a picture, or a clip PyAV reads."""

VIDEO_SHARES: Final = (0.1, 0.5, 0.9, 1.0)
"""The frames of a clip that are scored, as shares of its span (1.0: its last frame)."""

NUDENET: Final = "nudenet"
"""``SAFETY_MODEL``'s value that selects NudeNet's detector instead of a folder."""

NUDENET_UNSAFE: Final = frozenset(
    {
        "FEMALE_GENITALIA_EXPOSED",
        "MALE_GENITALIA_EXPOSED",
        "FEMALE_BREAST_EXPOSED",
        "BUTTOCKS_EXPOSED",
        "ANUS_EXPOSED",
    }
)
"""NudeNet's classes (its README's list) whose detections count as unsafe."""

Pixels = npt.NDArray[np.float32]


class SafetyModelError(Exception):
    """The model ``SAFETY_MODEL`` names cannot be used; the message is one line naming why.

    Raised at start-up (:func:`load_model`), so a misconfigured bot stops with that line.
    """


class Outcome(StrEnum):
    """What came of asking for a score."""

    SCORED = "scored"
    """The model scored the file: :attr:`Verdict.score` is set."""
    FAILED = "failed"
    """The model failed or took too long: hold the result for review (fail closed)."""
    UNAVAILABLE = "unavailable"
    """No model is configured on this bot: checking is unavailable (nothing is scored)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The scorer's answer for one file.

    Attributes:
        outcome: scored, failed or unavailable.
        score: 0.0 (safe) to 1.0 (unsafe) when scored, else None.
        cached: the score was remembered from an earlier file with the same digest.
    """

    outcome: Outcome
    score: float | None = None
    cached: bool = False

    @property
    def hold_for_review(self) -> bool:
        """Whether a caller must hold the result for review whatever its policy: it failed."""
        return self.outcome is Outcome.FAILED


class Model(Protocol):
    """A loaded-on-demand model that scores pictures (blocking; called in the scorer's pool)."""

    @property
    def description(self) -> str:
        """What it is, for the start-up line (e.g. ``ONNX model /models/nsfw, labels nsfw``)."""
        ...

    def load(self) -> None:
        """Load the weights (once; later calls return at once).

        Raises:
            Exception: whatever the runtime raises for a model it cannot load.
        """
        ...

    def score(self, images: Sequence[Image.Image]) -> list[float]:
        """One score per image, 0.0 to 1.0, in order (RGB images of any size)."""
        ...


# -- Optimum's layout ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Preprocessing:
    """How an image becomes ``pixel_values``, as ``preprocessor_config.json`` says.

    The steps and defaults of transformers' ``ViTImageProcessor``: convert to RGB, resize
    (Pillow, ``resample``), center-crop, rescale, normalize, channels first.

    Attributes:
        height: the resized height, pixels (with ``shortest_edge`` None).
        width: the resized width, pixels (with ``shortest_edge`` None).
        shortest_edge: resize so the shorter side is this many pixels, keeping the aspect
            (``size: {"shortest_edge": n}``); None for an exact ``height`` x ``width``.
        do_resize: resize at all.
        resample: Pillow's resampling filter number (2 bilinear, 3 bicubic).
        crop: ``(height, width)`` of a center crop after the resize; None: no crop.
        do_rescale: multiply by ``rescale_factor``.
        rescale_factor: usually 1/255.
        do_normalize: subtract ``image_mean`` and divide by ``image_std``, per channel.
        image_mean: three floats, RGB.
        image_std: three floats, RGB.
    """

    height: int = 224
    width: int = 224
    shortest_edge: int | None = None
    do_resize: bool = True
    resample: int = 2
    crop: tuple[int, int] | None = None
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Preprocessing:
        """Read ``preprocessor_config.json``'s fields (defaults: ``ViTImageProcessor``'s).

        ``size`` is ``{"height": h, "width": w}``, ``{"shortest_edge": n}`` or one number
        (a square). The crop applies when ``do_center_crop`` is true, or when ``crop_size`` is
        given without ``do_center_crop``.

        Raises:
            SafetyModelError: a field of the wrong shape.
        """
        try:
            height, width, shortest = _size(config.get("size", {"height": 224, "width": 224}))
            crop = None
            crop_size = config.get("crop_size")
            if config.get("do_center_crop", crop_size is not None):
                crop_h, crop_w, crop_edge = _size(crop_size if crop_size is not None else 224)
                crop = (crop_edge, crop_edge) if crop_edge is not None else (crop_h, crop_w)
            mean = _three(config.get("image_mean", (0.5, 0.5, 0.5)))
            std = _three(config.get("image_std", (0.5, 0.5, 0.5)))
            return cls(
                height=height,
                width=width,
                shortest_edge=shortest,
                do_resize=bool(config.get("do_resize", True)),
                resample=int(config.get("resample", 2)),
                crop=crop,
                do_rescale=bool(config.get("do_rescale", True)),
                rescale_factor=float(config.get("rescale_factor", 1 / 255)),
                do_normalize=bool(config.get("do_normalize", True)),
                image_mean=mean,
                image_std=std,
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise SafetyModelError(f"preprocessor_config.json: {exc}") from None

    def pixels(self, image: Image.Image) -> Pixels:
        """``image`` as the model's input, float32 ``[3, H, W]``."""
        image = image.convert("RGB")
        if self.do_resize:
            image = image.resize(self._resized(image.width, image.height), self.resample)
        array = np.asarray(image, dtype=np.float32)  # [H, W, 3], 0 to 255
        if self.crop is not None:
            array = _center_crop(array, *self.crop)
        if self.do_rescale:
            array = array * np.float32(self.rescale_factor)
        if self.do_normalize:
            mean = np.asarray(self.image_mean, dtype=np.float32)
            std = np.asarray(self.image_std, dtype=np.float32)
            array = (array - mean) / std
        return np.ascontiguousarray(array.transpose(2, 0, 1), dtype=np.float32)

    def _resized(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` after the resize (transformers' ``get_resize_output_image_size``)."""
        if self.shortest_edge is None:
            return self.width, self.height
        short, long = sorted((width, height))
        new_short, new_long = self.shortest_edge, int(self.shortest_edge * long / short)
        return (new_short, new_long) if width <= height else (new_long, new_short)


def _size(value: Any) -> tuple[int, int, int | None]:
    """``size``/``crop_size``: ``(height, width, shortest_edge)``."""
    if isinstance(value, int):
        return value, value, None
    if isinstance(value, dict):
        if "shortest_edge" in value:
            return 0, 0, int(value["shortest_edge"])
        return int(value["height"]), int(value["width"]), None
    raise TypeError(f"size must be a number or an object, not {value!r}")


def _three(value: Any) -> tuple[float, float, float]:
    if isinstance(value, int | float):
        return float(value), float(value), float(value)
    first, second, third = (float(v) for v in value)
    return first, second, third


def _center_crop(array: Pixels, height: int, width: int) -> Pixels:
    """The center ``height`` x ``width`` of ``[H, W, C]``, padded with zeros where smaller."""
    h, w = array.shape[:2]
    if h < height or w < width:
        padded = np.zeros((max(h, height), max(w, width), array.shape[2]), dtype=array.dtype)
        top, left = (padded.shape[0] - h) // 2, (padded.shape[1] - w) // 2
        padded[top : top + h, left : left + w] = array
        array, h, w = padded, padded.shape[0], padded.shape[1]
    top, left = (h - height) // 2, (w - width) // 2
    return array[top : top + height, left : left + width]


def softmax(logits: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Row-wise softmax of ``[N, classes]`` (stable: the row's maximum subtracted first)."""
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    result: npt.NDArray[np.float64] = exp / exp.sum(axis=1, keepdims=True)
    return result


class OnnxClassifier:
    """An image classifier in Optimum's ONNX export layout, run by ``onnxruntime``.

    The folder's JSON files are read when it is built (a bad folder stops start-up); the
    ONNX session is created by :meth:`load`, in the scorer's pool.

    Args:
        folder: holds ``model.onnx``, ``config.json`` and ``preprocessor_config.json``.
        unsafe_labels: the labels whose probabilities add up to the score (any case).
        threads: onnxruntime's intra-op threads (cores one inference may use).

    Raises:
        SafetyModelError: a file is missing or unreadable, or no label of the model is named
            unsafe.
    """

    def __init__(self, folder: Path, unsafe_labels: Sequence[str], *, threads: int = 1) -> None:
        self.folder = folder
        self.threads = threads
        if not folder.is_dir():
            raise SafetyModelError(f"{folder} is not a folder")
        for name in ("model.onnx", "config.json", "preprocessor_config.json"):
            if not (folder / name).is_file():
                raise SafetyModelError(f"{folder} has no {name} (Optimum's ONNX export layout)")
        config = _json(folder / "config.json")
        id2label = config.get("id2label")
        if not isinstance(id2label, dict) or not id2label:
            raise SafetyModelError(f"{folder / 'config.json'} has no id2label")
        try:
            self.labels = {int(index): str(label) for index, label in id2label.items()}
        except ValueError:
            raise SafetyModelError(
                f"{folder / 'config.json'}: id2label's keys are not numbers"
            ) from None
        wanted = {label.strip().lower() for label in unsafe_labels if label.strip()}
        self.unsafe = sorted(i for i, label in self.labels.items() if label.lower() in wanted)
        if not self.unsafe:
            raise SafetyModelError(
                f"none of the unsafe labels ({', '.join(sorted(wanted))}) is a label of the "
                f"model (its labels: {', '.join(self.labels[i] for i in sorted(self.labels))})"
            )
        self.preprocessing = Preprocessing.from_config(_json(folder / "preprocessor_config.json"))
        self._session: Any = None
        self._lock = threading.Lock()
        self._input = "pixel_values"
        self._output = "logits"
        self._batches = True

    @property
    def description(self) -> str:
        """The folder and the unsafe labels, for the start-up line."""
        labels = ", ".join(self.labels[i] for i in self.unsafe)
        return f"ONNX model {self.folder} (unsafe labels: {labels})"

    def load(self) -> None:
        """Create the onnxruntime session once (intra-op threads: ``threads``; no arena).

        Raises:
            onnxruntime's errors: a file that is no ONNX model, an unknown operator...
            SafetyModelError: no ``pixel_values`` input or no ``logits`` output.
        """
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            # Without onnxruntime's memory arena a ViT-small's peak RSS is about half
            # (bench.safety: ~230 MiB instead of ~410), for no measurable loss of speed.
            options.enable_cpu_mem_arena = False
            session = ort.InferenceSession(
                str(self.folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
            )
            inputs = {i.name: i for i in session.get_inputs()}
            outputs = [o.name for o in session.get_outputs()]
            if "pixel_values" not in inputs or "logits" not in outputs:
                raise SafetyModelError(
                    f"{self.folder / 'model.onnx'} has no pixel_values input or logits output"
                )
            batch = inputs["pixel_values"].shape[0] if inputs["pixel_values"].shape else 1
            self._batches = not isinstance(batch, int)  # a named (dynamic) batch axis
            self._session = session

    def score(self, images: Sequence[Image.Image]) -> list[float]:
        """The unsafe probability of each image (one batch when the model takes batches)."""
        self.load()
        pixels = [self.preprocessing.pixels(image) for image in images]
        groups = [np.stack(pixels)] if self._batches else [p[np.newaxis] for p in pixels]
        scores: list[float] = []
        for batch in groups:
            (logits,) = self._session.run([self._output], {self._input: batch})
            probabilities = softmax(np.asarray(logits, dtype=np.float32))
            scores.extend(float(row[self.unsafe].sum()) for row in probabilities)
        return [min(1.0, max(0.0, s)) for s in scores]


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SafetyModelError(f"{path} cannot be read: {exc}") from None
    if not isinstance(value, dict):
        raise SafetyModelError(f"{path} is not a JSON object")
    return value


# -- NudeNet (optional extra, AGPL-3.0) ---------------------------------------------------


class NudeNetDetector:
    """NudeNet's bundled detector (``pip install -e ".[nudenet]"``; AGPL-3.0, never default).

    The score is the highest confidence of a detection in :data:`NUDENET_UNSAFE`, 0.0 when
    there is none.

    Raises:
        SafetyModelError: the ``nudenet`` package is not installed.
    """

    def __init__(self) -> None:
        try:
            import nudenet
        except ImportError:
            raise SafetyModelError(
                'SAFETY_MODEL=nudenet needs the nudenet package: pip install -e ".[nudenet]" '
                "(AGPL-3.0, docs/safety.md)"
            ) from None
        self._module: Any = nudenet
        self._detector: Any = None
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        """NudeNet and the classes that count, for the start-up line."""
        return f"NudeNet detector (unsafe classes: {', '.join(sorted(NUDENET_UNSAFE))})"

    def load(self) -> None:
        """Build NudeNet's detector once (it opens its bundled ONNX model)."""
        with self._lock:
            if self._detector is None:
                self._detector = self._module.NudeDetector()

    def score(self, images: Sequence[Image.Image]) -> list[float]:
        """The highest unsafe detection's confidence per image."""
        self.load()
        scores = []
        for image in images:
            bgr = np.asarray(image.convert("RGB"))[:, :, ::-1].copy()  # NudeNet reads OpenCV's BGR
            found = self._detector.detect(bgr)
            confidences = [float(d["score"]) for d in found if d.get("class") in NUDENET_UNSAFE]
            scores.append(max(confidences, default=0.0))
        return scores


def load_model(spec: str | None, unsafe_labels: Sequence[str], *, threads: int = 1) -> Model | None:
    """The model ``SAFETY_MODEL`` names, checked but not yet loaded; None when unset.

    Args:
        spec: ``SAFETY_MODEL``: a folder in Optimum's layout, ``nudenet``, or None.
        unsafe_labels: ``SAFETY_UNSAFE_LABELS`` (folder models only).
        threads: onnxruntime's intra-op threads.

    Raises:
        SafetyModelError: the model cannot be used (one line, for the start-up failure).
    """
    if spec is None or not spec.strip():
        return None
    if spec.strip().lower() == NUDENET:
        return NudeNetDetector()
    return OnnxClassifier(Path(spec).expanduser(), unsafe_labels, threads=threads)


# -- the scorer -----------------------------------------------------------------------------


class SafetyScorer:
    """Scores result files off the event loop, once per distinct file.

    Args:
        model: the model (:func:`load_model`); None: checking is unavailable, every verdict
            is :attr:`Outcome.UNAVAILABLE`.
        threads: the pool's threads (scores computed at once; 1 or 2 on a small host).
        timeout: seconds from asking to a verdict, the wait for the pool included; past it the
            verdict is :attr:`Outcome.FAILED` (the work itself cannot be stopped and finishes
            in the pool).
        cache_size: verdicts remembered, by the file's SHA-256 (least recently used dropped).
        metrics: where verdicts and their time are counted.
    """

    def __init__(
        self,
        model: Model | None,
        *,
        threads: int = 1,
        timeout: float = 20.0,
        cache_size: int = 1024,
        metrics: Metrics | None = None,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.cache_size = cache_size
        self.metrics = metrics
        self._pool = (
            ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="safety")
            if model is not None
            else None
        )
        self._cache: OrderedDict[str, float] = OrderedDict()

    @property
    def available(self) -> bool:
        """Whether results are checked at all (a model is configured)."""
        return self.model is not None

    def describe(self) -> str:
        """The start-up line: whether checking is on, and with which model."""
        if self.model is None:
            return (
                "safety checking: off (SAFETY_MODEL is not set): results are shown unchecked, "
                "and /config safety and the dashboard say checking is unavailable"
            )
        return f"safety checking: on, {self.model.description}"

    async def warm_up(self) -> None:
        """Load the model in the pool now rather than on the first score.

        A model that fails to load is logged; every later verdict then fails (held for
        review) until a load succeeds.
        """
        if self.model is None or self._pool is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self.model.load)
        except Exception:
            log.exception("safety: the model could not be loaded; results will be held")

    async def score(self, source: bytes | Path, kind: Kind) -> Verdict:
        """The verdict on one result file.

        Args:
            source: the file's bytes, or its path.
            kind: ``image`` (anything Pillow opens) or ``video`` (anything PyAV opens).

        Returns:
            :attr:`Outcome.UNAVAILABLE` without a model; :attr:`Outcome.SCORED` with the
            score; :attr:`Outcome.FAILED` when the file could not be read, the model failed or
            the timeout passed (logged and counted; never cached, so a later call tries again).
        """
        if self.model is None or self._pool is None:
            return Verdict(Outcome.UNAVAILABLE)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout):
                digest = await loop.run_in_executor(self._pool, _digest, source)
                if (cached := self._cache.get(digest)) is not None:
                    self._cache.move_to_end(digest)
                    self._count("cached", None)
                    return Verdict(Outcome.SCORED, cached, cached=True)
                score = await loop.run_in_executor(self._pool, self._score, source, kind)
        except TimeoutError:
            log.warning("safety: no score within %.1f s; the result is held", self.timeout)
            self._count("failed", None)
            return Verdict(Outcome.FAILED)
        except Exception as exc:
            log.warning(
                "safety: scoring failed (%s: %s); the result is held",
                type(exc).__name__,
                _one_line(exc),
            )
            self._count("failed", None)
            return Verdict(Outcome.FAILED)
        self._cache[digest] = score
        self._cache.move_to_end(digest)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        self._count("scored", time.monotonic() - started)
        return Verdict(Outcome.SCORED, score)

    def close(self) -> None:
        """Stop the pool (work under way finishes; nothing queued starts)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _score(self, source: bytes | Path, kind: Kind) -> float:
        """Blocking: decode and score (in the pool)."""
        assert self.model is not None
        images = _frames(source) if kind == "video" else [_image(source)]
        return max(self.model.score(images))

    def _count(self, outcome: str, seconds: float | None) -> None:
        if self.metrics is not None:
            self.metrics.safety(outcome, seconds)


def _digest(source: bytes | Path) -> str:
    """SHA-256 of the file, hex (read in blocks: a path is never held whole)."""
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    with source.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _image(source: bytes | Path) -> Image.Image:
    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
        image.load()
        return image.convert("RGB")


def _frames(source: bytes | Path) -> list[Image.Image]:
    try:
        frames = sample_frames(source, VIDEO_SHARES)
        return [Image.fromarray(frame.to_ndarray(format="rgb24")) for frame in frames]
    except MediaError as exc:
        raise ValueError(exc.sentence) from exc


def _one_line(exc: BaseException) -> str:
    with contextlib.suppress(Exception):
        return str(exc).splitlines()[0][:200] if str(exc) else ""
    return ""
