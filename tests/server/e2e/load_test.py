#!/usr/bin/python3
"""Loopback load test of `msa serve` (run through run_with_server.py): CLIENTS concurrent streaming clients send
REQUESTS chat requests in all; every CANCEL_EVERY-th one drops its connection after a few chunks. Checks that
every other request completes with a well-formed stream (role chunk, deltas, one finish_reason, usage, [DONE]) and
exactly max_tokens tokens, or is refused with 429/503 and the error envelope; that nothing hangs (per-request and
overall deadlines); that the server ends with no request running or waiting and its KV cache empty; and that its
resident memory returns near the baseline measured after a warm-up round. Prints the figures as one JSON line."""
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

BASE = urllib.parse.urlparse(os.environ["MSA_BASE_URL"])
KEY = os.environ["MSA_API_KEY"]
MODEL = os.environ["MSA_MODEL"]
PID = int(os.environ["MSA_SERVER_PID"])
CLIENTS = int(os.environ.get("LOAD_CLIENTS", "64"))
REQUESTS = int(os.environ.get("LOAD_REQUESTS", "320"))
CANCEL_EVERY = int(os.environ.get("LOAD_CANCEL_EVERY", "5"))
MAX_TOKENS = int(os.environ.get("LOAD_MAX_TOKENS", "24"))
RSS_SLACK_MB = float(os.environ.get("LOAD_RSS_SLACK_MB", "48"))
REQUEST_TIMEOUT = 120


def rss_mb() -> float:
    with open(f"/proc/{PID}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def metrics() -> dict:
    c = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("vllm:") and "{" in line and "_bucket" not in line:
            name = line.split("{")[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def one_request(i: int) -> dict:
    cancel = CANCEL_EVERY > 0 and i % CANCEL_EVERY == CANCEL_EVERY - 1
    body = json.dumps({
        "model": MODEL, "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": f"Request {i}: tell me a story."}],
        "max_tokens": MAX_TOKENS * (20 if cancel else 1), "ignore_eos": True, "temperature": 1.0, "seed": i,
        "chat_template_kwargs": {"thinking_mode": "disabled"},
    })
    t0 = time.time()
    conn = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        r = conn.getresponse()
        if r.status != 200:
            payload = json.loads(r.read())
            assert r.status in (429, 503), (r.status, payload)
            assert set(payload["error"]) == {"message", "type", "param", "code"}
            return {"kind": "refused", "status": r.status}
        frames, buf, chunks = [], b"", 0
        while True:
            data = r.read1(65536) if hasattr(r, "read1") else r.read(1024)
            if not data:
                break
            buf += data
            while b"\n\n" in buf:
                frame, buf = buf.split(b"\n\n", 1)
                frames.append(frame.decode())
                chunks += 1
            if cancel and chunks >= 3:
                conn.sock.close()  # the client goes away mid-stream
                return {"kind": "cancelled", "seconds": time.time() - t0}
        assert frames and frames[-1] == "data: [DONE]", frames[-3:]
        events = [json.loads(f[6:]) for f in frames[:-1] if f.startswith("data: ")]
        assert events[0]["choices"][0]["delta"].get("role") == "assistant"
        finishes = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
        assert finishes == ["length"], finishes
        usage = events[-1]["usage"]
        assert usage["completion_tokens"] == MAX_TOKENS, usage
        return {"kind": "ok", "seconds": time.time() - t0, "tokens": usage["completion_tokens"]}
    finally:
        conn.close()


def run_round(n: int):
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        return list(pool.map(one_request, range(n)))


def main() -> int:
    run_round(CLIENTS)  # warm-up: thread pools, allocator arenas, the KV pages a full batch touches
    time.sleep(1)
    baseline = rss_mb()
    t0 = time.time()
    results = []
    failures = []

    def guarded(i):
        try:
            return one_request(i)
        except Exception as e:  # noqa: BLE001 (every failure is reported)
            failures.append(f"request {i}: {e!r}")
            return {"kind": "failed"}

    done = threading.Event()
    watchdog = threading.Timer(600, lambda: (print("FAILED: the load test hung for 600 s"), os._exit(1)))
    watchdog.start()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        results = list(pool.map(guarded, range(REQUESTS)))
    done.set()
    watchdog.cancel()
    wall = time.time() - t0

    deadline = time.time() + 10
    m = metrics()
    while (m.get("vllm:num_requests_running", 0) or m.get("vllm:num_requests_waiting", 0)) and time.time() < deadline:
        time.sleep(0.1)
        m = metrics()
    time.sleep(1)
    after = rss_mb()
    kinds = {k: sum(1 for r in results if r["kind"] == k) for k in ("ok", "cancelled", "refused", "failed")}
    ok_latencies = sorted(r["seconds"] for r in results if r["kind"] == "ok")
    tokens = sum(r.get("tokens", 0) for r in results)
    figures = {
        "clients": CLIENTS, "requests": REQUESTS, **kinds, "wall_s": round(wall, 2),
        "requests_per_s": round(kinds["ok"] / wall, 2), "completed_tokens_per_s": round(tokens / wall, 1),
        "p50_latency_s": round(ok_latencies[len(ok_latencies) // 2], 3) if ok_latencies else None,
        "p99_latency_s": round(ok_latencies[int(len(ok_latencies) * 0.99) - 1], 3) if ok_latencies else None,
        "rss_baseline_mb": round(baseline, 1), "rss_after_mb": round(after, 1),
        "running_after": m.get("vllm:num_requests_running"), "waiting_after": m.get("vllm:num_requests_waiting"),
        "kv_cache_usage_after": m.get("vllm:kv_cache_usage_perc"),
    }
    print(json.dumps(figures))
    errors = list(failures[:10])
    if kinds["failed"]:
        errors.append(f"{kinds['failed']} requests failed")
    if kinds["ok"] == 0:
        errors.append("no request completed")
    expected_cancelled = sum(1 for i in range(REQUESTS) if CANCEL_EVERY and i % CANCEL_EVERY == CANCEL_EVERY - 1)
    if kinds["cancelled"] + kinds["refused"] < expected_cancelled:
        errors.append("some cancelling clients finished instead of cancelling")
    if m.get("vllm:num_requests_running") or m.get("vllm:num_requests_waiting"):
        errors.append("requests still running or waiting after the load")
    if m.get("vllm:kv_cache_usage_perc"):
        errors.append("KV cache pages still referenced after the load")
    if after > baseline + RSS_SLACK_MB:
        errors.append(f"RSS grew from {baseline:.1f} MB to {after:.1f} MB")
    for e in errors:
        print("FAILED:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
