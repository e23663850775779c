"""Cluster API machine scenarios of cloudnode-controller against tests/fake-kube-apiserver (with
Cluster API's Cluster and Machine registered as CRDs) and tests/fake-cloud, for every provider
with a machine lifecycle: the test programs (test-controller-machines*.py) and the reliability
soak pick a provider profile and run the same scenarios.

    with machine_env(tmp, provider="openstack") as env:
        test_lifecycle(t, env) ...
"""
import base64
import contextlib
import os
import random
import re
import time

import cncapi
from cncapi import CLUSTERS, CNM, MACHINES, MERGE, NS, RBAC, SECRETS, USER, UID_LABEL, condition, wait_for  # noqa: F401
from fakecloud import OPENSTACK_USER, PVE_TOKEN, FakeCloud, tls_args
from fakekubeclient import kube_server

# What differs between the providers: the cloud config, the spec, what the cloud's inventory and
# request log look like.
PROVIDERS = {
    "hetzner": {
        "conf": None,  # cncapi.CapiEnv writes it
        "spec": {"serverType": "cx22", "image": "ubuntu-24.04", "location": "fsn1"},
        # Refused by the cloud (no such server type), not by validation: one create request.
        "bad_spec": {"serverType": "cx999", "image": "ubuntu-24.04", "location": "fsn1"},
        "provider_id": "hcloud://%s",
        "create_path": "/v1/servers",
        "address_type": "ExternalIP",
        # RateLimit-Reset names a whole second: the wait it asks for can be anything below 1 s.
        "retry_after": None,
        # Failure domains: two the cloud has (the template's location first), and where the fake
        # cloud records the placement (the server's datacenter, "<location>-dcN").
        "failure_domains": ("fsn1", "nbg1"),
        "placed_in": lambda inst: inst.get("zone", "").split("-")[0],
    },
    "openstack": {
        "conf": lambda c: ("[Global]\nauth-url = %s/v3\nusername = %s\npassword = \"%s\"\nuser-domain-name = %s\n"
                           "project-name = %s\nproject-domain-name = %s\nregion = RegionOne\n"
                           % (c.url, OPENSTACK_USER["name"], OPENSTACK_USER["password"], OPENSTACK_USER["domain"],
                              OPENSTACK_USER["project"], OPENSTACK_USER["domain"])),
        "spec": {"flavor": "m1.small", "image": "ubuntu-24.04", "securityGroups": ["default"],
                 "metadata": {"team": "infra"}},
        "bad_spec": {"flavor": "m1.huge", "image": "ubuntu-24.04"},
        "provider_id": "openstack:///%s",
        "create_path": "/compute/v2.1/servers",
        # Nova allocates no floating IP by itself: the fixed address is all there is.
        "address_type": "InternalIP",
        "retry_after": 1.0,  # the fake's Retry-After on 429
        "failure_domains": ("nova", "az-2"),
        "placed_in": lambda inst: inst.get("zone"),
    },
    # Proxmox VE over HTTPS (the fake's test CA): clones of the template VM 9000 on pve1; a VM is
    # the machine's by its tag cloudnode-machine-<UID> (or, cut short in its create, the UID in its
    # description).
    "proxmoxve": {
        "conf": lambda c: ("[Global]\nurl = %s/api2/json\nregion = pve\ntoken-id = %s@%s!%s\ntoken-secret = %s\n"
                           "ca-file = %s\n" % (c.tls_url, PVE_TOKEN["user"].split("@")[0],
                                                PVE_TOKEN["user"].split("@")[1], PVE_TOKEN["name"],
                                                PVE_TOKEN["secret"], c.tls_ca)),
        "tls": True,
        "spec": {"sourceNode": "pve1", "templateID": 9000, "target": "pve2", "numCores": 4, "memoryMiB": 8192,
                 "pool": "k8s", "tags": ["k8s"]},
        # Refused by the cloud (no such template VM), not by validation: one clone request.
        "bad_spec": {"sourceNode": "pve1", "templateID": 9999},
        "provider_id": lambda inst: "proxmox://pve/%d" % inst["extra"]["vmid"],
        "create_path": "/clone",
        "address_type": "InternalIP",
        "retry_after": None,
        "owner_of": lambda inst: next((t[len("cloudnode-machine-"):] for t in
                                       str((inst["extra"].get("pve_config") or {}).get("tags") or "").split(";")
                                       if t.startswith("cloudnode-machine-")), None) or next(
            (line[len(UID_LABEL) + 2:] for line in
             str((inst["extra"].get("pve_config") or {}).get("description") or "").splitlines()
             if line.startswith(UID_LABEL + ": ")), None),
        # Failure domains: the cluster's online nodes; a Machine's becomes spec.proxmoxve.target.
        "failure_domains": ("pve2", "pve1"),
        "default_place": "pve2",
        "placed_in": lambda inst: inst.get("zone"),
        "setup": lambda c: c.add_instance({"platform": "proxmoxve", "name": "tmpl", "zone": "pve1", "status": "stopped",
                                           "extra": {"vmid": 9000, "template": True}}),
    },
}

@contextlib.contextmanager
def machine_env(tmp, provider="hetzner", build_seconds=0.5, action_seconds=0.3):
    """A fake API server (with the controller's and the capi overlay's RBAC) and a fake cloud under
    tmp, set up for machines of the provider."""
    if PROVIDERS[provider].get("tls"):
        os.makedirs(os.path.join(tmp, "tls"), exist_ok=True)
        extra, ca = tls_args(os.path.join(tmp, "tls"))
    else:
        extra, ca = None, None
    with kube_server(os.path.join(tmp, "kube"), rbac=RBAC) as k, \
            FakeCloud(os.path.join(tmp, "cloud"), extra_args=extra) as c:
        c.tls_ca = ca
        c.settings(build_seconds=build_seconds, action_seconds=action_seconds)
        if PROVIDERS[provider].get("setup"):
            PROVIDERS[provider]["setup"](c)
        env = Env(k, c, tmp, provider)
        env.setup()
        yield env


def Controller(k, tmp, conf, leader_args=("--leader-elect=false",), provider="hetzner"):
    return cncapi.Controller(k, tmp, ["--machine-provider", provider, "--machine-cloud-config", conf], leader_args)


class Env(cncapi.CapiEnv):
    """cncapi's environment with Cluster c1 and the provider's cloud config and machine spec."""

    def __init__(self, k, c, tmp, provider="hetzner"):
        super().__init__(k, c, tmp)
        self.provider = provider
        self.profile = PROVIDERS[provider]
        self.default_spec = self.profile["spec"]
        if provider != "hetzner":
            self.conf = os.path.join(tmp, "%s.conf" % provider)
            # Created 0600 from the start: it holds the credentials.
            fd = os.open(self.conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.profile["conf"](c))

    def setup(self):
        super().setup()
        if self.k.api("GET", CLUSTERS + "/c1")[0] != 200:
            self.cluster("c1")

    def controller(self, leader_args=("--leader-elect=false",)):
        return Controller(self.k, self.tmp, self.conf, leader_args, provider=self.provider)

    def servers(self, uid):
        owner_of = self.profile.get("owner_of")
        if not owner_of:
            return super().servers(uid)
        return [i for i in self.c.instances() if i["platform"] == self.provider and owner_of(i) == uid]

    def is_create(self, r):
        return r.get("method") == "POST" and r.get("path", "").endswith(self.profile["create_path"])


def test_lifecycle(t, env):
    ctl = env.controller()
    try:
        cnm = env.machine("m1")
        uid = cnm["metadata"]["uid"]
        ok = wait_for(lambda: env.ready("m1"), 40)
        t.ok(ok, "create -> ready", ctl.output()[-3000:])
        o = env.get("m1")
        srv = env.servers(uid)
        t.eq(len(srv), 1, "exactly one server carries the machine's UID")
        if srv:
            pid = env.profile["provider_id"]
            t.eq(o["spec"]["providerID"], pid(srv[0]) if callable(pid) else pid % srv[0]["id"],
                 "providerID names the server")
        st = o.get("status") or {}
        t.ok(st.get("initialization", {}).get("provisioned") is True, "v1beta2 status.initialization.provisioned")
        t.ok(any(a.get("type") == env.profile["address_type"] for a in st.get("addresses", [])),
             "addresses reported", st.get("addresses"))
        ready_c = [c for c in st.get("conditions", []) if c.get("type") == "Ready"]
        t.ok(len(ready_c) == 1 and ready_c[0].get("status") == "True" and
             re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ready_c[0].get("lastTransitionTime") or ""),
             "one Ready=True condition with its lastTransitionTime", st.get("conditions"))
        t.ok("cloudnodemachine.infrastructure.cluster.x-k8s.io" in o["metadata"].get("finalizers", []),
             "finalizer added")
        env.delete("m1")
        t.ok(wait_for(lambda: env.gone("m1"), 40), "delete removes the finalizer once the server is gone",
             ctl.output()[-2000:])
        t.eq(env.servers(uid), [], "no server left behind")
    finally:
        ctl.stop()


def test_wait_for_bootstrap(t, env):
    ctl = env.controller()
    try:
        cnm = env.machine("m2", bootstrap=False)
        uid = cnm["metadata"]["uid"]

        def reason():
            for c in ((env.get("m2") or {}).get("status") or {}).get("conditions", []):
                if c["type"] == "Ready":
                    return c.get("reason")
            return None
        t.ok(wait_for(lambda: reason() == "WaitingForBootstrapData", 20), "waits for bootstrap data", reason())
        t.eq(env.servers(uid), [], "and creates nothing meanwhile")
        env.k.api("POST", "/api/v1/namespaces/%s/secrets" % NS, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "m2-bootstrap"},
            "data": {"value": base64.b64encode(b"#cloud-config\n").decode()}})
        env.k.api("PATCH", MACHINES + "/m2", {"spec": {"bootstrap": {"dataSecretName": "m2-bootstrap"}}}, MERGE)
        t.ok(wait_for(lambda: env.ready("m2"), 40), "proceeds once the data is there")
        env.delete("m2")
        t.ok(wait_for(lambda: env.gone("m2"), 40), "and deletes it")
    finally:
        ctl.stop()


# How long a pinned kill point holds the cloud's answer: the controller waits on it until it is killed.
HOLD_SECONDS = 30


def _wait_committed(env, rule):
    """The log entry of the request that rule held (logged once the cloud did the request)."""
    return wait_for(lambda: next((r for r in env.c.requests() if r.get("fault") == rule["id"]), None), 40)


def _hold(env, skip):
    """Holds the answer of the controller's (skip+1)-th cloud request from now, after the cloud did it."""
    return env.c.fail({"skip": skip, "count": 1, "reset": True, "after_commit": True, "latency": HOLD_SECONDS})


def _lifecycle_points(env):
    """The cloud requests of one undisturbed create and one delete, up to and including the first
    one after the write (POST, DELETE): the kill points that every run reaches in the same order
    (the polls after it repeat until the server is running or gone, as many times as timing makes)."""
    ctl = env.controller()
    try:
        mark = len(env.c.requests())
        env.machine("kref")
        if not wait_for(lambda: env.ready("kref"), 40):
            raise AssertionError("the reference machine did not become ready:\n" + ctl.output()[-2000:])
        created = env.c.requests()[mark:]
        mark += len(created)
        env.delete("kref")
        if not wait_for(lambda: env.gone("kref"), 40):
            raise AssertionError("the reference machine was not deleted:\n" + ctl.output()[-2000:])
        deleted = env.c.requests()[mark:]
    finally:
        ctl.stop()

    def upto_write(reqs, is_write):
        i = next((n for n, r in enumerate(reqs) if is_write(r)), None)
        return [] if i is None else [(r["method"], r["path"].split("?")[0]) for r in reqs[:i + 2]]
    return upto_write(created, env.is_create), upto_write(deleted, lambda r: r["method"] == "DELETE")


def _kill_round(t, env, name, phase, skip, what):
    """One machine: SIGKILL with its (skip+1)-th cloud request of phase ("create" or "delete")
    done by the cloud and the answer not yet received; a new controller must finish the job."""
    ctl = env.controller()
    uid = None
    try:
        if phase == "delete":
            uid = env.machine(name)["metadata"]["uid"]
            t.ok(wait_for(lambda: env.ready(name), 40), "%s: ready before the delete" % name)
            rule = _hold(env, skip)
            env.delete(name)
        else:
            rule = _hold(env, skip)
            uid = env.machine(name)["metadata"]["uid"]
        hit = _wait_committed(env, rule)
        t.ok(hit, "%s: the controller reached %s request %d (%s)" % (name, phase, skip + 1, what),
             ctl.output()[-2000:])
        ctl.kill()
    finally:
        ctl.stop()
        env.c.clear_faults()
    ctl = env.controller()
    try:
        if phase == "create":
            t.ok(wait_for(lambda: env.ready(name), 40), "%s: ready after a SIGKILL at create request %d (%s)" %
                 (name, skip + 1, what), ctl.output()[-2000:])
            t.eq(len(env.servers(uid)), 1, "%s: exactly one server carries the machine's UID" % name)
            env.delete(name)
        t.ok(wait_for(lambda: env.gone(name), 40), "%s: deleted after the SIGKILL" % name, ctl.output()[-2000:])
    finally:
        ctl.stop()
    t.eq(env.servers(uid), [], "%s: no server left behind" % name)


def test_kill_points(t, env, extra_rounds=1):
    """SIGKILL at every request of a machine's create and delete, each pinned to that request (the
    cloud did it, the answer is held): no duplicate, no orphan. Then extra rounds at random moments,
    seeded with CN_TEST_SEED (printed, to replay a failure)."""
    create_points, delete_points = _lifecycle_points(env)
    t.ok(len(create_points) >= 3 and len(delete_points) >= 3,
         "a create and a delete take a lookup, the write and a poll at least", (create_points, delete_points))
    mark = len(env.c.requests())
    names = []
    for phase, points in (("create", create_points), ("delete", delete_points)):
        for i, (method, path) in enumerate(points):
            name = "k%s%d" % (phase[0], i)
            names.append(name)
            _kill_round(t, env, name, phase, i, "%s %s" % (method, path))
    creates = [r for r in env.c.requests()[mark:] if env.is_create(r)]
    # Every create request counts, answered or refused (409 for a name taken): one per machine.
    t.eq(len(creates), len(names), "no duplicate create (%d create requests for %d machines; statuses %s)" %
         (len(creates), len(names), [r["status"] for r in creates]))

    seed = int(os.environ.get("CN_TEST_SEED", str(random.randrange(1 << 30))))
    t.diag("random kill points: CN_TEST_SEED=%d" % seed)
    rng = random.Random(seed)
    for i in range(extra_rounds):
        name = "kr%d" % i
        ctl = env.controller()
        uid = env.machine(name)["metadata"]["uid"]
        time.sleep(rng.uniform(0.0, 1.5))  # the random moment itself, not a wait for anything
        ctl.kill()
        ctl = env.controller()
        try:
            t.ok(wait_for(lambda: env.ready(name), 40), "%s: ready after a SIGKILL at a random moment (seed %d)" %
                 (name, seed))
            t.eq(len(env.servers(uid)), 1, "%s: exactly one server (seed %d)" % (name, seed))
            env.delete(name)
            t.ok(wait_for(lambda: env.gone(name), 40), "%s: deleted (seed %d)" % (name, seed))
        finally:
            ctl.stop()


def test_post_commit(t, env):
    """A create and a delete that the cloud did but whose answer was lost (connection reset after
    the commit): the machine is ready with one server, then gone with none, with one create request."""
    c = env.c
    path = env.profile["create_path"]
    ctl = env.controller()
    try:
        mark = len(c.requests())
        rule = c.fail({"method": "POST", "path": re.escape(path) + "$", "count": 1, "reset": True,
                       "after_commit": True})
        uid = env.machine("pc1")["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("pc1"), 60), "ready after the create's answer was lost", ctl.output()[-3000:])
        log = c.requests()[mark:]
        t.eq([r.get("responseDropped") for r in log if r.get("fault") == rule["id"]], [True],
             "the cloud did the create and the answer was dropped")
        creates = [r for r in log if env.is_create(r)]
        t.eq(len(creates), 1, "one create request, answered or refused (statuses %s)" % [r["status"] for r in creates])
        t.eq(len(env.servers(uid)), 1, "exactly one server carries the machine's UID")

        mark = len(c.requests())
        rule = c.fail({"method": "DELETE", "path": re.escape(path) + "/[^/?]+$", "count": 1, "reset": True,
                       "after_commit": True})
        env.delete("pc1")
        t.ok(wait_for(lambda: env.gone("pc1"), 60), "deleted after the delete's answer was lost", ctl.output()[-3000:])
        t.eq([r.get("responseDropped") for r in c.requests()[mark:] if r.get("fault") == rule["id"]], [True],
             "the cloud did the delete and the answer was dropped")
        t.eq(env.servers(uid), [], "no server left behind")
    finally:
        c.clear_faults()
        ctl.stop()


def test_two_replicas(t, env):
    """Two replicas with leader election; the leader is killed while machines are being created.
    The follower takes over; still one server per machine."""
    args = ("--leader-elect=true", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms")
    a = env.controller(args)
    b = env.controller(args)
    lease = "/apis/coordination.k8s.io/v1/namespaces/cloudnode/leases/cloudnode-controller"
    try:
        holder = wait_for(lambda: (env.k.api("GET", lease)[1] or {}).get("spec", {}).get("holderIdentity"), 20)
        leader = wait_for(lambda: next((x for x in (a, b) if "Became the leader" in x.output()), None), 20)
        t.ok(holder and leader, "one replica leads")
        t.ok(not all("Became the leader" in x.output() for x in (a, b)), "only one")
        # Kill the leader mid-create: its first create is done by the cloud, the answer held. The
        # other replica must take over once the lease expires, and adopt that server.
        rule = env.c.fail({"method": "POST", "path": re.escape(env.profile["create_path"]) + "$", "count": 1,
                           "reset": True, "after_commit": True, "latency": HOLD_SECONDS})
        uids = [env.machine("ha%d" % i)["metadata"]["uid"] for i in range(3)]
        t.ok(_wait_committed(env, rule), "the leader's first create was done by the cloud")
        (leader or a).kill()
        ok = wait_for(lambda: all(env.ready("ha%d" % i) for i in range(3)), 60)
        t.ok(ok, "the surviving replica finishes the machines", a.output()[-1500:] + b.output()[-1500:])
        t.eq([len(env.servers(u)) for u in uids], [1, 1, 1], "exactly one server per machine")
        for i in range(3):
            env.delete("ha%d" % i)
        t.ok(wait_for(lambda: all(env.gone("ha%d" % i) for i in range(3)), 60), "and deletes them")
    finally:
        a.stop()
        b.stop()


def _pass_after_change(env, ctl, name, step):
    """Changes the object (an annotation) and waits for the controller's next pass over it, seen
    as its log line for step; what a pass did not do can only be asserted after one ran."""
    line = "CloudnodeMachine %s/%s: %s\n" % (NS, name, step)
    passes = ctl.output().count(line)
    env.k.api("PATCH", CNM + "/" + name, {"metadata": {"annotations": {"touched": str(passes)}}}, MERGE)
    return wait_for(lambda: ctl.output().count(line) > passes, 30)


def test_out_of_band_delete(t, env):
    ctl = env.controller()
    try:
        cnm = env.machine("oob")
        uid = cnm["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("oob"), 40), "ready", ctl.output()[-2000:])
        srv = env.servers(uid)
        t.eq(len(srv), 1, "one server to remove")
        for s in srv:
            env.c.remove_instance(s["id"])
        # A ready machine is not polled; "not re-created" means something only after a pass over it.
        t.ok(_pass_after_change(env, ctl, "oob", "ready"), "a pass ran over the machine afterwards",
             ctl.output()[-2000:])
        t.eq(env.servers(uid), [], "a server removed out of band is not re-created")
        env.delete("oob")
        t.ok(wait_for(lambda: env.gone("oob"), 30), "and the machine can still be deleted")
    finally:
        ctl.stop()


def test_invalid_spec(t, env):
    ctl = env.controller()
    try:
        before = len(env.c.requests())
        env.machine("bad", spec=env.profile["bad_spec"])

        def failure():
            return ((env.get("bad") or {}).get("status") or {}).get("failureReason")
        t.eq(wait_for(failure, 30), "InvalidConfiguration", "invalid spec is a terminal condition")
        # A pass over a failed machine logs nothing to wait for: a fixed wait, then nothing more.
        time.sleep(2.0)
        posts = [r for r in env.c.requests()[before:] if env.is_create(r)]
        t.eq(len(posts), 1, "and is not retried")
        env.delete("bad")
        t.ok(wait_for(lambda: env.gone("bad"), 30), "a failed machine is deleted cleanly")
    finally:
        ctl.stop()


def _seconds(stamp):
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + int(stamp[20:23]) / 1000.0


def test_rate_limited(t, env):
    mark = len(env.c.requests())
    env.c.throttle(env.provider, count=4)
    ctl = env.controller()
    try:
        env.machine("rl")
        t.ok(wait_for(lambda: env.ready("rl"), 60), "429 storm: retried until ready", ctl.output()[-2000:])
        env.delete("rl")
        t.ok(wait_for(lambda: env.gone("rl"), 30), "and deleted", ctl.output()[-2000:])
    finally:
        ctl.stop()
        env.c.clear_faults()
    want = env.profile["retry_after"]
    if want:
        log = [r for r in env.c.requests()[mark:] if r.get("platform") == env.provider]
        waits = [_seconds(b["time"]) - _seconds(a["time"]) for a, b in zip(log, log[1:]) if a.get("status") == 429]
        # 10 ms for the log's millisecond resolution.
        t.ok(len(waits) == 4 and all(w >= want - 0.01 for w in waits),
             "each 429's Retry-After (%.0f s) was waited before the next request" % want, waits)


def test_placement(t, env):
    """Machine.spec.failureDomain places the server (Hetzner location, Nova availability zone)
    over the template's value; a failure domain the Cluster does not list fails the machine with
    one clear reason, and the cloud is not asked to create anything."""
    first, second = env.profile["failure_domains"]
    env.cluster("cfd", failure_domains=[first, second])
    ctl = env.controller()
    try:
        uid = env.machine("fd1", cluster="cfd", failure_domain=second)["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("fd1"), 40), "a machine with a failure domain is ready", ctl.output()[-2000:])
        srv = env.servers(uid)
        t.eq([env.profile["placed_in"](i) for i in srv], [second],
             "its one server is in the Machine's failure domain, not the template's")
        uid = env.machine("fd0", cluster="cfd")["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("fd0"), 40), "a machine without one is ready")
        want = env.profile.get("default_place") or env.default_spec.get("location") or \
            env.default_spec.get("availabilityZone") or "nova"
        t.eq([env.profile["placed_in"](i) for i in env.servers(uid)], [want], "and placed by its template")

        mark = len(env.c.requests())
        uid = env.machine("fdx", cluster="cfd", failure_domain="elsewhere")["metadata"]["uid"]

        def failure():
            st = (env.get("fdx") or {}).get("status") or {}
            return st.get("failureReason"), st.get("failureMessage")
        reason, message = wait_for(lambda: failure()[0] and failure(), 30) or (None, None)
        t.eq(reason, "InvalidFailureDomain", "a failure domain the Cluster does not list is terminal")
        t.ok(message and '"elsewhere"' in message, "the message names it", message)
        # A pass over a failed machine logs nothing to wait for: a fixed wait, then nothing more.
        time.sleep(2.0)
        t.eq([r for r in env.c.requests()[mark:] if env.is_create(r)], [], "no create request for it")
        t.eq(env.servers(uid), [], "and no server")
        for n in ("fd1", "fd0", "fdx"):
            env.delete(n)
        t.ok(wait_for(lambda: all(env.gone(n) for n in ("fd1", "fd0", "fdx")), 40), "all three are deleted",
             ctl.output()[-2000:])
    finally:
        ctl.stop()


def test_paused(t, env):
    """A machine of a paused Cluster (spec.paused) or with the cluster.x-k8s.io/paused annotation
    says Paused=True and nothing is asked of the cloud; unpaused, it is Paused=False and goes on."""
    env.cluster("cpz", paused=True)
    ctl = env.controller()
    try:
        mark = len(env.c.requests())
        uid = env.machine("pz1", cluster="cpz")["metadata"]["uid"]
        t.eq(wait_for(lambda: condition(env.get("pz1"), "Paused", "status"), 30), "True",
             "a machine of a paused Cluster: Paused=True")
        t.eq(condition(env.get("pz1"), "Paused"), "Paused", "with reason Paused")
        t.ok(_pass_after_change(env, ctl, "pz1", "paused"), "a later pass is still paused", ctl.output()[-2000:])
        t.eq(env.c.requests()[mark:], [], "no cloud request while paused")
        t.eq(env.servers(uid), [], "and no server")
        env.k.api("PATCH", CLUSTERS + "/cpz", {"spec": {"paused": False}}, MERGE)
        t.ok(wait_for(lambda: env.ready("pz1"), 40), "ready once the Cluster is unpaused", ctl.output()[-2000:])
        t.eq(condition(env.get("pz1"), "Paused", "status"), "False", "Paused=False")
        t.eq(len(env.servers(uid)), 1, "one server")

        # The annotation on a ready machine: nothing is done with it, not even its deletion.
        env.k.api("PATCH", CNM + "/pz1", {"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}, MERGE)
        t.eq(wait_for(lambda: condition(env.get("pz1"), "Paused", "status") == "True" and "True", 30), "True",
             "the paused annotation: Paused=True")
        mark = len(env.c.requests())
        env.delete("pz1")
        t.ok(_pass_after_change(env, ctl, "pz1", "paused"), "a pass over the deleted, paused machine ran")
        t.eq([r for r in env.c.requests()[mark:] if r["method"] == "DELETE"], [], "its server is not deleted")
        t.ok(env.get("pz1") is not None, "and the finalizer stays")
        env.k.api("PATCH", CNM + "/pz1", {"metadata": {"annotations": {"cluster.x-k8s.io/paused": None}}}, MERGE)
        t.ok(wait_for(lambda: env.gone("pz1"), 40), "unpaused, the deletion completes", ctl.output()[-2000:])
        t.eq(env.servers(uid), [], "no server left behind")
    finally:
        ctl.stop()


def test_credentials_not_movable(t, env):
    """A credentials Secret that clusterctl move would leave behind (no move label, no owner)
    works, and the controller says so once with a Warning Event on the Secret; one labelled
    clusterctl.cluster.x-k8s.io/move gets no such Event."""
    with open(env.conf) as f:
        conf = f.read()
    for name, labels in (("creds-plain", {}), ("creds-moved", {"clusterctl.cluster.x-k8s.io/move": ""})):
        code, _ = env.k.api("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                              "metadata": {"name": name, "labels": labels},
                                              "data": {"cloud.conf": base64.b64encode(conf.encode()).decode()}})
        t.eq(code, 201, "Secret %s" % name)
    ctl = env.controller()
    try:
        env.machine("mv1", extra_spec={"credentials": {"secretRef": {"name": "creds-plain"}}})
        env.machine("mv2", extra_spec={"credentials": {"secretRef": {"name": "creds-moved"}}})
        t.ok(wait_for(lambda: env.ready("mv1") and env.ready("mv2"), 40), "both machines get ready with their Secret",
             ctl.output()[-2000:])

        def warnings(secret):
            code, body = env.k.api("GET", "/api/v1/namespaces/%s/events" % NS)
            return [e for e in (body or {}).get("items", []) if e.get("reason") == "NotMovable" and
                    (e.get("involvedObject") or e.get("regarding") or {}).get("name") == secret]
        found = wait_for(lambda: warnings("creds-plain"), 20)
        t.ok(found and found[0].get("type") == "Warning" and
             (found[0].get("involvedObject") or found[0].get("regarding") or {}).get("kind") == "Secret",
             "a Warning Event NotMovable on the Secret without the move label", found)
        t.eq(warnings("creds-moved"), [], "none for the labelled one")
        for n in ("mv1", "mv2"):
            env.delete(n)
        t.ok(wait_for(lambda: env.gone("mv1") and env.gone("mv2"), 40), "both deleted")
    finally:
        ctl.stop()
