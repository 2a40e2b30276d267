"""The safety scorer on a real ONNX model in Optimum's layout, built here (tests/support).

The model's ``nsfw`` logit follows the mean red channel: red pictures and clips must score
high, blue ones low, through the same loading, preprocessing and inference an operator's
model goes through. A scorer that fails must say so (the result is held: fail closed), and
scoring must never hold up the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from PIL import Image

from bot.config import SettingsError, load_settings
from bot.media.safety import (
    Outcome,
    Preprocessing,
    SafetyModelError,
    SafetyScorer,
    load_model,
)
from bot.ops.metrics import Metrics
from bot.wiring import build_safety
from tests.support.safety_model import BLUE, GREY, RED, clip_of, solid_png, write_classifier


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_classifier(tmp_path / "model")


@pytest.fixture
async def scorer(folder: Path) -> AsyncIterator[SafetyScorer]:
    scorer = SafetyScorer(load_model(str(folder), ["nsfw"]), metrics=Metrics())
    yield scorer
    scorer.close()


def counted(metrics: Metrics, outcome: str) -> float:
    value = metrics.registry.get_sample_value("genbot_safety_scores_total", {"outcome": outcome})
    return value or 0.0


async def test_a_red_picture_scores_high_and_a_blue_one_low(scorer: SafetyScorer) -> None:
    red = await scorer.score(solid_png(RED), "image")
    blue = await scorer.score(solid_png(BLUE), "image")
    grey = await scorer.score(solid_png(GREY), "image")
    assert red.outcome is Outcome.SCORED and red.score is not None and red.score > 0.99
    assert blue.score is not None and blue.score < 0.01
    assert grey.score == pytest.approx(0.5, abs=0.02)
    assert not red.hold_for_review


async def test_a_file_on_disk_is_scored_as_its_bytes(scorer: SafetyScorer, tmp_path: Path) -> None:
    path = tmp_path / "result.png"
    path.write_bytes(solid_png(RED, size=(40, 30)))
    verdict = await scorer.score(path, "image")
    assert verdict.score is not None and verdict.score > 0.99


async def test_the_unsafe_labels_are_matched_in_any_case(tmp_path: Path) -> None:
    folder = write_classifier(tmp_path / "m", labels=("Normal", "NSFW"))
    scorer = SafetyScorer(load_model(str(folder), ["nsfw"]))
    try:
        assert (await scorer.score(solid_png(RED), "image")).score > 0.99  # type: ignore[operator]
    finally:
        scorer.close()
    # Both labels named unsafe: every picture is wholly unsafe.
    both = SafetyScorer(load_model(str(folder), [" normal ", "Nsfw"]))
    try:
        assert (await both.score(solid_png(BLUE), "image")).score == pytest.approx(1.0)
    finally:
        both.close()


def test_a_model_with_none_of_the_unsafe_labels_stops_start_up_naming_its_labels(
    folder: Path,
) -> None:
    settings = load_settings(
        discord_token="t", safety_model=str(folder), safety_unsafe_labels="porn,hentai"
    )
    with pytest.raises(SettingsError) as refused:
        build_safety(settings)
    assert str(refused.value) == (
        "SAFETY_MODEL: none of the unsafe labels (hentai, porn) is a label of the model "
        "(its labels: normal, nsfw)"
    )


def test_a_folder_without_the_layouts_files_stops_start_up_in_one_line(tmp_path: Path) -> None:
    settings = load_settings(discord_token="t", safety_model=str(tmp_path))
    with pytest.raises(SettingsError) as refused:
        build_safety(settings)
    assert str(refused.value) == (
        f"SAFETY_MODEL: {tmp_path} has no model.onnx (Optimum's ONNX export layout)"
    )


def test_nudenet_without_its_package_stops_start_up_in_one_clear_line() -> None:
    try:
        import nudenet  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the nudenet extra is installed here")
    with pytest.raises(SafetyModelError) as refused:
        load_model("NudeNet", ["nsfw"])
    assert 'pip install -e ".[nudenet]"' in str(refused.value)
    assert "\n" not in str(refused.value)


async def test_without_a_model_checking_is_unavailable_and_says_so() -> None:
    scorer = build_safety(load_settings(discord_token="t"))
    assert not scorer.available
    assert (await scorer.score(solid_png(RED), "image")).outcome is Outcome.UNAVAILABLE
    assert "off" in scorer.describe() and "unavailable" in scorer.describe()


def test_the_start_up_line_names_the_model_and_its_labels(folder: Path) -> None:
    settings = load_settings(
        discord_token="t", safety_model=str(folder), safety_unsafe_labels="NSFW"
    )
    scorer = build_safety(settings)
    try:
        assert scorer.describe() == (
            f"safety checking: on, ONNX model {folder} (unsafe labels: nsfw)"
        )
    finally:
        scorer.close()


async def test_a_clip_whose_last_frame_is_red_scores_high(scorer: SafetyScorer) -> None:
    last_red = await scorer.score(clip_of([BLUE] * 23 + [RED]), "video")
    all_blue = await scorer.score(clip_of([BLUE] * 24), "video")
    assert last_red.score is not None and last_red.score > 0.99
    assert all_blue.score is not None and all_blue.score < 0.01


async def test_a_clip_red_in_its_middle_scores_high(scorer: SafetyScorer) -> None:
    colours = [BLUE] * 10 + [RED] * 4 + [BLUE] * 10  # the frame at 50 % is red
    verdict = await scorer.score(clip_of(colours), "video")
    assert verdict.score is not None and verdict.score > 0.99


async def test_a_file_scored_before_is_answered_from_its_digest(
    scorer: SafetyScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    red = solid_png(RED)
    first = await scorer.score(red, "image")
    assert scorer.model is not None

    def never(images: Sequence[Image.Image]) -> list[float]:
        raise AssertionError("the model ran again for a file it had scored")

    monkeypatch.setattr(scorer.model, "score", never)
    again = await scorer.score(bytes(red), "image")
    assert again.cached and again.score == first.score
    assert scorer.metrics is not None and counted(scorer.metrics, "cached") == 1


async def test_the_cache_keeps_only_the_most_recent_files(folder: Path) -> None:
    scorer = SafetyScorer(load_model(str(folder), ["nsfw"]), cache_size=2)
    try:
        files = [solid_png((value, 0, 0)) for value in (10, 20, 30)]
        for data in files:
            await scorer.score(data, "image")
        assert not (await scorer.score(files[0], "image")).cached
        assert (await scorer.score(files[2], "image")).cached
    finally:
        scorer.close()


async def test_a_broken_model_file_fails_closed_logged_and_counted(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (folder / "model.onnx").write_bytes(b"not an onnx model")
    metrics = Metrics()
    scorer = SafetyScorer(load_model(str(folder), ["nsfw"]), metrics=metrics)
    try:
        with caplog.at_level(logging.WARNING, "bot.media.safety"):
            verdict = await scorer.score(solid_png(BLUE), "image")
        assert verdict.outcome is Outcome.FAILED and verdict.hold_for_review
        assert verdict.score is None
        assert "the result is held" in caplog.text
        assert counted(metrics, "failed") == 1
        # A failure is not remembered: the same file is tried again.
        assert (await scorer.score(solid_png(BLUE), "image")).outcome is Outcome.FAILED
        assert counted(metrics, "failed") == 2
    finally:
        scorer.close()


async def test_a_file_that_is_no_picture_fails_closed(scorer: SafetyScorer) -> None:
    assert (await scorer.score(b"<html>nope</html>", "image")).outcome is Outcome.FAILED
    assert (await scorer.score(b"\x00\x00\x00\x18ftypisom", "video")).outcome is Outcome.FAILED


class Blocking:
    """A model whose scoring waits until the test lets it go."""

    description = "blocking test model"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.thread: str | None = None

    def load(self) -> None:
        pass

    def score(self, images: Sequence[Image.Image]) -> list[float]:
        self.thread = threading.current_thread().name
        self.started.set()
        self.release.wait(10)
        return [0.25 for _ in images]


async def test_scoring_runs_in_its_pool_while_the_event_loop_goes_on() -> None:
    model = Blocking()
    scorer = SafetyScorer(model)
    try:
        scoring = asyncio.create_task(scorer.score(solid_png(RED), "image"))
        await asyncio.to_thread(model.started.wait, 10)
        # The model is busy in its thread; a coroutine still runs to the end meanwhile.
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 5 and not scoring.done()
        model.release.set()
        verdict = await scoring
        assert verdict.score == 0.25
        assert model.thread is not None and model.thread.startswith("safety")
    finally:
        model.release.set()
        scorer.close()


async def test_a_score_past_its_timeout_fails_closed() -> None:
    model = Blocking()
    metrics = Metrics()
    scorer = SafetyScorer(model, timeout=0.05, metrics=metrics)
    try:
        verdict = await scorer.score(solid_png(RED), "image")
        assert verdict.outcome is Outcome.FAILED
        assert counted(metrics, "failed") == 1
    finally:
        model.release.set()
        scorer.close()


def test_preprocessing_reads_the_shortest_edge_form_and_the_center_crop() -> None:
    steps = Preprocessing.from_config(
        {
            "size": {"shortest_edge": 8},
            "do_center_crop": True,
            "crop_size": {"height": 6, "width": 6},
            "resample": 3,
            "image_mean": [0.0, 0.0, 0.0],
            "image_std": [1.0, 1.0, 1.0],
        }
    )
    wide = Image.new("RGB", (32, 16), RED)
    pixels = steps.pixels(wide)
    assert pixels.shape == (3, 6, 6) and pixels.dtype.name == "float32"
    assert steps._resized(32, 16) == (16, 8) and steps._resized(16, 32) == (8, 16)
    assert pixels[0].min() == pytest.approx(1.0) and pixels[2].max() == pytest.approx(0.0)


def test_preprocessing_without_rescale_or_normalize_keeps_the_raw_values() -> None:
    steps = Preprocessing.from_config(
        {"size": {"height": 4, "width": 5}, "do_rescale": False, "do_normalize": False}
    )
    pixels = steps.pixels(Image.new("L", (9, 9), 200))  # greyscale: converted to RGB
    assert pixels.shape == (3, 4, 5)
    assert float(pixels.mean()) == pytest.approx(200.0)


async def test_a_model_scored_through_the_shortest_edge_layout(tmp_path: Path) -> None:
    preprocessor = {
        "size": {"shortest_edge": 10},
        "crop_size": 8,
        "rescale_factor": 1 / 255,
        "image_mean": 0.5,
        "image_std": 0.5,
    }
    folder = write_classifier(tmp_path / "m", preprocessor=preprocessor)
    assert json.loads((folder / "preprocessor_config.json").read_text())["crop_size"] == 8
    scorer = SafetyScorer(load_model(str(folder), ["nsfw"]))
    try:
        verdict = await scorer.score(solid_png(RED, size=(30, 20)), "image")
        assert verdict.score is not None and verdict.score > 0.99
    finally:
        scorer.close()
