#!/usr/bin/env python3
"""Writes one realistic Node (tests/pylib/nodegen.py, as bench-initializer creates them, with the
uid and resourceVersion the API server adds) to a temporary file and runs bench-json-filter on it."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))
import nodegen  # noqa: E402


def main():
    node = nodegen.node("node-00042", 42)
    node["metadata"].setdefault("uid", "1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    node["metadata"].setdefault("resourceVersion", "12345")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(node, f, separators=(",", ":"))
        f.flush()
        return subprocess.call([sys.argv[1], f.name])


if __name__ == "__main__":
    sys.exit(main())
