#!/usr/bin/env python3
"""edgerun serve against llama.cpp's llama-server: the same GGUF, the same
machine, the same run, the same slots and threads. A benchmark: it prints
numbers, ratios and whether the targets are met; it exits non-zero only
when a server misbehaves (a bad status, a broken stream, a failed start).

Each round starts one server, measures it and stops it; the servers
alternate round by round (edgerun, llama-server, edgerun, ...) and the
table gives medians over rounds. Per round:

  - one stream: decode tokens/s of one streamed /v1/completions request
    (completion tokens after the first over the time from the first text
    event to the last);
  - N concurrent streams (N = --slots, all started at once): all their
    completion tokens over the wall time from the first request sent to
    the last [DONE] (aggregate), and each stream's own decode tokens/s;
  - time to first token (TTFT) of a prompt of exactly 64 tokens: p50 of
    --ttft-requests sequential streamed requests with max_tokens 1, from
    the request sent to the first text event;
  - after an edgerun round, the engine's own prefill time of 64 tokens at
    the same thread count: `edgerun bench MODEL --llm -p 64 -n 0 -r 5`
    (64 / pp tokens/s), run right then so that it sees the same machine.

Every request has its own prompt, whose first token differs from every
other's, so neither server finds a prompt prefix in a slot's cache
(edgerun's prefix_cache, llama-server's cache_prompt): every TTFT is a
full prefill. Prompts are sent as token ids (edgerun's /tokenize), so
both servers see the same tokens. Generation is greedy (temperature 0)
with a fixed max_tokens; llama-server is told ignore_eos, edgerun (which
rejects unknown fields) gets story prompts that run past max_tokens, and
every request's usage.completion_tokens is checked to equal max_tokens.

The machine may be shared: the script measures the CPU time that other
processes use during each round (/proc/stat less the server's and its
own), reports it per round, and repeats a round in which it was over
--max-others percent (at most --retries times; then the round is kept and
its share shows in the table). --quiet-wait S also waits up to S seconds
before each round for the others to use under --quiet-below percent.

--load S: edgerun alone with --slots slots and a small queue (queue_size
--load-queue), --load-clients client threads (default twice the slots)
sending a mix of streamed and non-streamed /v1/completions and
/v1/chat/completions requests in a loop for S seconds (some streams
abandoned after a few tokens). Only 200 and 429 may come back; every
request has a timeout; the server's VmRSS and open files are sampled each
second along with GET /v2/health/ready. At the end four streams start,
the server gets SIGTERM while they are mid-stream, and each stream must
end with [DONE] (or end cleanly) and the server exit with status 0 within
40 s.

Usage: .venv/bin/python bench/llm_serve_bench.py [--rounds 3] [--max-tokens 128]
       [--slots 4] [--threads T] [--ttft-requests 10] [--no-llama] [--load 120]
       [--json out.json] [--max-others 20] [--retries 2] [--quiet-wait 60]
"""
import argparse
import datetime
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
from llm_assets import smollm2_path  # noqa: E402

EDGERUN = os.path.join(ROOT, "build", "edgerun")
LLAMA_SERVER = os.path.join(ROOT, ".cache", "llama.cpp-build", "bin", "llama-server")
NAME = "m"   # the model's name in edgerun's repository (llama-server ignores "model")

# First words of the prompts: each a different first token, so no prompt
# shares a cached prefix with another.
NAMES = ["Anna", "Ben", "Clara", "David", "Emma", "Frank", "Grace", "Henry", "Irene", "Jack", "Kate", "Leo",
         "Maria", "Nathan", "Olivia", "Peter", "Rachel", "Sam", "Tom", "Victor", "William", "Zoe", "Alice", "Bob"]
STORY = (" was a lighthouse keeper on a rocky island far from the coast. One stormy night a bottle washed up "
         "on the shore with an old map inside. Write a long story about what happened next.\n\nChapter 1\n\n")
FILLER = (" walked along the river on a cold morning, thinking about the old house at the end of the road, "
          "the garden behind it, the letters in the attic and the people who had lived there for a hundred "
          "years before the family moved to the city and left everything behind them")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port, path, timeout=2.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def proc_status(pid, key):
    """A /proc/PID/status field in kB (VmRSS, VmHWM), or 0."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]), idle


def background_busy(seconds=1.0):
    """Percent of the machine's CPU time used over `seconds` (by others:
    call it while no server of ours is running)."""
    t0, i0 = cpu_times()
    time.sleep(seconds)
    t1, i1 = cpu_times()
    return 100.0 * (1 - (i1 - i0) / max(1, t1 - t0))


def proc_cpu_ticks(pid):
    """utime + stime of a process, in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12])
    except OSError:
        return 0


class OthersMeter:
    """The share of the machine's CPU time that processes other than the
    server and this script use between start() and stop()."""

    def start(self, pid):
        self.pid = pid
        self.t = cpu_times()
        self.srv = proc_cpu_ticks(pid)
        self.me = sum(os.times()[:2])

    def stop(self):
        t, idle = cpu_times()
        total = t - self.t[0]
        busy = total - (idle - self.t[1])
        hz = os.sysconf("SC_CLK_TCK")
        ours = (proc_cpu_ticks(self.pid) - self.srv) + (sum(os.times()[:2]) - self.me) * hz
        return max(0.0, 100.0 * (busy - ours) / max(1, total))


def wait_quiet(max_wait, below):
    busy = background_busy()
    t0 = time.time()
    while busy > below and time.time() - t0 < max_wait:
        busy = background_busy(2.0)
    return busy


class Server:
    def __init__(self, kind, model, slots, threads, ctx, queue=64, extra_cfg=None):
        self.kind, self.port = kind, free_port()
        self.tmp = tempfile.mkdtemp(prefix="llm-serve-bench-")
        self.log_path = os.path.join(self.tmp, "log")
        log = open(self.log_path, "w")
        if kind == "edgerun":
            d = os.path.join(self.tmp, "repo", NAME, "1")
            os.makedirs(d)
            os.symlink(model, os.path.join(d, "model.gguf"))
            cfg = {"slots": slots, "ctx": ctx, "threads": threads, "queue_size": queue}
            cfg.update(extra_cfg or {})
            with open(os.path.join(self.tmp, "repo", NAME, "config.json"), "w") as f:
                json.dump(cfg, f)
            cmd = [EDGERUN, "serve", "--repo", os.path.join(self.tmp, "repo"), "--listen", f"127.0.0.1:{self.port}"]
            self.ready_path = "/v2/health/ready"
        else:
            # -c is the whole KV cache: slots x ctx (not unified: ctx per slot).
            cmd = [LLAMA_SERVER, "-m", model, "--host", "127.0.0.1", "--port", str(self.port), "-np", str(slots),
                   "-c", str(ctx * slots), "-t", str(threads), "-tb", str(threads), "--no-webui", "-cb"]
            self.ready_path = "/health"
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{kind} exited with {self.proc.returncode} at start: {self.log_tail()}")
            try:
                if http_status(self.port, self.ready_path) == 200:
                    break
            except OSError:
                pass
            if time.time() - t0 > 120:
                raise RuntimeError(f"{kind} not ready at {self.ready_path} in 120 s: {self.log_tail()}")
            time.sleep(0.1)
        self.start_s = time.time() - t0

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def peak_rss_mb(self):
        return proc_status(self.proc.pid, "VmHWM") / 1024

    def stop(self, keep=False):
        rc = self.proc.poll()
        if rc is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = "killed after 40 s"
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return rc


def post(port, path, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()


def stream(port, path, body, timeout=300, abandon_after=None, live=None):
    """One streamed request. Returns a dict: status, t0, t_first (first
    text event), t_last (last text event), t_end ([DONE] or end of stream),
    events (text events), done ([DONE] seen), clean (the stream ended
    without an error), usage, finish, timings (llama-server's), error.
    `live` (a dict), when given, gets the text event count as it goes."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    out = {"status": None, "t0": time.perf_counter(), "t_first": None, "t_last": None, "t_end": None, "events": 0,
           "done": False, "clean": False, "usage": None, "finish": None, "timings": None, "error": None}
    c = None
    try:
        c, r = post(port, path, body, timeout)
        out["status"] = r.status
        if r.status != 200:
            out["error"] = r.read()[:300].decode(errors="replace")
            out["retry_after"] = r.getheader("Retry-After")
            out["t_end"] = time.perf_counter()
            out["clean"] = True
            return out
        buf = b""
        while not out["done"]:
            chunk = r.read1(65536)
            if not chunk:
                out["clean"] = True   # the server closed the stream (chunked end) without [DONE]
                break
            buf += chunk.replace(b"\r\n", b"\n")
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                if not ev.startswith(b"data: "):
                    continue
                data = ev[6:]
                if data == b"[DONE]":
                    out["done"] = out["clean"] = True
                    break
                j = json.loads(data)
                if "error" in j:
                    out["error"] = j["error"]
                if j.get("usage"):
                    out["usage"] = j["usage"]
                if j.get("timings"):
                    out["timings"] = j["timings"]
                for ch in j.get("choices", []):
                    text = ch.get("text")
                    if text is None:
                        text = (ch.get("delta") or {}).get("content")
                    if text:
                        now = time.perf_counter()
                        out["t_first"] = out["t_first"] or now
                        out["t_last"] = now
                        out["events"] += 1
                        if live is not None:
                            live["events"] = out["events"]
                    if ch.get("finish_reason"):
                        out["finish"] = ch["finish_reason"]
            if abandon_after is not None and out["events"] >= abandon_after:
                out["abandoned"] = out["clean"] = True
                break
    except Exception as e:  # noqa: BLE001 - reported as the stream's error
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        out["t_end"] = time.perf_counter()
        if c is not None:
            c.close()
    return out


def tokens(port, text):
    c, r = post(port, "/tokenize", {"content": text, "add_special": True}, 60)
    ids = json.loads(r.read())["tokens"]
    c.close()
    return ids


def completion_body(kind, prompt_ids, max_tokens):
    body = {"model": NAME, "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0}
    if kind == "llama":
        body["ignore_eos"] = True
    return body


def decode_tps(s):
    n = (s["usage"] or {}).get("completion_tokens", s["events"])
    if not s["t_first"] or s["t_last"] <= s["t_first"] or n < 2:
        return 0.0
    return (n - 1) / (s["t_last"] - s["t_first"])


class Problems:
    """Server misbehaviour seen during the run (printed at the end)."""

    def __init__(self):
        self.items = []

    def check_stream(self, kind, what, s, max_tokens=None):
        if s["status"] != 200 or not s["done"] or s["error"]:
            self.items.append(f"{kind} {what}: status {s['status']}, done {s['done']}, error {s['error']}")
            return
        got = (s["usage"] or {}).get("completion_tokens")
        if max_tokens is not None and got != max_tokens:
            self.items.append(f"{kind} {what}: completion_tokens {got} != max_tokens {max_tokens} "
                              f"(finish {s['finish']})")
        cached = ((s["usage"] or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        if s["timings"]:
            cached = s["timings"].get("cache_n", cached)
        if cached:
            self.items.append(f"{kind} {what}: {cached} prompt tokens came from the cache")


def one_round(srv, prompts, ttft_prompts, max_tokens, slots, problems):
    kind, port = srv.kind, srv.port
    out = {}
    s = stream(port, "/v1/completions", completion_body(kind, prompts[0], max_tokens))
    problems.check_stream(kind, "one stream", s, max_tokens)
    out["one_tok_s"] = decode_tps(s)
    out["one_tokens"] = (s["usage"] or {}).get("completion_tokens", 0)
    res = [None] * slots
    go = threading.Barrier(slots)

    def run(i):
        go.wait()
        res[i] = stream(port, "/v1/completions", completion_body(kind, prompts[1 + i], max_tokens))
    ts = [threading.Thread(target=run, args=(i,)) for i in range(slots)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i, r in enumerate(res):
        problems.check_stream(kind, f"concurrent stream {i}", r, max_tokens)
    total = sum((r["usage"] or {}).get("completion_tokens", 0) for r in res)
    wall = max(r["t_end"] for r in res) - min(r["t0"] for r in res)
    out["agg_tok_s"] = total / wall
    out["agg_tokens"] = total
    out["agg_wall_s"] = wall
    out["per_stream_tok_s"] = statistics.median(decode_tps(r) for r in res)
    # Decode only: the sum of the streams' own decode rates (they overlap
    # but for the prefill at the start and the stragglers at the end).
    out["agg_decode_tok_s"] = sum(decode_tps(r) for r in res)
    out["concurrent_ttft_ms_max"] = max((r["t_first"] - r["t0"]) * 1000 for r in res if r["t_first"])
    ttfts, own = [], []
    for i, p in enumerate(ttft_prompts):
        s = stream(port, "/v1/completions", completion_body(kind, p, 1))
        problems.check_stream(kind, f"TTFT request {i}", s, 1)
        if s["t_first"]:
            ttfts.append((s["t_first"] - s["t0"]) * 1000)
        if s["timings"]:
            own.append(s["timings"]["prompt_ms"])
    out["ttft_p50_ms"] = statistics.median(ttfts) if ttfts else float("nan")
    out["ttft_min_ms"] = min(ttfts) if ttfts else float("nan")
    if own:
        out["server_prompt_ms_p50"] = statistics.median(own)   # llama-server's own prompt_ms
    out["peak_rss_mb"] = srv.peak_rss_mb()
    return out


def engine_prefill(model, threads, n=64):
    r = subprocess.run([EDGERUN, "bench", model, "--llm", "-p", str(n), "-n", "0", "-r", "5", "--threads",
                        str(threads), "--json", "--no-bandwidth"], capture_output=True, text=True, check=True)
    j = json.loads(r.stdout)
    return {"prefill_ms": n / j["pp_tps"] * 1000, "pp_tps": j["pp_tps"], "pp_tps_sd": j["pp_tps_sd"],
            "bench_ttft_ms": j["ttft_ms"]}


# ---------------------------------------------------------------- load test

def load_test(model, seconds, slots, threads, queue, n_clients, prompts):
    srv = Server("edgerun", model, slots, threads, 512, queue=queue)
    pid, port = srv.proc.pid, srv.port
    stop_at = time.time() + seconds
    lock = threading.Lock()
    codes, kinds, bad, worst = {}, {}, [], [0.0, ""]
    n_429_no_retry_after = [0]

    def record(code, what, latency, detail=None):
        with lock:
            codes[code] = codes.get(code, 0) + 1
            kinds[what] = kinds.get(what, 0) + 1
            if latency > worst[0]:
                worst[0], worst[1] = latency, what
            if detail and len(bad) < 20:
                bad.append(detail)

    def client(i):
        rng = random.Random(i)
        while time.time() < stop_at:
            p = prompts[rng.randrange(len(prompts))]
            max_tokens = rng.choice([8, 16, 32, 48, 64])
            chat = rng.random() < 0.3
            streamed = i % 2 == 1
            path = "/v1/chat/completions" if chat else "/v1/completions"
            body = {"model": NAME, "max_tokens": max_tokens, "temperature": rng.choice([0, 0.8])}
            if chat:
                body["messages"] = [{"role": "user", "content": "Tell me a story about a lighthouse keeper."}]
            else:
                body["prompt"] = p
            what = ("chat " if chat else "") + ("stream" if streamed else "plain")
            t0 = time.perf_counter()
            retry_after = None
            if streamed:
                abandon = 3 if rng.random() < 0.1 else None
                s = stream(port, path, body, timeout=60, abandon_after=abandon)
                code = s["status"] if s["status"] is not None else (s["error"] or "no status").split(":")[0]
                retry_after = s.get("retry_after")
                if s.get("abandoned"):
                    what += " abandoned"
                elif code == 200 and (not s["done"] or s["error"] or not s["usage"]):
                    code = "200-broken"
                    detail = f"{what}: 200 but done {s['done']}, usage {s['usage']}, error {s['error']}"
                    record(code, what, time.perf_counter() - t0, detail)
                    continue
                elif code not in (200, 429):
                    record(code, what, time.perf_counter() - t0, f"{what}: {code} {s['error']}")
                    continue
            else:
                c = None
                try:
                    c, r = post(port, path, body, 60)
                    data = r.read()
                    code = r.status
                    retry_after = r.getheader("Retry-After")
                    if code == 200:
                        j = json.loads(data)
                        if not j.get("choices") or not j.get("usage"):
                            code = "200-broken"
                    elif code != 429:
                        record(code, what, time.perf_counter() - t0, f"{what}: {code} {data[:200]!r}")
                        continue
                except Exception as e:  # noqa: BLE001
                    code = type(e).__name__
                    record(code, what, time.perf_counter() - t0, f"{what}: {e}")
                    continue
                finally:
                    if c is not None:
                        c.close()
            if code == 429 and retry_after is None:
                with lock:
                    n_429_no_retry_after[0] += 1
            record(code, what, time.perf_counter() - t0)
            if code == 429:
                time.sleep(0.05)   # back off a little: a hot retry loop would take a core from the server

    ts = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    for t in ts:
        t.start()
    samples = []   # (t, rss MB, fds, ready status, ready latency s)
    t_start = time.time()
    while time.time() < stop_at:
        t0 = time.perf_counter()
        try:
            st = http_status(port, "/v2/health/ready", timeout=5)
        except Exception as e:  # noqa: BLE001
            st = type(e).__name__
        samples.append((round(time.time() - t_start, 1), proc_status(pid, "VmRSS") / 1024, open_fds(pid), st,
                        time.perf_counter() - t0))
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
    for t in ts:
        t.join()
    time.sleep(1)
    rss_idle = proc_status(pid, "VmRSS") / 1024
    fds_idle = open_fds(pid)

    # SIGTERM while four streams are mid-stream.
    n_term = 4
    res = [None] * n_term
    live = [{"events": 0} for _ in range(n_term)]

    def long_stream(i):
        body = {"model": NAME, "prompt": prompts[i % len(prompts)], "max_tokens": 300, "temperature": 0}
        res[i] = stream(port, "/v1/completions", body, timeout=60, live=live[i])
    ts = [threading.Thread(target=long_stream, args=(i,)) for i in range(n_term)]
    for t in ts:
        t.start()
    t0 = time.time()
    while time.time() - t0 < 30 and not all(x["events"] >= 2 for x in live):
        time.sleep(0.02)
    events_at_term = [x["events"] for x in live]
    t_term = time.perf_counter()
    srv.proc.send_signal(signal.SIGTERM)
    after_term = {}
    time.sleep(0.2)
    try:
        after_term["ready_status"] = http_status(port, "/v2/health/ready", timeout=5)
    except Exception as e:  # noqa: BLE001
        after_term["ready_status"] = type(e).__name__
    s = stream(port, "/v1/completions", {"model": NAME, "prompt": prompts[0], "max_tokens": 4}, timeout=10)
    after_term["new_request"] = s["status"] if s["status"] is not None else (s["error"] or "").split(":")[0]
    for t in ts:
        t.join()
    try:
        rc = srv.proc.wait(40)
    except subprocess.TimeoutExpired:
        rc = "still running 40 s after SIGTERM"
        srv.proc.kill()
        srv.proc.wait()
    exit_s = time.perf_counter() - t_term
    log_tail = srv.log_tail(1500)
    shutil.rmtree(srv.tmp, ignore_errors=True)
    rss = [x[1] for x in samples]
    fds = [x[2] for x in samples]
    not_ready = [x for x in samples if x[3] != 200]
    term = []
    for r, at in zip(res, events_at_term):
        term.append({"events_before_term": at, "events": r["events"], "done": r["done"],
                     "clean": r["clean"], "finish": r["finish"], "status": r["status"], "error": r["error"],
                     "completion_tokens": (r["usage"] or {}).get("completion_tokens")})
    return {"seconds": seconds, "clients": n_clients, "slots": slots, "queue_size": queue,
            "codes": {str(k): v for k, v in sorted(codes.items(), key=lambda kv: str(kv[0]))},
            "requests_by_kind": kinds, "bad": bad, "worst_latency_s": worst[0], "worst_latency_kind": worst[1],
            "n_429_without_retry_after": n_429_no_retry_after[0],
            "rss_mb_first": rss[0], "rss_mb_max": max(rss), "rss_mb_last": rss[-1], "rss_mb_idle_after": rss_idle,
            "fds_first": fds[0], "fds_max": max(fds), "fds_idle_after": fds_idle,
            "ready_samples": len(samples), "not_ready_samples": [list(x) for x in not_ready],
            "ready_latency_max_s": max(x[4] for x in samples),
            "sigterm": {"streams": term, "after_term": after_term, "exit_code": rc, "exit_s": exit_s},
            "log_tail": log_tail, "rss_series": [[x[0], round(x[1], 1)] for x in samples]}


# --------------------------------------------------------------------- main

def build_prompts(port):
    """Story prompts (one per name) and 64-token prompts, as token ids, each
    with a different first token."""
    stories = [tokens(port, n + STORY) for n in NAMES]
    ttft = []
    for n in NAMES:
        ids = tokens(port, n + FILLER + FILLER)
        assert len(ids) >= 64, len(ids)
        ttft.append(ids[:64])
    firsts = [p[0] for p in stories]
    assert len(set(firsts)) == len(firsts), "prompts share a first token"
    return stories, ttft


def fmt(x, nd=1):
    return "" if x is None else f"{x:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ctx", type=int, default=1024, help="KV positions per slot (both servers)")
    ap.add_argument("--ttft-requests", type=int, default=10)
    ap.add_argument("--no-llama", action="store_true", help="skip llama-server")
    ap.add_argument("--load", type=int, default=0, help="seconds of the load test (0 = none)")
    ap.add_argument("--load-queue", type=int, default=2, help="queue_size in the load test")
    ap.add_argument("--load-clients", type=int, default=0, help="client threads in the load test (default 2 x slots)")
    ap.add_argument("--quiet-wait", type=float, default=0, help="wait up to S s before a round for a quiet machine")
    ap.add_argument("--quiet-below", type=float, default=15, help="'quiet': others use under this %% of the CPUs")
    ap.add_argument("--max-others", type=float, default=20,
                    help="repeat a round in which other processes used over this %% of the CPUs")
    ap.add_argument("--retries", type=int, default=2, help="at most this many repeats of a round (then kept)")
    ap.add_argument("--json", help="write all results to this file")
    a = ap.parse_args()
    model = smollm2_path()
    if not os.path.exists(EDGERUN):
        sys.exit(f"{EDGERUN} not built: make build")
    kinds = ["edgerun"]
    if not a.no_llama:
        if not os.path.exists(LLAMA_SERVER):
            sys.exit(f"{LLAMA_SERVER} not built (make llama-cpp), or pass --no-llama")
        kinds.append("llama")
    n_ttft = min(a.ttft_requests, len(NAMES))
    if 1 + a.slots + 1 > len(NAMES):
        sys.exit(f"at most {len(NAMES) - 2} slots")

    probe = Server("edgerun", model, 1, a.threads, a.ctx)
    stories, ttft_prompts = build_prompts(probe.port)
    probe.stop()
    # Story prompts: [0] one stream, [1..slots] concurrent, the last for the warm-up.
    round_prompts = stories[:1 + a.slots]
    warm = stories[-1]
    # The 64-token prompts begin with the same names as the stories: take
    # those of names no story of a round uses.
    ttft_set = ttft_prompts[1 + a.slots:1 + a.slots + n_ttft]
    if len(ttft_set) < n_ttft:
        ttft_set += ttft_prompts[:n_ttft - len(ttft_set)]

    problems = Problems()
    rounds = {k: [] for k in kinds}
    prefill = []
    busy = {k: [] for k in kinds}
    contended = {k: 0 for k in kinds}
    stop_codes = {k: [] for k in kinds}
    for r in range(a.rounds):
        for k in kinds:
            for attempt in range(1 + a.retries):
                b = wait_quiet(a.quiet_wait, a.quiet_below) if a.quiet_wait else background_busy()
                srv = Server(k, model, a.slots, a.threads, a.ctx)
                try:
                    stream(srv.port, "/v1/completions", completion_body(k, warm, 8))   # warm-up
                    meter = OthersMeter()
                    meter.start(srv.proc.pid)
                    res = one_round(srv, round_prompts, ttft_set, a.max_tokens, a.slots, problems)
                    res["others_before_pct"] = b
                    res["others_during_pct"] = meter.stop()
                finally:
                    rc = srv.stop()
                    stop_codes[k].append(rc)
                    if rc != 0:
                        problems.items.append(f"{k} exited with {rc} at SIGTERM after round {r + 1}")
                print(f"round {r + 1}{'' if not attempt else f' (try {attempt + 1})'} {k}: "
                      + ", ".join(f"{m} {v:.1f}" for m, v in res.items()), file=sys.stderr, flush=True)
                if res["others_during_pct"] <= a.max_others:
                    break
                if attempt < a.retries:
                    contended[k] += 1
                    print(f"  others used {res['others_during_pct']:.0f}% of the CPUs: round repeated",
                          file=sys.stderr, flush=True)
            rounds[k].append(res)
            busy[k].append(res["others_during_pct"])
            if k == "edgerun":
                prefill.append(engine_prefill(model, a.threads))
    med = {k: {m: statistics.median(x[m] for x in rounds[k] if m in x) for m in rounds[k][0]} for k in kinds}
    pre = {m: statistics.median(p[m] for p in prefill) for m in prefill[0]}

    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    label = {"edgerun": "edgerun serve", "llama": "llama-server"}
    print(f"\nSmolLM2-135M-Instruct Q4_1; {a.threads} threads, {a.slots} slots of {a.ctx} positions, "
          f"max_tokens {a.max_tokens}; medians of {a.rounds} alternating rounds; {cpu}, {os.cpu_count()} CPUs; "
          f"edgerun {commit}; {datetime.date.today()}\n")
    print(f"| server | 1 stream decode tok/s | {a.slots} streams aggregate tok/s (wall) | ratio to 1 stream | "
          f"{a.slots} streams aggregate decode tok/s | ratio to 1 stream | per-stream decode tok/s | "
          f"TTFT p50, 64-token prompt (ms) | peak RSS MB | others' CPU % during each round |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in kinds:
        m = med[k]
        print(f"| {label[k]} | {m['one_tok_s']:.1f} | {m['agg_tok_s']:.1f} | {m['agg_tok_s'] / m['one_tok_s']:.2f}x | "
              f"{m['agg_decode_tok_s']:.1f} | {m['agg_decode_tok_s'] / m['one_tok_s']:.2f}x | "
              f"{m['per_stream_tok_s']:.1f} | {m['ttft_p50_ms']:.1f} | {m['peak_rss_mb']:.0f} | "
              f"{' / '.join(f'{x:.0f}' for x in busy[k])} |")
    e = med["edgerun"]
    ratio_ttft = e["ttft_p50_ms"] / pre["prefill_ms"]
    targets = [
        (f"edgerun: aggregate decode tok/s at {a.slots} streams >= 2x one stream",
         f"{e['agg_decode_tok_s'] / e['one_tok_s']:.2f}x", e["agg_decode_tok_s"] >= 2 * e["one_tok_s"]),
        ("edgerun: the same, aggregate over the wall time (prefills included)",
         f"{e['agg_tok_s'] / e['one_tok_s']:.2f}x", e["agg_tok_s"] >= 2 * e["one_tok_s"]),
        (f"edgerun: TTFT p50 of a 64-token prompt <= 1.2x the engine's prefill of 64 tokens "
         f"({pre['prefill_ms']:.1f} ms, `edgerun bench --llm -p 64`)", f"{ratio_ttft:.2f}x", ratio_ttft <= 1.2),
    ]
    if "llama" in med:
        lr = e["agg_tok_s"] / med["llama"]["agg_tok_s"]
        targets.append((f"edgerun aggregate tok/s (wall) >= llama-server's at {a.slots} slots", f"{lr:.2f}x",
                        lr >= 1.0))
        ld = e["agg_decode_tok_s"] / med["llama"]["agg_decode_tok_s"]
        targets.append((f"edgerun aggregate decode tok/s >= llama-server's at {a.slots} slots", f"{ld:.2f}x",
                        ld >= 1.0))
    print("\n| target | measured | met |\n|---|---|---|")
    for t, v, ok in targets:
        print(f"| {t} | {v} | {'yes' if ok else 'NO'} |")
    extra = (f"\nengine prefill of 64 tokens: {pre['prefill_ms']:.1f} ms (pp {pre['pp_tps']:.1f} tok/s, "
             f"medians of {len(prefill)} runs of -r 5, each right after an edgerun round); the engine's own TTFT "
             f"(prefill + first token) {pre['bench_ttft_ms']:.1f} ms")
    if "llama" in med and "server_prompt_ms_p50" in med["llama"]:
        lm = med["llama"]
        extra += (f"; llama-server's own prompt_ms p50 {lm['server_prompt_ms_p50']:.1f} ms against its TTFT p50 "
                  f"{lm['ttft_p50_ms']:.1f} ms ({lm['ttft_p50_ms'] / lm['server_prompt_ms_p50']:.2f}x)")
    print(extra)
    print(f"rounds repeated because other processes used over {a.max_others:.0f}% of the CPUs: "
          + ", ".join(f"{label[k]} {contended[k]}" for k in kinds))
    print("every request generated exactly max_tokens: "
          + ("yes" if not any("completion_tokens" in p for p in problems.items) else "NO (see problems)"))

    out = {"meta": {"commit": commit, "cpu": cpu, "cpus": os.cpu_count(), "date": str(datetime.date.today()),
                    "args": vars(a), "model": model},
           "rounds": rounds, "median": med, "engine_prefill": prefill, "engine_prefill_median": pre,
           "others_busy_pct": busy, "rounds_repeated": contended, "stop_codes": stop_codes,
           "targets": [{"target": t, "measured": v, "met": ok} for t, v, ok in targets]}
    if a.load:
        n_clients = a.load_clients or 2 * a.slots
        print(f"\nload test: {a.load} s, {n_clients} clients, {a.slots} slots, queue_size {a.load_queue} ...",
              file=sys.stderr, flush=True)
        lt = load_test(model, a.load, a.slots, a.threads, a.load_queue, n_clients, stories)
        out["load"] = lt
        codes_ok = set(lt["codes"]) <= {"200", "429"}
        term = lt["sigterm"]
        print(f"\n| load test ({a.load} s, {n_clients} clients, {a.slots} slots, queue_size {a.load_queue}) | result |")
        print("|---|---|")
        print(f"| responses by status | {', '.join(f'{k}: {v}' for k, v in lt['codes'].items())} |")
        print(f"| requests by kind | {', '.join(f'{k}: {v}' for k, v in sorted(lt['requests_by_kind'].items()))} |")
        print(f"| longest request (s) | {lt['worst_latency_s']:.1f} ({lt['worst_latency_kind']}) |")
        print(f"| VmRSS MB first / max / last / idle after | {lt['rss_mb_first']:.1f} / {lt['rss_mb_max']:.1f} / "
              f"{lt['rss_mb_last']:.1f} / {lt['rss_mb_idle_after']:.1f} |")
        print(f"| open files first / max / idle after | {lt['fds_first']} / {lt['fds_max']} / {lt['fds_idle_after']} |")
        print(f"| /v2/health/ready not 200 | {len(lt['not_ready_samples'])} of {lt['ready_samples']} samples "
              f"(slowest answer {lt['ready_latency_max_s'] * 1000:.0f} ms) |")
        sts = term["streams"]
        print(f"| SIGTERM mid-stream: streams ended with [DONE] | {sum(s['done'] for s in sts)} of {len(sts)} "
              f"(tokens before SIGTERM {[s['events_before_term'] for s in sts]}, total "
              f"{[s['completion_tokens'] for s in sts]}, finish {[s['finish'] for s in sts]}) |")
        print(f"| SIGTERM: readiness / a new request during the drain | {term['after_term']['ready_status']} / "
              f"{term['after_term']['new_request']} |")
        print(f"| SIGTERM: exit status, seconds to exit | {term['exit_code']}, {term['exit_s']:.1f} |")
        if not codes_ok:
            problems.items.append(f"load: statuses other than 200/429: {lt['codes']}; first few: {lt['bad'][:5]}")
        if lt["n_429_without_retry_after"]:
            problems.items.append(f"load: {lt['n_429_without_retry_after']} 429 answers without Retry-After")
        if lt["not_ready_samples"]:
            problems.items.append(f"load: readiness not 200: {lt['not_ready_samples'][:5]}")
        if any(not (s["done"] or (s["clean"] and not s["error"])) for s in sts):
            problems.items.append(f"SIGTERM: a stream broke: {sts}")
        if term["exit_code"] != 0:
            problems.items.append(f"SIGTERM: exit {term['exit_code']}; log: {lt['log_tail'][-600:]}")
    if problems.items:
        print("\nproblems:")
        for p in problems.items:
            print(f"  - {p}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.exit(1 if problems.items else 0)


if __name__ == "__main__":
    main()
