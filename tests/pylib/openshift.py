"""OpenShift's config.openshift.io types (ClusterOperator, Infrastructure) as
CustomResourceDefinitions, for the tests that play an OpenShift cluster on the fake API server."""


def openshift_crd(kind, plural):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.config.openshift.io" % plural},
            "spec": {"group": "config.openshift.io", "scope": "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}
