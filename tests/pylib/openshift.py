"""An OpenShift cluster played on the fake API server: the real CustomResourceDefinitions of
config.openshift.io (ClusterOperator, Infrastructure, Proxy) and cloudcredential.openshift.io
(CredentialsRequest), copied unchanged into tests/data/openshift, and the cluster-scoped objects
an installed cluster has."""
import contextlib
import os

from cntap import src, wait_for

import yaml

CO = "/apis/config.openshift.io/v1/clusteroperators"
INFRA = "/apis/config.openshift.io/v1/infrastructures"
PROXY = "/apis/config.openshift.io/v1/proxies"
CREDREQ = "/apis/cloudcredential.openshift.io/v1/credentialsrequests"
CRDS = ("clusteroperators", "infrastructures", "proxies", "credentialsrequests")


def install_crds(k):
    """Creates the real CRDs and waits until their resources are served."""
    for name in CRDS:
        with open(src("tests", "data", "openshift", name + ".crd.yaml")) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    code, body = k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                    assert code == 201, (name, code, body)
    return wait_for(lambda: all(k.api("GET", p)[0] == 200 for p in (CO, INFRA, PROXY, CREDREQ)))


def create_infrastructure(k, platform, topology="HighlyAvailable", cloud_config=None, name="cloudnode-x7k2p",
                          external_name=None):
    """The Infrastructure "cluster" as the installer writes it: spec.cloudConfig names the
    openshift-config ConfigMap (cloud_config: {"name": ..., "key": ...} or None), the status the
    platform (for External, external_name is its platformName), the infrastructure name and the
    topologies. Status goes through its subresource."""
    spec = {"platformSpec": {"type": platform}}
    platform_status = {"type": platform}
    if external_name:
        spec["platformSpec"]["external"] = {"platformName": external_name}
        platform_status["external"] = {"platformName": external_name}
    if cloud_config:
        spec["cloudConfig"] = cloud_config
    code, body = k.api("POST", INFRA, {"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
                                        "metadata": {"name": "cluster"}, "spec": spec})
    assert code == 201, (code, body)
    status = {"platform": platform, "platformStatus": platform_status, "infrastructureName": name,
              "controlPlaneTopology": topology, "infrastructureTopology": topology,
              "apiServerURL": "https://api.example.test:6443",
              "apiServerInternalURI": "https://api-int.example.test:6443",
              "etcdDiscoveryDomain": ""}
    code, body = k.api("PATCH", INFRA + "/cluster/status", {"status": status}, "application/merge-patch+json")
    assert code == 200, (code, body)
    return body


def set_proxy(k, http=None, https=None, no_proxy=None):
    """The Proxy "cluster": status is what the network operator computed from the spec (noProxy
    with the cluster's own networks added), and what operators read."""
    code, _ = k.api("GET", PROXY + "/cluster")
    if code == 404:
        code, body = k.api("POST", PROXY, {"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
                                           "metadata": {"name": "cluster"}, "spec": {}})
        assert code == 201, (code, body)
    status = {"httpProxy": http, "httpsProxy": https, "noProxy": no_proxy}
    code, body = k.api("PATCH", PROXY + "/cluster/status", {"status": status}, "application/merge-patch+json")
    assert code == 200, (code, body)
    return body


def overlay_rbac(tmp, namespace="cloudnode"):
    """The RBAC of manifests/overlays/openshift for a controller running in namespace (the tests
    run it in the base's): the overlay's files with their ServiceAccount subjects moved there.
    Returns the file names to give FakeKube(rbac=...) after manifests/controller's."""
    out = []
    for rel in (("namespaced", "clusteroperator-rbac.yaml"), ("namespaced", "credentials-rbac.yaml"),
                ("openshift-config", "cloud-config-reader-rbac.yaml")):
        with open(src("manifests", "overlays", "openshift", *rel)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for d in docs:
            if rel[0] == "namespaced" and d["kind"] in ("Role", "RoleBinding"):
                d["metadata"]["namespace"] = namespace
            for s in d.get("subjects") or []:
                if s.get("kind") == "ServiceAccount":
                    s["namespace"] = namespace
        path = os.path.join(tmp, "openshift-" + rel[-1])
        with open(path, "w") as f:
            yaml.safe_dump_all(docs, f)
        out.append(path)
    return out


def create_namespaces(k, *names):
    for n in names:
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})


def denied(k, user):
    """(verb, path) of every request of user the API server refused with 403."""
    return [(a.get("verb"), a.get("path")) for a in k.audit() if a.get("user") == user and a.get("code") == 403]


class Cluster:
    """A fake API server with the base controller's RBAC and the openshift overlay's, the real
    OpenShift CRDs, the openshift-config namespaces, the Infrastructure "cluster"
    (create_infrastructure's arguments) and, unless credentials=False, the Secret
    cloud-credentials of the operand namespace "cloudnode" as the Cloud Credential Operator
    would have written it."""

    def __init__(self, tmp, platform, credentials=True, **infrastructure):
        from fakekubeclient import FakeKube
        rbac = [src("manifests", "controller", "controller-rbac.yaml")] + overlay_rbac(tmp)
        self.k = FakeKube(os.path.join(tmp, "kube"), rbac=rbac)
        self.platform, self.credentials, self.infrastructure = platform, credentials, infrastructure

    def __enter__(self):
        k = self.k.__enter__()
        install_crds(k)
        create_namespaces(k, "openshift-config", "openshift-config-managed", "cloudnode")
        create_infrastructure(k, self.platform, **self.infrastructure)
        if self.credentials:
            code, body = k.api("POST", "/api/v1/namespaces/cloudnode/secrets", {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cloud-credentials"},
                "stringData": {"token": "test-token"}})
            assert code == 201, (code, body)
        return k

    def __exit__(self, *exc):
        return self.k.__exit__(*exc)


@contextlib.contextmanager
def controller(t, k, tmp, allowed_denials=(), **kwargs):
    """cnproc.Controller (kwargs are its), stopped at the end; the test's last check is that the
    openshift overlay's RBAC let it do everything it asked (no 403), but for paths in
    allowed_denials that the test made it ask for on purpose."""
    from cnproc import USER, Controller
    c = Controller(k, tmp, **kwargs)
    try:
        yield c
        t.eq([d for d in denied(k, USER) if d[1] not in allowed_denials], [],
             "the openshift overlay's RBAC is enough (no 403)")
    finally:
        c.stop()
