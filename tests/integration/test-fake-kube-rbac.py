#!/usr/bin/env python3
"""tests/fake-kube-apiserver: RBAC from --rbac files and from objects created through the API:
rules with subresources, resourceNames, nonResourceURLs, groups, service accounts, RoleBindings
to ClusterRoles, aggregation, escalation prevention, and 403 bodies worded like the real server."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src  # noqa: E402
from fakekubeclient import FakeKube, kubectl_minor, run_with_server, state_dir  # noqa: E402

SA = "system:serviceaccount:cn:patcher"


def test_rules(t, k):
    k.api("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
    tok = k.token_for(SA)
    st, r = k.api("GET", "/api/v1/nodes", token=tok)
    t.eq(st, 200, "service account lists nodes (ClusterRoleBinding to ServiceAccount)")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json",
                  token=tok)
    t.eq(st, 200, "patch allowed")
    st, r = k.api("DELETE", "/api/v1/nodes/n1", token=tok)
    t.eq((st, r.get("reason"), r.get("details")), (403, "Forbidden", {"name": "n1", "kind": "nodes"}),
         "delete denied")
    t.eq(r.get("message"), 'nodes "n1" is forbidden: User "system:serviceaccount:cn:patcher" cannot delete '
         'resource "nodes" in API group "" at the cluster scope', "403 message for a named cluster-scoped object")
    st, r = k.api("PATCH", "/api/v1/nodes/n1/status", {"status": {}}, "application/merge-patch+json", token=tok)
    t.eq(r.get("message"), 'nodes "n1" is forbidden: User "system:serviceaccount:cn:patcher" cannot patch '
         'resource "nodes/status" in API group "" at the cluster scope', "subresource needs its own rule")
    tok2 = k.token_for("writer", ["status-writers"])
    st, r = k.api("PATCH", "/api/v1/nodes/n1/status", {"status": {"phase": "Running"}},
                  "application/merge-patch+json", token=tok2)
    t.eq(st, 200, "Group subject grants nodes/status patch")
    st, r = k.api("GET", "/api/v1/nodes/n1", token=tok2)
    t.eq(st, 403, "nodes/status rule does not grant nodes")
    st, r = k.api("POST", "/apis/events.k8s.io/v1/namespaces/default/events",
                  {"metadata": {"generateName": "e-"}, "regarding": {"kind": "Node", "name": "n1"},
                   "reason": "Test", "action": "Test", "eventTime": "2024-01-01T00:00:00.000000Z",
                   "reportingController": "x", "reportingInstance": "y", "type": "Normal"}, token=tok)
    t.eq(st, 201, "events.k8s.io events create")
    # resourceNames
    k.api("POST", "/api/v1/namespaces/cn/configmaps", {"metadata": {"name": "cloud-conf"}})
    k.api("POST", "/api/v1/namespaces/cn/configmaps", {"metadata": {"name": "other"}})
    st, r = k.api("GET", "/api/v1/namespaces/cn/configmaps/cloud-conf", token=tok)
    t.eq(st, 200, "resourceNames: the named object")
    st, r = k.api("GET", "/api/v1/namespaces/cn/configmaps/other", token=tok)
    t.eq(r.get("message"), 'configmaps "other" is forbidden: User "system:serviceaccount:cn:patcher" cannot get '
         'resource "configmaps" in API group "" in the namespace "cn"', "resourceNames: another object, namespaced 403")
    st, r = k.api("GET", "/api/v1/namespaces/cn/configmaps", token=tok)
    t.eq(st, 403, "resourceNames: list without a name is denied")
    st, r = k.api("GET", "/api/v1/namespaces/cn/configmaps?fieldSelector=metadata.name%3Dcloud-conf", token=tok)
    t.eq((st, len(r.get("items") or [])), (200, 1), "list selecting the one name by fieldSelector is allowed")
    st, r = k.api("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dcloud-conf",
                  token=tok)
    t.eq(st, 403, "Role applies only in its namespace")
    st, r = k.api("POST", "/apis/coordination.k8s.io/v1/namespaces/cn/leases",
                  {"metadata": {"name": "lock"}, "spec": {"holderIdentity": "me"}}, token=tok)
    t.eq(st, 201, "Role grants leases create in its namespace")
    # RoleBinding to a ClusterRole: namespace-limited.
    alice = k.token_for("alice")
    k.api("POST", "/api/v1/namespaces/cn/secrets", {"metadata": {"name": "s"}})
    k.api("POST", "/api/v1/namespaces/default/secrets", {"metadata": {"name": "s"}})
    st, _ = k.api("GET", "/api/v1/namespaces/cn/secrets/s", token=alice)
    st2, _ = k.api("GET", "/api/v1/namespaces/default/secrets/s", token=alice)
    t.eq((st, st2), (200, 403), "ClusterRole through a RoleBinding: only in the binding's namespace")
    # nonResourceURLs
    st, _ = k.api("GET", "/metrics", token=alice)
    t.eq(st, 404, "nonResourceURL allowed (then not found here)")
    st, _ = k.api("GET", "/debug/pprof/x", token=alice)
    t.eq(st, 404, "nonResourceURL wildcard")
    st, r = k.api("GET", "/logs", token=alice)
    t.eq((st, r.get("message")), (403, 'forbidden: User "alice" cannot get path "/logs"'), "non-resource 403 message")
    # Dangling roleRef: the denial names the missing role.
    bob = k.token_for("bob")
    st, r = k.api("GET", "/api/v1/nodes", token=bob)
    t.eq(r.get("message"), 'nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the '
         'cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "test:ghost" not found',
         "binding to a missing ClusterRole: reason in the message")
    carol = k.token_for("carol")
    st, _ = k.api("GET", "/apis/apps/v1/deployments", token=carol)
    st2, _ = k.api("GET", "/apis/apps/v1/daemonsets", token=carol)
    t.eq((st, st2), (200, 403), "aggregated ClusterRole")


def test_api_created(t, k):
    tok = k.token_for("dave")
    st, _ = k.api("GET", "/api/v1/namespaces", token=tok)
    t.eq(st, 403, "before binding")
    st, _ = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                  {"metadata": {"name": "ns-reader"},
                   "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]})
    st2, _ = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                   {"metadata": {"name": "dave"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ns-reader"},
                    "subjects": [{"kind": "User", "name": "dave", "apiGroup": "rbac.authorization.k8s.io"}]})
    t.eq((st, st2), (201, 201), "RBAC objects created through the API")
    st, _ = k.api("GET", "/api/v1/namespaces", token=tok)
    t.eq(st, 200, "binding created through the API takes effect at once")
    k.api("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/dave")
    st, _ = k.api("GET", "/api/v1/namespaces", token=tok)
    t.eq(st, 403, "deleting the binding revokes")
    st, r = k.api("PUT", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/x",
                  {"metadata": {"name": "x"}, "roleRef": {"kind": "Nope", "name": "y"}})
    t.eq(st, 422, "invalid binding: 422")


def test_escalation(t, k):
    mgr = k.token_for("system:serviceaccount:cn:manager")
    ok_role = {"metadata": {"name": "cm-getter"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
    st, _ = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", ok_role, token=mgr)
    t.eq(st, 201, "may create a ClusterRole granting what it holds")
    bad = {"metadata": {"name": "node-deleter"},
           "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["delete", "get"]}]}
    st, r = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", bad, token=mgr)
    t.eq((st, r.get("reason")), (403, "Forbidden"), "escalation denied")
    t.eq(r.get("message"), 'clusterroles.rbac.authorization.k8s.io "node-deleter" is forbidden: user '
         '"system:serviceaccount:cn:manager" (groups=["system:serviceaccounts" "system:serviceaccounts:cn" '
         '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
         '{APIGroups:[""], Resources:["nodes"], Verbs:["delete"]}\n{APIGroups:[""], Resources:["nodes"], '
         'Verbs:["get"]}', "escalation message lists the missing rules")
    st, r = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                  {"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind":
                                                          "ClusterRole", "name": "test:node-patcher"},
                   "subjects": [{"kind": "User", "name": "eve"}]}, token=mgr)
    t.eq(st, 403, "binding a role with permissions not held is denied")
    st, r = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                  {"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind":
                                                          "ClusterRole", "name": "cm-getter"},
                   "subjects": [{"kind": "User", "name": "eve"}]}, token=mgr)
    t.eq(st, 201, "binding a role whose permissions are held is allowed")
    # With 'bind' on that role it may bind it without holding its permissions.
    k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
          {"metadata": {"name": "binder"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                                                      "resources": ["clusterroles"], "verbs": ["bind"],
                                                      "resourceNames": ["test:node-patcher"]}]})
    k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
          {"metadata": {"name": "binder"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                       "name": "binder"},
           "subjects": [{"kind": "ServiceAccount", "name": "manager", "namespace": "cn"}]})
    st, r = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                  {"metadata": {"name": "b2"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind":
                                                           "ClusterRole", "name": "test:node-patcher"},
                   "subjects": [{"kind": "User", "name": "eve"}]}, token=mgr)
    t.eq(st, 201, "'bind' on the named role permits the binding")


def test_kubectl_can_i(t, k):
    kc = k.kubeconfig_for(SA)
    r = k.kubectl("auth", "can-i", "patch", "nodes", "--subresource=status", kubeconfig=kc)
    t.eq(r.stdout.strip(), "no", "kubectl auth can-i: no")
    r = k.kubectl("auth", "can-i", "patch", "nodes", kubeconfig=kc)
    t.eq((r.returncode, r.stdout.strip()), (0, "yes"), "kubectl auth can-i: yes")
    r = k.kubectl("auth", "can-i", "get", "configmaps/cloud-conf", "-n", "cn", kubeconfig=kc)
    t.eq(r.stdout.strip(), "yes", "kubectl auth can-i with a resource name")
    if kubectl_minor() >= 27:
        r = k.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}", kubeconfig=kc)
        t.eq(r.stdout.strip(), SA, "kubectl auth whoami")
    else:
        t.skip("kubectl auth whoami", "kubectl 1.%d has no auth whoami (1.27 and later)" % kubectl_minor())
    r = k.kubectl("get", "nodes", "-o", "name", kubeconfig=kc)
    t.eq((r.returncode, r.stdout.strip()), (0, "node/n1"), "kubectl get as the service account")
    r = k.kubectl("delete", "node", "n1", kubeconfig=kc)
    t.ok(r.returncode != 0 and 'cannot delete resource "nodes" in API group "" at the cluster scope' in r.stderr,
         "kubectl shows the 403", r.stderr)


def test_project_manifests(t):
    """The project's own manifests load as RBAC (rendered with kubectl kustomize)."""
    base = src("manifests", "base")
    if not os.path.exists(os.path.join(base, "kustomization.yaml")):
        t.bail_out("manifests/base/kustomization.yaml is missing")
        return
    d = state_dir()
    try:
        out = os.path.join(d, "rendered.yaml")
        r = subprocess.run(["kubectl", "kustomize", base], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t.ok(r.returncode == 0, "kubectl kustomize manifests/base", r.stderr)
        with open(out, "w") as f:
            f.write(r.stdout)
        with FakeKube(os.path.join(d, "srv"), rbac=[out]) as k:
            st, r = k.api("GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings")
            names = [o["metadata"]["name"] for o in r["items"]]
            t.ok(any(n.startswith("cloudnode") for n in names), "project ClusterRoleBindings loaded", names)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    t = Tap()
    run_with_server(t, (test_rules, test_api_created, test_escalation, test_kubectl_can_i),
                    rbac=[src("tests", "data", "fakekube-rbac-test.yaml")])
    t.run(test_project_manifests)
    sys.exit(t.done())


main()
