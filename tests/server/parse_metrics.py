#!/usr/bin/python3
"""Parses a Prometheus text exposition with the official client's parser (Debian python3-prometheus-client)
and prints what it understood as JSON: {family: {"type": ..., "samples": [[name, labels, value], ...]}}.
The C++ metrics tests compare this against what they recorded, so the parser is the independent judge of
the format. Usage: parse_metrics.py FILE"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    out = {}
    for family in text_string_to_metric_families(text):
        samples = []
        for s in family.samples:
            value = s.value
            if math.isinf(value):
                value = "+Inf" if value > 0 else "-Inf"
            samples.append([s.name, s.labels, value])
        out[family.name] = {"type": family.type, "samples": samples}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
