#!/usr/bin/env python3
"""What the controller's identity may not do, checked with the fake API server's RBAC (escalation
prevention included) loaded from the shipped manifests (controller, Cluster API overlay): acting as
system:serviceaccount:cloudnode:cloudnode-controller, it cannot bind cluster-admin (to itself or
anyone), cannot write a ClusterRole or Role of its own making with more than it holds, cannot
change or delete a ClusterRole, binding or ValidatingAdmissionPolicy that is not the operand's,
and cannot read a Secret it has no reason to read (another namespace's, or one in a namespace
whose owner did not grant it). It can still write every operand object by name."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src, wait_for  # noqa: E402
from cncapi import grant_secrets  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

import yaml  # noqa: E402

USER = "system:serviceaccount:cloudnode:cloudnode-controller"
RBAC = [src("manifests", "controller", "controller-rbac.yaml"),
        src("manifests", "overlays", "capi", "controller-capi-rbac.yaml")]
GUARD = src("manifests", "controller", "controller-guard-policy.yaml")
MERGE = "application/merge-patch+json"
CR = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
CRB = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
ROLES = "/apis/rbac.authorization.k8s.io/v1/namespaces/cloudnode/roles"
RB = "/apis/rbac.authorization.k8s.io/v1/namespaces/cloudnode/rolebindings"
VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
SUBJECT = [{"kind": "ServiceAccount", "name": "cloudnode-controller", "namespace": "cloudnode"}]


def operand():
    with open(src("manifests", "operand", "kustomization.yaml")) as f:
        files = yaml.safe_load(f)["resources"]
    objs = []
    for name in files:
        with open(src("manifests", "operand", name)) as f:
            objs += [d for d in yaml.safe_load_all(f) if d]
    return objs


def path_of(obj):
    group_version = obj["apiVersion"]
    base = "/api/" + group_version if "/" not in group_version else "/apis/" + group_version
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
              "RoleBinding": "rolebindings", "ServiceAccount": "serviceaccounts", "Deployment": "deployments",
              "PodDisruptionBudget": "poddisruptionbudgets", "ConfigMap": "configmaps",
              "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
              "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[obj["kind"]]
    if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                       "ValidatingAdmissionPolicyBinding"):
        return "%s/%s" % (base, plural)
    return "%s/namespaces/cloudnode/%s" % (base, plural)


def binding(kind, name, role, namespace=None):
    """A binding of the controller's own ServiceAccount to the ClusterRole role."""
    md = {"name": name}
    if namespace:
        md["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": md,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": SUBJECT}


def test_cannot_escalate(t, k, tok):
    # The operand's roles and bindings as the controller would have applied them.
    for o in operand():
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            for s in o.get("subjects") or []:
                s["namespace"] = "cloudnode"
            st, r = k.api("POST", path_of(o), o)
            assert st == 201, (st, r)

    # The real API server enforces the guard policy once its informer has seen and compiled it,
    # about a second after the start: wait until a dry run of what it denies is denied.
    def guarded():
        st, _ = k.api("PATCH", CR + "/cloudnode:node-initializer?dryRun=All",
                      {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}, MERGE, token=tok)
        return st == 403
    t.ok(wait_for(guarded, timeout=30, step=0.2), "the guard policy is enforced")
    st, r = k.api("POST", CRB, binding("ClusterRoleBinding", "take-over", "cluster-admin"), token=tok)
    t.eq(st, 403, "cannot bind cluster-admin to itself with a new ClusterRoleBinding")
    st, r = k.api("PATCH", CRB + "/cloudnode:node-initializer",
                  {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                   "subjects": SUBJECT}, MERGE, token=tok)
    t.ok(st in (403, 422), "cannot turn an operand binding into a cluster-admin binding (%s)" % st)
    st, r = k.api("PATCH", CRB + "/cloudnode:cloud-controller-manager",
                  {"subjects": SUBJECT + [{"kind": "ServiceAccount", "name": "cloudnode-cloud-controller-manager",
                                           "namespace": "cloudnode"}]}, MERGE, token=tok)
    t.eq(st, 403, "cannot add itself to an operand binding")
    st, r = k.api("POST", CRB, binding("ClusterRoleBinding", "second-binding", "cloudnode:cloud-controller-manager"),
                  token=tok)
    t.eq(st, 403, "cannot bind an operand role to itself with a binding of its own")
    st, r = k.api("POST", RB, binding("RoleBinding", "take-over", "cluster-admin", "cloudnode"), token=tok)
    t.eq(st, 403, "cannot bind cluster-admin in its own namespace")
    st, r = k.api("POST", CR, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "metadata": {"name": "everything"},
                               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}, token=tok)
    t.eq(st, 403, "cannot create a ClusterRole granting everything")
    st, r = k.api("POST", ROLES, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                  "metadata": {"name": "everything", "namespace": "cloudnode"},
                                  "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}, token=tok)
    t.eq(st, 403, "cannot create a Role granting everything in its namespace")
    st, r = k.api("PATCH", CR + "/cloudnode:node-initializer",
                  {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}, MERGE, token=tok)
    t.eq(st, 403, "cannot widen an operand ClusterRole to everything")


def test_foreign_objects(t, k, tok):
    st, _ = k.api("POST", CR, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "metadata": {"name": "foreign"},
                               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    assert st == 201, st
    st, _ = k.api("PATCH", CR + "/foreign", {"metadata": {"labels": {"x": "y"}}}, MERGE, token=tok)
    t.eq(st, 403, "cannot change a foreign ClusterRole")
    st, _ = k.api("DELETE", CR + "/foreign", token=tok)
    t.eq(st, 403, "cannot delete a foreign ClusterRole")
    st, _ = k.api("DELETE", CRB + "/cloudnode:controller", token=tok)
    t.eq(st, 403, "cannot delete the binding of its own role")
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "foreign-policy"},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"], "resources": ["pods"]}]},
                       "validations": [{"expression": "true"}]}}
    st, r = k.api("POST", VAP, policy)
    assert st == 201, (st, r)
    st, _ = k.api("PATCH", VAP + "/foreign-policy", {"spec": {"failurePolicy": "Ignore"}}, MERGE, token=tok)
    t.eq(st, 403, "cannot weaken a foreign ValidatingAdmissionPolicy")
    st, _ = k.api("DELETE", VAP + "/foreign-policy", token=tok)
    t.eq(st, 403, "cannot delete a foreign ValidatingAdmissionPolicy")
    st, _ = k.api("POST", VAPB, {"apiVersion": "admissionregistration.k8s.io/v1",
                                 "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "foreign-binding"},
                                 "spec": {"policyName": "foreign-policy", "validationActions": ["Deny"]}})
    st, _ = k.api("DELETE", VAPB + "/foreign-binding", token=tok)
    t.eq(st, 403, "cannot delete a foreign ValidatingAdmissionPolicyBinding")


def test_secrets(t, k, tok):
    for ns in ("kube-system", "tenant"):
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        st, r = k.api("POST", "/api/v1/namespaces/%s/secrets" % ns,
                      {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "unrelated"},
                       "data": {"token": "c2VjcmV0"}})
        assert st == 201, (st, r)
    st, _ = k.api("GET", "/api/v1/namespaces/kube-system/secrets/unrelated", token=tok)
    t.eq(st, 403, "cannot read a Secret in kube-system")
    st, _ = k.api("GET", "/api/v1/namespaces/tenant/secrets/unrelated", token=tok)
    t.eq(st, 403, "cannot read a Secret of a namespace that did not grant it")
    st, _ = k.api("GET", "/api/v1/namespaces/cloudnode/secrets", token=tok)
    t.eq(st, 403, "cannot list Secrets")
    # The grant a namespace's owner gives (manifests/README.md, Cluster API): get only, there only.
    grant_secrets(k, "tenant")
    st, _ = k.api("GET", "/api/v1/namespaces/tenant/secrets/unrelated", token=tok)
    t.eq(st, 200, "once a namespace's owner grants it, it reads that namespace's Secrets")
    st, _ = k.api("GET", "/api/v1/namespaces/kube-system/secrets/unrelated", token=tok)
    t.eq(st, 403, "and still no other namespace's")


def test_operand_still_writable(t, k, tok):
    objs = operand()
    for o in objs:
        o.setdefault("metadata", {})
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                             "ValidatingAdmissionPolicyBinding"):
            o["metadata"]["namespace"] = "cloudnode"
        for s in o.get("subjects") or []:
            s["namespace"] = "cloudnode"
    bad = []
    for o in objs:
        if o["kind"] in ("Role", "ClusterRole"):
            # As the controller creates them: PUT to the name, which its `escalate` is limited to
            # (a POST names no role, see test_role_by_post).
            st, r = k.api("PUT", path_of(o) + "/" + o["metadata"]["name"], o, token=tok)
            st = 201 if st == 200 else st
        else:
            st, r = k.api("POST", path_of(o), o, token=tok)
        if st not in (201, 409):  # 409: created as the operand above
            bad.append(("create", o["kind"], o["metadata"]["name"], st))
            continue
        name = o["metadata"]["name"]
        st, r = k.api("PATCH", path_of(o) + "/" + name, {"metadata": {"labels": {"cloudnode.io/test": "x"}}},
                      MERGE, token=tok)
        if st != 200:
            bad.append(("patch", o["kind"], name, st))
    st, r = k.api("POST", "/api/v1/namespaces/cloudnode/configmaps",
                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cloud-conf"},
                   "data": {"cloud.conf": ""}}, token=tok)
    if st != 201:
        bad.append(("create", "ConfigMap", "cloud-conf", st))
    for o in reversed(objs):
        st, r = k.api("DELETE", path_of(o) + "/" + o["metadata"]["name"], token=tok)
        if st not in (200, 202):
            bad.append(("delete", o["kind"], o["metadata"]["name"], st))
    t.eq(bad, [], "every operand object can still be created, patched and deleted by name")


def test_role_by_post(t, k, tok):
    # The real API server asks for `escalate` on the name in the request's path: a POST has none,
    # so the operand's roles, which grant Node permissions the controller does not hold, cannot be
    # created by POST; the controller PUTs them to their names.
    for o in operand():
        if o["kind"] not in ("Role", "ClusterRole"):
            continue
        o["metadata"]["namespace"] = "cloudnode"
        k.api("DELETE", path_of(o) + "/" + o["metadata"]["name"])
        st, r = k.api("POST", path_of(o), o, token=tok)
        t.eq(st, 403, "a POST of %s %s is refused as an escalation" % (o["kind"], o["metadata"]["name"]))
        st, r = k.api("PUT", path_of(o) + "/" + o["metadata"]["name"], o, token=tok)
        t.eq(st, 201, "a PUT of %s %s to its name creates it" % (o["kind"], o["metadata"]["name"]))


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as d, \
            kube_server(os.path.join(d, "kube"), rbac=RBAC, load=[GUARD]) as k:
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cloudnode"}})
        tok = k.token_for(USER)
        t.run(test_cannot_escalate, k, tok)
        t.run(test_foreign_objects, k, tok)
        t.run(test_secrets, k, tok)
        t.run(test_operand_still_writable, k, tok)
        t.run(test_role_by_post, k, tok)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
