#!/usr/bin/env python3
"""cloudnode-controller run says what it waits for, at the default verbosity, once per episode:
started against a fake API server with nothing installed it logs one line per missing API naming
what to apply, and nothing more however often it retries; installed, it goes on; a CRD taken away
and brought back is said again, once. The same for the missing images and cloud config
ConfigMaps it goes on without, and for the Cluster API CRDs of the machine controllers."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src, wait_for  # noqa: E402
from cnproc import NS, USER, Controller  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
OPERATOR_CRD = CRD + "/cloudnodeoperators.operator.cloudnode.io"
DEPLOY = "/apis/apps/v1/namespaces/%s/deployments/cloudnode-cloud-controller-manager" % NS
DEFAULT_VERBOSITY = ["--leader-elect=false", "-v", "0"]


def lines(c, needle):
    return [ln for ln in c.output().splitlines() if needle in ln]


def lists_of(k, resource):
    """How often the controller listed (or watched) a resource: its retries."""
    return len([a for a in k.audit() if a.get("user") == USER and a.get("resource") == resource
                and a.get("verb") in ("list", "watch")])


def test_operand_waits(t, k, tmp):
    c = Controller(k, tmp, DEFAULT_VERBOSITY)
    try:
        waiting = "Waiting for cloudnodeoperators.operator.cloudnode.io"
        t.ok(wait_for(lambda: lines(c, waiting), 15), "nothing installed: the controller says it waits for the "
             "CloudnodeOperator CRD", c.output()[-2000:])
        retried = wait_for(lambda: lists_of(k, "cloudnodeoperators") >= 4, 30)
        t.ok(retried, "it keeps retrying the list meanwhile", lists_of(k, "cloudnodeoperators"))
        got = lines(c, waiting)
        t.eq(len(got), 1, "the line is said once, not on every retry")
        t.ok(got and "kubectl apply -k manifests/crds/operator" in got[0], "the line says what to apply", got)
        t.ok(not lines(c, "Not applying") and not lines(c, "ConfigMap"),
             "nothing else is said while it waits for the CRD", c.output()[-2000:])

        r = k.kubectl("apply", "-k", src("manifests", "crds", "operator"))
        t.ok(r.returncode == 0, "the CloudnodeOperator CRD applied", r.stderr)
        t.ok(wait_for(lambda: k.api("GET", DEPLOY)[0] == 200, 30),
             "installed, it goes on: the operand Deployment is applied", c.output()[-2000:])
        t.eq(len(lines(c, "cloudnodeoperators.operator.cloudnode.io v1alpha1 is served now")), 1,
             "it says the CRD is served now")
        images = lines(c, "ConfigMap %s/cloud-controller-manager-images not found" % NS)
        source = lines(c, "ConfigMap %s/cloud-provider-config (key config) not found" % NS)
        t.ok(len(images) == 1 and "manifests/controller/images-configmap.yaml" in images[0],
             "the missing images ConfigMap is said once, with the manifest to apply", images)
        t.ok(len(source) == 1 and "empty cloud.conf" in source[0],
             "the missing cloud config source is said once, with what the operand gets meanwhile", source)

        # Found, then lost: a second episode is said again, once.
        for doc in ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cloud-provider-config"},
                     "data": {"config": "[Global]\nregion = fsn1\n"}},):
            k.api("POST", "/api/v1/namespaces/%s/configmaps" % NS, doc)
        t.ok(wait_for(lambda: (k.api("GET", "/api/v1/namespaces/%s/configmaps/cloud-conf" % NS)[1] or {})
                      .get("data", {}).get("cloud.conf") == "[Global]\nregion = fsn1\n", 30),
             "the cloud config source created: copied into cloud-conf")
        k.api("DELETE", "/api/v1/namespaces/%s/configmaps/cloud-provider-config" % NS)
        t.ok(wait_for(lambda: len(lines(c, "cloud-provider-config (key config) not found")) == 2, 30),
             "the source deleted again: said a second time", lines(c, "cloud-provider-config"))
        code, _ = k.api("DELETE", OPERATOR_CRD)
        t.ok(code in (200, 202), "the CloudnodeOperator CRD deleted")
        t.ok(wait_for(lambda: len(lines(c, waiting)) == 2, 30), "the CRD lost again: the waiting line once more",
             lines(c, waiting))
        base = lists_of(k, "cloudnodeoperators")
        wait_for(lambda: lists_of(k, "cloudnodeoperators") >= base + 3, 30)
        t.eq(len(lines(c, waiting)), 2, "and again only once while it stays missing")
        r = k.kubectl("apply", "-k", src("manifests", "crds", "operator"))
        t.ok(r.returncode == 0 and wait_for(lambda: len(lines(c, "v1alpha1 is served now")) == 2, 30),
             "re-applied: served again", c.output()[-1500:])
        t.eq(len(lines(c, "cloud-provider-config (key config) not found")), 2,
             "the missing source is not said again while nothing changed")
    finally:
        t.eq(c.stop(), 0, "the controller exits cleanly")


def test_provider_waits(t, k, tmp):
    """No cloud provider anywhere: it says so once, however many passes the cluster's changes
    cause, and goes on once the CloudnodeOperator names one."""
    k.api("DELETE", DEPLOY)
    c = Controller(k, tmp, DEFAULT_VERBOSITY, cloud_provider=None)
    try:
        t.ok(wait_for(lambda: lines(c, "Not applying: no cloud provider"), 15),
             "no cloud provider: the controller says what to set", c.output()[-1500:])
        for i in range(5):
            k.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": "cp-%d" % i, "labels": {"node-role.kubernetes.io/control-plane": ""}}})
        t.ok(wait_for(lambda: len([a for a in k.audit() if a.get("user") == USER and a.get("verb") == "watch"
                                   and a.get("resource") == "nodes"]) >= 1, 10), "the controller watches the Nodes")
        wait_for(lambda: False, 2)
        got = lines(c, "Not applying")
        t.ok(len(got) == 1 and "spec.cloudProvider" in got[0],
             "said once although five Node changes caused passes", got)
        code, _ = k.api("PATCH", "/apis/operator.cloudnode.io/v1alpha1/cloudnodeoperators/cloudnode",
                        {"spec": {"cloudProvider": "hetzner"}}, "application/merge-patch+json")
        if code == 404:
            code, _ = k.api("POST", "/apis/operator.cloudnode.io/v1alpha1/cloudnodeoperators", {
                "apiVersion": "operator.cloudnode.io/v1alpha1", "kind": "CloudnodeOperator",
                "metadata": {"name": "cloudnode"}, "spec": {"cloudProvider": "hetzner"}})
        t.ok(code in (200, 201), "spec.cloudProvider set", code)
        t.ok(wait_for(lambda: lines(c, "Applying the operand") and k.api("GET", DEPLOY)[0] == 200, 30),
             "then it says it goes on, and applies the operand", c.output()[-1500:])
    finally:
        t.eq(c.stop(), 0, "the controller exits cleanly")


def test_machines_wait(t, k, tmp):
    conf = os.path.join(tmp, "cloud.conf")
    with open(conf, "w") as f:
        f.write("[Global]\ntoken = %s\n" % ("x" * 64))
    c = Controller(k, tmp, DEFAULT_VERBOSITY + ["--operand=false", "--machine-provider=hetzner",
                                                "--machine-cloud-config", conf], cloud_provider=None)
    try:
        want = {"cloudnodemachines.infrastructure.cluster.x-k8s.io": "clusterctl init --infrastructure cloudnode",
                "cloudnodeclusters.infrastructure.cluster.x-k8s.io": "kubectl apply -k manifests/crds/capi",
                "machines.cluster.x-k8s.io": "clusterctl init",
                "clusters.cluster.x-k8s.io": "clusterctl init"}
        t.ok(wait_for(lambda: all(lines(c, "Waiting for %s " % r) for r in want), 15),
             "no Cluster API: a line for each CRD the machine controllers wait for", c.output()[-2000:])
        wait_for(lambda: lists_of(k, "cloudnodemachines") >= 4, 30)
        for r, hint in want.items():
            got = lines(c, "Waiting for %s " % r)
            t.ok(len(got) == 1 and hint in got[0], "%s: said once, with what installs it" % r, got)
        t.ok(not lines(c, "cloudnodeoperators"), "--operand=false: the operand's CRD is not waited for",
             c.output()[-1500:])
    finally:
        t.eq(c.stop(), 0, "the machine-only controller exits cleanly")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        rbac = [src("manifests", "controller", "controller-rbac.yaml"),
                src("manifests", "overlays", "capi", "controller-capi-rbac.yaml")]
        with FakeKube(os.path.join(tmp, "kube"), rbac=rbac) as k:
            k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            t.run(test_operand_waits, k, tmp)
            t.run(test_provider_waits, k, tmp)
            t.run(test_machines_wait, k, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
