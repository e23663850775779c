#!/usr/bin/env python3
"""cloudnode-controller gives a CloudnodeCluster with spec.controlPlaneLoadBalancer its
control-plane load balancer (Hetzner Cloud, against the fake cloud): created once, labelled with
the CloudnodeCluster's UID (a controller killed while the create's answer is on its way, and one
restarted afterwards, make no second), its address written as spec.controlPlaneEndpoint before the
cluster is provisioned, a user's endpoint kept as it is, its targets the servers of the cluster's
control-plane machines and no other, deleted with the cluster while load balancers of other owners
(one of a similar name) stay; a load balancer type the cloud refuses and an answer that is not a
load balancer list each end in one clear condition; a cluster recreated by clusterctl move takes
over the load balancer of its previous UID (relabelled, its target selector extended to the new
Cluster's servers) instead of making a second; two carrying the UID are left for a human. OpenStack without Octavia: a floating IP
found by its description, associated with the first control-plane server and moved when that one
goes, released with the cluster, another cluster's left alone, taken over after a move, a garbage
list one clear condition. OpenStack with Octavia: one load balancer (none made twice by a
controller killed while the create's answer was on its way, nor by a restarted one) with a TCP
listener on the spec's port, a pool with its algorithm, a TCP health monitor and the control-plane
servers as members (following them as machines come and go; a 409 from a busy Octavia asked again),
a floating IP on its VIP as the endpoint, seen by `openstack loadbalancer`, and nothing of it left
after the cluster's deletion (cascade) while another cluster's load balancer of the same name
stays. For each cloud: a load balancer whose spec member was removed stays while the cluster lives
and goes with it; one of a cluster moved by clusterctl and deleted before the controller relabelled
it is deleted all the same."""
import calendar
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cliclient import Cli  # noqa: E402
from cntap import Tap  # noqa: E402

from cncapi import CLUSTERS, CNC, MERGE, Controller, condition, make_cnc, provisioned, wait_for  # noqa: E402
from capimachines import machine_env  # noqa: E402
import fakecloud  # noqa: E402
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER  # noqa: E402

FINALIZER = "cloudnodecluster.infrastructure.cluster.x-k8s.io"
OWNER_LABEL = "cloudnode.io/cluster-uid"
CP_LABEL = "cloudnode.io/control-plane-of"
LB_UID = "cloudnode.io/load-balancer-label-uid"
AUTH = {"Authorization": "Bearer " + HETZNER_TOKEN}


def snapshot_when(get, pred, timeout):
    """The first object get() returns that pred accepts within timeout seconds, or None."""
    seen = []

    def check():
        o = get()
        if o is not None and pred(o):
            seen.append(o)
            return True
        return False
    return seen[0] if wait_for(check, timeout) else None


def hetzner(env):
    return Controller(env.k, env.tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", env.conf])


def load_balancers(env):
    code, _, body = env.c.api("GET", "/v1/load_balancers?per_page=50", headers=AUTH)
    assert code == 200, body
    return body["load_balancers"]


def owned(env, uid):
    return [lb for lb in load_balancers(env) if (lb.get("labels") or {}).get(OWNER_LABEL) == uid]


def lb_creates(env, mark):
    return [r for r in env.c.requests()[mark:] if r.get("method") == "POST" and r.get("path") == "/v1/load_balancers"]


def target_servers(lb):
    return sorted(s["server"]["id"] for tg in lb.get("targets") or [] if tg["type"] == "label_selector"
                  for s in tg.get("targets") or [])


def seen_by_hcloud(t, env, lb, uid):
    """Hetzner's own CLI finds the load balancer by the cluster's UID and describes it as the API has it."""
    if not shutil.which("hcloud"):
        t.skip("hcloud sees the load balancer", "hcloud is not installed")
        return
    with tempfile.TemporaryDirectory() as home:
        h = Cli(t, ["hcloud"], dict(os.environ, HOME=home, HCLOUD_ENDPOINT=env.c.url + "/v1", HCLOUD_TOKEN=HETZNER_TOKEN,
                                     HCLOUD_CONFIG=os.path.join(home, "cli.toml")), ["-o", "json"], timeout=60)
        listed = h.json("hcloud load-balancer list", "load-balancer", "list", "--selector", "%s=%s" % (OWNER_LABEL, uid))
        t.eq([x.get("name") for x in listed or []], [lb.get("name")], "hcloud lists it by the cluster's UID")
        d = h.json("hcloud load-balancer describe", "load-balancer", "describe", str(lb.get("id"))) or {}
        t.eq((d.get("public_net", {}).get("ipv4", {}).get("ip"), [s.get("listen_port") for s in d.get("services") or []],
              [tg.get("label_selector", {}).get("selector") for tg in d.get("targets") or []]),
             (lb.get("public_net", {}).get("ipv4", {}).get("ip"), [6443],
              [tg.get("label_selector", {}).get("selector") for tg in lb.get("targets") or []]),
             "and describes its address, service and target")


def test_created_once(t, env):
    c = env.cluster("lb1")
    mark = len(env.c.requests())
    # The create is done by the cloud, and its answer held until the controller is gone.
    env.c.fail({"method": "POST", "path": "^/v1/load_balancers$", "after_commit": True, "reset": True,
                "latency": 30, "count": 1})
    ctl = hetzner(env)
    try:
        cnc = make_cnc(env, "lb1", c, {"provider": "hetzner", "controlPlaneLoadBalancer": {}})
        t.ok(wait_for(lambda: lb_creates(env, mark), 30), "the load balancer is created", ctl.output()[-1500:])
        t.ok(not provisioned(env, "lb1"), "not provisioned while the load balancer is being made")
        # Written before the create is sent; its PATCH may land a moment after the create is seen.
        wait_for(lambda: condition(env.obj(CNC, "lb1"), "Ready") == "LoadBalancerProvisioning", 10)
        t.eq(condition(env.obj(CNC, "lb1"), "Ready"), "LoadBalancerProvisioning", "Ready says why")
    finally:
        ctl.stop()
    env.c.clear_faults()
    ctl = hetzner(env)
    try:
        o = wait_for(lambda: provisioned(env, "lb1"), 30)
        t.ok(o, "a new controller finishes: provisioned", ctl.output()[-1500:])
        lbs = owned(env, cnc["metadata"]["uid"])
        t.eq(len(lbs), 1, "one load balancer carries the cluster's UID")
        t.eq(len(lb_creates(env, mark)), 1, "it was created once: the answer lost with the controller made no second")
        lb = lbs[0] if lbs else {}
        ep = (o or {}).get("spec", {}).get("controlPlaneEndpoint")
        t.eq(ep, {"host": lb.get("public_net", {}).get("ipv4", {}).get("ip"), "port": 6443},
             "spec.controlPlaneEndpoint is the load balancer's public IPv4 address and port 6443")
        t.eq(condition(o, "Ready", "status"), "True", "Ready=True")
        t.ok(lb.get("name", "").startswith("lb1-kube-apiserver-"), "named after the cluster", lb.get("name"))
        t.eq((lb.get("load_balancer_type") or {}).get("name"), "lb11", "CAPH's default type, lb11")
        t.eq((lb.get("algorithm") or {}).get("type"), "round_robin", "and algorithm, round_robin")
        t.eq([(s["protocol"], s["listen_port"], s["destination_port"]) for s in lb.get("services") or []],
             [("tcp", 6443, 6443)], "one TCP service to the API servers' 6443")
        t.eq([(tg["type"], tg.get("label_selector", {}).get("selector")) for tg in lb.get("targets") or []],
             [("label_selector", "%s=%s" % (CP_LABEL, c["metadata"]["uid"]))],
             "its target: the servers labelled as this Cluster's control plane")
        seen_by_hcloud(t, env, lb, cnc["metadata"]["uid"])
    finally:
        ctl.stop()
    ctl = hetzner(env)
    try:
        mark = len(env.c.requests())
        t.ok(wait_for(lambda: "control-plane load balancer" in ctl.output(), 30), "a restarted controller looks",
             ctl.output()[-1500:])
        time.sleep(1.0)
        t.eq(lb_creates(env, mark), [], "and creates nothing")
        t.eq(len(owned(env, cnc["metadata"]["uid"])), 1, "still one load balancer")
        t.ok(provisioned(env, "lb1"), "still provisioned")
    finally:
        ctl.stop()


def test_targets_follow_control_plane(t, env):
    c = env.obj(CLUSTERS, "lb1")
    cnc = env.obj(CNC, "lb1")
    ctl = hetzner(env)
    try:
        env.machine("lb1-cp-0", cluster="lb1", labels={"cluster.x-k8s.io/control-plane": ""})
        env.machine("lb1-worker-0", cluster="lb1")
        t.ok(wait_for(lambda: env.ready("lb1-cp-0") and env.ready("lb1-worker-0"), 60), "both machines run",
             ctl.output()[-1500:])
        cp = env.servers(env.get("lb1-cp-0")["metadata"]["uid"])
        worker = env.servers(env.get("lb1-worker-0")["metadata"]["uid"])
        t.eq([(s.get("labels") or {}).get(CP_LABEL) for s in cp], [c["metadata"]["uid"]],
             "the control-plane server carries the Cluster's UID as the control-plane label")
        t.eq([(s.get("labels") or {}).get(CP_LABEL) for s in worker], [None], "the worker's does not")
        lb = (owned(env, cnc["metadata"]["uid"]) or [{}])[0]
        t.eq(target_servers(lb), [int(s["id"]) for s in cp], "the load balancer's targets: the control-plane server")
        env.delete("lb1-cp-0")
        t.ok(wait_for(lambda: env.gone("lb1-cp-0"), 60), "the control-plane machine is deleted", ctl.output()[-1500:])
        lb = (owned(env, cnc["metadata"]["uid"]) or [{}])[0]
        t.eq(target_servers(lb), [], "and is no target any more")
        env.delete("lb1-worker-0")
        t.ok(wait_for(lambda: env.gone("lb1-worker-0"), 60), "the worker is deleted")
    finally:
        ctl.stop()


def create_foreign(env, name, labels):
    code, _, body = env.c.api("POST", "/v1/load_balancers", {"name": name, "load_balancer_type": "lb11",
                                                             "location": "fsn1", "labels": labels}, headers=AUTH)
    assert code == 201, body
    return body["load_balancer"]["id"]


def test_delete(t, env):
    cnc = env.obj(CNC, "lb1")
    foreign = [create_foreign(env, "lb1-kube-apiserver", {}),
               create_foreign(env, "lb1-kube-apiserver-other", {OWNER_LABEL: "0000-not-this-cluster"})]
    ctl = hetzner(env)
    try:
        env.k.api("DELETE", CLUSTERS + "/lb1")
        env.k.api("DELETE", CNC + "/lb1")
        t.ok(wait_for(lambda: env.obj(CNC, "lb1") is None, 30), "the CloudnodeCluster is deleted",
             ctl.output()[-1500:])
        t.eq(owned(env, cnc["metadata"]["uid"]), [], "its load balancer is gone")
        t.eq(sorted(lb["id"] for lb in load_balancers(env) if lb["id"] in foreign), sorted(foreign),
             "load balancers of other owners, one of a similar name, are left alone")
    finally:
        ctl.stop()


def test_user_endpoint(t, env):
    c = env.cluster("lb2")
    endpoint = {"host": "api.lb2.example", "port": 443}
    ctl = hetzner(env)
    try:
        cnc = make_cnc(env, "lb2", c, {"provider": "hetzner", "controlPlaneEndpoint": endpoint,
                                       "controlPlaneLoadBalancer": {"type": "lb21", "algorithm": "least_connections",
                                                                    "port": 443}})
        o = wait_for(lambda: provisioned(env, "lb2"), 30)
        t.ok(o, "provisioned", ctl.output()[-1500:])
        t.eq((o or {}).get("spec", {}).get("controlPlaneEndpoint"), endpoint, "the user's endpoint is kept as it is")
        lb = (owned(env, cnc["metadata"]["uid"]) or [{}])[0]
        t.eq(((lb.get("load_balancer_type") or {}).get("name"), (lb.get("algorithm") or {}).get("type"),
              [(s["listen_port"], s["destination_port"]) for s in lb.get("services") or []]),
             ("lb21", "least_connections", [(443, 6443)]), "the load balancer as the spec asks")
        env.k.api("DELETE", CLUSTERS + "/lb2")
        env.k.api("DELETE", CNC + "/lb2")
        t.ok(wait_for(lambda: env.obj(CNC, "lb2") is None, 30), "deleted")
        t.eq(owned(env, cnc["metadata"]["uid"]), [], "with its load balancer")
    finally:
        ctl.stop()


def move(env, name):
    """What clusterctl move does to a CloudnodeCluster and its Cluster: the same objects, metadata
    (labels, annotations) and spec again, under new UIDs (here in the same API server), without
    their status, which clusterctl does not carry. Returns (old, new)."""
    old = env.obj(CNC, name)
    env.k.api("PATCH", CNC + "/" + name, {"metadata": {"finalizers": None}}, MERGE)
    env.k.api("DELETE", CNC + "/" + name)
    env.k.api("DELETE", CLUSTERS + "/" + name)
    wait_for(lambda: env.obj(CNC, name) is None and env.obj(CLUSTERS, name) is None, 30)
    c = env.cluster(name)
    new = make_cnc(env, name, c, old["spec"], annotations=old["metadata"].get("annotations"))
    return old, new


def test_moved(t, env, owned_by, creates, name, spec):
    """A moved cluster takes over the load balancer (or floating IP) of its previous UID."""
    c = env.cluster(name)
    ctl = env.controller()
    try:
        make_cnc(env, name, c, spec)
        t.ok(wait_for(lambda: provisioned(env, name), 30), "%s: provisioned" % name, ctl.output()[-1500:])
    finally:
        ctl.stop()
    t.eq((env.obj(CNC, name)["metadata"].get("annotations") or {}).get(LB_UID),
         env.obj(CNC, name)["metadata"]["uid"], "%s: the UID its load balancer carries, in an annotation" % name)
    old, new = move(env, name)
    t.eq(len(owned_by(env, old["metadata"]["uid"])), 1, "(its load balancer carries the old UID)")
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: owned_by(env, new["metadata"]["uid"]), 30),
             "after a move the load balancer carries the new UID", ctl.output()[-1500:])
        t.eq(owned_by(env, old["metadata"]["uid"]), [], "and no longer the old one")
        t.eq(creates(env, mark), [], "no second one is made")
        if env.provider == "hetzner":
            want = "%s=%s" % (CP_LABEL, env.obj(CLUSTERS, name)["metadata"]["uid"])

            def selectors():
                lb = (owned_by(env, new["metadata"]["uid"]) or [{}])[0]
                return [tg.get("label_selector", {}).get("selector") for tg in lb.get("targets") or []]
            t.ok(wait_for(lambda: want in selectors(), 30),
                 "its targets now include the servers labelled with the Cluster's new UID", selectors())
            t.eq(len(selectors()), 2, "next to the old Cluster's")
        t.ok(wait_for(lambda: (env.obj(CNC, name).get("status") or {}).get("loadBalancerLabelUID") ==
                      new["metadata"]["uid"], 30), "the status records the new UID")
        t.eq(env.obj(CNC, name)["spec"].get("controlPlaneEndpoint"), old["spec"].get("controlPlaneEndpoint"),
             "the endpoint is unchanged")
        env.k.api("DELETE", CLUSTERS + "/" + name)
        env.k.api("DELETE", CNC + "/" + name)
        t.ok(wait_for(lambda: env.obj(CNC, name) is None, 30), "the moved cluster is deleted")
        t.eq(owned_by(env, new["metadata"]["uid"]), [], "with its load balancer")
    finally:
        ctl.stop()


def test_spec_removed(t, env, owned_by, name, spec):
    """spec.controlPlaneLoadBalancer removed from a cluster that has one: the load balancer stays
    while the cluster lives (spec.controlPlaneEndpoint, in every kubeconfig, is its address) and
    goes with the cluster, though the spec no longer names it."""
    c = env.cluster(name)
    ctl = env.controller()
    try:
        cnc = make_cnc(env, name, c, spec)
        uid = cnc["metadata"]["uid"]
        t.ok(wait_for(lambda: provisioned(env, name) and
                      (env.obj(CNC, name).get("status") or {}).get("loadBalancerLabelUID") == uid, 30),
             "%s: provisioned, the status records the UID its load balancer carries" % name, ctl.output()[-1500:])
        env.k.api("PATCH", CNC + "/" + name, {"spec": {"controlPlaneLoadBalancer": None}}, MERGE)
        t.ok(wait_for(lambda: "controlPlaneLoadBalancer" not in env.obj(CNC, name)["spec"], 10), "the member is removed")
        time.sleep(1.0)
        t.eq(len(owned_by(env, uid)), 1, "its load balancer stays while the cluster lives")
        env.k.api("DELETE", CLUSTERS + "/" + name)
        env.k.api("DELETE", CNC + "/" + name)
        t.ok(wait_for(lambda: env.obj(CNC, name) is None, 30), "the cluster is deleted", ctl.output()[-1500:])
        t.eq(owned_by(env, uid), [], "with the load balancer the spec no longer named")
    finally:
        ctl.stop()


def test_moved_then_deleted(t, env, owned_by, name, spec, drop_spec=False):
    """A cluster moved by clusterctl (new UID, its annotations and finalizer copied, not its
    status) and deleted before any controller relabelled its load balancer: that one, carrying the
    UID the annotation recorded, is deleted all the same."""
    c = env.cluster(name)
    ctl = env.controller()
    try:
        make_cnc(env, name, c, spec)
        t.ok(wait_for(lambda: provisioned(env, name) and
                      (env.obj(CNC, name)["metadata"].get("annotations") or {}).get(LB_UID), 30),
             "%s: provisioned" % name, ctl.output()[-1500:])
    finally:
        ctl.stop()
    old, new = move(env, name)
    env.k.api("PATCH", CNC + "/" + name, {"metadata": {"finalizers": [FINALIZER]}}, MERGE)
    if drop_spec:
        # And spec.controlPlaneLoadBalancer removed since: only the annotation says there is one.
        code, _ = env.k.api("PATCH", CNC + "/" + name, {"spec": {"controlPlaneLoadBalancer": None}}, MERGE)
        t.eq(code, 200, "%s: spec.controlPlaneLoadBalancer removed after the move" % name)
    t.eq(len(owned_by(env, old["metadata"]["uid"])), 1, "(its load balancer carries the old UID)")
    env.k.api("DELETE", CLUSTERS + "/" + name)
    env.k.api("DELETE", CNC + "/" + name)
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: env.obj(CNC, name) is None, 30), "the moved cluster is deleted", ctl.output()[-1500:])
        t.eq(owned_by(env, old["metadata"]["uid"]), [], "with the load balancer that still carried the old UID")
        t.eq(owned_by(env, new["metadata"]["uid"]), [], "none carries the new one")
    finally:
        ctl.stop()


def test_refused_type(t, env):
    c = env.cluster("lb3")
    ctl = hetzner(env)
    try:
        make_cnc(env, "lb3", c, {"provider": "hetzner", "controlPlaneLoadBalancer": {"type": "lb99"}})
        t.ok(wait_for(lambda: condition(env.obj(CNC, "lb3"), "Ready") == "InvalidConfiguration", 30),
             "a type the cloud refuses: a terminal condition", ctl.output()[-1500:])
        msg = condition(env.obj(CNC, "lb3"), "Ready", "message") or ""
        t.ok("lb99" in msg, "naming the cloud's reason", msg)
        t.ok(not provisioned(env, "lb3") and not env.obj(CNC, "lb3")["spec"].get("controlPlaneEndpoint"),
             "no endpoint, not provisioned")

        def warnings():
            code, body = env.k.api("GET", "/api/v1/namespaces/default/events")
            return [e for e in (body or {}).get("items", []) if e.get("reason") == "InvalidConfiguration" and
                    (e.get("involvedObject") or e.get("regarding") or {}).get("name") == "lb3"]
        found = wait_for(warnings, 20)
        t.ok(found and found[0].get("type") == "Warning", "a Warning Event", found)
        time.sleep(1.5)
        t.eq([e.get("count", 1) for e in warnings()], [1], "one, and the type is not asked for again")
    finally:
        ctl.stop()


def test_several_carry_the_uid(t, env):
    c = env.cluster("lb7")
    cnc = make_cnc(env, "lb7", c, {"provider": "hetzner", "controlPlaneLoadBalancer": {}})
    uid = cnc["metadata"]["uid"]
    twins = [create_foreign(env, "lb7-twin-%d" % i, {OWNER_LABEL: uid}) for i in range(2)]
    ctl = hetzner(env)
    try:
        t.ok(wait_for(lambda: condition(env.obj(CNC, "lb7"), "Ready") == "MultipleLoadBalancers", 30),
             "two load balancers with the cluster's UID: a human decides", ctl.output()[-1500:])
        t.eq(condition(env.obj(CNC, "lb7"), "Ready", "message"), "several load balancers carry this cluster's UID",
             "saying so")
        time.sleep(1.0)
        t.eq(sorted(lb["id"] for lb in owned(env, uid)), sorted(twins), "neither is deleted nor joined by a third")
        t.eq(env.obj(CNC, "lb7")["spec"].get("controlPlaneEndpoint"), None, "nor adopted as the endpoint")
        t.ok(not provisioned(env, "lb7"), "not provisioned")
    finally:
        ctl.stop()
    for lid in twins:
        env.c.api("DELETE", "/v1/load_balancers/%d" % lid, headers=AUTH)
    env.k.api("PATCH", CNC + "/lb7", {"metadata": {"finalizers": None}}, MERGE)
    env.k.api("DELETE", CNC + "/lb7")


def lists_of(env, uid, mark):
    """The controller's lookups of the load balancer with the cluster's UID since mark, with the
    times the cloud logged them (seconds)."""
    out = []
    for r in env.c.requests()[mark:]:
        if r.get("method") == "GET" and r.get("path", "").startswith("/v1/load_balancers?") and uid in r["path"]:
            stamp = time.strptime(r["time"][:19], "%Y-%m-%dT%H:%M:%S")
            out.append(calendar.timegm(stamp) + int(r["time"][20:23]) / 1000.0)
    return out


def test_cloud_backoff(t, env):
    """A cloud that is down is asked again after the cluster's backoff (here the Retry-After it
    sent), not on each event that comes meanwhile; once it is back, the cluster is provisioned
    promptly although another cluster failed beside it."""
    c = env.cluster("lb9")
    env.c.fail({"method": "GET", "path": "^/v1/load_balancers[?]", "status": 503, "headers": {"Retry-After": "4"}})
    ctl = hetzner(env)
    try:
        mark = len(env.c.requests())
        uid = make_cnc(env, "lb9", c, {"provider": "hetzner", "controlPlaneLoadBalancer": {}})["metadata"]["uid"]
        t.ok(wait_for(lambda: condition(env.obj(CNC, "lb9"), "Ready") == "CloudUnavailable", 30),
             "the cloud is down: CloudUnavailable", ctl.output()[-1500:])
        first = (lists_of(env, uid, mark) or [0])[0]
        # Events on the cluster within the Retry-After: each brings a pass, none asks the cloud.
        for i in range(5):
            env.k.api("PATCH", CNC + "/lb9", {"metadata": {"annotations": {"example.com/poke": str(i)}}}, MERGE)
            time.sleep(0.3)
        t.ok(wait_for(lambda: len(lists_of(env, uid, mark)) >= 2, 30), "asked again after the Retry-After",
             ctl.output()[-1500:])
        times = lists_of(env, uid, mark)
        # 4 s or more between the two as the cloud logged them; 3 s is far from the hundredths of
        # a second between lookups that retries on each event make.
        t.ok(len(times) >= 2 and times[1] - first >= 3.0, "not before it, events or not",
             ["%.3f" % (x - first) for x in times])
        env.c.clear_faults()
        o = wait_for(lambda: provisioned(env, "lb9"), 30)
        t.ok(o, "provisioned soon after the cloud is back", ctl.output()[-1500:])
    finally:
        ctl.stop()
        env.c.clear_faults()


def test_garbage_answer(t, env):
    c = env.cluster("lb4")
    env.c.fail({"method": "GET", "path": "^/v1/load_balancers", "status": 200,
                "body": {"load_balancers": {"id": "not a list"}}})
    ctl = hetzner(env)
    try:
        mark = len(env.c.requests())
        make_cnc(env, "lb4", c, {"provider": "hetzner", "controlPlaneLoadBalancer": {}})
        # The reason is read from the object the message was read from: the controller's next
        # attempt may already have rewritten the condition.
        seen = snapshot_when(lambda: env.obj(CNC, "lb4"),
                             lambda o: "load balancer list" in (condition(o, "Ready", "message") or ""), 30)
        t.ok(seen, "an answer that is not a list: one clear message", ctl.output()[-1500:])
        t.eq(condition(seen, "Ready", "message"), "unexpected load balancer list from the Hetzner API", "that message")
        t.eq(condition(seen, "Ready"), "CloudUnavailable", "retryable")
        t.eq(lb_creates(env, mark), [], "nothing is created on the strength of it")
        env.c.clear_faults()
        t.ok(wait_for(lambda: provisioned(env, "lb4"), 60), "provisioned once the cloud answers sensibly",
             ctl.output()[-1500:])
        env.k.api("DELETE", CLUSTERS + "/lb4")
        env.k.api("DELETE", CNC + "/lb4")
        t.ok(wait_for(lambda: env.obj(CNC, "lb4") is None, 30), "deleted")
    finally:
        ctl.stop()
        env.c.clear_faults()


def neutron(env, method, path, body=None, base="/network/v2.0"):
    """One Neutron (or, with base, Octavia) request as the test's own user."""
    return fakecloud.neutron(env.c, method, path, body, base)


def floating_ips(env, uid):
    desc = "cloudnode control-plane endpoint of cluster %s" % uid
    return [f for f in neutron(env, "GET", "/floatingips")["floatingips"] if f["description"] == desc]


def fip_creates(env, mark):
    return [r for r in env.c.requests()[mark:]
            if r.get("method") == "POST" and r.get("path") == "/network/v2.0/floatingips"]


def attached_to(env, uid):
    fips = floating_ips(env, uid)
    return (fips[0].get("port_details") or {}).get("device_id") if len(fips) == 1 else None


def server_id(env, name):
    return (env.get(name) or {}).get("status", {}).get("instanceID")


def looks_again(t, env, ctl):
    """A restarted controller has looked at its clusters' load balancers; the request log's length
    before it did."""
    mark = len(env.c.requests())
    t.ok(wait_for(lambda: "control-plane load balancer" in ctl.output(), 30), "a restarted controller looks",
         ctl.output()[-1500:])
    time.sleep(1.0)
    return mark


def test_openstack_floating_ip(t, tmp):
    with machine_env(os.path.join(tmp, "openstack"), provider="openstack") as env:
        foreign = neutron(env, "POST", "/floatingips", {"floatingip": {
            "floating_network_id": neutron(env, "GET", "/networks?router:external=true")["networks"][0]["id"],
            "description": "cloudnode control-plane endpoint of cluster someone-else"}})["floatingip"]["id"]
        ctl = env.controller()
        try:
            mark = len(env.c.requests())
            c = env.cluster("os1")
            cnc = make_cnc(env, "os1", c, {"provider": "openstack", "controlPlaneLoadBalancer": {}})
            uid = cnc["metadata"]["uid"]
            o = wait_for(lambda: provisioned(env, "os1"), 30)
            t.ok(o, "OpenStack without Octavia: provisioned with a floating IP", ctl.output()[-1500:])
            fips = floating_ips(env, uid)
            t.eq(len(fips), 1, "one floating IP carries the cluster's UID in its description")
            fip = fips[0] if fips else {}
            t.eq((o or {}).get("spec", {}).get("controlPlaneEndpoint"),
                 {"host": fip.get("floating_ip_address"), "port": 6443}, "it is the endpoint, port 6443")
            t.eq(fip.get("port_id"), None, "associated with nothing while there is no control-plane server")

            env.machine("os1-cp-0", cluster="os1", labels={"cluster.x-k8s.io/control-plane": ""})
            env.machine("os1-worker-0", cluster="os1")
            t.ok(wait_for(lambda: env.ready("os1-cp-0") and env.ready("os1-worker-0"), 60), "machines run",
                 ctl.output()[-1500:])
            t.ok(wait_for(lambda: attached_to(env, uid) == server_id(env, "os1-cp-0"), 30),
                 "the floating IP goes to the control-plane server", floating_ips(env, uid))
            env.machine("os1-cp-1", cluster="os1", labels={"cluster.x-k8s.io/control-plane": ""})
            t.ok(wait_for(lambda: env.ready("os1-cp-1"), 60), "a second control-plane machine runs")
            time.sleep(1.0)
            t.eq(attached_to(env, uid), server_id(env, "os1-cp-0"), "the floating IP stays with the first")
            env.delete("os1-cp-0")
            t.ok(wait_for(lambda: env.gone("os1-cp-0"), 60), "the first control-plane machine is deleted")
            t.ok(wait_for(lambda: attached_to(env, uid) == server_id(env, "os1-cp-1"), 30),
                 "the floating IP follows to the remaining control-plane server", floating_ips(env, uid))
            t.eq(len(fip_creates(env, mark)), 1, "one floating IP was allocated")
        finally:
            ctl.stop()
        ctl = env.controller()
        try:
            mark = looks_again(t, env, ctl)
            t.eq(fip_creates(env, mark), [], "and allocates nothing")
            for n in ("os1-cp-1", "os1-worker-0"):
                env.delete(n)
            t.ok(wait_for(lambda: env.gone("os1-cp-1") and env.gone("os1-worker-0"), 60), "machines deleted")
            env.k.api("DELETE", CLUSTERS + "/os1")
            env.k.api("DELETE", CNC + "/os1")
            t.ok(wait_for(lambda: env.obj(CNC, "os1") is None, 30), "the cluster is deleted", ctl.output()[-1500:])
            t.eq(floating_ips(env, uid), [], "with its floating IP")
            t.eq([f["id"] for f in neutron(env, "GET", "/floatingips")["floatingips"]], [foreign],
                 "another cluster's floating IP is left alone")

            env.c.fail({"method": "GET", "path": "^/network/v2.0/floatingips", "status": 200,
                        "body": {"floatingips": {"id": "not a list"}}})
            mark = len(env.c.requests())
            c = env.cluster("os2")
            make_cnc(env, "os2", c, {"provider": "openstack", "controlPlaneLoadBalancer": {}})
            seen = snapshot_when(lambda: env.obj(CNC, "os2"), lambda o: condition(o, "Ready", "message") ==
                                 "unexpected floating IP list from the Neutron API", 30)
            t.ok(seen, "an answer that is not a floating IP list: one clear message", ctl.output()[-1500:])
            t.eq(condition(seen, "Ready"), "CloudUnavailable", "retryable")
            t.eq(fip_creates(env, mark), [], "nothing is allocated on the strength of it")
            env.c.clear_faults()
            t.ok(wait_for(lambda: provisioned(env, "os2"), 60), "provisioned once Neutron answers sensibly")
        finally:
            ctl.stop()
            env.c.clear_faults()


OCTAVIA = "/load-balancer/v2/lbaas"


def lbaas(env, table, query=""):
    return neutron(env, "GET", "/" + table + query, base=OCTAVIA)[table.split("/")[-1]]


def octavia_lbs(env, uid):
    desc = "cloudnode control-plane endpoint of cluster %s" % uid
    return [lb for lb in lbaas(env, "loadbalancers") if lb["description"] == desc]


def octavia_creates(env, mark):
    return [r for r in env.c.requests()[mark:]
            if r.get("method") == "POST" and r.get("path") == OCTAVIA + "/loadbalancers"]


def pool_of(env, lb):
    pools = lbaas(env, "pools", "?loadbalancer_id=" + lb["id"])
    return pools[0] if len(pools) == 1 else None


def members_of(env, uid):
    lb = (octavia_lbs(env, uid) or [None])[0]
    pool = pool_of(env, lb) if lb else None
    return sorted((m["address"], m["protocol_port"]) for m in lbaas(env, "pools/%s/members" % pool["id"])) \
        if pool else None


def address_of(env, name):
    ports = neutron(env, "GET", "/ports?device_id=%s" % server_id(env, name))["ports"]
    return next((ip["ip_address"] for p in ports for ip in p["fixed_ips"] if "." in ip["ip_address"]), None)


def seen_by_octaviaclient(t, env, lb):
    """python3-octaviaclient (`openstack loadbalancer ...`) sees the load balancer the controller
    made, its listener, pool and members."""
    if not shutil.which("openstack") or not os.path.isdir("/usr/lib/python3/dist-packages/octaviaclient"):
        t.skip("openstack loadbalancer sees it", "python3-octaviaclient is not installed")
        return
    with tempfile.TemporaryDirectory() as home:
        e = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        e.update(HOME=home, OS_AUTH_URL=env.c.url + "/v3", OS_USERNAME=OPENSTACK_USER["name"],
                 OS_PASSWORD=OPENSTACK_USER["password"], OS_PROJECT_NAME=OPENSTACK_USER["project"],
                 OS_USER_DOMAIN_NAME=OPENSTACK_USER["domain"], OS_PROJECT_DOMAIN_NAME=OPENSTACK_USER["domain"],
                 OS_IDENTITY_API_VERSION="3", OS_INTERFACE="public")
        o = Cli(t, ["openstack"], e, ["-f", "json"], timeout=60)
        listed = o.json("openstack loadbalancer list", "loadbalancer", "list") or []
        t.ok(lb["id"] in [x.get("id") for x in listed], "openstack loadbalancer list shows it", listed)
        d = o.json("openstack loadbalancer show", "loadbalancer", "show", lb["id"]) or {}
        t.eq((d.get("vip_address"), d.get("provisioning_status"), d.get("description")),
             (lb["vip_address"], "ACTIVE", lb["description"]), "openstack loadbalancer show describes it")
        ls = o.json("openstack loadbalancer listener list", "loadbalancer", "listener", "list", "--loadbalancer",
                    lb["id"]) or []
        t.eq([(x.get("protocol"), x.get("protocol_port")) for x in ls], [("TCP", 443)], "its listener")
        pools = o.json("openstack loadbalancer pool list", "loadbalancer", "pool", "list", "--loadbalancer",
                       lb["id"]) or []
        t.eq([x.get("lb_algorithm") for x in pools], ["LEAST_CONNECTIONS"], "its pool")
        ms = o.json("openstack loadbalancer member list", "loadbalancer", "member", "list",
                    (pools or [{}])[0].get("id", "-")) or []
        t.eq(sorted((x.get("address"), x.get("protocol_port")) for x in ms), members_of(env, lb_uid(lb)),
             "its members")


def lb_uid(lb):
    return lb["description"].rsplit(" ", 1)[-1]


def test_openstack_octavia(t, tmp):
    with machine_env(os.path.join(tmp, "octavia"), provider="openstack") as env:
        env.c.settings(openstack_octavia=True, octavia_pending_seconds=0.5)
        net = neutron(env, "GET", "/networks?router:external=false")["networks"][0]["id"]
        foreign = neutron(env, "POST", "/loadbalancers", {"loadbalancer": {
            "name": "oc1-kube-apiserver", "vip_network_id": net,
            "description": "cloudnode control-plane endpoint of cluster someone-else"}}, base=OCTAVIA)["loadbalancer"]
        mark = len(env.c.requests())
        # The create is done by Octavia, and its answer held until the controller is gone.
        env.c.fail({"method": "POST", "path": "^%s/loadbalancers$" % OCTAVIA, "after_commit": True, "reset": True,
                    "latency": 30, "count": 1})
        ctl = env.controller()
        try:
            c = env.cluster("oc1")
            cnc = make_cnc(env, "oc1", c, {"provider": "openstack", "controlPlaneLoadBalancer": {
                "port": 443, "algorithm": "least_connections"}})
            uid = cnc["metadata"]["uid"]
            t.ok(wait_for(lambda: octavia_creates(env, mark), 30), "the Octavia load balancer is created",
                 ctl.output()[-1500:])
            t.ok(not provisioned(env, "oc1"), "not provisioned while it is being made")
        finally:
            ctl.stop()
        env.c.clear_faults()
        ctl = env.controller()
        try:
            o = wait_for(lambda: provisioned(env, "oc1"), 60)
            t.ok(o, "a new controller finishes: provisioned", ctl.output()[-1500:])
            lbs = octavia_lbs(env, uid)
            t.eq(len(lbs), 1, "one Octavia load balancer carries the cluster's UID")
            t.eq(len(octavia_creates(env, mark)), 1, "created once: the answer lost with the controller made no second")
            lb = lbs[0] if lbs else {}
            t.eq((lb.get("name"), lb.get("provisioning_status"), lb.get("tags")),
                 ("oc1-kube-apiserver-" + uid[:8], "ACTIVE", ["cloudnode.io/cluster-uid=" + uid]),
                 "named after the cluster, tagged with its UID, ACTIVE")
            listeners = lbaas(env, "listeners", "?loadbalancer_id=" + lb.get("id", "-"))
            t.eq([(x["protocol"], x["protocol_port"]) for x in listeners], [("TCP", 443)],
                 "a TCP listener on the spec's port")
            pool = pool_of(env, lb) if lb else None
            t.eq((pool or {}).get("lb_algorithm"), "LEAST_CONNECTIONS", "its pool balances as the spec asks")
            mons = lbaas(env, "healthmonitors")
            t.eq([(m["type"], m["pools"]) for m in mons if {"id": (pool or {}).get("id")} in m["pools"]],
                 [("TCP", [{"id": (pool or {}).get("id")}])], "a TCP health monitor on the pool")
            fips = floating_ips(env, uid)
            t.eq([f.get("port_id") for f in fips], [lb.get("vip_port_id")], "one floating IP, on the VIP's port")
            t.eq((o or {}).get("spec", {}).get("controlPlaneEndpoint"),
                 {"host": (fips or [{}])[0].get("floating_ip_address"), "port": 443},
                 "the endpoint is the floating IP and the listener's port")
            t.eq(members_of(env, uid), [], "no member while there is no control-plane server")

            # Octavia refuses the first member as it does while the load balancer is PENDING_*.
            members_path = "%s/pools/%s/members" % (OCTAVIA, (pool or {}).get("id"))
            env.c.fail({"method": "POST", "path": "^%s$" % members_path, "status": 409, "count": 1,
                        "body": {"faultcode": "Client", "faultstring": "Load Balancer %s is immutable and cannot be "
                                 "updated." % lb.get("id"), "debuginfo": None}})
            env.machine("oc1-cp-0", cluster="oc1", labels={"cluster.x-k8s.io/control-plane": ""})
            env.machine("oc1-worker-0", cluster="oc1")
            t.ok(wait_for(lambda: env.ready("oc1-cp-0") and env.ready("oc1-worker-0"), 60), "machines run")
            t.ok(wait_for(lambda: members_of(env, uid) == [(address_of(env, "oc1-cp-0"), 6443)], 30),
                 "the control-plane server is the pool's member, on 6443", members_of(env, uid))
            posts = [r.get("status") for r in env.c.requests() if r.get("method") == "POST" and
                     r.get("path") == members_path]
            t.eq(posts[:2], [409, 201], "a 409 while Octavia is busy is asked again, not a failure")
            t.eq(condition(env.obj(CNC, "oc1"), "Ready", "status"), "True", "and the cluster stays Ready")
            env.machine("oc1-cp-1", cluster="oc1", labels={"cluster.x-k8s.io/control-plane": ""})
            t.ok(wait_for(lambda: env.ready("oc1-cp-1"), 60), "a second control-plane machine runs")
            t.ok(wait_for(lambda: members_of(env, uid) == sorted([(address_of(env, "oc1-cp-0"), 6443),
                                                                  (address_of(env, "oc1-cp-1"), 6443)]), 30),
                 "it joins the pool, the worker does not", members_of(env, uid))
            gone_addr = address_of(env, "oc1-cp-0")
            env.delete("oc1-cp-0")
            t.ok(wait_for(lambda: env.gone("oc1-cp-0"), 60), "the first control-plane machine is deleted")
            t.ok(wait_for(lambda: members_of(env, uid) == [(address_of(env, "oc1-cp-1"), 6443)], 30),
                 "and leaves the pool", (gone_addr, members_of(env, uid)))
            seen_by_octaviaclient(t, env, (octavia_lbs(env, uid) or [{}])[0])
        finally:
            ctl.stop()
        ctl = env.controller()
        try:
            mark = looks_again(t, env, ctl)
            t.eq((octavia_creates(env, mark), fip_creates(env, mark)), ([], []), "and creates nothing")
            for n in ("oc1-cp-1", "oc1-worker-0"):
                env.delete(n)
            t.ok(wait_for(lambda: env.gone("oc1-cp-1") and env.gone("oc1-worker-0"), 60), "machines deleted")
            lb_id = (octavia_lbs(env, uid) or [{}])[0].get("id")
            env.k.api("DELETE", CLUSTERS + "/oc1")
            env.k.api("DELETE", CNC + "/oc1")
            t.ok(wait_for(lambda: env.obj(CNC, "oc1") is None, 60), "the cluster is deleted", ctl.output()[-1500:])
            t.ok(any(r.get("method") == "DELETE" and r.get("path") == "%s/loadbalancers/%s?cascade=true"
                     % (OCTAVIA, lb_id) for r in env.c.requests()[mark:]),
                 "its load balancer was deleted with cascade=true")
            t.eq((octavia_lbs(env, uid), floating_ips(env, uid)), ([], []), "no load balancer, no floating IP is left")
            t.eq(([x["id"] for x in lbaas(env, "loadbalancers")], lbaas(env, "listeners"), lbaas(env, "pools"),
                  lbaas(env, "healthmonitors")), ([foreign["id"]], [], [], []),
                 "no listener, pool (with its members) or health monitor either; another cluster's load balancer "
                 "is left alone")
        finally:
            ctl.stop()
            env.c.clear_faults()


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with machine_env(os.path.join(tmp, "hetzner")) as env:
            t.run(test_created_once, env)
            t.run(test_targets_follow_control_plane, env)
            t.run(test_delete, env)
            t.run(test_user_endpoint, env)
            t.run(test_moved, env, owned, lb_creates, "lb6", {"provider": "hetzner", "controlPlaneLoadBalancer": {}})
            t.run(test_spec_removed, env, owned, "lb7", {"provider": "hetzner", "controlPlaneLoadBalancer": {}})
            t.run(test_moved_then_deleted, env, owned, "lb8", {"provider": "hetzner", "controlPlaneLoadBalancer": {}},
                  True)
            t.run(test_refused_type, env)
            t.run(test_several_carry_the_uid, env)
            t.run(test_garbage_answer, env)
            t.run(test_cloud_backoff, env)
        t.run(test_openstack_floating_ip, tmp)
        with machine_env(os.path.join(tmp, "openstack-move"), provider="openstack") as env:
            t.run(test_moved, env, floating_ips, fip_creates, "os3",
                  {"provider": "openstack", "controlPlaneLoadBalancer": {}})
            t.run(test_spec_removed, env, floating_ips, "os4", {"provider": "openstack", "controlPlaneLoadBalancer": {}})
            t.run(test_moved_then_deleted, env, floating_ips, "os5",
                  {"provider": "openstack", "controlPlaneLoadBalancer": {}})
        t.run(test_openstack_octavia, tmp)
        with machine_env(os.path.join(tmp, "octavia-move"), provider="openstack") as env:
            env.c.settings(openstack_octavia=True, octavia_pending_seconds=0.3)
            spec = {"provider": "openstack", "controlPlaneLoadBalancer": {}}
            t.run(test_moved, env, octavia_lbs, octavia_creates, "oc3", spec)
            t.run(test_spec_removed, env, octavia_lbs, "oc4", spec)
            t.run(test_moved_then_deleted, env, octavia_lbs, "oc5", spec)
            t.eq((lbaas(env, "loadbalancers"), neutron(env, "GET", "/floatingips")["floatingips"]), ([], []),
                 "Octavia: those clusters left no load balancer and no floating IP")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
