#!/usr/bin/env python3
"""Writes extra generated models for the CPU benchmark: architectures that
are not in compare_ort.py's model set, to see how edgerun does on networks
it was not tuned on (random weights, real layer lists and sizes):

  effnet_b0       EfficientNet-B0 at 224x224: SiLU, squeeze-excitation,
                  3x3 and 5x5 depthwise
  mnv3_large      MobileNetV3-Large at 224x224: HardSwish, HardSigmoid
                  squeeze-excitation (opset 14)
  yolov8n_640     a YOLOv8n-style detector at 640x640: C2f blocks (Split,
                  Concat), SPPF (three 5x5 max pools), nearest 2x Resize,
                  the DFL head (Reshape, Transpose, Softmax, 1x1 Conv)
  vit_tiny6       ViT-Tiny with 6 layers at 224x224: 16x16 patch Conv,
                  LayerNorm from primitives (ReduceMean, Pow, Sqrt),
                  Erf-GELU, attention from MatMul and Softmax
  unet_256        a U-Net at 256x256: ConvTranspose 2x2 upsampling, skip
                  Concats
  convnext_atto   ConvNeXt-Atto at 224x224: 7x7 depthwise, channels-last
                  LayerNormalization and MLP (Transpose, MatMul, GELU)
  crnn_lstm       a CRNN text recognizer: convolutions, two bidirectional
                  LSTM layers over 64 steps, Softmax
  kws_tcn         a keyword spotter: dilated 1-D convolutions over MFCCs
  bert_mini       a BERT-style encoder over 128 tokens: int64 input_ids and
                  attention_mask, Gather word and position embeddings
                  (vocab 8000, hidden 256), LayerNormalization (opset 17),
                  4 post-LN layers with 4 heads and FFN 1024, Erf-GELU, the
                  mask as an additive bias (Unsqueeze, Cast, Sub, Mul), and
                  a Tanh pooler on the first token (Gather, Gemm)
  gpt2_tiny       a GPT-2-style decoder over 64 tokens: vocab 5000, hidden
                  192, 4 pre-LN layers with 3 heads, fused QKV projection
                  (Split), causal mask by Where on a bool lower triangle,
                  tanh-GELU from primitives (Pow 3), logits against the
                  Transposed (tied) embedding table
  resnext_lite    a ResNeXt-style CNN at 224x224: 7x7/2 stem and max pool,
                  three stages of two bottlenecks with grouped 3x3 convs
                  (cardinality 32, widths 128/256/512), BatchNormalization
  vad_gru         a Silero-VAD-style detector on 1536 samples: reflect Pad,
                  Conv1d "STFT" (kernel 256, stride 128, 2x129 channels),
                  magnitude from the Split halves (Mul, Add, Sqrt), Conv1d +
                  ReLU, a GRU (hidden 64) from a given state, Conv1d +
                  Sigmoid averaged over time; outputs the probability and
                  the GRU's final state
  ssdlite_face    an SSD-lite / RetinaFace-style face detector at 320x320:
                  MobileNetV2-style backbone (Clip 0..6, 3x3 depthwise),
                  FPN-lite neck on 40x40, 20x20 and 10x10 (1x1 convs, nearest
                  2x Resize, Add), 3x3 heads for 2 anchors x 2 classes and
                  2 x 4 box offsets (Transpose to NHWC, Reshape, Concat),
                  Softmax on the scores
  mobilefacenet   MobileFaceNet at 112x112: 3x3/2 conv and 3x3 depthwise,
                  bottlenecks (expansion 2, and 4 where they halve the map),
                  BatchNormalization and per-channel PReLU (slope [C, 1, 1]),
                  1x1 conv to 512, a linear 7x7 global depthwise conv (no
                  padding, 7x7 -> 1x1), 1x1 conv to 128 + BatchNormalization,
                  Flatten to a 128-d embedding
  deeplabv3_mnv2  DeepLabV3 at 256x256 over MobileNetV2 (Clip 0..6) at output
                  stride 16: the 160 and 320 stages keep stride 1 and use
                  dilation 2 in their 3x3 depthwise convs; ASPP on 16x16 with
                  a 1x1 branch, three depthwise-separable 3x3 branches
                  (dilations 6, 12, 18; BN + ReLU after the depthwise and the
                  pointwise conv), image pooling (GlobalAveragePool, 1x1 conv,
                  bilinear Resize to sizes), Concat and 1x1 projection to 256,
                  a 3x3 conv, a 1x1 classifier to 21 classes and a bilinear
                  Resize (half_pixel, by sizes) back to 256x256
  fast_style      Johnson et al.'s fast style transfer network at 224x224:
                  reflect Pad before every conv (9x9, two 3x3 stride 2),
                  InstanceNormalization + ReLU, 5 residual blocks of 128
                  channels, two upsamplings by nearest 2x Resize + 3x3 conv,
                  and a final 9x9 conv to 3 channels
  fcos_gn         an FCOS-style detector at 320x320: ResNet-18 layout at half
                  width (32..256), FPN P3-P5 with 128 channels (1x1 laterals,
                  nearest 2x Resize, Add, 3x3 outputs), a head shared across
                  levels: classification and regression towers of four 3x3
                  convs with GroupNorm (32 groups, exported as Reshape,
                  InstanceNormalization, Reshape to Shape, Mul, Add) + ReLU;
                  80 class logits through Sigmoid, box regression times a
                  per-level scale through Exp, centerness through Sigmoid,
                  each flattened per level (Reshape, Transpose) and Concat
  mobilevit_xs    MobileViT-XS at 256x256: MobileNetV2 blocks with SiLU
                  (expansion 4), three MobileViT blocks (channels 64/80/96,
                  transformer dims 96/120/144, depths 2/4/3, 4 heads, FFN 2x):
                  3x3 and 1x1 convs, unfold into 2x2 patches (Reshape,
                  Transpose), pre-LN layers (LayerNormalization, opset 17) with
                  a fused QKV (Split), MatMul/Softmax attention and a SiLU MLP,
                  fold back, 1x1 conv, Concat with the input and a 3x3 fusion
                  conv; 1x1 conv to 384, global pool, 1000-way Gemm
  conformer_ctc   a Conformer CTC recognizer over 400 frames of 80 mels: 2-D
                  3x3/2 subsampling convs, 4 blocks of half-step Swish FFNs,
                  4-head attention, a convolution module (1-D pointwise to
                  2C, GLU by Split and Sigmoid, depthwise 1-D kernel 31,
                  BatchNormalization, Swish) and LayerNormalization;
                  LogSoftmax over 128 tokens
  whisper_enc     a Whisper-style audio encoder over 1500 mel frames: two
                  1-D convs (the second stride 2) with Erf-GELU, learned
                  positions, 2 pre-LN layers of 6 heads over 750 positions,
                  MLP 1536
  llama_tiny      a LLaMA-style decoder prefill of 64 tokens: RMSNorm from
                  primitives (Pow, ReduceMean, Sqrt, Reciprocal), rotary
                  embeddings (Slice, Neg, Concat, Mul by cos/sin tables), an
                  additive causal mask, SwiGLU MLP (688), bias-free MatMuls,
                  4 layers of 4 heads at hidden 256, logits over 4000 tokens
  yolov5n_640     a YOLOv5n-style detector at 640x640: 6x6/2 stem, C3 blocks,
                  SPPF, PAN neck with nearest 2x Resize, and the decoding
                  head in the graph (5-D Reshape and Transpose, Sigmoid,
                  Split, grid and anchor arithmetic with Pow, Concat)
  espcn_sr        ESPCN 3x super-resolution at 224x224: 5x5 and 3x3 convs
                  with Tanh, a 3x3 conv to 27 channels, DepthToSpace (CRD)
                  and Clip
  blazeface       a BlazeFace-style face detector at 128x128: 5x5 depthwise
                  blocks, 2x2 max-pooled shortcuts widened by Pad on the
                  channel axis, 1x1 heads flattened (Transpose, Reshape,
                  Concat), Sigmoid scores
  nanodet         a NanoDet-style detector at 320x320: ShuffleNetV2 units
                  (channel Split, channel shuffle by 5-D Reshape/Transpose),
                  an FPN with bilinear Resize, depthwise heads, and the GFL
                  integral (Softmax over 8 bins, MatMul by 0..7) in the graph
  swin_lite       a two-stage Swin-style classifier at 224x224: window
                  attention with 6-D Reshape/Transpose partitions, shifted
                  windows by Slice + Concat (torch.roll's export), a learned
                  relative bias, patch merging
  rrdb_sr         an ESRGAN-style 4x generator on 128x128, scaled down (32
                  features, 2 RRDB blocks): dense Concats, LeakyRelu 0.2,
                  residual scaling, two nearest 2x upsamplings

    gen_extra_models.py --out build/extra-models
    compare_ort.py --extra build/extra-models --models effnet_b0,...
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
sys.path.insert(0, HERE)
from gen_bench_models import conv_bn, write_models  # noqa: E402
from gen_models import FLOAT, INT64, Builder, batchnorm, conv, f32, he_normal, linear, rnn_weights, small  # noqa: E402


def act(b, y, a):
    if a == 'silu':
        return b.op('Mul', y, b.op('Sigmoid', y))
    if a == 'hswish':
        return b.op('HardSwish', y)
    if a == 'relu':
        return b.op('Relu', y)
    if a == 'hsig':
        return b.op('HardSigmoid', y, alpha=1 / 6, beta=0.5)
    return y


def cba(b, x, cin, cout, k, name, stride=1, group=1, a='silu'):
    return act(b, conv_bn(b, x, cin, cout, k, name, stride=stride, group=group, act=None), a)


def se(b, x, c, r, name, a='silu', gate='sig'):
    s = b.op('GlobalAveragePool', x)
    s = act(b, conv(b, s, c, r, 1, name + '.r', pad=0), a)
    s = conv(b, s, r, c, 1, name + '.e', pad=0)
    s = b.op('Sigmoid', s) if gate == 'sig' else act(b, s, 'hsig')
    return b.op('Mul', x, s)


def head(b, y, cin, n=1000):
    y = b.op('Flatten', b.op('GlobalAveragePool', y), axis=1)
    w = f32(b.rng.standard_normal((n, cin)) * np.sqrt(1.0 / cin))
    b.op('Gemm', y, b.weight('fc.w', w), b.weight('fc.b', small(b.rng, n)), transB=1, out='logits')
    b.output('logits', FLOAT, [1, n])


def effnet(rng):
    b = Builder('effnet_b0', rng)
    x = b.input('input', FLOAT, [1, 3, 224, 224])
    y = cba(b, x, 3, 32, 3, 'stem', 2)
    cin = 32
    i = 0
    for t, k, s, c, n in [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]:
        for j in range(n):
            st = s if j == 0 else 1
            hid = cin * t
            h = y
            if t != 1:
                h = cba(b, h, cin, hid, 1, f'b{i}.x')
            h = cba(b, h, hid, hid, k, f'b{i}.dw', st, hid)
            h = se(b, h, hid, max(1, cin // 4), f'b{i}.se')
            h = conv_bn(b, h, hid, c, 1, f'b{i}.p', act=None)
            y = b.op('Add', y, h) if st == 1 and cin == c else h
            cin = c
            i += 1
    y = cba(b, y, cin, 1280, 1, 'head')
    head(b, y, 1280)
    return b.model(13, 'effnet')


def mnv3(rng):
    b = Builder('mnv3_large', rng)
    x = b.input('input', FLOAT, [1, 3, 224, 224])
    y = cba(b, x, 3, 16, 3, 'stem', 2, a='hswish')
    cin = 16
    cfg = [(3, 16, 16, 0, 'relu', 1), (3, 64, 24, 0, 'relu', 2), (3, 72, 24, 0, 'relu', 1), (5, 72, 40, 1, 'relu', 2), (5, 120, 40, 1, 'relu', 1), (5, 120, 40, 1, 'relu', 1), (3, 240, 80, 0, 'hswish', 2), (3, 200, 80, 0, 'hswish', 1), (3, 184, 80, 0, 'hswish', 1), (3, 184, 80, 0, 'hswish', 1), (3, 480, 112, 1, 'hswish', 1), (3, 672, 112, 1, 'hswish', 1), (5, 672, 160, 1, 'hswish', 2), (5, 960, 160, 1, 'hswish', 1), (5, 960, 160, 1, 'hswish', 1)]
    for i, (k, e, c, use_se, a, s) in enumerate(cfg):
        h = y
        if e != cin:
            h = cba(b, h, cin, e, 1, f'b{i}.x', a=a)
        h = cba(b, h, e, e, k, f'b{i}.dw', s, e, a=a)
        if use_se:
            h = se(b, h, e, (e // 4 + 7) // 8 * 8, f'b{i}.se', a='relu', gate='hsig')
        h = conv_bn(b, h, e, c, 1, f'b{i}.p', act=None)
        y = b.op('Add', y, h) if s == 1 and cin == c else h
        cin = c
    y = cba(b, y, cin, 960, 1, 'last', a='hswish')
    head(b, y, 960)
    return b.model(14, 'mnv3')


def sppf(b, x):
    """YOLO's SPPF on 256 channels: 1x1 to 128, three chained 5x5 max pools,
    the four concatenated, 1x1 to 256."""
    y = cba(b, x, 256, 128, 1, 'sppf.cv1')
    m1 = b.op('MaxPool', y, kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    m2 = b.op('MaxPool', m1, kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    m3 = b.op('MaxPool', m2, kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1])
    return cba(b, b.op('Concat', y, m1, m2, m3, axis=1), 512, 256, 1, 'sppf.cv2')


def yolov8n(rng, size=640):
    b = Builder('yolov8n', rng)
    x = b.input('images', FLOAT, [1, 3, size, size])

    def c2f(x, cin, cout, n, name, short=True):
        y = cba(b, x, cin, cout, 1, name + '.cv1')
        parts = b.op('Split', y, b.const([cout // 2, cout // 2], np.int64), axis=1, n_out=2)
        outs = list(parts)
        h = parts[1]
        for k in range(n):
            t = cba(b, h, cout // 2, cout // 2, 3, f'{name}.m{k}.1')
            t = cba(b, t, cout // 2, cout // 2, 3, f'{name}.m{k}.2')
            h = b.op('Add', h, t) if short else t
            outs.append(h)
        return cba(b, b.op('Concat', *outs, axis=1), (2 + n) * cout // 2, cout, 1, name + '.cv2')
    y = cba(b, x, 3, 16, 3, 'c0', 2)
    y = cba(b, y, 16, 32, 3, 'c1', 2)
    y = c2f(y, 32, 32, 1, 'c2')
    y = cba(b, y, 32, 64, 3, 'c3', 2)
    p3 = c2f(y, 64, 64, 2, 'c4')
    y = cba(b, p3, 64, 128, 3, 'c5', 2)
    p4 = c2f(y, 128, 128, 2, 'c6')
    y = cba(b, p4, 128, 256, 3, 'c7', 2)
    y = c2f(y, 256, 256, 1, 'c8')
    p5 = sppf(b, y)
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = lambda t: b.op('Resize', t, '', sc, mode='nearest')
    h4 = c2f(b.op('Concat', up(p5), p4, axis=1), 384, 128, 1, 'c12', False)
    h3 = c2f(b.op('Concat', up(h4), p3, axis=1), 192, 64, 1, 'c15', False)
    d = cba(b, h3, 64, 64, 3, 'c16', 2)
    h4b = c2f(b.op('Concat', d, h4, axis=1), 192, 128, 1, 'c18', False)
    d = cba(b, h4b, 128, 128, 3, 'c19', 2)
    h5 = c2f(b.op('Concat', d, p5, axis=1), 384, 256, 1, 'c21', False)
    outs = []
    for i, (t, c) in enumerate([(h3, 64), (h4b, 128), (h5, 256)]):
        bx = cba(b, cba(b, t, c, 64, 3, f'd{i}.b1'), 64, 64, 3, f'd{i}.b2')
        bx = conv(b, bx, 64, 64, 1, f'd{i}.b3', pad=0)
        cl = cba(b, cba(b, t, c, 80, 3, f'd{i}.c1'), 80, 80, 3, f'd{i}.c2')
        cl = conv(b, cl, 80, 80, 1, f'd{i}.c3', pad=0)
        outs.append(b.op('Reshape', b.op('Concat', bx, cl, axis=1), b.const([1, 144, -1], np.int64)))
    cat = b.op('Concat', *outs, axis=2)
    bx, cl = b.op('Split', cat, b.const([64, 80], np.int64), axis=1, n_out=2)
    d = b.op('Transpose', b.op('Reshape', bx, b.const([1, 4, 16, -1], np.int64)), perm=[0, 2, 1, 3])
    d = b.op('Softmax', d, axis=1)
    d = b.op('Conv', d, b.weight('dfl.w', f32(np.arange(16).reshape(1, 16, 1, 1))))
    d = b.op('Reshape', d, b.const([1, 4, -1], np.int64))
    b.op('Concat', d, b.op('Sigmoid', cl), axis=1, out='output0')
    n = sum(((size // s) ** 2 for s in (8, 16, 32)))
    b.output('output0', FLOAT, [1, 84, n])
    return b.model(13, 'yolov8n')


def vit(rng, layers=6, dim=192, heads=3, mlp=768):
    b = Builder('vit_tiny', rng)
    x = b.input('pixel_values', FLOAT, [1, 3, 224, 224])
    y = conv(b, x, 3, dim, 16, 'patch', stride=16, pad=0)
    y = b.op('Transpose', b.op('Reshape', y, b.const([1, dim, 196], np.int64)), perm=[0, 2, 1])
    cls = b.weight('cls', small(rng, (1, 1, dim)))
    y = b.op('Concat', cls, y, axis=1)
    y = b.op('Add', y, b.weight('pos', small(rng, (1, 197, dim))))
    hd = dim // heads

    def ln(t, name):
        m = b.op('ReduceMean', t, axes=[-1])
        d = b.op('Sub', t, m)
        v = b.op('ReduceMean', b.op('Pow', d, b.const(np.float32(2.0))), axes=[-1])
        n = b.op('Div', d, b.op('Sqrt', b.op('Add', v, b.const(np.float32(1e-06)))))
        return b.op('Add', b.op('Mul', n, b.weight(name + '.g', f32(rng.uniform(0.8, 1.2, dim)))), b.weight(name + '.b', small(rng, dim)))

    def hv(t, perm):
        return b.op('Transpose', b.op('Reshape', t, b.const([1, 197, heads, hd], np.int64)), perm=perm)
    for l in range(layers):
        h = ln(y, f'l{l}.ln1')
        q = hv(linear(b, h, dim, dim, f'l{l}.q', 1.0), [0, 2, 1, 3])
        k = hv(linear(b, h, dim, dim, f'l{l}.k', 1.0), [0, 2, 3, 1])
        v = hv(linear(b, h, dim, dim, f'l{l}.v', 1.0), [0, 2, 1, 3])
        p = b.op('Softmax', b.op('Mul', b.op('MatMul', q, k), b.const(np.float32(hd ** (-0.5)))), axis=-1)
        c = b.op('Reshape', b.op('Transpose', b.op('MatMul', p, v), perm=[0, 2, 1, 3]), b.const([1, 197, dim], np.int64))
        y = b.op('Add', y, linear(b, c, dim, dim, f'l{l}.o', 1.0))
        h = linear(b, ln(y, f'l{l}.ln2'), dim, mlp, f'l{l}.fc1')
        e = b.op('Erf', b.op('Div', h, b.const(np.float32(np.sqrt(2.0)))))
        h = b.op('Mul', b.op('Mul', h, b.op('Add', e, b.const(np.float32(1.0)))), b.const(np.float32(0.5)))
        y = b.op('Add', y, linear(b, h, mlp, dim, f'l{l}.fc2', 1.0))
    y = ln(y, 'lnf')
    c0 = b.op('Gather', y, b.const(np.int64(0)), axis=1)
    w = f32(rng.standard_normal((dim, 1000)) * np.sqrt(1.0 / dim))
    b.op('Add', b.op('MatMul', c0, b.weight('head.w', w)), b.weight('head.b', small(rng, 1000)), out='logits')
    b.output('logits', FLOAT, [1, 1000])
    return b.model(13, 'vit')


def unet(rng, size=256):
    b = Builder('unet', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])

    def dbl(t, ci, co, n):
        return cba(b, cba(b, t, ci, co, 3, n + '.1', a='relu'), co, co, 3, n + '.2', a='relu')
    skips = []
    y = x
    ci = 3
    for i, c in enumerate([16, 32, 64, 128]):
        y = dbl(y, ci, c, f'e{i}')
        skips.append(y)
        y = b.op('MaxPool', y, kernel_shape=[2, 2], strides=[2, 2])
        ci = c
    y = dbl(y, ci, 256, 'mid')
    ci = 256
    for i, c in reversed(list(enumerate([16, 32, 64, 128]))):
        w = he_normal(rng, (ci, c, 2, 2), ci * 4)
        y = b.op('ConvTranspose', y, b.weight(f'up{i}.w', w), b.weight(f'up{i}.b', small(rng, c)), kernel_shape=[2, 2], strides=[2, 2])
        y = dbl(b.op('Concat', y, skips[i], axis=1), 2 * c, c, f'd{i}')
        ci = c
    b.op('Sigmoid', conv(b, y, ci, 1, 1, 'out', pad=0), out='mask')
    b.output('mask', FLOAT, [1, 1, size, size])
    return b.model(13, 'unet')


def convnext(rng):
    b = Builder('convnext_atto', rng)
    x = b.input('input', FLOAT, [1, 3, 224, 224])

    def ln_c(t, c, name):
        t = b.op('Transpose', t, perm=[0, 2, 3, 1])
        t = b.op('LayerNormalization', t, b.weight(name + '.g', f32(rng.uniform(0.8, 1.2, c))), b.weight(name + '.b', small(rng, c)), axis=-1, epsilon=1e-06)
        return b.op('Transpose', t, perm=[0, 3, 1, 2])
    dims = [40, 80, 160, 320]
    depths = [2, 2, 6, 2]
    y = ln_c(conv(b, x, 3, dims[0], 4, 'stem', stride=4, pad=0), dims[0], 'stem.ln')
    for s, (c, n) in enumerate(zip(dims, depths)):
        if s:
            y = conv(b, ln_c(y, dims[s - 1], f'ds{s}.ln'), dims[s - 1], c, 2, f'ds{s}', stride=2, pad=0)
        for j in range(n):
            h = conv(b, y, c, c, 7, f's{s}.{j}.dw', group=c)
            h = b.op('Transpose', h, perm=[0, 2, 3, 1])
            h = b.op('LayerNormalization', h, b.weight(f's{s}.{j}.g', f32(rng.uniform(0.8, 1.2, c))), b.weight(f's{s}.{j}.b', small(rng, c)), axis=-1, epsilon=1e-06)
            h = linear(b, h, c, 4 * c, f's{s}.{j}.fc1')
            e = b.op('Erf', b.op('Div', h, b.const(np.float32(np.sqrt(2.0)))))
            h = b.op('Mul', b.op('Mul', h, b.op('Add', e, b.const(np.float32(1.0)))), b.const(np.float32(0.5)))
            h = b.op('Mul', linear(b, h, 4 * c, c, f's{s}.{j}.fc2', 1.0), b.weight(f's{s}.{j}.gamma', f32(np.full(c, 0.1))))
            y = b.op('Add', y, b.op('Transpose', h, perm=[0, 3, 1, 2]))
    head(b, y, dims[-1])
    return b.model(17, 'convnext')


def crnn(rng):
    b = Builder('crnn', rng)
    x = b.input('input', FLOAT, [1, 1, 32, 256])
    y = cba(b, x, 1, 32, 3, 'c1', a='relu')
    y = b.op('MaxPool', y, kernel_shape=[2, 2], strides=[2, 2])
    y = cba(b, y, 32, 64, 3, 'c2', a='relu')
    y = b.op('MaxPool', y, kernel_shape=[2, 2], strides=[2, 2])
    y = cba(b, y, 64, 128, 3, 'c3', a='relu')
    y = b.op('MaxPool', y, kernel_shape=[2, 1], strides=[2, 1])
    y = cba(b, y, 128, 128, 3, 'c4', a='relu')
    y = b.op('MaxPool', y, kernel_shape=[4, 1], strides=[4, 1])
    y = b.op('Transpose', b.op('Squeeze', y, b.const([2], np.int64)), perm=[2, 0, 1])
    for l in range(2):
        W, R, B = rnn_weights(rng, 4, 2, 128, 128 if l == 0 else 256)
        o = b.op('LSTM', y, b.weight(f'lstm{l}.W', W), b.weight(f'lstm{l}.R', R), b.weight(f'lstm{l}.B', B), hidden_size=128, direction='bidirectional', n_out=1)
        y = b.op('Reshape', b.op('Transpose', o, perm=[0, 2, 1, 3]), b.const([64, 1, 256], np.int64))
    y = linear(b, y, 256, 97, 'fc', 1.0)
    b.op('Softmax', y, axis=-1, out='probs')
    b.output('probs', FLOAT, [64, 1, 97])
    return b.model(13, 'crnn')


def kws(rng):
    b = Builder('kws_tcn', rng)
    x = b.input('mfcc', FLOAT, [1, 40, 101])
    y = act(b, conv(b, x, 40, 64, (3,), 'c0'), 'relu')
    ci = 64
    for i, (c, dl) in enumerate([(64, 1), (64, 2), (128, 4), (128, 8), (128, 1)]):
        w = he_normal(rng, (c, ci, 3), ci * 3)
        h = b.op('Conv', y, b.weight(f't{i}.w', w), b.weight(f't{i}.b', small(rng, c)), kernel_shape=[3], dilations=[dl], pads=[dl, dl])
        h = act(b, batchnorm(b, h, c, f't{i}.bn'), 'relu')
        y = b.op('Add', y, h) if ci == c else h
        ci = c
    y = b.op('Flatten', b.op('GlobalAveragePool', y), axis=1)
    b.op('Gemm', y, b.weight('fc.w', he_normal(rng, (12, ci), ci)), b.weight('fc.b', small(rng, 12)), transB=1, out='logits')
    b.output('logits', FLOAT, [1, 12])
    return b.model(13, 'kws')


def ln_op(b, t, dim, name, out=None):
    g = b.weight(name + '.g', f32(b.rng.uniform(0.8, 1.2, dim)))
    return b.op('LayerNormalization', t, g, b.weight(name + '.b', small(b.rng, dim)), axis=-1, epsilon=1e-05, out=out)


def gelu_erf(b, h):
    e = b.op('Erf', b.op('Div', h, b.const(np.float32(np.sqrt(2.0)))))
    return b.op('Mul', b.op('Mul', h, b.op('Add', e, b.const(np.float32(1.0)))), b.const(np.float32(0.5)))


def split_heads(b, t, seq, heads, hd, perm):
    return b.op('Transpose', b.op('Reshape', t, b.const([1, seq, heads, hd], np.int64)), perm=perm)


def merge_heads(b, t, seq, dim):
    return b.op('Reshape', b.op('Transpose', t, perm=[0, 2, 1, 3]), b.const([1, seq, dim], np.int64))


def bert(rng, seq=128, vocab=8000, dim=256, heads=4, ffn=1024, layers=4):
    b = Builder('bert_mini', rng)
    ids = b.input('input_ids', INT64, [1, seq])
    mask = b.input('attention_mask', INT64, [1, seq])
    hd = dim // heads
    y = b.op('Gather', b.weight('emb.word', small(rng, (vocab, dim), 0.5)), ids, axis=0)
    pos = b.op('Gather', b.weight('emb.pos', small(rng, (512, dim), 0.5)), b.const(np.arange(seq).reshape(1, seq), np.int64), axis=0)
    y = ln_op(b, b.op('Add', y, pos), dim, 'emb.ln')
    m = b.op('Cast', b.op('Unsqueeze', mask, b.const([1, 2], np.int64)), to=FLOAT)
    m = b.op('Mul', b.op('Sub', b.const(np.float32(1.0)), m), b.const(np.float32(-10000.0)))
    for l in range(layers):
        q = split_heads(b, linear(b, y, dim, dim, f'l{l}.q', 1.0), seq, heads, hd, [0, 2, 1, 3])
        k = split_heads(b, linear(b, y, dim, dim, f'l{l}.k', 1.0), seq, heads, hd, [0, 2, 3, 1])
        v = split_heads(b, linear(b, y, dim, dim, f'l{l}.v', 1.0), seq, heads, hd, [0, 2, 1, 3])
        s = b.op('Add', b.op('Div', b.op('MatMul', q, k), b.const(np.float32(np.sqrt(hd)))), m)
        c = merge_heads(b, b.op('MatMul', b.op('Softmax', s, axis=-1), v), seq, dim)
        y = ln_op(b, b.op('Add', y, linear(b, c, dim, dim, f'l{l}.o', 1.0)), dim, f'l{l}.ln1')
        f = linear(b, gelu_erf(b, linear(b, y, dim, ffn, f'l{l}.fc1')), ffn, dim, f'l{l}.fc2', 1.0)
        y = ln_op(b, b.op('Add', y, f), dim, f'l{l}.ln2', out='last_hidden_state' if l == layers - 1 else None)
    c0 = b.op('Gather', y, b.const(np.int64(0)), axis=1)
    w = f32(rng.standard_normal((dim, dim)) * np.sqrt(1.0 / dim))
    p = b.op('Gemm', c0, b.weight('pool.w', w), b.weight('pool.b', small(rng, dim)), transB=1)
    b.op('Tanh', p, out='pooler_output')
    b.output('last_hidden_state', FLOAT, [1, seq, dim])
    b.output('pooler_output', FLOAT, [1, dim])
    return b.model(17, 'bert')


def gpt2(rng, seq=64, vocab=5000, dim=192, heads=3, layers=4):
    b = Builder('gpt2_tiny', rng)
    ids = b.input('input_ids', INT64, [1, seq])
    hd = dim // heads
    wte = b.weight('wte', small(rng, (vocab, dim), 0.1))
    y = b.op('Gather', wte, ids, axis=0)
    pos = b.op('Gather', b.weight('wpe', small(rng, (1024, dim), 0.1)), b.const(np.arange(seq).reshape(1, seq), np.int64), axis=0)
    y = b.op('Add', y, pos)
    causal = b.const(np.tril(np.ones((1, 1, seq, seq), np.bool_)))
    neg = b.const(np.float32(np.finfo(np.float32).min))
    for l in range(layers):
        qkv = linear(b, ln_op(b, y, dim, f'h{l}.ln1'), dim, 3 * dim, f'h{l}.c_attn', 1.0)
        q, k, v = b.op('Split', qkv, b.const([dim] * 3, np.int64), axis=-1, n_out=3)
        q = split_heads(b, q, seq, heads, hd, [0, 2, 1, 3])
        k = split_heads(b, k, seq, heads, hd, [0, 2, 3, 1])
        v = split_heads(b, v, seq, heads, hd, [0, 2, 1, 3])
        s = b.op('Div', b.op('MatMul', q, k), b.const(np.float32(np.sqrt(hd))))
        p = b.op('Softmax', b.op('Where', causal, s, neg), axis=-1)
        c = merge_heads(b, b.op('MatMul', p, v), seq, dim)
        y = b.op('Add', y, linear(b, c, dim, dim, f'h{l}.c_proj', 1.0))
        h = linear(b, ln_op(b, y, dim, f'h{l}.ln2'), dim, 4 * dim, f'h{l}.c_fc')
        # 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
        t = b.op('Add', h, b.op('Mul', b.op('Pow', h, b.const(np.float32(3.0))), b.const(np.float32(0.044715))))
        t = b.op('Tanh', b.op('Mul', t, b.const(np.float32(np.sqrt(2.0 / np.pi)))))
        h = b.op('Mul', b.op('Mul', h, b.const(np.float32(0.5))), b.op('Add', t, b.const(np.float32(1.0))))
        y = b.op('Add', y, linear(b, h, 4 * dim, dim, f'h{l}.c_proj2', 1.0))
    y = ln_op(b, y, dim, 'ln_f')
    b.op('MatMul', y, b.op('Transpose', wte, perm=[1, 0]), out='logits')
    b.output('logits', FLOAT, [1, seq, vocab])
    return b.model(17, 'gpt2')


def resnext(rng, card=32):
    b = Builder('resnext_lite', rng)
    x = b.input('input', FLOAT, [1, 3, 224, 224])
    y = conv_bn(b, x, 3, 64, 7, 'stem', stride=2)
    y = b.op('MaxPool', y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for s, (w, st) in enumerate([(128, 1), (256, 2), (512, 2)]):
        for j in range(2):
            stride = st if j == 0 else 1
            name = f's{s}.{j}'
            h = conv_bn(b, y, cin, w, 1, name + '.c1')
            h = conv_bn(b, h, w, w, 3, name + '.c2', stride=stride, group=card)
            h = conv_bn(b, h, w, 2 * w, 1, name + '.c3', act=None)
            sc = y if j else conv_bn(b, y, cin, 2 * w, 1, name + '.down', stride=stride, act=None)
            y = b.op('Relu', b.op('Add', h, sc))
            cin = 2 * w
    head(b, y, cin)
    return b.model(13, 'resnext')


def vad_gru(rng, samples=1536, bins=129, ch=64, hidden=64):
    b = Builder('vad_gru', rng)
    x = b.input('input', FLOAT, [1, 1, samples])
    h0 = b.input('h0', FLOAT, [1, 1, hidden])
    y = b.op('Pad', x, b.const([0, 0, 64, 0, 0, 64], np.int64), mode='reflect')
    y = conv(b, y, 1, 2 * bins, (256,), 'stft', stride=128, pad=0, bias=False, gain=1.0)
    re, im = b.op('Split', y, b.const([bins, bins], np.int64), axis=1, n_out=2)
    y = b.op('Sqrt', b.op('Add', b.op('Mul', re, re), b.op('Mul', im, im)))
    ci = bins
    for i in range(3):
        y = b.op('Relu', conv(b, y, ci, ch, (3,), f'enc{i}'))
        ci = ch
    y = b.op('Transpose', y, perm=[2, 0, 1])
    W, R, B = rnn_weights(rng, 3, 1, hidden, ch)
    o = b.op('GRU', y, b.weight('gru.W', W), b.weight('gru.R', R), b.weight('gru.B', B), '', h0,
             hidden_size=hidden, linear_before_reset=1, out=['gru.y', 'hn'])[0]
    o = b.op('Relu', b.op('Transpose', b.op('Squeeze', o, b.const([1], np.int64)), perm=[1, 2, 0]))
    # Recurrent outputs are small, so the head uses a larger gain.
    p = b.op('Sigmoid', conv(b, o, hidden, 1, (1,), 'dec', pad=0, gain=16.0))
    b.op('ReduceMean', p, axes=[2], keepdims=0, out='output')
    b.output('output', FLOAT, [1, 1])
    b.output('hn', FLOAT, [1, 1, hidden])
    return b.model(14, 'vad_gru')


def ssdlite_face(rng, size=320, fpn=64, anchors=2):
    b = Builder('ssdlite_face', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    y = conv_bn(b, x, 3, 16, 3, 'stem', stride=2, act='relu6')
    cin, i, feats = 16, 0, []
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 3, 2), (6, 96, 2, 1), (6, 160, 2, 2)]:
        for j in range(n):
            st = s if j == 0 else 1
            h = conv_bn(b, y, cin, cin * t, 1, f'b{i}.x', act='relu6') if t != 1 else y
            h = conv_bn(b, h, cin * t, cin * t, 3, f'b{i}.dw', stride=st, group=cin * t, act='relu6')
            h = conv_bn(b, h, cin * t, c, 1, f'b{i}.p', act=None)
            y = b.op('Add', y, h) if st == 1 and cin == c else h
            cin = c
            i += 1
        if c in (32, 96, 160):
            feats.append((y, c))
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = lambda t: b.op('Resize', t, '', sc, mode='nearest', coordinate_transformation_mode='asymmetric', nearest_mode='floor')
    lat = [conv_bn(b, f, c, fpn, 1, f'lat{k}') for k, (f, c) in enumerate(feats)]
    p5 = lat[2]
    p4 = conv_bn(b, b.op('Add', lat[1], up(p5)), fpn, fpn, 3, 'merge4')
    p3 = conv_bn(b, b.op('Add', lat[0], up(p4)), fpn, fpn, 3, 'merge3')
    scores, boxes = [], []
    # The neck's features have an RMS of about 10, so the heads use a small
    # gain to give logits of order one (scores that are not all 0 or 1).
    for k, p in enumerate((p3, p4, p5)):
        for outs, n, nm in ((scores, 2, 'cls'), (boxes, 4, 'box')):
            t = conv(b, p, fpn, anchors * n, 3, f'{nm}{k}', gain=0.04)
            outs.append(b.op('Reshape', b.op('Transpose', t, perm=[0, 2, 3, 1]), b.const([1, -1, n], np.int64)))
    b.op('Softmax', b.op('Concat', *scores, axis=1), axis=-1, out='scores')
    b.op('Concat', *boxes, axis=1, out='boxes')
    n = anchors * sum((size // s) ** 2 for s in (8, 16, 32))
    b.output('scores', FLOAT, [1, n, 2])
    b.output('boxes', FLOAT, [1, n, 4])
    return b.model(13, 'ssdlite_face')


def prelu(b, y, c, name):
    """nn.PReLU(c) as PyTorch exports it: a PRelu with slope [c, 1, 1]."""
    return b.op('PRelu', y, b.weight(name + '.slope', f32(b.rng.uniform(0.15, 0.35, (c, 1, 1)))))


def mobilefacenet(rng):
    b = Builder('mobilefacenet', rng)
    x = b.input('input', FLOAT, [1, 3, 112, 112])

    def cbp(t, ci, co, k, name, stride=1, group=1):
        return prelu(b, conv_bn(b, t, ci, co, k, name, stride=stride, group=group, act=None), co, name + '.prelu')
    y = cbp(x, 3, 64, 3, 'conv1', 2)
    y = cbp(y, 64, 64, 3, 'dw_conv1', group=64)
    cin, i = 64, 0
    for t, c, n, s in [(2, 64, 5, 2), (4, 128, 1, 2), (2, 128, 6, 1), (4, 128, 1, 2), (2, 128, 2, 1)]:
        for j in range(n):
            st = s if j == 0 else 1
            h = cbp(y, cin, cin * t, 1, f'b{i}.x')
            h = cbp(h, cin * t, cin * t, 3, f'b{i}.dw', st, cin * t)
            # Halved BN scales on the projections keep the 12 residual sums of order ten, not thousands.
            h = batchnorm(b, conv(b, h, cin * t, c, 1, f'b{i}.p', bias=False), c, f'b{i}.p.bn', gamma=0.5)
            y = b.op('Add', y, h) if st == 1 and cin == c else h
            cin = c
            i += 1
    y = cbp(y, cin, 512, 1, 'conv2')
    y = batchnorm(b, conv(b, y, 512, 512, 7, 'gdconv', pad=0, group=512, bias=False, gain=1.0), 512, 'gdconv.bn')
    y = conv_bn(b, y, 512, 128, 1, 'linear', act=None)
    b.op('Flatten', y, axis=1, out='embedding')
    b.output('embedding', FLOAT, [1, 128])
    return b.model(13, 'mobilefacenet')


def conv_d(b, x, cin, cout, name, dil, stride=1, group=1):
    """A bias-free 3x3 Conv with dilation `dil`, padded to keep the size."""
    w = he_normal(b.rng, (cout, cin // group, 3, 3), cin // group * 9)
    return b.op('Conv', x, b.weight(name + '.weight', w), kernel_shape=[3, 3], strides=[stride, stride],
                pads=[dil] * 4, dilations=[dil, dil], group=group)


def deeplabv3(rng, size=256, classes=21, ch=256):
    b = Builder('deeplabv3_mnv2', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    relu6 = lambda t: b.op('Clip', t, b.const(np.float32(0.0)), b.const(np.float32(6.0)))
    y = conv_bn(b, x, 3, 32, 3, 'stem', stride=2, act='relu6')
    cin, i = 32, 0
    # Output stride 16: the 160 and 320 stages keep stride 1 and dilate their depthwise convs by 2.
    for t, c, n, s, d in [(1, 16, 1, 1, 1), (6, 24, 2, 2, 1), (6, 32, 3, 2, 1), (6, 64, 4, 2, 1), (6, 96, 3, 1, 1),
                          (6, 160, 3, 1, 2), (6, 320, 1, 1, 2)]:
        for j in range(n):
            st = s if j == 0 else 1
            h = conv_bn(b, y, cin, cin * t, 1, f'b{i}.x', act='relu6') if t != 1 else y
            h = relu6(batchnorm(b, conv_d(b, h, cin * t, cin * t, f'b{i}.dw', d, st, cin * t), cin * t, f'b{i}.dw.bn'))
            h = conv_bn(b, h, cin * t, c, 1, f'b{i}.p', act=None)
            y = b.op('Add', y, h) if st == 1 and cin == c else h
            cin = c
            i += 1
    fs = size // 16
    # ASPP: a 1x1 branch, three depthwise-separable 3x3 branches (rates 6, 12, 18) and image pooling.
    br = [conv_bn(b, y, cin, ch, 1, 'aspp0')]
    for k, r in enumerate((6, 12, 18)):
        h = b.op('Relu', batchnorm(b, conv_d(b, y, cin, cin, f'aspp{k + 1}.dw', r, group=cin), cin, f'aspp{k + 1}.dw.bn'))
        br.append(conv_bn(b, h, cin, ch, 1, f'aspp{k + 1}.pw'))
    g = conv_bn(b, b.op('GlobalAveragePool', y), cin, ch, 1, 'aspp_pool')
    br.append(b.op('Resize', g, '', '', b.const([1, ch, fs, fs], np.int64), mode='linear',
                   coordinate_transformation_mode='half_pixel'))
    y = conv_bn(b, b.op('Concat', *br, axis=1), 5 * ch, ch, 1, 'aspp_proj')
    y = conv_bn(b, y, ch, ch, 3, 'head')
    y = conv(b, y, ch, classes, 1, 'classifier', pad=0, gain=1.0)
    b.op('Resize', y, '', '', b.const([1, classes, size, size], np.int64), mode='linear',
         coordinate_transformation_mode='half_pixel', out='out')
    b.output('out', FLOAT, [1, classes, size, size])
    return b.model(13, 'deeplabv3_mnv2')


def fast_style(rng, size=224):
    b = Builder('fast_style', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = lambda t: b.op('Resize', t, '', sc, mode='nearest', coordinate_transformation_mode='asymmetric', nearest_mode='floor')

    def layer(t, ci, co, k, name, stride=1, a='relu'):
        p = k // 2
        t = b.op('Pad', t, b.const([0, 0, p, p, 0, 0, p, p], np.int64), mode='reflect')
        t = conv(b, t, ci, co, k, name, stride=stride, pad=0)
        t = b.op('InstanceNormalization', t, b.weight(name + '.in.weight', f32(rng.uniform(0.8, 1.2, co))),
                 b.weight(name + '.in.bias', small(rng, co)), epsilon=1e-05)
        return act(b, t, a)
    y = layer(x, 3, 32, 9, 'conv1')
    y = layer(y, 32, 64, 3, 'conv2', 2)
    y = layer(y, 64, 128, 3, 'conv3', 2)
    for r in range(5):
        h = layer(layer(y, 128, 128, 3, f'res{r}.1'), 128, 128, 3, f'res{r}.2', a=None)
        y = b.op('Add', y, h)
    y = layer(up(y), 128, 64, 3, 'deconv1')
    y = layer(up(y), 64, 32, 3, 'deconv2')
    y = b.op('Pad', y, b.const([0, 0, 4, 4, 0, 0, 4, 4], np.int64), mode='reflect')
    w = he_normal(rng, (3, 32, 9, 9), 32 * 81, 1.0)
    b.op('Conv', y, b.weight('deconv3.weight', w), b.weight('deconv3.bias', small(rng, 3)), kernel_shape=[9, 9], out='output')
    b.output('output', FLOAT, [1, 3, size, size])
    return b.model(13, 'fast_style')


def group_norm(b, x, gamma, beta, groups=32):
    """GroupNorm as PyTorch exports it below opset 18: InstanceNormalization
    over [N, groups, -1], then Mul by gamma and Add beta ([C, 1, 1])."""
    t = b.op('Reshape', x, b.const([0, groups, -1], np.int64))
    t = b.op('InstanceNormalization', t, b.const(np.ones(groups, np.float32)), b.const(np.zeros(groups, np.float32)), epsilon=1e-05)
    return b.op('Add', b.op('Mul', b.op('Reshape', t, b.op('Shape', x)), gamma), beta)


def fcos_gn(rng, size=320, fpn=128, classes=80):
    b = Builder('fcos_gn', rng)
    x = b.input('images', FLOAT, [1, 3, size, size])
    y = conv_bn(b, x, 3, 32, 7, 'stem', stride=2)
    y = b.op('MaxPool', y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, feats = 32, []
    for s, (c, st) in enumerate([(32, 1), (64, 2), (128, 2), (256, 2)]):
        for j in range(2):
            stride = st if j == 0 else 1
            name = f'l{s}.{j}'
            h = conv_bn(b, conv_bn(b, y, cin, c, 3, name + '.c1', stride=stride), c, c, 3, name + '.c2', act=None)
            sc = y if stride == 1 and cin == c else conv_bn(b, y, cin, c, 1, name + '.down', stride=stride, act=None)
            y = b.op('Relu', b.op('Add', h, sc))
            cin = c
        if s:
            feats.append((y, c))
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = lambda t: b.op('Resize', t, '', sc, mode='nearest', coordinate_transformation_mode='asymmetric', nearest_mode='floor')
    lat = [conv(b, f, c, fpn, 1, f'fpn.lat{k}', pad=0, gain=1.0) for k, (f, c) in enumerate(feats)]
    t4 = b.op('Add', lat[1], up(lat[2]))
    t3 = b.op('Add', lat[0], up(t4))
    levels = [conv(b, t, fpn, fpn, 3, f'fpn.out{k}', gain=1.0) for k, t in enumerate((t3, t4, lat[2]))]

    # The head's weights are shared by the three levels.
    def shared_conv(name, co, gain=2.0):
        w = b.weight(name + '.weight', he_normal(rng, (co, fpn, 3, 3), fpn * 9, gain))
        bias = b.weight(name + '.bias', small(rng, co))
        return lambda t: b.op('Conv', t, w, bias, kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    def shared_tower(name):
        layers = [(shared_conv(f'{name}.{k}', fpn), b.weight(f'{name}.{k}.gn.weight', f32(rng.uniform(0.8, 1.2, (fpn, 1, 1)))),
                   b.weight(f'{name}.{k}.gn.bias', small(rng, (fpn, 1, 1)))) for k in range(4)]

        def tower(t):
            for cv, gamma, beta in layers:
                t = b.op('Relu', group_norm(b, cv(t), gamma, beta))
            return t
        return tower
    cls_tower, box_tower = shared_tower('cls_tower'), shared_tower('bbox_tower')
    cls_logits, bbox_pred, ctr = shared_conv('cls_logits', classes, 1.0), shared_conv('bbox_pred', 4, 1.0), shared_conv('centerness', 1, 1.0)
    flat = lambda t, c: b.op('Transpose', b.op('Reshape', t, b.const([1, c, -1], np.int64)), perm=[0, 2, 1])
    scores, boxes, cents = [], [], []
    for k, p in enumerate(levels):
        ct, bt = cls_tower(p), box_tower(p)
        scores.append(flat(b.op('Sigmoid', cls_logits(ct)), classes))
        reg = b.op('Mul', bbox_pred(bt), b.weight(f'scales.{k}', f32(1.0)))
        boxes.append(flat(b.op('Exp', reg), 4))
        cents.append(flat(b.op('Sigmoid', ctr(bt)), 1))
    n = sum((size // s) ** 2 for s in (8, 16, 32))
    for nm, outs, c in (('scores', scores, classes), ('boxes', boxes, 4), ('centerness', cents, 1)):
        b.op('Concat', *outs, axis=1, out=nm)
        b.output(nm, FLOAT, [1, n, c])
    return b.model(13, 'fcos_gn')


def mobilevit_xs(rng, size=256, heads=4, ps=2):
    b = Builder('mobilevit_xs', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    shape = lambda *s: b.const(list(s), np.int64)

    def mv2(t, ci, co, stride, name, e=4):
        h = cba(b, cba(b, t, ci, ci * e, 1, name + '.x'), ci * e, ci * e, 3, name + '.dw', stride, ci * e)
        h = conv_bn(b, h, ci * e, co, 1, name + '.p', act=None)
        return b.op('Add', t, h) if stride == 1 and ci == co else h

    def mvit(t, c, d, depth, hw, name):
        nh, hd = hw // ps, d // heads
        n, p = nh * nh, ps * ps
        h = conv(b, cba(b, t, c, c, 3, name + '.local'), c, d, 1, name + '.in', pad=0, bias=False, gain=1.0)
        # Unfold into 2x2 patches: [1, d, H, W] -> [4, N, d].
        h = b.op('Transpose', b.op('Reshape', h, shape(d * nh, ps, nh, ps)), perm=[0, 2, 1, 3])
        h = b.op('Reshape', b.op('Transpose', b.op('Reshape', h, shape(1, d, n, p)), perm=[0, 3, 2, 1]), shape(p, n, d))
        for l in range(depth):
            nm = f'{name}.t{l}'
            qkv = linear(b, ln_op(b, h, d, nm + '.ln1'), d, 3 * d, nm + '.qkv', 1.0)
            q, k, v = b.op('Split', qkv, b.const([d] * 3, np.int64), axis=-1, n_out=3)
            q, k, v = (b.op('Transpose', b.op('Reshape', z, shape(p, n, heads, hd)), perm=pm)
                       for z, pm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])))
            s = b.op('Softmax', b.op('MatMul', b.op('Mul', q, b.const(np.float32(hd ** -0.5))), k), axis=-1)
            o = b.op('Reshape', b.op('Transpose', b.op('MatMul', s, v), perm=[0, 2, 1, 3]), shape(p, n, d))
            h = b.op('Add', h, linear(b, o, d, d, nm + '.proj', 1.0))
            m = act(b, linear(b, ln_op(b, h, d, nm + '.ln2'), d, 2 * d, nm + '.fc1'), 'silu')
            h = b.op('Add', h, linear(b, m, 2 * d, d, nm + '.fc2', 1.0))
        h = ln_op(b, h, d, name + '.ln')
        # Fold back: [4, N, d] -> [1, d, H, W].
        h = b.op('Transpose', b.op('Reshape', h, shape(1, p, n, d)), perm=[0, 3, 2, 1])
        h = b.op('Transpose', b.op('Reshape', h, shape(d * nh, nh, ps, ps)), perm=[0, 2, 1, 3])
        h = cba(b, b.op('Reshape', h, shape(1, d, hw, hw)), d, c, 1, name + '.proj')
        return cba(b, b.op('Concat', t, h, axis=1), 2 * c, c, 3, name + '.fusion')
    y = cba(b, x, 3, 16, 3, 'stem', 2)
    y = mv2(y, 16, 32, 1, 'l1.0')
    y = mv2(mv2(mv2(y, 32, 48, 2, 'l2.0'), 48, 48, 1, 'l2.1'), 48, 48, 1, 'l2.2')
    cin, hw = 48, size // 4
    for s, (c, d, depth) in enumerate([(64, 96, 2), (80, 120, 4), (96, 144, 3)]):
        hw //= 2
        y = mvit(mv2(y, cin, c, 2, f'l{s + 3}.0'), c, d, depth, hw, f'l{s + 3}.1')
        cin = c
    y = cba(b, y, cin, 4 * cin, 1, 'exp')
    head(b, y, 4 * cin)
    return b.model(17, 'mobilevit_xs')


def swish(b, t):
    return b.op('Mul', t, b.op('Sigmoid', t))


def attention(b, y, seq, dim, heads, name, mask=None):
    """Multi-head self-attention with separate Q, K, V projections."""
    hd = dim // heads
    q = split_heads(b, linear(b, y, dim, dim, name + '.q', 1.0), seq, heads, hd, [0, 2, 1, 3])
    k = split_heads(b, linear(b, y, dim, dim, name + '.k', 1.0), seq, heads, hd, [0, 2, 3, 1])
    v = split_heads(b, linear(b, y, dim, dim, name + '.v', 1.0), seq, heads, hd, [0, 2, 1, 3])
    s = b.op('Mul', b.op('MatMul', q, k), b.const(np.float32(1.0 / np.sqrt(hd))))
    if mask is not None:
        s = b.op('Add', s, mask)
    c = merge_heads(b, b.op('MatMul', b.op('Softmax', s, axis=-1), v), seq, dim)
    return linear(b, c, dim, dim, name + '.o', 1.0)


def conformer(rng, frames=400, mels=80, dim=144, heads=4, layers=4, kernel=31, vocab=128):
    b = Builder('conformer_ctc', rng)
    x = b.input('features', FLOAT, [1, mels, frames])
    y = b.op('Unsqueeze', b.op('Transpose', x, perm=[0, 2, 1]), b.const([1], np.int64))
    y = b.op('Relu', conv(b, y, 1, dim, 3, 'sub.0', stride=2, pad=0))
    y = b.op('Relu', conv(b, y, dim, dim, 3, 'sub.1', stride=2, pad=0))
    t, f = ((frames - 3) // 2 - 1) // 2 + 1, ((mels - 3) // 2 - 1) // 2 + 1
    y = b.op('Reshape', b.op('Transpose', y, perm=[0, 2, 1, 3]), b.const([1, t, dim * f], np.int64))
    y = linear(b, y, dim * f, dim, 'sub.out', 1.0)

    def ffn(y, name):
        h = linear(b, swish(b, linear(b, ln_op(b, y, dim, name + '.ln'), dim, 4 * dim, name + '.w1')), 4 * dim, dim,
                   name + '.w2', 1.0)
        return b.op('Add', y, b.op('Mul', h, b.const(np.float32(0.5))))
    for l in range(layers):
        n = f'l{l}'
        y = ffn(y, n + '.ff1')
        y = b.op('Add', y, attention(b, ln_op(b, y, dim, n + '.ln_att'), t, dim, heads, n + '.att'))
        # The convolution module: pointwise to 2C, GLU, depthwise 1-D, BN, Swish, pointwise.
        h = b.op('Transpose', ln_op(b, y, dim, n + '.ln_conv'), perm=[0, 2, 1])
        h = conv(b, h, dim, 2 * dim, (1,), n + '.pw1', pad=0, gain=1.0)
        a, g = b.op('Split', h, b.const([dim, dim], np.int64), axis=1, n_out=2)
        h = b.op('Mul', a, b.op('Sigmoid', g))
        h = conv(b, h, dim, dim, (kernel,), n + '.dw', group=dim, gain=1.0)
        h = swish(b, batchnorm(b, h, dim, n + '.bn'))
        h = conv(b, h, dim, dim, (1,), n + '.pw2', pad=0, gain=1.0)
        y = b.op('Add', y, b.op('Transpose', h, perm=[0, 2, 1]))
        y = ffn(y, n + '.ff2')
        y = ln_op(b, y, dim, n + '.ln_out')
    b.op('LogSoftmax', linear(b, y, dim, vocab, 'ctc', 1.0), axis=-1, out='log_probs')
    b.output('log_probs', FLOAT, [1, t, vocab])
    return b.model(17, 'conformer')


def whisper_enc(rng, frames=1500, mels=80, dim=384, heads=6, layers=2):
    b = Builder('whisper_enc', rng)
    x = b.input('mel', FLOAT, [1, mels, frames])
    y = gelu_erf(b, conv(b, x, mels, dim, (3,), 'conv1', gain=1.0))
    y = gelu_erf(b, conv(b, y, dim, dim, (3,), 'conv2', stride=2, gain=1.0))
    t = frames // 2
    y = b.op('Add', b.op('Transpose', y, perm=[0, 2, 1]), b.weight('pos', small(rng, (t, dim), 0.3)))
    for l in range(layers):
        n = f'l{l}'
        y = b.op('Add', y, attention(b, ln_op(b, y, dim, n + '.ln1'), t, dim, heads, n + '.att'))
        h = linear(b, gelu_erf(b, linear(b, ln_op(b, y, dim, n + '.ln2'), dim, 4 * dim, n + '.fc1')), 4 * dim, dim,
                   n + '.fc2', 1.0)
        y = b.op('Add', y, h)
    ln_op(b, y, dim, 'ln_post', out='last_hidden_state')
    b.output('last_hidden_state', FLOAT, [1, t, dim])
    return b.model(17, 'whisper')


def llama_tiny(rng, seq=64, vocab=4000, dim=256, heads=4, ffn=688, layers=4):
    b = Builder('llama_tiny', rng)
    ids = b.input('input_ids', INT64, [1, seq])
    hd = dim // heads
    y = b.op('Gather', b.weight('embed', small(rng, (vocab, dim), 0.5)), ids, axis=0)
    inv = 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd))
    ang = np.outer(np.arange(seq), inv)
    ang = np.concatenate([ang, ang], axis=1)
    cos, sin = b.const(f32(np.cos(ang))), b.const(f32(np.sin(ang)))
    mask = b.const(f32(np.triu(np.full((seq, seq), np.finfo(np.float32).min), 1)))
    half_a, half_b = b.const([0], np.int64), b.const([hd // 2], np.int64)
    end, ax = b.const([hd], np.int64), b.const([-1], np.int64)

    def rms(t, name):
        v = b.op('ReduceMean', b.op('Pow', t, b.const(np.float32(2.0))), axes=[-1], keepdims=1)
        r = b.op('Reciprocal', b.op('Sqrt', b.op('Add', v, b.const(np.float32(1e-6)))))
        return b.op('Mul', b.weight(name, f32(rng.uniform(0.8, 1.2, dim))), b.op('Mul', t, r))

    def rope(t):
        x1 = b.op('Slice', t, half_a, half_b, ax)
        x2 = b.op('Slice', t, half_b, end, ax)
        rot = b.op('Concat', b.op('Neg', x2), x1, axis=-1)
        return b.op('Add', b.op('Mul', t, cos), b.op('Mul', rot, sin))

    def proj(t, din, dout, name):
        return b.op('MatMul', t, b.weight(name, he_normal(rng, (din, dout), din, 1.0)))
    for l in range(layers):
        n = f'l{l}'
        h = rms(y, n + '.in_norm')
        q = rope(split_heads(b, proj(h, dim, dim, n + '.q'), seq, heads, hd, [0, 2, 1, 3]))
        k = rope(split_heads(b, proj(h, dim, dim, n + '.k'), seq, heads, hd, [0, 2, 1, 3]))
        v = split_heads(b, proj(h, dim, dim, n + '.v'), seq, heads, hd, [0, 2, 1, 3])
        s = b.op('Div', b.op('MatMul', q, b.op('Transpose', k, perm=[0, 1, 3, 2])), b.const(np.float32(np.sqrt(hd))))
        c = merge_heads(b, b.op('MatMul', b.op('Softmax', b.op('Add', s, mask), axis=-1), v), seq, dim)
        y = b.op('Add', y, proj(c, dim, dim, n + '.o'))
        h = rms(y, n + '.post_norm')
        g = proj(h, dim, ffn, n + '.gate')
        h = b.op('Mul', swish(b, g), proj(h, dim, ffn, n + '.up'))
        y = b.op('Add', y, proj(h, ffn, dim, n + '.down'))
    y = rms(y, 'norm')
    b.op('MatMul', y, b.weight('lm_head', he_normal(rng, (dim, vocab), dim, 1.0)), out='logits')
    b.output('logits', FLOAT, [1, seq, vocab])
    return b.model(14, 'llama')


def yolov5n(rng, size=640, classes=80):
    b = Builder('yolov5n', rng)
    x = b.input('images', FLOAT, [1, 3, size, size])

    def c3(x, cin, cout, n, name, short=True):
        h = cout // 2
        a = cba(b, x, cin, h, 1, name + '.cv1')
        for k in range(n):
            t = cba(b, cba(b, a, h, h, 1, f'{name}.m{k}.1'), h, h, 3, f'{name}.m{k}.2')
            a = b.op('Add', a, t) if short else t
        return cba(b, b.op('Concat', a, cba(b, x, cin, h, 1, name + '.cv2'), axis=1), cout, cout, 1, name + '.cv3')
    # The 6x6/2 stem with padding 2, as YOLOv5 v6 has it.
    y = swish(b, batchnorm(b, conv(b, x, 3, 16, 6, 'c0', stride=2, pad=2, bias=False), 16, 'c0.bn'))
    y = c3(cba(b, y, 16, 32, 3, 'c1', 2), 32, 32, 1, 'c2')
    p3 = c3(cba(b, y, 32, 64, 3, 'c3', 2), 64, 64, 2, 'c4')
    p4 = c3(cba(b, p3, 64, 128, 3, 'c5', 2), 128, 128, 3, 'c6')
    y = c3(cba(b, p4, 128, 256, 3, 'c7', 2), 256, 256, 1, 'c8')
    y = sppf(b, y)
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = lambda t: b.op('Resize', t, '', sc, mode='nearest')
    h10 = cba(b, y, 256, 128, 1, 'c10')
    h13 = c3(b.op('Concat', up(h10), p4, axis=1), 256, 128, 1, 'c13', False)
    h14 = cba(b, h13, 128, 64, 1, 'c14')
    o3 = c3(b.op('Concat', up(h14), p3, axis=1), 128, 64, 1, 'c17', False)
    o4 = c3(b.op('Concat', cba(b, o3, 64, 64, 3, 'c18', 2), h14, axis=1), 128, 128, 1, 'c20', False)
    o5 = c3(b.op('Concat', cba(b, o4, 128, 128, 3, 'c21', 2), h10, axis=1), 256, 256, 1, 'c23', False)
    no, outs = classes + 5, []
    anchors = [[(10, 13), (16, 30), (33, 23)], [(30, 61), (62, 45), (59, 119)], [(116, 90), (156, 198), (373, 326)]]
    for i, (t, c, s) in enumerate([(o3, 64, 8), (o4, 128, 16), (o5, 256, 32)]):
        g = size // s
        p = conv(b, t, c, 3 * no, 1, f'det{i}', pad=0, gain=0.5)
        p = b.op('Sigmoid', b.op('Transpose', b.op('Reshape', p, b.const([1, 3, no, g, g], np.int64)), perm=[0, 1, 3, 4, 2]))
        xy, wh, conf = b.op('Split', p, b.const([2, 2, no - 4], np.int64), axis=4, n_out=3)
        gy, gx = np.meshgrid(np.arange(g), np.arange(g), indexing='ij')
        grid = f32(np.stack([gx, gy], -1).reshape(1, 1, g, g, 2) - 0.5)
        xy = b.op('Mul', b.op('Add', b.op('Mul', xy, b.const(np.float32(2.0))), b.const(grid)), b.const(np.float32(s)))
        ag = f32(np.array(anchors[i], np.float32).reshape(1, 3, 1, 1, 2))
        wh = b.op('Mul', b.op('Pow', b.op('Mul', wh, b.const(np.float32(2.0))), b.const(np.float32(2.0))), b.const(ag))
        outs.append(b.op('Reshape', b.op('Concat', xy, wh, conf, axis=4), b.const([1, -1, no], np.int64)))
    b.op('Concat', *outs, axis=1, out='output0')
    b.output('output0', FLOAT, [1, 3 * sum((size // s) ** 2 for s in (8, 16, 32)), no])
    return b.model(13, 'yolov5n')


def espcn(rng, size=224, scale=3):
    b = Builder('espcn_sr', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    y = b.op('Tanh', conv(b, x, 3, 64, 5, 'c1', gain=1.0))
    y = b.op('Tanh', conv(b, y, 64, 32, 3, 'c2', gain=1.0))
    y = conv(b, y, 32, 3 * scale * scale, 3, 'c3', gain=1.0)
    y = b.op('DepthToSpace', y, blocksize=scale, mode='CRD')
    b.op('Clip', y, b.const(np.float32(0.0)), b.const(np.float32(1.0)), out='output')
    b.output('output', FLOAT, [1, 3, size * scale, size * scale])
    return b.model(13, 'espcn')


def blazeface(rng, size=128):
    b = Builder('blazeface', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    y = b.op('Relu', conv(b, x, 3, 24, 5, 'stem', stride=2, pad=2))

    def block(y, cin, cout, stride, name):
        h = conv(b, y, cin, cin, 5, name + '.dw', stride=stride, pad=2, group=cin, gain=1.0)
        h = conv(b, h, cin, cout, 1, name + '.pw', pad=0, gain=1.0)
        if stride == 2:
            y = b.op('MaxPool', y, kernel_shape=[2, 2], strides=[2, 2])
        if cout > cin:
            # The shortcut's missing channels as zeros: Pad on the channel axis.
            y = b.op('Pad', y, b.const([0, 0, 0, 0, 0, cout - cin, 0, 0], np.int64))
        return b.op('Relu', b.op('Add', h, y))
    cin = 24
    for i, (c, s) in enumerate([(24, 1), (28, 1), (32, 2), (36, 1), (42, 1), (48, 2), (56, 1), (64, 1),
                                (72, 1), (80, 1), (88, 1)]):
        y = block(y, cin, c, s, f'b{i}')
        cin = c
    f16 = y
    for i, (c, s) in enumerate([(96, 2), (96, 1), (96, 1), (96, 1), (96, 1)]):
        y = block(y, cin, c, s, f'c{i}')
        cin = c
    outs_r, outs_c = [], []
    for k, (f, c, a) in enumerate([(f16, 88, 2), (y, 96, 6)]):
        r = conv(b, f, c, a * 16, 1, f'reg{k}', pad=0, gain=0.5)
        cl = conv(b, f, c, a, 1, f'cls{k}', pad=0, gain=0.5)
        outs_r.append(b.op('Reshape', b.op('Transpose', r, perm=[0, 2, 3, 1]), b.const([1, -1, 16], np.int64)))
        outs_c.append(b.op('Reshape', b.op('Transpose', cl, perm=[0, 2, 3, 1]), b.const([1, -1, 1], np.int64)))
    b.op('Concat', *outs_r, axis=1, out='regressors')
    b.op('Sigmoid', b.op('Concat', *outs_c, axis=1), out='classificators')
    n = 2 * (size // 8) ** 2 + 6 * (size // 16) ** 2
    b.output('regressors', FLOAT, [1, n, 16])
    b.output('classificators', FLOAT, [1, n, 1])
    return b.model(13, 'blazeface')


def nanodet(rng, size=320, classes=80, reg_max=7):
    b = Builder('nanodet', rng)
    x = b.input('data', FLOAT, [1, 3, size, size])
    y = conv_bn(b, x, 3, 24, 3, 'stem', stride=2)
    y = b.op('MaxPool', y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

    def shuffle(t, c, hw):
        t = b.op('Reshape', t, b.const([1, 2, c // 2, hw, hw], np.int64))
        return b.op('Reshape', b.op('Transpose', t, perm=[0, 2, 1, 3, 4]), b.const([1, c, hw, hw], np.int64))

    def unit(y, cin, cout, stride, hw, name):
        br = cout // 2
        if stride == 1:
            a, t = b.op('Split', y, b.const([cin // 2, cin // 2], np.int64), axis=1, n_out=2)
            cin = cin // 2
        else:
            a = conv_bn(b, conv_bn(b, y, cin, cin, 3, name + '.l.dw', stride=2, group=cin, act=None), cin, br, 1,
                        name + '.l.pw')
            t = y
        t = conv_bn(b, t, cin, br, 1, name + '.r.pw1')
        t = conv_bn(b, t, br, br, 3, name + '.r.dw', stride=stride, group=br, act=None)
        t = conv_bn(b, t, br, br, 1, name + '.r.pw2')
        return shuffle(b.op('Concat', a, t, axis=1), cout, hw)
    cin, hw, feats = 24, size // 4, []
    for s, (c, n) in enumerate([(116, 4), (232, 8), (464, 4)]):
        hw //= 2
        for k in range(n):
            y = unit(y, cin, c, 2 if k == 0 else 1, hw, f's{s}.{k}')
            cin = c
        feats.append((y, c, hw))
    lat = [conv_bn(b, f, c, 96, 1, f'lat{k}', act=None) for k, (f, c, _) in enumerate(feats)]
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = lambda t: b.op('Resize', t, '', sc, mode='linear')
    p4 = b.op('Add', lat[1], up(lat[2]))
    p3 = b.op('Add', lat[0], up(p4))
    outs = []
    for k, p in enumerate((p3, p4, lat[2])):
        h = conv_bn(b, conv_bn(b, p, 96, 96, 3, f'h{k}.dw', group=96, act='relu'), 96, 96, 1, f'h{k}.pw')
        h = conv(b, h, 96, classes + 4 * (reg_max + 1), 1, f'h{k}.out', pad=0, gain=0.5)
        outs.append(b.op('Reshape', h, b.const([1, classes + 4 * (reg_max + 1), -1], np.int64)))
    y = b.op('Transpose', b.op('Concat', *outs, axis=2), perm=[0, 2, 1])
    cl, reg = b.op('Split', y, b.const([classes, 4 * (reg_max + 1)], np.int64), axis=2, n_out=2)
    # The GFL integral: a softmax over each side's reg_max + 1 bins, times 0..reg_max.
    reg = b.op('Softmax', b.op('Reshape', reg, b.const([1, -1, 4, reg_max + 1], np.int64)), axis=-1)
    reg = b.op('MatMul', reg, b.const(np.arange(reg_max + 1, dtype=np.float32).reshape(reg_max + 1, 1)))
    b.op('Concat', b.op('Sigmoid', cl), b.op('Reshape', reg, b.const([1, -1, 4], np.int64)), axis=2, out='output')
    n = sum((size // s) ** 2 for s in (8, 16, 32))
    b.output('output', FLOAT, [1, n, classes + 4])
    return b.model(13, 'nanodet')


def swin_lite(rng, size=224, dim=64, window=7, heads=(2, 4), depths=(2, 2)):
    """Swin-style windows: shifted by Slice + Concat (torch.roll's export),
    partitioned by 6-D Reshape / Transpose."""
    b = Builder('swin_lite', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    y = conv(b, x, 3, dim, 4, 'patch', stride=4, pad=0, gain=1.0)
    hw = size // 4
    y = b.op('Transpose', b.op('Reshape', y, b.const([1, dim, hw * hw], np.int64)), perm=[0, 2, 1])
    y = ln_op(b, y, dim, 'patch.ln')
    c = dim

    def roll(t, sh, hw):
        # torch.roll(t, (sh, sh), (1, 2)) on [1, hw, hw, c].
        for ax in (1, 2):
            a = b.op('Slice', t, b.const([hw - sh], np.int64), b.const([hw], np.int64), b.const([ax], np.int64))
            r = b.op('Slice', t, b.const([0], np.int64), b.const([hw - sh], np.int64), b.const([ax], np.int64))
            t = b.op('Concat', a, r, axis=ax)
        return t
    for s, (nh, depth) in enumerate(zip(heads, depths)):
        nw, n = hw // window, window * window
        for k in range(depth):
            name = f's{s}.{k}'
            h = b.op('Reshape', ln_op(b, y, c, name + '.ln1'), b.const([1, hw, hw, c], np.int64))
            if k % 2:
                h = roll(h, hw - window // 2, hw)
            h = b.op('Reshape', h, b.const([1, nw, window, nw, window, c], np.int64))
            h = b.op('Reshape', b.op('Transpose', h, perm=[0, 1, 3, 2, 4, 5]), b.const([nw * nw, n, c], np.int64))
            hd = c // nh
            qkv = linear(b, h, c, 3 * c, name + '.qkv', 1.0)
            qkv = b.op('Transpose', b.op('Reshape', qkv, b.const([nw * nw, n, 3, nh, hd], np.int64)), perm=[2, 0, 3, 1, 4])
            q, kk, v = b.op('Split', qkv, b.const([1, 1, 1], np.int64), axis=0, n_out=3)
            sq = b.const([0], np.int64)
            q, kk, v = b.op('Squeeze', q, sq), b.op('Squeeze', kk, sq), b.op('Squeeze', v, sq)
            att = b.op('MatMul', b.op('Mul', q, b.const(np.float32(hd ** -0.5))), b.op('Transpose', kk, perm=[0, 1, 3, 2]))
            att = b.op('Add', att, b.weight(name + '.bias', small(rng, (1, nh, n, n), 0.5)))
            o = b.op('MatMul', b.op('Softmax', att, axis=-1), v)
            o = b.op('Reshape', b.op('Transpose', o, perm=[0, 2, 1, 3]), b.const([nw * nw, n, c], np.int64))
            o = linear(b, o, c, c, name + '.proj', 1.0)
            o = b.op('Reshape', o, b.const([1, nw, nw, window, window, c], np.int64))
            o = b.op('Reshape', b.op('Transpose', o, perm=[0, 1, 3, 2, 4, 5]), b.const([1, hw, hw, c], np.int64))
            if k % 2:
                o = roll(o, window // 2, hw)
            y = b.op('Add', y, b.op('Reshape', o, b.const([1, hw * hw, c], np.int64)))
            m = linear(b, gelu_erf(b, linear(b, ln_op(b, y, c, name + '.ln2'), c, 4 * c, name + '.fc1')), 4 * c, c,
                       name + '.fc2', 1.0)
            y = b.op('Add', y, m)
        if s + 1 < len(heads):
            # Patch merging: the 2x2 neighbours' channels side by side, LayerNorm, Linear to 2C.
            t = b.op('Reshape', y, b.const([1, hw // 2, 2, hw // 2, 2, c], np.int64))
            t = b.op('Reshape', b.op('Transpose', t, perm=[0, 1, 3, 4, 2, 5]), b.const([1, hw * hw // 4, 4 * c], np.int64))
            y = b.op('MatMul', ln_op(b, t, 4 * c, f'merge{s}.ln'), b.weight(f'merge{s}.w', he_normal(rng, (4 * c, 2 * c), 4 * c, 1.0)))
            hw //= 2
            c *= 2
    y = b.op('ReduceMean', ln_op(b, y, c, 'norm'), axes=[1], keepdims=0)
    w = f32(rng.standard_normal((1000, c)) * np.sqrt(1.0 / c))
    b.op('Gemm', y, b.weight('fc.w', w), b.weight('fc.b', small(rng, 1000)), transB=1, out='logits')
    b.output('logits', FLOAT, [1, 1000])
    return b.model(17, 'swin')


def rrdb_sr(rng, size=128, nf=32, gc=16, blocks=2):
    """An ESRGAN-style generator, scaled down: residual-in-residual dense
    blocks (LeakyRelu 0.2, dense Concats), two nearest 2x upsamplings."""
    b = Builder('rrdb_sr', rng)
    x = b.input('input', FLOAT, [1, 3, size, size])
    lrelu = lambda t: b.op('LeakyRelu', t, alpha=0.2)
    fea = conv(b, x, 3, nf, 3, 'first', gain=1.0)
    y = fea
    for i in range(blocks):
        r0 = y
        for j in range(3):
            feats, r = [y], y
            for k in range(4):
                feats.append(lrelu(conv(b, b.op('Concat', *feats, axis=1) if len(feats) > 1 else feats[0],
                                        nf + k * gc, gc, 3, f'b{i}.{j}.c{k}', gain=1.0)))
            o = conv(b, b.op('Concat', *feats, axis=1), nf + 4 * gc, nf, 3, f'b{i}.{j}.c4', gain=0.5)
            y = b.op('Add', b.op('Mul', o, b.const(np.float32(0.2))), r)
        y = b.op('Add', b.op('Mul', y, b.const(np.float32(0.2))), r0)
    y = b.op('Add', fea, conv(b, y, nf, nf, 3, 'trunk', gain=1.0))
    sc = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    for u in range(2):
        y = lrelu(conv(b, b.op('Resize', y, '', sc, mode='nearest'), nf, nf, 3, f'up{u}', gain=1.0))
    y = conv(b, lrelu(conv(b, y, nf, nf, 3, 'hr', gain=1.0)), nf, 3, 3, 'last', gain=1.0, )
    b.op('Identity', y, out='output')
    b.output('output', FLOAT, [1, 3, 4 * size, 4 * size])
    return b.model(13, 'rrdb')


MODELS = (("effnet_b0", effnet), ("mnv3_large", mnv3), ("yolov8n_640", yolov8n), ("vit_tiny6", vit),
          ("unet_256", unet), ("convnext_atto", convnext), ("crnn_lstm", crnn), ("kws_tcn", kws),
          ("bert_mini", bert), ("gpt2_tiny", gpt2), ("resnext_lite", resnext), ("vad_gru", vad_gru),
          ("ssdlite_face", ssdlite_face), ("mobilefacenet", mobilefacenet), ("deeplabv3_mnv2", deeplabv3),
          ("fast_style", fast_style), ("fcos_gn", fcos_gn), ("mobilevit_xs", mobilevit_xs),
          ("conformer_ctc", conformer), ("whisper_enc", whisper_enc), ("llama_tiny", llama_tiny),
          ("yolov5n_640", yolov5n), ("espcn_sr", espcn),
          ("blazeface", blazeface), ("nanodet", nanodet), ("swin_lite", swin_lite), ("rrdb_sr", rrdb_sr))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    write_models(args.out, MODELS, 3)


if __name__ == "__main__":
    main()
