#!/usr/bin/env python3
"""Runs the formats micro-benchmark (bench/formats/formats_bench.cpp) and writes bench/results/formats_<date>.json.

Usage (from the repository root, after building the `formats_bench` target):
    /usr/bin/python3 bench/formats/run_formats_bench.py [--build-dir build] [--out-dir bench/results]

Each record is {"figure", "value", "unit", "date", "machine", "commit", ...}: the median over the repetitions of the
CPU-time throughput of one operation on one path (million values per second), and the AVX2 speedup per operation.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_commit(repo):
    def git(*args):
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        # Results files being rewritten do not make the measured code dirty.
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(repo, "build"))
    parser.add_argument("--out-dir", default=os.path.join(repo, "bench", "results"))
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", default="0.3")
    args = parser.parse_args()

    binary = os.path.join(args.build_dir, "bench", "formats", "formats_bench")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found: build it first (cmake --build {args.build_dir} --target formats_bench)")
    run = subprocess.run([binary, "--benchmark_format=json", f"--benchmark_min_time={args.min_time}",
                          f"--benchmark_repetitions={args.repetitions}"], capture_output=True, text=True, check=True)
    report = json.loads(run.stdout)

    samples = {}  # name -> items per second of each repetition
    for b in report["benchmarks"]:
        if b.get("run_type") == "iteration":
            samples.setdefault(b["run_name"], []).append(b["items_per_second"])

    today = datetime.date.today().isoformat()
    machine = f"{cpu_model()}, {os.cpu_count()} logical CPUs"
    common = {"date": today, "machine": machine, "commit": git_commit(repo)}
    records = []
    medians = {name: statistics.median(values) / 1e6 for name, values in samples.items()}
    for name, value in medians.items():
        operation, path = name.rsplit("/", 1)
        records.append({"figure": f"formats/{operation}/{path}", "value": round(value, 1), "unit": "Mvalues/s",
                        "operation": operation, "path": path, "repetitions": len(samples[name]),
                        "statistic": "median of CPU-time throughput", **common})
    for name, value in medians.items():
        operation, path = name.rsplit("/", 1)
        scalar = medians.get(f"{operation}/scalar")
        if path == "avx2" and scalar:
            records.append({"figure": f"formats/{operation}/avx2_speedup", "value": round(value / scalar, 2),
                            "unit": "x", "operation": operation, **common})

    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, f"formats_{today}.json")
    with open(out, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    width = max(len(r["figure"]) for r in records)
    for r in records:
        print(f"{r['figure']:<{width}}  {r['value']:>10} {r['unit']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
