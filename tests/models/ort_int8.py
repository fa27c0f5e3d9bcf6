"""When onnxruntime's int8 results can judge edgerun's.

onnxruntime's x86 kernels for uint8 activations x int8 weights (QLinearConv,
QLinearMatMul, MatMulInteger and ConvInteger with int8 weights, the QDQ
patterns it fuses into them, DynamicQuantizeLSTM) multiply with `vpmaddubsw`
on CPUs without VNNI (AVX2, AVX-512 without VNNI), which adds pairs of
products in saturating int16: 255 * 127 * 2 = 64770 > 32767, so sums clip.
onnxruntime's quantization guide says so and advises `reduce_range` (7-bit
weights) or uint8 weights on such CPUs. On a Zen 3 EPYC without VNNI
(2026-12-02), onnxruntime 1.32.0 ran the digits CNN's QDQ model at 96.39%
top-1 fused against 96.94% with its QDQ fusion off (the model as written,
and edgerun's figure); the two onnxruntime runs agreed on 98.3% of images.

edgerun computes these products exactly (int32), so on such CPUs the tests
compare it with onnxruntime configured to be exact: QDQ models run with
onnxruntime's QDQ fusion off, models onnxruntime's quantizers write use
reduce_range, and hand-built int8 weights stay within 7 bits.
"""
import os
import platform


def saturates():
    """True when onnxruntime's u8 x s8 kernels saturate on this CPU: an x86
    CPU without AVX512-VNNI or AVX-VNNI."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return not ({"avx512_vnni", "avx_vnni"} & flags)
    except OSError:
        pass
    return True


SATURATES = saturates()
NOTE = ("this CPU has no VNNI: onnxruntime's u8 x s8 kernels saturate int16 pair sums "
        "(tests/models/ort_int8.py), so onnxruntime runs exactly here")


def qdq_session_options(options):
    """Turns off onnxruntime's QDQ fusion where its fused kernels saturate:
    the QDQ model then runs as written (DequantizeLinear -> float op ->
    QuantizeLinear), which is the model's meaning."""
    if SATURATES:
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    return options


def weight_limit():
    """The largest magnitude of hand-built int8 weights onnxruntime computes
    exactly on this CPU."""
    return 63 if SATURATES else 127


def explain():
    return NOTE if SATURATES else ""


if __name__ == "__main__":
    print("saturates" if SATURATES else "exact", os.uname().machine)
