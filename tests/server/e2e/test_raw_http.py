"""Raw-HTTP tests of `msa serve` (pytest + requests): SSE framing byte by byte and malformed input. Run through
run_with_server.py, which starts the server on a random-weight model and sets MSA_BASE_URL, MSA_API_KEY and
MSA_MODEL."""
import json
import os
import socket
import urllib.parse

import pytest
import requests

BASE = os.environ["MSA_BASE_URL"]
KEY = os.environ["MSA_API_KEY"]
MODEL = os.environ["MSA_MODEL"]
AUTH = {"Authorization": f"Bearer {KEY}"}
NO_THINK = {"chat_template_kwargs": {"thinking_mode": "disabled"}}


def chat(**extra):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, **NO_THINK}
    body.update(extra)
    return body


def post(path, body=None, data=None, headers=None, **kw):
    h = dict(AUTH)
    h.update(headers or {})
    if body is not None:
        data = json.dumps(body)
        h.setdefault("Content-Type", "application/json")
    return requests.post(BASE + path, data=data, headers=h, timeout=60, **kw)


def assert_error(r, status, type_, param=None, code=None):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == type_
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err


def sse_frames(raw: bytes):
    """Splits an SSE body into frames, asserting the framing: UTF-8, LF only, frames end with a blank line."""
    text = raw.decode("utf-8")
    assert "\r" not in text
    assert text.endswith("\n\n")
    return text[:-2].split("\n\n")


def test_sse_framing_role_deltas_finish_usage_done():
    r = post("/v1/chat/completions", chat(stream=True, stream_options={"include_usage": True}, max_tokens=6,
                                          ignore_eos=True), stream=True)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/event-stream"
    assert r.headers.get("Cache-Control") == "no-cache"
    frames = sse_frames(r.raw.read())
    assert frames[-1] == "data: [DONE]"
    events = [json.loads(f[len("data: "):]) for f in frames[:-1] if not f.startswith(":")]
    for f in frames[:-1]:
        assert f.startswith("data: ") or f.startswith(":"), f
        assert "\n" not in f  # one line per event
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    ids = {e["id"] for e in events}
    assert len(ids) == 1
    finishes = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
    assert finishes == ["length"]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 6
    for e in events[:-1]:
        assert "usage" not in e or e["usage"] is None


def test_completions_stream_framing():
    r = post("/v1/completions", {"model": MODEL, "prompt": "abc", "max_tokens": 4, "stream": True}, stream=True)
    frames = sse_frames(r.raw.read())
    assert frames[-1] == "data: [DONE]"
    assert all(json.loads(f[6:])["object"] == "text_completion" for f in frames[:-1])


@pytest.mark.parametrize("data", [b"{", b"not json", b'{"model": "x",}', b"[1, 2]", b""])
def test_malformed_json_is_400(data):
    assert_error(post("/v1/chat/completions", data=data, headers={"Content-Type": "application/json"}), 400,
                 "invalid_request_error")


@pytest.mark.parametrize("field,value", [
    ("temperature", "hot"), ("max_tokens", -1), ("max_tokens", 1.5), ("n", 0), ("stop", 5), ("top_p", 2),
    ("messages", "hello"), ("stream", "yes"), ("logit_bias", {"x": 1}), ("top_logprobs", 50), ("seed", "s"),
])
def test_wrong_types_name_the_field(field, value):
    r = post("/v1/chat/completions", chat(**{field: value}))
    assert_error(r, 400, "invalid_request_error")
    assert r.json()["error"]["param"].startswith(field.split(".")[0]), r.json()


def test_unsupported_field_is_rejected_not_ignored():
    assert_error(post("/v1/chat/completions", chat(functions=[{"name": "f"}])), 400, "invalid_request_error",
                 "functions", "unsupported_parameter")


def test_huge_body_is_413():
    r = post("/v1/chat/completions", data=b"x" * (65 * 1024 * 1024), headers={"Content-Type": "application/json"})
    assert_error(r, 413, "invalid_request_error")


def test_invalid_utf8_is_400():
    body = json.dumps(chat()).encode().replace(b"Hello", b"He\xff\xfelo")
    assert_error(post("/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}), 400,
                 "invalid_request_error")


def test_context_overflow_is_400_with_openai_code():
    r = post("/v1/chat/completions", chat(max_tokens=100000))
    assert_error(r, 400, "invalid_request_error", code="context_length_exceeded")
    assert "maximum context length" in r.json()["error"]["message"]
    long_prompt = "word " * 20000
    r = post("/v1/completions", {"model": MODEL, "prompt": long_prompt, "max_tokens": 1})
    assert_error(r, 400, "invalid_request_error", code="context_length_exceeded")


def test_unknown_model_is_404():
    assert_error(post("/v1/chat/completions", chat(model="gpt-9")), 404, "not_found_error", "model")


def test_auth_required_on_api_but_not_health_or_metrics():
    r = requests.post(BASE + "/v1/chat/completions", json=chat(), timeout=30)
    assert_error(r, 401, "authentication_error")
    r = requests.post(BASE + "/v1/chat/completions", json=chat(), headers={"Authorization": "Bearer nope"}, timeout=30)
    assert_error(r, 401, "authentication_error")
    assert requests.get(BASE + "/health", timeout=30).status_code == 200
    assert requests.get(BASE + "/metrics", timeout=30).status_code == 200


def test_unknown_route_404_and_wrong_method_405():
    assert_error(requests.get(BASE + "/v1/nothing", headers=AUTH, timeout=30), 404, "not_found_error")
    r = requests.get(BASE + "/v1/chat/completions", headers=AUTH, timeout=30)
    assert r.status_code == 405


def test_tokenize_detokenize_round_trip():
    t = post("/tokenize", {"model": MODEL, "prompt": "Hello world"}).json()
    assert t["count"] == len(t["tokens"]) and t["max_model_len"] == 4096
    d = post("/detokenize", {"model": MODEL, "tokens": t["tokens"]}).json()
    assert d["prompt"] == "Hello world"


def test_metrics_after_traffic():
    post("/v1/chat/completions", chat())
    text = requests.get(BASE + "/metrics", timeout=30).text
    for name in ["vllm:num_requests_running", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:kv_cache_usage_perc",
                 "vllm:request_success_total"]:
        assert name in text, name
    assert f'model_name="{MODEL}"' in text


def test_request_id_is_echoed():
    r = post("/v1/chat/completions", chat(), headers={"X-Request-Id": "abc-123"})
    assert r.headers["X-Request-Id"] == "abc-123"


def test_truncated_http_request_does_not_hang_the_server():
    u = urllib.parse.urlparse(BASE)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\"")
    assert requests.get(BASE + "/health", timeout=10).status_code == 200
