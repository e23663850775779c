#!/usr/bin/env python3
"""The peers of the side-by-side benchmark (bench/initializer/peers.py) against the fakes, on a
few Nodes: hcloud-cloud-controller-manager and openstack-cloud-controller-manager, real clients
of the Hetzner and OpenStack APIs, initialize every Node from tests/fake-cloud, and
cloudnode-initializer, on the same Nodes and instances, sets the same providerID scheme,
instance-type and topology labels and every address the peer reports. Skipped for a
peer that bench/peers/build.sh has not built (make bench-peers-build); make check never builds
them."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

sys.path.insert(0, src("bench", "initializer"))
import peers  # noqa: E402

N = 3
LABELS = ("node.kubernetes.io/instance-type", "topology.kubernetes.io/region", "topology.kubernetes.io/zone")


def node(i):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bench-%05d" % i},
            "spec": {"taints": [{"key": peers.TAINT, "value": "true", "effect": "NoSchedule"}]}}


def addresses(n):
    return {(a["type"], a["address"]) for a in n["status"]["addresses"]}


def scheme(provider_id):
    return provider_id.split("://")[0]


def main():
    t = Tap()
    bindir = peers.subprocess.run(["sh", peers.BUILD_SH, "--bindir"], stdout=peers.subprocess.PIPE,
                                  text=True, check=True).stdout.strip()
    built = [p for p in sorted(peers.PEERS) if os.access(os.path.join(bindir, peers.PEERS[p]), os.X_OK)]
    if not built:
        t.skip_all("the peers are not built (make bench-peers-build builds them into %s)" % bindir)
    add = peers.instances_adder(peers.load_fake_cloud_state())
    limits = ["--kube-api-qps=20", "--kube-api-burst=30", "--concurrent-node-syncs=1"]
    for provider in sorted(peers.PEERS):
        if provider not in built:
            t.skip("%s: both sides initialize the Nodes" % provider, "%s is not built" % peers.PEERS[provider])
            continue
        rows = {}
        for side in ("cloudnode", "peer"):
            with tempfile.TemporaryDirectory(prefix="cn-peers-") as d:
                try:
                    rows[side] = peers.run_side(side, provider, N, limits, kube_server, add, node, bindir, d)
                except SystemExit as e:
                    t.diag(str(e))
        t.ok(len(rows) == 2, "%s: both sides initialize all %d Nodes" % (provider, N))
        if len(rows) != 2:
            continue
        ours, peer = rows["cloudnode"]["nodes"], rows["peer"]["nodes"]
        for name in sorted(peer):
            t.eq(scheme(ours[name]["spec"]["providerID"]), scheme(peer[name]["spec"]["providerID"]),
                 "%s %s: same providerID scheme" % (provider, name))
            t.eq({k: ours[name]["metadata"]["labels"].get(k) for k in LABELS},
                 {k: peer[name]["metadata"]["labels"].get(k) for k in LABELS},
                 "%s %s: same instance-type, region and zone labels" % (provider, name))
            t.ok(addresses(peer[name]) and addresses(peer[name]) <= addresses(ours[name]),
                 "%s %s: every address the peer reports is set" % (provider, name),
                 "peer %s, cloudnode %s" % (sorted(addresses(peer[name])), sorted(addresses(ours[name]))))
        t.ok(rows["peer"]["cloud"] > 0 and rows["cloudnode"]["cloud"] > 0,
             "%s: both sides' cloud requests are in the fake cloud's log" % provider)
    return t.done()


sys.exit(main())
