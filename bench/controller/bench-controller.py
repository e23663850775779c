#!/usr/bin/env python3
"""bench/controller: API calls and wall time of cloudnode-controller against the fake API server
for (1) a first install from an empty namespace, (2) a cold restart on a converged cluster, and
(3) a steady-state resync triggered by a watch event that changes nothing we own. Prints a table.
Run with `make bench-controller` (not part of make check)."""
import collections
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP_SRCDIR = os.environ.get("CN_TOP_SRCDIR") or os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(TOP_SRCDIR, "tests", "pylib"))
sys.path.insert(0, os.path.join(TOP_SRCDIR, "tests", "integration"))

ctl = __import__("test-controller-apply")  # the integration test's harness: one way to drive it


def calls(k, since):
    by = collections.Counter()
    for a in k.audit()[since:]:
        if a.get("user") == ctl.USER:
            by[a.get("verb")] += 1
    return by


def measure(k, name, start, until, rows, timeout=60):
    mark = len(k.audit())
    t0 = time.monotonic()
    start()
    ok = ctl.wait_for(until, timeout, step=0.01)
    dt = time.monotonic() - t0
    time.sleep(0.5)  # let trailing status writes land before counting
    by = calls(k, mark)
    writes = sum(v for kk, v in by.items() if kk in ctl.WRITE_VERBS)
    rows.append((name, "%.3f" % dt if ok else "timeout", sum(by.values()), writes,
                 " ".join("%s=%d" % kv for kv in sorted(by.items()))))


def main():
    rows = []
    holder = {}
    with tempfile.TemporaryDirectory() as tmp:
        with ctl.FakeKube(os.path.join(tmp, "kube"),
                          rbac=[os.path.join(TOP_SRCDIR, "manifests", "controller", "controller-rbac.yaml")]) as k:
            ctl.setup_cluster(k)
            measure(k, "first install", lambda: holder.setdefault("first", ctl.Controller(k, tmp)),
                    lambda: ctl.converged(k), rows)
            holder["first"].stop()

            def start2():
                holder["c"] = ctl.Controller(k, tmp)
                return holder["c"]

            measure(k, "cold restart (converged)", start2,
                    lambda: 'result="unchanged"' in holder["c"].get("/metrics")[1], rows)
            c = holder["c"]

            def touch():
                k.api("PATCH", ctl.SOURCE, {"metadata": {"labels": {"bench": str(time.time())}}},
                      "application/merge-patch+json")

            def unchanged_count():
                for line in c.get("/metrics")[1].splitlines():
                    if line.startswith('cloudnode_controller_reconciles_total{result="unchanged"}'):
                        return float(line.split()[-1])
                return 0.0

            n0 = unchanged_count()
            measure(k, "resync on an unrelated event", touch, lambda: unchanged_count() > n0, rows)
            c.stop()
    print("%-30s %10s %10s %8s  %s" % ("scenario", "seconds", "API calls", "writes", "by verb"))
    for r in rows:
        print("%-30s %10s %10d %8d  %s" % r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
