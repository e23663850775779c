#!/usr/bin/env python3
"""cloudnode-controller reconciles CloudnodeClusters (the Cluster API InfraCluster, contract
v1beta2) against the fake API server and the fake cloud: finalizer, waiting for the owner
Cluster, failure domains from the cloud's locations (all, or one region's), provisioned/ready
and the Ready and Paused conditions, spec.controlPlaneEndpoint left alone, pause by the Cluster
and by annotation, deletion, clusters of another provider left alone, a rejected token as a
terminal condition without retries, and 429s retried; OpenStack's availability zones and Proxmox
VE's online nodes as failure domains."""
import json
import os
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

from cncapi import (CLUSTERS, CNC, MERGE, RBAC, USER, CapiEnv, Controller, condition, make_cnc,  # noqa: E402
                    provisioned, wait_for)
from capimachines import machine_env  # noqa: E402
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER, FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

FINALIZER = "cloudnodecluster.infrastructure.cluster.x-k8s.io"


def hetzner(env, conf=None):
    return Controller(env.k, env.tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", conf or env.conf])


def cloud_locations(env):
    """What the fake cloud itself answers, for comparison."""
    req = urllib.request.Request(env.c.url + "/v1/locations?per_page=50",
                                 headers={"Authorization": "Bearer " + HETZNER_TOKEN})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["locations"]


def location_requests(env, mark):
    """The controller's (not this test's) location requests since mark."""
    return [r for r in env.c.requests()[mark:] if r.get("path", "").startswith("/v1/locations") and
            (r.get("headers") or {}).get("User-Agent", "").startswith("cloudnode")]


def test_provisioned(t, env):
    ctl = hetzner(env)
    try:
        c = env.cluster("c1")
        endpoint = {"host": "api.c1.example", "port": 6443}
        mark = len(env.c.requests())
        make_cnc(env, "c1", owner=c, spec={"provider": "hetzner", "controlPlaneEndpoint": endpoint})
        o = wait_for(lambda: provisioned(env, "c1"), 30)
        t.ok(o, "provisioned", ctl.output()[-2000:])
        o = o or {}
        st = o.get("status") or {}
        t.ok(st.get("ready") is True, "v1beta1 status.ready")
        want = [loc["name"] for loc in cloud_locations(env)]
        t.eq([fd.get("name") for fd in st.get("failureDomains", [])], want,
             "failure domains are the cloud's locations, as a v1beta2 list")
        fsn1 = next((fd for fd in st.get("failureDomains", []) if fd.get("name") == "fsn1"), {})
        t.eq(fsn1.get("controlPlane"), True, "usable by control planes")
        t.eq((fsn1.get("attributes") or {}).get("networkZone"), "eu-central", "network zone as an attribute")
        t.eq(condition(o, "Ready", "status"), "True", "Ready=True")
        t.eq(condition(o, "Paused", "status"), "False", "Paused=False")
        t.ok(FINALIZER in o["metadata"].get("finalizers", []), "finalizer added")
        t.eq(o["spec"].get("controlPlaneEndpoint"), endpoint, "spec.controlPlaneEndpoint as the user set it")
        # Settled once the cloud config's condition is written too (Forbidden here: this
        # namespace has no RoleBinding to cloudnode:controller:capi-cloud-config).
        o = wait_for(lambda: condition(env.obj(CNC, "c1"), "CloudConfigPublished") and env.obj(CNC, "c1"), 30) or o
        t.eq(condition(o, "CloudConfigPublished"), "Forbidden", "CloudConfigPublished says what is missing")
        rv = o["metadata"]["resourceVersion"]
        time.sleep(1.5)
        t.eq(env.obj(CNC, "c1")["metadata"]["resourceVersion"], rv, "an idle cluster is not written again")
        t.eq(len(location_requests(env, mark)), 1, "one location request")
    finally:
        ctl.stop()
    ctl = hetzner(env)
    try:
        mark = len(env.c.requests())
        t.ok(wait_for(lambda: "CloudnodeCluster default/c1: provision" in ctl.output(), 30),
             "the restarted controller passed over c1", ctl.output()[-2000:])
        time.sleep(0.5)  # the calls of that pass, if it made any, come after its log line
        t.eq(location_requests(env, mark), [], "a restart reuses the failure domains of this generation")
        env.k.api("PATCH", CNC + "/c1", {"spec": {"region": "us-east"}}, MERGE)
        t.ok(wait_for(lambda: [fd["name"] for fd in env.obj(CNC, "c1")["status"]["failureDomains"]] == ["ash"], 30),
             "a spec change asks again")
    finally:
        ctl.stop()


def test_condition_conflict(t, env):
    """The CloudConfigPublished condition is a conditional write (the resourceVersion of the
    controller's copy): one that meets a newer object (409) is made again by the pass that object's
    event brings, not a minute later when the Secret is tried again."""
    if not env.k.FAULT_INJECTION:
        t.skip("a CloudConfigPublished write that conflicts is made again", "fault injection is the fake API server's")
        return
    ctl = hetzner(env)
    try:
        # The first status write (provisioned) goes through; every one after it meets a conflict.
        env.k.inject({"verb": "patch", "resource": "cloudnodeclusters", "subresource": "status", "name": "c1c",
                      "action": "conflict", "skip": 1, "count": -1})
        c = env.cluster("c1c")
        make_cnc(env, "c1c", owner=c, spec={"provider": "hetzner",
                                            "controlPlaneEndpoint": {"host": "api.c1c.example", "port": 6443}})

        def published_then_conflicted():
            calls = [a for a in env.k.audit() if a.get("user") == USER]
            read = [i for i, a in enumerate(calls) if a.get("verb") == "get" and a.get("resource") == "secrets" and
                    a.get("name") == "c1c-cloudnode-cloud-config"]
            return read and any(a.get("verb") == "patch" and a.get("name") == "c1c" and a.get("code") == 409
                                for a in calls[read[0]:])
        t.ok(wait_for(published_then_conflicted, 30),
             "the Secret tried (its create refused), then the condition's write met a conflict (409)",
             ctl.output()[-2000:])
        t.eq(condition(env.obj(CNC, "c1c"), "CloudConfigPublished"), None, "so the condition is not there")
        env.k.clear_faults()
        # Any change of the object brings a pass (here a label, as a user's kubectl label would).
        env.k.api("PATCH", CNC + "/c1c", {"metadata": {"labels": {"example.com/touched": "yes"}}}, MERGE)
        t.eq(wait_for(lambda: condition(env.obj(CNC, "c1c"), "CloudConfigPublished"), 15), "Forbidden",
             "the next pass writes the condition again, well before the Secret is tried again")
    finally:
        env.k.clear_faults()
        ctl.stop()


def test_region(t, env):
    ctl = hetzner(env)
    try:
        c = env.cluster("c2")
        make_cnc(env, "c2", owner=c, spec={"provider": "hetzner", "region": "eu-central"})
        o = wait_for(lambda: provisioned(env, "c2"), 30) or {}
        want = [loc["name"] for loc in cloud_locations(env) if loc["network_zone"] == "eu-central"]
        t.eq([fd["name"] for fd in (o.get("status") or {}).get("failureDomains", [])], want,
             "a region keeps the locations of that network zone")
        c = env.cluster("c2b")
        make_cnc(env, "c2b", owner=c, spec={"provider": "hetzner", "region": "mars"})
        t.eq(wait_for(lambda: condition(env.obj(CNC, "c2b"), "Ready"), 30), "InvalidConfiguration",
             "a region without locations is a terminal condition")
        t.ok(not provisioned(env, "c2b"), "and not provisioned")
    finally:
        ctl.stop()


def test_wait_for_owner(t, env):
    ctl = hetzner(env)
    try:
        make_cnc(env, "c3")
        t.eq(wait_for(lambda: condition(env.obj(CNC, "c3"), "Ready"), 30), "WaitingForCluster",
             "waits for the owner Cluster")
        t.ok(not provisioned(env, "c3"), "not provisioned meanwhile")
        c = env.cluster("c3")
        env.k.api("PATCH", CNC + "/c3", {"metadata": {"ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c3",
             "uid": c["metadata"]["uid"]}]}}, MERGE)
        t.ok(wait_for(lambda: provisioned(env, "c3"), 30), "provisioned once the Cluster owns it")
    finally:
        ctl.stop()


def test_paused(t, env):
    ctl = hetzner(env)
    try:
        c = env.cluster("c4", paused=True)
        make_cnc(env, "c4", owner=c)
        t.eq(wait_for(lambda: condition(env.obj(CNC, "c4"), "Paused", "status"), 30), "True",
             "a paused Cluster: Paused=True")
        o = env.obj(CNC, "c4")
        t.ok(not provisioned(env, "c4") and FINALIZER not in o["metadata"].get("finalizers", []),
             "and nothing else done")
        time.sleep(0.5)
        t.ok("CloudnodeCluster default/c4: provision" not in ctl.output(), "no provisioning while paused")
        env.k.api("PATCH", CLUSTERS + "/c4", {"spec": {"paused": False}}, MERGE)
        t.ok(wait_for(lambda: provisioned(env, "c4"), 30), "provisioned once unpaused")
        t.eq(condition(env.obj(CNC, "c4"), "Paused", "status"), "False", "Paused=False")

        c = env.cluster("c5")
        make_cnc(env, "c5", owner=c, annotations={"cluster.x-k8s.io/paused": ""})
        t.eq(wait_for(lambda: condition(env.obj(CNC, "c5"), "Paused", "status"), 30), "True",
             "the paused annotation: Paused=True")
        t.ok(not provisioned(env, "c5"), "not provisioned")
        env.k.api("PATCH", CNC + "/c5", {"metadata": {"annotations": {"cluster.x-k8s.io/paused": None}}}, MERGE)
        t.ok(wait_for(lambda: provisioned(env, "c5"), 30), "provisioned once the annotation is gone")
    finally:
        ctl.stop()


def test_delete(t, env):
    ctl = hetzner(env)
    try:
        c = env.cluster("c6")
        make_cnc(env, "c6", owner=c)
        t.ok(wait_for(lambda: provisioned(env, "c6"), 30), "c6 provisioned")
        env.k.api("DELETE", CLUSTERS + "/c6")
        env.k.api("DELETE", CNC + "/c6")
        t.ok(wait_for(lambda: env.obj(CNC, "c6") is None, 30), "deleted: the finalizer is removed",
             ctl.output()[-1500:])
    finally:
        ctl.stop()


def test_other_provider(t, env):
    ctl = hetzner(env)
    try:
        c = env.cluster("c7")
        make_cnc(env, "c7", owner=c, spec={"provider": "openstack"})
        c8 = env.cluster("c8")
        make_cnc(env, "c8", owner=c8)
        # c8 provisioned means the reconciler has passed over c7 too.
        t.ok(wait_for(lambda: provisioned(env, "c8"), 30), "c8 provisioned")
        o = env.obj(CNC, "c7")
        t.ok(not o.get("status") and not o["metadata"].get("finalizers"),
             "a cluster of another provider is left to that provider's controller", o)
    finally:
        ctl.stop()


def test_unauthorized(t, env):
    ctl = hetzner(env, env.hetzner_conf("bad.conf", "not-the-token"))
    try:
        mark = len(env.c.requests())
        c = env.cluster("c9")
        make_cnc(env, "c9", owner=c)
        t.eq(wait_for(lambda: condition(env.obj(CNC, "c9"), "Ready"), 30), "Unauthorized",
             "a rejected token is a terminal condition")
        time.sleep(2.0)
        t.eq(len(location_requests(env, mark)), 1, "and is not retried")
        t.ok("not-the-token" not in ctl.output(), "the token is not logged")
    finally:
        ctl.stop()


def nova_zones(env):
    """The availability zones the fake Nova itself lists, for comparison."""
    scoped = {"name": OPENSTACK_USER["project"], "domain": {"name": OPENSTACK_USER["domain"]}}
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": OPENSTACK_USER["name"], "password": OPENSTACK_USER["password"],
        "domain": {"name": OPENSTACK_USER["domain"]}}}}, "scope": {"project": scoped}}}
    req = urllib.request.Request(env.c.url + "/v3/auth/tokens", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        token = r.headers["X-Subject-Token"]
    req = urllib.request.Request(env.c.url + "/compute/v2.1/os-availability-zone", headers={"X-Auth-Token": token})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["availabilityZoneInfo"]


def cloud_failure_domains(t, env, ctl, provider, name, what):
    """A provisioned CloudnodeCluster of the provider: its status.failureDomains."""
    c = env.cluster(name)
    make_cnc(env, name, owner=c, spec={"provider": provider})
    o = wait_for(lambda: provisioned(env, name), 30) or {}
    t.ok(o, "%s: provisioned" % what, ctl.output()[-2000:])
    return (o.get("status") or {}).get("failureDomains", [])


def region_refused(t, env, provider, name, region):
    c = env.cluster(name)
    make_cnc(env, name, owner=c, spec={"provider": provider, "region": region})
    t.eq(wait_for(lambda: condition(env.obj(CNC, name), "Ready"), 30), "InvalidConfiguration",
         "%s: a region other than the cloud config's is a terminal condition" % provider)


def test_openstack(t, tmp):
    with machine_env(os.path.join(tmp, "openstack"), provider="openstack") as env:
        ctl = env.controller()
        try:
            fds = cloud_failure_domains(t, env, ctl, "openstack", "os1", "OpenStack")
            zones = nova_zones(env)
            want = [z["zoneName"] for z in zones if z["zoneState"]["available"]]
            t.ok(len(want) < len(zones), "(the fake has an unavailable zone)")
            t.eq([fd["name"] for fd in fds], want, "failure domains are the available availability zones")
            t.eq({(fd.get("attributes") or {}).get("region") for fd in fds}, {"RegionOne"},
                 "with the cloud config's region")
            region_refused(t, env, "openstack", "os2", "RegionTwo")
        finally:
            ctl.stop()


def test_proxmox(t, tmp):
    with machine_env(os.path.join(tmp, "proxmoxve"), provider="proxmoxve") as env:
        ctl = env.controller()
        try:
            fds = cloud_failure_domains(t, env, ctl, "proxmoxve", "pv1", "Proxmox VE")
            t.eq([(fd["name"], (fd.get("attributes") or {}).get("region")) for fd in fds],
                 [("pve1", "pve"), ("pve2", "pve")], "failure domains are the cluster's online nodes, with its region")
            region_refused(t, env, "proxmoxve", "pv2", "other")
        finally:
            ctl.stop()


def test_rate_limited(t, env):
    env.c.throttle("hetzner", count=3)
    ctl = hetzner(env)
    try:
        mark = len(env.c.requests())
        c = env.cluster("c10")
        make_cnc(env, "c10", owner=c)
        t.ok(wait_for(lambda: provisioned(env, "c10"), 60), "429s: retried until provisioned", ctl.output()[-1500:])
        t.ok(len(location_requests(env, mark)) >= 2, "after at least one retry")
    finally:
        ctl.stop()
        env.c.clear_faults()


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with kube_server(os.path.join(tmp, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(tmp, "cloud")) as c:
            env = CapiEnv(k, c, tmp)
            env.setup()
            t.run(test_provisioned, env)
            # Before the terminal region test: its cluster is asked for again on each start.
            t.run(test_unauthorized, env)
            t.run(test_region, env)
            t.run(test_condition_conflict, env)
            t.run(test_wait_for_owner, env)
            t.run(test_paused, env)
            t.run(test_delete, env)
            t.run(test_other_provider, env)
            t.run(test_rate_limited, env)
        t.run(test_openstack, tmp)
        t.run(test_proxmox, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
