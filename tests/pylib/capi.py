"""Cluster API's own Cluster and Machine types (v1beta2) as CustomResourceDefinitions, registered
the way clusterctl would install them, for the tests and the demo that drive cloudnode's
infrastructure provider through Cluster API objects."""


def core_crd(kind, plural):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": plural + ".cluster.x-k8s.io"},
            "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": "v1beta2", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def install_core_crds(kube):
    """POSTs the Cluster and Machine CRDs through a FakeKube (as admin)."""
    for kind, plural in (("Cluster", "clusters"), ("Machine", "machines")):
        kube.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", core_crd(kind, plural))
