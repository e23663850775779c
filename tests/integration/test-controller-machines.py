#!/usr/bin/env python3
"""cloudnode-controller as a Cluster API infrastructure provider (Hetzner) against the fake API
server (with Cluster API's Cluster and Machine registered as CRDs) and the fake cloud:
create -> ready -> delete, SIGKILL at random points of create and delete without duplicate or
orphaned servers, a server removed out of band, an invalid spec as a terminal condition without
retries, and 429 storms."""
import base64
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

try:
    import cncapi  # noqa: E402
    # USER, Env, Controller and wait_for are also used by tests/reliability/relutil.py.
    from cncapi import MACHINES, MERGE, NS, RBAC, USER, wait_for  # noqa: E402,F401
    from fakecloud import FakeCloud  # noqa: E402
    from fakekube import FakeKube  # noqa: E402
except ImportError as e:
    FakeKube = None
    IMPORT_ERROR = str(e)


def Controller(k, tmp, conf, leader_args=("--leader-elect=false",)):
    return cncapi.Controller(k, tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", conf], leader_args)


class Env(cncapi.CapiEnv):
    def setup(self):
        super().setup()
        self.cluster("c1")


def test_lifecycle(t, env):
    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        cnm = env.machine("m1")
        uid = cnm["metadata"]["uid"]
        ok = wait_for(lambda: env.ready("m1"), 40)
        t.ok(ok, "create -> ready", ctl.output()[-3000:])
        o = env.get("m1")
        srv = env.servers(uid)
        t.eq(len(srv), 1, "exactly one server carries the machine's UID")
        if srv:
            t.eq(o["spec"]["providerID"], "hcloud://%s" % srv[0]["id"], "providerID names the server")
        st = o.get("status") or {}
        t.ok(st.get("initialization", {}).get("provisioned") is True, "v1beta2 status.initialization.provisioned")
        t.ok(any(a.get("type") == "ExternalIP" for a in st.get("addresses", [])), "addresses reported",
             st.get("addresses"))
        t.ok("cloudnodemachine.infrastructure.cluster.x-k8s.io" in o["metadata"].get("finalizers", []),
             "finalizer added")
        env.delete("m1")
        t.ok(wait_for(lambda: env.gone("m1"), 40), "delete removes the finalizer once the server is gone",
             ctl.output()[-2000:])
        t.eq(env.servers(uid), [], "no server left behind")
    finally:
        ctl.stop()


def test_wait_for_bootstrap(t, env):
    ctl = Controller(env.k, env.tmp, env.conf)
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
        wait_for(lambda: env.gone("m2"), 40)
    finally:
        ctl.stop()


def test_kill_points(t, env, rounds=6):
    seed = int(os.environ.get("CN_TEST_SEED", str(random.randrange(1 << 30))))
    t.diag("kill points seeded with CN_TEST_SEED=%d" % seed)
    rng = random.Random(seed)
    uids = []
    mark = len(env.c.requests())
    for i in range(rounds):
        name = "k%d" % i
        ctl = Controller(env.k, env.tmp, env.conf)
        cnm = env.machine(name)
        uids.append(cnm["metadata"]["uid"])
        time.sleep(rng.uniform(0.0, 1.5))
        ctl.kill()
        ctl = Controller(env.k, env.tmp, env.conf)
        try:
            t.ok(wait_for(lambda: env.ready(name), 40), "%s: ready after a SIGKILL during create" % name)
        finally:
            # Kill once more during delete.
            env.delete(name)
            time.sleep(rng.uniform(0.0, 1.0))
            ctl.kill()
        ctl = Controller(env.k, env.tmp, env.conf)
        try:
            t.ok(wait_for(lambda: env.gone(name), 40), "%s: deleted after a SIGKILL during delete" % name)
        finally:
            ctl.stop()
    leftovers = [u for u in uids if env.servers(u)]
    t.eq(leftovers, [], "no orphaned server after %d random kill points" % rounds)
    creates = [r for r in env.c.requests()[mark:]
               if r.get("method") == "POST" and r.get("path", "").endswith("/v1/servers")]
    t.ok(len(creates) <= rounds, "no duplicate create (%d creates for %d machines)" % (len(creates), rounds))


def test_two_replicas(t, env):
    """Two replicas with leader election; the leader is killed while machines are being created.
    The follower takes over; still one server per machine."""
    args = ("--leader-elect=true", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms")
    a = Controller(env.k, env.tmp, env.conf, args)
    b = Controller(env.k, env.tmp, env.conf, args)
    lease = "/apis/coordination.k8s.io/v1/namespaces/cloudnode/leases/cloudnode-controller"
    try:
        holder = wait_for(lambda: (env.k.api("GET", lease)[1] or {}).get("spec", {}).get("holderIdentity"), 20)
        leader = wait_for(lambda: next((x for x in (a, b) if "Became the leader" in x.output()), None), 20)
        t.ok(holder and leader, "one replica leads")
        t.ok(not all("Became the leader" in x.output() for x in (a, b)), "only one")
        uids = [env.machine("ha%d" % i)["metadata"]["uid"] for i in range(3)]
        time.sleep(0.7)
        # Kill the leader mid-create; the other must take over once the lease expires.
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


def test_out_of_band_delete(t, env):
    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        cnm = env.machine("oob")
        uid = cnm["metadata"]["uid"]
        wait_for(lambda: env.ready("oob"), 40)
        srv = env.servers(uid)
        for s in srv:
            env.c.remove_instance(s["id"])
        time.sleep(2.0)
        t.eq(env.servers(uid), [], "a server removed out of band is not re-created")
        env.delete("oob")
        t.ok(wait_for(lambda: env.gone("oob"), 30), "and the machine can still be deleted")
    finally:
        ctl.stop()


def test_invalid_spec(t, env):
    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        before = len(env.c.requests())
        env.machine("bad", spec={"serverType": "cx999", "image": "ubuntu-24.04", "location": "fsn1"})

        def failure():
            return ((env.get("bad") or {}).get("status") or {}).get("failureReason")
        t.eq(wait_for(failure, 30), "InvalidConfiguration", "invalid spec is a terminal condition")
        time.sleep(2.0)
        posts = [r for r in env.c.requests()[before:] if r.get("method") == "POST"]
        t.eq(len(posts), 1, "and is not retried")
        env.delete("bad")
        t.ok(wait_for(lambda: env.gone("bad"), 30), "a failed machine is deleted cleanly")
    finally:
        ctl.stop()


def test_rate_limited(t, env):
    env.c.throttle("hetzner", count=4)
    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        env.machine("rl")
        t.ok(wait_for(lambda: env.ready("rl"), 60), "429 storm: retried until ready", ctl.output()[-2000:])
        env.delete("rl")
        wait_for(lambda: env.gone("rl"), 30)
    finally:
        ctl.stop()
        env.c.clear_faults()


def main():
    t = Tap()
    if FakeKube is None:
        t.skip_all("fake servers not available: %s" % IMPORT_ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        with FakeKube(os.path.join(tmp, "kube"), rbac=RBAC) as k, \
                FakeCloud(os.path.join(tmp, "cloud")) as c:
            c.settings(build_seconds=0.5, action_seconds=0.3)
            env = Env(k, c, tmp)
            env.setup()
            t.run(test_lifecycle, env)
            t.run(test_wait_for_bootstrap, env)
            t.run(test_invalid_spec, env)
            t.run(test_out_of_band_delete, env)
            t.run(test_rate_limited, env)
            t.run(test_two_replicas, env)
            t.run(test_kill_points, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
