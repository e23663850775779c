#!/usr/bin/env python3
"""cloudnode-initializer in node mode when the API server stores a write and its answer is lost
(the connection is reset after the commit): once for the addresses PATCH on nodes/NAME/status,
once for the taint-removing Node PATCH. Each time the Node ends initialized with its addresses,
each PATCH is stored exactly once (a resent Node PATCH meets its resourceVersion precondition and
gets 409, which is no failure: no Warning Event for it, as for an injected 409), and READY=1 is sent."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import (BINARY, node_user, Initializer, addresses, events, initialized, make_node,  # noqa: E402
                    node_namespace, wait_for, writes)
from fakecloud import FakeCloud  # noqa: E402


def lost_answer(t, d, ns, link, k, inst, name, subresource, action="reset-after-commit"):
    cfg = os.path.join(d, "cloudnode.yaml")
    with open(cfg, "w") as f:
        f.write("platform: aws\nrole: worker\n")
    what = "status PATCH" if subresource else "Node PATCH"
    rule = k.inject({"user": node_user(name), "verb": "patch", "resource": "nodes", "name": name,
                     "subresource": subresource, "action": action})
    make_node(k, name, addresses=[{"type": "Hostname", "address": "kubelet-name"}])
    args = ["--node-name=" + name, "--kubeconfig=" + k.node_kubeconfig(name), "--config=" + cfg,
            "--bind-address=" + link[2], "-v", "4"]
    with Initializer(args, netns=ns.name, state_dir=d, name=name) as i:
        node = wait_for(lambda: initialized(k, name), 30)
        # The record of a dropped answer is written once the connection is reset, which may
        # follow the moment the stored write shows.
        lost = wait_for(lambda: [r for r in k.audit() if r.get("injected") == rule["id"]], 10) or []
        if action == "conflict":
            t.ok(node, "%s: initialized after a 409 on the %s" % (name, what), i.log()[-3000:])
            t.eq([(r["subresource"], r["code"]) for r in lost], [(subresource, 409)], "%s: the 409 was sent" % name)
        else:
            t.ok(node, "%s: initialized after the %s was stored and its answer lost" % (name, what), i.log()[-3000:])
            t.eq([(r["subresource"], r["code"], r.get("responseDropped")) for r in lost], [(subresource, 200, True)],
                 "%s: the server stored the %s and dropped its answer" % (name, what))
        t.eq(addresses(node or {})[:2], [("InternalIP", inst["private_ipv4"]), ("ExternalIP", inst["public_ipv4"])],
             "%s: the Node has the instance's addresses" % name)
        t.ok(wait_for(lambda: any("READY=1" in m for m in i.notify_messages()), 10), "%s: READY=1" % name)
        w = writes(k, node_user(name), name)
        t.eq([len([x for x in w if x[1] == sub and x[3] == 200]) for sub in ("status", "")], [1, 1],
             "%s: the addresses and the taint-removing PATCH are each stored once (%r)" % (name, w))
        # The lost answer itself is a failure the initializer reports (it cannot know the write
        # was stored); the 409 that a resent Node PATCH meets is not.
        warnings = [(e["reason"], e.get("message", "")) for e in events(k, name) if e.get("type") == "Warning"]
        t.eq([x for x in warnings if "409" in x[1] or "onflict" in x[1] or "modified" in x[1]], [],
             "%s: no Warning Event for a conflict (%r)" % (name, warnings))


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    if os.geteuid() != 0:
        t.skip_all("network namespaces need root")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            inst = c.add_instance({"platform": "aws", "name": "la1"})
            with node_namespace(d, inst, dict(inst, ipv6=None), "cnl", 253) as (ns, link, k):
                t.run(lost_answer, d, ns, link, k, inst, "la-status", "status")
                t.run(lost_answer, d, ns, link, k, inst, "la-node", "")
                # The 409 a resent PATCH may meet, made certain.
                t.run(lost_answer, d, ns, link, k, inst, "la-conflict", "", "conflict")
    sys.exit(t.done())


main()
