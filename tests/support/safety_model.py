"""A tiny image classifier in Hugging Face Optimum's ONNX export layout, built by the tests.

Its ``nsfw`` logit follows the image's mean red channel (ReduceMean over H and W, then one
MatMul to two logits ``[normal, nsfw]``), so a red picture scores near 1, a blue one near 0 and
a mid-grey one 0.5: the real loading, preprocessing and inference path runs on it, in
milliseconds. Also pictures and clips of chosen colours.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import av.video.frame
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

RED = (255, 0, 0)
BLUE = (0, 0, 255)
GREY = (128, 128, 128)

STEEPNESS = 8.0
"""The logits' gap per unit of normalised red (-1 to 1): red gives a softmax of about 1."""


def classifier_graph(*, steepness: float = STEEPNESS) -> onnx.ModelProto:
    """``pixel_values`` float32 [N, 3, H, W] -> ``logits`` [N, 2]: ``[-s r / 2, s r / 2]``."""
    weights = np.zeros((3, 2), dtype=np.float32)
    weights[0] = (-steepness / 2, steepness / 2)
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["pixel_values"], ["channels"], axes=[2, 3], keepdims=0),
            helper.make_node("MatMul", ["channels", "weights"], ["logits"]),
        ],
        "red_classifier",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
        initializer=[numpy_helper.from_array(weights, "weights")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write_classifier(
    folder: Path,
    *,
    labels: Sequence[str] = ("normal", "nsfw"),
    preprocessor: dict[str, Any] | None = None,
) -> Path:
    """Write the red classifier into ``folder`` as Optimum exports one; return ``folder``.

    Args:
        folder: created if missing.
        labels: ``id2label``'s two labels, in the logits' order.
        preprocessor: ``preprocessor_config.json``'s fields (default: a ViT's at 8 x 8 pixels).
    """
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(classifier_graph(), folder / "model.onnx")
    config = {
        "architectures": ["ViTForImageClassification"],
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
    }
    (folder / "config.json").write_text(json.dumps(config))
    if preprocessor is None:
        preprocessor = {
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "image_processor_type": "ViTImageProcessor",
            "resample": 2,
            "rescale_factor": 1 / 255,
            "size": {"height": 8, "width": 8},
        }
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    return folder


def solid_png(rgb: tuple[int, int, int], size: tuple[int, int] = (16, 12)) -> bytes:
    """A PNG of one flat colour, ``size`` = (width, height)."""
    out = io.BytesIO()
    Image.new("RGB", size, rgb).save(out, format="PNG")
    return out.getvalue()


def clip_of(colours: Sequence[tuple[int, int, int]], *, width: int = 32, height: int = 32) -> bytes:
    """An H.264 MP4 at 24 frames a second, one flat frame per colour, in order."""
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=24)
        video.width, video.height = width, height
        video.pix_fmt = "yuv420p"
        video.options = {"crf": "12", "preset": "veryfast"}
        for index, rgb in enumerate(colours):
            array = np.full((height, width, 3), rgb, dtype=np.uint8)
            frame = av.video.frame.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = index
            frame.time_base = Fraction(1, 24)
            container.mux(video.encode(frame))
        container.mux(video.encode())
    return out.getvalue()
