#!/usr/bin/env python3
"""cloudnode-initializer in cluster mode against tests/fake-kube-apiserver (RBAC of the shipped
manifests, as the cluster-mode service account) and the Hetzner API of tests/fake-cloud: several
Nodes initialized with exactly two writes each and no Node GETs; provided-node-ip match and
mismatch (Warning Event, condition CloudProviderInitialized False, then True); a Node without
instance; a Node deleted while its instance is looked up; periodic address reconciliation
writing only on change; the lifecycle controller; health and metrics (promtool check
metrics)."""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, metric_value  # noqa: E402
from cninit import (BINARY, CLUSTER_SA, RBAC, SHUTDOWN_TAINT, TAINT, Initializer, addresses, condition,  # noqa: E402
                    events, expected_addresses, get_node, hetzner_conf, initialized, make_node, node_gets, set_status, tainted, wait_for,
                    writes)
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402


def test_initialize(t, k, c, d):
    insts = [c.add_instance({"platform": "hetzner", "name": "w%d" % i}) for i in range(1, 6)]
    # w1 registered with its providerID (kubelet --provider-id), the others by name only; w2
    # carries another taint and a label the provider must not touch; w3 has provided-node-ip.
    make_node(k, "w1", provider_id="hcloud://%s" % insts[0]["id"])
    make_node(k, "w2", taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}],
              labels={"topology.kubernetes.io/zone": "stale-zone"})
    make_node(k, "w3", annotations={"alpha.kubernetes.io/provided-node-ip": insts[2]["public_ipv4"]})
    make_node(k, "w4", addresses=[{"type": "Hostname", "address": "kubelet-w4"}])
    make_node(k, "w5")
    make_node(k, "orphan")  # no instance in the cloud
    make_node(k, "ready", tainted=False, addresses=[{"type": "InternalIP", "address": "10.9.9.9"}])

    conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
    kc = k.kubeconfig_for(CLUSTER_SA)
    args = ["--kubeconfig=" + kc, "--cloud-provider=hetzner", "--cloud-config=" + conf, "--leader-elect=false",
            "--controllers=cloud-node", "--bind-address=127.0.0.1", "--concurrent-node-syncs=2",
            "--node-status-update-frequency=2s", "-v", "4"]
    with Initializer(args, state_dir=d, name="cluster") as i:
        done = wait_for(lambda: all(initialized(k, "w%d" % n) for n in range(1, 6)), 60)
        t.ok(done, "all five Nodes are initialized", i.log()[-3000:])
        for n, inst in enumerate(insts, 1):
            node = get_node(k, "w%d" % n)
            name = "w%d" % n
            t.eq(node["spec"].get("providerID"), "hcloud://%s" % inst["id"], "%s: providerID" % name)
            labels = node["metadata"]["labels"]
            t.eq((labels.get("node.kubernetes.io/instance-type"), labels.get("topology.kubernetes.io/region")),
                 (inst["type"], "fsn1"), "%s: instance-type and region labels" % name)
            t.eq(labels.get("topology.kubernetes.io/zone"), inst["zone"], "%s: zone label (stale value replaced)" % name)
            want = expected_addresses(inst)
            if name == "w3":
                want = [("ExternalIP", inst["public_ipv4"])] + [a for a in want if a[1] != inst["public_ipv4"]]
            t.eq(addresses(node), want, "%s: addresses in the deterministic order" % name)
            w = writes(k, CLUSTER_SA, name)
            t.eq(w, [("patch", "status", name, 200), ("patch", "", name, 200)],
                 "%s: exactly two writes, status first" % name)
            synced = wait_for(lambda: events(k, name, "Synced"), 10)
            t.ok(synced, "%s: Synced event" % name)
            # Its reference is built from the Node the PATCH returned (filtered to what is read).
            t.eq([(e["involvedObject"].get("kind"), e["involvedObject"].get("apiVersion"), e["involvedObject"].get("uid"))
                  for e in synced or []], [("Node", "v1", node["metadata"]["uid"])],
                 "%s: the Synced event refers to the Node" % name)
        w2 = get_node(k, "w2")
        # node.kubernetes.io/not-ready: the API server's, added when the Node was created.
        t.eq(sorted(x["key"] for x in w2["spec"]["taints"]), ["dedicated", "node.kubernetes.io/not-ready"],
             "w2: other taints are kept")
        t.eq(get_node(k, "w4")["metadata"]["labels"].get("kubernetes.io/hostname"), "w4",
             "labels of the kubelet are untouched")
        t.eq(node_gets(k, CLUSTER_SA), [], "no GET of a single Node: list and watch only")
        t.eq(writes(k, CLUSTER_SA, "ready"), [], "an initialized Node is not written at start")

        t.ok(tainted(get_node(k, "orphan")), "a Node without instance stays tainted")
        t.ok(wait_for(lambda: events(k, "orphan", "InstanceNotFound"), 20), "with a Warning event InstanceNotFound")
        # kubelet-style status updates of a failing Node must not cut its backoff short
        time.sleep(2)

        def lookups():
            return len([r for r in c.requests() if "name=orphan" in r.get("path", "") + "?" + r.get("query", "")])
        before = lookups()
        for n in range(10):
            set_status(k, "orphan", {"conditions": [{"type": "Ready", "status": "False", "reason": "r%d" % n}]})
            time.sleep(0.1)
        t.ok(lookups() - before < 10, "status updates do not bypass the retry backoff (%d lookups for 10 updates)"
             % (lookups() - before))

        # provided-node-ip that matches nothing: tainted, Warning, and initialized once fixed
        make_node(k, "w6", annotations={"alpha.kubernetes.io/provided-node-ip": "192.0.2.77"})
        w6 = c.add_instance({"platform": "hetzner", "name": "w6"})
        t.ok(wait_for(lambda: events(k, "w6", "ProvidedNodeIPMismatch"), 20),
             "provided-node-ip mismatch: Warning event ProvidedNodeIPMismatch")
        t.ok(tainted(get_node(k, "w6")), "provided-node-ip mismatch: the Node stays tainted")
        cond = wait_for(lambda: condition(get_node(k, "w6"), "CloudProviderInitialized"), 10)
        t.ok(cond and cond["status"] == "False" and cond["reason"] == "ProvidedNodeIPMismatch"
             and "192.0.2.77" in cond["message"], "provided-node-ip mismatch: condition False says why", cond)
        k.api("PATCH", "/api/v1/nodes/w6",
              {"metadata": {"annotations": {"alpha.kubernetes.io/provided-node-ip": w6["private_ipv4"]}}},
              content_type="application/merge-patch+json")
        n6 = wait_for(lambda: initialized(k, "w6"), 30)
        t.ok(n6, "provided-node-ip corrected: initialized after a retry")
        t.eq(addresses(n6)[0] if n6 else None, ("InternalIP", w6["private_ipv4"]), "the provided IP comes first")
        cond = condition(n6, "CloudProviderInitialized")
        t.ok(cond and cond["status"] == "True", "provided-node-ip corrected: the condition is True", cond)
        t.eq(writes(k, CLUSTER_SA, "w6"), [("patch", "status", "w6", 200)] * 2 + [("patch", "", "w6", 200)],
             "provided-node-ip: the condition once, then the usual two writes")

        # Node deleted while its instance is being looked up (slow cloud answer)
        c.add_instance({"platform": "hetzner", "name": "gone"})
        c.fail({"platform": "hetzner", "service": "api", "path": "name=gone", "latency": 2})
        make_node(k, "gone")
        time.sleep(0.7)
        st, _ = k.api("DELETE", "/api/v1/nodes/gone")
        t.eq(st, 200, "Node deleted during its initialization")
        time.sleep(3)
        t.eq(writes(k, CLUSTER_SA, "gone"), [], "no write to a Node deleted mid-initialization")
        t.ok(i.proc.poll() is None, "the initializer is still running")
        c.clear_faults()

        # periodic reconciliation: a changed cloud address is written once, unchanged ones never
        before = len(writes(k, CLUSTER_SA, "w5"))
        c.update_instance(insts[4]["id"], {"public_ipv4": "203.0.113.250"})
        n5 = wait_for(lambda: ("ExternalIP", "203.0.113.250") in addresses(get_node(k, "w5")), 15)
        t.ok(n5, "reconciliation picks up a changed address")
        time.sleep(4.5)
        t.eq(len(writes(k, CLUSTER_SA, "w5")) - before, 1, "one status write for one change, none afterwards")
        t.eq(len(writes(k, CLUSTER_SA, "w1")), 2, "an unchanged Node gets no reconciliation write")

        # health and metrics
        t.eq(i.get("/healthz")[0], 200, "/healthz 200")
        t.eq(i.get("/readyz")[0], 200, "/readyz 200 once synced")
        st, text = i.get("/metrics")
        t.eq(st, 200, "/metrics 200")
        t.ok("cloudnode_initializer_nodes_initialized_total 6" in text, "nodes initialized counter", text[:2000])
        t.ok('cloudnode_initializer_cloud_requests_total{provider="hetzner",operation="instance_metadata",result="ok"}'
             in text, "cloud requests by operation and result")
        t.ok('cloudnode_initializer_api_requests_total{verb="PATCH",code="200"}' in text,
             "API requests by verb and code")
        t.ok("cloudnode_initializer_initialization_duration_seconds_count 6" in text, "latency histogram count")
        t.ok("cloudnode_initializer_leader 1" in text, "leader gauge without leader election")
        t.promtool_check_metrics(text)
        # Initialized Nodes at rest cost their cache records only: the one Node kept is the orphan,
        # whose lookups keep failing and which waits for its next retry.
        t.ok(wait_for(lambda: metric_value(i.get("/metrics")[1], "cloudnode_initializer_tracked_nodes") == 1, 10),
             "state is kept for the failing Node only, none for the initialized ones",
             metric_value(i.get("/metrics")[1], "cloudnode_initializer_tracked_nodes"))
        t.eq(i.stop(), 0, "SIGTERM: clean exit")


def test_lifecycle(t, k, c, d):
    a = c.add_instance({"platform": "hetzner", "name": "lc-gone"})
    b = c.add_instance({"platform": "hetzner", "name": "lc-stop"})
    y = c.add_instance({"platform": "hetzner", "name": "lc-young"})
    make_node(k, "lc-gone", tainted=False, provider_id="hcloud://%s" % a["id"], ready=False)
    make_node(k, "lc-stop", tainted=False, provider_id="hcloud://%s" % b["id"], ready=False)
    conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
            "--leader-elect=false", "--controllers=*,-cloud-node", "--bind-address=127.0.0.1",
            "--node-monitor-period=1s", "--node-startup-grace-period=0s", "-v", "4"]
    c.remove_instance(a["id"])
    c.stop(b["id"])
    with Initializer(args, state_dir=d, name="lifecycle") as i:
        t.ok(wait_for(lambda: get_node(k, "lc-gone") is None, 30), "Node of a vanished instance is deleted",
             i.log()[-2000:])
        t.ok(events(k, "lc-gone", "DeletingNode"), "DeletingNode event")
        t.ok(wait_for(lambda: tainted(get_node(k, "lc-stop"), SHUTDOWN_TAINT), 30), "stopped instance: shutdown taint")
        c.start(b["id"])
        set_status(k, "lc-stop", {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]})
        t.ok(wait_for(lambda: not tainted(get_node(k, "lc-stop"), SHUTDOWN_TAINT), 30),
             "Ready again: shutdown taint removed")
        t.ok(get_node(k, "lc-stop") is not None, "a stopped instance's Node is not deleted")
        t.eq([w for w in writes(k, CLUSTER_SA) if w[0] == "patch" and w[1] == "status"], [],
             "the lifecycle controller alone never writes addresses")
    # the grace period protects young Nodes
    c.remove_instance(y["id"])
    make_node(k, "lc-young", tainted=False, provider_id="hcloud://%s" % y["id"], ready=False)
    args2 = [a2 if not a2.startswith("--node-startup-grace-period") else "--node-startup-grace-period=1h"
             for a2 in args]
    with Initializer(args2, state_dir=d, name="lifecycle-grace") as i:
        time.sleep(3.5)
        t.ok(get_node(k, "lc-young") is not None, "a Node younger than the grace period is not deleted")


def test_cloud_connections(t, k, c, d):
    """Eight Nodes looked up at a time, each answer held 0.3 s so the lookups overlap: the cloud's
    connections are kept for the next ones, not closed down to a few idle ones after each burst
    (over TLS each new one is a handshake)."""
    n, syncs = 40, 8
    for i in range(n):
        c.add_instance({"platform": "hetzner", "name": "cc%d" % i})
        make_node(k, "cc%d" % i)
    c.fail({"platform": "hetzner", "method": "GET", "path": "name=cc", "latency": 0.3})
    conf = hetzner_conf(os.path.join(d, "hetzner-cc.conf"), c.url, HETZNER_TOKEN)
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
            "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1",
            "--concurrent-node-syncs=%d" % syncs, "--kube-api-qps=1000", "--kube-api-burst=1000"]
    with Initializer(args, state_dir=d, name="cloud-connections") as i:
        done = wait_for(lambda: all(initialized(k, "cc%d" % x) for x in range(n)), 60)
        t.ok(done, "all %d Nodes are initialized" % n, i.log()[-2000:])
    lookups = [r for r in c.requests() if "name=cc" in r.get("path", "")]
    ports = {r.get("remotePort") for r in lookups}
    t.ok(len(lookups) >= n and None not in ports, "%d lookups, each with the client's port" % len(lookups))
    # A connection per concurrent sync, and the idle ones a provider keeps for its other hosts.
    t.ok(len(ports) <= syncs + 4, "%d lookups over %d connections (at most %d)" % (len(lookups), len(ports), syncs + 4))


def test_bad_credentials(t, k, c, d):
    c.add_instance({"platform": "hetzner", "name": "cred"})
    make_node(k, "cred")
    conf = hetzner_conf(os.path.join(d, "wrong.conf"), c.url, "not-the-token")
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
            "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1"]
    with Initializer(args, state_dir=d, name="badcred") as i:
        ev = wait_for(lambda: events(k, "cred", "FailedToGetInstance"), 20)
        t.ok(ev, "rejected credentials: Warning event FailedToGetInstance", i.log()[-2000:])
        t.ok(ev and ev[0].get("type") == "Warning" and "refused" in ev[0].get("message", ""),
             "the event says the cloud refused the request", ev)
        t.ok(ev and "not-the-token" not in json.dumps(ev), "the token is not in the event")
        t.ok(tainted(get_node(k, "cred")), "the Node stays tainted")
        time.sleep(2)
        t.ok(i.proc.poll() is None, "the initializer keeps running and retrying")
        t.eq(writes(k, CLUSTER_SA, "cred"), [], "nothing is written to the Node")


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    with tempfile.TemporaryDirectory() as d:
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_initialize, k, c, d)
            t.run(test_bad_credentials, k, c, d)
            t.run(test_cloud_connections, k, c, d)
        with kube_server(os.path.join(d, "kube2"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud2")) as c:
            t.run(test_lifecycle, k, c, d)
    sys.exit(t.done())


main()
