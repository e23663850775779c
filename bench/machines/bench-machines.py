#!/usr/bin/env python3
"""bench/machines: Cluster API machine lifecycles (create -> ready -> delete) of
cloudnode-controller against the fake API server and the fake cloud (Hetzner; Proxmox VE, whose
create is a clone, a seed upload, a configure and a start, each an awaited task), at 1, 10, 100 and
1000 machines: cloud API calls and Kubernetes API calls per machine, wall time per machine, and the
controller's CPU time per machine and peak RSS (a fresh controller per row).
Run with `make bench-machines` (not part of make check). BENCH_SIZES="1 10" to choose;
BENCH_PROVIDERS="hetzner proxmoxve" the providers;
BENCH_MACHINES_ARGS="--kube-api-qps=200 --kube-api-burst=300" passes flags to the controller;
BENCH_DETAIL=1 prints the calls by verb and resource.

`--peer caph` (make bench-machines BENCH_MACHINES_PEER=caph) also runs the Hetzner Cluster API
provider (CAPH) through the same lifecycles on the same fake Hetzner API (bench/machines/caph.py)
and prints its rows and the ratios CAPH / cloudnode; both then run on the real kube-apiserver
(CN_KUBE_SERVER=real) unless CN_KUBE_SERVER says otherwise. `--capi-core` adds the real Cluster API
core manager on CAPH's side (cloudnode's side runs without one, as always)."""
import collections
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP_SRCDIR = os.environ.get("CN_TOP_SRCDIR") or os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(TOP_SRCDIR, "tests", "pylib"))
sys.path.insert(0, os.path.join(TOP_SRCDIR, "tests", "integration"))
sys.path.insert(0, HERE)

sys.path.insert(0, os.path.join(HERE, "..", "initializer"))
mt = __import__("test-controller-machines")  # the integration test's harness: one way to drive it
from peers import proc_stats  # noqa: E402


def run(env, ctl, n, prefix):
    names = ["%s-%d" % (prefix, i) for i in range(n)]
    cpu0, _ = proc_stats(ctl.p.pid)
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
    creqs = env.c.requests()[cloud0:]
    kreqs = [a for a in env.k.audit()[kube0:] if a.get("user") == mt.USER]
    cloud, kube = len(creqs), len(kreqs)
    cpu, rss = proc_stats(ctl.p.pid)
    if os.environ.get("BENCH_DETAIL"):
        detail(n, creqs, kreqs)
    return (n, "%.2f" % (t_ready / n) if ok else "timeout", "%.2f" % (t_total / n) if gone else "timeout",
            cloud / n, kube / n, 1000 * (cpu - cpu0) / n, rss)


def detail(n, creqs, kreqs):
    """Calls per machine by verb and resource (kube) and by method, path and status (cloud), with
    the fake API server's mean time per request: where the calls go, and whether a fake is slow."""
    kc, kd = collections.Counter(), collections.defaultdict(float)
    for a in kreqs:
        key = "%s %s%s %s" % (a.get("verb"), a.get("resource"),
                              "/" + a["subresource"] if a.get("subresource") else "", a.get("code"))
        kc[key] += 1
        kd[key] += a.get("duration") or 0.0
    cc = collections.Counter("%s %s %s" % (r.get("method"), re.sub(r"/[0-9]+", "/N", r.get("path", "").split("?")[0]),
                                           r.get("status")) for r in creqs)
    print("-- %d machines: kube calls/machine (mean ms/request)" % n)
    for k, v in sorted(kc.items(), key=lambda x: -x[1]):
        print("   %7.2f  %-50s %6.1f" % (v / n, k, 1000 * kd[k] / v))
    print("-- %d machines: cloud calls/machine" % n)
    for k, v in sorted(cc.items(), key=lambda x: -x[1]):
        print("   %7.2f  %s" % (v / n, k))
    sys.stdout.flush()


def main():
    sizes = [int(x) for x in os.environ.get("BENCH_SIZES", "1 10 100 1000").split()]
    providers = os.environ.get("BENCH_PROVIDERS", "hetzner proxmoxve").split()
    peer = ""
    if "--peer" in sys.argv[1:-1]:
        peer = sys.argv[sys.argv.index("--peer") + 1]
    if peer not in ("", "caph"):
        print("bench-machines: unknown peer '%s' (known: caph)" % peer, file=sys.stderr)
        return 2
    if peer:
        # CAPH is a Hetzner provider: the comparison is on Hetzner alone.
        os.environ.setdefault("CN_KUBE_SERVER", "real")
        providers = ["hetzner"]
    rows = []
    for provider in providers:
        with tempfile.TemporaryDirectory() as tmp, mt.machine_env(tmp, provider=provider) as env:
            # A Hetzner project may make 3600 requests an hour: at 1000 machines (7000 calls) that
            # limit, not the controller, would set the pace. It is lifted to measure the controller.
            env.c.settings(hetzner_ratelimit_limit=1000000)
            extra = os.environ.get("BENCH_MACHINES_ARGS", "").split()
            for n in sizes:
                ctl = mt.Controller(env.k, tmp, env.conf, ["--leader-elect=false"] + extra, provider=provider)
                try:
                    time.sleep(1.0)
                    rows.append((provider,) + run(env, ctl, n, "b%d" % n))
                finally:
                    ctl.stop()
    print("%-10s %9s %16s %18s %18s %16s %14s %14s" % ("provider", "machines", "s/machine ready", "s/machine total",
                                                       "cloud calls/mach", "kube calls/mach", "CPU ms/mach",
                                                       "peak RSS MiB"))
    for r in rows:
        print("%-10s %9d %16s %18s %18.1f %16.1f %14.2f %14.1f" % r)
    sys.stdout.flush()
    if peer == "caph":
        return peer_caph(sizes, [r[1:] for r in rows if r[0] == "hetzner"], "--capi-core" in sys.argv[1:])
    return 0


def peer_caph(sizes, ours, core):
    import caph
    with tempfile.TemporaryDirectory() as tmp:
        prows, why = caph.bench(sizes, tmp, {"build_seconds": 0.5, "action_seconds": 0.3}, mt.wait_for,
                                lambda n: 120 + 3 * n, detail if os.environ.get("BENCH_DETAIL") else None, core)
    if prows is None:
        print("CAPH: not run: %s" % why)
        return 77
    heads = ("machines", "s/machine ready", "s/machine total", "cloud calls/mach", "kube calls/mach",
             "CPU ms/mach", "peak RSS MiB")
    widths = (9, 16, 18, 18, 16, 12, 14)
    print("CAPH (cluster-api-provider-hetzner)%s, same fake Hetzner API:" % (" and the Cluster API core manager"
                                                                          if core else ""))
    print(" ".join("%*s" % (w, h) for w, h in zip(widths, heads)))
    for r in prows:
        print("%9d %16s %18s %18.1f %16.1f %12.1f %14.1f" % r)

    def ratio(a, b):
        try:
            return "%.1fx" % (float(a) / float(b))
        except (ValueError, ZeroDivisionError):
            return "-"
    # Every column both tables have, by position (cloudnode's may have fewer).
    cols = min(len(ours[0]), len(prows[0])) if ours and prows else 1
    print("ratios CAPH / cloudnode:")
    print(" ".join("%*s" % (w, h) for w, h in list(zip(widths, heads))[:cols]))
    for o, p in zip(ours, prows):
        print(" ".join(["%9d" % o[0]] + ["%*s" % (widths[i], ratio(p[i], o[i])) for i in range(1, cols)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
