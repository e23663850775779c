#!/usr/bin/env python3
"""tests/fake-kube-apiserver: CustomResourceDefinitions register resources at run time
(Cluster API core CRDs and the project's own), with status subresource, pruning, schema
validation, discovery, watch, and cleanup of custom resources when the CRD is deleted."""
import glob
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src  # noqa: E402
from fakekubeclient import run_with_server  # noqa: E402

MACHINES = "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def load_yaml_docs(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def machine(name, **spec):
    s = {"clusterName": "c1", "bootstrap": {"dataSecretName": "boot"},
         "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeMachine",
                               "name": name}}
    s.update(spec)
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "metadata": {"name": name}, "spec": s}


def test_register(t, k):
    st, r = k.api("GET", MACHINES)
    t.eq(st, 404, "no machines resource before the CRD")
    events = []
    ready = threading.Event()

    def established(e, o):
        return e == "MODIFIED" and any(c["type"] == "Established" and c["status"] == "True"
                                       for c in (o.get("status") or {}).get("conditions", []))

    def watch():
        # Until both CRDs are Established (or the server ends the watch): a short server timeout
        # would end it first on a loaded machine.
        for ev in k.watch(CRDS + "?watch=1&timeoutSeconds=30", timeout=40):
            events.append(ev)
            if ev[0] == "MODIFIED":
                ready.set()
            if sum(1 for e, o in events if established(e, o)) >= 2:
                return
    th = threading.Thread(target=watch)
    th.start()
    for doc in load_yaml_docs(src("tests", "data", "fakekube-capi-core-crds.yaml")):
        st, r = k.api("POST", CRDS, doc)
        t.eq(st, 201, "create CRD %s" % doc["metadata"]["name"])
    th.join(40)
    est = [o for e, o in events if established(e, o)]
    t.ok(len(est) >= 2, "CRDs become Established (seen as MODIFIED events)", [e for e, _ in events])
    st, crd = k.api("GET", CRDS + "/machines.cluster.x-k8s.io")
    t.ok("customresourcecleanup.apiextensions.k8s.io" in crd["metadata"].get("finalizers", []),
         "CRD carries the cleanup finalizer")
    t.eq(crd["status"]["acceptedNames"]["kind"], "Machine", "acceptedNames")
    st, r = k.api("GET", "/apis")
    t.ok("cluster.x-k8s.io" in [g["name"] for g in r["groups"]], "group in /apis")
    st, r = k.api("GET", "/apis/cluster.x-k8s.io/v1beta1")
    names = {x["name"]: x for x in r["resources"]}
    t.ok("machines" in names and "machines/status" in names and names["machines"]["namespaced"]
         and names["machines"]["shortNames"] == ["ma"], "resources in discovery", names.keys())


def test_custom_resources(t, k):
    m = machine("m1", unknownField="dropped")
    m["status"] = {"phase": "Running"}
    st, r = k.api("POST", MACHINES, m)
    t.eq(st, 201, "create Machine")
    t.ok("unknownField" not in r["spec"], "unknown fields pruned")
    t.eq((r.get("status"), r["metadata"]["generation"], r["kind"], r["apiVersion"]),
         (None, 1, "Machine", "cluster.x-k8s.io/v1beta1"), "status dropped on create, generation 1")
    st, r = k.api("POST", MACHINES, {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
                                     "metadata": {"name": "m2"}, "spec": {"clusterName": 5}})
    t.eq(st, 422, "schema violation: 422")
    causes = {c["field"]: c for c in r["details"]["causes"]}
    t.ok("spec.clusterName" in causes and "spec.bootstrap" in causes and "must be of type string"
         in causes["spec.clusterName"]["message"], "type and required errors name the fields", causes)
    st, hdrs, raw = k.request("POST", MACHINES, machine("mw", bogus=1))
    t.eq((st, hdrs.get("Warning")), (201, '299 - "unknown field \\"spec.bogus\\""'),
         "unknown field without fieldValidation: pruned with a Warning header")
    st, r = k.api("POST", MACHINES + "?fieldValidation=Strict", machine("ms", bogus=1))
    t.eq((st, r.get("message")), (400, 'strict decoding error: unknown field "spec.bogus"'),
         "fieldValidation=Strict: unknown field is 400")
    st, r = k.api("PATCH", MACHINES + "/m1?fieldValidation=Strict", {"spec": {"nope": 1}},
                  "application/merge-patch+json")
    t.eq(st, 400, "Strict applies to patches too")
    st, r = k.api("POST", MACHINES, {"metadata": {"name": "m3"}, "spec": {}})
    t.eq(st, 400, "custom resource without kind/apiVersion: 400")
    st, r = k.api("PATCH", MACHINES + "/m1/status", {"status": {"phase": "Provisioned", "bogus": 1},
                                                      "spec": {"providerID": "x"}}, "application/merge-patch+json")
    t.eq((st, r["status"], r["spec"].get("providerID"), r["metadata"]["generation"]),
         (200, {"phase": "Provisioned"}, None, 1), "status subresource: status only, pruned, generation kept")
    st, r = k.api("PATCH", MACHINES + "/m1/status", {"status": {"phase": "Flying"}}, "application/merge-patch+json")
    t.eq(st, 422, "enum violation in status: 422")
    st, r = k.api("PATCH", MACHINES + "/m1", {"spec": {"providerID": "cloudnode://1"}, "status": {"phase": "Failed"}},
                  "application/merge-patch+json")
    t.eq((r["spec"]["providerID"], r["status"]["phase"], r["metadata"]["generation"]),
         ("cloudnode://1", "Provisioned", 2), "main resource write: spec only, generation bumped")
    st, r = k.api("PATCH", MACHINES + "/m1", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json")
    t.eq(r["metadata"]["generation"], 2, "metadata change keeps generation")
    st, r = k.api("PATCH", MACHINES + "/m1", {"spec": {"providerID": "y"}}, "application/strategic-merge-patch+json")
    t.eq((st, r.get("reason")), (415, "UnsupportedMediaType"), "strategic merge patch on a custom resource: 415")
    st, r = k.api("PATCH", MACHINES + "/m1", [{"op": "replace", "path": "/spec/version", "value": "v1.32.0"}],
                  "application/json-patch+json")
    t.eq(st, 422, "JSON patch replace of a missing path: 422")
    st, r = k.api("GET", "/apis/cluster.x-k8s.io/v1beta1/machines")
    t.ok(st == 200 and r["kind"] == "MachineList" and r["items"][0]["kind"] == "Machine",
         "cross-namespace list; custom resource items keep kind")
    st, r = k.api("GET", MACHINES, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    t.ok(st == 200 and r["kind"] == "Table" and [c["name"] for c in r["columnDefinitions"]] == ["Name", "Age"]
         and r["rows"][0]["object"]["kind"] == "PartialObjectMetadata", "Table for custom resources", r)
    r = k.kubectl("get", "machines.cluster.x-k8s.io", "-A", "-o", "jsonpath={.items[*].metadata.name}")
    t.eq((r.returncode, r.stdout), (0, "m1 mw"), "kubectl get custom resources")


def test_project_crds(t, k):
    files = sorted(glob.glob(src("manifests", "crds", "*", "*.yaml")))
    crds = [d for f in files for d in load_yaml_docs(f) if d.get("kind") == "CustomResourceDefinition"]
    if not crds:
        t.bail_out("no CustomResourceDefinition in manifests/crds/*/*.yaml")
        return
    for c in crds:
        st, r = k.api("POST", CRDS, c)
        t.eq(st, 201, "project CRD %s accepted" % c["metadata"]["name"])
    for c in crds:
        r = k.kubectl("wait", "--for=condition=Established", "crd/" + c["metadata"]["name"], "--timeout=10s")
        t.eq(r.returncode, 0, "kubectl wait Established %s" % c["metadata"]["name"])
        spec = c["spec"]
        v = next(x["name"] for x in spec["versions"] if x.get("storage"))
        path = "/apis/%s/%s/%s%s" % (spec["group"], v, "namespaces/default/" if spec["scope"] == "Namespaced" else "",
                                     spec["names"]["plural"])
        st, r = k.api("GET", path)
        t.eq((st, r.get("kind")), (200, spec["names"]["kind"] + "List"), "list %s" % spec["names"]["plural"])
        cols = [c["name"] for c in next(x for x in spec["versions"] if x.get("storage")).get(
            "additionalPrinterColumns") or [{"name": "Age"}]]
        st, r = k.api("GET", path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        t.eq([c["name"] for c in r.get("columnDefinitions", [])], ["Name"] + cols,
             "additionalPrinterColumns of %s" % spec["names"]["plural"])


def test_crd_delete(t, k):
    k.api("POST", MACHINES, machine("m9"))
    st, r = k.api("DELETE", CRDS + "/machines.cluster.x-k8s.io")
    t.eq(st, 200, "delete CRD")
    r = k.kubectl_wait_deleted("crd/machines.cluster.x-k8s.io")
    t.eq(r.returncode, 0, "CRD goes away after its custom resources are removed", )
    st, r = k.api("GET", MACHINES)
    t.eq(st, 404, "resource unregistered")
    st, r = k.api("GET", "/apis/cluster.x-k8s.io/v1beta1")
    t.ok(st == 200 and "machines" not in [x["name"] for x in r["resources"]], "gone from discovery")


def main():
    t = Tap()
    try:
        import yaml  # noqa: F401
    except ImportError:
        t.skip_all("python3-yaml (a build dependency) is not installed")
    run_with_server(t, (test_register, test_custom_resources, test_project_crds, test_crd_delete))
    sys.exit(t.done())


main()
