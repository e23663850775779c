#!/usr/bin/env python3
"""cloudnode-initializer in cluster mode under every fault the fake servers inject: API 5xx and
429 with Retry-After on the writes, 409 conflicts, a failing list, closed and dropped watches,
410 Gone, cloud API 5xx and rate limiting, a status PATCH and a Node PATCH stored by the server
whose answers were lost. However the faults fall, every Node ends initialized exactly once (one
successful taint-removing PATCH per Node in the audit log) with the instance's addresses, no 409
becomes a Warning Event, the process keeps running, and no Node is ever read by GET."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, metric_value  # noqa: E402
from cninit import (BINARY, CLUSTER_SA, RBAC, Initializer, addresses, events, expected_addresses, get_node,  # noqa: E402
                    hetzner_conf, initialized, make_node, node_gets, wait_for, writes)
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

def applied(k, rule):
    """A rule is used up once as many requests as its count matched it (watch requests are
    audited when their stream starts, before a fault can be recorded on them)."""
    st, out = k.api("GET", "/fakekube/faults")
    return st == 200 and all(r["id"] != rule["id"] for r in out.get("faults", []))


def test_faults(t, k, c, d):
    names = ["f%02d" % i for i in range(17)]
    insts = {n: c.add_instance({"platform": "hetzner", "name": n}) for n in names}
    for n in names[:4]:
        make_node(k, n)
    # Start-up faults: the first list fails; a watch request takes every watch rule that
    # matches and the last one listed wins, so this order gives: watch 1 expired (410 Gone,
    # re-list), watch 2 dropped after one event, watch 3 closed after one event, watch 4 fine.
    start_rules = k.inject([
        {"verb": "list", "resource": "nodes", "code": 500, "count": 1},
        {"verb": "watch", "resource": "nodes", "action": "gone", "count": 1},
        {"verb": "watch", "resource": "nodes", "action": "close-watch", "afterEvents": 1, "count": 3},
        {"verb": "watch", "resource": "nodes", "action": "abort-watch", "afterEvents": 1, "count": 2},
    ])
    c.fail({"platform": "hetzner", "service": "api", "status": 500, "count": 2})
    c.throttle("hetzner", count=2)
    conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
            "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1",
            "--concurrent-node-syncs=3", "-v", "4"]
    with Initializer(args, state_dir=d, name="faults") as i:
        t.ok(wait_for(lambda: all(initialized(k, n) for n in names[:4]), 60),
             "Nodes present at start are initialized despite list, watch and cloud faults", i.log()[-3000:])
        # One kind of write fault at a time (the fake consumes all matching rules per request).
        # The Retry-After of 429/503 is honoured by the client's own retries.
        phases = [
            ({"verb": "patch", "resource": "nodes", "subresource": "status", "code": 503, "retryAfter": 1,
              "count": 2}, names[4:6]),
            ({"verb": "patch", "resource": "nodes", "subresource": "", "code": 429, "retryAfter": 1, "count": 2},
             names[6:8]),
            ({"verb": "patch", "resource": "nodes", "subresource": "", "action": "conflict", "count": 3}, names[8:10]),
            ({"verb": "patch", "resource": "nodes", "subresource": "", "code": 500, "count": 1}, names[10:11]),
            # Not retried by the client itself (a 503 with Retry-After is): the sync sees the failure.
            ({"verb": "patch", "resource": "nodes", "subresource": "status", "code": 500, "count": 1}, names[16:17]),
            # The write is stored and its answer lost (connection reset after the commit).
            ({"verb": "patch", "resource": "nodes", "subresource": "status", "action": "reset-after-commit",
              "count": 1}, names[12:14]),
            ({"verb": "patch", "resource": "nodes", "subresource": "", "action": "reset-after-commit",
              "count": 1}, names[14:16]),
        ]
        rules = list(start_rules)
        for rule, batch in phases:
            rules.append(k.inject(rule))
            for n in batch:
                make_node(k, n)
            t.ok(wait_for(lambda: all(initialized(k, n) for n in batch), 60),
                 "Nodes initialized through %s" % (rule.get("action") or rule.get("code")), i.log()[-3000:])
        make_node(k, names[11])
        t.ok(wait_for(lambda: initialized(k, names[11]), 60), "a Node added after the watch faults")
        watches = [r for r in k.audit() if r.get("user") == CLUSTER_SA and r.get("verb") == "watch"]
        t.ok(len(watches) >= 4, "the watch was restarted after each watch fault (%d watches)" % len(watches))
        wait_for(lambda: all(applied(k, rule) for rule in rules), 20)
        for rule in rules:
            what = rule.get("action") or rule.get("code")
            t.ok(applied(k, rule), "fault %s on %s %s was applied" % (what, rule["verb"], rule.get("subresource", "")))
        lost = [r for r in k.audit() if r.get("responseDropped")]
        t.eq(sorted((r["subresource"], r["code"]) for r in lost), [("", 200), ("status", 200)],
             "one status PATCH and one Node PATCH were stored and their answers lost")
        conflicted = {r["name"] for r in k.audit() if r.get("user") == CLUSTER_SA and r.get("verb") == "patch"
                      and r.get("code") == 409}
        t.ok(set(names[8:10]) <= conflicted, "the Nodes of the conflict phase got their 409s", sorted(conflicted))
        for n in names:
            w = writes(k, CLUSTER_SA, n)
            good = [x for x in w if x[0] == "patch" and x[1] == "" and x[3] == 200]
            t.eq(len(good), 1, "%s: initialized exactly once" % n)
            # The path, not only the end: the taint goes only after the addresses were written.
            t.eq(addresses(get_node(k, n)), expected_addresses(insts[n]), "%s: the Node has the instance's addresses" % n)
            if n not in (lost_node["name"] for lost_node in lost if not lost_node["subresource"]):
                t.eq(len(events(k, n, "Synced")), 1, "%s: one Synced event" % n)
        # The Nodes present at start also meet the cloud's injected 500s and 429s, whose lookup
        # failure is rightly a FailedToGetInstance Warning; a 409 may reach them too (a write
        # racing the watch restarts), and it must add no Warning of its own.
        for n in sorted(conflicted):
            expected_cloud = {"FailedToGetInstance"} if n in names[:4] else set()
            t.eq([e["reason"] for e in events(k, n) if e.get("type") == "Warning" and e["reason"] not in expected_cloud],
                 [], "%s: a 409 is a retry from the cache, not a failure: no Warning Event" % n)
        t.eq(node_gets(k, CLUSTER_SA), [], "no GET of a single Node, even after faults")
        t.ok(i.proc.poll() is None, "the initializer survived every fault")
        st, text = i.get("/metrics")
        # Less the Node whose taint-removing PATCH was stored with its answer lost: the retry finds
        # it initialized, by a writer this process cannot tell from another one.
        t.eq(metric_value(text, "cloudnode_initializer_nodes_initialized_total"), len(names) - 1,
             "metrics count every Node it saw initialized by its own write once")
        t.ok('result="retryable"' in text, "cloud failures are counted as retryable")
        # Every watch but the open one ended and was restarted (the 410, the closed and the
        # dropped watches of the start-up faults among them).
        restarts = metric_value(text, 'cloudnode_initializer_watch_restarts_total{resource="nodes"}')
        watches = [r for r in k.audit() if r.get("user") == CLUSTER_SA and r.get("verb") == "watch"]
        t.ok(restarts is not None and restarts >= 3 and restarts == len(watches) - 1,
             "watch restarts are counted (%s restarts, %d watch requests)" % (restarts, len(watches)))
        # However each Node's sync ended (lost answers, 409s, retries), none leaves state behind.
        t.ok(wait_for(lambda: metric_value(i.get("/metrics")[1], "cloudnode_initializer_tracked_nodes") == 0, 10),
             "no Node state kept once every Node is initialized",
             metric_value(i.get("/metrics")[1], "cloudnode_initializer_tracked_nodes"))


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    with tempfile.TemporaryDirectory() as d:
        with FakeKube(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_faults, k, c, d)
    sys.exit(t.done())


main()
