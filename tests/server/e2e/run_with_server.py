#!/usr/bin/python3
"""Runs one end-to-end suite against a real `msa serve` process.

  run_with_server.py --msa BUILD/msa --model-dir DIR --source-dir SRC [--require node|pytest] -- COMMAND...

Writes a random-weight model into --model-dir when it has none (`msa random-model` with the tiny test tokenizer
and the MiniMax chat template), starts `msa serve` on a free loopback port with the MiniMax parsers and an API
key, waits for /health, runs COMMAND with MSA_BASE_URL, MSA_API_KEY, MSA_MODEL and MSA_SERVER_PID set, then stops
the server with SIGTERM and checks that it exits 0 within its shutdown timeout. Exits 77 (ctest: skipped) with a
message when the tool the suite needs is missing.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

SKIP = 77
API_KEY = "e2e-test-key"
MODEL_NAME = "e2e-minimax"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing(tool: str, source_dir: str):
    if tool == "node":
        if shutil.which("node") is None:
            return "node is not installed (scripts/setup.sh --test installs it)"
        if not os.path.isdir(os.path.join(source_dir, "tests", "npm", "node_modules", "openai")):
            return "the openai npm package is missing from tests/npm/node_modules (run scripts/setup.sh --test)"
    if tool == "pytest":
        try:
            import pytest  # noqa: F401
            import requests  # noqa: F401
        except ImportError as e:
            return f"{e.name} is missing for {sys.executable} (apt install python3-pytest python3-requests)"
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--msa", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--require", default="")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--log-dir", default="", help="where the server log goes (default: beside the model directory)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.require:
        why = missing(args.require, args.source_dir)
        if why:
            print(f"SKIPPED: {why}", flush=True)
            return SKIP

    if not os.path.exists(os.path.join(args.model_dir, "config.json")):
        subprocess.run([args.msa, "random-model", "--out", args.model_dir,
                        "--tokenizer", os.path.join(args.source_dir, "tests/tokenizer/data/tiny_tokenizer.json"),
                        "--chat-template", os.path.join(args.source_dir, "tools/chat/templates/minimax_m3.jinja")],
                       check=True)

    port = free_port()
    server_cmd = [args.msa, "serve", "--model", args.model_dir, "--host", "127.0.0.1", "--port", str(port),
                  "--served-model-name", MODEL_NAME, "--api-key", API_KEY,
                  "--reasoning-parser", "minimax_m3", "--tool-call-parser", "minimax_m3",
                  "--kv-cache-gib", "0.25", "--max-model-len", "4096",
                  "--shutdown-timeout", "5", "--keep-alive-timeout", "2"] + args.server_arg
    log_dir = args.log_dir or os.path.dirname(os.path.abspath(args.model_dir))
    log_path = os.path.join(log_dir, f"serve-{port}.log")
    log = open(log_path, "w")
    server = subprocess.Popen(server_cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            if server.poll() is not None:
                print(open(log_path).read())
                print(f"FAILED: msa serve exited with {server.returncode} before it was ready")
                return 1
            try:
                with urllib.request.urlopen(base + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                print("FAILED: msa serve was not ready within 120 s")
                return 1
            time.sleep(0.1)

        env = dict(os.environ, MSA_BASE_URL=base, MSA_API_KEY=API_KEY, MSA_MODEL=MODEL_NAME,
                   MSA_SERVER_PID=str(server.pid))
        rc = subprocess.run(command, env=env).returncode
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
                print("FAILED: msa serve did not exit within 30 s of SIGTERM")
                rc = 1
        log.close()
    if server.returncode != 0:
        print(open(log_path).read()[-4000:])
        print(f"FAILED: msa serve exited with {server.returncode} after SIGTERM")
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
