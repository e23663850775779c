#!/usr/bin/env python3
"""tests/fake-kube-apiserver: fault injection does what it says (status codes with
Retry-After, counts, skip, matching by verb/resource/name/user, latency, conflicts, answers lost
after the commit, closed and dropped watches, forced 410) and is reachable only as admin."""
import http.client
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakekubeclient import FakeKube, run_with_server, state_dir  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"


def test_codes(t, k):
    k.api("POST", CM, {"metadata": {"name": "a"}})
    k.api("POST", CM, {"metadata": {"name": "b"}})
    rule = k.inject({"verb": "get", "resource": "configmaps", "name": "a", "code": 429, "retryAfter": 3, "count": 2})
    t.ok(rule.get("id"), "rule stored with an id")
    st, hdrs, raw = k.request("GET", CM + "/a")
    body = json.loads(raw)
    t.eq((st, hdrs.get("Retry-After"), body.get("reason"), body.get("details", {}).get("retryAfterSeconds")),
         (429, "3", "TooManyRequests", 3), "429 with Retry-After header and Status details")
    st, _ = k.api("GET", CM + "/b")
    t.eq(st, 200, "other names unaffected")
    st, _ = k.api("PATCH", CM + "/a", {"data": {"x": "1"}}, "application/merge-patch+json")
    t.eq(st, 200, "other verbs unaffected")
    st, _ = k.api("GET", CM + "/a")
    t.eq(st, 429, "second of count=2")
    st, _ = k.api("GET", CM + "/a")
    t.eq(st, 200, "count exhausted")
    st, r = k.api("GET", "/fakekube/faults")
    t.eq(r["faults"], [], "exhausted rules are removed")
    k.inject({"verb": "patch", "resource": "configmaps", "code": 503, "count": 1})
    st, r = k.api("PATCH", CM + "/b", {"data": {"y": "1"}}, "application/merge-patch+json")
    t.eq((st, r.get("reason")), (503, "ServiceUnavailable"), "503")
    st, r = k.api("GET", CM + "/b")
    t.ok("y" not in (r.get("data") or {}), "a failed write is not applied")
    tok = k.token_for("someone")
    k.inject({"user": "someone", "code": 500, "count": -1})
    st, _ = k.api("GET", "/version", token=tok)
    st2, _ = k.api("GET", "/version")
    t.eq((st, st2), (500, 200), "match by user; count -1 is unlimited")
    st, _ = k.api("GET", "/version", token=tok)
    t.eq(st, 500, "still failing")
    k.clear_faults()
    st, _ = k.api("GET", "/version", token=tok)
    t.eq(st, 200, "cleared")
    st, r = k.api("POST", "/fakekube/faults", {"code": 500}, token=tok)
    t.eq(st, 403, "fault endpoint only for admin")
    st, r = k.api("POST", "/fakekube/faults", {"verb": "get"})
    t.eq(st, 400, "rule without an action: 400")
    inj = [a for a in k.audit() if a.get("injected")]
    t.ok(len(inj) >= 4 and all(a["code"] >= 429 for a in inj), "injected failures are marked in the audit log")


def test_conflict_and_latency(t, k):
    st, cur = k.api("GET", CM + "/a")
    k.inject({"action": "conflict", "verb": "patch", "name": "a"})
    p = {"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}, "data": {"z": "1"}}
    st, r = k.api("PATCH", CM + "/a", p, "application/merge-patch+json")
    t.eq((st, r.get("reason"), r.get("message")), (409, "Conflict", 'Operation cannot be fulfilled on configmaps "a": '
         'the object has been modified; please apply your changes to the latest version and try again'),
         "injected conflict looks like a real one")
    st, r = k.api("PATCH", CM + "/a", p, "application/merge-patch+json")
    t.eq(st, 200, "retry succeeds")
    k.inject({"latency": 0.6, "verb": "get", "name": "b"})
    t0 = time.monotonic()
    st, _ = k.api("GET", CM + "/b")
    el = time.monotonic() - t0
    t.ok(st == 200 and el >= 0.6, "latency delays then serves", el)
    k.api("GET", CM + "/b")
    t.eq([r for r in k.api("GET", "/fakekube/faults")[1]["faults"] if "latency" in r], [], "latency rule used up")


def test_reset_after_commit(t, k):
    """The write is stored, the client gets no answer; skip pins a rule to the Nth request."""
    rule = k.inject({"action": "reset-after-commit", "verb": "create", "resource": "configmaps"})
    try:
        st, _ = k.api("POST", CM, {"metadata": {"name": "pc"}, "data": {"v": "1"}})
        got = "answer %d" % st
    except (OSError, http.client.HTTPException) as e:
        got = "no answer (%s)" % type(e).__name__
    t.ok(got.startswith("no answer"), "reset-after-commit: the client gets no answer to its create", got)
    st, r = k.api("GET", CM + "/pc")
    t.eq((st, (r.get("data") or {}).get("v")), (200, "1"), "but the object was created")
    st, r = k.api("POST", CM, {"metadata": {"name": "pc"}, "data": {"v": "1"}})
    t.eq((st, r.get("reason")), (409, "AlreadyExists"), "so a blind retry gets AlreadyExists")
    rec = [a for a in k.audit() if a.get("injected") == rule["id"]]
    t.eq([(a["verb"], a["code"], a.get("responseDropped")) for a in rec], [("create", 201, True)],
         "the audit record has the code that was not sent and responseDropped")

    st, cur = k.api("GET", CM + "/pc")
    k.inject({"action": "reset-after-commit", "verb": "patch", "name": "pc", "skip": 1})
    outcomes = []
    for v in ("2", "3"):
        p = {"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}, "data": {"v": v}}
        try:
            st, cur = k.api("PATCH", CM + "/pc", p, "application/merge-patch+json")
            outcomes.append(st)
        except (OSError, http.client.HTTPException):
            outcomes.append("reset")
    st, r = k.api("GET", CM + "/pc")
    t.eq((outcomes, r["data"]["v"]), ([200, "reset"], "3"),
         "skip 1: the first patch is answered, the second is stored and its answer lost")
    k.inject({"action": "reset-after-commit", "verb": "delete", "name": "pc"})
    try:
        k.api("DELETE", CM + "/pc")
    except (OSError, http.client.HTTPException):
        pass
    st, r = k.api("DELETE", CM + "/pc")
    t.eq(st, 404, "a delete whose answer was lost happened: the retry finds nothing")
    st, r = k.api("POST", "/fakekube/faults", {"action": "reset-after-commit", "skip": -1})
    t.eq(st, 400, "a negative skip is refused")


def test_watch_faults(t, k):
    st, lst = k.api("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    for i in range(4):
        k.api("POST", CM, {"metadata": {"name": "w%d" % i}})
    k.inject({"action": "close-watch", "resource": "configmaps", "afterEvents": 2})
    t0 = time.monotonic()
    evs = list(k.watch(CM + "?watch=1&resourceVersion=" + rv, timeout=10))
    t.ok(len(evs) == 2 and time.monotonic() - t0 < 5, "watch closed after 2 events", evs)
    k.inject({"action": "abort-watch", "resource": "configmaps", "afterEvents": 1})
    evs = []
    err = None
    try:
        for ev in k.watch(CM + "?watch=1&resourceVersion=" + rv, timeout=10):
            evs.append(ev)
    except Exception as e:  # an aborted chunked stream is an error for the client
        err = e
    t.ok(len(evs) == 1, "aborted watch delivered 1 event", (evs, err))
    k.inject({"action": "gone", "resource": "configmaps"})
    evs = list(k.watch(CM + "?watch=1&resourceVersion=" + rv, timeout=10))
    t.eq([(e, o.get("code"), o.get("reason")) for e, o in evs], [("ERROR", 410, "Expired")], "forced 410")
    evs = list(k.watch(CM + "?watch=1&timeoutSeconds=1&resourceVersion=" + rv, timeout=10))
    t.eq(len(evs), 4, "next watch is normal again")
    k.inject({"action": "bookmark", "interval": 0.2, "resource": "configmaps"})
    evs = list(k.watch(CM + "?watch=1&timeoutSeconds=1&allowWatchBookmarks=true&resourceVersion=" + rv, timeout=10))
    t.ok(sum(1 for e, _ in evs if e == "BOOKMARK") >= 2, "bookmark interval fault", [e for e, _ in evs])


def test_fault_file(t):
    d = state_dir()
    try:
        f = os.path.join(d, "faults.json")
        with open(f, "w") as fp:
            json.dump([{"verb": "list", "resource": "nodes", "code": 503, "count": 1}], fp)
        with FakeKube(os.path.join(d, "s"), extra_args=["--faults", f]) as k:
            st, _ = k.api("GET", "/api/v1/nodes")
            st2, _ = k.api("GET", "/api/v1/nodes")
            t.eq((st, st2), (503, 200), "--faults FILE rules apply from the start")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    t = Tap()
    run_with_server(t, (test_codes, test_conflict_and_latency, test_reset_after_commit, test_watch_faults))
    t.run(test_fault_file)
    sys.exit(t.done())


main()
