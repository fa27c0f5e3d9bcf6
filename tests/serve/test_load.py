"""Load and fault cases 1-5 and 8 of TESTING.md, shortened to run in about a
minute while still proving each property (bench/serve_soak.sh runs the same
tests for longer: EDGERUN_SOAK_SECONDS). Sizes adapt to the machine: the
capacity is measured first, then the service is driven at four times the
measured figure (at least twice the real one on a host whose speed varies)."""
import concurrent.futures as cf
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SOAK = float(os.environ.get("EDGERUN_SOAK_SECONDS", "8"))
WIDTH = 256


def slow_body(rows):
    """A request for the slow model in the binary-data form: cheap for the
    client to send and the server to parse, so timings measure the service."""
    x = np.full((rows, WIDTH), 0.01, np.float32)
    hdr = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, WIDTH],
                                  "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    return hdr + x.tobytes(), {"Inference-Header-Content-Length": str(len(hdr))}


class Client(threading.local):
    """One keep-alive connection per thread."""

    def __init__(self, port):
        self.port = port
        self.c = None

    def post(self, path, body, timeout=60):
        headers = {"Content-Type": "application/json"}
        if isinstance(body, tuple):
            body, extra = body
            headers.update(extra)
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                self.c.request("POST", path, body, headers)
                r = self.c.getresponse()
                data = r.read()
                if r.getheader("Connection") == "close":
                    self.c.close()
                    self.c = None
                return r.status, dict(r.getheaders()), data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection the server closed (idle deadline):
                # only a failure on a fresh connection counts.
                self.c.close()
                self.c = None
                if attempt:
                    raise


def rss_watch(srv, stop, out):
    while not stop.is_set():
        out.append(srv.rss_kib())
        time.sleep(0.25)


def assert_flat(testcase, samples, what, srv):
    """Memory is flat when the last third of the run holds no more than the
    middle third plus a small allowance for allocator noise. Medians, not
    maxima: a leak raises the whole level, while the buffers of the requests
    in flight at one sample (16 of 256 KB bodies and answers under
    saturation) are a spike that comes and goes; the maxima failed a run
    whose next samples were lower than the first ones. The middle third,
    not the first: on a loaded host the ramp to the steady level (the
    buffers of every request the queue admits) took more than a third of
    the 8 s saturation run (median 25.4 MB at 1.3-2.7 s, then 29 MB). Under
    ASan the exit-time leak check stands in (see Server.sanitized)."""
    if srv.sanitized():
        return
    n = len(samples)
    testcase.assertGreater(n, 9, "too few RSS samples")
    first = statistics.median(samples[n // 3: 2 * n // 3])
    last = statistics.median(samples[2 * n // 3:])
    testcase.assertLessEqual(last, first * 1.05 + 2048, f"{what}: RSS grew {first} -> {last} KiB")


class Saturation(unittest.TestCase):
    """Case 1: at least twice the capacity. Only 429/503 rejections, each with
    Retry-After and faster than an accepted request; every accepted request
    within its timeout; RSS flat. Case 8 (shortened): a steady run at
    capacity keeps RSS flat."""

    def test_saturation_and_soak(self):
        repo = harness.Repo()
        timeout_ms = 3000
        repo.add("slow", 1, model=lambda p: harness.slow_model(p, width=WIDTH, depth=16),
                 config={"instances": 1, "queue_size": 4, "timeout_ms": timeout_ms})
        srv = harness.Server(repo, "--http-threads", "2")
        try:
            path = "/v2/models/slow/infer"
            rows = 1
            # Size requests to take ~20 ms: a Python client then outpaces the server
            # with little overhead of its own, so client-side timings mean something.
            cl = Client(srv.port)
            while rows < 256:
                t = time.perf_counter()
                for _ in range(5):
                    self.assertEqual(cl.post(path, slow_body(rows))[0], 200)
                if (time.perf_counter() - t) / 5 > 0.02:
                    break
                rows *= 2
            body = slow_body(rows)
            # Capacity: one client back to back (one instance, no batching),
            # the best of three 0.5 s windows. On a shared host one slow
            # 1.5 s window measured 29.5 req/s, and "twice" that then
            # caused no rejection once the host sped up again.
            capacity = 0.0
            for _ in range(3):
                n, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < 0.5:
                    self.assertEqual(cl.post(path, body)[0], 200)
                    n += 1
                capacity = max(capacity, n / (time.perf_counter() - t0))

            def drive(rate, seconds):
                results, lock = [], threading.Lock()
                client = Client(srv.port)

                def one():
                    t = time.perf_counter()
                    try:
                        st, h, b = client.post(path, body)
                    except OSError as e:
                        st, h, b = -1, {}, str(e).encode()
                    with lock:
                        results.append((st, time.perf_counter() - t, h, b))

                with cf.ThreadPoolExecutor(max_workers=48) as ex:
                    start = time.perf_counter()
                    k = 0
                    while time.perf_counter() - start < seconds:
                        due = start + k / rate
                        now = time.perf_counter()
                        if due > now:
                            time.sleep(due - now)
                        ex.submit(one)
                        k += 1
                return results

            stop, rss = threading.Event(), []
            w = threading.Thread(target=rss_watch, args=(srv, stop, rss))
            w.start()
            # Four times the measured capacity, so the offered load is at
            # least twice the real one even when the host was twice as slow
            # while measuring (seen in CI under ctest -j2: 51 req/s
            # measured, all of 102/s then served once the host sped up).
            offered = 4 * capacity
            results = drive(offered, SOAK)
            stop.set()
            w.join()
            codes = {}
            for st, *_ in results:
                codes[st] = codes.get(st, 0) + 1
            self.assertTrue(set(codes) <= {200, 429, 503}, f"codes {codes}")
            self.assertGreater(codes.get(200, 0), 0, codes)
            self.assertGreater(codes.get(429, 0) + codes.get(503, 0), 0,
                               f"4x the measured capacity ({offered:.0f}/s) caused no rejection: {codes}")
            ok = sorted(t for st, t, *_ in results if st == 200)
            rej = sorted(t for st, t, *_ in results if st != 200)
            self.assertLessEqual(ok[-1], timeout_ms / 1000.0,
                                 "an accepted request missed its timeout")
            for st, t, h, b in results:
                if st != 200:
                    self.assertIn("Retry-After", h)
                    self.assertIn("error", json.loads(b))
            self.assertLess(rej[len(rej) // 2], ok[len(ok) // 2],
                            "rejections are not faster than accepted requests")
            assert_flat(self, rss, "saturation", srv)
            m = srv.metrics()
            self.assertEqual(srv.sample(m, "edgerun_requests_total", model="slow", code="429") or 0,
                             codes.get(429, 0))
            print(f"\nsaturation: capacity {capacity:.0f} req/s x {rows} rows; offered "
                  f"{offered:.0f}/s for {SOAK:.0f} s: {codes}; accepted p50 "
                  f"{ok[len(ok) // 2] * 1000:.1f} ms max {ok[-1] * 1000:.1f} ms; rejected p50 "
                  f"{rej[len(rej) // 2] * 1000:.2f} ms; RSS {rss[len(rss) // 3]} -> {rss[-1]} KiB",
                  file=sys.stderr)

            # Case 8, shortened: steady load at half the capacity, RSS flat.
            stop, rss = threading.Event(), []
            w = threading.Thread(target=rss_watch, args=(srv, stop, rss))
            w.start()
            results = drive(0.5 * capacity, SOAK)
            stop.set()
            w.join()
            bad = [r[0] for r in results if r[0] != 200]
            self.assertLessEqual(len(bad), len(results) // 10, f"steady load rejected {bad[:10]}")
            assert_flat(self, rss, "steady load", srv)
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            srv.cleanup()
            repo.cleanup()


class SlowClients(unittest.TestCase):
    """Case 2: connections that trickle their headers or body are closed at
    the deadline; fresh requests are served meanwhile."""

    def test_slow_clients(self):
        repo = harness.Repo()
        repo.add("digits", 1)
        srv = harness.Server(repo, "--header-timeout-ms", "1000", "--body-timeout-ms", "1500")
        socks = []
        try:
            for i in range(16):
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHo")
                socks.append(("header", s))
            for i in range(8):
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: localhost\r\n"
                          b"Content-Length: 100000\r\n\r\n{")
                socks.append(("body", s))
            for i in range(8):   # idle: connect and say nothing
                socks.append(("idle", socket.create_connection(("127.0.0.1", srv.port))))
            start = time.time()
            closed = {}
            x = harness.digits_images(1)
            while time.time() - start < 6 and len(closed) < len(socks):
                for k, (kind, s) in enumerate(socks):
                    if k in closed:
                        continue
                    try:
                        s.sendall(b"x")   # one byte at a time keeps an idle timer happy
                        s.settimeout(0.001)
                        if s.recv(4096) == b"":
                            closed[k] = time.time() - start
                    except socket.timeout:
                        pass
                    except OSError:
                        closed[k] = time.time() - start
                st, _, b = srv.infer(x)
                self.assertEqual(st, 200, b)
                time.sleep(0.1)
            self.assertEqual(len(closed), len(socks), f"still open: {len(socks) - len(closed)}")
            for k, t in closed.items():
                # Not cut early: the header deadline is 1 s, the body's 1.5 s.
                self.assertGreaterEqual(t, 0.9, (socks[k][0], t))
            m = srv.metrics()
            self.assertGreaterEqual(srv.sample(m, "edgerun_connections_timed_out_total"), len(socks))
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            for _, s in socks:
                s.close()
            srv.cleanup()
            repo.cleanup()


class Drain(unittest.TestCase):
    """Case 3: SIGTERM with requests in flight: readiness false at once,
    new requests refused, in-flight ones finish, exit 0."""

    def test_sigterm_drain(self):
        repo = harness.Repo()
        repo.add("slow", 1, model=lambda p: harness.slow_model(p, width=WIDTH, depth=16),
                 config={"instances": 1, "queue_size": 16, "timeout_ms": 60000})
        srv = harness.Server(repo)
        try:
            def binary(rows):
                x = np.full((rows, WIDTH), 0.01, np.float32)
                hdr = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, WIDTH],
                                              "parameters": {"binary_data_size": x.nbytes}}]}).encode()
                return hdr + x.tobytes(), {"Inference-Header-Content-Length": str(len(hdr))}

            b64, h64 = binary(64)
            t = time.perf_counter()
            self.assertEqual(srv.request("POST", "/v2/models/slow/infer", b64, h64)[0], 200)
            per_row = (time.perf_counter() - t) / 64
            rows = max(1, min(8192, int(0.4 / per_row)))   # ~0.4 s per request
            body, hdrs = binary(rows)
            results = []

            def one():
                results.append(srv.request("POST", "/v2/models/slow/infer", body, hdrs, timeout=60)[0])

            threads = [threading.Thread(target=one) for _ in range(4)]
            for th in threads:
                th.start()
            # A fifth client sends now and reads its (megabytes long)
            # answer only after the others are done: the server must keep
            # writing it, not exit once the model work is over.
            # Its answer is sized apart from the timing probe: 8192 rows give
            # about 20 MB of JSON, well above what the loopback socket buffers
            # take in (tcp_rmem's autotuning goes to 32 MB only for a reader
            # that reads), so the server really has to keep writing it.
            late_body, late_hdrs = binary(8192)
            late = srv.conn(timeout=60)
            late.request("POST", "/v2/models/slow/infer", body=late_body, headers=late_hdrs)
            srv.wait_for(lambda: srv.sample(srv.metrics(), "edgerun_inflight_requests", model="slow") == 5,
                         what="5 requests in flight")
            srv.signal(signal.SIGTERM)
            srv.wait_for(lambda: srv.get("/v2/health/ready")[0] == 503, timeout=5,
                         what="readiness to turn false")
            st, h, b = srv.request("POST", "/v2/models/slow/infer", *slow_body(1))
            self.assertEqual(st, 503, b)
            self.assertIn("Retry-After", h)
            for th in threads:
                th.join(60)
            self.assertEqual(results, [200] * 4)
            def computed():
                try:
                    return srv.sample(srv.metrics(), "edgerun_inflight_requests", model="slow") == 0
                except ConnectionRefusedError:
                    # Gone already: legitimate only if the whole answer sits
                    # in the socket buffers, which the full read below checks.
                    return True

            srv.wait_for(computed, timeout=60, what="the late request's answer to be computed")
            time.sleep(0.5)
            r = late.getresponse()
            data = r.read()   # http.client raises IncompleteRead on a cut response
            self.assertEqual(r.status, 200)
            self.assertEqual(len(data), int(r.getheader("Content-Length")))
            late.close()
            self.assertEqual(srv.proc.wait(60), 0)
            events = [e["event"] for e in srv.log_events()]
            self.assertIn("draining", events)
            self.assertIn("stopped", events)
            drain = [e for e in srv.log_events() if e["event"] == "draining"][0]
            self.assertGreaterEqual(drain["inflight"], 1)
        finally:
            srv.cleanup()
            repo.cleanup()


class HotReload(unittest.TestCase):
    """Case 4: v1 -> v2 under steady load fails no request; a corrupt v3 and
    an unsigned v4 (with --require-signed) never replace v2; `edgerun repo
    rollback` then returns the service to v1."""

    def test_hot_reload_under_load(self):
        repo = harness.Repo()
        keys = repo.path + "-keys"
        os.makedirs(keys)
        prefix = os.path.join(keys, "k")
        subprocess.run([harness.EDGERUN, "keygen", "--out", prefix], check=True, capture_output=True)
        v1 = repo.add("digits", 1)
        subprocess.run([harness.EDGERUN, "sign", "--key", prefix + ".key", v1], check=True,
                       capture_output=True)
        srv = harness.Server(repo, "--require-signed", "--trusted-key", prefix + ".pub")
        stop = threading.Event()
        seen, lock = [], threading.Lock()
        x = harness.digits_images(2)
        body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, 8, 8],
                                       "data": x.flatten().tolist()}]}).encode()

        def load():
            cl = Client(srv.port)
            while not stop.is_set():
                st, _, b = cl.post("/v2/models/digits/infer", body)
                with lock:
                    seen.append((st, json.loads(b).get("model_version") if st == 200 else b))

        def serving():
            return json.loads(srv.get("/v2/models/digits")[2])["versions"]

        def failed(v):
            return any(e.get("event") == "version_failed" and e.get("version") == v
                       for e in srv.log_events())

        threads = [threading.Thread(target=load) for _ in range(3)]
        try:
            for th in threads:
                th.start()
            time.sleep(0.3)
            v2 = repo.add("digits", 2)
            subprocess.run([harness.EDGERUN, "sign", "--key", prefix + ".key", v2], check=True,
                           capture_output=True)
            srv.signal(signal.SIGHUP)
            srv.wait_for(lambda: serving() == ["2"], what="v2 to serve")
            time.sleep(0.3)
            with open(v1, "rb") as f:
                good = f.read()
            v3 = repo.add("digits", 3, model=good[: len(good) // 2])   # truncated
            subprocess.run([harness.EDGERUN, "sign", "--key", prefix + ".key", v3], check=True,
                           capture_output=True)
            srv.signal(signal.SIGHUP)
            srv.wait_for(lambda: failed(3), what="corrupt v3 to fail")
            repo.add("digits", 4)   # a good model, but unsigned
            srv.signal(signal.SIGHUP)
            srv.wait_for(lambda: failed(4), what="unsigned v4 to fail")
            time.sleep(0.3)
            self.assertEqual(serving(), ["2"])
            idx = {e["version"]: e for e in json.loads(
                srv.request("POST", "/v2/repository/index")[2]) if e["name"] == "digits"}
            self.assertEqual(idx["2"]["state"], "READY")
            self.assertEqual(idx["3"]["state"], "UNAVAILABLE")
            self.assertIn("signature", idx["4"]["reason"])
            # Roll back with the CLI: it checks signatures too, so it finds v2
            # served and pins v1.
            r = subprocess.run([harness.EDGERUN, "repo", "rollback", repo.path, "digits",
                                "--trusted-key", prefix + ".pub"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("rolling back to 1", r.stdout)
            srv.signal(signal.SIGHUP)
            srv.wait_for(lambda: serving() == ["1"], what="rollback to v1")
            time.sleep(0.3)
        finally:
            stop.set()
            for th in threads:
                th.join()
        try:
            statuses = {st for st, _ in seen}
            self.assertEqual(statuses, {200}, [s for s in seen if s[0] != 200][:5])
            versions = [v for _, v in seen]
            self.assertEqual(set(versions), {"1", "2"})
            self.assertEqual(versions[-1], "1")
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
        finally:
            srv.cleanup()
            repo.cleanup()
            shutil.rmtree(keys)


class LoadUnload(unittest.TestCase):
    """Case 5: repeated load/unload while inferring leaks no memory or
    descriptors (and under ASan, LeakSanitizer at exit makes any leak a
    non-zero exit)."""

    def test_load_unload_cycles(self):
        repo = harness.Repo()
        repo.add("digits", 1)
        repo.add("other", 1)
        srv = harness.Server(repo)
        stop = threading.Event()
        statuses = []
        x = harness.digits_images(1)

        def load():
            cl = Client(srv.port)
            body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 8, 8],
                                           "data": x.flatten().tolist()}]}).encode()
            while not stop.is_set():
                statuses.append(cl.post("/v2/models/digits/infer", body)[0])

        th = threading.Thread(target=load)
        th.start()
        try:
            fds, rss = [], []
            for i in range(60):
                st, _, b = srv.request("POST", "/v2/repository/models/digits/unload")
                self.assertEqual(st, 200, b)
                st, _, b = srv.request("POST", "/v2/repository/models/digits/load")
                self.assertEqual(st, 200, b)
                if i >= 10:
                    fds.append(srv.fd_count())
                    rss.append(srv.rss_kib())
        finally:
            stop.set()
            th.join()
        try:
            # 400 while unloaded, 503 (with Retry-After) while loading.
            self.assertTrue(set(statuses) <= {200, 400, 503}, set(statuses))
            self.assertIn(200, statuses)
            # A descriptor leak raises the floor: the fewest open descriptors
            # in the last ten samples stays within one of the fewest in the
            # first ten. Not max - min over all samples: the request
            # connections the server is still closing at one sample come and
            # go (a clean run on a loaded CI host saw 12..15).
            self.assertLessEqual(min(fds[-10:]), min(fds[:10]) + 1, fds)
            self.assertLessEqual(max(fds) - min(fds), 6, fds)
            assert_flat(self, rss, "load/unload", srv)
            self.assertEqual(srv.stop(), 0, srv.stderr[-3000:])
        finally:
            srv.cleanup()
            repo.cleanup()


if __name__ == "__main__":
    unittest.main()
