#!/usr/bin/env python3
"""Node mode's identity against a compromised node. The fake API server runs with the shipped
node-mode RBAC, admission policy and node-identity namespace; each node gets the credential the
shipped binding says a node has (a ServiceAccount of the bound group's namespace named as the
Node, or the one bound ServiceAccount all nodes share), minted through the TokenRequest API.
Node A then tries to change Node B in every way node mode could (addresses, providerID while
empty, each well-known label, the uninitialized taint, conditions; on `nodes` and
`nodes/status`; merge, strategic and JSON patches, and PUT even where update is granted): all
refused, B unchanged. A still initializes itself, and cannot change its own forbidden fields. A's
credential reads and mints no other credential; deleting B's ServiceAccount revokes B's token."""
import copy
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import yaml  # noqa: E402
from cntap import Tap, src  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

RBAC = src("manifests", "operand", "node-initializer-rbac.yaml")
POLICY = src("manifests", "operand", "node-initializer-admission-policy.yaml")
NODE_NS = src("manifests", "node-identity", "namespace.yaml")
TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSONPATCH = "application/json-patch+json"
WELL_KNOWN = ["node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
              "topology.kubernetes.io/region", "topology.kubernetes.io/zone",
              "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone"]


def node_subjects():
    """The subjects of the shipped ClusterRoleBinding of cloudnode:node-initializer."""
    with open(RBAC) as f:
        for o in yaml.safe_load_all(f):
            if o and o.get("kind") == "ClusterRoleBinding" and o["roleRef"]["name"] == "cloudnode:node-initializer":
                return o.get("subjects") or []
    return []


def identity(k, node):
    """(user, token) of node as the shipped binding identifies nodes."""
    for s in node_subjects():
        if s["kind"] == "Group" and s["name"].startswith("system:serviceaccounts:"):
            return k.node_identity(node, namespace=s["name"].split(":", 2)[2])
        if s["kind"] == "ServiceAccount":
            # One ServiceAccount for every node.
            return k.node_identity(s["name"], namespace=s["namespace"])
    raise RuntimeError("%s binds no ServiceAccount or ServiceAccount group" % RBAC)


def registered(name):
    """A Node as the kubelet registers it with --cloud-provider=external."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}}


KUBELET_STATUS = {"status": {
    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    "addresses": [{"type": "Hostname", "address": "x"}],
    "capacity": {"cpu": "2"}, "allocatable": {"cpu": "2"},
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    "nodeInfo": {"kubeletVersion": "v1.32.0", "machineID": "m", "systemUUID": "s", "bootID": "b",
                 "kernelVersion": "6.1", "osImage": "Debian", "containerRuntimeVersion": "cri-o://1.32",
                 "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
    "runtimeHandlers": [{"name": "runc", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": False}}],
    "features": {"supplementalGroupsPolicy": True}}}


def cross_node_writes(victim):
    """(what, subresource, content type, body) of every change node mode makes, aimed at victim."""
    out = [("addresses", "/status", MERGE, {"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}),
           ("addresses", "/status", STRATEGIC,
            {"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}),
           ("addresses", "/status", JSONPATCH,
            [{"op": "add", "path": "/status/addresses/-", "value": {"type": "ExternalIP", "address": "203.0.113.9"}}]),
           ("providerID while empty", "", MERGE, {"spec": {"providerID": "hetzner://666"}}),
           ("providerID while empty", "", JSONPATCH,
            [{"op": "add", "path": "/spec/providerID", "value": "hetzner://6"}]),
           ("uninitialized taint removal", "", MERGE, {"spec": {"taints": None}}),
           ("uninitialized taint removal", "", STRATEGIC,
            {"spec": {"$setElementOrder/taints": [], "taints": [{"key": TAINT, "$patch": "delete"}]}}),
           ("uninitialized taint removal", "", JSONPATCH, [{"op": "remove", "path": "/spec/taints/0"}]),
           ("CloudProviderInitialized condition", "/status", STRATEGIC,
            {"status": {"conditions": [{"type": "CloudProviderInitialized", "status": "True", "reason": "Evil"}]}}),
           ("Ready condition", "/status", STRATEGIC,
            {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Evil"}]}}),
           ("conditions", "/status", MERGE, {"status": {"conditions": []}})]
    for label in WELL_KNOWN:
        out.append(("label " + label, "", MERGE, {"metadata": {"labels": {label: "evil"}}}))
        out.append(("label " + label, "/status", MERGE, {"metadata": {"labels": {label: "evil"}}}))
        out.append(("label " + label, "", JSONPATCH,
                    [{"op": "add", "path": "/metadata/labels/" + label.replace("~", "~0").replace("/", "~1"),
                      "value": "evil"}]))
    return out


def put_changes(obj):
    """(what, subresource, changed copy of obj) for a PUT of every change node mode makes."""
    out = []
    for what, sub, fn in (
            ("addresses", "/status", lambda o: o["status"].__setitem__("addresses", [{"type": "InternalIP",
                                                                                     "address": "10.9.9.9"}])),
            ("providerID while empty", "", lambda o: o["spec"].__setitem__("providerID", "hetzner://666")),
            ("uninitialized taint removal", "", lambda o: o["spec"].pop("taints")),
            ("CloudProviderInitialized condition", "/status", lambda o: o["status"]["conditions"].append(
                {"type": "CloudProviderInitialized", "status": "True", "reason": "Evil"})),
            ("label topology.kubernetes.io/zone", "", lambda o: o["metadata"]["labels"].__setitem__(
                "topology.kubernetes.io/zone", "evil"))):
        o = copy.deepcopy(obj)
        fn(o)
        out.append((what, sub, o))
    return out


def denied(st, obj):
    return st == 403 and isinstance(obj, dict) and obj.get("reason") == "Forbidden"


def stable(node):
    """A Node without the fields every write changes."""
    n = copy.deepcopy(node)
    for k in ("resourceVersion", "managedFields", "generation"):
        n["metadata"].pop(k, None)
    return n


def test_other_node(t, k):
    """Node A against Node B: every write refused and B unchanged."""
    for n in ("na", "nb"):
        k.api("POST", "/api/v1/nodes", registered(n))
        k.api("PATCH", "/api/v1/nodes/%s/status" % n, KUBELET_STATUS, MERGE)
    user_a, tok_a = identity(k, "na")
    identity(k, "nb")
    t.diag("node A is %s" % user_a)
    _, before = k.api("GET", "/api/v1/nodes/nb")
    for what, sub, ctype, body in cross_node_writes("nb"):
        st, obj = k.api("PATCH", "/api/v1/nodes/nb" + sub, body, ctype, token=tok_a)
        t.ok(denied(st, obj), "node A cannot change Node B's %s through nodes%s (%s): HTTP %d"
             % (what, sub, ctype.split("/")[1], st), obj)
    _, after = k.api("GET", "/api/v1/nodes/nb")
    t.eq(stable(after), stable(before), "Node B is unchanged after node A's patches")

    st, obj = k.api("PUT", "/api/v1/nodes/nb", after, token=tok_a)
    t.ok(denied(st, obj), "PUT is not granted to node identities (HTTP %d)" % st, obj)
    # Even where someone grants update to the node identities, PUT is held by the policy.
    k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "test:node-update"},
        "rules": [{"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["update"]}]})
    k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "test:node-update"}, "subjects": node_subjects(),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "test:node-update"}})
    for what, sub, body in put_changes(after):
        st, obj = k.api("PUT", "/api/v1/nodes/nb" + sub, body, token=tok_a)
        t.ok(denied(st, obj) and "ValidatingAdmissionPolicy 'cloudnode-node-initializer'" in obj.get("message", ""),
             "PUT by node A of Node B's %s through nodes%s, update granted, is denied by the policy (HTTP %d)"
             % (what, sub, st), obj)
    k.api("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/test:node-update")
    _, final = k.api("GET", "/api/v1/nodes/nb")
    t.eq(stable(final), stable(before), "Node B is unchanged after node A's PUTs")


def test_own_node(t, k):
    """Node A initializes its own Node, and cannot change the rest of it."""
    k.api("POST", "/api/v1/nodes", registered("nc"))
    k.api("PATCH", "/api/v1/nodes/nc/status", KUBELET_STATUS, MERGE)
    _, tok = identity(k, "nc")
    st, obj = k.api("PATCH", "/api/v1/nodes/nc/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.0.3"}, {"type": "Hostname", "address": "nc"}],
        "conditions": [{"type": "CloudProviderInitialized", "status": "True", "reason": "InitializedByCloudnode"}]}},
        STRATEGIC, token=tok)
    t.eq(st, 200, "node C sets its own addresses and CloudProviderInitialized condition") or t.diag(obj)
    st, obj = k.api("PATCH", "/api/v1/nodes/nc", {
        "metadata": {"labels": {label: "v" for label in WELL_KNOWN}},
        "spec": {"providerID": "hetzner://3", "taints": None}}, MERGE, token=tok)
    t.eq(st, 200, "node C sets its providerID and well-known labels and removes its uninitialized taint") \
        or t.diag(obj)
    t.ok(st == 200 and obj["spec"].get("providerID") == "hetzner://3" and not obj["spec"].get("taints"),
         "node C's Node is initialized", obj)
    k.api("PATCH", "/api/v1/nodes/nc", {"spec": {"taints": [{"key": "example.com/kept", "effect": "NoSchedule"}]}},
          MERGE)
    for what, sub, ctype, body in (
            ("a set providerID", "", MERGE, {"spec": {"providerID": "hetzner://4"}}),
            ("another label", "", MERGE, {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}),
            ("the kubelet's hostname label", "", MERGE, {"metadata": {"labels": {"kubernetes.io/hostname": "x"}}}),
            ("another taint's removal", "", MERGE, {"spec": {"taints": None}}),
            ("another taint's value", "", MERGE,
             {"spec": {"taints": [{"key": "example.com/kept", "value": "x", "effect": "NoSchedule"}]}}),
            ("a new taint", "", JSONPATCH, [{"op": "add", "path": "/spec/taints/-",
                                             "value": {"key": "example.com/new", "effect": "NoExecute"}}]),
            ("an annotation", "", MERGE, {"metadata": {"annotations": {"example.com/a": "b"}}}),
            ("unschedulable", "", MERGE, {"spec": {"unschedulable": True}}),
            ("spec.podCIDR", "", MERGE, {"spec": {"podCIDR": "10.244.9.0/24"}}),
            ("the Ready condition", "/status", STRATEGIC,
             {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Evil"}]}}),
            ("status.runtimeHandlers", "/status", MERGE, {"status": {"runtimeHandlers": [{"name": "evil"}]}}),
            ("status.features", "/status", MERGE, {"status": {"features": {"supplementalGroupsPolicy": False}}}),
            ("status.volumesInUse", "/status", MERGE, {"status": {"volumesInUse": ["kubernetes.io/x"]}}),
            ("status.phase", "/status", MERGE, {"status": {"phase": "Terminated"}})):
        st, obj = k.api("PATCH", "/api/v1/nodes/nc" + sub, body, ctype, token=tok)
        # 422 where the API server's own validation refuses it first (a set providerID).
        t.ok(denied(st, obj) or st == 422, "node C cannot change its own %s (HTTP %d)" % (what, st), obj)
    _, after = k.api("GET", "/api/v1/nodes/nc")
    t.ok(after["spec"].get("providerID") == "hetzner://3" and not after["metadata"].get("annotations")
         and after["spec"].get("taints") == [{"key": "example.com/kept", "effect": "NoSchedule"}]
         and after["status"].get("runtimeHandlers") == KUBELET_STATUS["status"]["runtimeHandlers"],
         "node C's Node kept what it may not change", after)


def test_credentials(t, k):
    """A node's credential reads and mints no other credential, and deleting a node's
    ServiceAccount revokes its token at once."""
    k.api("POST", "/api/v1/nodes", registered("nd"))
    k.api("POST", "/api/v1/nodes", registered("ne"))
    user_d, tok_d = identity(k, "nd")
    user_e, tok_e = identity(k, "ne")
    t.ok(user_d != user_e, "nodes D and E have distinct identities (%s, %s)" % (user_d, user_e))
    ns = user_e.split(":")[2]
    name_e = user_e.split(":")[3]
    st, obj = k.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (ns, name_e),
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}, token=tok_d)
    t.ok(denied(st, obj), "node D cannot mint a token for node E (HTTP %d)" % st, obj)
    for what, method, path in (("list Secrets of %s" % ns, "GET", "/api/v1/namespaces/%s/secrets" % ns),
                               ("list Secrets", "GET", "/api/v1/secrets"),
                               ("list ServiceAccounts of %s" % ns, "GET", "/api/v1/namespaces/%s/serviceaccounts" % ns),
                               ("create a ServiceAccount in %s" % ns, "POST",
                                "/api/v1/namespaces/%s/serviceaccounts" % ns)):
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nz"}} if method == "POST" else None
        st, obj = k.api(method, path, body, token=tok_d)
        t.ok(denied(st, obj), "node D cannot %s (HTTP %d)" % (what, st), obj)
    st, _ = k.api("GET", "/api/v1/nodes/ne", token=tok_e)
    t.eq(st, 200, "node E's token works")
    if user_d == user_e:
        t.skip("deleting node E's ServiceAccount revokes its token", "the nodes share one ServiceAccount")
        return
    k.api("DELETE", "/api/v1/namespaces/%s/serviceaccounts/%s" % (ns, name_e))
    st, _ = k.api("GET", "/api/v1/nodes/ne", token=tok_e)
    t.eq(st, 401, "node E's token is refused once its ServiceAccount is deleted")
    st, _ = k.api("GET", "/api/v1/nodes/nd", token=tok_d)
    t.eq(st, 200, "node D's token still works")
    _, tok_e2 = identity(k, "ne")
    st, _ = k.api("GET", "/api/v1/nodes/ne", token=tok_e)
    t.eq(st, 401, "the old token stays revoked when the ServiceAccount is created again")
    st, _ = k.api("PATCH", "/api/v1/nodes/ne/status", {"status": {"addresses": [{"type": "InternalIP",
                                                                                "address": "10.0.0.5"}]}},
                  MERGE, token=tok_e2)
    t.eq(st, 200, "a newly minted token for node E works")


def main():
    t = Tap()
    load = [POLICY] + ([NODE_NS] if os.path.exists(NODE_NS) else [])
    with tempfile.TemporaryDirectory(prefix="cn-nodeid-") as d, \
            FakeKube(os.path.join(d, "kube"), rbac=[RBAC], load=load) as k:
        t.diag("node-mode subjects: %s" % json.dumps(node_subjects()))
        t.run(test_other_node, k)
        t.run(test_own_node, k)
        t.run(test_credentials, k)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
