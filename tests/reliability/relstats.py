"""Figures of the reliability tests for tests/reliability/report.py: one JSON line per test run,
appended to the file named by CN_RELIABILITY_STATS (nothing when unset)."""
import json
import os


def record(stats):
    path = os.environ.get("CN_RELIABILITY_STATS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(stats) + "\n")
