"""The OpenAI-compatible endpoints of `edgerun serve` (/v1/chat/completions,
/v1/completions, /v1/models, /tokenize, /detokenize) driven by the official
`openai` Python client and by raw HTTP, against the real server binary and
the real SmolLM2-135M-Instruct (Q4_1) GGUF; nothing is mocked.

Two servers for the whole run: the main one (4 slots, ctx 512, an API key,
plus an ONNX model that must stay out of /v1) and a small one (1 slot, a
queue of 1, a max_tokens cap, no prefix cache, 16-token prefill steps) for
overload, caps and cold-cache references; test_deadline starts a third with
a 300 ms deadline. Greedy output is checked against `edgerun generate
--temp 0`, the engine's own command-line decoder.

A watchdog ends the whole run (servers included) if it ever passes
OVERALL_S, so the test cannot hang; every request has its own timeout too."""
import concurrent.futures
import faulthandler
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import unittest

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MODEL = "smol"
KEY = "edgerun-test-key-7f3a"
CTX = 512
SLOTS = 4
Q_CAP = 64                     # the small server's max_tokens cap
TIMEOUT = 60                   # per request, seconds
OVERALL_S = float(os.environ.get("EDGERUN_OPENAI_TEST_TIMEOUT", "600"))   # under ASan it takes ~3 min

STORY = "Once upon a time, in a small village by the sea, there lived an old fisherman who"
MIXED = "def fib(n):\n    # 斐波那契 numbers, the classic way\n    if n < 2:\n        return n\n"
FACTS = "The three most important inventions of the nineteenth century were"
EOG_QUESTION = "Answer with one word: what color is the sky?"
SYSTEM = ("You are the assistant of Harbor Lights Books, a small independent bookshop on the waterfront. "
          "The shop opens at nine in the morning and closes at seven in the evening from Monday to Saturday, "
          "and opens from eleven to five on Sundays. It sells new and used books, maps, postcards and "
          "stationery, and it runs a reading club for children every Wednesday afternoon. Customers may "
          "order any book in print; orders usually arrive within three working days. Used books are bought "
          "on Tuesdays and Thursdays only, after an appraisal by the owner, Margaret. Gift cards are sold in "
          "any amount from five to two hundred dollars and never expire. Returns are accepted within thirty "
          "days with a receipt. Answer politely, briefly, and only about the shop; if you do not know an "
          "answer, say so and suggest calling the shop during opening hours.")

_servers = []                  # for the watchdog


def watchdog():
    """Past OVERALL_S: dump every thread's stack, kill the servers, exit 3."""
    def fire():
        sys.stderr.write(f"\nwatchdog: the test ran past {OVERALL_S:.0f} s; stacks:\n")
        faulthandler.dump_traceback(all_threads=True)
        for s in _servers:
            try:
                s.proc.kill()
            except OSError:
                pass
        os._exit(3)
    t = threading.Timer(OVERALL_S, fire)
    t.daemon = True
    t.start()


def client_for(srv, key=KEY, **kw):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=key, timeout=TIMEOUT,
                         max_retries=0, **kw)


def chat_template():
    """SmolLM2's own chat template (from its GGUF), rendered with jinja2 the
    way transformers renders chat templates."""
    import gguf
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    r = gguf.GGUFReader(harness.smollm2_path())
    f = r.fields["tokenizer.chat_template"]
    src = bytes(f.parts[f.data[0]]).decode()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    tmpl = env.from_string(src)
    return lambda messages: tmpl.render(messages=messages, add_generation_prompt=True)


def generate(prompt, n, chat=False, system=None):
    """`edgerun generate --temp 0`: (text, prompt tokens, generated tokens),
    the text being the completion (the echoed prompt cut off) or the chat
    reply (its closing newline cut off); the counts from its report."""
    args = [harness.EDGERUN, "generate", harness.smollm2_path(), "--prompt", prompt, "-n", str(n), "--temp", "0"]
    if chat:
        args.append("--chat")
    if system:
        args += ["--system", system]
    p = subprocess.run(args, capture_output=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    out = p.stdout.decode()
    m = re.search(r"prompt: (\d+) tokens .*decode: (\d+) tokens", p.stderr.decode())
    assert m, p.stderr.decode(errors="replace")
    if chat:
        assert out.endswith("\n"), repr(out)
        return out[:-1], int(m[1]), int(m[2])
    assert out.startswith(prompt), repr(out[:200])
    return out[len(prompt):], int(m[1]), int(m[2])


class OpenAIEndpoints(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        gguf_path = harness.smollm2_path()
        # Class cleanups run even when setUpClass fails half way: no server is left behind.
        cls.repo = harness.Repo()
        cls.addClassCleanup(cls.repo.cleanup)
        harness.add_gguf(cls.repo, MODEL, 1, gguf_path,
                         config={"ctx": CTX, "slots": SLOTS, "timeout_ms": 120000})
        cls.repo.add("digits", 1)   # an ONNX model: never part of /v1
        cls.srv = harness.Server(cls.repo, "--api-key", KEY, auth=KEY)
        cls.addClassCleanup(cls.srv.cleanup)
        _servers.append(cls.srv)
        # The small server: one slot, one queue place, a max_tokens cap, no
        # prefix cache, prompts fed 16 tokens per step (a cold, chunked
        # reference for the main server's cached and batched results).
        cls.qrepo = harness.Repo()
        cls.addClassCleanup(cls.qrepo.cleanup)
        harness.add_gguf(cls.qrepo, MODEL, 1, gguf_path,
                         config={"ctx": 256, "slots": 1, "queue_size": 1, "max_tokens": Q_CAP, "n_batch": 16,
                                 "prefix_cache": False})
        cls.qsrv = harness.Server(cls.qrepo)
        cls.addClassCleanup(cls.qsrv.cleanup)
        _servers.append(cls.qsrv)
        cls.client = client_for(cls.srv)
        cls.qclient = client_for(cls.qsrv, key="unused")
        cls.render = staticmethod(chat_template())
        cls._greedy = {}

    @classmethod
    def tearDownClass(cls):
        rcs = {}
        for name in ("srv", "qsrv"):
            s = getattr(cls, name)
            rcs[name] = (s.stop(), s.stderr[-2000:])   # graceful: SIGTERM, drain, exit status
        for name, (rc, err) in rcs.items():
            assert rc == 0, f"{name} exit {rc}: {err}"

    # ---- helpers -----------------------------------------------------------

    def auth(self):
        return {"Authorization": "Bearer " + KEY}

    def tokenize(self, text, add_special=True, parse_special=False, **kw):
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        body.update(kw)
        st, _, b = self.srv.post_json("/tokenize", body, headers=self.auth())
        self.assertEqual(st, 200, b)
        return json.loads(b)["tokens"]

    def complete(self, prompt, n, client=None, **kw):
        """A greedy completion (unless told otherwise) of at most n tokens (None: no max_tokens sent)."""
        kw.setdefault("temperature", 0)
        return (client or self.client).completions.create(model=MODEL, prompt=prompt,
                                                          max_tokens=openai.omit if n is None else n, **kw)

    def chat(self, messages, n, client=None, **kw):
        kw.setdefault("temperature", 0)
        return (client or self.client).chat.completions.create(model=MODEL, messages=messages, max_tokens=n, **kw)

    def stream_completion(self, prompt, n, client=None, **kw):
        """(text, finish_reason, usage or None, chunks) of a streamed completion."""
        kw.setdefault("temperature", 0)
        chunks = list((client or self.client).completions.create(model=MODEL, prompt=prompt, max_tokens=n,
                                                                 stream=True, **kw))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(len(fins), 1, chunks)
        usage = [c.usage for c in chunks if c.usage]
        self.assertLessEqual(len(usage), 1)
        return text, fins[0], usage[0] if usage else None, chunks

    def stream_chat(self, messages, n, client=None, **kw):
        kw.setdefault("temperature", 0)
        chunks = list((client or self.client).chat.completions.create(model=MODEL, messages=messages, max_tokens=n,
                                                                      stream=True, **kw))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(len(fins), 1, chunks)
        usage = [c.usage for c in chunks if c.usage]
        self.assertLessEqual(len(usage), 1)
        return text, fins[0], usage[0] if usage else None, chunks

    def greedy(self, prompt, n):
        """The main server's greedy completion of prompt (cached per test run)."""
        if (prompt, n) not in self._greedy:
            r = self.complete(prompt, n)
            self.assertEqual(r.choices[0].finish_reason, "length", r)
            self.__class__._greedy[(prompt, n)] = r.choices[0].text
        return self._greedy[(prompt, n)]

    def metric(self, name, srv=None, **labels):
        srv = srv or self.srv
        v = srv.sample(srv.metrics(), name, model=MODEL, **labels)
        self.assertIsNotNone(v, f"metric {name}{labels} missing")
        return v

    def wait_idle(self, srv=None, timeout=10):
        srv = srv or self.srv
        srv.wait_for(lambda: self.metric("edgerun_llm_sequences_active", srv) == 0 and
                     self.metric("edgerun_llm_requests_queued", srv) == 0, timeout, "the engine to go idle")

    def assert_oai_error(self, body, status_type="invalid_request_error", param=None, code=None):
        """An OpenAI-shaped error body: {"error": {message, type, param, code}}."""
        e = json.loads(body)
        self.assertEqual(set(e), {"error"}, e)
        self.assertEqual(set(e["error"]), {"message", "type", "param", "code"}, e)
        self.assertIsInstance(e["error"]["message"], str)
        self.assertTrue(e["error"]["message"])
        self.assertEqual(e["error"]["type"], status_type, e)
        if param is not None:
            self.assertEqual(e["error"]["param"], param, e)
        if code is not None:
            self.assertEqual(e["error"]["code"], code, e)
        return e["error"]

    def raw_stream(self, path, body, srv=None, headers=None):
        """A raw socket with a streaming request sent on it."""
        srv = srv or self.srv
        data = json.dumps(body).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
        hdr = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(data)}\r\n")
        for k, v in (headers if headers is not None else self.auth()).items():
            hdr += f"{k}: {v}\r\n"
        s.sendall(hdr.encode() + b"\r\n" + data)
        return s

    # ---- /v1/models ----------------------------------------------------------

    def test_models_lists_the_llm_only(self):
        models = self.client.models.list()
        ids = [m.id for m in models.data]
        self.assertEqual(ids, [MODEL])   # digits is an ONNX model: not a language model
        m = models.data[0]
        self.assertEqual(m.object, "model")
        self.assertEqual(m.owned_by, "edgerun")
        st, _, b = self.srv.get("/v1/models", headers=self.auth())
        self.assertEqual(st, 200)
        raw = json.loads(b)
        self.assertEqual(raw["object"], "list")
        self.assertEqual(raw["data"][0]["context_length"], CTX)
        self.assertEqual(raw["data"][0]["slots"], SLOTS)
        self.assertGreater(raw["data"][0]["kv_cache_bytes"], 0)
        # The ONNX model is refused on /v1, and the LLM on /v2 infer.
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(model="digits", messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=4)
        self.assertIn("not a language model", e.exception.message)
        # One model by id (client.models.retrieve); an unknown id is a 404 in OpenAI's shape.
        one = self.client.models.retrieve(MODEL)
        self.assertEqual((one.id, one.object), (MODEL, "model"))
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("digits")
        st, _, b = self.srv.get("/v1/models/no-such-model", headers=self.auth())
        self.assertEqual(st, 404, b)
        self.assert_oai_error(b, "not_found_error")
        st, _, b = self.srv.post_json(f"/v2/models/{MODEL}/infer", {"inputs": []}, headers=self.auth())
        self.assertEqual(st, 400, b)
        self.assertIn("language model", json.loads(b)["error"])

    # ---- chat ------------------------------------------------------------------

    def test_chat_non_streamed(self):
        msgs = [{"role": "system", "content": "You are a concise assistant."},
                {"role": "user", "content": "Name three colors of the rainbow."}]
        r = self.chat(msgs, 24, user="test-user")
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id.startswith("chatcmpl-"), r.id)
        self.assertEqual(r.model, MODEL)
        self.assertEqual(len(r.choices), 1)
        c = r.choices[0]
        self.assertEqual(c.index, 0)
        self.assertEqual(c.message.role, "assistant")
        self.assertIsInstance(c.message.content, str)
        self.assertTrue(c.message.content.strip())
        self.assertIn(c.finish_reason, ("stop", "length"))
        u = r.usage
        self.assertEqual(u.total_tokens, u.prompt_tokens + u.completion_tokens)
        self.assertLessEqual(u.completion_tokens, 24)
        if c.finish_reason == "length":
            self.assertEqual(u.completion_tokens, 24)
        # prompt_tokens: the conversation in SmolLM2's template, tokenized
        # with special tokens parsed.
        self.assertEqual(u.prompt_tokens, len(self.tokenize(self.render(msgs), True, True)))
        # Content given as text parts, and the developer role (= system), change nothing.
        parts = [{"role": "developer", "content": [{"type": "text", "text": "You are a concise "},
                                                   {"type": "text", "text": "assistant."}]},
                 {"role": "user", "content": [{"type": "text", "text": "Name three colors of the rainbow."}]}]
        r2 = self.chat(parts, 24)
        self.assertEqual(r2.choices[0].message.content, c.message.content)
        self.assertEqual(r2.usage.prompt_tokens, u.prompt_tokens)

    def test_chat_streamed(self):
        msgs = [{"role": "user", "content": "Write two sentences about lighthouses."}]
        ref = self.chat(msgs, 32)
        text, fin, usage, chunks = self.stream_chat(msgs, 32, stream_options={"include_usage": True})
        self.assertEqual(text, ref.choices[0].message.content)
        self.assertEqual(fin, ref.choices[0].finish_reason)
        self.assertGreater(len(chunks), 3)
        self.assertEqual(len({c.id for c in chunks}), 1, "one id for every chunk of a stream")
        self.assertTrue(chunks[0].id.startswith("chatcmpl-"))
        for c in chunks:
            self.assertEqual(c.object, "chat.completion.chunk")
            self.assertEqual(c.model, MODEL)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual(chunks[-1].choices, [])     # the usage chunk comes last
        self.assertIsNotNone(chunks[-1].usage)
        self.assertIsNotNone(usage)
        # The same greedy request once more, not streamed: the same usage,
        # cached tokens included (each of the two found the prompt cached).
        again = self.chat(msgs, 32)
        self.assertEqual(again.choices[0].message.content, text)
        self.assertEqual(usage.model_dump(), again.usage.model_dump())
        # Without include_usage there is no usage anywhere.
        text2, _, usage2, chunks2 = self.stream_chat(msgs, 32)
        self.assertEqual(text2, text)
        self.assertIsNone(usage2)
        self.assertTrue(all(c.choices for c in chunks2))
        # Multi-byte text (CJK characters that take several tokens each):
        # no chunk splits a UTF-8 sequence, so nothing turns into U+FFFD.
        msgs = [{"role": "user", "content": "Translate 'good morning, my friend' into Chinese and Japanese."}]
        ref = self.chat(msgs, 40).choices[0].message.content
        self.assertTrue(sum(ord(ch) > 0x2e80 for ch in ref) >= 3, ref)
        self.assertNotIn("\ufffd", ref)
        text, _, _, chunks = self.stream_chat(msgs, 40)
        self.assertEqual(text, ref)

    def test_chat_greedy_matches_generate(self):
        cases = [("Write a short poem about the sea.", None, "length"),
                 ("What are your opening hours on Sunday?", SYSTEM, None),
                 # SmolLM2 ends this reply itself (end-of-generation token) well before 40 tokens.
                 (EOG_QUESTION, None, "stop")]
        for user, system, fin in cases:
            msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
            with self.subTest(user=user):
                want, n_prompt, n_gen = generate(user, 40, chat=True, system=system)
                r = self.chat(msgs, 40)
                self.assertEqual(r.choices[0].message.content, want)
                self.assertEqual((r.usage.prompt_tokens, r.usage.completion_tokens), (n_prompt, n_gen))
                self.assertEqual(r.choices[0].finish_reason, "length" if n_gen == 40 else "stop")
                if fin:
                    self.assertEqual(r.choices[0].finish_reason, fin)
                text, sfin, usage, _ = self.stream_chat(msgs, 40, stream_options={"include_usage": True})
                self.assertEqual((text, sfin, usage.completion_tokens), (want, r.choices[0].finish_reason, n_gen))

    # ---- completions ----------------------------------------------------------

    def test_completion_greedy_matches_generate(self):
        for prompt in (STORY, MIXED):
            with self.subTest(prompt=prompt[:20]):
                want, n_prompt, n_gen = generate(prompt, 48)
                self.assertEqual(n_gen, 48)
                r = self.complete(prompt, 48)
                self.assertEqual(r.usage.prompt_tokens, n_prompt)
                self.assertEqual(r.object, "text_completion")
                self.assertTrue(r.id.startswith("cmpl-"), r.id)
                self.assertEqual(r.choices[0].text, want)
                self.assertEqual(r.choices[0].finish_reason, "length")
                self.assertEqual(r.usage.completion_tokens, 48)
                text, fin, usage, chunks = self.stream_completion(prompt, 48, stream_options={"include_usage": True})
                self.assertEqual(text, want)
                self.assertEqual(fin, "length")
                for c in chunks:
                    self.assertEqual(c.object, "text_completion")
                self.assertEqual(len({c.id for c in chunks}), 1)
                self.assertEqual(usage.completion_tokens, 48)
                self.assertEqual(usage.prompt_tokens, r.usage.prompt_tokens)

    def test_sse_wire_format(self):
        """The stream on the wire, below the client: event-stream headers,
        one JSON object per event, the usage event, then [DONE]."""
        c = self.srv.conn(TIMEOUT)
        try:
            c.request("POST", "/v1/completions",
                      json.dumps({"model": MODEL, "prompt": STORY, "max_tokens": 12, "temperature": 0,
                                  "stream": True, "stream_options": {"include_usage": True}}),
                      dict(self.auth(), **{"Content-Type": "application/json"}))
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("Content-Type"), "text/event-stream")
            self.assertEqual(r.getheader("Cache-Control"), "no-cache")
            events = harness.sse_events(r)
        finally:
            c.close()
        self.assertEqual(events[-1], "[DONE]")
        objs = [json.loads(e) for e in events[:-1]]
        self.assertEqual(len({o["id"] for o in objs}), 1)
        body, last, usage = objs[:-2], objs[-2], objs[-1]
        self.assertTrue(all(o["choices"][0]["finish_reason"] is None and o["usage"] is None for o in body))
        self.assertEqual(last["choices"][0]["finish_reason"], "length")
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"]["completion_tokens"], 12)
        self.assertEqual("".join(o["choices"][0]["text"] for o in body + [last]), self.greedy(STORY, 12))

    def test_completion_prompt_forms(self):
        ids = self.tokenize(FACTS, add_special=True)
        want = self.complete(FACTS, 16)
        one = self.complete([FACTS], 16)
        tok = self.complete(ids, 16)
        for r in (one, tok):
            self.assertEqual(r.choices[0].text, want.choices[0].text)
            self.assertEqual(r.usage.prompt_tokens, len(ids))
        for bad in ("", [""], ["a", "b"], [], [10 ** 7], [-1], [1.5], {"x": 1}):
            with self.subTest(prompt=bad), self.assertRaises(openai.BadRequestError) as e:
                self.complete(bad, 4)
            self.assertEqual(e.exception.status_code, 400)

    def test_usage_counts(self):
        for prompt in (STORY, MIXED, FACTS):
            with self.subTest(prompt=prompt[:20]):
                r = self.complete(prompt, 8)
                u = r.usage
                self.assertEqual(u.prompt_tokens, len(self.tokenize(prompt, add_special=True)))
                self.assertEqual(u.completion_tokens, 8)
                self.assertEqual(u.total_tokens, u.prompt_tokens + 8)
                # The stream's final usage chunk equals the non-streamed usage
                # of the same greedy request run right after it.
                text, fin, su, _ = self.stream_completion(prompt, 8, stream_options={"include_usage": True})
                r2 = self.complete(prompt, 8)
                self.assertEqual(text, r2.choices[0].text)
                self.assertEqual(su.model_dump(), r2.usage.model_dump())

    # ---- stop strings and max_tokens ---------------------------------------------

    def test_stop_strings(self):
        base = self.greedy(STORY, 48)
        mid = len(base) // 2
        s1 = base[mid:mid + 7]           # most likely across a token boundary
        s2 = base[mid + 20:mid + 26]
        self.assertTrue(s1.strip() and s2.strip(), base)
        cut1 = base[:base.index(s1)]
        cases = [
            (s1, cut1, "stop"),
            ([s2, "zq#never#", s1], base[:min(base.index(s1), base.index(s2))], "stop"),
            (base[:3], "", "stop"),                         # at the very start: empty text
            ("zq#never#", base, "length"),
            (s1 + "zq#never#", base, "length"),             # a held-back prefix is flushed at the end
        ]
        for stop, want, fin in cases:
            with self.subTest(stop=stop):
                r = self.complete(STORY, 48, stop=stop)
                self.assertEqual(r.choices[0].text, want)
                self.assertEqual(r.choices[0].finish_reason, fin)
                text, sfin, _, chunks = self.stream_completion(STORY, 48, stop=stop)
                self.assertEqual(text, want)
                self.assertEqual(sfin, fin)
                if fin == "stop":
                    for st in ([stop] if isinstance(stop, str) else stop):
                        self.assertNotIn(st, text)
        # Chat, streamed, with a stop string taken from its own greedy reply.
        msgs = [{"role": "user", "content": "Describe a forest in the morning."}]
        reply = self.chat(msgs, 40).choices[0].message.content
        self.assertGreater(len(reply), 30, reply)
        stop = reply[len(reply) // 2:len(reply) // 2 + 5]
        text, fin, _, _ = self.stream_chat(msgs, 40, stop=[stop])
        self.assertEqual(text, reply[:reply.index(stop)])
        self.assertEqual(fin, "stop")
        r = self.chat(msgs, 40, stop=stop)
        self.assertEqual(r.choices[0].message.content, reply[:reply.index(stop)])
        # Bounds: at most 16 strings, none empty.
        for bad in ([f"s{i}" for i in range(17)], [""], "", [1]):
            with self.subTest(stop=bad), self.assertRaises(openai.BadRequestError) as e:
                self.complete(STORY, 4, stop=bad)
            self.assertEqual(e.exception.param, "stop")
        self.complete(STORY, 4, stop=[f"#{i}#" for i in range(16)])   # 16 is fine

    def test_max_tokens(self):
        base = self.greedy(STORY, 48)
        for n in (1, 7):
            with self.subTest(n=n):
                r = self.complete(STORY, n)
                self.assertEqual(r.choices[0].finish_reason, "length")
                self.assertEqual(r.usage.completion_tokens, n)
                self.assertTrue(r.choices[0].text)
                self.assertTrue(base.startswith(r.choices[0].text), (r.choices[0].text, base))
                text, fin, usage, _ = self.stream_completion(STORY, n, stream_options={"include_usage": True})
                self.assertEqual((text, fin, usage.completion_tokens), (r.choices[0].text, "length", n))
        msgs = [{"role": "user", "content": "Tell me a long story about a dragon."}]
        r = self.client.chat.completions.create(model=MODEL, messages=msgs, max_completion_tokens=5, temperature=0)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 5)
        for bad in (0, -1):
            with self.subTest(max_tokens=bad), self.assertRaises(openai.BadRequestError):
                self.complete(STORY, bad)

    def test_context_end_and_prompt_bounds(self):
        ids = self.tokenize("hello " * 700, add_special=True)
        self.assertGreater(len(ids), CTX)
        # The default max_prompt_tokens is ctx - 1.
        r = self.complete(ids[:CTX - 1], 1)
        self.assertEqual(r.usage.prompt_tokens, CTX - 1)
        self.assertEqual(r.choices[0].finish_reason, "length")
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(ids[:CTX], 1)
        self.assertEqual(e.exception.code, "context_length_exceeded")
        # No max_tokens: generation ends at the context's end, "length".
        r = self.complete(ids[:CTX - 10], None)
        self.assertEqual(r.choices[0].finish_reason, "length", r)
        self.assertIn(r.usage.completion_tokens, (10, 11), r.usage)   # the last token needs no position
        self.assertLessEqual(r.usage.prompt_tokens + r.usage.completion_tokens, CTX + 1)

    # ---- tokenize / detokenize ------------------------------------------------------

    def test_tokenize_detokenize(self):
        for text in (STORY, MIXED, "naïve café – 東京 🚀 done", " leading and trailing spaces  "):
            with self.subTest(text=text[:16]):
                ids = self.tokenize(text, add_special=False)
                self.assertTrue(ids and all(isinstance(i, int) for i in ids))
                st, _, b = self.srv.post_json("/detokenize", {"tokens": ids}, headers=self.auth())
                self.assertEqual(st, 200, b)
                self.assertEqual(json.loads(b)["content"], text)
                st, _, b = self.srv.post_json("/tokenize", {"content": text, "with_pieces": True, "model": MODEL},
                                              headers=self.auth())
                self.assertEqual(st, 200, b)
                pieces = json.loads(b)["tokens"]
                self.assertEqual([p["id"] for p in pieces], ids)
                if text.isascii():
                    self.assertEqual("".join(p["piece"] for p in pieces), text)
        # Special tokens: parsed as one token only when asked.
        special = self.tokenize("<|im_start|>user", add_special=False, parse_special=True)
        plain = self.tokenize("<|im_start|>user", add_special=False, parse_special=False)
        self.assertLess(len(special), len(plain))
        self.assertEqual(self.tokenize("<|im_start|>", add_special=False, parse_special=True), [1])
        # Bad input.
        for path, body in [("/tokenize", {"content": 5}), ("/tokenize", {"content": "x", "bogus": 1}),
                           ("/tokenize", {"content": "x", "model": "nosuch"}),
                           ("/detokenize", {"tokens": [10 ** 7]}), ("/detokenize", {"tokens": "x"}),
                           ("/tokenize", "not an object")]:
            with self.subTest(path=path, body=body):
                st, _, b = self.srv.post_json(path, body, headers=self.auth())
                self.assertIn(st, (400, 404), b)
                self.assert_oai_error(b, "invalid_request_error" if st == 400 else "not_found_error")

    # ---- errors ---------------------------------------------------------------------

    def test_bad_json_body(self):
        for path in ("/v1/chat/completions", "/v1/completions"):
            for body in (b"{not json", b"[]", b"", b'{"model": "smol", "model": "smol"}'):
                with self.subTest(path=path, body=body):
                    st, h, b = self.srv.request("POST", path, body,
                                                dict(self.auth(), **{"Content-Type": "application/json"}))
                    self.assertEqual(st, 400, b)
                    self.assertTrue(h.get("Content-Type", "").startswith("application/json"), h)
                    self.assert_oai_error(b)
        # Required fields.
        st, _, b = self.srv.post_json("/v1/chat/completions", {"model": MODEL}, headers=self.auth())
        self.assertEqual(st, 400)
        self.assert_oai_error(b, param="messages")
        st, _, b = self.srv.post_json("/v1/completions", {"prompt": "x"}, headers=self.auth())
        self.assertEqual(st, 400)
        self.assert_oai_error(b, param="model")

    def test_unknown_model(self):
        for call in (lambda: self.client.chat.completions.create(model="nosuch", max_tokens=4,
                                                                 messages=[{"role": "user", "content": "hi"}]),
                     lambda: self.client.completions.create(model="nosuch", prompt="hi", max_tokens=4),
                     lambda: self.client.completions.create(model="../etc", prompt="hi", max_tokens=4)):
            with self.assertRaises(openai.NotFoundError) as e:
                call()
            self.assertEqual(e.exception.status_code, 404)
            self.assertEqual(e.exception.code, "model_not_found")
            self.assertEqual(e.exception.param, "model")
            self.assertEqual(e.exception.type, "not_found_error")

    def test_over_long_prompt(self):
        long_text = "The sea was calm and the sky was clear. " * 80
        self.assertGreater(len(self.tokenize(long_text)), CTX)
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(long_text, 4)
        self.assertEqual(e.exception.code, "context_length_exceeded")
        self.assertEqual(e.exception.param, "prompt")
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat([{"role": "user", "content": long_text}], 4, stream=True)
        self.assertEqual(e.exception.code, "context_length_exceeded")
        self.assertEqual(e.exception.param, "messages")

    def test_api_key(self):
        bad = client_for(self.srv, key="wrong-key")
        with self.assertRaises(openai.AuthenticationError) as e:
            bad.models.list()
        self.assertEqual(e.exception.status_code, 401)
        with self.assertRaises(openai.AuthenticationError):
            bad.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        with self.assertRaises(openai.AuthenticationError):
            bad.completions.create(model=MODEL, prompt="hi", max_tokens=4, stream=True)
        # No Authorization header at all, through the client ...
        with self.assertRaises(openai.AuthenticationError):
            self.client.completions.create(model=MODEL, prompt="hi", max_tokens=4,
                                           extra_headers={"Authorization": openai.omit})
        # ... and raw, on every OpenAI-style endpoint.
        for method, path, body in [("GET", "/v1/models", None), ("POST", "/v1/completions", b"{}"),
                                   ("POST", "/v1/chat/completions", b"{}"), ("POST", "/tokenize", b"{}"),
                                   ("POST", "/detokenize", b"{}")]:
            with self.subTest(path=path):
                st, h, _ = self.srv.request(method, path, body, {"Content-Type": "application/json"})
                self.assertEqual(st, 401)
                self.assertEqual(h.get("WWW-Authenticate"), "Bearer")
                st, _, _ = self.srv.request(method, path, body, {"Authorization": "Bearer " + KEY + "x"})
                self.assertEqual(st, 401)
        # The right key works (the shared client carries it).
        self.assertEqual(self.complete(STORY, 2).usage.completion_tokens, 2)

    def test_unsupported_fields(self):
        msgs = [{"role": "user", "content": "hi"}]
        cases = [
            (dict(n=2), "n"),
            (dict(logprobs=True), "logprobs"),
            (dict(top_logprobs=2), "top_logprobs"),
            (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]), "tools"),
            (dict(temperature=2.5), "temperature"),
            (dict(temperature=-0.1), "temperature"),
            (dict(top_p=0), "top_p"),
            (dict(presence_penalty=3), "presence_penalty"),
            (dict(seed=1.5), "seed"),
            (dict(stream_options={"include_usage": True, "other": 1}), "stream_options"),
            (dict(extra_body={"prompt": "x"}), "prompt"),
            (dict(extra_body={"mirostat": 2}), "mirostat"),
            (dict(logit_bias={"15": 5}), "logit_bias"),
        ]
        for kw, param in cases:
            with self.subTest(kw=kw), self.assertRaises(openai.BadRequestError) as e:
                self.client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4, **kw)
            self.assertEqual(e.exception.status_code, 400)
            self.assertEqual(e.exception.param, param, e.exception.body)
            self.assertEqual(e.exception.type, "invalid_request_error")
            self.assertTrue(e.exception.body["message"])
        bad_msgs = [[], [{"role": "tool", "content": "x", "tool_call_id": "1"}],
                    [{"role": "user", "content": "x", "tool_calls": []}], [{"role": "user", "content": 5}],
                    [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], ["hi"]]
        for m in bad_msgs:
            with self.subTest(messages=m), self.assertRaises(openai.BadRequestError) as e:
                self.client.chat.completions.create(model=MODEL, messages=m, max_tokens=4)
            self.assertEqual(e.exception.param, "messages", e.exception.body)
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model=MODEL, prompt="x", max_tokens=4, echo=True)
        self.assertEqual(e.exception.param, "echo")
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model=MODEL, prompt="x", max_tokens=4, best_of=3)
        self.assertEqual(e.exception.param, "best_of")
        # Their default (no-op) values are accepted.
        r = self.client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=2, n=1, logprobs=False,
                                                response_format={"type": "text"}, temperature=0)
        self.assertEqual(r.usage.completion_tokens, 2)
        # 405 on the wrong method.
        st, _, _ = self.srv.get("/v1/chat/completions", headers=self.auth())
        self.assertEqual(st, 405)

    # ---- disconnects -------------------------------------------------------------------

    def test_disconnect_mid_stream(self):
        self.wait_idle()
        cancelled = self.metric("edgerun_llm_requests_finished_total", reason="cancelled")
        # Raw socket: read a few events of a long stream, then hang up.
        s = self.raw_stream("/v1/completions", {"model": MODEL, "prompt": STORY, "max_tokens": 400,
                                                "temperature": 0, "stream": True})
        buf = b""
        try:
            while buf.count(b"data: {") < 3:
                d = s.recv(4096)
                self.assertTrue(d, buf)
                buf += d
        finally:
            s.close()
        self.assertIn(b" 200 OK", buf.split(b"\r\n", 1)[0])
        self.assertIn(b"text/event-stream", buf)
        self.srv.wait_for(lambda: self.metric("edgerun_llm_requests_finished_total", reason="cancelled")
                          == cancelled + 1, 5, "the cancelled count to go up")
        self.srv.wait_for(lambda: self.metric("edgerun_llm_sequences_active") == 0, 5, "no active sequence")
        # The openai client closing its stream early is the same.
        stream = self.client.chat.completions.create(model=MODEL, max_tokens=400, temperature=0, stream=True,
                                                     messages=[{"role": "user", "content": "Tell me a long story."}])
        got = 0
        for c in stream:
            got += bool(c.choices and c.choices[0].delta.content)
            if got == 2:
                break
        stream.close()
        self.srv.wait_for(lambda: self.metric("edgerun_llm_requests_finished_total", reason="cancelled")
                          == cancelled + 2, 5, "the cancelled count to go up again")
        self.srv.wait_for(lambda: self.metric("edgerun_llm_sequences_active") == 0, 5, "no active sequence")
        # The log tells of it; the server goes on serving.
        gone = [e for e in self.srv.log_events()
                if e.get("event") == "llm_request" and e.get("finish") == "client_gone"]
        self.assertGreaterEqual(len(gone), 2)
        self.assertTrue(all(e["status"] == 499 for e in gone), gone)
        r = self.complete(STORY, 4)
        self.assertEqual(r.usage.completion_tokens, 4)
        self.assertTrue(self.greedy(STORY, 48).startswith(r.choices[0].text))

    def test_disconnect_while_waiting_non_streamed(self):
        """A non-streamed request's connection waits suspended; a client that
        hangs up still frees its slot within a step or two (the watchdog
        sees the end of the socket), and nothing is answered on it."""
        self.wait_idle()
        cancelled = self.metric("edgerun_llm_requests_finished_total", reason="cancelled")
        generated = self.metric("edgerun_llm_generated_tokens_total")
        s = self.raw_stream("/v1/completions", {"model": MODEL, "prompt": STORY, "max_tokens": 400,
                                                "temperature": 0})
        self.srv.wait_for(lambda: self.metric("edgerun_llm_sequences_active") == 1, 5, "the request to decode")
        s.close()
        self.srv.wait_for(lambda: self.metric("edgerun_llm_requests_finished_total", reason="cancelled")
                          == cancelled + 1, 5, "the cancelled count to go up")
        self.srv.wait_for(lambda: self.metric("edgerun_llm_sequences_active") == 0, 5, "no active sequence")
        self.assertLess(self.metric("edgerun_llm_generated_tokens_total") - generated, 400)
        r = self.complete(STORY, 4)
        self.assertEqual(r.usage.completion_tokens, 4)

    # ---- sampling ------------------------------------------------------------------------

    def test_seed_reproducible(self):
        kw = dict(temperature=1.0, top_p=1.0, max_tokens=32)
        a = self.client.completions.create(model=MODEL, prompt=FACTS, seed=1234, **kw).choices[0].text
        b = self.client.completions.create(model=MODEL, prompt=FACTS, seed=1234, **kw).choices[0].text
        self.assertEqual(a, b)
        text, _, _, _ = self.stream_completion(FACTS, 32, seed=1234, temperature=1.0, top_p=1.0)
        self.assertEqual(text, a)
        others = {self.client.completions.create(model=MODEL, prompt=FACTS, seed=s, **kw).choices[0].text
                  for s in (1, 2, 3)}
        self.assertTrue(others - {a}, "different seeds all gave the seed-1234 text: sampling ignores the seed")
        msgs = [{"role": "user", "content": "Invent a name for a cat."}]
        c1 = self.chat(msgs, 16, temperature=1.2, seed=99).choices[0].message.content
        c2 = self.chat(msgs, 16, temperature=1.2, seed=99).choices[0].message.content
        self.assertEqual(c1, c2)

    # ---- continuous batching -----------------------------------------------------------------

    def test_concurrent_streams_equal_single(self):
        msgs = [{"role": "user", "content": "Explain why the sky is blue in a few sentences."}]
        single = self.chat(msgs, 48).choices[0].message.content
        peak = [0]
        done = threading.Event()

        def poll():
            while not done.is_set():
                try:
                    peak[0] = max(peak[0], self.metric("edgerun_llm_sequences_active"))
                except Exception:   # noqa: BLE001 - a poll may race the end; the assertions decide
                    pass
                time.sleep(0.02)

        barrier = threading.Barrier(4)

        def one(_):
            barrier.wait(TIMEOUT)
            return self.stream_chat(msgs, 48)[0]

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            with concurrent.futures.ThreadPoolExecutor(4) as ex:
                got = list(ex.map(one, range(4), timeout=TIMEOUT * 2))
        finally:
            done.set()
            poller.join(5)
        for i, g in enumerate(got):
            self.assertEqual(g, single, f"stream {i} of 4 concurrent differs from the single request")
        self.assertGreaterEqual(peak[0], 2, "the 4 streams never decoded together")
        # Different prompts (prompt lengths, so prefill and decode mix in one batch).
        prompts = [STORY, MIXED, FACTS, "In 1969, the first humans to walk on the Moon"]
        alone = [self.greedy(p, 40) for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            together = list(ex.map(lambda p: self.stream_completion(p, 40)[0], prompts, timeout=TIMEOUT * 2))
        for p, a, t in zip(prompts, alone, together):
            self.assertEqual(t, a, f"prompt {p[:20]!r}: concurrent output differs from the single one")
        # Eight requests on four slots, arriving staggered, of different
        # lengths: some wait in the queue, and each joins the batch while
        # others are half done.
        jobs = list(zip(prompts + ["The history of Rome", "def quicksort(arr):", "Dear diary, today",
                                   "Photosynthesis is"], [20, 44, 30, 12, 36, 8, 40, 24]))
        alone = [self.greedy(p, n) for p, n in jobs]

        def staggered(i):
            time.sleep(0.04 * i)
            p, n = jobs[i]
            return self.stream_completion(p, n)[0] if i % 2 else self.complete(p, n).choices[0].text
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            together = list(ex.map(staggered, range(len(jobs)), timeout=TIMEOUT * 2))
        for (p, n), a, t in zip(jobs, alone, together):
            self.assertEqual(t, a, f"prompt {p[:20]!r} ({n} tokens): staggered output differs from the single one")
        self.wait_idle()

    # ---- prefix reuse -------------------------------------------------------------------------

    def test_prefix_reuse(self):
        def msgs(user):
            return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        u1, u2 = "When do you open on Saturday?", "Do you buy used books?"
        t1 = self.tokenize(self.render(msgs(u1)), True, True)
        t2 = self.tokenize(self.render(msgs(u2)), True, True)
        common = next(i for i, (a, b) in enumerate(zip(t1, t2)) if a != b)
        self.assertGreater(common, 150)
        r1 = self.chat(msgs(u1), 16)
        self.assertEqual(r1.usage.prompt_tokens, len(t1))
        reused = self.metric("edgerun_llm_prompt_tokens_reused_total")
        r2 = self.chat(msgs(u2), 16)
        self.assertEqual(r2.usage.prompt_tokens, len(t2))
        cached = r2.usage.prompt_tokens_details.cached_tokens
        self.assertGreater(cached, 0)
        self.assertEqual(cached, common, "the slot holding r1 shares exactly the common prefix")
        self.assertEqual(self.metric("edgerun_llm_prompt_tokens_reused_total"), reused + cached)
        # A cached prefix changes nothing in the output: the server without
        # a prefix cache (cold every time) answers the same.
        cold = self.chat(msgs(u2), 16, client=self.qclient)
        self.assertEqual(cold.usage.prompt_tokens_details.cached_tokens, 0)
        self.assertEqual(r2.choices[0].message.content, cold.choices[0].message.content)
        cold2 = self.chat(msgs(u2), 16, client=self.qclient)
        self.assertEqual(cold2.usage.prompt_tokens_details.cached_tokens, 0, "prefix_cache false still reused")

    # ---- metrics and status ----------------------------------------------------------------------

    def test_metrics_and_status(self):
        self.wait_idle()
        names = ["edgerun_llm_prompt_tokens_total", "edgerun_llm_generated_tokens_total",
                 "edgerun_llm_time_to_first_token_seconds_count", "edgerun_llm_time_per_output_token_seconds_count"]
        before = {n: self.metric(n) for n in names}
        length0 = self.metric("edgerun_llm_requests_finished_total", reason="length")
        stop0 = self.metric("edgerun_llm_requests_finished_total", reason="stop")
        r = self.complete(FACTS, 10)
        self.assertEqual(r.choices[0].finish_reason, "length")
        after = {n: self.metric(n) for n in names}
        self.assertEqual(after[names[0]] - before[names[0]], r.usage.prompt_tokens)
        self.assertEqual(after[names[1]] - before[names[1]], 10)
        self.assertEqual(after[names[2]] - before[names[2]], 1)
        self.assertEqual(after[names[3]] - before[names[3]], 9)
        self.assertEqual(self.metric("edgerun_llm_requests_finished_total", reason="length"), length0 + 1)
        # A stop string ends with reason "stop".
        base = self.greedy(FACTS, 10)
        self.complete(FACTS, 10, stop=base[4:8])
        self.assertEqual(self.metric("edgerun_llm_requests_finished_total", reason="stop"), stop0 + 1)
        # So does the end-of-generation token; it is not a generated token.
        gen0 = self.metric("edgerun_llm_generated_tokens_total")
        r = self.chat([{"role": "user", "content": EOG_QUESTION}], 40)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(self.metric("edgerun_llm_requests_finished_total", reason="stop"), stop0 + 2)
        self.assertEqual(self.metric("edgerun_llm_generated_tokens_total") - gen0, r.usage.completion_tokens)
        m = self.srv.metrics()
        h = [s for s in m["edgerun_llm_time_to_first_token_seconds"].samples
             if s.name.endswith("_bucket") and s.labels.get("le") == "+Inf"]
        self.assertEqual(h[0].value, self.metric("edgerun_llm_time_to_first_token_seconds_count"))
        self.assertEqual(self.metric("edgerun_llm_sequences_active"), 0)
        self.assertEqual(self.metric("edgerun_llm_requests_queued"), 0)
        ratio = self.metric("edgerun_llm_kv_cache_used_ratio")
        self.assertTrue(0 < ratio <= 1, ratio)
        kv_bytes = json.loads(self.srv.get("/v1/models", headers=self.auth())[2])["data"][0]["kv_cache_bytes"]
        self.assertEqual(self.metric("edgerun_llm_kv_cache_bytes"), kv_bytes)
        # /api/status.
        st, _, b = self.srv.get("/api/status", headers=self.auth())
        self.assertEqual(st, 200)
        status = json.loads(b)
        model = [x for x in status["models"] if x["name"] == MODEL][0]
        llm = model["llm"]
        self.assertEqual(llm["kv_total"], CTX * SLOTS)
        self.assertEqual((llm["active"], llm["queued"]), (0, 0))
        self.assertEqual(llm["generated_tokens"], self.metric("edgerun_llm_generated_tokens_total"))
        self.assertAlmostEqual(llm["kv_used"] / llm["kv_total"], ratio, places=4)
        self.assertNotIn("llm", [x for x in status["models"] if x["name"] == "digits"][0])
        series = status["series"]
        self.assertTrue(series and all("tok_s" in s and "ttft_ms" in s for s in series))

        def busy_second():
            ser = json.loads(self.srv.get("/api/status", headers=self.auth())[2])["series"]
            return any(s["tok_s"] > 0 and s["ttft_ms"] > 0 for s in ser)
        self.srv.wait_for(busy_second, 5, "a series entry with tok_s and ttft_ms")

    # ---- overload, caps (the small server) -------------------------------------------------------

    def test_queue_overflow(self):
        q = self.qsrv
        ref = self.complete(STORY, 40, client=self.qclient).choices[0].text
        self.assertEqual(ref, self.greedy(STORY, 40), "the two servers disagree on greedy output")
        barrier = threading.Barrier(6)

        def one(i):
            barrier.wait(TIMEOUT)
            try:
                if i % 2:
                    text, fin, usage, _ = self.stream_completion(STORY, 40, client=self.qclient,
                                                                 stream_options={"include_usage": True})
                    return ("ok", text, fin, usage.completion_tokens)
                r = self.complete(STORY, 40, client=self.qclient)
                return ("ok", r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens)
            except openai.RateLimitError as e:
                return ("429", e.response.headers.get("retry-after"), e.code, e.type)
            except Exception as e:  # noqa: BLE001 - reported by the assertions below
                return ("other", repr(e))

        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            futs = [ex.submit(one, i) for i in range(6)]
            res = [f.result(timeout=TIMEOUT * 2) for f in futs]   # none may hang
        took = time.time() - t0
        kinds = [r[0] for r in res]
        self.assertNotIn("other", kinds, res)
        ok = [r for r in res if r[0] == "ok"]
        busy = [r for r in res if r[0] == "429"]
        self.assertGreaterEqual(len(busy), 1, res)
        # One slot and one queue place: at most two of six at once.
        self.assertTrue(1 <= len(ok) <= 2, res)
        for r in ok:
            self.assertEqual(r[1:], (ref, "length", 40))
        for r in busy:
            self.assertIsNotNone(r[1], "429 without Retry-After")
            self.assertGreaterEqual(int(r[1]), 1)
            self.assertEqual((r[2], r[3]), ("rate_limit_exceeded", "rate_limit_error"))
        self.assertLess(took, TIMEOUT)
        self.wait_idle(q)
        # The raw 429 is OpenAI-shaped too: keep the slot busy and the queue
        # full with two long streams, then knock. The second is sent once
        # the first holds the slot, so the slot and the queue place are
        # known to be taken when the third knocks.
        s1 = self.raw_stream("/v1/completions", {"model": MODEL, "prompt": STORY, "max_tokens": Q_CAP,
                                                 "stream": True}, srv=q, headers={})
        s2 = None
        try:
            q.wait_for(lambda: self.metric("edgerun_llm_sequences_active", q) == 1, 10, "a busy slot")
            s2 = self.raw_stream("/v1/completions", {"model": MODEL, "prompt": FACTS, "max_tokens": Q_CAP,
                                                     "stream": True}, srv=q, headers={})
            q.wait_for(lambda: self.metric("edgerun_llm_sequences_active", q) == 1 and
                       self.metric("edgerun_llm_requests_queued", q) == 1, 10, "a busy slot and a full queue")
            st, h, b = q.post_json("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2})
            self.assertEqual(st, 429, b)
            self.assertEqual(h.get("Retry-After"), "1")
            self.assert_oai_error(b, "rate_limit_error", code="rate_limit_exceeded")
        finally:
            s1.close()
            if s2:
                s2.close()
        self.wait_idle(q)
        r = self.complete(STORY, 5, client=self.qclient)
        self.assertEqual(r.usage.completion_tokens, 5)

    def test_deadline(self):
        """config.json timeout_ms ends a generation with 504: an error
        response, or an error event mid-stream, which the client raises."""
        repo = harness.Repo()
        harness.add_gguf(repo, MODEL, 1, harness.smollm2_path(), config={"ctx": 512, "slots": 1, "timeout_ms": 300})
        srv = harness.Server(repo)
        _servers.append(srv)
        try:
            c = client_for(srv, key="unused")
            with self.assertRaises(openai.InternalServerError) as e:
                self.complete(STORY, 400, client=c)
            self.assertEqual(e.exception.status_code, 504)
            self.assertIn("deadline", e.exception.message)
            with self.assertRaises(openai.APIError) as e:
                self.stream_completion(STORY, 400, client=c)
            self.assertIn("deadline", e.exception.message)
            self.assertEqual(self.metric("edgerun_llm_requests_finished_total", srv, reason="error"), 2)
            self.wait_idle(srv)
        finally:
            rc = srv.stop()
            srv.cleanup()
            repo.cleanup()
        self.assertEqual(rc, 0, srv.stderr[-2000:])

    def test_max_tokens_cap(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(STORY, Q_CAP + 1, client=self.qclient)
        self.assertEqual(e.exception.param, "max_tokens")
        r = self.complete(STORY, None, client=self.qclient)   # the cap is the default
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, Q_CAP)
        self.assertTrue(r.choices[0].text.startswith(self.greedy(STORY, 48)))


if __name__ == "__main__":
    watchdog()
    unittest.main()
