"""TESTING.md service bad-input cases 17-24, each over real HTTP: a specific
status and message, bounded resources, and the server still answers the
next valid request."""
import gzip
import json
import urllib.error
import urllib.request
import os
import socket
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MAX_BODY = 256 * 1024
API_KEY = "s3cret-key-for-tests"


def raw(port, data, timeout=30):
    """Sends raw bytes; returns (status, headers text, body) of the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            chunks.append(b)
            got = b"".join(chunks)
            if b"\r\n\r\n" in got:
                head, _, body = got.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:") and \
                            len(body) >= int(line.split(b":")[1]):
                        return int(head.split()[1]), head.decode(), body
    got = b"".join(chunks)
    if not got:
        return None, "", b""
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), body


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = harness.Repo()
        cls.repo.add("digits", 1)
        # A sibling folder the service must never touch.
        cls.outside = os.path.join(os.path.dirname(cls.repo.path), "edgerun-outside-" + str(os.getpid()))
        os.makedirs(cls.outside, exist_ok=True)
        cls.srv = harness.Server(cls.repo, "--max-body-bytes", str(MAX_BODY), "--max-json-bytes",
                                 str(MAX_BODY), "--api-key", API_KEY, "--access-log", auth=API_KEY)
        cls.auth = {"Authorization": "Bearer " + API_KEY}
        cls.x = harness.digits_images(1)
        cls.errors = []   # every error body seen, for case 24

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        cls.srv.cleanup()
        cls.repo.cleanup()
        os.rmdir(cls.outside)
        assert rc == 0, f"server exit {rc}: {cls.srv.stderr[-2000:]}"

    def expect(self, status, body, codes, word=None):
        self.assertIn(status, codes, body)
        if body:
            msg = json.loads(body)["error"]
            self.errors.append(msg)
            if word:
                self.assertIn(word, msg)
        self.still_serves()

    def still_serves(self):
        st, _, b = self.srv.infer(self.x, headers=self.auth)
        self.assertEqual(st, 200, b)

    def infer_raw(self, body, extra=b""):
        return raw(self.srv.port, b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: localhost\r\n"
                   b"Authorization: Bearer " + API_KEY.encode() + b"\r\n" + extra + body)

    # 17 -----------------------------------------------------------------
    def test_17_body_over_cap_declared(self):
        # A client that writes its whole body before reading: the body is
        # read and dropped, then the 413 comes on the same connection.
        st, h, b = self.infer_raw(b"x" * (MAX_BODY + 1), b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))
        self.expect(st, b, {413}, "--max-body-bytes")

    def test_17_body_over_cap_declared_expect_continue(self):
        # A client that waits for 100 Continue gets the 413 at once, unread.
        st, h, b = self.infer_raw(b"", b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (MAX_BODY + 1))
        self.expect(st, b, {413}, "--max-body-bytes")

    def test_17_body_declared_flood_is_refused_unread(self):
        # Past 8x the cap a declared body is not worth reading: 413 at once.
        st, h, b = self.infer_raw(b"", b"Content-Length: %d\r\n\r\n" % (8 * MAX_BODY + 1))
        self.expect(st, b, {413}, "--max-body-bytes")

    def test_17_big_body_clients_read_their_413(self):
        # 300 MB to a server with the default 64 MiB cap, from the clients
        # that write the whole body before reading: each reads a 413 with
        # its JSON error, not a broken pipe.
        srv = harness.Server(self.repo, "--api-key", API_KEY, auth=API_KEY)
        try:
            body = b"x" * (300 * 1000 * 1000)
            url = f"http://127.0.0.1:{srv.port}/v2/models/digits/infer"
            req = urllib.request.Request(url, data=body, headers={**self.auth, "Content-Type": "application/json"})
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=120)
            self.assertEqual(e.exception.code, 413)
            self.assertIn("--max-body-bytes", json.loads(e.exception.read())["error"])
            import requests
            r = requests.post(url, data=body, headers=self.auth, timeout=120)
            self.assertEqual(r.status_code, 413)
            self.assertIn("--max-body-bytes", r.json()["error"])
            st, _, b = srv.request("POST", "/v2/models/digits/infer", body, self.auth, timeout=120)
            self.assertEqual(st, 413, b)
            st, _, b = srv.infer(self.x, headers=self.auth)
            self.assertEqual(st, 200, b)
        finally:
            self.assertEqual(srv.stop(), 0, srv.stderr[-2000:])
            srv.cleanup()

    def test_17_body_over_cap_chunked(self):
        chunk = b"x" * 65536
        body = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(5)) + b"0\r\n\r\n"
        st, h, b = self.infer_raw(body, b"Transfer-Encoding: chunked\r\n\r\n")
        self.expect(st, b, {413}, "cap")

    def test_17_body_flood_chunked_is_cut(self):
        # Far past the cap: the server hangs up rather than reading on.
        chunk = b"x" * 65536
        sent = 0
        with socket.create_connection(("127.0.0.1", self.srv.port), timeout=30) as s:
            s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                      + API_KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                for _ in range(200):
                    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
        self.assertLess(sent, 200 * 65536, "the server read a 12 MiB flood past a 256 KiB cap")
        self.still_serves()

    def test_17_compressed_body(self):
        data = json.dumps({"inputs": []}).encode()
        z = gzip.compress(data + b" " * (4 * MAX_BODY))   # inflates past the cap
        st, _, b = self.srv.request("POST", "/v2/models/digits/infer", z,
                                    {"Content-Encoding": "gzip", **self.auth})
        self.expect(st, b, {415}, "Content-Encoding")

    # 18 -----------------------------------------------------------------
    def test_18_million_one_byte_chunks(self):
        body = b"1\r\n \r\n" * 1_000_000 + b"0\r\n\r\n"
        st, h, b = self.infer_raw(body, b"Transfer-Encoding: chunked\r\n\r\n")
        # A million spaces is over the 256 KiB cap, so 413; either way a 4xx.
        self.assertIsNotNone(st)
        self.assertGreaterEqual(st, 400)
        self.assertLess(st, 500)
        self.expect(st, b, {400, 413})

    def test_18_many_small_chunks_under_cap(self):
        body = b"1\r\n \r\n" * 100_000 + b"0\r\n\r\n"
        st, h, b = self.infer_raw(body, b"Transfer-Encoding: chunked\r\n\r\n")
        self.expect(st, b, {400}, "invalid")

    # 19 -----------------------------------------------------------------
    def test_19_deep_json(self):
        deep = b"[" * 100_000 + b"]" * 100_000
        st, _, b = self.srv.request("POST", "/v2/models/digits/infer", deep, self.auth)
        self.expect(st, b, {400}, "JSON")
        deep_data = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 8, 8],
                                 "data": json.loads("[" * 500 + "1" + "]" * 500)}]}
        st, _, b = self.srv.post_json("/v2/models/digits/infer", deep_data, self.auth)
        self.expect(st, b, {400}, "deeper")

    def test_19_invalid_utf8(self):
        body = b'{"id": "\xff\xfe", "inputs": []}'
        st, _, b = self.srv.request("POST", "/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "decode byte 0xff")

    # 20 -----------------------------------------------------------------
    def test_20_shape_data_mismatch(self):
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, 8, 8],
                            "data": [0.0] * 64}]}
        st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "128 elements")

    def test_20_huge_shape(self):
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [2**40, 1, 8, 8],
                            "data": [0.0] * 64}]}
        st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "more elements")
        body["inputs"][0]["shape"] = [1, 1, 8, 9]
        st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "fixes it at 8")

    def test_20_wrong_datatype(self):
        for dt, data in (("INT64", [0] * 64), ("FP64", [0.0] * 64), ("NOPE", [0] * 64)):
            body = {"inputs": [{"name": "input", "datatype": dt, "shape": [1, 1, 8, 8], "data": data}]}
            st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
            self.expect(st, b, {400}, "datatype")
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 8, 8],
                            "data": ["a"] * 64}]}
        st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "not a FP32")

    def test_20_binary_length_past_body(self):
        hdr = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 8, 8],
                                      "parameters": {"binary_data_size": 256}}]}).encode()
        for hlen, tail, word in ((len(hdr) + 1000, b"", "past the end"),
                                 (len(hdr), b"\0" * 100, "past the end"),
                                 (len(hdr), b"\0" * 300, "not claimed")):
            st, _, b = self.srv.request("POST", "/v2/models/digits/infer", hdr + tail,
                                        {"Inference-Header-Content-Length": str(hlen), **self.auth})
            self.expect(st, b, {400}, word)
        st, _, b = self.srv.request("POST", "/v2/models/digits/infer", hdr,
                                    {"Inference-Header-Content-Length": "-5", **self.auth})
        self.expect(st, b, {400}, "Inference-Header-Content-Length")

    def test_20_unknown_names(self):
        body = {"inputs": [{"name": "nope", "datatype": "FP32", "shape": [1, 1, 8, 8], "data": [0.0] * 64}]}
        st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "no input named")
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 8, 8], "data": [0.0] * 64}],
                "outputs": [{"name": "nope"}]}
        st, _, b = self.srv.post_json("/v2/models/digits/infer", body, self.auth)
        self.expect(st, b, {400}, "no output named")

    # 21 -----------------------------------------------------------------
    def test_21_model_names(self):
        before = sorted(os.listdir(os.path.dirname(self.repo.path)))
        for path in ("/v2/models/../digits/infer", "/v2/models/%2e%2e/infer",
                     "/v2/models/%2e%2e%2f%2e%2e%2fetc/infer", "/v2/models/..%2fedgerun-outside/infer",
                     "/v2/models/" + "a" * 300 + "/infer", "/v2/repository/models/%2e%2e/load",
                     "/v2/models/.hidden/infer", "/v2/models/a%2fb/infer"):
            st, h, b = raw(self.srv.port, f"POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: "
                           f"Bearer {API_KEY}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
            self.assertIn(st, (400, 404), (path, b))
            self.expect(st, b, {400, 404})
        self.assertEqual(before, sorted(os.listdir(os.path.dirname(self.repo.path))))
        self.assertEqual(os.listdir(self.outside), [])

    # 22 -----------------------------------------------------------------
    def test_22_api_key(self):
        st, h, b = self.srv.infer(self.x)
        self.assertEqual(st, 401)
        self.assertEqual(h.get("WWW-Authenticate"), "Bearer")
        self.expect(st, b, {401}, "API key")
        st, _, b = self.srv.infer(self.x, headers={"Authorization": "Bearer wrong"})
        self.expect(st, b, {401})
        st, _, b = self.srv.infer(self.x, headers={"Authorization": "Basic " + API_KEY})
        self.expect(st, b, {401})
        for path in ("/metrics", "/v2", "/v2/health/ready", "/api/status", "/v2/models/digits"):
            self.assertEqual(self.srv.get(path)[0], 401, path)
            self.assertEqual(self.srv.get(path, headers=self.auth)[0], 200, path)
        self.assertEqual(self.srv.get("/v2/health/live")[0], 200)

    def test_22_foreign_host(self):
        for host in ("evil.example", "evil.example:80", "127.0.0.1.evil.example", "[::2]:1",
                     "localhost.evil", "10.0.0.1"):
            st, _, b = self.srv.get("/v2/health/live", headers={"Host": host})
            self.expect(st, b, {403}, "Host")
        for host in ("localhost", f"localhost:{self.srv.port}", f"127.0.0.1:{self.srv.port}",
                     "127.1.2.3", "[::1]", f"[::1]:{self.srv.port}", "LOCALHOST"):
            self.assertEqual(self.srv.get("/v2/health/live", headers={"Host": host})[0], 200, host)

    # 24 -----------------------------------------------------------------
    def test_24_no_paths_or_keys_in_errors(self):
        # A corrupt version: its load error must not show where the repo is.
        self.repo.add("broken", 1, model=b"\x08\x07\x12\x03abc" * 3)
        self.srv.signal(1)   # SIGHUP
        self.srv.wait_for(lambda: any(e.get("event") == "version_failed" for e in self.srv.log_events()),
                          what="the corrupt version to fail")
        st, _, b = self.srv.request("POST", "/v2/repository/index", b"", self.auth)
        self.assertEqual(st, 200)
        idx = json.loads(b)
        broken = [e for e in idx if e["name"] == "broken"]
        self.assertEqual(broken[0]["state"], "UNAVAILABLE", idx)
        self.errors.append(broken[0]["reason"])
        st, _, b = self.srv.request("POST", "/v2/repository/models/broken/load", b"", self.auth)
        self.assertEqual(st, 400)
        self.errors.append(json.loads(b)["error"])
        self.assertEqual(self.srv.get("/v2/health/ready", headers=self.auth)[0], 503)
        st, _, b = self.srv.request("POST", "/v2/repository/models/broken/unload", b"", self.auth)
        self.assertEqual(self.srv.get("/v2/health/ready", headers=self.auth)[0], 200)
        self.still_serves()

    @classmethod
    def _check_24(cls):
        for msg in cls.errors:
            assert cls.repo.path not in msg and "/tmp" not in msg and API_KEY not in msg, msg

    def test_zz_24_all_errors_clean(self):
        # Runs last (alphabetical order): every error body seen above.
        self.assertGreater(len(self.errors), 20)
        for msg in self.errors:
            self.assertNotIn(self.repo.path, msg)
            self.assertNotRegex(msg, r"(^|[\s'\"(=:])/(tmp|home|root|usr|etc|var|work)\b")
            self.assertNotIn(API_KEY, msg)


class Loading(unittest.TestCase):
    """Case 23: a request while a model is loading gets 503 + Retry-After."""

    def test_23_request_while_loading(self):
        repo = harness.Repo()
        repo.add("digits", 1)
        srv = harness.Server(repo, env={"EDGERUN_SERVE_TEST_LOAD_DELAY_MS": "2500"}, wait_ready=False)
        try:
            x = harness.digits_images(1)
            st, h, b = srv.infer(x)
            self.assertEqual(st, 503, b)
            self.assertIn("loading", json.loads(b)["error"])
            self.assertIn("Retry-After", h)
            self.assertGreaterEqual(int(h["Retry-After"]), 1)
            st, h, b = srv.get("/v2/health/ready")
            self.assertEqual(st, 503)
            st, h, b = srv.get("/v2/models/digits/ready")
            self.assertEqual(st, 503)
            self.assertEqual(srv.get("/v2/health/live")[0], 200)
            srv.wait_ready()
            self.assertEqual(srv.infer(x)[0], 200)
            self.assertEqual(srv.stop(), 0)
        finally:
            srv.cleanup()
            repo.cleanup()


if __name__ == "__main__":
    unittest.main()
