#!/usr/bin/env python3
"""tests/fake-kube-apiserver: the Pod eviction subresource honours PodDisruptionBudgets as the real
server does (429 with the DisruptionBudget cause while the budget forbids, the Pod deleted when it
allows, a Pod that is not Running evicted regardless, 500 for two budgets), needs RBAC create on
pods/eviction, and a real `kubectl drain` is held back by a budget and completes once it allows."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakekubeclient import run_with_server  # noqa: E402

NS = "default"
PODS = "/api/v1/namespaces/%s/pods" % NS
PDBS = "/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % NS
MERGE = "application/merge-patch+json"


def pod(k, name, node="n1", app="web", phase="Running", ready=True):
    st, o = k.api("POST", PODS, {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": name, "labels": {"app": app}},
                                  "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}})
    assert st == 201, (st, o)
    st, o = k.api("PATCH", PODS + "/" + name + "/status", {"status": {
        "phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}, MERGE)
    assert st == 200, (st, o)


def evict(k, name, token=None):
    return k.api("POST", PODS + "/" + name + "/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}, token=token)


def test_budget(t, k):
    for i in range(3):
        pod(k, "web-%d" % i)
    k.api("POST", PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                         "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    st, body = evict(k, "web-0")
    t.eq((st, body.get("status")), (201, "Success"), "the first eviction leaves 2 of 3 healthy: allowed")
    st, gone = k.api("GET", PODS + "/web-0")
    t.ok(st == 200 and gone["metadata"].get("deletionTimestamp") and gone["metadata"].get(
        "deletionGracePeriodSeconds") == 30, "and deletes the Pod gracefully: terminating until its kubelet confirms")
    t.eq(k.api("DELETE", PODS + "/web-0", {"gracePeriodSeconds": 0})[0], 200, "(the kubelet's confirmation)")
    st, body = evict(k, "web-1")
    t.eq((st, body.get("reason"), body.get("message")),
         (429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."),
         "the second would leave 1 of minAvailable 2: 429 with the real message")
    t.eq([c.get("reason") for c in (body.get("details") or {}).get("causes", [])], ["DisruptionBudget"],
         "with the DisruptionBudget cause")
    t.eq(k.api("GET", PODS + "/web-1")[0], 200, "and the Pod stays")
    pod(k, "web-3", ready=False)
    t.eq(evict(k, "web-1")[0], 429, "a Pod that is not Ready does not count as healthy")
    pod(k, "done", app="web", phase="Succeeded", ready=False)
    t.eq(evict(k, "done")[0], 201, "a Pod that is not Running is evicted whatever the budget says")
    k.api("PATCH", PDBS + "/web", {"spec": {"minAvailable": None, "maxUnavailable": "50%"}}, MERGE)
    t.eq(evict(k, "web-1")[0], 201, "maxUnavailable 50% of 3 selected (2, rounded up): one more allowed")
    t.eq(evict(k, "nope")[0], 404, "an eviction of a missing Pod is 404")
    k.api("POST", PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web2"},
                         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    st, body = evict(k, "web-2")
    t.eq((st, body.get("reason")), (500, "InternalError"), "two budgets for one Pod: 500, as the real registry")
    for n in ("web", "web2"):
        k.api("DELETE", PDBS + "/" + n)
    for n in ("web-2", "web-3"):
        k.api("DELETE", PODS + "/" + n)


def test_rbac(t, k):
    pod(k, "guarded", node="n2", app="other")
    user = "system:serviceaccount:default:nobody"
    r = k.kubectl("create", "--raw", PODS + "/guarded/eviction", "-f", "-", kubeconfig=k.kubeconfig_for(user),
                  input='{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded"}}')
    st, body = (403, {"message": r.stderr}) if "Forbidden" in r.stderr else (r.returncode, {"message": r.stderr})
    t.eq(st, 403, "eviction needs create on pods/eviction")
    t.ok('"pods/eviction"' in body.get("message", "") or "pods/eviction" in body.get("message", ""),
         "the 403 names the subresource", body.get("message"))
    k.api("DELETE", PODS + "/guarded")


def test_kubectl_drain(t, k):
    k.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}})
    for i in range(2):
        pod(k, "db-%d" % i, node="n3", app="db")
    pod(k, "db-x", node="n4", app="db")
    k.api("POST", PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
                         "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}})
    r = k.kubectl("drain", "n3", "--force", "--timeout=3s")
    t.ok(r.returncode != 0 and "disruption budget" in (r.stdout + r.stderr),
         "kubectl drain is held back by the budget and says why", r.stdout + r.stderr)
    t.eq(sorted(k.api("GET", PODS)[1].get("items", []) and
                [p["metadata"]["name"] for p in k.api("GET", PODS)[1]["items"] if p["metadata"]["name"].startswith("db")]),
         ["db-0", "db-1", "db-x"], "no Pod was evicted")
    t.eq(k.api("GET", "/api/v1/nodes/n3")[1].get("spec", {}).get("unschedulable"), True, "the Node is cordoned")
    k.api("PATCH", PDBS + "/db", {"spec": {"minAvailable": 1}}, MERGE)
    pod(k, "db-y", node="n4", app="db")
    r = k.kubectl("drain", "n3", "--force", "--grace-period=0", "--timeout=20s")
    t.ok(r.returncode == 0, "kubectl drain completes once the budget allows", r.stdout + r.stderr)
    names = [p["metadata"]["name"] for p in k.api("GET", PODS)[1]["items"] if p["spec"].get("nodeName") == "n3"]
    t.eq(names, [], "no Pod is left on the drained Node")


def main():
    t = Tap()
    run_with_server(t, (test_budget, test_rbac, test_kubectl_drain))
    sys.exit(t.done())


main()
