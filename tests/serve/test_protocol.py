"""KServe v2 protocol over real HTTP, checked with raw requests and with the
official Triton/KServe client (tritonclient[http]): health, metadata,
readiness, infer with JSON tensors and with the binary-data extension,
repository index/load/unload, preprocessing, keep-alive."""
import json
import os
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)


class Protocol(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = harness.Repo()
        cls.repo.add("digits", 1, config={"max_batch": 16, "batch_delay_us": 200})
        # The same model fed raw 0..16 pixels as UINT8: the service scales them.
        cls.repo.add("digits_u8", 1, config={"preprocess": {"input": "input", "scale": 0.0625}})
        cls.srv = harness.Server(cls.repo)
        cls.x = harness.digits_images(8)
        cls.ref = harness.reference_logits(cls.x)

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        cls.srv.cleanup()
        cls.repo.cleanup()
        assert rc == 0, f"server exit {rc}: {cls.srv.stderr[-2000:]}"

    def test_health_and_metadata(self):
        self.assertEqual(self.srv.get("/v2/health/live")[0], 200)
        self.assertEqual(self.srv.get("/v2/health/ready")[0], 200)
        st, _, body = self.srv.get("/v2")
        meta = json.loads(body)
        self.assertEqual(st, 200)
        self.assertEqual(meta["name"], "edgerun")
        self.assertIn("binary_tensor_data", meta["extensions"])
        st, _, body = self.srv.get("/v2/models/digits")
        m = json.loads(body)
        self.assertEqual(m["inputs"], [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 8, 8]}])
        self.assertEqual(m["outputs"], [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}])
        self.assertEqual(m["versions"], ["1"])
        self.assertEqual(self.srv.get("/v2/models/digits/versions/1")[0], 200)
        self.assertEqual(self.srv.get("/v2/models/digits/ready")[0], 200)
        self.assertEqual(self.srv.get("/v2/models/digits/versions/1/ready")[0], 200)
        self.assertEqual(self.srv.get("/v2/models/digits/versions/7/ready")[0], 404)
        st, _, body = self.srv.get("/v2/models/digits/config")
        self.assertEqual(json.loads(body)["max_batch"], 16)

    def test_infer_json_matches_onnxruntime(self):
        st, h, body = self.srv.infer(self.x)
        self.assertEqual(st, 200, body)
        r = json.loads(body)
        self.assertEqual(r["model_name"], "digits")
        self.assertEqual(r["model_version"], "1")
        out = r["outputs"][0]
        self.assertEqual((out["name"], out["datatype"], out["shape"]), ("logits", "FP32", [8, 10]))
        got = np.array(out["data"], np.float32).reshape(8, 10)
        np.testing.assert_allclose(got, self.ref, **TOL)
        self.assertTrue((got.argmax(1) == harness.digits_labels(8)).sum() >= 7)

    def test_nested_json_data_and_id(self):
        x = self.x[:2]
        body = {"id": "req-42", "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, 8, 8],
                                             "data": x.tolist()}],
                "outputs": [{"name": "logits"}]}
        st, _, b = self.srv.post_json("/v2/models/digits/versions/1/infer", body)
        self.assertEqual(st, 200, b)
        r = json.loads(b)
        self.assertEqual(r["id"], "req-42")
        np.testing.assert_allclose(np.array(r["outputs"][0]["data"]).reshape(2, 10), self.ref[:2], **TOL)

    def test_infer_binary_raw(self):
        x = self.x[:3]
        hdr = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [3, 1, 8, 8],
                                      "parameters": {"binary_data_size": x.nbytes}}],
                          "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
        st, h, body = self.srv.request("POST", "/v2/models/digits/infer", hdr + x.tobytes(),
                                       {"Inference-Header-Content-Length": str(len(hdr)),
                                        "Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200, body)
        n = int(h["Inference-Header-Content-Length"])
        meta = json.loads(body[:n])
        out = meta["outputs"][0]
        self.assertEqual(out["parameters"]["binary_data_size"], 3 * 10 * 4)
        got = np.frombuffer(body[n:], np.float32).reshape(3, 10)
        np.testing.assert_allclose(got, self.ref[:3], **TOL)

    def test_tritonclient(self):
        import tritonclient.http as th
        c = th.InferenceServerClient(f"127.0.0.1:{self.srv.port}")
        try:
            self.assertTrue(c.is_server_live())
            self.assertTrue(c.is_server_ready())
            self.assertTrue(c.is_model_ready("digits"))
            self.assertEqual(c.get_server_metadata()["name"], "edgerun")
            md = c.get_model_metadata("digits")
            self.assertEqual(md["inputs"][0]["shape"], [-1, 1, 8, 8])
            for binary in (False, True):
                i = th.InferInput("input", list(self.x.shape), "FP32")
                i.set_data_from_numpy(self.x, binary_data=binary)
                o = th.InferRequestedOutput("logits", binary_data=binary)
                r = c.infer("digits", [i], outputs=[o], request_id="t1")
                np.testing.assert_allclose(r.as_numpy("logits"), self.ref, **TOL)
                self.assertEqual(r.get_response()["id"], "t1")
            # Without named outputs: binary_data_output applies to all.
            i = th.InferInput("input", list(self.x.shape), "FP32")
            i.set_data_from_numpy(self.x, binary_data=True)
            r = c.infer("digits", [i], model_version="1")
            np.testing.assert_allclose(r.as_numpy("logits"), self.ref, **TOL)
            idx = c.get_model_repository_index()
            self.assertIn({"name": "digits", "version": "1", "state": "READY", "reason": ""}, idx)
            with self.assertRaises(Exception) as e:
                c.get_model_metadata("nosuchmodel")
            self.assertIn("nosuchmodel", str(e.exception))
        finally:
            c.close()

    def test_preprocess_uint8(self):
        pix = np.rint(self.x[:4] * 16).astype(np.uint8)
        body = {"inputs": [{"name": "input", "datatype": "UINT8", "shape": [4, 1, 8, 8],
                            "data": pix.flatten().tolist()}]}
        st, _, b = self.srv.post_json("/v2/models/digits_u8/infer", body)
        self.assertEqual(st, 200, b)
        got = np.array(json.loads(b)["outputs"][0]["data"], np.float32).reshape(4, 10)
        np.testing.assert_allclose(got, harness.reference_logits(pix.astype(np.float32) / 16), **TOL)

    def test_keep_alive(self):
        c = self.srv.conn()
        try:
            for _ in range(5):
                c.request("GET", "/v2/health/ready")
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
                self.assertNotEqual(r.getheader("Connection"), "close")
            body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 8, 8],
                                           "data": self.x[0].flatten().tolist()}]})
            for _ in range(5):
                c.request("POST", "/v2/models/digits/infer", body)
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
        finally:
            c.close()

    def test_errors_are_json(self):
        for method, path, code in [("GET", "/v2/models/nosuch", 404), ("GET", "/nowhere", 404),
                                   ("POST", "/v2/health/live", 405), ("GET", "/v2/models/digits/infer", 405),
                                   ("DELETE", "/v2", 405)]:
            st, h, body = self.srv.request(method, path)
            self.assertEqual(st, code, (method, path, body))
            self.assertIn("error", json.loads(body))

    def test_repository_load_unload(self):
        st, _, b = self.srv.request("POST", "/v2/repository/models/digits_u8/unload")
        self.assertEqual(st, 200, b)
        st, _, b = self.srv.get("/v2/models/digits_u8/ready")
        self.assertEqual(st, 503)
        pix = np.zeros((1, 1, 8, 8), np.uint8)
        body = {"inputs": [{"name": "input", "datatype": "UINT8", "shape": [1, 1, 8, 8],
                            "data": pix.flatten().tolist()}]}
        st, _, b = self.srv.post_json("/v2/models/digits_u8/infer", body)
        self.assertEqual(st, 400)
        self.assertIn("unloaded", json.loads(b)["error"])
        # An unloaded model does not hold the server's readiness hostage.
        self.assertEqual(self.srv.get("/v2/health/ready")[0], 200)
        st, _, b = self.srv.request("POST", "/v2/repository/models/digits_u8/load")
        self.assertEqual(st, 200, b)
        st, _, b = self.srv.post_json("/v2/models/digits_u8/infer", body)
        self.assertEqual(st, 200, b)
        st, _, b = self.srv.post_json("/v2/repository/models/digits_u8/load",
                                      {"parameters": {"version": "9"}})
        self.assertEqual(st, 400)
        self.assertIn("error", json.loads(b))
        # A failed pinned load leaves the serving version in place.
        self.assertEqual(self.srv.post_json("/v2/models/digits_u8/infer", body)[0], 200)


if __name__ == "__main__":
    unittest.main()
