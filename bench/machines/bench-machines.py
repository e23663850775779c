#!/usr/bin/env python3
"""bench/machines: Cluster API machine lifecycles (create -> ready -> delete) of
cloudnode-controller against the fake API server and the fake cloud (Hetzner), at 1, 10 and 100
machines: cloud API calls and Kubernetes API calls per machine, and wall time per machine.
Run with `make bench-machines` (not part of make check). BENCH_SIZES="1 10" to choose."""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP_SRCDIR = os.environ.get("CN_TOP_SRCDIR") or os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(TOP_SRCDIR, "tests", "pylib"))
sys.path.insert(0, os.path.join(TOP_SRCDIR, "tests", "integration"))

mt = __import__("test-controller-machines")  # the integration test's harness: one way to drive it


def run(env, n, prefix):
    names = ["%s-%d" % (prefix, i) for i in range(n)]
    cloud0, kube0 = len(env.c.requests()), len(env.k.audit())
    t0 = time.monotonic()
    for name in names:
        env.machine(name)
    ok = mt.wait_for(lambda: all(env.ready(x) for x in names), 60 + 3 * n, step=0.2)
    t_ready = time.monotonic() - t0
    for name in names:
        env.delete(name)
    gone = mt.wait_for(lambda: all(env.gone(x) for x in names), 60 + 3 * n, step=0.2)
    t_total = time.monotonic() - t0
    cloud = len(env.c.requests()) - cloud0
    kube = len([a for a in env.k.audit()[kube0:] if a.get("user") == mt.USER])
    return (n, "%.2f" % (t_ready / n) if ok else "timeout", "%.2f" % (t_total / n) if gone else "timeout",
            cloud / n, kube / n)


def main():
    sizes = [int(x) for x in os.environ.get("BENCH_SIZES", "1 10 100").split()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rbac = [os.path.join(TOP_SRCDIR, "manifests", "controller", "controller-rbac.yaml"),
                os.path.join(TOP_SRCDIR, "manifests", "overlays", "capi", "controller-capi-rbac.yaml")]
        with mt.FakeKube(os.path.join(tmp, "kube"), rbac=rbac) as k, \
                mt.FakeCloud(os.path.join(tmp, "cloud")) as c:
            c.settings(build_seconds=0.5, action_seconds=0.3)
            env = mt.Env(k, c, tmp)
            env.setup()
            ctl = mt.Controller(k, tmp, env.conf)
            try:
                time.sleep(1.0)
                for n in sizes:
                    rows.append(run(env, n, "b%d" % n))
            finally:
                ctl.stop()
    print("%9s %16s %18s %18s %16s" % ("machines", "s/machine ready", "s/machine total", "cloud calls/mach",
                                       "kube calls/mach"))
    for r in rows:
        print("%9d %16s %18s %18.1f %16.1f" % r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
