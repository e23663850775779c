#!/usr/bin/env python3
"""Benchmark of cloudnode-initializer in cluster mode: N tainted Nodes in tests/fake-kube-apiserver,
their Hetzner instances in tests/fake-cloud, one initializer (the cluster-mode service account,
RBAC enforced) started once all Nodes exist. Prints, per N: time until every Node is initialized,
Nodes per second, p50/p99 taint-removal latency (initializer start -> the audit time of the Node
PATCH that removed the taint), API writes per Node (audit log), CPU seconds and peak RSS of the
initializer.

    make bench-initializer BENCH_INITIALIZER_ARGS="--nodes 100,1000 --flag=--concurrent-node-syncs=8"

With default flags the client-side rate limit (--kube-api-qps 20, shared by the two PATCHes and
the Synced Event of each Node) bounds the rate; the fakes are Python and, far above
--kube-api-qps=200, they do. Compare the initializer's CPU seconds with the wall time to see
which side waited."""
import argparse
import datetime
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))

from cninit import CLUSTER_SA, RBAC, Initializer, hetzner_conf, wait_for  # noqa: E402
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402
import nodegen  # noqa: E402
from peers import load_fake_cloud_state, proc_stats  # noqa: E402


fcstate = load_fake_cloud_state()
TAINT = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def parse_time(s):
    return datetime.datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def make_node(name, index, objects):
    """A Node as the kubelet registers it (nodegen: images, conditions, managedFields, ...), or
    with --objects=small the bare tainted Node of the earlier figures."""
    if objects == "realistic":
        return nodegen.node(name, index)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"taints": [TAINT]}}


def run(n, flags, workdir, objects):
    d = tempfile.mkdtemp(dir=workdir)
    cloud_dir = os.path.join(d, "cloud")
    os.makedirs(cloud_dir)
    # One locked write for all instances: adding them one by one through the fake's API
    # rewrites its whole state file each time.
    st = fcstate.State(cloud_dir)
    with st.locked() as s:
        s["settings"]["hetzner_ratelimit_limit"] = 10 ** 9
        s["settings"]["hetzner_ratelimit_refill_per_second"] = 10 ** 6
        for i in range(n):
            fcstate.add_instance(s, {"platform": "hetzner", "name": "bench-%05d" % i})
    with FakeKube(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(cloud_dir) as c:
        for i in range(n):
            status, out = k.api("POST", "/api/v1/nodes", make_node("bench-%05d" % i, i, objects))
            if status != 201:
                raise SystemExit("creating nodes: %s %s" % (status, out))
        conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
        args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
                "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1"] + flags
        t0 = time.time()
        with Initializer(args, state_dir=d, name="bench") as ini:
            def done():
                status, text = ini.get("/metrics")
                for line in text.splitlines():
                    if line.startswith("cloudnode_initializer_nodes_initialized_total "):
                        return float(line.split()[1]) >= n
                return False
            if not wait_for(done, timeout=3600, step=0.2):
                raise SystemExit("not all nodes initialized; log:\n" + ini.log()[-3000:])
            elapsed = time.time() - t0
            cpu, rss = proc_stats(ini.proc.pid)
        audit = [r for r in k.audit() if r.get("user") == CLUSTER_SA and r.get("resource") == "nodes"]
        writes = [r for r in audit if r.get("verb") in ("patch", "update", "create", "delete")]
        removed = [parse_time(r["time"]) - t0 for r in writes
                   if r.get("verb") == "patch" and not r.get("subresource") and r.get("code") == 200]
    return {"n": n, "elapsed": elapsed, "rate": n / elapsed, "p50": percentile(removed, 50),
            "p99": percentile(removed, 99), "writes": len(writes) / n, "cpu": cpu, "cpu_per_node": cpu * 1000 / n,
            "rss": rss}


def wrap_initializer(command):
    """Points cninit at a script that execs the initializer under command."""
    import cninit
    import shlex
    fd, path = tempfile.mkstemp(prefix="cn-bench-wrapper-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (command, shlex.quote(cninit.BINARY)))
    os.chmod(path, 0o755)
    cninit.BINARY = path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="100,1000,5000", help="comma-separated Node counts")
    ap.add_argument("--flag", action="append", default=[], help="extra initializer flag (repeatable)")
    ap.add_argument("--objects", choices=("realistic", "small"), default="realistic",
                    help="Nodes as a kubelet registers them (default) or bare tainted Nodes")
    ap.add_argument("--wrapper", default="",
                    help="run the initializer under this command, e.g. 'heaptrack -o FILE' or 'valgrind "
                         "--tool=massif --massif-out-file=FILE' (a profile: the figures printed are then the wrapper's)")
    ap.add_argument("--peers", default="", help="also run the Go peers side by side (bench/initializer/peers.py): "
                    "comma-separated providers, hetzner and/or openstack")
    ap.add_argument("--peer-nodes", default="100", help="comma-separated Node counts of the side-by-side runs")
    ap.add_argument("--peer-qps", default="20", help="--kube-api-qps of both sides")
    ap.add_argument("--peer-burst", default="30", help="--kube-api-burst of both sides")
    ap.add_argument("--peer-syncs", type=int, default=1, help="--concurrent-node-syncs of both sides")
    opts = ap.parse_args()
    counts = [int(x) for x in opts.nodes.split(",") if x]
    if opts.wrapper:
        wrap_initializer(opts.wrapper)
    print("cloudnode-initializer cluster mode, hetzner, flags: %s" % (" ".join(opts.flag) or "(defaults)"))
    if opts.objects == "realistic":
        print("Nodes: %(total)d bytes of JSON each (managedFields %(managedFields)d, status.images %(status.images)d)"
              % nodegen.sizes())
    else:
        print("Nodes: small (name and taint only)")
    print("%7s %10s %9s %9s %9s %12s %8s %11s %9s" % ("nodes", "total s", "nodes/s", "p50 s", "p99 s", "writes/node",
                                                       "CPU s", "CPU ms/node", "RSS MiB"))
    with tempfile.TemporaryDirectory() as w:
        for n in counts:
            r = run(n, opts.flag, w, opts.objects)
            print("%7d %10.2f %9.1f %9.2f %9.2f %12.2f %8.2f %11.3f %9d" % (
                r["n"], r["elapsed"], r["rate"], r["p50"], r["p99"], r["writes"], r["cpu"], r["cpu_per_node"],
                r["rss"]))
            sys.stdout.flush()
        if opts.peers:
            import peers
            from fakekubeclient import kube_server
            peers.compare([p for p in opts.peers.split(",") if p], [int(x) for x in opts.peer_nodes.split(",") if x],
                          opts.peer_qps, opts.peer_burst, opts.peer_syncs, kube_server, fcstate,
                          lambda i: make_node("bench-%05d" % i, i, opts.objects), w, sys.stdout)


main()
