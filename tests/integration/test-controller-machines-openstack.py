#!/usr/bin/env python3
"""cloudnode-controller as a Cluster API infrastructure provider on OpenStack, against the fake
API server (Cluster API's Cluster and Machine as CRDs) and the fake cloud's Keystone and Nova:
create -> ready -> delete (the server carries the machine's UID in its metadata, the bootstrap
data as base64 user_data), an invalid spec as a terminal condition without retries, a server
removed out of band, a 429 storm with Retry-After honoured, a server Nova puts in ERROR, a
server already carrying the UID adopted instead of created, two servers with one UID refused,
a create and a delete whose answers were lost after Nova did them, and SIGKILL pinned to every
cloud request of a create and a delete (and at a random moment), without duplicate or orphaned
servers.
The provider-neutral scenarios are in tests/pylib/capimachines.py."""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402

from capimachines import (Env, test_invalid_spec, test_kill_points, test_post_commit, test_lifecycle,  # noqa: E402
                          test_out_of_band_delete, test_rate_limited, test_two_replicas,
                          test_wait_for_bootstrap, machine_env, wait_for)

UID_LABEL = "cloudnode.io/machine-uid"
EADDRINUSE, ENOENT = 98, 2


def provider_calls(env, *args):
    """The provider's machine calls through tests/provider-lookup, one JSON result per call."""
    out = subprocess.run([build("tests", "provider-lookup"), "openstack", env.conf] + list(args),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def failure(env, name):
    return ((env.get(name) or {}).get("status") or {}).get("failureReason")


def ready_reason(env, name):
    for c in ((env.get(name) or {}).get("status") or {}).get("conditions", []):
        if c["type"] == "Ready":
            return c.get("reason"), c.get("message")
    return None, None


def test_nova_view(t, env):
    """What Nova was sent and what the controller recorded from it."""
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        spec = {"flavor": "m1.medium", "image": "img-1", "availabilityZone": "az-2", "keyName": "ops",
                "securityGroups": ["default", "k8s"], "metadata": {"team": "infra"}}
        cnm = env.machine("nv", spec=spec)
        uid = cnm["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("nv"), 40), "ready", ctl.output()[-2000:])
        srv = env.servers(uid)
        t.eq(len(srv), 1, "one server")
        if srv:
            s = srv[0]
            t.eq(s["labels"], {"team": "infra", UID_LABEL: uid}, "metadata: the spec's plus the UID")
            t.eq(s["user_data"], "#cloud-config\nhostname: nv", "user_data is the bootstrap data")
            t.eq((s["type"], s["zone"], s["extra"].get("key_name")), ("m1.medium", "az-2", "ops"),
                 "flavor, availability zone and key name as the spec says")
            t.eq(s["extra"].get("security_groups"), [{"name": "default"}, {"name": "k8s"}], "security groups")
            t.eq(s["extra"].get("networks"), "auto", "no network in the spec: networks \"auto\"")
            st = env.get("nv")["status"]
            t.eq(st.get("instanceID"), s["id"], "status.instanceID is the Nova server id")
            t.eq(st.get("instanceState"), "ACTIVE", "status.instanceState is Nova's status")
            want = [{"type": "InternalIP", "address": a} for a in (s["private_ipv4"], s.get("ipv6")) if a]
            t.eq(st.get("addresses"), want + [{"type": "Hostname", "address": "nv"}],
                 "addresses from Nova: the fixed ones internal, the name as Hostname")
        env.delete("nv")
        t.ok(wait_for(lambda: env.gone("nv"), 40), "deleted")
        t.eq(env.servers(uid), [], "no server left")
        deletes = [r for r in env.c.requests() if r.get("method") == "DELETE" and srv and
                   r.get("path", "").endswith("/servers/" + srv[0]["id"])]
        t.eq(len(deletes), 1, "one DELETE; then the list is asked until the server is gone")
        log = env.c.requests()[mark:]
        tokens = [r for r in log if r.get("path", "").endswith("/v3/auth/tokens")]
        nova = [r for r in log if r.get("service") == "compute"]
        t.ok(len(tokens) == 1 and len(nova) > 3, "one Keystone token serves the whole lifecycle (%d Nova requests)"
             % len(nova), tokens)
        t.ok(all("demo-password" not in str(r) for r in nova), "the password goes to Keystone only")
    finally:
        ctl.stop()


def test_validation(t, env):
    ctl = env.controller()
    try:
        before = len(env.c.requests())
        env.machine("inv", spec={"flavor": "m1.small", "image": "x", "network": "private"})
        t.eq(wait_for(lambda: failure(env, "inv"), 30), "InvalidConfiguration", "a network name is refused")
        msg = (env.get("inv") or {}).get("status", {}).get("failureMessage", "")
        t.ok("UUID" in msg, "with the reason", msg)
        time.sleep(1.0)
        t.eq([r for r in env.c.requests()[before:] if r.get("platform") == "openstack"], [],
             "before any request to the cloud")
        env.delete("inv")
        t.ok(wait_for(lambda: env.gone("inv"), 30), "and deleted cleanly")
    finally:
        ctl.stop()


def test_error_fault(t, env):
    """Nova puts the server in ERROR: a 4xx fault is terminal, with Nova's message."""
    env.c.settings(nova_build_errors=[{"code": 400, "message": "Image img-bad is not active."}])
    ctl = env.controller()
    try:
        cnm = env.machine("err")
        t.eq(wait_for(lambda: failure(env, "err"), 30), "InvalidConfiguration", "ERROR with a 4xx fault is terminal")
        t.eq((env.get("err") or {}).get("status", {}).get("failureMessage"), "Image img-bad is not active.",
             "with Nova's fault message")
        t.eq(len(env.servers(cnm["metadata"]["uid"])), 1, "the errored server is not replaced")
        env.delete("err")
        t.ok(wait_for(lambda: env.gone("err"), 30), "deleting the machine deletes the errored server")
        t.eq(env.servers(cnm["metadata"]["uid"]), [], "none left")
    finally:
        ctl.stop()
        env.c.settings(nova_build_errors=[])


def test_adopt_and_multiple(t, env):
    """Servers that already carry a machine's UID (a create whose status write was lost): one is
    adopted, two are refused and neither adopted nor added to."""
    cnm_a = env.machine("adopt", bootstrap=False)
    cnm_m = env.machine("multi", bootstrap=False)
    pre = env.c.add_instance({"platform": "openstack", "name": "adopt", "labels": {UID_LABEL: cnm_a["metadata"]["uid"]}})
    for _ in range(2):
        env.c.add_instance({"platform": "openstack", "name": "multi", "labels": {UID_LABEL: cnm_m["metadata"]["uid"]}})
    # A same-named server of another machine is not this machine's.
    env.c.add_instance({"platform": "openstack", "name": "adopt", "labels": {UID_LABEL: "someone-else"}})
    for n in ("adopt", "multi"):
        env.k.api("POST", "/api/v1/namespaces/default/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": n + "-bootstrap"},
            "data": {"value": base64.b64encode(b"#cloud-config\n").decode()}})
        env.k.api("PATCH", "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/" + n,
                  {"spec": {"bootstrap": {"dataSecretName": n + "-bootstrap"}}}, "application/merge-patch+json")
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: env.ready("adopt"), 40), "the server with the UID is adopted", ctl.output()[-2000:])
        t.eq(env.get("adopt")["spec"]["providerID"], "openstack:///%s" % pre["id"], "providerID names it")
        t.ok(wait_for(lambda: ready_reason(env, "multi")[0] == "MultipleInstances", 30),
             "two servers with one UID: MultipleInstances", ready_reason(env, "multi"))
        t.eq([r for r in env.c.requests()[mark:] if env.is_create(r)], [], "and nothing was created")
    finally:
        ctl.stop()
    for n in ("adopt", "multi"):
        env.delete(n)
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: env.gone("adopt") and env.gone("multi"), 40), "both deleted", ctl.output()[-2000:])
        t.eq([i["labels"].get(UID_LABEL) for i in env.c.instances() if i["platform"] == "openstack"],
             ["someone-else"], "every server of theirs deleted, the other machine's left alone")
    finally:
        ctl.stop()
    for i in env.c.instances():
        env.c.remove_instance(i["id"])


def test_provider_calls(t, env):
    """migrate_uid, a Nova 401 in a machine call, cleanup: the provider's calls on their own."""
    c = env.c
    srv = c.add_instance({"platform": "openstack", "name": "mg", "labels": {UID_LABEL: "u1", "team": "x"}})
    pid = "openstack:///%s" % srv["id"]
    r1, r2, r3, r4 = provider_calls(env, "migrate", "%s,u1,u2" % pid, "migrate", "%s,u1,u2" % pid,
                                    "migrate", "%s,wrong,u3" % pid, "migrate", "openstack:///nosuch,,u3")
    t.eq((r1["error"], r1.get("instance", {}).get("id")), (0, srv["id"]), "migrate_uid rewrites the server's UID")
    t.eq(c.get_instance(srv["id"])["labels"], {UID_LABEL: "u2", "team": "x"},
         "in its metadata, keeping the other items")
    t.eq(r2["error"], 0, "a repeated migrate_uid finds it done")
    t.eq((r3["error"], r3["class"]), (-EADDRINUSE, "terminal"), "a server carrying another machine's UID is refused")
    t.eq(c.get_instance(srv["id"])["labels"][UID_LABEL], "u2", "and left alone")
    t.eq(r4["class"], "not-found", "migrate_uid of a missing server is not-found")

    # Nova refuses the token the first call cached: the second call fetches one more, once.
    p = subprocess.Popen([build("tests", "provider-lookup"), "openstack", env.conf, "machine-get", "mg,u2",
                          "wait", "-", "machine-get", "mg,u2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    g1 = json.loads(p.stdout.readline())
    p.stdout.readline()
    before = len(c.requests())
    c.fail({"service": "compute", "status": 401, "count": 1})
    g2 = json.loads(p.communicate("\n", timeout=60)[0].splitlines()[0])
    c.clear_faults()
    tokens = [r for r in c.requests()[before:] if r.get("path", "").endswith("/v3/auth/tokens")]
    t.eq((g1["error"], g2["error"], g2.get("instance", {}).get("id")), (0, 0, srv["id"]),
         "a token Nova rejects is renewed in a machine call")
    t.eq(len(tokens), 1, "with one token more")
    d1, = provider_calls(env, "cleanup", "mg,u2")
    t.eq((d1["error"], d1["done"]), (0, False), "cleanup deletes and is not done until Nova lists it no more")
    d2 = wait_for(lambda: provider_calls(env, "cleanup", "mg,u2")[0]["done"], 10)
    t.ok(d2, "then done")
    deletes = [r for r in c.requests()[before:] if r.get("method") == "DELETE"]
    t.eq(len(deletes), 1, "with one DELETE")
    d3, = provider_calls(env, "cleanup", "never,u9")
    t.eq((d3["error"], d3["done"]), (0, True), "a server that is gone already is done")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, provider="openstack") as env:
        t.run(test_lifecycle, env)
        t.run(test_nova_view, env)
        t.run(test_validation, env)
        t.run(test_invalid_spec, env)
        t.run(test_error_fault, env)
        t.run(test_out_of_band_delete, env)
        t.run(test_rate_limited, env)
        t.run(test_adopt_and_multiple, env)
        t.run(test_provider_calls, env)
        t.run(test_wait_for_bootstrap, env)
        t.run(test_two_replicas, env)
        t.run(test_post_commit, env)
        t.run(test_kill_points, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
