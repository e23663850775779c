#!/usr/bin/env python3
"""cloudnode-controller run against tests/fake-kube-apiserver, under its own ServiceAccount with
the RBAC of manifests/controller: first install, zero writes on an idempotent pass (counted in the
audit log), drift reverted, images and cloud config changes rolled out, API faults survived,
creates and a PATCH stored with their answers lost, status conditions, leader election and the health endpoints."""
import hashlib
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, metric_value, src, wait_for  # noqa: E402
from cnproc import Controller  # noqa: E402

import yaml  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

NS = "cloudnode"
USER = "system:serviceaccount:%s:cloudnode-controller" % NS
DEPLOY = "/apis/apps/v1/namespaces/%s/deployments/cloudnode-cloud-controller-manager" % NS
CLOUD_CONF = "/api/v1/namespaces/%s/configmaps/cloud-conf" % NS
SOURCE = "/api/v1/namespaces/%s/configmaps/cloud-provider-config" % NS
IMAGES = "/api/v1/namespaces/%s/configmaps/cloud-controller-manager-images" % NS
CROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/cloudnode:node-initializer"
STATUS = "/apis/operator.cloudnode.io/v1alpha1/cloudnodeoperators/cloudnode"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
CONFIG_HASH = "cloudnode.io/cloud-config-hash"


def load_yaml(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def get(k, path):
    code, obj = k.api("GET", path)
    return obj if code == 200 else None


def container(dep):
    return dep["spec"]["template"]["spec"]["containers"][0]


def condition(k, typ):
    st = get(k, STATUS)
    for c in ((st or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == typ:
            return c
    return None


def roll_out(k, path=DEPLOY):
    """What the deployment controller and the kubelets would write once the operand's pods run:
    every replica of the current spec updated and available."""
    dep = get(k, path)
    if not dep:
        return
    want = dep["spec"].get("replicas", 1)
    status = {"observedGeneration": dep["metadata"].get("generation", 1), "replicas": want,
              "updatedReplicas": want, "readyReplicas": want, "availableReplicas": want}
    if all((dep.get("status") or {}).get(f) == v for f, v in status.items()):
        return
    k.api("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")


def converged(k, path=DEPLOY):
    """Available, not Progressing, not Degraded, once the operand Deployment has rolled out."""
    roll_out(k, path)
    a, p, d = condition(k, "Available"), condition(k, "Progressing"), condition(k, "Degraded")
    return bool(a and p and d and a["status"] == "True" and p["status"] == "False" and d["status"] == "False")


def writes_by_controller(k, since=0):
    return [a for a in k.audit()[since:] if a.get("user") == USER and a.get("verb") in WRITE_VERBS]


def passes_done(c):
    """How many reconcile passes the controller has finished, whatever their result."""
    text = c.get("/metrics")[1]
    return sum(float(line.split()[1]) for line in text.splitlines()
               if line.startswith("cloudnode_controller_reconciles_total{"))


def serve_admission_policies(k):
    """The fake API server has no built-in ValidatingAdmissionPolicy; when it lacks them, register
    the two kinds as CRDs so that the controller's apply of the policy is exercised too."""
    code, body = k.api("GET", "/apis/admissionregistration.k8s.io/v1")
    have = {r["name"] for r in (body or {}).get("resources", [])} if code == 200 else set()
    for kind, plural in (("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
                         ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings")):
        if plural in have:
            continue
        k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": plural + ".admissionregistration.k8s.io"},
            "spec": {"group": "admissionregistration.k8s.io", "scope": "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    return wait_for(lambda: k.api("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")[0] == 200)


def setup_cluster(k):
    serve_admission_policies(k)
    for doc in load_yaml(src("manifests", "crds", "operator", "operator.cloudnode.io_cloudnodeoperators.yaml")):
        k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for doc in load_yaml(src("manifests", "controller", "images-configmap.yaml")):
        k.api("POST", "/api/v1/namespaces/%s/configmaps" % NS, doc)
    k.api("POST", "/api/v1/namespaces/%s/configmaps" % NS,
          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cloud-provider-config"},
           "data": {"config": "[Global]\nregion = fsn1\n"}})
    for i in range(3):
        k.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "cp-%d" % i, "labels": {"node-role.kubernetes.io/control-plane": ""}}})
    wait_for(lambda: k.api("GET", "/apis/operator.cloudnode.io/v1alpha1/cloudnodeoperators")[0] == 200)


def test_first_install(t, k, tmp):
    c = Controller(k, tmp)
    try:
        # Applied, but no replica of the Deployment available yet: not Available, Progressing.
        before = wait_for(lambda: (lambda a, p: a and p and a["status"] == "False" and
                                   a["reason"] == "DeploymentUnavailable" and p["status"] == "True" and a)(
            condition(k, "Available"), condition(k, "Progressing")), 30)
        t.ok(before and "0 available" in before["message"],
             "while the Deployment has no available replica: Available=False (DeploymentUnavailable), Progressing",
             condition(k, "Available"))
        ok = wait_for(lambda: converged(k), 30)
        t.ok(ok, "first install converges (Available, not Progressing, not Degraded)", c.output()[-3000:])
        dep = get(k, DEPLOY)
        t.ok(dep is not None, "initializer Deployment created")
        if not dep:
            return
        images = json.loads(load_yaml(src("manifests", "controller", "images-configmap.yaml"))[0]["data"]["images.json"])
        t.eq(container(dep)["image"], images["cloudControllerManager"], "image from images.json")
        t.eq(dep["spec"]["replicas"], 2, "two replicas with three control-plane nodes")
        conf = get(k, CLOUD_CONF)
        t.eq((conf or {}).get("data"), {"cloud.conf": "[Global]\nregion = fsn1\n"},
             "cloud-conf synced under the key cloud.conf")
        t.eq(dep["spec"]["template"]["metadata"]["annotations"].get(CONFIG_HASH),
             hashlib.sha256(b"[Global]\nregion = fsn1\n").hexdigest(), "config hash on the pod template")
        for path in ["/api/v1/namespaces/%s/serviceaccounts/cloudnode-node-initializer" % NS,
                     "/api/v1/namespaces/%s/serviceaccounts/cloudnode-cloud-controller-manager" % NS,
                     CROLE, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cloudnode:node-initializer",
                     "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles/cloudnode:cloud-controller-manager" % NS,
                     "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/cloudnode-cloud-controller-manager" % NS,
                     "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/cloudnode-node-initializer",
                     "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"
                     "cloudnode-node-initializer"]:
            t.ok(get(k, path) is not None, "created " + path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
        t.ok(not [a for a in k.audit() if a.get("user") == USER and a.get("code") == 403],
             "no request of the controller was forbidden by its RBAC")
        code, body = c.get("/healthz")
        t.eq(code, 200, "/healthz")
        t.eq(c.get("/readyz")[0], 200, "/readyz once synced")
        code, body = c.get("/metrics")
        t.ok(code == 200 and "cloudnode_controller_reconciles_total" in body, "/metrics", body[:500])
        # Events of the cluster-scoped status object live in "default", as client-go puts them.
        events = [e for e in (get(k, "/api/v1/namespaces/default/events") or {}).get("items", [])
                  if e.get("reason") == "Created" and e["involvedObject"].get("name") == "cloudnode"]
        t.ok(any("Deployment cloudnode-cloud-controller-manager" in e.get("message", "") for e in events),
             "Events recorded for creates", [e.get("message") for e in events])
    finally:
        t.eq(c.stop(), 0, "SIGTERM exits 0")


def test_idempotent(t, k, tmp):
    before = len(k.audit())
    c = Controller(k, tmp)
    try:
        # Ready means the caches are synced and the first pass has run (it runs on sync).
        t.ok(wait_for(lambda: c.get("/readyz")[0] == 200, 20), "second instance ready")
        m = wait_for(lambda: "cloudnode_controller_reconciles_total{result=\"unchanged\"}" in c.get("/metrics")[1], 20)
        t.ok(m, "second instance completed a pass that changed nothing")
        time.sleep(1.0)
        w = writes_by_controller(k, before)
        t.eq([(a.get("verb"), a.get("path")) for a in w], [], "zero writes on an idempotent pass")
    finally:
        c.stop()


def test_sighup(t, k, tmp):
    c = Controller(k, tmp)
    try:
        t.ok(wait_for(lambda: c.get("/readyz")[0] == 200, 20), "ready")
        c.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        t.ok(c.p.poll() is None and c.get("/healthz") == (200, "ok\n"), "SIGHUP neither kills nor disturbs it",
             c.output()[-1500:])
    finally:
        t.eq(c.stop(), 0, "SIGTERM exits 0")


def test_drift(t, k, tmp):
    c = Controller(k, tmp)
    try:
        t.ok(wait_for(lambda: converged(k), 20), "converged before the drift", c.output()[-2000:])
        want = get(k, DEPLOY)
        want_image = container(want)["image"]
        want_args = container(want)["args"]

        k.api("PATCH", DEPLOY, {"spec": {"template": {"spec": {"containers": [
            dict(container(want), image="evil.example/ccm:1")]}}}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: container(get(k, DEPLOY))["image"] == want_image), "image drift reverted")

        k.api("PATCH", DEPLOY, {"spec": {"template": {"spec": {"containers": [
            dict(container(want), args=want_args[:-1])]}}}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: container(get(k, DEPLOY))["args"] == want_args), "args drift reverted")

        k.api("PATCH", DEPLOY, {"spec": {"replicas": 7}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: get(k, DEPLOY)["spec"]["replicas"] == 2), "replicas drift reverted")

        passes = passes_done(c)
        k.api("PATCH", DEPLOY, {"metadata": {"labels": {"team": "other"}}}, "application/merge-patch+json")
        # Left alone only means something once a pass has looked at the changed object.
        t.ok(wait_for(lambda: passes_done(c) > passes, 20), "a pass ran after the label was added")
        t.eq(get(k, DEPLOY)["metadata"]["labels"].get("team"), "other", "fields we do not own are left alone")

        role = get(k, CROLE)
        rules = role["rules"]
        bad = [dict(rules[0], verbs=rules[0]["verbs"] + ["delete"])] + rules[1:]
        k.api("PATCH", CROLE, {"rules": bad}, "application/merge-patch+json")
        t.ok(wait_for(lambda: get(k, CROLE)["rules"] == rules), "RBAC rule drift reverted")

        k.api("DELETE", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/cloudnode-cloud-controller-manager" % NS)
        t.ok(wait_for(lambda: get(k, "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/"
                                     "cloudnode-cloud-controller-manager" % NS)), "deleted object recreated")
    finally:
        c.stop()


def test_rollouts(t, k, tmp):
    c = Controller(k, tmp)
    try:
        t.ok(wait_for(lambda: converged(k), 20), "converged before the rollouts", c.output()[-2000:])
        k.api("PATCH", IMAGES, {"data": {"images.json": json.dumps(
            {"cloudControllerManager": "registry.example/ccm:2", "cloudNodeManager": "registry.example/cnm:2"})}},
            "application/merge-patch+json")
        t.ok(wait_for(lambda: container(get(k, DEPLOY))["image"] == "registry.example/ccm:2"),
             "images ConfigMap change rolls out the new image")

        old_hash = get(k, DEPLOY)["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
        k.api("PATCH", SOURCE, {"data": {"config": "[Global]\nregion = nbg1\n"}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: (get(k, CLOUD_CONF) or {}).get("data", {}).get("cloud.conf") == "[Global]\nregion = nbg1\n"),
             "cloud config change updates cloud-conf")
        t.ok(wait_for(lambda: get(k, DEPLOY)["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] ==
                      hashlib.sha256(b"[Global]\nregion = nbg1\n").hexdigest()),
             "and the pod template hash (old %s)" % old_hash[:12])

        k.api("PATCH", IMAGES, {"data": {"images.json": "{not json"}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: (condition(k, "Degraded") or {}).get("status") == "True"),
             "invalid images.json reports Degraded")
        t.eq(container(get(k, DEPLOY))["image"], "registry.example/ccm:2", "and changes nothing")
        k.api("PATCH", IMAGES, {"data": {"images.json": json.dumps(
            {"cloudControllerManager": "registry.example/ccm:3", "cloudNodeManager": "registry.example/cnm:3"})}},
            "application/merge-patch+json")
        t.ok(wait_for(lambda: converged(k) and container(get(k, DEPLOY))["image"] == "registry.example/ccm:3"),
             "recovers when images.json is fixed")
    finally:
        c.stop()


def test_selector_recreate(t, k, tmp):
    # A Deployment left by an older version with another selector: the selector is immutable, so
    # the controller must delete and create it rather than patch.
    k.api("DELETE", DEPLOY)
    t.ok(wait_for(lambda: get(k, DEPLOY) is None), "the Deployment is deleted first")
    old = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "cloudnode-cloud-controller-manager", "namespace": NS},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "old-ccm"}},
                    "template": {"metadata": {"labels": {"app": "old-ccm"}},
                                 "spec": {"containers": [{"name": "cloud-controller-manager", "image": "old:1"}]}}}}
    code, created = k.api("POST", "/apis/apps/v1/namespaces/%s/deployments" % NS, old)
    t.eq(code, 201, "old Deployment with another selector in place")
    c = Controller(k, tmp)
    try:
        ok = wait_for(lambda: (get(k, DEPLOY) or {}).get("spec", {}).get("selector", {}).get("matchLabels", {})
                      .get("app.kubernetes.io/component") == "cloud-controller-manager", 30)
        t.ok(ok, "selector change recreates the Deployment", c.output()[-2000:])
        t.ok(ok and get(k, DEPLOY)["metadata"]["uid"] != created["metadata"]["uid"], "it is a new object")
        verbs = [a["verb"] for a in writes_by_controller(k) if a.get("resource") == "deployments"]
        t.ok("delete" in verbs, "by delete and create, not by patch")
    finally:
        c.stop()


def test_faults(t, k, tmp):
    # Delete everything we applied, then make the API fail the first writes.
    for path in [DEPLOY, CROLE, CLOUD_CONF]:
        k.api("DELETE", path)
    t.ok(wait_for(lambda: get(k, DEPLOY) is None), "the Deployment is deleted first")
    k.inject({"verb": "create", "resource": "deployments", "code": 500, "count": 3})
    k.inject({"verb": "create", "resource": "clusterroles", "code": 503, "count": 2})
    k.inject({"verb": "create", "resource": "configmaps", "code": 429, "retryAfter": 1, "count": 1})
    # Watch faults: a 410 Gone (re-list) and a dropped connection end watches that are restarted.
    k.inject({"verb": "watch", "resource": "deployments", "action": "gone", "count": 1})
    k.inject({"verb": "watch", "resource": "clusterroles", "action": "abort-watch", "afterEvents": 0, "count": 1})
    c = Controller(k, tmp)
    try:
        t.ok(wait_for(lambda: get(k, DEPLOY) and get(k, CROLE) and get(k, CLOUD_CONF) and converged(k), 60),
             "API faults during apply end converged", c.output()[-3000:])
        failed = [a for a in k.audit() if a.get("user") == USER and a.get("code", 0) >= 500]
        t.ok(failed, "the faults were hit (%d failed requests)" % len(failed))
        for res in ("deployments", "clusterroles"):
            series = 'cloudnode_controller_watch_restarts_total{resource="%s"}' % res
            t.ok(wait_for(lambda: (metric_value(c.get("/metrics")[1], series) or 0) >= 1, 20),
                 "a restarted %s watch is counted" % res)
        t.promtool_check_metrics(c.get("/metrics")[1])
    finally:
        c.stop()


def test_lost_answers(t, k, tmp):
    """Creates and a drift-reverting PATCH that the API server stores while their answers are lost
    (connection reset after the commit): each object written once, converged, and no Warning Event
    for the AlreadyExists or Conflict that a blind second write would meet."""
    def warnings():
        return {(e["metadata"]["name"], e.get("count")): e.get("message", "") for e in
                (get(k, "/api/v1/namespaces/default/events") or {}).get("items", []) if e.get("type") == "Warning"}

    before = warnings()
    for path in [DEPLOY, CROLE]:
        k.api("DELETE", path)
    t.ok(wait_for(lambda: get(k, DEPLOY) is None and get(k, CROLE) is None, 20), "Deployment and ClusterRole deleted")
    mark = len(k.audit())
    k.inject([{"user": USER, "verb": "create", "resource": "deployments", "action": "reset-after-commit"},
              {"user": USER, "verb": "create", "resource": "clusterroles", "action": "reset-after-commit"}])
    c = Controller(k, tmp)
    try:
        t.ok(wait_for(lambda: get(k, DEPLOY) and get(k, CROLE) and converged(k), 60),
             "converged after two creates whose answers were lost", c.output()[-3000:])
        audit = k.audit()[mark:]
        t.eq(sorted((a["resource"], a["code"]) for a in audit if a.get("responseDropped")),
             [("clusterroles", 201), ("deployments", 201)], "both creates were stored and their answers dropped")
        creates = [(a["resource"], a["code"]) for a in audit if a.get("user") == USER and a.get("verb") == "create"
                   and a.get("resource") in ("deployments", "clusterroles")]
        t.eq(sorted(x for x in creates if x[1] == 201), [("clusterroles", 201), ("deployments", 201)],
             "each object created once (%r)" % creates)

        mark = len(k.audit())
        k.inject({"user": USER, "verb": "patch", "resource": "deployments", "action": "reset-after-commit"})
        k.api("PATCH", DEPLOY, {"spec": {"replicas": 7}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: get(k, DEPLOY)["spec"]["replicas"] == 2 and converged(k), 30),
             "replicas drift reverted by a PATCH whose answer was lost", c.output()[-3000:])
        audit = k.audit()[mark:]
        patches = [a["code"] for a in audit if a.get("user") == USER and a.get("resource") == "deployments"
                   and a.get("verb") in ("patch", "update")]
        t.eq([a.get("responseDropped") for a in audit if a.get("injected")], [True], "the PATCH was stored, its answer dropped")
        t.eq(patches.count(200), 1, "the drift is reverted by one stored write (%r)" % patches)
        new = [m for key, m in warnings().items() if key not in before]
        t.eq([m for m in new if "already exists" in m or "onflict" in m or "modified" in m], [],
             "no Warning Event for an AlreadyExists or a Conflict (%r)" % new)
    finally:
        k.clear_faults()
        c.stop()


def test_leader_election(t, k, tmp):
    c1 = Controller(k, tmp, ["--leader-elect=true", "--leader-elect-lease-duration=4s",
                             "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"])
    try:
        lease = wait_for(lambda: get(k, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/cloudnode-controller" % NS))
        t.ok(lease and lease["spec"].get("holderIdentity"), "the leader holds the Lease")
        t.ok(wait_for(lambda: "cloudnode_controller_leader 1" in c1.get("/metrics")[1]), "leader gauge is 1")
    finally:
        c1.stop()
    lease = get(k, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/cloudnode-controller" % NS)
    t.ok(lease and not lease["spec"].get("holderIdentity"), "the Lease is released on SIGTERM")


def provider_args(dep):
    return [a for a in (container(dep or {"spec": {"template": {"spec": {"containers": [{}]}}}}).get("args") or [])
            if a.startswith("--cloud-provider")]


def test_cloud_provider(t, k, tmp):
    """The initializer's --cloud-provider comes from the cluster (here the CloudnodeOperator spec)
    and is substituted like the images: an edit is put back, and with no provider anywhere nothing
    is applied and the status says what to set."""
    k.api("DELETE", DEPLOY)
    t.ok(wait_for(lambda: get(k, DEPLOY) is None), "the Deployment is deleted first")
    c = Controller(k, tmp, cloud_provider=None)
    try:
        deg = wait_for(lambda: (lambda d: d if d and d["status"] == "True" else None)(condition(k, "Degraded")), 20)
        t.ok(deg and "spec.cloudProvider" in deg.get("message", ""),
             "no provider anywhere: Degraded says to set spec.cloudProvider", deg)
        time.sleep(0.5)
        t.ok(get(k, DEPLOY) is None, "and the initializer Deployment is not applied without one")
        t.ok("no cloud provider" in c.output(), "the reason is logged", c.output()[-2000:])
        k.api("PATCH", STATUS, {"spec": {"cloudProvider": "openstack"}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: provider_args(get(k, DEPLOY)) == ["--cloud-provider=openstack"]),
             "spec.cloudProvider of the CloudnodeOperator becomes the initializer's --cloud-provider",
             provider_args(get(k, DEPLOY)))
        dep = get(k, DEPLOY)
        args = [a for a in container(dep)["args"] if not a.startswith("--cloud-provider")]
        k.api("PATCH", DEPLOY, {"spec": {"template": {"spec": {"containers": [
            dict(container(dep), args=args + ["--cloud-provider=aws"])]}}}}, "application/merge-patch+json")
        t.ok(wait_for(lambda: provider_args(get(k, DEPLOY)) == ["--cloud-provider=openstack"]),
             "an edited --cloud-provider is put back")
        t.ok(wait_for(lambda: converged(k)), "and the status converges")
    finally:
        c.stop()
        k.api("PATCH", STATUS, {"spec": {"cloudProvider": None}}, "application/merge-patch+json")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with kube_server(os.path.join(tmp, "kube"), rbac=[src("manifests", "controller", "controller-rbac.yaml")],
                         load=[src("manifests", "controller", "controller-guard-policy.yaml")]) as k:
            setup_cluster(k)
            t.run(test_first_install, k, tmp)
            t.run(test_idempotent, k, tmp)
            t.run(test_sighup, k, tmp)
            t.run(test_drift, k, tmp)
            t.run(test_rollouts, k, tmp)
            t.run(test_selector_recreate, k, tmp)
            if k.FAULT_INJECTION:
                t.run(test_faults, k, tmp)
                t.run(test_lost_answers, k, tmp)
            else:
                t.skip("API faults during apply", "fault injection is the fake API server's")
                t.skip("answers lost after the commit", "fault injection is the fake API server's")
            t.run(test_leader_election, k, tmp)
            t.run(test_cloud_provider, k, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
