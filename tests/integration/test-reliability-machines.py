#!/usr/bin/env python3
"""Fault soak of cloudnode-controller's machine controller, once per provider (Hetzner, then
OpenStack, each with its own fake API server and cloud): CloudnodeMachines are created and
deleted while a random mix of faults hits the cloud's API (Hetzner's API, OpenStack's Keystone
and Nova: 5xx, 429 throttling, TCP resets before and after the cloud did the request, latency)
and the fake API server (5xx and 409 conflicts on CloudnodeMachine writes, closed watches, 410
Gone). Then: every machine converged (ready, one server carrying its UID),
no duplicate create, after deletion no orphaned server, the process never exited, RSS at the end
within a small margin of RSS after warm-up, fds back to their warm-up count.

Bounded for `make check` (about 20 s): CN_RELIABILITY_MACHINES (default 6 after 2 warm-up
machines); seed CN_RELIABILITY_SEED (printed). CN_RELIABILITY_STATS=FILE appends the figures."""
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))
from relutil import fd_count, fd_kinds, machines_helpers, record, rss_check, rss_kb  # noqa: E402
from cntap import Tap, build  # noqa: E402

RSS_MARGIN_KB = 1536
SOCKET_SLACK = 2 * 4

def cloud_faults(provider):
    """One fault of every kind on each of the provider's API services."""
    services = {"hetzner": ["api"], "openstack": ["compute", "identity"]}[provider]
    return [dict(rule, platform=provider, service=svc) for svc in services
            for rule in ({"status": 500}, {"status": 503}, {"reset": True}, {"latency": 0.4},
                         {"reset": True, "after_commit": True})]


def answers_first(rule):
    """Whether the rule answers a request in the cloud's place (it never reached the cloud)."""
    return bool(rule.get("status") or rule.get("throttle") or (rule.get("reset") and not rule.get("after_commit")))


KUBE_FAULTS = [
    {"verb": "patch", "resource": "cloudnodemachines", "code": 500},
    {"verb": "patch", "resource": "cloudnodemachines", "action": "conflict"},
    {"verb": "patch", "resource": "cloudnodemachines", "subresource": "status", "code": 503, "retryAfter": 1},
    {"verb": "watch", "resource": "cloudnodemachines", "action": "close-watch", "afterEvents": 1},
    {"verb": "watch", "resource": "cloudnodemachines", "action": "gone"},
]


def soak(t, m, env, rng, count, stats):
    k, c = env.k, env.c
    ctl = env.controller()
    faults = cloud_faults(env.provider)
    pid = ctl.p.pid
    mark = len(c.requests())
    uids = {}
    try:
        for n in ("warm-0", "warm-1"):
            uids[n] = env.machine(n)["metadata"]["uid"]
        answered = set()
        for rule in faults:
            r = c.fail(dict(rule, count=1))
            if answers_first(r):
                answered.add(r["id"])
        stats["faults"] += len(faults)
        t.ok(m.wait_for(lambda: env.ready("warm-0") and env.ready("warm-1"), 60),
             "warm-up machines ready through one cloud fault of every kind", ctl.output()[-2000:])
        env.delete("warm-1")
        t.ok(m.wait_for(lambda: env.gone("warm-1"), 60), "warm-up machine deleted", ctl.output()[-4000:])
        time.sleep(0.5)
        rss0, fds0, kinds0 = rss_kb(pid), fd_count(pid), fd_kinds(pid)
        t.diag("after warm-up: RSS %d kB, %d fds (%d sockets)" % (rss0, fds0, kinds0["socket"]))

        names = ["soak-%02d" % i for i in range(count)]
        for n in names:
            for _ in range(rng.randint(1, 2)):
                if rng.random() < 0.6:
                    rule = dict(rng.choice(faults), count=rng.randint(1, 2))
                    r = c.fail(rule)
                    if answers_first(r):
                        answered.add(r["id"])
                else:
                    rule = dict(rng.choice(KUBE_FAULTS), count=1)
                    k.inject(rule)
                stats["faults"] += rule["count"]
            uids[n] = env.machine(n)["metadata"]["uid"]
            time.sleep(rng.uniform(0.1, 0.6))
        ready = m.wait_for(lambda: all(env.ready(n) for n in names), 90)
        converged = sum(1 for n in names if env.ready(n))
        t.ok(ready, "all %d machines converged under the fault mix" % count,
             [n for n in names if not env.ready(n)])
        t.eq(sorted(n for n in names if len(env.servers(uids[n])) != 1), [],
             "exactly one server carries each machine's UID")
        for n in names:
            env.delete(n)
        t.ok(m.wait_for(lambda: all(env.gone(n) for n in names), 90), "all machines deleted",
             [n for n in names if not env.gone(n)])
        k.clear_faults()
        c.clear_faults()
        t.eq(sorted(n for n in names + ["warm-1"] if env.servers(uids[n])), [], "no orphaned server")
        # Every create that reached the cloud counts, made (Hetzner 201, Nova 202) or refused (409:
        # the name is taken, i.e. a second try); only those a fault answered before the cloud
        # handled them do not.
        creates = [r for r in c.requests()[mark:] if env.is_create(r) and r.get("fault") not in answered]
        t.eq(len(creates), count + 2, "no duplicate create (%d create requests reached the cloud for %d machines: %s)" %
             (len(creates), count + 2, [r.get("status") for r in creates]))
        t.ok(ctl.p.poll() is None, "the controller never exited", ctl.output()[-2000:])
        time.sleep(0.5)
        rss1, fds1 = rss_kb(pid), fd_count(pid)
        rss_check(t, rss1 <= rss0 + RSS_MARGIN_KB, "RSS after the soak %d kB, after warm-up %d kB (margin %d kB)" %
             (rss1, rss0, RSS_MARGIN_KB))
        # Everything but sockets comes back exactly (timers, event loops, files). Sockets: the
        # watches plus the idle connections the HTTP client keeps for reuse, at most
        # CN_HTTP_IDLE_CONNECTIONS_MAX (4) for each of the controller's two HTTP clients (Kubernetes
        # and cloud), so they may grow from the warm-up's count by that much and no more.
        kinds1 = fd_kinds(pid)
        t.ok(kinds1["other"] == kinds0["other"], "fds other than sockets after the soak %d, after warm-up %d" %
             (kinds1["other"], kinds0["other"]), sorted(os.readlink("/proc/%d/fd/%s" % (pid, f)) for f in os.listdir("/proc/%d/fd" % pid)))
        t.ok(kinds1["socket"] <= kinds0["socket"] + SOCKET_SLACK,
             "sockets after the soak %d, after warm-up %d (idle connection cache: at most %d more)" %
             (kinds1["socket"], kinds0["socket"], SOCKET_SLACK))
        stats.update(machines=count + 2, converged=converged, rss_kb=[rss0, rss1],
                     fds=[fds0, fds1])
    finally:
        t.eq(ctl.stop(), 0, "SIGTERM: clean exit")



def main():
    t = Tap()
    if not os.access(build("controller", "cloudnode-controller"), os.X_OK):
        t.bail_out("cloudnode-controller is not built")
    count = int(os.environ.get("CN_RELIABILITY_MACHINES", "6"))
    seed = int(os.environ.get("CN_RELIABILITY_SEED", str(int(time.time()))))
    t.diag("seed %d (CN_RELIABILITY_SEED to repeat)" % seed)
    m = machines_helpers()
    for provider, name in (("hetzner", "machines"), ("openstack", "machines-openstack")):
        stats = {"test": name, "faults": 0, "seed": seed}
        t.diag("provider %s" % provider)
        with tempfile.TemporaryDirectory() as tmp, m.machine_env(tmp, provider, 0.3, 0.2) as env:
            t.run(soak, m, env, random.Random(seed), count, stats)
        record(stats)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
