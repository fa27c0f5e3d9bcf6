"""Graph-building helpers for the generated test models (gen_models.py)
and the scripts that build on them (bench/gen_extra_models.py, the
quantizer's tests): a Builder of nodes, initializers, inputs and outputs;
weight initializers; single-node onnxruntime runs; and the int8 helpers
of the QDQ models.
"""

import itertools

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
INT32 = TensorProto.INT32
BOOL = TensorProto.BOOL
UINT8 = TensorProto.UINT8

INT64_MIN = np.iinfo(np.int64).min


# ---------------------------------------------------------------------------
# Graph building helpers
# ---------------------------------------------------------------------------


class Builder:
    """Accumulates the nodes, initializers, inputs and outputs of one graph.

    Weights are stored either as graph initializers (weights="initializer")
    or as Constant nodes (weights="constant"), which lets different models
    exercise both ways exporters store parameters.  Small structural
    constants (shapes, axes, scalars) always become Constant nodes, as
    PyTorch's exporter emits them.  Subgraphs created with subgraph() share
    the name counter of their parent so that every value name in the model
    is unique, which keeps outer-scope references unambiguous.
    """

    def __init__(self, name, rng, weights="initializer", counter=None):
        assert weights in ("initializer", "constant")
        self.name = name
        self.rng = rng
        self.weights = weights
        self.nodes = []
        self.initializers = []
        self.inputs = []
        self.outputs = []
        self._counter = counter if counter is not None else itertools.count()

    def subgraph(self, name, weights="constant"):
        """Returns a builder for a control-flow body that shares our names."""
        return Builder(name, self.rng, weights=weights, counter=self._counter)

    def fresh(self, prefix):
        """Returns a new value or node name that is unique in the model."""
        return f"{prefix}_{next(self._counter)}"

    def input(self, name, elem_type, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, name, elem_type, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def tensor(self, name, array, as_node):
        """Adds a named constant tensor, as a Constant node or an initializer."""
        array = np.asarray(array)
        proto = numpy_helper.from_array(array, name)
        if as_node:
            self.nodes.append(
                helper.make_node("Constant", [], [name], name=f"{name}/Constant", value=proto)
            )
        else:
            self.initializers.append(proto)
        return name

    def weight(self, name, array):
        """Adds a learned parameter, stored according to this builder's mode."""
        return self.tensor(name, array, as_node=self.weights == "constant")

    def const(self, array, dtype=None, prefix="const"):
        """Adds a small structural constant (shape, axes, scalar) as a Constant node."""
        array = np.asarray(array, dtype=dtype)
        return self.tensor(self.fresh(prefix), array, as_node=True)

    def op(self, op_type, *inputs, out=None, n_out=1, **attrs):
        """Appends one node and returns its output name (or list of names).

        `out` names the output(s) explicitly; otherwise fresh names are
        generated.  Empty strings in `inputs` mark omitted optional inputs.
        """
        if out is None:
            outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        elif isinstance(out, str):
            outs = [out]
        else:
            outs = list(out)
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outs, name=self.fresh(op_type), **attrs)
        )
        return outs[0] if len(outs) == 1 else outs

    def graph(self):
        return helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers
        )

    def model(self, opset, doc):
        """Wraps the graph in a model with the smallest IR version the opset allows."""
        opsets = [helper.make_opsetid("", opset)]
        model = helper.make_model(
            self.graph(),
            opset_imports=opsets,
            producer_name="edgerun-gen_models",
            producer_version="1",
            doc_string=doc,
        )
        model.ir_version = helper.find_min_ir_version_for(opsets)
        return model


def f32(array):
    return np.asarray(array, dtype=np.float32)


def he_normal(rng, shape, fan_in, gain=2.0):
    """Normal weights with variance gain/fan_in (He init for gain=2)."""
    return f32(rng.standard_normal(shape) * np.sqrt(gain / fan_in))


def small(rng, shape, scale=0.05):
    """Small normal values, used for biases and BatchNorm shifts."""
    return f32(rng.standard_normal(shape) * scale)


def conv(b, x, cin, cout, kernel, prefix, stride=1, pad=None, group=1, bias=True, gain=2.0):
    """Adds a Conv node with He-initialized weights.

    `kernel`, `stride` and `pad` may be ints or tuples; the number of
    spatial dimensions is taken from `kernel` (an int means 2-D).
    """
    ks = tuple(kernel) if isinstance(kernel, (tuple, list)) else (kernel, kernel)
    dims = len(ks)
    st = tuple(stride) if isinstance(stride, (tuple, list)) else (stride,) * dims
    if pad is None:
        pad = tuple(k // 2 for k in ks)
    elif not isinstance(pad, (tuple, list)):
        pad = (pad,) * dims
    fan_in = (cin // group) * int(np.prod(ks))
    w = he_normal(b.rng, (cout, cin // group) + ks, fan_in, gain)
    inputs = [x, b.weight(f"{prefix}.weight", w)]
    if bias:
        inputs.append(b.weight(f"{prefix}.bias", small(b.rng, cout)))
    return b.op(
        "Conv", *inputs,
        kernel_shape=list(ks), strides=list(st), pads=list(pad) * 2,
        dilations=[1] * dims, group=group,
    )


def batchnorm(b, x, c, prefix, gamma=1.0):
    """Adds an inference-mode BatchNormalization with plausible running stats."""
    rng = b.rng
    scale = f32(gamma * rng.uniform(0.8, 1.2, c))
    shift = small(rng, c, 0.1)
    mean = small(rng, c, 0.1)
    var = f32(rng.uniform(0.7, 1.3, c))
    return b.op(
        "BatchNormalization", x,
        b.weight(f"{prefix}.weight", scale), b.weight(f"{prefix}.bias", shift),
        b.weight(f"{prefix}.running_mean", mean), b.weight(f"{prefix}.running_var", var),
        epsilon=1e-5,
    )


def linear(b, x, din, dout, prefix, gain=2.0, out=None):
    """Adds MatMul + Add with a [din, dout] weight, as exporters emit nn.Linear."""
    w = he_normal(b.rng, (din, dout), din, gain)
    y = b.op("MatMul", x, b.weight(f"{prefix}.weight", w))
    return b.op("Add", y, b.weight(f"{prefix}.bias", small(b.rng, dout)), out=out)


def rnn_weights(rng, gates, num_dir, hidden, input_size):
    """PyTorch-style U(-1/sqrt(H), 1/sqrt(H)) weights for LSTM/GRU/RNN ops."""
    k = 1.0 / np.sqrt(hidden)
    w = f32(rng.uniform(-k, k, (num_dir, gates * hidden, input_size)))
    r = f32(rng.uniform(-k, k, (num_dir, gates * hidden, hidden)))
    bias = f32(rng.uniform(-k, k, (num_dir, 2 * gates * hidden)))
    return w, r, bias


def normal_input(rng, shape, scale=1.0):
    return f32(rng.standard_normal(shape) * scale)


# ---------------------------------------------------------------------------
# onnxruntime helpers
# ---------------------------------------------------------------------------


def make_session(model):
    """Creates a deterministic CPU session that runs the graph as written."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def run_single_node(op_type, inputs, opset=13, **attrs):
    """Runs one float op in onnxruntime; used to calibrate quantized models."""
    names = [f"in{i}" for i in range(len(inputs))]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["out"], **attrs)],
        "single",
        [helper.make_tensor_value_info(n, FLOAT, list(a.shape)) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("out", FLOAT, None)],
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets)
    return make_session(model).run(None, dict(zip(names, inputs)))[0]


def probe(model, names, feeds):
    """Returns intermediate float tensors of `model` by exposing them as outputs."""
    probed = onnx.ModelProto()
    probed.CopyFrom(model)
    del probed.graph.output[:]
    for name in names:
        probed.graph.output.append(helper.make_tensor_value_info(name, FLOAT, None))
    return make_session(probed).run(None, feeds)


def tie_margin(values, scale, zero_point):
    """Smallest distance, in quantization steps, from values/scale to a
    rounding tie (k + 0.5), ignoring values that saturate anyway."""
    q = np.asarray(values, np.float64) / np.float64(scale)
    inside = (q + zero_point > -0.5) & (q + zero_point < 255.5)
    if not np.any(inside):
        return 0.5
    return float(np.min(np.abs(q[inside] - np.floor(q[inside]) - 0.5)))


def asym_qparams(values, tries=64):
    """uint8 scale/zero point covering [min(values,0), max(values,0)].

    The exact min/max scale is widened by up to 6.4% to the candidate that
    keeps every value/scale farthest from a rounding tie.  A value that sits
    within float rounding error of k + 0.5 could round either way in a
    runtime that sums in a different order; avoiding such values keeps the
    reference outputs of the quantized models robust against legitimate
    implementation differences.
    """
    lo = min(float(np.min(values)), 0.0)
    hi = max(float(np.max(values)), 0.0)
    base = max(hi - lo, 1e-6) / 255.0
    best = None
    for k in range(tries):
        scale = np.float32(base * (1.0 + 0.001 * k))
        zero_point = int(np.clip(np.rint(-lo / scale), 0, 255))
        margin = tie_margin(values, scale, zero_point)
        if best is None or margin > best[0]:
            best = (margin, scale, zero_point)
    return best[1], np.uint8(best[2])


def calibrate(values, name):
    """asym_qparams for an activation, checked to keep clear of rounding ties."""
    scale, zero_point = asym_qparams(values)
    margin = tie_margin(values, scale, zero_point)
    if margin < 1e-4:
        raise ValueError(f"{name}: a value is within {margin:.1e} steps of a rounding tie")
    return scale, zero_point


def quantize_u8(x, scale, zero_point):
    """Numpy QuantizeLinear to uint8 (round half to even, saturate)."""
    return np.clip(np.rint(x / scale) + int(zero_point), 0, 255).astype(np.uint8)


def quantize_per_channel_s8(w, qmax=127):
    """Symmetric per-output-channel int8 quantization along axis 0, to
    [-qmax, qmax]."""
    absmax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    scale = f32(np.maximum(absmax, 1e-8) / float(qmax))
    shape = (-1,) + (1,) * (w.ndim - 1)
    q = np.clip(np.rint(w / scale.reshape(shape)), -qmax, qmax).astype(np.int8)
    return q, scale
