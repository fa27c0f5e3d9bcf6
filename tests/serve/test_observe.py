"""Observability and device care over real HTTP: /metrics parsed with the
Prometheus text parser, JSON logs with size rotation and retention, thermal
throttling driven by a fake /sys/class/thermal folder, dynamic batching
visible in metrics and reducing the service's CPU time per request, and the
status page rendered in headless Chromium (screenshot kept as an artifact)."""
import concurrent.futures as cf
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def fake_thermal(celsius):
    d = tempfile.mkdtemp(prefix="edgerun-thermal-")
    for i, (kind, c) in enumerate((("cpu-thermal", celsius), ("gpu-thermal", 40.0))):
        z = os.path.join(d, f"thermal_zone{i}")
        os.makedirs(z)
        with open(os.path.join(z, "type"), "w") as f:
            f.write(kind + "\n")
        with open(os.path.join(z, "temp"), "w") as f:
            f.write(f"{int(c * 1000)}\n")
    return d


def set_temp(d, celsius):
    tmp = os.path.join(d, "thermal_zone0", "temp.new")
    with open(tmp, "w") as f:
        f.write(f"{int(celsius * 1000)}\n")
    os.replace(tmp, os.path.join(d, "thermal_zone0", "temp"))


class Metrics(unittest.TestCase):
    def test_metrics_logs_thermal(self):
        repo = harness.Repo()
        repo.add("digits", 1, config={"instances": 4, "max_batch": 8, "batch_delay_us": 1000})
        thermal = fake_thermal(50.0)
        srv = harness.Server(repo, "--thermal-dir", thermal, "--thermal-limit", "80",
                             "--thermal-resume", "70", "--access-log", "--log-max-bytes", "8192",
                             "--log-keep", "2")
        try:
            x = harness.digits_images(4)
            for _ in range(20):
                self.assertEqual(srv.infer(x)[0], 200)
            self.assertEqual(srv.infer(x, model="nosuch")[0], 404)
            body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1], "data": [1]}]}
            self.assertEqual(srv.post_json("/v2/models/digits/infer", body)[0], 400)
            srv.wait_for(lambda: srv.sample(srv.metrics(), "edgerun_device_temperature_celsius",
                                            zone="0:cpu-thermal") == 50.0, what="temperature")
            m = srv.metrics()
            types = {n: f.type for n, f in m.items()}
            for name, t in (("edgerun_requests", "counter"), ("edgerun_request_failures", "counter"),
                            ("edgerun_queue_depth", "gauge"), ("edgerun_inflight_requests", "gauge"),
                            ("edgerun_request_duration_seconds", "histogram"),
                            ("edgerun_batch_size", "histogram"), ("edgerun_model_load_seconds", "gauge"),
                            ("edgerun_process_resident_memory_bytes", "gauge"),
                            ("edgerun_process_cpu_seconds", "counter"),
                            ("edgerun_device_temperature_celsius", "gauge"),
                            ("edgerun_thermal_throttled", "gauge")):
                self.assertEqual(types.get(name), t, name)
            s = lambda n, **l: srv.sample(m, n, **l)  # noqa: E731
            self.assertEqual(s("edgerun_requests_total", model="digits", code="200"), 20)
            self.assertEqual(s("edgerun_requests_total", model="digits", code="400"), 1)
            self.assertEqual(s("edgerun_request_failures_total", model="digits", code="400"), 1)
            self.assertEqual(s("edgerun_http_responses_total", code="404"), 1)
            self.assertEqual(s("edgerun_request_duration_seconds_count", model="digits"), 20)
            self.assertEqual(s("edgerun_request_duration_seconds_bucket", model="digits", le="+Inf"), 20)
            buckets = [x.value for x in m["edgerun_request_duration_seconds"].samples
                       if x.name.endswith("_bucket")]
            self.assertEqual(buckets, sorted(buckets))
            self.assertEqual(s("edgerun_batch_size_sum", model="digits"), 80)   # 20 requests x 4 rows
            self.assertGreater(s("edgerun_model_load_seconds", model="digits", version="1"), 0)
            self.assertGreater(s("edgerun_process_resident_memory_bytes"), 1 << 20)
            self.assertGreater(s("edgerun_process_cpu_seconds_total"), 0)
            self.assertEqual(s("edgerun_device_temperature_celsius", zone="1:gpu-thermal"), 40.0)
            self.assertEqual(s("edgerun_thermal_throttled"), 0)
            self.assertEqual(s("edgerun_effective_concurrency", model="digits"), 4)
            self.assertEqual(s("edgerun_queue_depth", model="digits"), 0)
            self.assertEqual(s("edgerun_inflight_requests", model="digits"), 0)

            # Device care: hot -> halve concurrency and batch; cool -> restore.
            set_temp(thermal, 91.5)
            srv.wait_for(lambda: srv.sample(srv.metrics(), "edgerun_thermal_throttled") == 1,
                         what="thermal throttle")
            m = srv.metrics()
            self.assertEqual(srv.sample(m, "edgerun_effective_concurrency", model="digits"), 2)
            self.assertEqual(srv.sample(m, "edgerun_effective_max_batch", model="digits"), 4)
            self.assertEqual(srv.infer(x)[0], 200)   # still serving, just less at once
            set_temp(thermal, 75.0)                  # between resume and limit: stays throttled
            time.sleep(1.5)
            self.assertEqual(srv.sample(srv.metrics(), "edgerun_thermal_throttled"), 1)
            set_temp(thermal, 60.0)
            srv.wait_for(lambda: srv.sample(srv.metrics(), "edgerun_thermal_throttled") == 0,
                         what="thermal restore")
            events = [e["event"] for e in srv.log_events()]
            self.assertIn("thermal_throttle", events)
            self.assertIn("thermal_restore", events)

            # Logs: JSON lines, rotated at 8 KiB, two old files kept.
            for _ in range(150):
                srv.get("/v2/health/live")
            names = sorted(os.listdir(srv.log_dir))
            self.assertEqual(names, ["edgerun.log", "edgerun.log.1", "edgerun.log.2"])
            for n in names:
                path = os.path.join(srv.log_dir, n)
                self.assertLessEqual(os.path.getsize(path), 8192)
                with open(path) as f:
                    for line in f:
                        e = json.loads(line)
                        self.assertTrue({"ts", "level", "event", "msg"} <= set(e), e)
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            srv.cleanup()
            repo.cleanup()
            shutil.rmtree(thermal)


def binary_infer_body(x):
    """One binary-data infer request for input "input": (body, header length)."""
    hdr = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                                  "parameters": {"binary_data_size": x.nbytes}}],
                      "parameters": {"binary_data_output": True}}).encode()
    return hdr + x.tobytes(), len(hdr)


def drive(srv, model, x, n, clients=16):
    """n binary infer requests from `clients` concurrent clients. Returns
    (outputs, req/s, server CPU seconds per request, requests per run)."""
    body, hlen = binary_infer_body(x)
    cpu0 = srv.sample(srv.metrics(), "edgerun_process_cpu_seconds_total")
    runs0 = srv.sample(srv.metrics(), "edgerun_batch_size_count", model=model) or 0

    def one(_):
        st, h, b = srv.request("POST", f"/v2/models/{model}/infer", body,
                               {"Inference-Header-Content-Length": str(hlen)})
        if st != 200:
            return st, None
        k = int(h["Inference-Header-Content-Length"])
        return st, np.frombuffer(b[k:], np.float32)

    t = time.perf_counter()
    with cf.ThreadPoolExecutor(clients) as ex:
        outs = list(ex.map(one, range(n)))
    dt = time.perf_counter() - t
    m = srv.metrics()
    cpu = srv.sample(m, "edgerun_process_cpu_seconds_total") - cpu0
    runs = srv.sample(m, "edgerun_batch_size_count", model=model) - runs0
    return outs, n / dt, cpu / n, n / runs


def drive_both(test, srv, x, ref, n, tol, rounds=1):
    """drive() for models "plain" and "batched" with x, alternating, `rounds`
    times each; every answer must be 200 and match ref. Returns {model:
    (req/s, CPU s/request, requests/run)}: the best speed and CPU of the
    rounds and the fewest requests per run. On a shared host a neighbour's
    burst slows one round and never speeds one up, and process CPU is
    counted in 10 ms ticks."""
    results = {}
    for _ in range(rounds):
        for model in ("plain", "batched"):
            outs, rps, cpu, per_run = drive(srv, model, x, n)
            for st, y in outs:
                test.assertEqual(st, 200)
                np.testing.assert_allclose(y.reshape(ref.shape), ref, rtol=tol, atol=tol)
            if model in results:
                best = results[model]
                rps, cpu, per_run = max(rps, best[0]), min(cpu, best[1]), min(per_run, best[2])
            results[model] = (rps, cpu, per_run)
    return results


class Batching(unittest.TestCase):
    """The same model with and without dynamic batching, driven by 16
    concurrent clients: batching merges requests (batch-size histogram), and
    on a model whose run is dominated by reading its weights it spends much
    less server CPU per request. Throughput is measured and printed
    (bench/serve_bench.py reports it in full); asserting wall-clock speed
    here would make the test depend on the machine, while CPU time per
    request is a property of the work done."""

    def test_batching(self):
        repo = harness.Repo()
        repo.add("plain", 1, config={"instances": 2, "max_batch": 1, "queue_size": 256})
        repo.add("batched", 1, config={"instances": 2, "max_batch": 32, "batch_delay_us": 2000,
                                       "queue_size": 256})
        srv = harness.Server(repo, "--http-threads", "2")
        try:
            x = harness.digits_images(1)
            ref = harness.reference_logits(x)
            results = drive_both(self, srv, x, ref, 800, 1e-4)
            print(f"\nbatching: plain {results['plain'][0]:.0f} req/s, "
                  f"{results['plain'][1] * 1e6:.0f} us CPU/req, {results['plain'][2]:.2f} req/run; "
                  f"batched {results['batched'][0]:.0f} req/s, {results['batched'][1] * 1e6:.0f} us "
                  f"CPU/req, {results['batched'][2]:.2f} req/run", file=sys.stderr)
            self.assertEqual(results["plain"][2], 1.0)
            self.assertGreater(results["batched"][2], 1.5, "requests were not merged")
            m = srv.metrics()
            self.assertGreater(srv.sample(m, "edgerun_batch_size_bucket", model="batched", le="1"), -1)
            self.assertLess(srv.sample(m, "edgerun_batch_size_bucket", model="batched", le="1"),
                            srv.sample(m, "edgerun_batch_size_count", model="batched"))
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            srv.cleanup()
            repo.cleanup()

    def test_batching_shares_weight_reads(self):
        """TensorFlow's classic MNIST CNN (harness.mnist_cnn): its 12.8 MB
        classifier is read once per run, so merged requests must cost the
        server well under the CPU of unmerged ones (bench/serve_bench.py
        measures about 2.3x the throughput at 16 clients)."""
        repo = harness.Repo()
        for name, mb in (("plain", 1), ("batched", 16)):
            repo.add(name, 1, model=harness.mnist_cnn,
                     config={"instances": 2, "max_batch": mb, "batch_delay_us": 2000 if mb > 1 else 0,
                             "queue_size": 256})
        srv = harness.Server(repo, "--http-threads", "2")
        try:
            import onnxruntime as ort
            x = np.random.default_rng(1).random((1, 1, 28, 28), dtype=np.float32)
            ref = ort.InferenceSession(os.path.join(repo.path, "plain", "1", "model.onnx"),
                                       providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
            results = drive_both(self, srv, x, ref, 480, 1e-3, rounds=3)
            print(f"\nmnist_cnn: plain {results['plain'][0]:.0f} req/s, "
                  f"{results['plain'][1] * 1e6:.0f} us CPU/req; batched {results['batched'][0]:.0f} "
                  f"req/s, {results['batched'][1] * 1e6:.0f} us CPU/req, "
                  f"{results['batched'][2]:.2f} req/run", file=sys.stderr)
            self.assertGreater(results["batched"][2], 2.0, "requests were not merged")
            # An AddressSanitizer build checks every load and runs its
            # kernels at -O1, which makes the run compute-bound: there the
            # test checks merging and answers only.
            if not srv.sanitized():
                # Measured 0.61-0.79 of the plain CPU in single rounds on a
                # loaded 2-vCPU host; a batch run per request stays near 1.
                self.assertLess(results["batched"][1], 0.85 * results["plain"][1],
                                "merged runs did not share the classifier's weight reads")
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            srv.cleanup()
            repo.cleanup()


class FullBatch(unittest.TestCase):
    """A batch that is full runs at once, however long batch_delay_us is:
    four concurrent 2-row requests with max_batch 4 and a 10 s delay make
    two full batches, answered well inside the clients' 5 s timeout (a
    batch left waiting for its delay would time them out)."""

    def test_full_batch_does_not_wait(self):
        repo = harness.Repo()
        repo.add("digits", 1, config={"instances": 1, "max_batch": 4, "batch_delay_us": 10000000,
                                      "timeout_ms": 60000})
        srv = harness.Server(repo)
        try:
            xs = [harness.digits_images(8)[2 * i:2 * i + 2] for i in range(4)]
            with cf.ThreadPoolExecutor(4) as ex:
                outs = list(ex.map(lambda x: srv.infer(x, timeout=5), xs))
            for x, (st, _, body) in zip(xs, outs):
                self.assertEqual(st, 200, body)
                y = np.array(json.loads(body)["outputs"][0]["data"], np.float32).reshape(2, 10)
                np.testing.assert_allclose(y, harness.reference_logits(x), rtol=1e-4, atol=1e-4)
            m = srv.metrics()
            self.assertEqual(srv.sample(m, "edgerun_batch_size_count", model="digits"), 2)
            self.assertEqual(srv.sample(m, "edgerun_batch_size_sum", model="digits"), 8)
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            srv.cleanup()
            repo.cleanup()


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)
    into rows of (r, g, b) tuples with only the standard library."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return rows


class StatusPage(unittest.TestCase):
    """The status page at / in headless Chromium: after some traffic its
    charts hold data (the chart colours are drawn) and the model table is
    filled. The screenshot is kept in the build folder's serve-artifacts/."""

    def test_status_page(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if not chromium:
            self.skipTest("chromium is not installed (scripts/setup.sh installs it)")
        repo = harness.Repo()
        repo.add("digits", 1, config={"max_batch": 8, "batch_delay_us": 500})
        srv = harness.Server(repo)
        profile = tempfile.mkdtemp(prefix="edgerun-chromium-")
        try:
            x = harness.digits_images(2)
            end = time.time() + 4.5   # several one-second samples with traffic
            with cf.ThreadPoolExecutor(4) as ex:
                while time.time() < end:
                    list(ex.map(lambda _: srv.infer(x), range(8)))
            os.makedirs(harness.ARTIFACTS, exist_ok=True)
            shot = os.path.join(harness.ARTIFACTS, "status-page.png")
            if os.path.exists(shot):
                os.remove(shot)
            flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1280,900",
                     "--virtual-time-budget=4000"]
            url = f"http://127.0.0.1:{srv.port}/"
            dom = subprocess.run([chromium] + flags + ["--dump-dom", url], capture_output=True,
                                 text=True, timeout=120)
            self.assertIn("data-samples", dom.stdout, dom.stderr[-2000:])
            self.assertIn("<td>digits</td><td>READY</td>", dom.stdout)
            self.assertIn('class="ok">ready', dom.stdout)
            r = subprocess.run([chromium] + flags + [f"--screenshot={shot}", url], capture_output=True,
                               text=True, timeout=120)
            self.assertTrue(os.path.exists(shot), r.stderr[-2000:])
            rows = png_pixels(shot)
            counts = {}
            colours = {"p50": (0x2f, 0x81, 0xf7), "throughput": (0x2f, 0xb1, 0x6c),
                       "queue": (0x89, 0x57, 0xe5), "memory": (0x57, 0x60, 0x6a)}
            for row in rows:
                for px in row:
                    for name, c in colours.items():
                        if all(abs(px[i] - c[i]) <= 12 for i in range(3)):
                            counts[name] = counts.get(name, 0) + 1
            # Lines two pixels wide across a chart: hundreds of pixels each.
            for name in ("p50", "throughput", "memory"):
                self.assertGreater(counts.get(name, 0), 150, f"{name} chart has no line: {counts}")
            print(f"\nstatus page screenshot: {shot} (chart pixels {counts})", file=sys.stderr)
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            shutil.rmtree(profile, ignore_errors=True)
            srv.cleanup()
            repo.cleanup()


if __name__ == "__main__":
    unittest.main()
