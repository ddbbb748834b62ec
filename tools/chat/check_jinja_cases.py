#!/usr/bin/python3
"""Cross-checks the Jinja engine's unit-test cases against Python's jinja2 (HF configuration).

tests/chat/data/jinja_cases.json holds cases written from jinja2's documented semantics:
    {"name": ..., "template": ..., "context": {...}, "expected": "..."}   or   {..., "error": true}
This script renders every case with the real jinja2 and fails if jinja2 disagrees with a case, so the expected
strings the C++ unit tests use are known to be jinja2's behaviour. With --cpp PATH it also runs the C++ batch
renderer (build/tests/chat/jinja_render_tool) and reports differences, which is handy while developing.

Usage: /usr/bin/python3 tools/chat/check_jinja_cases.py [--cpp build/tests/chat/jinja_render_tool] [FILE...]
"""

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_jinja  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FILE = os.path.join(ROOT, "tests", "chat", "data", "jinja_cases.json")
# strftime_now() in the cases formats this instant in the local time zone of the machine (TZ=UTC in the tests).
NOW_UNIX = 1741964966  # 2025-03-14 15:09:26 UTC


def run_cpp(tool, cases):
    lines = []
    for case in cases:
        lines.append(json.dumps({"template": case["template"], "context": case.get("context", {}), "now": NOW_UNIX}))
    proc = subprocess.run([tool], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
                          env=dict(os.environ, TZ="UTC"))
    return [json.loads(line) for line in proc.stdout.splitlines()]


def main_check(files, cpp_tool=None):
    """Checks the case files against jinja2 (and the C++ tool when given); returns the number of disagreements."""
    os.environ["TZ"] = "UTC"
    now = datetime.fromtimestamp(NOW_UNIX, timezone.utc).replace(tzinfo=None)
    failures = 0
    total = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            cases = json.load(f)
        cpp = run_cpp(cpp_tool, cases) if cpp_tool else [None] * len(cases)
        for case, cpp_result in zip(cases, cpp):
            total += 1
            status, text = hf_jinja.render(case["template"], case.get("context", {}), now)
            want_error = case.get("error", False)
            if want_error and status != "error":
                print(f"[jinja2] {case['name']}: expected an error, jinja2 rendered {text!r}")
                failures += 1
            elif not want_error and (status != "ok" or text != case["expected"]):
                print(f"[jinja2] {case['name']}: expected {case['expected']!r}, jinja2 gave {status} {text!r}")
                failures += 1
            if cpp_result is not None:
                if want_error and "error" not in cpp_result:
                    print(f"[c++]    {case['name']}: expected an error, C++ rendered {cpp_result['output']!r}")
                    failures += 1
                elif not want_error and cpp_result.get("output") != case.get("expected"):
                    print(f"[c++]    {case['name']}: expected {case.get('expected')!r}, C++ gave {cpp_result}")
                    failures += 1
    print(f"{total} cases, {failures} disagreements")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpp", help="path of the C++ jinja_render_tool to compare as well")
    parser.add_argument("files", nargs="*", default=[DEFAULT_FILE])
    args = parser.parse_args()
    return 1 if main_check(args.files, args.cpp) else 0


if __name__ == "__main__":
    sys.exit(main())
