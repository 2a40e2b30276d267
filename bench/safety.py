"""The safety scorer at a realistic size: a ViT-small-shaped classifier at 384 px, on one core.

The model is built here with ``onnx.helper`` and random weights, in Optimum's layout (what an
operator's export looks like): a 16 x 16 patch embedding (a strided Conv: 576 tokens of 384
dimensions), 12 transformer blocks (LayerNormalization, 6-head attention with MatMul and
Softmax, a 1,536-wide MLP with GELU), a mean over the tokens and a 2-label head: about 21 M
parameters, as ViT-S/16. Scores run through :class:`bot.media.safety.SafetyScorer`'s own
path (decode, preprocess, onnxruntime with ``intra_op_num_threads=1``) in a child process,
which reports its peak RSS above what it held before the model was loaded. A 10 s 720p clip
(2 s with ``--quick``) is scored from its four frames, decoding included. The same model is
measured again quantized to int8 (onnxruntime's dynamic quantization, what docs/safety.md
suggests for one core). NudeNet is measured too when its extra is installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from bench.media import make_test_clip
from bench.report import Table

SIDE, PATCH, DIM, HEADS, MLP, BLOCKS = 384, 16, 384, 6, 1536, 12
TOKENS = (SIDE // PATCH) ** 2

_CHILD = """
import json, statistics, sys, time
from pathlib import Path

import av, numpy, onnxruntime, PIL.Image  # imported before the baseline: the bot has them
from bot.media.safety import SafetyScorer, load_model

def status_kib(field):
    # VmHWM: this process image's peak (ru_maxrss would count the forking parent's too).
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

def rss_kib():
    return status_kib("VmRSS")

def peak_kib():
    return status_kib("VmHWM")

spec, image_path, clip_path = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
runs = int(sys.argv[4])
image = image_path.read_bytes()
before = rss_kib()
model = load_model(spec, ["nsfw"], threads=1)
scorer = SafetyScorer(model, threads=1)
loaded = time.perf_counter()
model.load()
load_s = time.perf_counter() - loaded
times = []
for _ in range(runs):
    started = time.perf_counter()
    scorer._score(image, "image")
    times.append(time.perf_counter() - started)
pictures_kib = peak_kib() - before
clips = []
for _ in range(max(1, runs // 10)):
    started = time.perf_counter()
    scorer._score(clip_path, "video")
    clips.append(time.perf_counter() - started)
times.sort()
print(json.dumps({
    "load": load_s,
    "p50": times[len(times) // 2],
    "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
    "clip": statistics.median(clips),
    "pictures_kib": pictures_kib,
    "added_kib": peak_kib() - before,
}))
"""


def _weight(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.02).astype(np.float32), name)


def _const(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def vit_small(seed: int = 0) -> onnx.ModelProto:
    """A ViT-S/16-shaped classifier at :data:`SIDE` pixels: ``pixel_values`` -> ``logits``."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits = [
        _weight(rng, "patch_w", DIM, 3, PATCH, PATCH),
        _weight(rng, "patch_b", DIM),
        _weight(rng, "pos", 1, TOKENS, DIM),
        _const("flat", [0, DIM, TOKENS]),
        _const("heads", [0, TOKENS, HEADS, DIM // HEADS]),
        _const("merged", [0, TOKENS, DIM]),
        numpy_helper.from_array(np.asarray((DIM // HEADS) ** -0.5, np.float32), "scale"),
        numpy_helper.from_array(np.asarray(1.702, np.float32), "gelu_k"),
    ]
    nodes += [
        helper.make_node(
            "Conv", ["pixel_values", "patch_w", "patch_b"], ["patches"], strides=[PATCH, PATCH]
        ),
        helper.make_node("Reshape", ["patches", "flat"], ["flat_patches"]),
        helper.make_node("Transpose", ["flat_patches"], ["tokens"], perm=[0, 2, 1]),
        helper.make_node("Add", ["tokens", "pos"], ["x0"]),
    ]

    def linear(x: str, name: str, n_in: int, n_out: int) -> str:
        inits.extend([_weight(rng, f"{name}_w", n_in, n_out), _weight(rng, f"{name}_b", n_out)])
        nodes.append(helper.make_node("MatMul", [x, f"{name}_w"], [f"{name}_mm"]))
        nodes.append(helper.make_node("Add", [f"{name}_mm", f"{name}_b"], [name]))
        return name

    def norm(x: str, name: str) -> str:
        inits.append(numpy_helper.from_array(np.ones(DIM, np.float32), f"{name}_g"))
        inits.append(numpy_helper.from_array(np.zeros(DIM, np.float32), f"{name}_b"))
        nodes.append(
            helper.make_node("LayerNormalization", [x, f"{name}_g", f"{name}_b"], [name], axis=-1)
        )
        return name

    x = "x0"
    for b in range(BLOCKS):
        p = f"b{b}"
        h = norm(x, f"{p}_ln1")
        q, k, v = (linear(h, f"{p}_{n}", DIM, DIM) for n in "qkv")
        for n, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            src = {"q": q, "k": k, "v": v}[n]
            nodes.append(helper.make_node("Reshape", [src, "heads"], [f"{p}_{n}h"]))
            nodes.append(helper.make_node("Transpose", [f"{p}_{n}h"], [f"{p}_{n}t"], perm=perm))
        nodes += [
            helper.make_node("MatMul", [f"{p}_qt", f"{p}_kt"], [f"{p}_s"]),
            helper.make_node("Mul", [f"{p}_s", "scale"], [f"{p}_ss"]),
            helper.make_node("Softmax", [f"{p}_ss"], [f"{p}_a"], axis=-1),
            helper.make_node("MatMul", [f"{p}_a", f"{p}_vt"], [f"{p}_o"]),
            helper.make_node("Transpose", [f"{p}_o"], [f"{p}_ot"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [f"{p}_ot", "merged"], [f"{p}_om"]),
        ]
        attended = linear(f"{p}_om", f"{p}_proj", DIM, DIM)
        nodes.append(helper.make_node("Add", [x, attended], [f"{p}_r1"]))
        h = norm(f"{p}_r1", f"{p}_ln2")
        up = linear(h, f"{p}_fc1", DIM, MLP)
        nodes += [  # GELU as x * sigmoid(1.702 x)
            helper.make_node("Mul", [up, "gelu_k"], [f"{p}_gk"]),
            helper.make_node("Sigmoid", [f"{p}_gk"], [f"{p}_gs"]),
            helper.make_node("Mul", [up, f"{p}_gs"], [f"{p}_g"]),
        ]
        down = linear(f"{p}_g", f"{p}_fc2", MLP, DIM)
        nodes.append(helper.make_node("Add", [f"{p}_r1", down], [f"{p}_r2"]))
        x = f"{p}_r2"
    final = norm(x, "ln_f")
    nodes.append(helper.make_node("ReduceMean", [final], ["pooled"], axes=[1], keepdims=0))
    linear("pooled", "logits", DIM, 2)
    graph = helper.make_graph(
        nodes,
        "vit_small_384",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["b", 3, SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 2])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def write_model(folder: Path) -> Path:
    """The ViT-small classifier in Optimum's layout (``model.onnx`` and its two JSON files)."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(vit_small(), folder / "model.onnx")
    (folder / "config.json").write_text(json.dumps({"id2label": {"0": "normal", "1": "nsfw"}}))
    preprocessor = {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": SIDE, "width": SIDE},
    }
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    return folder


def _measure(spec: str, image: Path, clip: Path, runs: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, spec, str(image), str(clip), str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _picture(path: Path) -> Path:
    """A 1024 x 1024 PNG of noise: a generated picture's size, every pixel decoded."""
    from PIL import Image

    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (1024, 1024, 3), dtype=np.uint8)).save(path)
    return path


async def run(workdir: Path, *, quick: bool = False) -> Table:
    """Score pictures and a clip on one core; the goals are docs/benchmarks.md's."""
    seconds = 2.0 if quick else 10.0
    runs = 10 if quick else 60
    table = Table(f"safety: ViT-small-shaped model at {SIDE} px, one core, {runs} pictures")
    folder = write_model(workdir / "vit-small")
    size = (folder / "model.onnx").stat().st_size
    table.add("model.onnx", f"{size / 2**20:.0f} MiB (float32, ~21 M parameters)")
    image = _picture(workdir / "picture.png")
    clip = make_test_clip(workdir / "clip.mp4", seconds)
    onnx_figures = _measure(str(folder), image, clip, runs)
    table.add("model load", f"{onnx_figures['load']:.2f} s")
    table.add("picture 1024 px: p50", f"{onnx_figures['p50'] * 1000:.0f} ms")
    table.add("picture 1024 px: p95", f"{onnx_figures['p95'] * 1000:.0f} ms", "<= 80 ms")
    table.add(
        f"clip {seconds:.0f} s 720p: 4 frames", f"{onnx_figures['clip'] * 1000:.0f} ms", "<= 400 ms"
    )
    table.add(
        "peak RSS added: pictures", f"{onnx_figures['pictures_kib'] / 1024:.0f} MiB", "<= 300 MiB"
    )
    table.add("  and the clip too", f"{onnx_figures['added_kib'] / 1024:.0f} MiB", "<= 300 MiB")
    quantized = workdir / "vit-small-int8"
    quantized.mkdir(exist_ok=True)
    for name in ("config.json", "preprocessor_config.json"):
        (quantized / name).write_bytes((folder / name).read_bytes())
    quantize_dynamic(folder / "model.onnx", quantized / "model.onnx", weight_type=QuantType.QInt8)
    q = _measure(str(quantized), image, clip, runs)
    size = (quantized / "model.onnx").stat().st_size
    table.add("int8 (dynamic): model.onnx", f"{size / 2**20:.0f} MiB")
    table.add("int8: picture p50", f"{q['p50'] * 1000:.0f} ms")
    table.add("int8: picture p95", f"{q['p95'] * 1000:.0f} ms", "<= 80 ms")
    table.add("int8: clip, 4 frames", f"{q['clip'] * 1000:.0f} ms", "<= 400 ms")
    table.add("int8: peak RSS added: pictures", f"{q['pictures_kib'] / 1024:.0f} MiB")
    table.add("  and the clip too", f"{q['added_kib'] / 1024:.0f} MiB", "<= 300 MiB")
    if importlib.util.find_spec("nudenet") is None:
        table.notes.append('NudeNet: not installed (pip install -e ".[nudenet]" to measure it)')
    else:
        nude = _measure("nudenet", image, clip, runs)
        table.add("NudeNet picture: p95", f"{nude['p95'] * 1000:.0f} ms", "<= 80 ms")
        table.add("NudeNet clip: 4 frames", f"{nude['clip'] * 1000:.0f} ms", "<= 400 ms")
        table.add("NudeNet peak RSS added", f"{nude['added_kib'] / 1024:.0f} MiB", "<= 300 MiB")
    return table
