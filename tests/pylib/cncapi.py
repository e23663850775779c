"""Helpers of the Cluster API provider tests: cloudnode-controller run against the fake API server
(with Cluster API's Cluster and Machine CRDs and cloudnode's infrastructure CRDs) and the fake
cloud, as the service account of manifests/controller and the capi overlay.

    env = CapiEnv(k, c, tmp); env.setup()
    ctl = Controller(k, tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", env.conf])
    ctl.metrics() -> the /metrics text"""
import base64
import os
import urllib.request

import yaml
import cnproc
from capi import core_crd
from cntap import build, src, wait_for  # noqa: F401 (re-exported for the tests)
from fakecloud import HETZNER_TOKEN

NS = "default"
USER = cnproc.USER
GROUP = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/%s/" % NS
CNM = GROUP + "cloudnodemachines"
CNC = GROUP + "cloudnodeclusters"
MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/machines" % NS
CLUSTERS = "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/clusters" % NS
SECRETS = "/api/v1/namespaces/%s/secrets" % NS
UID_LABEL = "cloudnode.io/machine-uid"
MERGE = "application/merge-patch+json"
RBAC = [src("manifests", "controller", "controller-rbac.yaml"),
        src("manifests", "overlays", "capi", "controller-capi-rbac.yaml")]


def condition(obj, ctype, key="reason"):
    for c in ((obj or {}).get("status") or {}).get("conditions", []):
        if c.get("type") == ctype:
            return c.get(key)
    return None


def make_cnc(env, name, owner=None, spec=None, annotations=None):
    """A CloudnodeCluster (owned by the Cluster owner, if given)."""
    meta = {"name": name}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    if annotations:
        meta["annotations"] = annotations
    code, o = env.k.api("POST", CNC, {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                      "kind": "CloudnodeCluster", "metadata": meta,
                                      "spec": spec or {"provider": "hetzner"}})
    assert code == 201, o
    return o


def provisioned(env, name):
    """The CloudnodeCluster once its status says provisioned, else None."""
    o = env.obj(CNC, name)
    st = (o or {}).get("status") or {}
    return o if st.get("initialization", {}).get("provisioned") is True else None


class Controller(cnproc.Controller):
    def __init__(self, k, tmp, args, leader_args=("--leader-elect=false",)):
        super().__init__(k, tmp, list(args) + list(leader_args))

    def metrics(self):
        wait_for(lambda: "/metrics on" in self.output(), 20)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=10) as r:
            return r.read().decode()


def grant_secrets(k, namespace):
    """What a namespace's owner does for the controller to read the Secrets of its Cluster API
    objects there (manifests/README.md)."""
    code, body = k.api("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings" % namespace, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "cloudnode-controller-secrets", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cloudnode:controller:capi-secrets"},
        "subjects": [{"kind": "ServiceAccount", "name": "cloudnode-controller", "namespace": "cloudnode"}]})
    assert code in (201, 409), (code, body)


class CapiEnv:
    # The provider spec machine() writes unless given one (subclasses set other providers').
    provider = "hetzner"
    default_spec = {"serverType": "cx22", "image": "ubuntu-24.04", "location": "fsn1"}

    def __init__(self, k, c, tmp):
        self.k, self.c, self.tmp = k, c, tmp
        self.conf = self.hetzner_conf("hetzner.conf", HETZNER_TOKEN)

    def hetzner_conf(self, name, token):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("[Global]\ntoken = %s\nendpoint = %s/v1\n" % (token, self.c.url))
        os.chmod(path, 0o600)
        return path

    def setup(self):
        k = self.k
        for f in ("infrastructure.cluster.x-k8s.io_cloudnodemachines.yaml",
                  "infrastructure.cluster.x-k8s.io_cloudnodeclusters.yaml"):
            with open(src("manifests", "crds", "capi", f)) as fh:
                k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))
        k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", core_crd("Cluster", "clusters"))
        k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", core_crd("Machine", "machines"))
        for path in (CNM, CNC, MACHINES, CLUSTERS):
            wait_for(lambda: k.api("GET", path)[0] == 200)
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cloudnode"}})
        grant_secrets(k, NS)

    def cluster(self, name, provisioned=True, paused=False, failure_domains=None):
        """A Cluster; provisioned, its status says so as Cluster API writes it, with the failure
        domains it copies from the InfraCluster (names)."""
        k = self.k
        code, c = k.api("POST", CLUSTERS, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                           "metadata": {"name": name}, "spec": {"paused": paused}})
        if provisioned:
            status = {"initialization": {"infrastructureProvisioned": True}}
            if failure_domains:
                status["failureDomains"] = [{"name": n, "controlPlane": True} for n in failure_domains]
            k.api("PATCH", CLUSTERS + "/" + name + "/status", {"status": status}, MERGE)
        return c

    def obj(self, path, name):
        code, o = self.k.api("GET", path + "/" + name)
        return o if code == 200 else None

    def servers(self, uid):
        return [i for i in self.c.instances() if (i.get("labels") or {}).get(UID_LABEL) == uid]

    def machine(self, name, spec=None, bootstrap=True, cluster="c1", extra_spec=None, failure_domain=None,
                labels=None):
        """A Machine of cluster (in failure_domain, if given; with labels, say Cluster API's
        control-plane label) with its CloudnodeMachine (self.provider's spec) and bootstrap data."""
        k = self.k
        if bootstrap:
            k.api("POST", SECRETS, {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name + "-bootstrap"},
                "data": {"value": base64.b64encode(b"#cloud-config\nhostname: " + name.encode()).decode()}})
        code, m = k.api("POST", MACHINES, {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": dict({"name": name}, **({"labels": labels} if labels else {})),
            "spec": dict({"clusterName": cluster,
                          "bootstrap": {"dataSecretName": name + "-bootstrap"} if bootstrap else {}},
                         **({"failureDomain": failure_domain} if failure_domain else {}))})
        code, cnm = k.api("POST", CNM, {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeMachine",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                              "name": name, "uid": m["metadata"]["uid"]}]},
            "spec": dict({self.provider: spec or self.default_spec}, **(extra_spec or {}))})
        return cnm

    def get(self, name):
        code, o = self.k.api("GET", CNM + "/" + name)
        return o if code == 200 else None

    def ready(self, name):
        o = self.get(name)
        return o and (o.get("status") or {}).get("ready") is True and o["spec"].get("providerID")

    def delete(self, name):
        self.k.api("DELETE", CNM + "/" + name)

    def gone(self, name):
        return self.get(name) is None
