#!/usr/bin/env python3
"""The OpenShift release manifests (manifests/openshift-release, built from the openshift overlay
by manifests/openshift/gen-release.py) in the form a release payload carries them, as
cluster-cloud-controller-manager-operator's: one object per file named
0000_26_cloud-controller-manager-operator_NN_*, ordered namespaces first and the ClusterOperator
last; every object selected for the self-managed and single-node profiles and the
CloudControllerManager capability (CloudCredential too for the CredentialsRequests);
image-references an ImageStream naming every image the manifests use; the ClusterOperator with
its operator version placeholder and relatedObjects; the workloads as management workload with
their SCC, k8s-app labels and priority classes. The ClusterOperator and the CredentialsRequests
are accepted by the real CRDs."""
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import openshift  # noqa: E402
from cntap import Tap, build  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

import yaml  # noqa: E402

DIR = build("manifests", "openshift-release")
NAME = re.compile(r"^0000_26_cloud-controller-manager-operator_(\d\d)_cloudnode-[a-z0-9.-]+\.yaml$")
PROFILES = ("include.release.openshift.io/self-managed-high-availability",
            "include.release.openshift.io/single-node-developer")
MANAGEMENT = '{"effect": "PreferredDuringScheduling"}'


def load():
    objs = {}
    for f in sorted(os.listdir(DIR)):
        if f == "image-references":
            continue
        with open(os.path.join(DIR, f)) as fh:
            objs[f] = [d for d in yaml.safe_load_all(fh) if d]
    return objs


def find(objs, kind, name):
    for docs in objs.values():
        for o in docs:
            if o["kind"] == kind and o["metadata"]["name"] == name:
                return o
    return None


def images_used(objs):
    out = set()
    for docs in objs.values():
        for o in docs:
            if o["kind"] == "Deployment":
                out |= {c["image"] for c in o["spec"]["template"]["spec"]["containers"]}
            elif o["kind"] == "ConfigMap" and "images.json" in o.get("data", {}):
                out |= set(yaml.safe_load(o["data"]["images.json"]).values())
    return out


def main():
    t = Tap()
    objs = load()
    t.ok(len(objs) > 20, "the release manifests are built (%d files)" % len(objs))
    t.eq([f for f in objs if not NAME.match(f)], [], "every file is named 0000_26_cloud-controller-manager-operator_NN_")
    t.eq([f for f, docs in objs.items() if len(docs) != 1], [], "one object per file")
    order = [objs[f][0]["kind"] for f in sorted(objs)]
    t.ok(order[0] == "Namespace" and order[-1] == "ClusterOperator" and
         order.index("CustomResourceDefinition") < order.index("Deployment"),
         "namespaces first, CRDs before workloads, the ClusterOperator last", order)
    unselected = [f for f, docs in objs.items() for o in docs
                  if any((o["metadata"].get("annotations") or {}).get(p) != "true" for p in PROFILES)]
    t.eq(unselected, [], "every object is in the self-managed and single-node profiles")
    caps = {o["kind"]: (o["metadata"].get("annotations") or {}).get("capability.openshift.io/name")
            for docs in objs.values() for o in docs}
    t.eq((caps["Deployment"], caps["CredentialsRequest"]),
         ("CloudControllerManager", "CloudCredential+CloudControllerManager"),
         "the CloudControllerManager capability; CloudCredential too for the CredentialsRequests")
    t.eq([k for k, v in caps.items() if not v], [], "every object names its capability")

    with open(os.path.join(DIR, "image-references")) as f:
        refs = yaml.safe_load(f)
    t.eq((refs["kind"], refs["apiVersion"]), ("ImageStream", "image.openshift.io/v1"), "image-references is an ImageStream")
    tagged = {tag["from"]["name"] for tag in refs["spec"]["tags"] if tag["from"]["kind"] == "DockerImage"}
    t.eq(sorted(images_used(objs) - tagged), [], "every image the manifests use is a tag of it (the CVO substitutes them)")

    co = find(objs, "ClusterOperator", "cloudnode")
    t.eq(co["status"]["versions"], [{"name": "operator", "version": "0.0.1-snapshot"}],
         "the ClusterOperator's operator version is the release placeholder")
    related = {(r["group"], r["resource"], r["name"]) for r in co["status"]["relatedObjects"]}
    t.ok({("", "namespaces", "openshift-cloudnode"), ("config.openshift.io", "clusteroperators", "cloudnode")} <=
         related, "its relatedObjects name the namespace and itself", related)

    ns = find(objs, "Namespace", "openshift-cloudnode")
    t.eq(ns["metadata"]["annotations"].get("workload.openshift.io/allowed"), "management",
         "the namespace allows management workload")
    for name, scc, priority in (("cloudnode-controller", "restricted-v2", "system-node-critical"),
                                ("cloudnode-cloud-controller-manager", "hostnetwork-v2", "system-cluster-critical")):
        dep = find(objs, "Deployment", name)
        tmpl = dep["spec"]["template"]
        ann = tmpl["metadata"].get("annotations") or {}
        t.eq((ann.get("target.workload.openshift.io/management"), ann.get("openshift.io/required-scc"),
              tmpl["metadata"]["labels"].get("k8s-app"), dep["metadata"]["labels"].get("k8s-app"),
              tmpl["spec"].get("priorityClassName")),
             (MANAGEMENT, scc, name, name, priority),
             "%s: management workload, SCC %s, k8s-app label, %s" % (name, scc, priority))
    env = {e["name"]: e.get("value") for e in
           find(objs, "Deployment", "cloudnode-controller")["spec"]["template"]["spec"]["containers"][0]["env"]}
    t.eq(env.get("RELEASE_VERSION"), "0.0.1-snapshot", "the controller is told its release (placeholder)")

    with tempfile.TemporaryDirectory() as tmp:
        with FakeKube(os.path.join(tmp, "kube")) as k:
            openshift.install_crds(k)
            openshift.create_namespaces(k, "openshift-cloud-credential-operator")
            for f, docs in objs.items():
                o = docs[0]
                if o["kind"] == "ClusterOperator":
                    code, body = k.api("POST", openshift.CO, o)
                elif o["kind"] == "CredentialsRequest":
                    code, body = k.api("POST", "/apis/cloudcredential.openshift.io/v1/namespaces/%s/credentialsrequests"
                                       % o["metadata"]["namespace"], o)
                else:
                    continue
                t.eq((code, body.get("reason") if code != 201 else None), (201, None),
                     "%s is accepted by the real CRD" % f)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
