#!/usr/bin/env python3
"""tests/fake-kube-apiserver: list and watch semantics (resourceVersion start, bookmarks,
timeoutSeconds, 410 Gone from a bounded history, selectors, limit/continue)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakekubeclient import run_with_server, scratch_server  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"


def cm(name, labels=None, data=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


def test_watch_from_rv(t, k):
    st, lst = k.api("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    k.api("POST", CM, cm("w1", {"app": "a"}))
    k.api("PATCH", CM + "/w1", {"data": {"x": "1"}}, "application/merge-patch+json")
    k.api("DELETE", CM + "/w1")
    evs = list(k.watch(CM + "?watch=1&resourceVersion=%s&timeoutSeconds=1" % rv, timeout=5))
    t.eq([e[0] for e in evs], ["ADDED", "MODIFIED", "DELETED"], "watch from a resourceVersion replays changes")
    rvs = [int(o["metadata"]["resourceVersion"]) for _, o in evs]
    t.ok(rvs == sorted(rvs) and len(set(rvs)) == 3 and rvs[0] > int(rv), "event resourceVersions increase", rvs)
    t.eq(evs[-1][1]["data"], {"x": "1"}, "DELETED carries the last state")
    # Without resourceVersion: synthetic ADDED for what exists, then changes.
    k.api("POST", CM, cm("w2"))
    evs = list(k.watch(CM + "?watch=1&timeoutSeconds=1", timeout=5))
    t.ok(("ADDED", "w2") in [(e, o["metadata"]["name"]) for e, o in evs], "watch without rv starts with ADDED")


def test_live_and_timeout(t, k):
    st, lst = k.api("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    got = []

    def run():
        for ev in k.watch(CM + "?watch=1&resourceVersion=%s&timeoutSeconds=2&allowWatchBookmarks=true" % rv,
                          timeout=10):
            got.append(ev)
    th = threading.Thread(target=run)
    t0 = time.monotonic()
    th.start()
    time.sleep(0.3)
    k.api("POST", CM, cm("live1"))
    th.join(10)
    el = time.monotonic() - t0
    t.ok(not th.is_alive() and 1.5 < el < 6, "timeoutSeconds ends the stream cleanly", el)
    t.ok(("ADDED", "live1") in [(e, o["metadata"].get("name")) for e, o in got], "live event delivered")
    bms = [o for e, o in got if e == "BOOKMARK"]
    t.ok(bms and bms[-1]["kind"] == "ConfigMap" and int(bms[-1]["metadata"]["resourceVersion"]) >=
         max(int(o["metadata"]["resourceVersion"]) for e, o in got if e == "ADDED"),
         "BOOKMARK with a current resourceVersion", got)


def test_selectors(t, k):
    st, lst = k.api("GET", CM)
    rv = lst["metadata"]["resourceVersion"]
    k.api("POST", CM, cm("s1", {"tier": "a"}))
    k.api("PATCH", CM + "/s1", {"metadata": {"labels": {"tier": "b"}}}, "application/merge-patch+json")
    k.api("PATCH", CM + "/s1", {"metadata": {"labels": {"tier": "a"}}}, "application/merge-patch+json")
    evs = list(k.watch(CM + "?watch=1&labelSelector=tier%%3Da&resourceVersion=%s&timeoutSeconds=1" % rv,
                       timeout=5))
    t.eq([e for e, _ in evs], ["ADDED", "DELETED", "ADDED"], "objects leaving/entering a selector: DELETED/ADDED")
    for n, l in (("p1", {"env": "prod", "k": "1"}), ("p2", {"env": "dev"}), ("p3", {"env": "qa", "k": "2"})):
        k.api("POST", CM, cm(n, l))

    def names(sel):
        st, r = k.api("GET", CM + "?labelSelector=" + sel)
        return sorted(o["metadata"]["name"] for o in r["items"]) if st == 200 else st
    t.eq(names("env%20in%20(prod,qa)"), ["p1", "p3"], "set-based in")
    t.eq(names("env%20notin%20(prod),env"), ["p2", "p3"], "notin plus exists")
    t.eq(names("!k,env"), ["p2"], "!exists")
    t.eq(names("env!=dev,env"), ["p1", "p3"], "!=")
    t.eq(names("env==prod"), ["p1"], "==")
    t.eq(names("bad%20key!"), 400, "invalid selector: 400")
    st, r = k.api("GET", CM + "?fieldSelector=metadata.name%3Dp2")
    t.eq([o["metadata"]["name"] for o in r["items"]], ["p2"], "fieldSelector metadata.name")
    st, r = k.api("GET", CM + "?fieldSelector=spec.nope%3Dx")
    t.eq((st, r.get("message")), (400, "field label not supported: spec.nope"), "unknown field label: 400")
    st, r = k.api("GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3Ddefault,metadata.name%3Dp1")
    t.eq([o["metadata"]["name"] for o in r["items"]], ["p1"], "fieldSelector metadata.namespace across namespaces")


def test_pagination(t, k):
    for i in range(7):
        k.api("POST", "/api/v1/namespaces/kube-public/configmaps", cm("pg%d" % i))
    path = "/api/v1/namespaces/kube-public/configmaps"
    st, r = k.api("GET", path + "?limit=3")
    t.eq((len(r["items"]), r["metadata"].get("remainingItemCount")), (3, 4), "limit and remainingItemCount")
    snap_rv = r["metadata"]["resourceVersion"]
    names = [o["metadata"]["name"] for o in r["items"]]
    k.api("POST", path, cm("pg9-late"))
    cont = r["metadata"]["continue"]
    while cont:
        st, r = k.api("GET", path + "?limit=3&continue=" + cont)
        t.eq(r["metadata"]["resourceVersion"], snap_rv, "continued pages come from the same snapshot")
        names += [o["metadata"]["name"] for o in r["items"]]
        cont = r["metadata"].get("continue")
    t.eq(names, ["pg%d" % i for i in range(7)], "pages list everything once, in order, consistent snapshot")
    st, r = k.api("GET", path + "?limit=2&resourceVersion=0")
    t.eq(len(r["items"]), 8, "resourceVersion=0 is served from cache and ignores limit (as the real server)")


def test_gone(t):
    with scratch_server(extra_args=["--watch-history", "5"]) as k:
        k.api("POST", CM, cm("first"))
        k.api("POST", CM, cm("second"))
        st, lst = k.api("GET", CM)
        old = lst["metadata"]["resourceVersion"]
        st, r = k.api("GET", CM + "?limit=1")
        for i in range(8):
            k.api("POST", CM, cm("g%d" % i))
        evs = list(k.watch(CM + "?watch=1&resourceVersion=%s" % old, timeout=5))
        t.eq(len(evs), 1, "one event then the stream ends")
        e, o = evs[0]
        t.eq((e, o.get("kind"), o.get("code"), o.get("reason")), ("ERROR", "Status", 410, "Expired"),
             "410 Gone as an ERROR event once the resourceVersion left the history")
        t.ok(o.get("message", "").startswith("too old resource version: %s (" % old), "410 message", o)
        st, r2 = k.api("GET", CM + "?limit=1&continue=" + r["metadata"]["continue"])
        t.eq((st, r2.get("reason")), (410, "Expired"), "expired continue token: 410")
        t.ok(bool(r2.get("metadata", {}).get("continue")), "410 for continue carries a fresh token")
        st, lst = k.api("GET", CM)
        rv = lst["metadata"]["resourceVersion"]
        evs = list(k.watch(CM + "?watch=1&timeoutSeconds=1&resourceVersion=" + rv, timeout=5))
        t.eq(evs, [], "watch from the current resourceVersion: no ERROR")


def main():
    t = Tap()
    run_with_server(t, (test_watch_from_rv, test_live_and_timeout, test_selectors, test_pagination),
                    extra_args=["--bookmark-interval", "0.5"])
    t.run(test_gone)
    sys.exit(t.done())


main()
