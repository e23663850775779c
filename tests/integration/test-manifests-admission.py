#!/usr/bin/env python3
"""The ValidatingAdmissionPolicy of the node-mode identities, evaluated by the API server with the
shipped RBAC: each node has its own ServiceAccount (cloudnode-nodes/NODE, token from the
TokenRequest API). What the initializer does to its freshly registered Node (no annotations, no
unschedulable field, and the CloudProviderInitialized condition) is allowed; anything else it
might try, such as changing the kubelet's conditions, is denied, and so is every write to another
node's Node (test-reliability-node-identity.py tries them all). Runs against the fake API server
and, with CN_KUBE_SERVER=real, the real one."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src, wait_for  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
MERGE = "application/merge-patch+json"


def node(name, **spec):
    s = {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"},
                    {"key": "example.com/other", "effect": "NoSchedule"}]}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": s}


def main():
    t = Tap()
    with tempfile.TemporaryDirectory(prefix="cn-vap-") as d, \
            kube_server(os.path.join(d, "kube"), rbac=[src("manifests", "operand", "node-initializer-rbac.yaml")]) as k:
        r = k.kubectl("apply", "-f", src("manifests", "operand", "node-initializer-admission-policy.yaml"))
        t.eq(r.returncode, 0, "the policy and its binding apply") or t.diag(r.stderr)
        tokens = {}
        for i, n in enumerate(("n1", "n2", "n3", "n4", "n5", "n6")):
            k.api("POST", "/api/v1/nodes", node(n))
            tokens[n] = k.node_identity(n)[1]

        # The real API server enforces a new policy once its informer has seen and compiled it,
        # about a second later: wait until a dry run of a denied change is denied.
        def enforced():
            st, _ = k.api("PATCH", "/api/v1/nodes/n2?dryRun=All", {"metadata": {"labels": {"example.com/x": "y"}}},
                          MERGE, token=tokens["n2"])
            return st in (403, 422)
        t.ok(wait_for(enforced, timeout=30, step=0.2), "the policy is enforced")

        def patch(name, body, sub="", token=None):
            st, obj = k.api("PATCH", "/api/v1/nodes/%s%s" % (name, sub), body, MERGE, token=token or tokens[name])
            return st, obj

        st, obj = patch("n1", {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}, "/status")
        t.eq(st, 200, "addresses on nodes/status are allowed")
        st, obj = patch("n2", {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}, "/status",
                        token=tokens["n1"])
        t.ok(st == 403 and "its own Node" in obj.get("message", ""),
             "node n1 may not write node n2's addresses (HTTP %d)" % st, obj)
        k.api("PATCH", "/api/v1/nodes/n1/status",
              {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}, MERGE)
        st, obj = k.api("PATCH", "/api/v1/nodes/n1/status",
                        {"status": {"conditions": [{"type": "CloudProviderInitialized", "status": "False",
                                                    "reason": "ProvidedNodeIPMismatch"}]}},
                        "application/strategic-merge-patch+json", token=tokens["n1"])
        t.eq(st, 200, "its own CloudProviderInitialized condition is allowed") or t.diag(obj)
        st, obj = k.api("PATCH", "/api/v1/nodes/n1/status",
                        {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Evil"}]}},
                        "application/strategic-merge-patch+json", token=tokens["n1"])
        t.ok(st in (403, 422), "changing the kubelet's Ready condition is denied (HTTP %d)" % st, obj)
        # The Node's taints as the initializer patches them: what is there, less the uninitialized
        # taint (a real API server adds node.kubernetes.io/not-ready when a Node is created).
        # The node lifecycle controller may take the not-ready taint away meanwhile (the Node is
        # Ready now): the patch carries the resourceVersion it was computed from and is computed
        # again after a 409, as the initializer does.
        for _ in range(20):
            st, cur = k.api("GET", "/api/v1/nodes/n1")
            kept = [x for x in cur["spec"]["taints"] if x["key"] != TAINT]
            st, obj = patch("n1", {"spec": {"providerID": "aws:///us-east-1a/i-1", "taints": kept},
                                   "metadata": {"resourceVersion": cur["metadata"]["resourceVersion"],
                                                "labels": {"node.kubernetes.io/instance-type": "m5.large",
                                                           "topology.kubernetes.io/zone": "us-east-1a"}}})
            if st != 409:
                break
        t.eq(st, 200, "providerID from empty, well-known labels and removing the uninitialized taint are allowed",) \
            or t.diag(obj)
        st, obj = patch("n1", {"spec": {"providerID": "aws:///us-east-1a/i-2"}})
        t.ok(st in (403, 422), "changing a set providerID is denied (HTTP %d)" % st, obj)
        st, obj = patch("n2", {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}})
        t.ok(st in (403, 422), "another label is denied (HTTP %d)" % st, obj)
        st, obj = patch("n3", {"spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}})
        t.ok(st in (403, 422), "removing another taint is denied (HTTP %d)" % st, obj)
        st, obj = patch("n4", {"spec": {"unschedulable": True}})
        t.ok(st in (403, 422), "cordoning is denied (HTTP %d)" % st, obj)
        st, obj = patch("n5", {"metadata": {"annotations": {"example.com/a": "b"}}})
        t.ok(st in (403, 422), "adding an annotation is denied (HTTP %d)" % st, obj)
        # What a compromised node could use against a Node beyond its addresses: the scheduler's
        # view (capacity, allocatable), where the API server reaches the kubelet, garbage
        # collection (ownerReferences), deletion (finalizers), pod networking (podCIDRs).
        k.api("PATCH", "/api/v1/nodes/n6/status", {"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"},
                                                              "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                                                              "runtimeHandlers": [{"name": "runc"}],
                                                              "features": {"supplementalGroupsPolicy": True}}},
              MERGE)
        for what, body, sub in (
                ("status.capacity", {"status": {"capacity": {"cpu": "400"}}}, "/status"),
                ("status.allocatable", {"status": {"allocatable": {"cpu": "400"}}}, "/status"),
                ("status.daemonEndpoints", {"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 1}}}},
                 "/status"),
                ("status.nodeInfo", {"status": {"nodeInfo": {"kubeletVersion": "v0.0.1"}}}, "/status"),
                ("status.runtimeHandlers", {"status": {"runtimeHandlers": [{"name": "evil"}]}}, "/status"),
                ("status.features", {"status": {"features": {"supplementalGroupsPolicy": False}}}, "/status"),
                ("status.images", {"status": {"images": [{"names": ["evil:1"], "sizeBytes": 1}]}}, "/status"),
                ("status.config", {"status": {"config": {"error": "evil"}}}, "/status"),
                ("metadata.ownerReferences", {"metadata": {"ownerReferences": [
                    {"apiVersion": "v1", "kind": "Namespace", "name": "gone", "uid": "u-1"}]}}, ""),
                ("metadata.finalizers", {"metadata": {"finalizers": ["example.com/block"]}}, ""),
                ("spec.podCIDRs", {"spec": {"podCIDRs": ["10.244.9.0/24"]}}, "")):
            st, obj = patch("n6", body, sub)
            if what == "status.config":
                # The API server drops status.config (the dynamic kubelet config went away in
                # 1.24) before admission: the write changes nothing, so nothing is denied.
                t.ok(st in (403, 422) or (st == 200 and "config" not in (obj.get("status") or {})),
                     "changing %s is denied or dropped (HTTP %d)" % (what, st), obj)
                continue
            t.ok(st in (403, 422), "changing %s is denied (HTTP %d)" % (what, st), obj)
        st, obj = k.api("PATCH", "/api/v1/nodes/n2", {"metadata": {"annotations": {"example.com/a": "b"}}}, MERGE)
        t.eq(st, 200, "other identities are not affected by the policy")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
