#!/usr/bin/env python3
"""tests/fake-kube-apiserver: ValidatingAdmissionPolicies are enforced with CEL as on the real
server (match constraints and conditions, variables, messages, reasons, evaluation errors such
as "no such key" for an absent optional field), and the project's own policy loads."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src  # noqa: E402
from fakekubeclient import run_with_server  # noqa: E402

MP = "application/merge-patch+json"
PREFIX = "nodes \"n1\" is forbidden: ValidatingAdmissionPolicy 'test-policy' with binding 'test-binding' denied request: "


def test_policy(t, k):
    st, _ = k.api("POST", "/api/v1/nodes", {"metadata": {"name": "n1", "labels": {"a": "1"}},
                                            "spec": {"podCIDR": "10.0.0.0/24"}})
    t.eq(st, 201, "create is not matched by an UPDATE-only policy")
    tok = k.token_for("limited")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"topology.kubernetes.io/zone": "z"}}},
                  MP, token=tok)
    t.eq(st, 200, "allowed change passes")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": "2"}}}, MP, token=tok)
    t.eq((st, r.get("reason"), r.get("message")), (403, "Forbidden", PREFIX + "only the zone label may change"),
         "denied with the policy's message and reason")
    t.eq(r["details"].get("causes"), [{"message": PREFIX.split("forbidden: ", 1)[1] + "only the zone label may change"}],
         "cause carries the policy message")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": None}}}, MP, token=tok)
    t.eq(st, 403, "removing a label is denied too")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": "2"}}}, MP)
    t.eq(st, 200, "matchConditions: other users are not affected")
    st, r = k.api("GET", "/api/v1/nodes/n1")
    t.eq(r["metadata"]["labels"], {"a": "2", "topology.kubernetes.io/zone": "z"}, "denied writes left no trace")
    st, r = k.api("POST", "/api/v1/nodes", {"metadata": {"name": "n2"}})
    tok2 = k.token_for("limited")
    st, r = k.api("PATCH", "/api/v1/nodes/n2", {"metadata": {"labels": {"topology.kubernetes.io/zone": "z"}}},
                  MP, token=tok2)
    msg = r.get("message", "")
    t.eq((st, r.get("reason")), (422, "Invalid"), "evaluation error with failurePolicy Fail: 422 Invalid")
    t.ok(msg.endswith("denied request: expression 'object.spec.podCIDR == oldObject.spec.podCIDR' resulted in "
                      "error: no such key: podCIDR"), "absent optional field is 'no such key'", msg)
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"spec": {"unschedulable": True}}, MP, token=tok)
    t.eq((st, r.get("reason"), r.get("message")), (422, "Invalid", PREFIX + "may not cordon n1"),
         "messageExpression; default reason Invalid")


def test_policy_validation(t, k):
    st, r = k.api("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                  {"metadata": {"name": "broken"}, "spec": {"validations": [{"expression": "object.spec.("}]}})
    t.ok(st == 422 and "spec.validations[0].expression" in r.get("message", ""),
         "a policy whose expression does not compile is 422", r)
    st, r = k.api("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
                  {"metadata": {"name": "b"}, "spec": {"policyName": "x", "validationActions": ["Maybe"]}})
    t.eq(st, 422, "binding with an unknown validation action is 422")


def test_project_policy(t, k):
    path = src("manifests", "operand", "node-initializer-admission-policy.yaml")
    if not os.path.exists(path):
        t.bail_out("manifests/operand/node-initializer-admission-policy.yaml is missing")
        return
    import yaml
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        plural = "validatingadmissionpolicies" if d["kind"] == "ValidatingAdmissionPolicy" else \
            "validatingadmissionpolicybindings"
        st, r = k.api("POST", "/apis/admissionregistration.k8s.io/v1/" + plural, d)
        t.eq(st, 201, "project %s loads" % d["kind"])
    k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
          {"metadata": {"name": "ni"}, "rules": [{"apiGroups": [""], "resources": ["nodes", "nodes/status"],
                                                  "verbs": ["get", "patch"]}]})
    k.api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
          {"metadata": {"name": "ni"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                   "name": "ni"},
           "subjects": [{"kind": "ServiceAccount", "name": "w1", "namespace": "cloudnode-nodes"}]})
    k.api("POST", "/api/v1/nodes", {"metadata": {"name": "w1", "annotations": {"x": "y"}},
                                    "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                                                         "value": "true", "effect": "NoSchedule"}]}})
    tok = k.token_for("system:serviceaccount:cloudnode-nodes:w1")  # node w1's own identity
    st, r = k.api("PATCH", "/api/v1/nodes/w1", {"spec": {"taints": [
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        {"key": "evil", "value": "x", "effect": "NoExecute"}]}}, MP, token=tok)
    t.ok(st in (403, 422) and "ValidatingAdmissionPolicy 'cloudnode-node-initializer'" in r.get("message", ""),
         "the node initializer may not add a taint", r)
    st, r = k.api("PATCH", "/api/v1/nodes/w1", {"spec": {"taints": [
        {"key": "evil", "value": "x", "effect": "NoExecute"}]}}, MP)
    t.eq(st, 200, "the policy does not apply to other identities")


def main():
    t = Tap()
    try:
        import yaml  # noqa: F401
    except ImportError:
        t.skip_all("python3-yaml (a build dependency) is not installed")
    run_with_server(t, (test_policy, test_policy_validation, test_project_policy), load=[src("tests", "data", "fakekube-vap-test.yaml")])
    sys.exit(t.done())


main()
