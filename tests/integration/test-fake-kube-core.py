#!/usr/bin/env python3
"""tests/fake-kube-apiserver: authentication, CRUD semantics, patches, status subresource,
finalizers, conflicts and validation, checked through its HTTP API."""
import datetime
import json
import os
import ssl
import sys
import time
import http.client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, wait_for  # noqa: E402
from fakekubeclient import kubectl_minor, run_with_server  # noqa: E402

TAINT = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}


def node(name, **spec):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}


def test_auth(t, k):
    t.ok(k.url.startswith("https://127.0.0.1:") and not k.url.endswith(":0"), "URL has the real port")
    mode = os.stat(k.kubeconfig).st_mode & 0o777
    t.eq(mode, 0o600, "admin.kubeconfig is 0600")
    with open(k.kubeconfig) as f:
        cfg = json.load(f)
    t.ok("certificate-authority-data" in cfg["clusters"][0]["cluster"], "CA embedded in kubeconfig")
    # No credentials: 401 with a Status body.
    ctx = ssl.create_default_context(cafile=os.path.join(k.state_dir, "ca.crt"))
    c = http.client.HTTPSConnection(k.host, k.port, context=ctx, timeout=10)
    c.request("GET", "/api/v1/nodes")
    r = c.getresponse()
    body = json.loads(r.read())
    c.close()
    t.eq((r.status, body.get("reason"), body.get("kind")), (401, "Unauthorized", "Status"), "no credentials: 401")
    st, _ = k.api("GET", "/api/v1/nodes", token="not-a-token")
    t.eq(st, 401, "unknown bearer token: 401")
    # TLS verification against a wrong CA fails (the CA is the server's own).
    bad = ssl.create_default_context()
    c = http.client.HTTPSConnection(k.host, k.port, context=bad, timeout=10)
    try:
        c.request("GET", "/version")
        got = "answer %d" % c.getresponse().status
    except ssl.SSLError as e:
        got = "refused: %s" % type(e).__name__
    finally:
        c.close()
    t.ok(got.startswith("refused"), "server certificate not trusted by the system CAs", got)
    tok = k.token_for("system:serviceaccount:kube-system:cn")
    st, r = k.api("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                  {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token=tok)
    t.eq(st, 201, "selfsubjectreview as service account")
    ui = (r.get("status") or {}).get("userInfo") or {}
    t.eq((ui.get("username"), sorted(ui.get("groups") or [])),
         ("system:serviceaccount:kube-system:cn",
          ["system:authenticated", "system:serviceaccounts", "system:serviceaccounts:kube-system"]),
         "service account identity and groups")
    st, r = k.api("GET", "/version", token=tok)
    t.eq((st, r.get("major")), (200, "1"), "discovery allowed for authenticated users")
    st, r = k.api("GET", "/api/v1/nodes", token=tok)
    t.eq(st, 403, "service account without RBAC cannot list nodes")
    t.eq(r.get("message"), 'nodes is forbidden: User "system:serviceaccount:kube-system:cn" cannot list resource '
         '"nodes" in API group "" at the cluster scope', "403 message phrased like the real server")
    st, r = k.api("POST", "/fakekube/tokens", {"user": "x"}, token=tok)
    t.eq(st, 403, "admin endpoint refused to non-admin")


def test_crud(t, k):
    st, n = k.api("POST", "/api/v1/nodes", node("n1", taints=[TAINT]))
    t.eq(st, 201, "create node")
    md = n["metadata"]
    t.ok(md.get("uid") and md.get("creationTimestamp") and md.get("resourceVersion"), "uid, timestamp, rv set")
    t.ok("generation" not in md, "nodes carry no generation (as on the real server)")
    st, r = k.api("POST", "/api/v1/nodes", node("n1"))
    t.eq((st, r["reason"], r["message"]), (409, "AlreadyExists", 'nodes "n1" already exists'), "AlreadyExists")
    st, r = k.api("GET", "/api/v1/nodes/nope")
    t.eq((st, r["reason"], r["message"], r["details"]), (404, "NotFound", 'nodes "nope" not found',
                                                          {"name": "nope", "kind": "nodes"}), "NotFound body")
    st, cm = k.api("POST", "/api/v1/namespaces/default/configmaps",
                   {"metadata": {"generateName": "cfg-"}, "data": {"a": "1"}})
    t.ok(st == 201 and cm["metadata"]["name"].startswith("cfg-") and len(cm["metadata"]["name"]) == 9,
         "generateName", cm)
    st, r = k.api("POST", "/api/v1/namespaces/nope/configmaps", {"metadata": {"name": "x"}})
    t.eq((st, r.get("message")), (404, 'namespaces "nope" not found'), "create in a missing namespace")
    st, r = k.api("POST", "/api/v1/namespaces/kube-system/configmaps",
                  {"metadata": {"name": "x", "namespace": "default"}})
    t.eq(st, 400, "namespace in body differs from path")
    # Global resourceVersion: every write increments, across types.
    rv1 = int(cm["metadata"]["resourceVersion"])
    st, s = k.api("POST", "/api/v1/namespaces/default/secrets",
                  {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    t.eq(int(s["metadata"]["resourceVersion"]), rv1 + 1, "one global resourceVersion counter")
    t.eq((s.get("data"), "stringData" in s, s.get("type")), ({"k": "dg=="}, False, "Opaque"),
         "secret stringData stored as data")
    # Update with a stale resourceVersion: 409 Conflict.
    stale = dict(cm, data={"a": "2"})
    st, cm2 = k.api("PUT", "/api/v1/namespaces/default/configmaps/" + cm["metadata"]["name"], stale)
    t.eq(st, 200, "update with current resourceVersion")
    st, r = k.api("PUT", "/api/v1/namespaces/default/configmaps/" + cm["metadata"]["name"], stale)
    t.eq((st, r["reason"]), (409, "Conflict"), "update with stale resourceVersion: Conflict")
    t.eq(r["message"], 'Operation cannot be fulfilled on configmaps "%s": the object has been modified; please '
         'apply your changes to the latest version and try again' % cm["metadata"]["name"], "Conflict message")
    st, r = k.api("PUT", "/api/v1/namespaces/default/configmaps/" + cm["metadata"]["name"],
                  dict(cm2, metadata=dict(cm2["metadata"], uid="00000000-0000-0000-0000-000000000000")))
    t.eq((st, r.get("reason")), (409, "Conflict"), "update with another uid: precondition Conflict")
    # A no-op write changes nothing.
    st, cm3 = k.api("PATCH", "/api/v1/namespaces/default/configmaps/" + cm["metadata"]["name"],
                    {"data": {"a": "2"}}, "application/merge-patch+json")
    t.eq(cm3["metadata"]["resourceVersion"], cm2["metadata"]["resourceVersion"], "no-op patch keeps resourceVersion")
    st, r = k.api("PUT", "/api/v1/nodes/ghost", node("ghost"))
    t.eq(st, 404, "update of a missing node is 404 (no create on update)")
    st, r = k.api("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l1",
                  {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
                   "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    t.eq(st, 201, "leases are created on update, as on the real server")


def test_patches(t, k):
    st, n = k.api("GET", "/api/v1/nodes/n1")
    rv = n["metadata"]["resourceVersion"]
    p = {"metadata": {"resourceVersion": rv, "labels": {"topology.kubernetes.io/zone": "z1"}},
         "spec": {"providerID": "aws:///z1/i-1", "taints": None}}
    st, n2 = k.api("PATCH", "/api/v1/nodes/n1", p, "application/merge-patch+json")
    t.eq((st, n2["spec"].get("providerID"), "taints" in n2["spec"]), (200, "aws:///z1/i-1", False),
         "merge patch with resourceVersion precondition")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", p, "application/merge-patch+json")
    t.eq((st, r.get("reason")), (409, "Conflict"), "merge patch with stale resourceVersion: Conflict")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"spec": {"providerID": "aws:///z1/i-2"}},
                  "application/merge-patch+json")
    t.eq((st, r.get("reason")), (422, "Invalid"), "providerID change from non-empty: 422")
    t.eq(r.get("message"), 'Node "n1" is invalid: spec.providerID: Forbidden: node updates may not change '
         'providerID except from "" to valid', "providerID message")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", [{"op": "test", "path": "/spec/providerID", "value": "wrong"}],
                  "application/json-patch+json")
    t.eq(st, 422, "JSON patch test failure: 422")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", [
        {"op": "test", "path": "/spec/providerID", "value": "aws:///z1/i-1"},
        {"op": "add", "path": "/spec/taints", "value": [TAINT]},
        {"op": "add", "path": "/metadata/labels/x", "value": "y"}], "application/json-patch+json")
    t.eq((st, r["spec"].get("taints"), r["metadata"]["labels"].get("x")), (200, [TAINT], "y"), "JSON patch")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"spec": {"unschedulable": True}}, "application/x-whatever")
    t.eq((st, r.get("reason")), (415, "UnsupportedMediaType"), "unknown patch type: 415")
    # Strategic merge patch: taints are atomic (replaced), addresses merge by type.
    t2 = {"key": "b", "value": "", "effect": "NoExecute"}
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"spec": {"taints": [t2]}}, "application/strategic-merge-patch+json")
    t.eq(r["spec"]["taints"], [t2], "strategic merge patch replaces spec.taints (atomic list)")
    st, r = k.api("PATCH", "/api/v1/nodes/n1/status",
                  {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                            {"type": "Hostname", "address": "n1"}]}},
                  "application/strategic-merge-patch+json")
    st, r = k.api("PATCH", "/api/v1/nodes/n1/status",
                  {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}},
                  "application/strategic-merge-patch+json")
    t.eq(r["status"]["addresses"], [{"type": "InternalIP", "address": "10.0.0.2"},
                                    {"type": "Hostname", "address": "n1"}],
         "strategic merge patch merges status.addresses by type")
    smp = "application/strategic-merge-patch+json"
    k.api("POST", "/api/v1/nodes", node("n-smp"))
    dual = [{"type": "InternalIP", "address": "10.0.0.3"}, {"type": "InternalIP", "address": "fd00::3"}]
    st, r = k.api("PATCH", "/api/v1/nodes/n-smp/status", {"status": {"addresses": dual + [{"$patch": "replace"}]}}, smp)
    t.eq((st, r["status"]["addresses"]), (200, dual),
         "a $patch: replace element replaces status.addresses as a whole (no merge of two InternalIPs)")
    k.api("POST", "/api/v1/nodes", node("n-smp-new"))
    st, r = k.api("PATCH", "/api/v1/nodes/n-smp-new/status",
                  {"status": {"$setElementOrder/addresses": [{"type": "InternalIP"}, {"type": "InternalIP"}],
                              "addresses": dual}}, smp)
    t.eq((st, r["status"].get("addresses")), (200, dual),
         "status.addresses a Node does not have yet are taken from a strategic merge patch as they are "
         "(two InternalIPs, as cloud-provider's node controller sends them)")
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    k.api("PATCH", "/api/v1/nodes/n-smp/status", {"status": {"conditions": [ready]}}, "application/merge-patch+json")
    mine = {"type": "CloudProviderInitialized", "status": "False", "reason": "X", "message": "m",
            "lastTransitionTime": "2024-05-01T10:00:00Z"}
    st, r = k.api("PATCH", "/api/v1/nodes/n-smp/status", {"status": {"conditions": [mine]}}, smp)
    t.eq((st, r["status"]["conditions"], r["status"]["addresses"]), (200, [ready, mine], dual),
         "strategic merge patch adds a condition by type, other conditions and addresses kept")
    st, r = k.api("PATCH", "/api/v1/nodes/n-smp/status",
                  {"status": {"conditions": [{"type": "CloudProviderInitialized", "status": "True", "reason": "Y"}]}},
                  smp)
    t.eq(r["status"]["conditions"], [ready, dict(mine, status="True", reason="Y")],
         "a condition of the same type is merged in place, unmentioned fields kept")
    st, r = k.api("PATCH", "/api/v1/nodes/n-smp/status",
                  {"status": {"conditions": [{"type": "CloudProviderInitialized", "$patch": "delete"}]}}, smp)
    t.eq(r["status"]["conditions"], [ready], "$patch: delete removes one condition by its merge key")
    st, r = k.api("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"bad key!": "v"}}},
                  "application/merge-patch+json")
    t.eq((st, r["details"]["causes"][0]["field"]), (422, "metadata.labels"), "invalid label key: 422")
    st, r = k.api("POST", "/api/v1/nodes", node("Bad_Name"))
    t.ok(st == 422 and r["message"].startswith('Node "Bad_Name" is invalid: metadata.name: Invalid value: '
                                                '"Bad_Name": a lowercase RFC 1123 subdomain'), "invalid name: 422", r)


def test_status(t, k):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
           "spec": {"selector": {"matchLabels": {"app": "x"}},
                    "template": {"metadata": {"labels": {"app": "x"}},
                                 "spec": {"containers": [{"name": "c", "image": "img:1"}]}}},
           "status": {"replicas": 5}}
    st, d = k.api("POST", "/apis/apps/v1/namespaces/default/deployments", dep)
    t.eq((st, d["metadata"].get("generation"), d.get("status")), (201, 1, {}),
         "create resets deployment status, generation 1")
    t.eq((d["spec"]["replicas"], d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"]),
         (1, "IfNotPresent"), "deployment defaults applied")
    st, d = k.api("PATCH", "/apis/apps/v1/namespaces/default/deployments/d1/status",
                  {"status": {"replicas": 1}, "spec": {"replicas": 7}}, "application/merge-patch+json")
    t.eq((d["status"], d["spec"]["replicas"], d["metadata"]["generation"]), ({"replicas": 1}, 1, 1),
         "status write ignores spec and keeps generation")
    st, d = k.api("PATCH", "/apis/apps/v1/namespaces/default/deployments/d1",
                  {"status": {"replicas": 9}, "metadata": {"labels": {"l": "v"}}}, "application/merge-patch+json")
    t.eq((d["status"], d["metadata"]["generation"]), ({"replicas": 1}, 1),
         "main write ignores status; metadata change keeps generation")
    st, d = k.api("PATCH", "/apis/apps/v1/namespaces/default/deployments/d1",
                  {"spec": {"replicas": 3}}, "application/merge-patch+json")
    t.eq(d["metadata"]["generation"], 2, "spec change bumps generation")
    st, d = k.api("PATCH", "/apis/apps/v1/namespaces/default/deployments/d1", {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"},
                                                   "requests": {"cpu": 1, "memory": "1.5Gi"}}}]}}}},
        "application/strategic-merge-patch+json")
    r = d["spec"]["template"]["spec"]["containers"][0]["resources"]
    t.eq(r, {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1536Mi"}},
         "resource quantities come back in canonical form")
    st, d = k.api("PATCH", "/apis/apps/v1/namespaces/default/deployments/d1", {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}}}},
        "application/strategic-merge-patch+json")
    t.ok(st == 400 and d["message"].startswith('Deployment in version "v1" cannot be handled as a Deployment: '
                                               'quantities must match the regular expression'), "bad quantity: 400", d)


def test_finalizers(t, k):
    st, cm = k.api("POST", "/api/v1/namespaces/default/configmaps",
                   {"metadata": {"name": "fin", "finalizers": ["example.com/hold"]}})
    st, r = k.api("DELETE", "/api/v1/namespaces/default/configmaps/fin")
    t.eq((st, bool(r["metadata"].get("deletionTimestamp"))), (200, True), "delete with finalizer sets deletionTimestamp")
    st, r = k.api("GET", "/api/v1/namespaces/default/configmaps/fin")
    t.eq(st, 200, "object with finalizer still there")
    st, r = k.api("PATCH", "/api/v1/namespaces/default/configmaps/fin",
                  {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}, "application/merge-patch+json")
    t.eq(st, 422, "no new finalizers on a deleting object")
    st, r = k.api("PATCH", "/api/v1/namespaces/default/configmaps/fin",
                  {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    t.eq(st, 200, "remove last finalizer")
    st, r = k.api("GET", "/api/v1/namespaces/default/configmaps/fin")
    t.eq(st, 404, "removing the last finalizer deletes the object")
    st, r = k.api("DELETE", "/api/v1/namespaces/default/configmaps/" + "nothere")
    t.eq(st, 404, "delete missing: 404")
    k.api("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "plain"}})
    st, r = k.api("DELETE", "/api/v1/namespaces/default/configmaps/plain")
    t.eq((st, r.get("kind"), r.get("status"), r["details"]["name"]), (200, "Status", "Success", "plain"),
         "delete without finalizers returns a success Status")


def test_times(t, k):
    L = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    st, r = k.api("POST", L, {"metadata": {"name": "t1"}, "spec": {"holderIdentity": "a",
                                                                  "renewTime": "2024-01-01T00:00:00Z"}})
    t.eq((st, r.get("message")), (400, 'Lease in version "v1" cannot be handled as a Lease: parsing time '
         '"2024-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"'),
         "MicroTime without microseconds: 400 as the real decoder")
    st, r = k.api("POST", L, {"metadata": {"name": "t1"}, "spec": {"holderIdentity": "a",
                                                                  "renewTime": "2024-01-01T02:00:00.123456+02:00"}})
    t.eq((st, r["spec"].get("renewTime")), (201, "2024-01-01T00:00:00.123456Z"), "MicroTime stored in UTC")
    st, r = k.api("PATCH", "/api/v1/nodes/n1/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-01T00:00:00.987Z",
         "lastTransitionTime": "2024-01-01T01:00:00+01:00"}]}}, "application/merge-patch+json")
    c = r["status"]["conditions"][0]
    t.eq((c["lastHeartbeatTime"], c["lastTransitionTime"]), ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
         "Time fields stored at second precision in UTC")
    st, r = k.api("PATCH", "/api/v1/nodes/n1/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "yesterday"}]}}, "application/merge-patch+json")
    t.eq(st, 400, "unparsable Time: 400")


def test_events(t, k):
    ev = {"metadata": {"generateName": "n1."}, "involvedObject": {"kind": "Node", "name": "n1", "apiVersion": "v1"},
          "reason": "Synced", "message": "ok", "type": "Normal", "source": {"component": "cloudnode"},
          "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z", "count": 1}
    st, r = k.api("POST", "/api/v1/namespaces/default/events", ev)
    t.eq(st, 201, "core event about a cluster-scoped object in default")
    st, r = k.api("POST", "/api/v1/namespaces/kube-system/events", ev)
    t.ok(st == 422 and "involvedObject.namespace" in r["message"], "legacy event outside default about a "
         "cluster-scoped object: 422", r)
    st, r = k.api("POST", "/apis/events.k8s.io/v1/namespaces/default/events",
                  {"metadata": {"generateName": "n1."}, "regarding": {"kind": "Node", "name": "n1"},
                   "reason": "Synced", "type": "Normal"})
    t.ok(st == 422 and "eventTime: Required value" in r["message"], "events.k8s.io event needs eventTime", r)


def test_gc(t, k):
    CMS = "/api/v1/namespaces/default/configmaps"

    def owner(name):
        st, o = k.api("POST", CMS, {"metadata": {"name": name}})
        return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": o["metadata"]["uid"]}

    def dep(name, ref):
        return k.api("POST", CMS, {"metadata": {"name": name, "ownerReferences": [ref]}})

    def exists(name):
        return k.api("GET", CMS + "/" + name)[0] == 200
    r1 = owner("own-bg")
    dep("dep-bg", r1)
    st, r = k.api("DELETE", CMS + "/own-bg")
    t.eq(st, 200, "background delete of an owner")
    t.ok(wait_for(lambda: not exists("dep-bg")), "garbage collector deletes the dependent")
    r2 = owner("own-fg")
    k.api("POST", CMS, {"metadata": {"name": "dep-fg", "finalizers": ["example.com/hold"],
                                     "ownerReferences": [dict(r2, blockOwnerDeletion=True)]}})
    st, r = k.api("DELETE", CMS + "/own-fg", {"propagationPolicy": "Foreground"})
    t.ok(st == 200 and "foregroundDeletion" in r["metadata"].get("finalizers", [])
         and r["metadata"].get("deletionTimestamp"), "foreground delete: finalizer and deletionTimestamp", r)
    t.ok(wait_for(lambda: bool(k.api("GET", CMS + "/dep-fg")[1]["metadata"].get("deletionTimestamp"))),
         "dependent is being deleted")
    time.sleep(0.3)
    t.ok(exists("own-fg"), "owner waits for its blocking dependent")
    k.api("PATCH", CMS + "/dep-fg", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    t.ok(wait_for(lambda: not exists("own-fg")), "owner goes once the dependent is gone")
    r3 = owner("own-or")
    dep("dep-or", r3)
    st, r = k.api("DELETE", CMS + "/own-or?propagationPolicy=Orphan")
    t.ok(wait_for(lambda: not exists("own-or")), "orphan delete removes the owner")
    st, d = k.api("GET", CMS + "/dep-or")
    t.eq((st, d["metadata"].get("ownerReferences")), (200, None), "orphaned dependent stays, reference removed")


def test_node_not_ready_taint(t, k):
    # What a real API server and kube-controller-manager do (found against the real server): the
    # admission plugin TaintNodesByCondition adds node.kubernetes.io/not-ready:NoSchedule to a new
    # Node, and the node lifecycle controller removes it once the Node reports Ready.
    st, n = k.api("POST", "/api/v1/nodes", node("nr-1", taints=[{"key": "example.com/a", "effect": "NoExecute"}]))
    t.eq([(x["key"], x["effect"]) for x in n["spec"]["taints"]],
         [("example.com/a", "NoExecute"), ("node.kubernetes.io/not-ready", "NoSchedule")],
         "a new Node gets the not-ready taint after its own")
    st, n = k.api("PATCH", "/api/v1/nodes/nr-1/status", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                  "application/merge-patch+json")
    time.sleep(0.2)
    st, n = k.api("GET", "/api/v1/nodes/nr-1")
    t.eq(len(n["spec"]["taints"]), 2, "it stays while the Node is not Ready")
    k.api("PATCH", "/api/v1/nodes/nr-1/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
          "application/merge-patch+json")
    t.ok(wait_for(lambda: [x["key"] for x in k.api("GET", "/api/v1/nodes/nr-1")[1]["spec"].get("taints") or []]
                  == ["example.com/a"], 10), "it goes once the Node is Ready; the other taint stays")


def test_audit(t, k):
    recs = k.audit()
    t.ok(len(recs) > 20, "audit log has one line per request")
    pat = [r for r in recs if r["verb"] == "patch" and r["resource"] == "nodes" and r["subresource"] == "status"
           and r["name"] == "n1"]
    smp = [p for p in pat if p["contentType"] == "application/strategic-merge-patch+json"]
    t.ok(len(smp) == 2 and all(p["code"] == 200 and p["name"] == "n1" for p in smp)
         and [p["code"] for p in pat if p["contentType"] == "application/merge-patch+json"] == [200, 400],
         "audit records verb, subresource, content type, code", pat)
    keys = {"time", "received", "user", "verb", "resource", "subresource", "namespace", "name", "path", "contentType", "code",
            "duration"}
    t.ok(keys <= set(recs[-1]), "audit record fields", sorted(recs[-1]))
    def ts(text):
        return datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    late = [r for r in recs if ts(r["received"]) > ts(r["time"])
            or abs(ts(r["time"]) - r["duration"] - ts(r["received"])) > 1]
    t.eq(late, [], "each record was received before it was done, about its duration before")
    t.ok(any(r["code"] == 401 and r["user"] is None for r in recs), "401s are audited too")


def test_token_request(t, k):
    """ServiceAccount tokens from the TokenRequest API, as `kubectl create token` gets them."""
    k.api("POST", "/api/v1/namespaces", {"metadata": {"name": "tr"}})
    st, sa = k.api("POST", "/api/v1/namespaces/tr/serviceaccounts", {"metadata": {"name": "n1"}})
    t.eq(st, 201, "ServiceAccount created")
    path = "/api/v1/namespaces/tr/serviceaccounts/%s/token"
    st, r = k.api("POST", path % "n1", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    t.ok(st == 201 and r.get("kind") == "TokenRequest" and r["spec"]["expirationSeconds"] == 3600
         and r["status"]["token"] and r["status"]["expirationTimestamp"].endswith("Z"),
         "TokenRequest: 201, a token, the default hour", r)
    tok = (r.get("status") or {}).get("token")
    st, rev = k.api("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token=tok)
    ui = (rev.get("status") or {}).get("userInfo") or {}
    t.eq((ui.get("username"), sorted(ui.get("groups") or [])),
         ("system:serviceaccount:tr:n1", ["system:authenticated", "system:serviceaccounts",
                                          "system:serviceaccounts:tr"]), "the token is the ServiceAccount")
    st, r = k.api("POST", path % "gone", {"spec": {}})
    t.eq((st, r.get("reason"), r.get("message")), (404, "NotFound", 'serviceaccounts "gone" not found'),
         "no ServiceAccount: 404 as the real registry")
    st, r = k.api("POST", path % "n1", {"spec": {"expirationSeconds": 60}})
    t.ok(st == 422 and "may not specify a duration less than 10 minutes" in r.get("message", ""),
         "less than 10 minutes: 422", r)
    st, _ = k.api("GET", path % "n1")
    t.eq(st, 405, "GET of the token subresource: 405")
    st, r = k.api("POST", path % "n1", {"spec": {}}, token=tok)
    t.eq(st, 403, "a ServiceAccount's token mints no token without RBAC")
    if kubectl_minor() < 24:
        for what in ("kubectl create token works against the fake", "kubectl's --duration=20m is read from protobuf",
                     "kubectl's token authenticates as the ServiceAccount",
                     "kubectl sent the TokenRequest as protobuf, as to a real server"):
            t.skip(what, "kubectl 1.%d has no create token (1.24 and later)" % kubectl_minor())
    else:
        out = k.kubectl("create", "token", "-n", "tr", "n1", "--duration=20m", "-o", "json")
        t.ok(out.returncode == 0, "kubectl create token works against the fake", out.stderr)
        try:
            answer = json.loads(out.stdout)
        except ValueError:
            answer = {}
        t.eq((answer.get("spec") or {}).get("expirationSeconds"), 1200, "kubectl's --duration=20m is read from protobuf")
        kubectl_token = (answer.get("status") or {}).get("token") or ""
        st, rev = k.api("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                        token=kubectl_token or "empty")
        t.eq((st, ((rev.get("status") or {}).get("userInfo") or {}).get("username")), (201, "system:serviceaccount:tr:n1"),
             "kubectl's token authenticates as the ServiceAccount")
        req = [a for a in k.audit() if a.get("subresource") == "token" and a.get("userAgent", "").startswith("kubectl")]
        t.ok(req and req[-1].get("contentType") == "application/vnd.kubernetes.protobuf" and req[-1]["code"] == 201,
             "kubectl sent the TokenRequest as protobuf, as to a real server", req[-1:])
    k.api("DELETE", "/api/v1/namespaces/tr/serviceaccounts/n1")
    st, _ = k.api("GET", "/version", token=tok)
    t.eq(st, 401, "deleting the ServiceAccount revokes its tokens")
    k.api("POST", "/api/v1/namespaces/tr/serviceaccounts", {"metadata": {"name": "n1"}})
    st, _ = k.api("GET", "/version", token=tok)
    t.eq(st, 401, "a ServiceAccount created again under the name does not revive them (new UID)")


def main():
    t = Tap()
    run_with_server(t, (test_auth, test_crud, test_patches, test_status, test_finalizers, test_times, test_events,
                        test_gc, test_node_not_ready_taint, test_audit, test_token_request))
    sys.exit(t.done())


main()
