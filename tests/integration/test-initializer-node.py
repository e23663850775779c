#!/usr/bin/env python3
"""cloudnode-initializer in node mode, inside a network namespace with real interfaces: the
instance's metadata served at 169.254.169.254 in the namespace (tests/fake-cloud, platform aws),
the API server reached over a veth pair, the node-mode service account with the shipped RBAC
and admission policy. Covers: a Node that registers late, exactly two writes, READY=1, dual
stack with an IPv6 address added later (one status write, only for that change), an unrelated
address that changes nothing, a dual-stack provided-node-ip pair that matches nothing (tainted,
Warning Event, False condition next to the kubelet's) until the address is configured (then
initialized, the pair first in its order, the condition True)."""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import (BINARY, Initializer, addresses, condition, events, get_node,  # noqa: E402
                    initialized, make_node, node_gets, node_namespace, node_user, request_start, tainted, wait_for,
                    writes)
from fakecloud import FakeCloud  # noqa: E402

COND = "CloudProviderInitialized"
NO_CONTENT_TYPE = "the real API server's audit log does not record a request's Content-Type"


def ready_sent(i):
    return any("READY=1" in m for m in i.notify_messages())


def test_node_mode(t, d, ns, link, k, c, inst):
    host_ip = link[1]
    cfg = os.path.join(d, "cloudnode.yaml")
    with open(cfg, "w") as f:
        f.write("platform: aws\nrole: worker\n")
    name = "nm1"
    user = node_user(name)  # the node's own ServiceAccount
    args = ["--node-name=" + name, "--kubeconfig=" + k.node_kubeconfig(name), "--config=" + cfg,
            "--bind-address=" + link[2], "-v", "4"]
    private4, public4, v6 = inst["private_ipv4"], inst["public_ipv4"], inst["ipv6"]

    i = Initializer(args, netns=ns.name, state_dir=d, name="node").start()
    try:
        time.sleep(1.5)
        t.ok(i.proc.poll() is None, "waits for a Node that is not registered yet")
        t.ok(not ready_sent(i), "no READY=1 before the Node is initialized")
        make_node(k, name, addresses=[{"type": "Hostname", "address": "kubelet-name"}])
        node = wait_for(lambda: initialized(k, name), 30)
        t.ok(node, "the late Node is initialized", i.log()[-3000:])
        node = node or {}
        hostname = next((a for ty, a in addresses(node) if ty == "Hostname"), None)
        t.eq(addresses(node), [("InternalIP", private4), ("ExternalIP", public4), ("Hostname", hostname)],
             "IPv4 addresses only: the IPv6 address is not on an interface yet")
        t.ok(hostname and hostname != "kubelet-name", "the metadata hostname replaces the kubelet's")
        t.ok(node.get("spec", {}).get("providerID", "").startswith("aws:///") and
             node["spec"]["providerID"].endswith("/" + inst["id"]), "providerID aws:///<zone>/<id>", node.get("spec"))
        labels = node.get("metadata", {}).get("labels", {})
        t.eq(labels.get("node.kubernetes.io/instance-type"), inst["type"], "instance-type label")
        t.ok(labels.get("topology.kubernetes.io/zone") == inst["zone"] and labels.get("topology.kubernetes.io/region"),
             "zone and region labels", labels)
        # The audit record of a write follows its response (stage ResponseComplete), so the Node
        # can show the second write before the audit log does.
        wait_for(lambda: len(writes(k, user, name)) >= 2, 10)
        t.eq(writes(k, user, name), [("patch", "status", name, 200), ("patch", "", name, 200)],
             "exactly two writes: status, then the Node")
        if not k.AUDIT_CONTENT_TYPE:
            t.skip("no condition involved: the status write is a plain merge patch", NO_CONTENT_TYPE)
        else:
            t.eq([r.get("contentType") for r in k.audit() if r.get("user") == user
                  and r.get("subresource") == "status"],
                 ["application/merge-patch+json"], "no condition involved: the status write is a plain merge patch")
        t.ok(wait_for(lambda: ready_sent(i), 5), "READY=1 once the Node is initialized")
        t.ok(wait_for(lambda: events(k, name, "Synced"), 10), "Synced event, created by the node-mode identity")
        t.ok("Initialized node %s" % name in i.log(), "one log line says the Node is initialized")

        # IPv6 configured later: one status write with the dual-stack list
        ns.run(["ip", "addr", "add", v6 + "/64", "dev", "eth0", "nodad"], check=True)
        n2 = wait_for(lambda: ("InternalIP", v6) in addresses(get_node(k, name)) and get_node(k, name), 15)
        t.ok(n2, "an IPv6 address added later is written", i.log()[-2000:])
        t.eq(addresses(n2 or {}), [("InternalIP", private4), ("InternalIP", v6), ("ExternalIP", public4),
                                    ("Hostname", hostname)], "dual stack: IPv4 before IPv6 within a type")
        time.sleep(1)
        t.eq(len(writes(k, user, name)), 3, "one more write, on the status")
        if len(writes(k, user, name)) != 3:
            t.diag("writes: %r\n%s" % (writes(k, user, name), i.log()[-4000:]))

        # an address the metadata does not know changes nothing
        ns.run(["ip", "addr", "add", "192.0.2.50/32", "dev", "eth0"], check=True)
        time.sleep(2.5)
        t.eq(len(writes(k, user, name)), 3, "an unrelated address causes no write")
        # removing the IPv6 address takes it out again
        ns.run(["ip", "addr", "del", v6 + "/64", "dev", "eth0"], check=True)
        t.ok(wait_for(lambda: ("InternalIP", v6) not in addresses(get_node(k, name)), 15),
             "a removed address is taken out")
        t.eq(node_gets(k, user), [], "no GET of the Node: one watch narrowed to metadata.name")
        forbidden = [r for r in k.audit() if r.get("user") == user and r.get("code") in (401, 403)]
        t.eq([(r["verb"], r["resource"]) for r in forbidden], [], "everything it needs is allowed by the shipped RBAC")
    finally:
        rc = i.stop()
        t.ok(rc == 0, "SIGTERM: clean exit", None if rc == 0 else "exit %s; its log ends:\n%s" % (rc, i.log()[-4000:]))

    # provided-node-ip naming the instance's IPv6 address, which is not on an interface yet: no
    # match. The Node stays tainted, a Warning Event and a False condition say why, the kubelet's
    # Ready condition is untouched. Once the address is configured, the Node is initialized and
    # the condition turns True, within the usual two writes.
    k.api("DELETE", "/api/v1/nodes/" + name)
    make_node(k, name, annotations={"alpha.kubernetes.io/provided-node-ip": "%s,%s" % (v6, private4)}, ready=True)
    before = len(writes(k, user, name))
    i = Initializer(args, netns=ns.name, state_dir=d, name="node-pip").start()
    try:
        t.ok(wait_for(lambda: events(k, name, "ProvidedNodeIPMismatch"), 20), "mismatch: Warning event",
             i.log()[-2000:])
        cond = wait_for(lambda: condition(get_node(k, name), COND), 10)
        t.ok(cond and cond["status"] == "False" and cond["reason"] == "ProvidedNodeIPMismatch" and
             v6 in cond.get("message", "") and cond.get("lastTransitionTime"),
             "mismatch: condition %s False, with the reason and the address" % COND, cond)
        node = get_node(k, name)
        ready = condition(node, "Ready")
        t.ok(ready and ready["status"] == "True" and ready["reason"] == "KubeletReady",
             "mismatch: the kubelet's Ready condition is kept", node.get("status"))
        t.ok(tainted(node), "mismatch: the Node stays tainted")
        time.sleep(2.5)  # retries happen meanwhile; the condition is written once
        t.eq(writes(k, user, name)[before:], [("patch", "status", name, 200)],
             "mismatch: one write, the condition on the status; nothing on the Node")
        t.ok(tainted(get_node(k, name)) and not ready_sent(i), "mismatch: still tainted, no READY=1")
        ns.run(["ip", "addr", "add", v6 + "/64", "dev", "eth0", "nodad"], check=True)
        n3 = wait_for(lambda: initialized(k, name), 30)
        t.ok(n3, "the address appears: initialized", i.log()[-2000:])
        got = addresses(n3 or {})
        t.eq(got[:2], [("InternalIP", v6), ("InternalIP", private4)], "the pair comes first, in its order")
        cond = condition(n3 or {}, COND)
        t.ok(cond and cond["status"] == "True" and cond["reason"] == "Initialized",
             "the condition is resolved: True", cond)
        t.ok(condition(n3 or {}, "Ready") == ready, "the kubelet's Ready condition is still as it was")
        # The audit record of the last PATCH is written as its answer completes: it may follow
        # the change the watch showed by a moment.
        want = [("patch", "status", name, 200), ("patch", "", name, 200)]
        wait_for(lambda: writes(k, user, name)[before + 1:] == want, 5)
        t.eq(writes(k, user, name)[before + 1:], want,
             "initialized in two writes: status (addresses and condition), then the Node")
        status_writes = sorted((r for r in k.audit() if r.get("user") == user and r.get("name") == name
                                and r.get("subresource") == "status"), key=request_start)
        if not k.AUDIT_CONTENT_TYPE:
            t.skip("condition writes are strategic merge patches (conditions merge by type)", NO_CONTENT_TYPE)
        else:
            t.eq([r.get("contentType") for r in status_writes][-2:], ["application/strategic-merge-patch+json"] * 2,
                 "condition writes are strategic merge patches (conditions merge by type)")
        t.ok(wait_for(lambda: ready_sent(i), 5), "READY=1")
    finally:
        i.stop()

    # metadata service unreachable: the Node stays tainted and a Warning says why
    bad = os.path.join(d, "unreachable.yaml")
    with open(bad, "w") as f:
        f.write("platform: aws\nmetadata:\n  endpoint: http://127.0.0.1:9\n  retries: 0\n  deadline: 2s\n")
    k.api("DELETE", "/api/v1/nodes/" + name)
    make_node(k, name)
    args_bad = [a if not a.startswith("--config=") else "--config=" + bad for a in args]
    i = Initializer(args_bad, netns=ns.name, state_dir=d, name="node-nometa").start()
    try:
        ev = wait_for(lambda: events(k, name, "FailedToGetInstance"), 30)
        t.ok(ev, "metadata unreachable: Warning event FailedToGetInstance", i.log()[-2000:])
        t.ok(tainted(get_node(k, name)), "metadata unreachable: the Node stays tainted")
        t.ok(i.proc.poll() is None and not ready_sent(i), "metadata unreachable: still running, not ready")
    finally:
        i.stop()


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    if os.geteuid() != 0:
        t.skip_all("network namespaces need root")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            inst = c.add_instance({"platform": "aws", "name": "nm1"})
            # The namespace starts with the IPv4 address only; IPv6 is added by the test.
            with node_namespace(d, inst, dict(inst, ipv6=None), "cnh", 251) as (ns, link, k):
                t.run(test_node_mode, d, ns, link, k, c, inst)
    sys.exit(t.done())


main()
