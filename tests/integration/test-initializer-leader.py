#!/usr/bin/env python3
"""Two cluster-mode replicas with leader election on a Lease (in the namespace the shipped Role
grants, under the service-account identity): one leads and initializes, the standby is ready
but writes nothing; when the leader is killed the standby takes over after the lease expires;
a leader stopped with SIGTERM hands the Lease back so a successor starts at once."""
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import (BINARY, CLUSTER_SA, RBAC, Initializer, hetzner_conf, initialized, make_node,  # noqa: E402
                    wait_for, writes)
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402


def metric(i, name):
    st, text = i.get("/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def lease(k):
    st, out = k.api("GET", "/apis/coordination.k8s.io/v1/namespaces/cloudnode/leases/cloud-controller-manager")
    return out if st == 200 else None


def test_leader(t, k, c, d):
    k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cloudnode"}})
    for n in range(1, 7):
        c.add_instance({"platform": "hetzner", "name": "l%d" % n})
    conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
            "--controllers=cloud-node", "--bind-address=127.0.0.1", "--leader-elect=true",
            "--leader-elect-resource-namespace=cloudnode", "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s", "-v", "4"]
    a = Initializer(args, state_dir=d, name="replica-a").start()
    b = Initializer(args, state_dir=d, name="replica-b").start()
    try:
        both = wait_for(lambda: (metric(a, "cloudnode_initializer_leader") or 0) +
                        (metric(b, "cloudnode_initializer_leader") or 0) == 1 and lease(k), 30)
        t.ok(both, "exactly one replica leads", a.log()[-1500:] + b.log()[-1500:])
        leader, standby = (a, b) if metric(a, "cloudnode_initializer_leader") == 1 else (b, a)
        holder = (lease(k) or {}).get("spec", {}).get("holderIdentity", "")
        t.ok(holder, "the Lease names its holder", lease(k))
        t.ok(wait_for(lambda: standby.get("/readyz")[0] == 200, 15), "the standby is ready (leader known)")
        for n in (1, 2, 3):
            make_node(k, "l%d" % n)
        t.ok(wait_for(lambda: all(initialized(k, "l%d" % n) for n in (1, 2, 3)), 30), "the leader initializes Nodes")
        t.eq(metric(leader, "cloudnode_initializer_nodes_initialized_total"), 3.0, "counted by the leader")
        t.eq(metric(standby, "cloudnode_initializer_nodes_initialized_total"), 0.0, "the standby did nothing")

        # failover: the leader dies without releasing; the standby waits out the lease
        leader.stop(signal.SIGKILL)
        killed = time.monotonic()
        make_node(k, "l4")
        took = wait_for(lambda: metric(standby, "cloudnode_initializer_leader") == 1, 30)
        waited = time.monotonic() - killed
        t.ok(took, "the standby takes over after the leader died")
        t.ok(waited >= 2.0, "only once the lease expired (%.1fs)" % waited)
        t.ok(wait_for(lambda: initialized(k, "l4"), 30), "the new leader initializes the Node created meanwhile")
        t.ok((lease(k) or {}).get("spec", {}).get("holderIdentity") != holder, "the Lease changed hands")

        # a clean stop hands the Lease back: the successor need not wait out the lease
        c2 = Initializer(args, state_dir=d, name="replica-c").start()
        time.sleep(1.5)
        t.eq(metric(c2, "cloudnode_initializer_leader"), 0.0, "a third replica stands by")
        released = time.monotonic()
        t.eq(standby.stop(signal.SIGTERM), 0, "SIGTERM: the leader exits cleanly")
        t.ok(wait_for(lambda: metric(c2, "cloudnode_initializer_leader") == 1, 10), "the successor leads")
        t.ok(time.monotonic() - released < 3.5, "sooner than the lease duration: the Lease was released")
        make_node(k, "l5")
        t.ok(wait_for(lambda: initialized(k, "l5"), 30), "and initializes Nodes")
        for n in range(1, 6):
            good = [w for w in writes(k, CLUSTER_SA, "l%d" % n) if w[0] == "patch" and w[1] == "" and w[3] == 200]
            t.eq(len(good), 1, "l%d initialized exactly once across the replicas" % n)
        c2.stop()
    finally:
        a.stop()
        b.stop()


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    with tempfile.TemporaryDirectory() as d:
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_leader, k, c, d)
    sys.exit(t.done())


main()
