#!/usr/bin/env python3
"""Whole-cluster installs, as a user does them, from the images `make images` built and the
manifests of the tree: the manifests applied, a bootstrap and a control-plane machine booted with
their Ignition configs, the bootstrap static pods initializing the first Nodes, the controller
(its own Deployment) installing the operand, the in-cluster initializer Deployment taking over,
the agents handing off (static pods removed), workers booted and initialized. Each install fails
on any container restart, any unavailable Deployment, any static pod left behind and any Node
left tainted.

Installs: the base manifests (provider from the CloudnodeOperator), the openshift overlay (provider
from the Infrastructure object) and a Cluster API management cluster (the base manifests, then
infrastructure-components.yaml as `clusterctl init` substitutes and applies it, its controller
provisioning a CloudnodeCluster). CN_E2E_INSTALLS narrows the list."""
import base64
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import cnpodman  # noqa: E402
from cncluster import Cluster  # noqa: E402
import clusterctl  # noqa: E402
import yaml  # noqa: E402
from capi import install_core_crds  # noqa: E402
from cntap import Tap, build, src  # noqa: E402
import openshift  # noqa: E402
from fakecloud import HETZNER_TOKEN  # noqa: E402

CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CAPI_NS = "cloudnode-system"
CLOUD_CONF_VAR = "CLOUDNODE_B64ENCODED_CLOUD_CONF"
SETTLE = 180


def apply(t, c, *args):
    r = c.apply(*args)
    t.ok(r.returncode == 0, "kubectl apply %s" % " ".join(args), r.stderr[-1500:])


def install_base(t, c):
    for ok, what in c.install_base():
        t.ok(ok, what)


def install_openshift(t, c):
    # What an OpenShift cluster already has: the config.openshift.io types, the Infrastructure
    # object, and the cloud config in openshift-config.
    openshift.install_crds(c.kube)
    openshift.create_namespaces(c.kube, "openshift-cloud-credential-operator", "openshift-config-managed")
    openshift.create_infrastructure(c.kube, "External", external_name="hetzner",
                                    cloud_config={"name": "cloud-provider-config", "key": "config"})
    c.kube.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": "openshift-config"}})
    code, _ = c.kube.api("POST", "/api/v1/namespaces/openshift-config/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cloud-provider-config"},
        "data": {"config": c.cloud_conf()}})
    t.ok(code == 201, "openshift-config/cloud-provider-config present")
    apply(t, c, "-k", src("manifests", "overlays", "openshift"))
    # The Cloud Credential Operator's part, in its manual mode for Hetzner: the Secret the
    # CredentialsRequest cloudnode-hetzner names.
    code, _ = c.kube.api("POST", "/api/v1/namespaces/openshift-cloudnode/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cloud-credentials"},
        "stringData": {"token": HETZNER_TOKEN}})
    t.ok(code == 201, "openshift-cloudnode/cloud-credentials present")


def install_capi(t, c):
    """A Cluster API management cluster: its own cloud integration from the base manifests (as any
    cluster on this cloud), then `clusterctl init --infrastructure cloudnode` step by step: Cluster
    API's own CRDs (the core provider), then the provider's infrastructure-components.yaml with
    clusterctl's variable substitution (refused while a required variable is unset) and its labels,
    applied."""
    install_base(t, c)
    install_core_crds(c.kube)
    path = build("manifests", "infrastructure-components.yaml")
    try:
        clusterctl.components(path, {})
        t.ok(False, "clusterctl init refuses the components without %s" % CLOUD_CONF_VAR)
    except clusterctl.MissingVariables as e:
        t.eq(e.names, [CLOUD_CONF_VAR], "clusterctl init refuses the components without %s" % CLOUD_CONF_VAR)
    env = {CLOUD_CONF_VAR: base64.b64encode(c.cloud_conf().encode()).decode()}
    rendered = os.path.join(c.dir, "infrastructure-components.yaml")
    with open(rendered, "w") as f:
        yaml.safe_dump_all(clusterctl.components(path, env), f)
    apply(t, c, "--validate=false", "-f", rendered)


def capi_provider_works(t, c):
    """The provider's own controller (cloudnode-system) is available and provisions a
    CloudnodeCluster of a Cluster from the cloud's locations."""
    ns = "/apis/apps/v1/namespaces/%s/deployments/cloudnode-controller" % CAPI_NS
    t.ok(c.wait(lambda: (c.kube.api("GET", ns)[1] or {}).get("status", {}).get("availableReplicas") == 1, 60),
         "capi: the provider's controller in %s is available" % CAPI_NS, c.kube.api("GET", ns)[1])
    code, cluster = c.kube.api("POST", "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "w1"}, "spec": {}})
    cnc = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/default/cloudnodeclusters"
    code2, _ = c.kube.api("POST", cnc, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeCluster",
        "metadata": {"name": "w1", "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                                         "name": "w1", "uid": cluster["metadata"]["uid"]}]},
        "spec": {"provider": "hetzner"}})
    t.ok(code == 201 and code2 == 201, "capi: a Cluster and its CloudnodeCluster created")
    st = c.wait(lambda: (lambda s: s if (s.get("initialization") or {}).get("provisioned") and
                         s.get("failureDomains") else None)((c.kube.api("GET", cnc + "/w1")[1] or {}).get("status") or {}),
                60)
    t.ok(st, "capi: the provider provisioned the CloudnodeCluster with failure domains from the cloud",
         c.kube.api("GET", cnc + "/w1")[1])


def scenario(t, name, install, namespace, check=None):
    t.diag("install: %s" % name)
    tmp = tempfile.mkdtemp(prefix="cn-e2e-%s-" % name)
    try:
        with Cluster(tmp, namespace=namespace, runtime="podman") as c:
            install(t, c)
            c.boot("%s-bootstrap" % name, "bootstrap")
            c.boot("%s-master-1" % name, "control-plane")
            first = c.wait(lambda: not c.tainted(), 90)
            t.ok(first, "%s: the first Nodes are initialized" % name, c.tainted())
            operand = "%s/cloudnode-cloud-controller-manager" % namespace
            took_over = c.wait(lambda: not [u for u in c.unavailable() if u.startswith(operand)] and
                               any(d["metadata"]["name"] == "cloudnode-cloud-controller-manager"
                                   for d in c.deployments()), SETTLE)
            t.ok(took_over, "%s: the controller installed the initializer Deployment and it is available" % name,
                 c.unavailable())
            handed = c.wait(lambda: not c.static_pods(), 60)
            t.ok(handed, "%s: the agents handed off (bootstrap static pods removed)" % name, c.static_pods())
            agents = [(n.name, n.procs["agent"].poll(), "handed over" in open(n.logs["agent"]).read())
                      for n in c.nodes]
            t.ok(c.wait(lambda: all(n.procs["agent"].poll() == 0 for n in c.nodes), 10) and
                 all(a[2] for a in agents), "%s: each agent logged the hand-off and exited 0" % name, agents)
            c.boot("%s-worker-1" % name, "worker")
            c.boot("%s-worker-2" % name, "worker")
            c.wait(lambda: not c.tainted() and not c.unavailable(), 90)
            for what, got in (("container restarts", c.restarted()), ("unavailable Deployments", c.unavailable()),
                              ("static pods left", c.static_pods()), ("tainted Nodes", c.tainted())):
                t.ok(not got, "%s: no %s" % (name, what), json.dumps(got, indent=1))
            status = "/apis/config.openshift.io/v1/clusteroperators/cloudnode" if name == "openshift" else \
                "/apis/operator.cloudnode.io/v1alpha1/cloudnodeoperators/cloudnode"
            conds = c.wait(lambda: (lambda cs: cs if cs.get("Available") == "True" and cs.get("Progressing") == "False"
                                    and cs.get("Degraded") == "False" else None)(
                {x["type"]: x["status"] for x in ((c.kube.api("GET", status)[1] or {}).get("status") or {})
                 .get("conditions") or []}), 30)
            t.ok(conds, "%s: the operator status says Available, not Progressing, not Degraded" % name,
                 c.kube.api("GET", status)[1])
            if check:
                check(t, c)
                t.ok(not c.restarted(), "%s: still no container restarts" % name, c.restarted())
            if t.failed:
                t.diag(c.diagnostics())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    t = Tap()
    why = cnpodman.usable()
    if why:
        t.skip_all(why)
    if os.geteuid() != 0:
        t.skip_all("needs root (network namespaces)")
    refs = cnpodman.built_images()
    if not refs or not all(cnpodman.inspect(r) for r in refs):
        t.skip_all("the images are not built (make images)")
    only = os.environ.get("CN_E2E_INSTALLS", "base openshift capi").split()
    for name, install, ns, check in (("base", install_base, "cloudnode", None),
                                     ("openshift", install_openshift, "openshift-cloudnode", None),
                                     ("capi", install_capi, "cloudnode", capi_provider_works)):
        if name in only:
            scenario(t, name, install, ns, check)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
