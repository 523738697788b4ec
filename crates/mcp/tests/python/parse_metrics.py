"""Reads a Prometheus text scrape from stdin with the Prometheus Python
client's own parser (not ours) and prints its samples as JSON lines:
{"name", "labels", "value"}. Run by crates/mcp/tests/metrics.rs."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

for family in text_string_to_metric_families(sys.stdin.read()):
    for sample in family.samples:
        print(json.dumps({"name": sample.name, "labels": sample.labels, "value": sample.value}))
