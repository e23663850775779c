#!/usr/bin/env python3
"""tests/fake-kube-apiserver: answers in the Kubernetes protobuf encoding
(application/vnd.kubernetes.protobuf) for built-in kinds when the client accepts it, as the real
kube-apiserver does: encode/decode round trips of tests/fakekube/proto.py, bytes equal to those
of k8s.io/apimachinery's serializer, GET, LIST with limit/continue, PATCH, WATCH frames, Status
errors, fault injection on protobuf bodies, and JSON (or 406) for custom resources.

With CN_KUBE_SERVER=real the HTTP checks that need no fault injection run against the real
kube-apiserver, whose answers must also re-encode to the same bytes, and one Node is compared
with the fake's."""
import http.client
import json
import os
import shutil
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, os.path.join(HERE, ".."))
from cntap import Tap, wait_for  # noqa: E402
from fakekubeclient import FakeKube, kube_server, server_kind  # noqa: E402
from fakekube import proto  # noqa: E402
import nodegen  # noqa: E402

PB = "application/vnd.kubernetes.protobuf"
ACCEPT = PB + ", application/json"
NODES = "/api/v1/nodes"
CRD_GROUP = "proto.example.com"
WIDGETS = "/apis/%s/v1/namespaces/default/widgets" % CRD_GROUP

# Bytes written by the protobuf serializer of k8s.io/apimachinery v0.32.13 (client-go's scheme,
# runtime/serializer/protobuf) for these objects, decoded from this JSON.
GOLDEN = [
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d",
                                                            "labels": {"b": "2", "a": "1"}},
      "data": {"z": "", "a": "x"}, "binaryData": {"bin": "AAEC", "empty": ""}, "immutable": False},
     "6b3873000a0f0a0276311209436f6e6669674d6170124c0a220a016312001a016422002a003200380042005a060a01611201315a"
     "060a016212013212060a016112017812050a017a12001a0a0a0362696e12030001021a090a05656d707479120020001a002200"),
    ({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": 'nodes "x" not found',
      "reason": "NotFound", "details": {"name": "x", "kind": "nodes", "causes": [{"reason": "r", "field": "f"}],
                                        "retryAfterSeconds": 2}, "code": 404},
     "6b3873000a0c0a0276311206537461747573124f0a060a0012001a0012074661696c7572651a136e6f64657320227822206e6f742066"
     "6f756e6422084e6f74466f756e642a1a0a017812001a056e6f64657322080a017212001a0166280232003094031a002200"),
    ({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
      "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.500000Z",
               "leaseTransitions": 0}},
     "6b3873000a1f0a16636f6f7264696e6174696f6e2e6b38732e696f2f763112054c65617365122a0a110a016c12001a0022002a0032"
     "003800420012150a0168100f220c0880f2d6ca061080cab5ee0128001a002200"),
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
      "spec": {"ports": [{"port": 80, "targetPort": "web"}, {"port": 81, "targetPort": 8081}], "selector": {"a": "b"},
               "type": "ClusterIP", "clusterIPs": ["10.0.0.1"],
               "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}}},
     "6b3873000a0d0a02763112075365727669636512740a110a017312001a0022002a00320038004200125b0a130a0012001850220908"
     "0110001a0377656228000a110a00120018512207080010913f1a00280012060a01611201621a002209436c757374657249503a00"
     "420052005a006000680072050a0308b05492010831302e302e302e311a020a001a002200"),
]

T0 = "2026-11-22T08:00:00Z"


def node_as_served(name, index=0):
    """A realistic Node (nodegen) with what the server adds."""
    n = nodegen.node(name, index)
    n["metadata"].update(uid="6c1f7a8e-0000-4000-8000-%012d" % index, resourceVersion=str(100 + index),
                         creationTimestamp=T0)
    return n


def pod():
    """A Pod as `kubectl get pod -o json` shows one of a Deployment's."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-5d4f8-x2k9q", "generateName": "web-5d4f8-", "namespace": "default",
                     "uid": "0b7c1d2e-1111-4222-8333-444455556666", "resourceVersion": "4711",
                     "creationTimestamp": T0, "labels": {"app": "web", "pod-template-hash": "5d4f8"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8",
                                          "uid": "9a8b7c6d-0000-4000-8000-000000000001", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {
            "volumes": [{"name": "kube-api-access-x", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                            "fieldPath": "metadata.namespace"}}]}}],
                "defaultMode": 420}}, {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}],
            "containers": [{
                "name": "web", "image": "nginx:1.27", "command": ["nginx", "-g", "daemon off;"],
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "prod"},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                      "fieldPath": "status.podIP"}}},
                        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "web", "key": "token",
                                                                         "optional": True}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"},
                              "requests": {"cpu": "100m", "memory": "64Mi"}},
                "volumeMounts": [{"name": "kube-api-access-x", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                                  "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
                                  "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"tcpSocket": {"port": 80}, "timeoutSeconds": 1, "periodSeconds": 10,
                                   "successThreshold": 1, "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "n1",
            "securityContext": {"runAsUser": 1000, "supplementalGroups": [1000, 2000, -1], "fsGroup": 2000},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": "2026-11-22T08:00:05Z"}],
            "hostIP": "10.0.0.2", "hostIPs": [{"ip": "10.0.0.2"}], "podIP": "10.244.1.5",
            "podIPs": [{"ip": "10.244.1.5"}], "startTime": T0,
            "containerStatuses": [{"name": "web", "state": {"running": {"startedAt": "2026-11-22T08:00:03Z"}},
                                   "lastState": {}, "ready": True, "restartCount": 0,
                                   "image": "docker.io/library/nginx:1.27",
                                   "imageID": "docker.io/library/nginx@sha256:" + "ab" * 32,
                                   "containerID": "containerd://" + "cd" * 32, "started": True}],
            "qosClass": "Burstable"}}


def configmap():
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "kube-system", "uid": "5e5e5e5e-0000-4000-8000-000000000002",
                         "resourceVersion": "77", "creationTimestamp": T0, "annotations": {"note": "ünïcode ✓"}},
            "data": {"config.ini": "[Global]\nzone = fsn1\n", "empty": ""}, "binaryData": {"blob": "AAECAwQ="}}


def events():
    core = {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "n1.17f9a2b3c4d5e6f7", "namespace": "default",
                         "uid": "7e7e7e7e-0000-4000-8000-000000000003", "resourceVersion": "90",
                         "creationTimestamp": T0},
            "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1", "apiVersion": "v1"},
            "reason": "Synced", "message": "Node synced successfully", "source": {"component": "cloudnode"},
            "firstTimestamp": T0, "lastTimestamp": T0, "count": 1, "type": "Normal", "eventTime": None,
            "reportingComponent": "cloudnode", "reportingInstance": "host-1"}
    micro = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": "n1.17f9a2b3c4d5e6f8", "namespace": "default",
                          "uid": "7e7e7e7e-0000-4000-8000-000000000004", "resourceVersion": "91",
                          "creationTimestamp": T0},
             "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"}, "reason": "Retrying",
             "message": "rate limited", "source": {}, "firstTimestamp": None, "lastTimestamp": None,
             "type": "Warning", "eventTime": "2026-11-22T08:00:00.123456Z",
             "series": {"count": 3, "lastObservedTime": "2026-11-22T08:01:30.000001Z"}, "action": "Sync",
             "reportingComponent": "cloudnode", "reportingInstance": "host-1"}
    return [core, micro]


def statuses():
    return [{"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": 'Node "n1" is invalid: metadata.labels: Invalid value: "-x": name part must consist of ...',
             "reason": "Invalid", "details": {"name": "n1", "kind": "Node", "causes": [
                 {"reason": "FieldValueInvalid", "message": "Invalid value: \"-x\"", "field": "metadata.labels"}]},
             "code": 422},
            {"kind": "Status", "apiVersion": "v1", "metadata": {"continue": "eyJ2IjoxfQ"}, "status": "Failure",
             "message": "too old resource version: 1 (99)", "reason": "Expired", "code": 410},
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
             "details": {"name": "n1", "kind": "nodes", "uid": "6c1f7a8e-0000-4000-8000-000000000000"}}]


def envelope(body):
    """(field numbers of the Unknown in order, TypeMeta {apiVersion, kind}, raw, contentEncoding,
    contentType) of a protobuf answer; None without the magic."""
    if body[:4] != proto.MAGIC:
        return None
    nums, tm, raw, enc, ctype = [], {}, None, None, None
    for num, _, v in proto.fields(body[4:]):
        nums.append(num)
        if num == 1:
            tm = {("apiVersion" if n == 1 else "kind"): x.decode() for n, _, x in proto.fields(v)}
        elif num == 2:
            raw = v
        elif num == 3:
            enc = v
        elif num == 4:
            ctype = v
    return nums, tm, raw, enc, ctype


def ascending(raw):
    nums = [num for num, _, _ in proto.fields(raw)]
    return nums == sorted(nums)


# --- encoding, without a server ---------------------------------------------------------------

def test_round_trips(t):
    objs = [("a realistic Node (nodegen)", node_as_served("n1", 1)), ("a Pod", pod()), ("a ConfigMap", configmap())]
    objs += [("an Event (%s)" % w, e) for w, e in zip(("core times", "MicroTime, series"), events())]
    objs += [("a Status (%s)" % w, s) for w, s in zip(("Invalid, causes", "Expired, continue", "Success"), statuses())]
    items = [{k: v for k, v in node_as_served("n%d" % i, i).items() if k not in ("kind", "apiVersion")}
             for i in range(3)]
    objs.append(("a NodeList (continue, remainingItemCount)",
                 {"kind": "NodeList", "apiVersion": "v1",
                  "metadata": {"resourceVersion": "120", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",
                               "remainingItemCount": 7}, "items": items}))
    for what, obj in objs:
        body = proto.encode_object(obj)
        t.eq(proto.decode(body) if body else None, obj, "round trip: %s decodes to what was encoded" % what)
        t.ok(body is not None and proto.encode_object(proto.decode(body)) == body,
             "round trip: %s re-encodes to the same bytes" % what)
        env = envelope(body or b"")
        t.ok(env is not None and env[0] == [1, 2, 3, 4] and env[1] == {"apiVersion": obj["apiVersion"],
                                                                       "kind": obj["kind"]}
             and env[3] == b"" and env[4] == b"" and ascending(env[2]),
             "%s: magic, Unknown {typeMeta, raw, contentEncoding \"\", contentType \"\"}, fields ascending" % what,
             env and env[:2])
    for obj, want in GOLDEN:
        t.eq(proto.encode_object(obj).hex(), want, "%s: the bytes k8s.io/apimachinery writes" % obj["kind"])

    n = node_as_served("n1", 1)
    raw = envelope(proto.encode_object(n))[2]
    md = next(v for num, _, v in proto.fields(raw) if num == 1)
    mfields = {num: v for num, _, v in proto.fields(md)}
    t.eq((mfields.get(2), mfields.get(3), mfields.get(7), 9 in mfields, 10 in mfields), (b"", b"", 0, False, False),
         "ObjectMeta: empty generateName/namespace and zero generation written, nil pointers not")
    t.eq(mfields.get(8), b"\x08" + proto._uvarint(1795334400) + b"\x10\x00",
         "creationTimestamp: Time {seconds, nanos 0}")
    labels = [dict((n2, x) for n2, _, x in proto.fields(v))[1].decode() for num, _, v in proto.fields(md) if num == 11]
    t.eq(labels, sorted(n["metadata"]["labels"]), "labels: one entry message per key, in sorted key order")
    sc = proto.encode_message("k8s.io.api.core.v1.PodSecurityContext", {"supplementalGroups": [1, -1]})
    t.eq(sc, b"\x20\x01\x20" + b"\xff" * 9 + b"\x01", "repeated int64: unpacked (proto2), negative as 10 bytes")
    probe = list(proto.fields(proto.encode_message("k8s.io.api.core.v1.Probe",
                                                    {"httpGet": {"port": 8080}, "periodSeconds": 10})))
    t.eq([(num, [n2 for n2, _, _ in proto.fields(v)] if num == 1 else v) for num, _, v in probe][:2],
         [(1, [2]), (2, 0)], "a Probe's inline ProbeHandler is field 1 (holding httpGet), its own members follow")
    t.eq(proto.decode(proto.encode_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                                           "notAField": 1, "data": {"a": "b"}})),
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "creationTimestamp": None},
          "data": {"a": "b"}}, "a member without a field is dropped, as Go's typed decode does")
    t.eq([proto.encode_object({"apiVersion": av, "kind": k, "metadata": {"name": "w"}})
          for av, k in (("%s/v1" % CRD_GROUP, "Widget"), ("apps.example.com/v1", "Deployment"))], [None, None],
         "custom resources (even one named like a built-in kind) have no encoding")
    frame = proto.watch_frame("MODIFIED", configmap())
    msg = frame[4:]
    t.ok(struct.unpack(">I", frame[:4])[0] == len(msg) and proto.read_frames(frame) == [msg]
         and proto.decode_event(msg) == ("MODIFIED", configmap()),
         "watch frame: 4-byte big-endian length, WatchEvent {type, RawExtension {raw = the enveloped object}}")


# --- against a server --------------------------------------------------------------------------

def request(k, method, path, accept=ACCEPT, body=None, content_type=None):
    return k.request(method, path, body, content_type, headers={"Accept": accept})


def consistent(k, path):
    """(decoded protobuf answer, JSON answer, raw protobuf) of one GET taken at the same
    resourceVersion (the server's own controllers may write in between)."""
    for _ in range(50):
        st, h, body = request(k, "GET", path)
        _, j = k.api("GET", path)
        d = proto.decode(body) if st == 200 else None
        if d is not None and d["metadata"].get("resourceVersion") == j["metadata"].get("resourceVersion"):
            return d, j, body, h
        time.sleep(0.1)
    return d, j, body, h


def raw_watch(k, path, accept=ACCEPT, timeout=20):
    """(status, Content-Type, chunk payloads) of a watch read until the stream ends."""
    c = k._conn_as(None, timeout)
    h = {"Accept": accept}
    h.update(k._authorization(getattr(k, "_admin_token", None)))
    try:
        c.request("GET", path, headers=h)
        r = c.getresponse()
        ctype = r.getheader("Content-Type")
        if r.status != 200:
            return r.status, ctype, [r.read()]
        chunks = []
        while True:
            line = r.fp.readline()
            if not line:
                break
            n = int(line.split(b";")[0].strip(), 16)
            if n == 0:
                break
            chunks.append(r.fp.read(n))
            r.fp.readline()
        return r.status, ctype, chunks
    finally:
        c.close()


def setup_nodes(k):
    for i in range(3):
        st, r = k.api("POST", NODES, nodegen.node("pb-%d" % i, i))
        if st != 201:
            raise RuntimeError("creating a Node: %s %s" % (st, r))


def test_get(t, k):
    d, j, body, h = consistent(k, NODES + "/pb-0")
    t.eq(h.get("Content-Type"), PB, "GET Node: Content-Type application/vnd.kubernetes.protobuf")
    env = envelope(body)
    t.ok(env is not None and env[0] == [1, 2, 3, 4] and env[1] == {"apiVersion": "v1", "kind": "Node"}
         and env[3] == b"" and env[4] == b"", "GET Node: magic and Unknown {v1 Node, raw, \"\", \"\"}",
         env and env[:2])
    t.eq(d, j, "GET Node: the protobuf answer decodes to the JSON answer")
    t.ok(proto.encode_object(d) == body, "GET Node: re-encoding the decoded object gives the server's bytes")
    st, h, body = request(k, "GET", NODES + "/absent")
    t.eq((st, h.get("Content-Type")), (404, PB), "404: a Status in protobuf")
    s = proto.decode(body) if h.get("Content-Type") == PB else {}
    t.eq((s.get("kind"), s.get("apiVersion"), s.get("status"), s.get("reason"), s.get("code"),
          s.get("message"), s.get("details")),
         ("Status", "v1", "Failure", "NotFound", 404, 'nodes "absent" not found', {"name": "absent", "kind": "nodes"}),
         "404: the Status decodes as the JSON one reads")


def test_list(t, k):
    st, h, body = request(k, "GET", NODES + "?limit=1")
    d = proto.decode(body) if h.get("Content-Type") == PB else {}
    env = envelope(body) or [None, None]
    t.eq((st, h.get("Content-Type"), env[1]), (200, PB, {"apiVersion": "v1", "kind": "NodeList"}),
         "LIST limit=1: a v1 NodeList in protobuf")
    md = d.get("metadata") or {}
    _, all_nodes = k.api("GET", NODES)
    names = [o["metadata"]["name"] for o in all_nodes["items"]]
    t.ok(len(d.get("items") or []) == 1 and md.get("continue") and md.get("remainingItemCount") == len(names) - 1,
         "LIST limit=1: one item, a continue token and remainingItemCount", md)
    _, j = k.api("GET", NODES + "?limit=1")
    t.eq(d.get("items"), j["items"], "LIST limit=1: the same item as in JSON")
    seen = [o["metadata"]["name"] for o in d.get("items") or []]
    pages = 1
    cont = md.get("continue")
    while cont and pages < 20:
        st, h, body = request(k, "GET", NODES + "?limit=1&continue=" + cont)
        page = proto.decode(body) if st == 200 else {}
        seen += [o["metadata"]["name"] for o in page.get("items") or []]
        cont = (page.get("metadata") or {}).get("continue")
        pages += 1
    t.eq(seen, names, "LIST: following the continue tokens in protobuf gives every Node once, in order")
    for _ in range(50):
        st, h, body = request(k, "GET", NODES)
        d = proto.decode(body)
        _, j = k.api("GET", NODES)
        if d["metadata"]["resourceVersion"] == j["metadata"]["resourceVersion"]:
            break
    t.eq(d, j, "LIST: the protobuf NodeList decodes to the JSON one")
    t.ok(proto.encode_object(d) == body, "LIST: re-encoding gives the server's bytes")


def test_patch(t, k):
    st, h, body = request(k, "PATCH", NODES + "/pb-1", body={"metadata": {"labels": {"proto": "yes"}}},
                          content_type="application/merge-patch+json")
    d = proto.decode(body) if h.get("Content-Type") == PB else {}
    t.eq((st, h.get("Content-Type"), ((d.get("metadata") or {}).get("labels") or {}).get("proto")), (200, PB, "yes"),
         "PATCH: the patched Node answered in protobuf")
    _, j = k.api("GET", NODES + "/pb-1")
    if j["metadata"]["resourceVersion"] == d["metadata"]["resourceVersion"]:
        t.eq(d, j, "PATCH: the answer decodes to the Node as JSON reads it")
    else:
        t.skip("PATCH: the answer decodes to the Node as JSON reads it", "written again since")
    st, h, body = request(k, "PATCH", NODES + "/pb-1", body={"metadata": {"labels": {"-bad": "x"}}},
                          content_type="application/merge-patch+json")
    s = proto.decode(body) if h.get("Content-Type") == PB else {}
    _, sj = k.api("PATCH", NODES + "/pb-1", {"metadata": {"labels": {"-bad": "x"}}}, "application/merge-patch+json")
    t.eq((st, s), (422, sj), "422: the protobuf Status decodes to the JSON one")


def test_watch(t, k, fake):
    _, j = k.api("GET", NODES + "/pb-2")
    rv = j["metadata"]["resourceVersion"]
    for v in ("1", "2"):
        k.api("PATCH", NODES + "/pb-2", {"metadata": {"labels": {"step": v}}}, "application/merge-patch+json")
    path = NODES + "?watch=1&fieldSelector=metadata.name%%3Dpb-2&resourceVersion=%s&timeoutSeconds=2" % rv
    st, ctype, chunks = raw_watch(k, path)
    t.eq((st, ctype), (200, PB + ";stream=watch"),
         "WATCH: Content-Type application/vnd.kubernetes.protobuf;stream=watch")
    try:
        frames = proto.read_frames(b"".join(chunks))
    except ValueError as e:
        frames = []
        t.diag("frames: %s" % e)
    if fake:
        t.ok(chunks and all(proto.read_frames(c) == [c[4:]] for c in chunks),
             "WATCH: one frame per chunk (length and WatchEvent written together)")
    evs = [proto.decode_event(f) for f in frames]
    jevs = list(k.watch(path, timeout=10))
    t.eq([(e, (o or {}).get("metadata", {}).get("labels", {}).get("step")) for e, o in evs],
         [("MODIFIED", "1"), ("MODIFIED", "2")], "WATCH: the events from the resourceVersion, in protobuf")
    t.eq(evs, jevs, "WATCH: each event decodes to the JSON watch's event")
    raws = [next(v2 for n2, _, v2 in proto.fields(v) if n2 == 1) for f in frames for num, _, v in proto.fields(f)
            if num == 2]
    t.ok(raws and all(envelope(r)[1] == {"apiVersion": "v1", "kind": "Node"}
                      and proto.encode_object(proto.decode(r)) == r for r in raws),
         "WATCH: each object is enveloped (magic, Unknown) and re-encodes to its bytes")


def test_watch_events(t, k):
    """BOOKMARK and ERROR events in protobuf (fault injection: the fake only)."""
    k.inject({"action": "bookmark", "interval": 0.3, "resource": "nodes", "verb": "watch"})
    st, ctype, chunks = raw_watch(k, NODES + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=2")
    evs = [proto.decode_event(f) for f in proto.read_frames(b"".join(chunks))]
    bms = [o for e, o in evs if e == "BOOKMARK"]
    t.ok(bms and bms[-1]["kind"] == "Node" and bms[-1]["apiVersion"] == "v1"
         and int(bms[-1]["metadata"]["resourceVersion"]) > 0, "BOOKMARK: a Node carrying the resourceVersion", evs[-1:])
    k.inject({"action": "gone", "resource": "nodes", "verb": "watch"})
    st, ctype, chunks = raw_watch(k, NODES + "?watch=1&resourceVersion=1")
    evs = [proto.decode_event(f) for f in proto.read_frames(b"".join(chunks))]
    t.ok(ctype == PB + ";stream=watch" and len(evs) == 1 and evs[0][0] == "ERROR"
         and evs[0][1].get("kind") == "Status" and evs[0][1].get("code") == 410
         and evs[0][1].get("reason") == "Expired", "ERROR: a 410 Expired Status in a protobuf frame", evs)
    k.inject({"action": "close-watch", "afterEvents": 1, "resource": "nodes", "verb": "watch"})
    st, ctype, chunks = raw_watch(k, NODES + "?watch=1")
    evs = [proto.decode_event(f) for f in proto.read_frames(b"".join(chunks))]
    t.eq([e for e, _ in evs], ["ADDED"], "close-watch after 1 event: one protobuf frame, then the end")


def test_faults(t, k):
    _, _, whole = request(k, "GET", NODES + "/pb-0")
    k.inject({"action": "cut-body", "afterBytes": 40, "resource": "nodes", "name": "pb-0"})
    c = k._conn_as(None)
    got = None
    try:
        c.request("GET", NODES + "/pb-0", headers={"Accept": ACCEPT})
        r = c.getresponse()
        ctype, length = r.getheader("Content-Type"), r.getheader("Content-Length")
        try:
            got = r.read()
        except http.client.IncompleteRead as e:
            got = e.partial
        except OSError:
            got = b""
    finally:
        c.close()
    t.ok(ctype == PB and length == str(len(whole)) and got == whole[:40],
         "cut-body: the protobuf answer announced whole, its first 40 bytes sent", (ctype, length, len(got or b"")))
    k.inject({"action": "body", "body": "garbage", "resource": "nodes", "name": "pb-0"})
    st, h, body = request(k, "GET", NODES + "/pb-0")
    t.eq((st, h.get("Content-Type"), body), (200, PB, b"garbage"), "body: the given text instead of the protobuf")
    k.inject({"code": 503, "retryAfter": 2, "resource": "nodes", "name": "pb-0"})
    st, h, body = request(k, "GET", NODES + "/pb-0")
    s = proto.decode(body) if h.get("Content-Type") == PB else {}
    t.eq((st, h.get("Retry-After"), s.get("code"), (s.get("details") or {}).get("retryAfterSeconds")),
         (503, "2", 503, 2), "an injected 503: a protobuf Status with retryAfterSeconds")


def test_negotiation(t, k):
    for accept, want, what in (
            ("*/*", "application/json", "*/* is JSON"),
            ("application/json", "application/json", "JSON only: JSON"),
            (PB, PB, "protobuf only: protobuf"),
            ("application/json;q=0.5, " + PB, PB, "protobuf with the higher q"),
            (PB + ";q=0.5, application/json", "application/json", "JSON with the higher q"),
            ("application/*, " + PB, PB, "a type without wildcard before application/*"),
            ("application/json;as=Table;v=v1;g=meta.k8s.io, " + ACCEPT, "application/json",
             "as=Table stays a JSON Table")):
        st, h, body = request(k, "GET", NODES + "/pb-0", accept=accept)
        t.eq((st, h.get("Content-Type", "").split(";")[0]), (200, want), "Accept %s: %s" % (accept, what))


def test_custom_resource(t, k):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets." + CRD_GROUP},
           "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    st, r = k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    t.ok(st == 201, "CRD created", r)
    wait_for(lambda: k.api("GET", WIDGETS)[0] == 200, 30)
    obj = {"apiVersion": CRD_GROUP + "/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}
    ok = wait_for(lambda: k.api("POST", WIDGETS, obj)[0] == 201, 30)
    t.ok(ok, "custom resource created")
    st, h, body = request(k, "GET", WIDGETS + "/w1")
    _, j = k.api("GET", WIDGETS + "/w1")
    t.eq((st, h.get("Content-Type"), json.loads(body) if st == 200 else None), (200, "application/json", j),
         "custom resource, Accept protobuf then JSON: JSON")
    st, h, body = request(k, "GET", WIDGETS)
    t.eq((st, h.get("Content-Type")), (200, "application/json"), "custom resource LIST: JSON")
    st, ctype, chunks = raw_watch(k, WIDGETS + "?watch=1&timeoutSeconds=1")
    t.ok(st == 200 and ctype == "application/json" and json.loads(b"".join(chunks).splitlines()[0])["type"] == "ADDED",
         "custom resource WATCH: JSON events", (st, ctype))
    st, h, body = request(k, "GET", WIDGETS + "/absent")
    s = proto.decode(body) if h.get("Content-Type") == PB else {}
    t.eq((st, h.get("Content-Type"), s.get("reason")), (404, PB, "NotFound"),
         "custom resource 404: the Status in protobuf all the same, as on the real server")
    for what, method, path in (("GET", "GET", WIDGETS + "/w1"), ("LIST", "GET", WIDGETS),
                               ("WATCH", "GET", WIDGETS + "?watch=1&timeoutSeconds=1")):
        st, h, body = request(k, method, path, accept=PB)
        s = proto.decode(body) if h.get("Content-Type") == PB else {}
        t.eq((st, h.get("Content-Type"), s.get("kind"), s.get("reason"), s.get("message")),
             (406, PB, "Status", "NotAcceptable", "only the following media types are accepted: "
              "application/json, application/yaml, application/vnd.kubernetes.protobuf"),
             "custom resource %s, Accept protobuf only: 406 NotAcceptable (a protobuf Status)" % what)
    st, h, body = request(k, "POST", WIDGETS, accept=PB,
                          body=dict(obj, metadata={"name": "w2"}))
    st2, _ = k.api("GET", WIDGETS + "/w2")
    t.eq((st, st2), (406, 404), "a create that cannot be answered is refused before it is stored")


def common(a, b):
    """The parts of a and b that both have, as (a', b')."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [x for x in a if x in b]
        pairs = [common(a[x], b[x]) for x in keys]
        return dict(zip(keys, (p[0] for p in pairs))), dict(zip(keys, (p[1] for p in pairs)))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = [common(x, y) for x, y in zip(a, b)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return a, b


def comparable(node):
    """A decoded Node without what differs between two servers by nature."""
    node = json.loads(json.dumps(node))
    md = node["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        md.pop(key, None)
    spec = node.get("spec") or {}
    spec["taints"] = [x for x in spec.get("taints") or [] if x.get("key") != "node.kubernetes.io/not-ready"]
    return node


def test_against_fake(t, k):
    """The same Node from the real server and from the fake, both in protobuf."""
    tmp = tempfile.mkdtemp(prefix="fakekube-pb-")
    try:
        with FakeKube(os.path.join(tmp, "fake")) as f:
            got = {}
            for name, server in (("real", k), ("fake", f)):
                st, r = server.api("POST", NODES, nodegen.node("cmp-0", 7))
                st, h, body = request(server, "GET", NODES + "/cmp-0")
                got[name] = (h.get("Content-Type"), body)
            t.eq((got["real"][0], got["fake"][0]), (PB, PB), "real and fake: both answer the Node in protobuf")
            real, fake = (proto.decode(got[n][1]) for n in ("real", "fake"))
            a, b = common(comparable(real), comparable(fake))
            t.eq(b, a, "real and fake: the decoded Nodes agree on every field both have")
            t.eq(sorted(set(comparable(real)) ^ set(comparable(fake))), [], "real and fake: the same top-level fields")
            t.ok(proto.encode_object(real) == got["real"][1],
                 "real: proto.py re-encodes the real server's Node to its bytes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    tmp = tempfile.mkdtemp(prefix="fakekube-pb-")
    k = kube_server(os.path.join(tmp, "kube"))
    t = Tap()
    try:
        t.run(test_round_trips)
        with k:
            setup_nodes(k)
            fake = k.FAULT_INJECTION
            t.run(test_get, k)
            t.run(test_list, k)
            t.run(test_patch, k)
            t.run(test_watch, k, fake)
            if fake:
                t.run(test_watch_events, k)
                t.run(test_faults, k)
            t.run(test_negotiation, k)
            t.run(test_custom_resource, k)
            if server_kind() == "real":
                t.run(test_against_fake, k)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(t.done())


main()
