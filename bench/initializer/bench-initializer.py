#!/usr/bin/env python3
"""Benchmark of cloudnode-initializer in cluster mode: N tainted Nodes in tests/fake-kube-apiserver,
their instances in tests/fake-cloud (--providers: hetzner, openstack, aws, gcp, azure,
digitalocean, proxmoxve), one initializer (the cluster-mode service account, RBAC enforced) started once all
Nodes exist. Prints, per provider and N: time until every Node is initialized, Nodes per second,
p50/p99 taint-removal latency (initializer start -> the audit time of the Node PATCH that removed
the taint), API writes and all API requests per Node (audit log), cloud requests per Node (the
fake cloud's request log: API and token requests), CPU seconds and peak RSS (VmHWM) of the initializer, its
anonymous memory (RssAnon) when the last Node is initialized, and its wake-ups per Node (voluntary context
switches: each a wait for an answer or a timer that ended).

    make bench-initializer BENCH_INITIALIZER_ARGS="--nodes 100,1000 --flag=--concurrent-node-syncs=8"
    make bench-initializer BENCH_INITIALIZER_ARGS="--providers aws,gcp,azure,digitalocean,proxmoxve --nodes 100"

With default flags the client-side rate limit (--kube-api-qps 20, shared by the two PATCHes and
the Synced Event of each Node) bounds the rate; the fakes are Python and, far above
--kube-api-qps=200, they do. Compare the initializer's CPU seconds with the wall time to see
which side waited."""
import argparse
import atexit
import datetime
import importlib
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))

from cninit import CLUSTER_SA, RBAC, Initializer, aws_conf, do_conf, hetzner_conf, pve_conf, wait_for  # noqa: E402
from fakecloud import HETZNER_TOKEN, FakeCloud, tls_args  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402
import nodegen  # noqa: E402
from peers import load_fake_cloud_state, openstack_conf, proc_stats  # noqa: E402


fcstate = load_fake_cloud_state()
AZURE_SUBSCRIPTION = importlib.import_module("fakecloud_server.metadata").AZURE_SUBSCRIPTION
PROVIDERS = ("hetzner", "openstack", "aws", "gcp", "azure", "digitalocean", "proxmoxve")
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


def write_ini(path, settings):
    with open(path, "w") as f:
        f.write("[Global]\n" + "".join("%s = %s\n" % kv for kv in settings.items()))
    os.chmod(path, 0o600)
    return path


def cloud_conf(provider, d, c, vm, ca):
    """(cloud.conf path, environment) of the provider against the fake. gcp and azure take the
    token of the VM the initializer runs on (vm: the metadata server's, IMDS's managed identity),
    as the bootstrap static pod does; the others their API credentials. proxmoxve talks HTTPS
    only, verified with the test CA (ca)."""
    path = os.path.join(d, provider + ".conf")
    if provider == "proxmoxve":
        return pve_conf(path, c.tls_url, ca), {}
    if provider == "hetzner":
        return hetzner_conf(path, c.url, HETZNER_TOKEN), {}
    if provider == "openstack":
        return openstack_conf(path, c.url), {}
    if provider == "aws":
        return aws_conf(path, c.url), {"AWS_EC2_METADATA_DISABLED": "true"}
    if provider == "digitalocean":
        return do_conf(path, c.url), {}
    if provider == "gcp":
        return write_ini(path, {"api-endpoint": c.url + "/compute/v1", "metadata-endpoint": c.metadata_url(vm["id"]),
                                "project-id": "cloudnode-test", "local-zone": vm["zone"]}), {}
    return write_ini(path, {"resourceManagerEndpoint": c.url + "/arm", "useManagedIdentityExtension": "true",
                            "metadata-endpoint": c.metadata_url(vm["id"]), "subscriptionId": AZURE_SUBSCRIPTION,
                            "resourceGroup": "cloudnode-rg", "location": vm["region"]}), {}


def node_name(provider, inst):
    """The name a kubelet on the instance registers, which the provider's lookup by name finds:
    EC2's private DNS name and GCE's host name; the instance name elsewhere."""
    return inst["hostname"] if provider in ("aws", "gcp") else inst["name"]


def run(provider, n, flags, workdir, objects):
    d = tempfile.mkdtemp(dir=workdir)
    cloud_dir = os.path.join(d, "cloud")
    os.makedirs(cloud_dir)
    # One locked write for all instances: adding them one by one through the fake's API
    # rewrites its whole state file each time. The clouds' own rate limits are out of the way.
    st = fcstate.State(cloud_dir)
    with st.locked() as s:
        s["settings"].update(hetzner_ratelimit_limit=10 ** 9, hetzner_ratelimit_refill_per_second=10 ** 6,
                             azure_imds_requests_per_second=0)
        insts = [fcstate.add_instance(s, {"platform": provider, "name": "bench-%05d" % i}) for i in range(n)]
        vm = fcstate.add_instance(s, {"platform": provider, "name": "bench-control-plane"})
    tls, ca = tls_args(d) if provider == "proxmoxve" else ([], None)
    with FakeKube(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(cloud_dir, extra_args=tls) as c:
        for i, inst in enumerate(insts):
            status, out = k.api("POST", "/api/v1/nodes", make_node(node_name(provider, inst), i, objects))
            if status != 201:
                raise SystemExit("creating nodes: %s %s" % (status, out))
        conf, env = cloud_conf(provider, d, c, vm, ca)
        args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=" + provider, "--cloud-config=" + conf,
                "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1"] + flags
        c.clear_requests()
        t0 = time.time()
        with Initializer(args, state_dir=d, name="bench", env=env) as ini:
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
            anon = rss_anon(ini.proc.pid)
            switches = context_switches(ini.proc.pid)
        calls = [r for r in k.audit() if r.get("user") == CLUSTER_SA]
        audit = [r for r in calls if r.get("resource") == "nodes"]
        writes = [r for r in audit if r.get("verb") in ("patch", "update", "create", "delete")]
        removed = [parse_time(r["time"]) - t0 for r in writes
                   if r.get("verb") == "patch" and not r.get("subresource") and r.get("code") == 200]
        # Cloud API and metadata (token) requests alike: what the cloud is asked per Node.
        cloud = c.requests()
    return {"provider": provider, "n": n, "elapsed": elapsed, "rate": n / elapsed, "p50": percentile(removed, 50),
            "p99": percentile(removed, 99), "writes": len(writes) / n, "api": len(calls) / n,
            "cloud": len(cloud) / n, "cpu": cpu, "cpu_per_node": cpu * 1000 / n, "rss": rss, "anon": anon,
            "switches": switches / n}


def rss_anon(pid):
    """RssAnon of a running process in MiB: its anonymous memory (heap, stacks) at this moment,
    without the library pages that other processes share."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def context_switches(pid):
    """Voluntary context switches of a running process's threads so far: each is a wait for the
    API server, the cloud or a timer that ended with the process woken."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def wrap_initializer(command):
    """Points cninit at a script that execs the initializer under command."""
    import cninit
    import shlex
    fd, path = tempfile.mkstemp(prefix="cn-bench-wrapper-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (command, shlex.quote(cninit.BINARY)))
    os.chmod(path, 0o755)
    atexit.register(os.unlink, path)
    cninit.BINARY = path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="100,1000,5000", help="comma-separated Node counts")
    ap.add_argument("--providers", default="hetzner", help="comma-separated cloud providers, among " + ", ".join(PROVIDERS))
    ap.add_argument("--flag", action="append", default=[], help="extra initializer flag (repeatable)")
    ap.add_argument("--objects", choices=("realistic", "small"), default="realistic",
                    help="Nodes as a kubelet registers them (default) or bare tainted Nodes")
    ap.add_argument("--wrapper", default="",
                    help="run the initializer under this command, e.g. 'heaptrack -o FILE', 'valgrind "
                         "--tool=massif --massif-out-file=FILE' or 'valgrind --tool=callgrind --callgrind-out-file=FILE' "
                         "(instructions per function, which do not drift with the machine's load as CPU time does; "
                         "a profile: the figures printed are then the wrapper's)")
    ap.add_argument("--peers", default="", help="also run the Go peers side by side (bench/initializer/peers.py): "
                    "comma-separated providers, hetzner and/or openstack")
    ap.add_argument("--peer-nodes", default="100", help="comma-separated Node counts of the side-by-side runs")
    ap.add_argument("--peer-qps", default="20", help="--kube-api-qps of both sides")
    ap.add_argument("--peer-burst", default="30", help="--kube-api-burst of both sides")
    ap.add_argument("--peer-syncs", type=int, default=1, help="--concurrent-node-syncs of both sides")
    opts = ap.parse_args()
    counts = [int(x) for x in opts.nodes.split(",") if x]
    providers = [p for p in opts.providers.split(",") if p]
    unknown = sorted(set(providers) - set(PROVIDERS))
    if unknown:
        ap.error("unknown provider(s) %s (known: %s)" % (", ".join(unknown), ", ".join(PROVIDERS)))
    if opts.wrapper:
        wrap_initializer(opts.wrapper)
    print("cloudnode-initializer cluster mode, flags: %s" % (" ".join(opts.flag) or "(defaults)"))
    if opts.objects == "realistic":
        print("Nodes: %(total)d bytes of JSON each (managedFields %(managedFields)d, status.images %(status.images)d)"
              % nodegen.sizes())
    else:
        print("Nodes: small (name and taint only)")
    print("%-12s %7s %9s %8s %7s %7s %11s %9s %10s %7s %11s %8s %9s %12s" % (
        "provider", "nodes", "total s", "nodes/s", "p50 s", "p99 s", "writes/node", "API/node", "cloud/node",
        "CPU s", "CPU ms/node", "RSS MiB", "anon MiB", "wakeups/node"))
    with tempfile.TemporaryDirectory() as w:
        for provider in providers:
            for n in counts:
                r = run(provider, n, opts.flag, w, opts.objects)
                print("%-12s %7d %9.2f %8.1f %7.2f %7.2f %11.2f %9.2f %10.2f %7.2f %11.3f %8.1f %9.1f %12.1f" % (
                    r["provider"], r["n"], r["elapsed"], r["rate"], r["p50"], r["p99"], r["writes"], r["api"],
                    r["cloud"], r["cpu"], r["cpu_per_node"], r["rss"], r["anon"], r["switches"]))
                sys.stdout.flush()
        if opts.peers:
            import peers
            from fakekubeclient import kube_server
            peers.compare([p for p in opts.peers.split(",") if p], [int(x) for x in opts.peer_nodes.split(",") if x],
                          opts.peer_qps, opts.peer_burst, opts.peer_syncs, kube_server, fcstate,
                          lambda i: make_node("bench-%05d" % i, i, opts.objects), w, sys.stdout)


main()
