#!/usr/bin/env python3
"""lib/kube/kube-*: the C Kubernetes client against tests/fake-kube-apiserver, through the test driver
tests/kube-client-driver (one client operation per run, results as JSON lines).

Covers: client certificate and bearer token auth, tokenFile rotation, errors from Status objects,
list pagination, merge patch with a stale resourceVersion, JSON patch, status subresource,
Retry-After on 429/503, watch resume from a resourceVersion, informer re-watch / 410 re-list /
dropped connections / field selector, leader election hand-over, Event aggregation."""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402
from fakekubeclient import FakeKube, state_dir  # noqa: E402

DRIVER = build("tests", "kube-client-driver")


def drive(k, *args, kubeconfig=None, extra=(), env=None, timeout=60):
    """Runs the driver; returns (exit code, list of JSON lines)."""
    cmd = [DRIVER, "--kubeconfig", kubeconfig or k.kubeconfig, *extra, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return p.returncode, lines, p.stderr


def request_counts(lines):
    """The driver's request counter, {(verb, code): count}, from its metrics text."""
    text = next(x["text"] for x in lines if x["what"] == "metrics")
    counts = {}
    for m in re.finditer(r'^rest_client_requests_total\{verb="([^"]*)",code="([^"]*)"\} (\d+)$', text, re.M):
        counts[(m.group(1), m.group(2))] = int(m.group(3))
    return counts


def result(lines):
    return next((x for x in lines if x["what"] in ("result", "watch-end")), None)


class Proc:
    """A long-running driver whose JSON lines are read (by a thread) as they come."""

    def __init__(self, k, *args, kubeconfig=None, env=None):
        self.p = subprocess.Popen([DRIVER, "--kubeconfig", kubeconfig or k.kubeconfig, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=dict(os.environ, **(env or {})))
        self.lines = []
        self.q = queue.Queue()
        self.stderr = ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._read_err, daemon=True)
        self.err_reader.start()

    def _read(self):
        for line in self.p.stdout:
            if line.strip():
                self.q.put(json.loads(line))
        self.q.put(None)

    def _read_err(self):
        self.stderr = self.p.stderr.read()

    def wait_for(self, pred, timeout=15):
        """Returns the first line not returned before for which pred is true, or None on timeout."""
        for x in self.lines:
            if not x.get("_seen") and pred(x):
                x["_seen"] = True
                return x
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                x = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if x is None:
                self.q.put(None)
                break
            self.lines.append(x)
            if pred(x):
                x["_seen"] = True
                return x
        return None

    def send(self, s):
        self.p.stdin.write(s)
        self.p.stdin.flush()

    def stop(self, sig=None):
        if sig and self.p.poll() is None:
            self.p.send_signal(sig)
        if self.p.stdin:
            self.p.stdin.close()
            self.p.stdin = None
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.reader.join(5)
        self.err_reader.join(5)
        while True:
            try:
                x = self.q.get_nowait()
            except queue.Empty:
                break
            if x is not None:
                self.lines.append(x)
        return self.p.returncode


def ts(s):
    return datetime.strptime(s.rstrip("Z")[:26], "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def cm(name, labels=None, data=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


def ensure_ns(k, ns):
    k.api("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})


def audit(k):
    """The audit log once the server has written the records of requests already answered (it
    writes a record after sending the response)."""
    prev = None
    for _ in range(50):
        cur = k.audit()
        if prev is not None and len(cur) == len(prev):
            return cur
        prev = cur
        time.sleep(0.1)
    return prev


def audit_for(k, **match):
    return [a for a in audit(k) if all(a.get(key) == v for key, v in match.items())]


# --- tests -----------------------------------------------------------------------------------


def test_get_auth_and_errors(t, k):
    rc, lines, _ = drive(k, "get", "namespaces", "-", "default")
    r = result(lines)
    t.ok(rc == 0 and r and r["status"] == 200 and r["object"]["metadata"]["name"] == "default",
         "GET with the admin client certificate", lines)
    a = audit_for(k, verb="get", resource="namespaces", name="default")[-1]
    t.eq(a["userAgent"], "cloudnode-test-driver/0.1.0", "User-Agent is cloudnode-<component>/<version>")
    t.ok("system:masters" in a["groups"], "client certificate identity reached the server", a)
    t.eq(request_counts(lines), {("GET", "200"): 1}, "per-request counter")

    rc, lines, _ = drive(k, "get", "namespaces", "-", "no-such-ns")
    r = result(lines)
    t.ok(rc == 1 and r["errno"] == "ENOENT" and r["status"] == 404 and r["reason"] == "NotFound"
         and "no-such-ns" in r["message"], "404 becomes ENOENT with the Status message", r)

    drive(k, "create", "configmaps", "default", json.dumps(cm("dup")))
    rc, lines, _ = drive(k, "create", "configmaps", "default", json.dumps(cm("dup")))
    r = result(lines)
    t.ok(r["errno"] == "EEXIST" and r["reason"] == "AlreadyExists", "409 AlreadyExists becomes EEXIST", r)

    nobody = k.kubeconfig_for("nobody")
    rc, lines, stderr = drive(k, "get", "namespaces", "-", "default", kubeconfig=nobody, env={"CN_DEBUG": "1"})
    r = result(lines)
    t.ok(r["errno"] == "EACCES" and r["status"] == 403, "403 Forbidden becomes EACCES (bearer token user)", r)
    with open(nobody) as f:
        token = json.load(f)["users"][0]["user"]["token"]
    t.ok(token not in stderr and token not in json.dumps(lines), "the bearer token appears in no output or debug log")
    t.eq(audit_for(k, verb="get", resource="namespaces")[-1]["user"], "nobody", "bearer token identity")

    with open(nobody) as f:
        cfg = json.load(f)
    cfg["users"][0]["user"]["token"] = "not-a-valid-token"
    bad = os.path.join(k.state_dir, "bad-token.kubeconfig")
    with open(bad, "w") as f:
        json.dump(cfg, f)
    rc, lines, _ = drive(k, "get", "namespaces", "-", "default", kubeconfig=bad)
    r = result(lines)
    t.ok(r["errno"] == "EPERM" and r["status"] == 401, "401 Unauthorized becomes EPERM", r)

    rc, lines, _ = drive(k, "cert-check")
    t.ok(rc == 0 and lines[0]["error"] == 0 and lines[0]["notAfter"] > time.time() * 1e6,
         "admin client certificate checks out (key matches, not expired)", lines)


def test_transport_errors(t, k):
    with open(k.kubeconfig) as f:
        cfg = json.load(f)
    # A CA that did not sign the server's certificate: verification fails, nothing is retried.
    wrong = json.loads(json.dumps(cfg))
    wrong["clusters"][0]["cluster"]["certificate-authority-data"] = cfg["users"][0]["user"]["client-certificate-data"]
    p = os.path.join(k.state_dir, "wrong-ca.kubeconfig")
    with open(p, "w") as f:
        json.dump(wrong, f)
    before = len(audit(k))
    rc, lines, _ = drive(k, "get", "namespaces", "-", "default", kubeconfig=p)
    r = result(lines)
    t.ok(rc == 1 and r["errno"] == "EBADE" and r["status"] == 0, "server certificate not signed by the CA: EBADE", r)
    t.eq(len(audit(k)) - before, 0, "no request reached the server without verification")

    # Nobody listening: connection refused, retried, then reported. The port stays bound (and not
    # listening) for the whole case, so that no one else can take it meanwhile.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    closed = json.loads(json.dumps(cfg))
    closed["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:%d" % port
    p = os.path.join(k.state_dir, "closed.kubeconfig")
    with open(p, "w") as f:
        json.dump(closed, f)
    rc, lines, _ = drive(k, "get", "namespaces", "-", "default", kubeconfig=p, extra=["--max-retries", "2"])
    r = result(lines)
    t.ok(rc == 1 and r["errno"] == "ECONNREFUSED", "connection refused is reported after retries", r)
    t.eq(request_counts(lines), {("GET", "<error>"): 3}, "the refused connection was tried three times")
    s.close()

    # A kubeconfig problem is one clear line, not a request.
    broken = json.loads(json.dumps(cfg))
    broken["current-context"] = "missing"
    p = os.path.join(k.state_dir, "broken.kubeconfig")
    with open(p, "w") as f:
        json.dump(broken, f)
    rc, lines, _ = drive(k, "get", "namespaces", "-", "default", kubeconfig=p)
    t.ok(rc == 1 and lines[0]["what"] == "config-error" and 'context "missing" not found' in lines[0]["message"],
         "missing context reported by the loader", lines)


def test_list_pagination(t, k):
    ensure_ns(k, "pg")
    names = ["p%d" % i for i in range(7)]
    for n in names:
        k.api("POST", "/api/v1/namespaces/pg/configmaps", cm(n, {"set": "pg"}))
    k.api("POST", "/api/v1/namespaces/pg/configmaps", cm("other", {"set": "no"}))
    before = len(audit(k))
    rc, lines, _ = drive(k, "list-all", "configmaps", "pg", "3", "set=pg")
    r = result(lines)
    got = sorted(i["metadata"]["name"] for i in r["object"]["items"])
    t.eq(got, names, "list_all returns every item across pages, label selector applied")
    t.ok("continue" not in r["object"]["metadata"] and r["object"]["metadata"].get("resourceVersion"),
         "merged list has the snapshot resourceVersion and no continue token", r["object"]["metadata"])
    lists = [a for a in audit(k)[before:] if a["verb"] == "list"]
    t.eq(len(lists), 3, "7 items with limit=3 take 3 requests")
    t.ok(all("limit=3" in a["query"] and "labelSelector=set%3Dpg" in a["query"] for a in lists)
         and sum("continue=" in a["query"] for a in lists) == 2, "pages carry limit, selector and continue",
         [a["query"] for a in lists])

    # Client-side rate limit: qps 2, burst 1 spaces the 7 one-item pages by 0.5 s.
    before = len(audit(k))
    rc, lines, _ = drive(k, "list-all", "configmaps", "pg", "1", "set=pg", extra=["--qps", "2", "--burst", "1"])
    t.eq(len(result(lines)["object"]["items"]), 7, "one-item pages")
    # When each request arrived.
    starts = [ts(a["received"]) for a in audit(k)[before:] if a["verb"] == "list"]
    gaps = [round(starts[i + 1] - starts[i], 2) for i in range(len(starts) - 1)]
    # The limiter guarantees the pace over the whole run (6 intervals of 0.5 s); one gap seen by a
    # busy server can be short when the request before it was held up on the way in, so single
    # gaps are not asserted.
    t.ok(len(starts) == 7 and starts[-1] - starts[0] >= 2.5,
         "--kube-api-qps 2 --kube-api-burst 1 spaces requests (gaps %s)" % gaps)

    rc, lines, _ = drive(k, "list", "configmaps", "pg", "3")
    r = result(lines)
    t.ok(len(r["object"]["items"]) == 3 and r["object"]["metadata"].get("continue"), "single page has a continue token")
    rc, lines, _ = drive(k, "list", "configmaps", "pg", "3", r["object"]["metadata"]["continue"])
    r2 = result(lines)
    t.ok(len(r2["object"]["items"]) == 3 and r2["object"]["items"][0]["metadata"]["name"] !=
         r["object"]["items"][0]["metadata"]["name"], "continue token fetches the next page")


def test_list_bad_pages(t, k):
    """Pages are read as they stream in: a page cut short is fetched again without its items counted
    twice; garbage and a page over the size cap are one error each."""
    ensure_ns(k, "pg")  # the seven configmaps of test_list_pagination
    names = ["p%d" % i for i in range(7)]
    k.inject({"verb": "list", "namespace": "pg", "action": "cut-body", "afterBytes": 300, "skip": 1})
    before = len(audit(k))
    rc, lines, _ = drive(k, "list-all", "configmaps", "pg", "3", "set=pg")
    r = result(lines)
    t.ok(rc == 0 and sorted(i["metadata"]["name"] for i in r["object"]["items"]) == names,
         "a page cut short is fetched again; every item once", r)
    lists = [(a["code"], bool(a.get("responseDropped"))) for a in audit(k)[before:] if a["verb"] == "list"]
    t.eq(lists, [(200, False), (200, True), (200, False), (200, False)], "the cut page was requested again")

    for body, what in (('{"kind":"ConfigMapList","items":[{"metadata":{"name":"x"}},{"metadata":', "a page cut in JSON"),
                       ("<html>oops</html>", "an HTML page"),
                       ('{"items":[{"metadata":{"name":"x"}}]} {"items":[]}', "two Lists in one answer")):
        k.inject({"verb": "list", "namespace": "pg", "action": "body", "body": body})
        rc, lines, _ = drive(k, "list-all", "configmaps", "pg", "3")
        r = result(lines)
        t.ok(rc == 1 and r["errno"] == "EBADMSG" and r["message"] == "response is not valid JSON"
             and not r.get("object"), "%s: one error, no List" % what, r)

    rc, lines, _ = drive(k, "list-all", "configmaps", "pg", "7", extra=["--max-response", "1000"])
    r = result(lines)
    t.ok(rc == 1 and r["errno"] == "EFBIG" and r["message"] == "list page too large" and not r.get("object"),
         "a page over the size cap: one error, no List", r)
    rc, lines, _ = drive(k, "list-all", "configmaps", "pg", "1", extra=["--max-response", "1000"])
    t.eq(len(result(lines)["object"]["items"]), 8, "the same items in pages under the cap")


def test_writes(t, k):
    rc, lines, _ = drive(k, "create", "configmaps", "default", json.dumps(cm("w", data={"a": "1"})))
    rv = result(lines)["object"]["metadata"]["resourceVersion"]
    k.api("PATCH", "/api/v1/namespaces/default/configmaps/w", {"data": {"a": "2"}}, "application/merge-patch+json")

    rc, lines, _ = drive(k, "patch", "configmaps", "default", "w", "merge",
                         json.dumps({"metadata": {"resourceVersion": rv}, "data": {"a": "3"}}))
    r = result(lines)
    t.ok(r["errno"] == "ESTALE" and r["status"] == 409 and r["reason"] == "Conflict",
         "merge patch with a stale resourceVersion fails with the conflict error", r)
    a = audit_for(k, verb="patch", name="w")[-1]
    t.eq(a["contentType"], "application/merge-patch+json", "merge patch content type")
    st, cur = k.api("GET", "/api/v1/namespaces/default/configmaps/w")
    t.eq(cur["data"]["a"], "2", "the conflicting patch changed nothing")

    rc, lines, _ = drive(k, "patch", "configmaps", "default", "w", "merge",
                         json.dumps({"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]},
                                     "data": {"a": "3"}}))
    t.ok(rc == 0 and result(lines)["object"]["data"]["a"] == "3", "merge patch with the current resourceVersion")

    rc, lines, _ = drive(k, "patch", "configmaps", "default", "w", "json",
                         json.dumps([{"op": "test", "path": "/data/a", "value": "3"},
                                     {"op": "add", "path": "/data/b", "value": "x"}]))
    t.ok(rc == 0 and result(lines)["object"]["data"] == {"a": "3", "b": "x"}, "JSON patch applies", lines)
    t.eq(audit_for(k, verb="patch", name="w")[-1]["contentType"], "application/json-patch+json",
         "JSON patch content type")
    rc, lines, _ = drive(k, "patch", "configmaps", "default", "w", "json",
                         json.dumps([{"op": "test", "path": "/data/a", "value": "nope"}]))
    t.ok(rc == 1 and result(lines)["error"] < 0, "failed JSON patch test op is an error", result(lines))

    obj = result(drive(k, "get", "configmaps", "default", "w")[1])["object"]
    obj["data"] = {"put": "yes"}
    rc, lines, _ = drive(k, "update", "configmaps", "default", "w", json.dumps(obj))
    t.ok(rc == 0 and result(lines)["object"]["data"] == {"put": "yes"}, "update (PUT) replaces the object")
    rc, lines, _ = drive(k, "update", "configmaps", "default", "w", json.dumps(obj))
    t.eq(result(lines)["errno"], "ESTALE", "update with a stale resourceVersion conflicts")

    k.api("POST", "/api/v1/nodes", {"metadata": {"name": "sn1"}})
    rc, lines, _ = drive(k, "patch", "nodes", "-", "sn1", "merge",
                         json.dumps({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}}),
                         "status")
    t.ok(rc == 0, "merge patch on nodes/status", lines)
    st, node = k.api("GET", "/api/v1/nodes/sn1")
    t.eq(node.get("status", {}).get("addresses"), [{"type": "InternalIP", "address": "10.0.0.5"}],
         "status subresource written")
    t.eq(audit_for(k, verb="patch", name="sn1")[-1]["subresource"], "status", "request went to the subresource")

    rc, lines, _ = drive(k, "delete", "configmaps", "default", "w", "1")
    t.eq(result(lines)["errno"], "ESTALE", "delete with a stale resourceVersion precondition conflicts")
    rc, lines, _ = drive(k, "delete", "configmaps", "default", "w")
    t.ok(rc == 0 and k.api("GET", "/api/v1/namespaces/default/configmaps/w")[0] == 404, "delete")


def test_retry_after(t, k):
    k.api("POST", "/api/v1/namespaces/default/configmaps", cm("ra"))
    k.inject({"code": 429, "retryAfter": 1, "verb": "get", "resource": "configmaps", "name": "ra", "count": 2})
    rc, lines, _ = drive(k, "get", "configmaps", "default", "ra")
    t.ok(rc == 0 and result(lines)["status"] == 200, "GET succeeds after two 429s", lines)
    a = audit_for(k, verb="get", name="ra")
    t.eq([x["code"] for x in a], [429, 429, 200], "the request was repeated after each 429")
    # From one answer to the next request's arrival.
    gaps = [round(ts(a[i + 1]["received"]) - ts(a[i]["time"]), 2) for i in range(2)]
    t.ok(all(g >= 0.9 for g in gaps), "retries waited for Retry-After: 1 (gaps %s)" % gaps)
    t.eq(request_counts(lines), {("GET", "429"): 2, ("GET", "200"): 1}, "retries are counted per code")

    k.inject({"code": 503, "retryAfter": 1, "verb": "create", "resource": "configmaps", "count": 1})
    rc, lines, _ = drive(k, "create", "configmaps", "default", json.dumps(cm("ra2")))
    t.ok(rc == 0 and result(lines)["status"] == 201, "POST retried after 503 with Retry-After", lines)
    t.eq([x["code"] for x in audit_for(k, verb="create", resource="configmaps") if x["name"] in ("", None, "ra2")][-2:],
         [503, 201], "one 503, then created")

    k.inject({"code": 429, "retryAfter": 1, "verb": "get", "resource": "configmaps", "name": "ra", "count": 5})
    rc, lines, _ = drive(k, "get", "configmaps", "default", "ra", extra=["--max-retries", "1"])
    r = result(lines)
    t.ok(r["errno"] == "EBUSY" and r["status"] == 429, "429 after the retries are used up becomes EBUSY", r)
    k.clear_faults()

    k.inject({"code": 500, "verb": "create", "resource": "configmaps", "count": 1})
    rc, lines, _ = drive(k, "create", "configmaps", "default", json.dumps(cm("ra3")))
    t.eq(result(lines)["errno"], "EREMOTEIO", "a 500 on POST without Retry-After is not retried")
    k.clear_faults()


def test_watch(t, k):
    ensure_ns(k, "wt")
    base = "/api/v1/namespaces/wt/configmaps"
    k.api("POST", base, cm("before"))
    st, lst = k.api("GET", base)
    rv = lst["metadata"]["resourceVersion"]
    k.api("POST", base, cm("after1"))
    k.api("PATCH", base + "/after1", {"data": {"x": "1"}}, "application/merge-patch+json")
    rc, lines, _ = drive(k, "watch", "configmaps", "wt", rv, "2")
    evs = [(x["type"], x["object"]["metadata"]["name"]) for x in lines if x["what"] == "event"]
    t.eq(evs, [("ADDED", "after1"), ("MODIFIED", "after1")], "watch resumes from the resourceVersion")
    q = [a["query"] for a in audit(k) if a["verb"] == "watch" and a["namespace"] == "wt"][-1]
    t.ok("resourceVersion=%s" % rv in q and "allowWatchBookmarks=true" in q and "watch=1" in q,
         "watch query carries resourceVersion and allowWatchBookmarks", q)

    k.inject({"action": "gone", "verb": "watch", "namespace": "wt"})
    rc, lines, _ = drive(k, "watch", "configmaps", "wt", rv, "5")
    r = result(lines)
    t.ok(r and r["errno"] == "EIDRM", "410 ERROR event ends the watch with EGONE (EIDRM)", lines)


def test_informer(t, k, text=False):
    """text: the cache keeps each object as JSON text (store_text) and builds trees on use."""
    ns = "inft" if text else "inf"
    ensure_ns(k, ns)
    base = "/api/v1/namespaces/%s/configmaps" % ns
    for n in ("a", "b", "c"):
        k.api("POST", base, cm(n))
    env = {"CN_TEST_WATCH_TIMEOUT": "2"}
    if text:
        env["CN_TEST_INFORMER_TEXT"] = "1"
    p = Proc(k, "informer", "configmaps", ns, env=env)
    try:
        synced = p.wait_for(lambda x: x["what"] == "synced")
        added = sorted(x["name"] for x in p.lines if x["what"] == "added")
        t.ok(synced and synced["size"] == 3 and synced["foreach"] == 3 and added == ["a", "b", "c"],
             "informer lists (2 per page) and syncs", p.lines)
        t.ok(all(x["cached"] for x in p.lines if x["what"] == "added"), "added objects are in the cache by name")

        k.api("POST", base, cm("d"))
        t.ok(p.wait_for(lambda x: x["what"] == "added" and x["name"] == "d"), "ADDED from the watch")
        k.api("PATCH", base + "/a", {"data": {"v": "1"}}, "application/merge-patch+json")
        u = p.wait_for(lambda x: x["what"] == "updated" and x["name"] == "a")
        t.ok(u and u["oldResourceVersion"] != u["resourceVersion"] and u["object"]["data"] == {"v": "1"},
             "MODIFIED becomes updated(old, new)", u)
        k.api("DELETE", base + "/b")
        dl = p.wait_for(lambda x: x["what"] == "deleted" and x["name"] == "b")
        t.ok(dl and not dl["cached"], "DELETED becomes deleted, and the object leaves the cache", dl)

        # Server-side timeouts end watches every 2 s: the informer watches again from where it was.
        time.sleep(4.5)
        watches = [a for a in audit(k) if a["verb"] == "watch" and a["namespace"] == ns]
        t.ok(len(watches) >= 2 and all("resourceVersion=" in a["query"] for a in watches),
             "re-watch after the server's timeout resumes from a resourceVersion", [a["query"] for a in watches])
        lists = len([a for a in audit(k) if a["verb"] == "list" and a["namespace"] == ns])
        t.eq(lists, 2, "no re-list on normal watch ends (one list of two pages)")
        k.api("POST", base, cm("e"))
        e = p.wait_for(lambda x: x["what"] == "added" and x["name"] == "e")
        t.ok(e, "changes after a re-watch arrive")
        t.ok(e and e["watchRestarts"] >= 1, "normal watch ends count as restarts", e)

        # 410 Gone on the next watch: re-list, and the difference is delivered.
        k.inject({"action": "gone", "verb": "watch", "namespace": ns})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and \
                len([a for a in audit(k) if a["verb"] == "list" and a["namespace"] == ns]) < 3:
            time.sleep(0.2)
        lists = len([a for a in audit(k) if a["verb"] == "list" and a["namespace"] == ns])
        t.ok(lists >= 3, "410 Gone makes the informer list again (%d list requests)" % lists)
        k.api("DELETE", base + "/c")
        t.ok(p.wait_for(lambda x: x["what"] == "deleted" and x["name"] == "c"), "watch works after the re-list")

        # A connection dropped mid-stream: events are neither lost nor duplicated.
        k.inject({"action": "abort-watch", "afterEvents": 1, "verb": "watch", "namespace": ns})
        time.sleep(2.5)  # the current watch ends by timeout; the next one is cut after one event
        for n in ("f", "g", "h"):
            k.api("POST", base, cm(n))
        for n in ("f", "g", "h"):
            t.ok(p.wait_for(lambda x, n=n: x["what"] == "added" and x["name"] == n, timeout=20),
                 "object %s added across a dropped watch" % n)
        h = next((x for x in p.lines if x["what"] == "added" and x["name"] == "h"), None)
        watches = [a for a in audit(k) if a["verb"] == "watch" and a["namespace"] == ns]
        # The 410 and the dropped connection add to the timeouts; every restart is a new watch
        # request, and the one that delivered h was still open.
        t.ok(e and h and h["watchRestarts"] >= e["watchRestarts"] + 2 and h["watchRestarts"] < len(watches),
             "410 Gone and a dropped watch count as restarts (%s, then %s; %d watch requests)"
             % (e and e["watchRestarts"], h and h["watchRestarts"], len(watches)))
        time.sleep(1)
    finally:
        rc = p.stop()
    t.ok(rc == 0 and "Sanitizer" not in p.stderr, "informer driver exits cleanly", p.stderr[-2000:])
    adds = [x["name"] for x in p.lines if x["what"] == "added"]
    t.eq(sorted(adds), sorted(set(adds)), "no object was reported added twice")
    t.ok(not [x for x in p.lines if x["what"] == "synced"][1:], "synced is reported once")


def test_informer_text(t, k):
    test_informer(t, k, text=True)


def test_informer_field_selector(t, k):
    p = Proc(k, "informer", "nodes", "-", "metadata.name=fs1")
    try:
        t.ok(p.wait_for(lambda x: x["what"] == "synced"), "node-mode informer synced")
        k.api("POST", "/api/v1/nodes", {"metadata": {"name": "fs2"}})
        k.api("POST", "/api/v1/nodes", {"metadata": {"name": "fs1"}})
        t.ok(p.wait_for(lambda x: x["what"] == "added" and x["name"] == "fs1"), "watched node added")
        time.sleep(0.5)
    finally:
        rc = p.stop()
    t.ok(rc == 0 and "Sanitizer" not in p.stderr, "node-mode informer driver exits cleanly", p.stderr[-2000:])
    t.eq([x["name"] for x in p.lines if x["what"] == "added"], ["fs1"], "other nodes are not seen")
    q = [a["query"] for a in audit(k) if a["verb"] in ("list", "watch") and a["resource"] == "nodes"]
    t.ok(all("fieldSelector=metadata.name%3Dfs1" in x for x in q), "list and watch carry the field selector", q)


def test_token_file_rotation(t, k):
    alice = k.token_for("alice", ["system:masters"])
    bob = k.token_for("bob", ["system:masters"])
    d = os.path.join(k.state_dir, "rot")
    os.makedirs(d, exist_ok=True)
    tok = os.path.join(d, "token")

    def write_token(v):
        with open(tok + ".tmp", "w") as f:
            f.write(v + "\n")
        os.rename(tok + ".tmp", tok)

    write_token(alice)
    with open(k.kubeconfig) as f:
        cfg = json.load(f)
    cfg["users"] = [{"name": "rot", "user": {"tokenFile": "token"}}]
    cfg["contexts"] = [{"name": "rot", "context": {"cluster": cfg["clusters"][0]["name"], "user": "rot"}}]
    cfg["current-context"] = "rot"
    kc = os.path.join(d, "kubeconfig")
    with open(kc, "w") as f:
        json.dump(cfg, f)

    p = Proc(k, "get-each-line", "namespaces", "-", "default", kubeconfig=kc, env={"CN_DEBUG": "1"})
    try:
        p.send("\n")
        r1 = p.wait_for(lambda x: x["what"] == "result")
        write_token(bob)
        p.send("\n")
        r2 = p.wait_for(lambda x: x["what"] == "result")
    finally:
        rc = p.stop()
    t.ok(rc == 0 and "Sanitizer" not in p.stderr, "token rotation driver exits cleanly", p.stderr[-2000:])
    t.ok(r1 and r2 and r1["status"] == 200 and r2["status"] == 200, "both GETs succeed", (r1, r2))
    users = [a["user"] for a in audit_for(k, verb="get", resource="namespaces", name="default")][-2:]
    t.eq(users, ["alice", "bob"], "the rotated tokenFile is used for the next request")
    t.ok(alice not in p.stderr and bob not in p.stderr, "tokens never appear in debug logs")


def test_leader_election(t, k):
    args = ("leader", "kube-system", "cn-test-lease")
    a = Proc(k, *args, "cand-a", "3", "2", "0.5")
    b = None
    try:
        t.ok(a.wait_for(lambda x: x["what"] == "started-leading"), "first candidate acquires the Lease")
        b = Proc(k, *args, "cand-b", "3", "2", "0.5")
        nl = b.wait_for(lambda x: x["what"] == "new-leader")
        t.eq(nl and nl["identity"], "cand-a", "second candidate observes the leader")
        time.sleep(2)
        t.ok(not [x for x in b.lines if x["what"] == "started-leading"], "second candidate does not take a live lease")
        st, lease = k.api("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cn-test-lease")
        t.ok(lease["spec"]["holderIdentity"] == "cand-a" and lease["spec"]["leaseDurationSeconds"] == 3,
             "Lease names the holder and duration", lease["spec"])

        t0 = time.monotonic()
        a.stop(signal.SIGTERM)
        rel = [x for x in a.lines if x["what"] == "released"]
        t.ok(rel and rel[0]["error"] == 0 and [x for x in a.lines if x["what"] == "stopped-leading"],
             "leader releases on shutdown", a.lines)
        t.ok(b.wait_for(lambda x: x["what"] == "started-leading", timeout=10), "second candidate takes over")
        took = time.monotonic() - t0
        t.ok(took < 3, "hand-over after release did not wait out the lease (%.1fs)" % took)
        st, lease = k.api("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cn-test-lease")
        t.ok(lease["spec"]["holderIdentity"] == "cand-b" and lease["spec"].get("leaseTransitions", 0) >= 1,
             "Lease records the new holder and a transition", lease["spec"])
        # Renewals keep the lease while the leader runs.
        time.sleep(2)
        t.ok(not [x for x in b.lines if x["what"] == "stopped-leading"], "leader keeps renewing")
    finally:
        rca = a.stop(signal.SIGTERM)
        rcb = b.stop(signal.SIGTERM) if b else None
    t.ok(rca == 0 and rcb == 0 and "Sanitizer" not in a.stderr + (b.stderr if b else ""),
         "leader candidates exit cleanly", (a.stderr[-1000:], b.stderr[-1000:] if b else None))
    st, lease = k.api("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cn-test-lease")
    t.ok(not lease["spec"].get("holderIdentity"), "released Lease has no holder", lease["spec"])
    puts = [x for x in audit_for(k, resource="leases") if x["verb"] == "update"]
    t.ok(all(x["code"] in (200, 409) for x in puts), "Lease writes are updates guarded by resourceVersion")


def test_leader_loses_lease(t, k):
    a = Proc(k, "leader", "kube-system", "cn-test-lease2", "cand-x", "3", "2", "0.5")
    try:
        t.ok(a.wait_for(lambda x: x["what"] == "started-leading"), "candidate leads")
        k.inject({"code": 500, "resource": "leases", "count": -1})
        t0 = time.monotonic()
        lost = a.wait_for(lambda x: x["what"] == "stopped-leading", timeout=10)
        took = time.monotonic() - t0
        t.ok(lost and took < 3.5, "leader steps down within the renew deadline when it cannot renew (%.1fs)" % took)
        k.clear_faults()
        t.ok(a.wait_for(lambda x: x["what"] == "started-leading", timeout=15), "and leads again once the API is back")
    finally:
        k.clear_faults()
        rc = a.stop(signal.SIGTERM)
    t.eq(rc, 0, "candidate exits cleanly")


def test_events(t, k):
    before = len(audit(k))
    rc, lines, _ = drive(k, "event", "nodes", "-", "ev-node", "Warning", "FailedThing", "it failed", "3")
    rc2, _, _ = drive(k, "event", "nodes", "-", "ev-node", "Normal", "Synced", "all good", "1")
    t.ok(rc == 0 and rc2 == 0, "events recorded")
    st, evs = k.api("GET", "/api/v1/namespaces/default/events")
    mine = [e for e in evs["items"] if e["involvedObject"].get("name") == "ev-node"]
    by_reason = {e["reason"]: e for e in mine}
    t.eq(sorted(by_reason), ["FailedThing", "Synced"], "one Event per distinct event")
    f = by_reason.get("FailedThing", {})
    t.eq(f.get("count"), 3, "three repeats aggregated into count 3")
    t.ok(f.get("type") == "Warning" and f.get("message") == "it failed" and f["source"] == {
        "component": "test-driver", "host": "test-host"} and f.get("reportingComponent") == "test-driver"
        and f["involvedObject"]["kind"] == "Node" and f.get("firstTimestamp") and f.get("lastTimestamp"),
        "Event fields", f)
    writes = [a for a in audit(k)[before:] if a["resource"] == "events"]
    creates = [a for a in writes if a["verb"] == "create"]
    patches = [a for a in writes if a["verb"] == "patch"]
    t.ok(len(creates) == 2 and 1 <= len(patches) <= 2 and
         all(a["contentType"] == "application/merge-patch+json" for a in patches),
         "repeats are PATCHes of the existing Event, not new Events", [(a["verb"], a["code"]) for a in writes])


def test_event_recreated(t, k):
    """An Event that expired server-side while cached is created again from the fields the recorder
    kept: the same Event, with the count it has reached."""
    k.inject({"latency": 1.5, "verb": "patch", "resource": "events"})
    out = {}
    th = threading.Thread(target=lambda: out.update(r=drive(k, "event", "nodes", "-", "ev2-node", "Warning",
                                                           "Expiring", "it expired", "3")))
    th.start()
    try:
        deadline = time.monotonic() + 10
        mine = []
        while time.monotonic() < deadline and not mine:
            st, evs = k.api("GET", "/api/v1/namespaces/default/events")
            mine = [e for e in evs["items"] if e["involvedObject"].get("name") == "ev2-node"]
            time.sleep(0.05)
        t.ok(len(mine) == 1, "the Event is created", mine)
        for e in mine:  # expires while the repeat's PATCH is delayed
            k.api("DELETE", "/api/v1/namespaces/default/events/" + e["metadata"]["name"])
        th.join(30)
    finally:
        k.clear_faults()
    rc = out.get("r", (None,))[0]
    st, evs = k.api("GET", "/api/v1/namespaces/default/events")
    again = [e for e in evs["items"] if e["involvedObject"].get("name") == "ev2-node"]
    e = again[0] if len(again) == 1 else {}
    t.ok(rc == 0 and mine and e.get("metadata", {}).get("name") == mine[0]["metadata"]["name"] and
         e.get("count") == 3 and e.get("reason") == "Expiring" and e.get("message") == "it expired" and
         e.get("type") == "Warning" and e["involvedObject"].get("uid") == "uid-1" and
         e["involvedObject"].get("kind") == "Node" and e["involvedObject"].get("apiVersion") == "v1" and
         e.get("source") == {"component": "test-driver", "host": "test-host"} and
         e.get("firstTimestamp") == mine[0].get("firstTimestamp"),
         "after a 404 on the repeat, the same Event is created again with count 3", again)


def test_continue_expired(t, d):
    """A continue token whose snapshot is gone (410 Expired) restarts list_all once."""
    with FakeKube(os.path.join(d, "short-history"), extra_args=["--watch-history", "5"]) as k:
        ensure_ns(k, "ce")
        ensure_ns(k, "noise")
        for n in ("c1", "c2", "c3"):
            k.api("POST", "/api/v1/namespaces/ce/configmaps", cm(n))
        p = subprocess.Popen([DRIVER, "--kubeconfig", k.kubeconfig, "--qps", "1", "--burst", "1",
                              "list-all", "configmaps", "ce", "1"], stdout=subprocess.PIPE, text=True)
        # Wait for the first page (not a fixed sleep: a busy machine may start the driver late);
        # with qps 1 the second page follows a second later.
        end = time.monotonic() + 30
        while time.monotonic() < end and not any(a.get("verb") == "list" and a.get("namespace") == "ce" for a in k.audit()):
            time.sleep(0.02)
        for i in range(8):  # push the first page's snapshot out of the history
            k.api("POST", "/api/v1/namespaces/noise/configmaps", cm("n%d" % i))
        out, _ = p.communicate(timeout=60)
        lines = [json.loads(x) for x in out.splitlines() if x.strip()]
        r = result(lines)
        t.ok(p.returncode == 0 and sorted(i["metadata"]["name"] for i in r["object"]["items"]) == ["c1", "c2", "c3"],
             "list_all completes after its continue token expired", r)
        lists = [(a["code"], "continue=" in a["query"]) for a in audit(k) if a["verb"] == "list"
                 and a["namespace"] == "ce"]
        t.ok((410, True) in lists and lists[lists.index((410, True)) + 1] == (200, False),
             "the expired page was answered 410 and the list started over", lists)


def main():
    t = Tap()
    if not os.path.exists(DRIVER):
        t.bail_out("tests/kube-client-driver is not built")
    d = state_dir("kube-client-")
    try:
        with FakeKube(d) as k:
            for fn in (test_get_auth_and_errors, test_transport_errors, test_list_pagination, test_list_bad_pages,
                       test_writes, test_retry_after, test_watch,
                       test_informer, test_informer_text, test_informer_field_selector, test_token_file_rotation,
                       test_leader_election, test_leader_loses_lease, test_events, test_event_recreated):
                t.run(fn, k)
        t.run(test_continue_expired, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
