#!/usr/bin/env python3
"""cloudnode's OpenShift release manifests, in the layout of a release payload's manifests
directory: the openshift overlay rendered by kubectl kustomize (read on stdin), one file per
object named 0000_26_cloud-controller-manager-operator_NN_cloudnode-KIND-NAME.yaml (NN orders
them as the CVO applies them: namespaces, CRDs, RBAC, configuration, credentials requests,
workloads, the ClusterOperator), each object with the annotations the CVO selects manifests by
(include.release.openshift.io/* for the self-managed and single-node profiles,
capability.openshift.io/name), and image-references, the release's ImageStream.

    kubectl kustomize manifests/overlays/openshift | gen-release.py IMAGE_REFERENCES OUTDIR"""
import os
import re
import shutil
import sys

import yaml

PREFIX = "0000_26_cloud-controller-manager-operator"
ORDER = {"Namespace": "00", "CustomResourceDefinition": "01", "ServiceAccount": "02", "ClusterRole": "02",
         "ClusterRoleBinding": "02", "Role": "02", "RoleBinding": "02", "ValidatingAdmissionPolicy": "03",
         "ValidatingAdmissionPolicyBinding": "03", "ConfigMap": "04", "CredentialsRequest": "13",
         "PodDisruptionBudget": "49", "Deployment": "50", "ClusterOperator": "60"}
ANNOTATIONS = {"include.release.openshift.io/self-managed-high-availability": "true",
               "include.release.openshift.io/single-node-developer": "true"}
CAPABILITY = "CloudControllerManager"


def file_name(o):
    slug = re.sub(r"[^a-z0-9.-]+", "-", ("%s-%s" % (o["kind"], o["metadata"]["name"])).lower()).strip("-")
    if o["metadata"].get("namespace"):
        slug += "-" + o["metadata"]["namespace"]
    return "%s_%s_cloudnode-%s.yaml" % (PREFIX, ORDER[o["kind"]], slug)


def main():
    refs, out = sys.argv[1:3]
    objs = [o for o in yaml.safe_load_all(sys.stdin) if o]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for o in objs:
        if o["kind"] not in ORDER:
            sys.exit("gen-release.py: no run-level order for kind %s (object %s)" % (o["kind"], o["metadata"]["name"]))
        ann = o["metadata"].setdefault("annotations", {})
        ann.update(ANNOTATIONS)
        ann.setdefault("capability.openshift.io/name", CAPABILITY)
        path = os.path.join(out, file_name(o))
        if os.path.exists(path):
            sys.exit("gen-release.py: two objects would be written to %s" % path)
        with open(path, "w") as f:
            yaml.safe_dump(o, f, sort_keys=False)
    shutil.copyfile(refs, os.path.join(out, "image-references"))


if __name__ == "__main__":
    main()
