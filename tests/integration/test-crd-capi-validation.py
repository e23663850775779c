#!/usr/bin/env python3
"""The CEL rules (x-kubernetes-validations) of cloudnode's Cluster API CRDs, judged by the real
kube-apiserver (tests/realkube; tests/fake-kube-apiserver evaluates CEL only for
ValidatingAdmissionPolicies, not for CRD schemas, so this test always runs against the real one
and reports a skip where it cannot be built): a CloudnodeMachineTemplate's spec is immutable
(self == oldSelf) while its metadata is not, a machine spec names exactly one provider (of hetzner,
openstack and proxmoxve), the proxmoxve spec's fields are kept, and a CloudnodeMachine's
providerID cannot change once set; and the defaults and bounds of a CloudnodeCluster's
control-plane load balancer; and examples/proxmoxve-cluster.yaml, applied as it is."""
import os
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src, wait_for  # noqa: E402

# The fake does not evaluate these rules: only the real server can judge them.
os.environ["CN_KUBE_SERVER"] = "real"
from fakekubeclient import kube_server  # noqa: E402

GROUP = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/default/"
TEMPLATES = GROUP + "cloudnodemachinetemplates"
MACHINES = GROUP + "cloudnodemachines"
CLUSTERS = GROUP + "cloudnodeclusters"
MERGE = "application/merge-patch+json"
HETZNER = {"serverType": "cx22", "image": "ubuntu-24.04", "location": "fsn1"}
PROXMOX = {"sourceNode": "pve1", "templateID": 9000, "target": "pve2", "tags": ["k8s"]}


def install_crds(k):
    for kind in ("cloudnodemachines", "cloudnodemachinetemplates", "cloudnodeclusters"):
        with open(src("manifests", "crds", "capi", "infrastructure.cluster.x-k8s.io_%s.yaml" % kind)) as f:
            code, body = k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(f))
            assert code == 201, (code, body)
    for path in (TEMPLATES, MACHINES, CLUSTERS):
        wait_for(lambda: k.api("GET", path)[0] == 200, 30)


def template(name, spec):
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeMachineTemplate",
            "metadata": {"name": name}, "spec": {"template": {"spec": spec}}}


def test_template_immutable(t, k):
    code, body = k.api("POST", TEMPLATES, template("t1", {"hetzner": HETZNER}))
    t.eq(code, 201, "a CloudnodeMachineTemplate is created")
    code, body = k.api("PATCH", TEMPLATES + "/t1",
                       {"spec": {"template": {"spec": {"hetzner": {"serverType": "cx32"}}}}}, MERGE)
    t.eq(code, 422, "a change of its spec is refused")
    t.ok("spec is immutable" in (body or {}).get("message", ""), "saying why", (body or {}).get("message"))
    code, body = k.api("GET", TEMPLATES + "/t1")
    t.eq(body["spec"]["template"]["spec"]["hetzner"]["serverType"], "cx22", "and the spec is as it was")
    code, body = k.api("PATCH", TEMPLATES + "/t1", {"metadata": {"labels": {"team": "infra"}}}, MERGE)
    t.eq(code, 200, "its metadata may change (Cluster API sets owners and labels)")


def test_machine_rules(t, k):
    code, body = k.api("POST", TEMPLATES, template("t2", {"hetzner": HETZNER,
                                                          "openstack": {"flavor": "m1", "image": "i"}}))
    t.eq(code, 422, "a template naming two providers is refused")
    code, body = k.api("POST", TEMPLATES, template("t3", {"hetzner": HETZNER, "proxmoxve": PROXMOX}))
    t.eq(code, 422, "hetzner and proxmoxve together are refused")
    t.ok("exactly one of hetzner, openstack or proxmoxve" in (body or {}).get("message", ""), "saying why",
         (body or {}).get("message"))
    code, body = k.api("POST", TEMPLATES, template("t4", {}))
    t.eq(code, 422, "a template naming no provider is refused")
    code, body = k.api("POST", TEMPLATES, template("t5", {"proxmoxve": PROXMOX}))
    t.eq(code, 201, "a Proxmox VE template is created")
    t.eq(((body or {}).get("spec") or {}).get("template", {}).get("spec", {}).get("proxmoxve"), PROXMOX,
         "with its spec kept whole (no field pruned)")
    code, body = k.api("POST", MACHINES, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeMachine",
        "metadata": {"name": "m2"}, "spec": {"proxmoxve": dict(PROXMOX, templateID=99)}})
    t.eq(code, 422, "a templateID below 100 is refused by the schema")
    code, body = k.api("POST", MACHINES, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeMachine",
        "metadata": {"name": "m1"}, "spec": {"hetzner": HETZNER, "providerID": "hcloud://1"}})
    t.eq(code, 201, "a CloudnodeMachine with a providerID is created")
    code, body = k.api("PATCH", MACHINES + "/m1", {"spec": {"providerID": "hcloud://2"}}, MERGE)
    t.eq(code, 422, "its providerID cannot change")
    t.ok("providerID is immutable" in (body or {}).get("message", ""), "saying why", (body or {}).get("message"))


def test_load_balancer_defaults(t, k):
    code, body = k.api("POST", CLUSTERS, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeCluster",
        "metadata": {"name": "c1"}, "spec": {"provider": "hetzner", "controlPlaneLoadBalancer": {}}})
    t.eq(code, 201, "a CloudnodeCluster asking for a control-plane load balancer is created")
    t.eq((body or {}).get("spec", {}).get("controlPlaneLoadBalancer"),
         {"enabled": True, "algorithm": "round_robin", "port": 6443}, "with CAPH's defaults")
    code, body = k.api("POST", CLUSTERS, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeCluster",
        "metadata": {"name": "c2"}, "spec": {"provider": "hetzner",
                                             "controlPlaneLoadBalancer": {"algorithm": "fastest", "port": 0}}})
    t.eq(code, 422, "an unknown algorithm and a port out of range are refused")


def test_proxmox_example(t, k):
    """examples/proxmoxve-cluster.yaml, applied as it is: every object accepted, the credentials
    Secret labelled for clusterctl move, and the cluster and template naming it."""
    r = k.kubectl("apply", "-f", src("examples", "proxmoxve-cluster.yaml"))
    t.ok(r.returncode == 0, "kubectl apply -f examples/proxmoxve-cluster.yaml", r.stdout + r.stderr)
    code, secret = k.api("GET", "/api/v1/namespaces/default/secrets/pve-credentials")
    t.ok(code == 200 and "clusterctl.cluster.x-k8s.io/move" in secret["metadata"].get("labels", {}),
         "the example's credentials Secret is labelled for clusterctl move")
    code, cluster = k.api("GET", GROUP + "cloudnodeclusters/c1")
    code2, tmpl = k.api("GET", TEMPLATES + "/c1-md-0")
    t.eq((cluster.get("spec", {}).get("provider"), cluster.get("spec", {}).get("credentials"),
          tmpl.get("spec", {}).get("template", {}).get("spec", {}).get("credentials")),
         ("proxmoxve", {"secretRef": {"name": "pve-credentials"}}, {"secretRef": {"name": "pve-credentials"}}),
         "the example's CloudnodeCluster (proxmoxve) and machine template name that Secret")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        with kube_server(os.path.join(tmp, "kube")) as k:
            t = Tap()
            install_crds(k)
            t.run(test_template_immutable, k)
            t.run(test_machine_rules, k)
            t.run(test_load_balancer_defaults, k)
            t.run(test_proxmox_example, k)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
