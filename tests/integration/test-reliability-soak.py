#!/usr/bin/env python3
"""Fault soak of cloudnode-initializer (cluster mode, Hetzner): for a bounded time Nodes keep
arriving while a random mix of faults is injected into the fake API server (5xx, 429/503 with
Retry-After, 409 conflicts, failing lists, closed and dropped watches, 410 Gone, latency) and the
fake cloud (5xx, 429 throttling, TCP resets, latency). Then: every Node initialized exactly once
(one successful taint-removing PATCH per Node in the audit log), the process never exited, RSS
at the end within a small margin of RSS after warm-up, open fds back to their warm-up count.
Second phase: many watch restarts in a row (every watch closed after one event) with fd count and
RSS bounded across them.

Bounded for `make check` (about 30 s). Longer: CN_RELIABILITY_SOAK_SECONDS (default 8) and
CN_RELIABILITY_WATCH_RESTARTS (default 60); seed CN_RELIABILITY_SEED (printed).
CN_RELIABILITY_STATS=FILE appends the figures as one JSON line (tests/reliability/report.py)."""
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))
from relutil import fd_count, fd_kinds, record, rss_check, rss_kb  # noqa: E402
from cntap import Tap  # noqa: E402
from cninit import (BINARY, CLUSTER_SA, RBAC, Initializer, addresses, events, get_node, hetzner_conf,  # noqa: E402
                    initialized, make_node, wait_for, writes)
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402


def fd_targets(pid):
    out = []
    for f in sorted(os.listdir("/proc/%d/fd" % pid), key=int):
        try:
            out.append("%s -> %s" % (f, os.readlink("/proc/%d/fd/%s" % (pid, f))))
        except OSError:
            pass
    return "\n".join(out)

# RSS may grow this much after warm-up (allocator arenas, the HTTP client's connection cache, sd-event's
# sources settle within the first minutes); a per-request or per-Node leak shows beyond it in
# the longer form.
RSS_MARGIN_KB = 1536
LIVE = 6
SYNCS = 3
# Connections the initializer keeps for reuse by design: to the API server 2 x syncs + 3 (the
# watch's among them), to the cloud syncs + 4 in cluster mode; plus the /metrics listener. How
# many stay idle after a busy spell depends on how many requests overlapped in it, so sockets are
# held to that bound and every other kind of fd to its warm-up count.
SOCKETS_MAX = (2 * SYNCS + 3) + (SYNCS + 4) + 1
KUBE_FAULTS = [
    {"verb": "patch", "resource": "nodes", "subresource": "status", "code": 503, "retryAfter": 1},
    {"verb": "patch", "resource": "nodes", "subresource": "", "code": 429, "retryAfter": 1},
    {"verb": "patch", "resource": "nodes", "subresource": "", "action": "conflict"},
    {"verb": "patch", "resource": "nodes", "code": 500},
    {"verb": "patch", "resource": "nodes", "latency": 0.5},
    {"verb": "list", "resource": "nodes", "code": 500},
    {"verb": "watch", "resource": "nodes", "action": "gone"},
    {"verb": "watch", "resource": "nodes", "action": "close-watch", "afterEvents": 1},
    {"verb": "watch", "resource": "nodes", "action": "abort-watch", "afterEvents": 2},
    {"verb": "create", "resource": "events", "code": 500},
    # Stored, and the answer lost.
    {"verb": "patch", "resource": "nodes", "subresource": "status", "action": "reset-after-commit"},
    {"verb": "patch", "resource": "nodes", "subresource": "", "action": "reset-after-commit"},
]
CLOUD_FAULTS = [
    {"platform": "hetzner", "service": "api", "status": 500},
    {"platform": "hetzner", "service": "api", "status": 503},
    {"platform": "hetzner", "service": "api", "reset": True},
    {"platform": "hetzner", "service": "api", "latency": 0.4},
]


def inject_random(k, c, rng, counts):
    if rng.random() < 0.6:
        rule = dict(rng.choice(KUBE_FAULTS), count=rng.randint(1, 3))
        k.inject(rule)
        counts["kube"] += rule["count"]
    elif rng.random() < 0.8:
        rule = dict(rng.choice(CLOUD_FAULTS), count=rng.randint(1, 2))
        c.fail(rule)
        counts["cloud"] += rule["count"]
    else:
        c.throttle("hetzner", count=1)
        counts["cloud"] += 1


def watch_restarts(k):
    return len([r for r in k.audit() if r.get("user") == CLUSTER_SA and r.get("verb") == "watch"
                and r.get("resource") == "nodes"])


def soak(t, k, c, d, rng, seconds, restarts_wanted, stats):
    conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner", "--cloud-config=" + conf,
            "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1",
            "--concurrent-node-syncs=%d" % SYNCS, "-v", "2"]
    names = []
    t0 = time.monotonic()

    def add_node():
        n = "soak-%03d" % len(names)
        c.add_instance({"platform": "hetzner", "name": n})
        make_node(k, n)
        names.append(n)

    with Initializer(args, state_dir=d, name="soak") as i:
        pid = i.proc.pid
        # Warm-up: a first batch through one of every fault kind, so every code path has run once.
        for _ in range(6):
            add_node()
        for rule in KUBE_FAULTS:
            k.inject(dict(rule, count=1))
        for rule in CLOUD_FAULTS:
            c.fail(dict(rule, count=1))
        stats["faults"] += len(KUBE_FAULTS) + len(CLOUD_FAULTS)
        warm = wait_for(lambda: all(initialized(k, n) for n in names), 60)
        t.ok(warm, "warm-up: first Nodes initialized through one fault of every kind", i.log()[-2000:])
        time.sleep(1)
        rss0, fds0, kinds0 = rss_kb(pid), fd_count(pid), fd_kinds(pid)
        t.diag("after warm-up: RSS %d kB, %d fds (%s)" % (rss0, fds0, kinds0))

        # The informer caches every Node, so the number of Nodes is held constant (initialized
        # Nodes beyond the newest LIVE are deleted) to compare RSS like for like.
        counts = {"kube": 0, "cloud": 0}
        live, seen, bare = list(names), set(), []
        end = time.monotonic() + seconds
        while time.monotonic() < end and i.proc.poll() is None:
            add_node()
            live.append(names[-1])
            for old in live[:-LIVE]:
                node = initialized(k, old)
                if node:
                    if not any(ty == "InternalIP" for ty, _ in addresses(node)):
                        bare.append(old)
                    seen.add(old)
                    live.remove(old)
                    k.api("DELETE", "/api/v1/nodes/" + old)
            for _ in range(rng.randint(0, 2)):
                inject_random(k, c, rng, counts)
            time.sleep(rng.uniform(0.05, 0.4))
        stats["faults"] += counts["kube"] + counts["cloud"]
        t.diag("soak: %d Nodes, faults injected: %s" % (len(names), counts))
        t.diag("%.1f s: fault mix over, waiting for the last Nodes" % (time.monotonic() - t0))
        done = wait_for(lambda: all(initialized(k, n) for n in live), 90)
        t.diag("%.1f s: all initialized" % (time.monotonic() - t0))
        k.clear_faults()
        c.clear_faults()
        seen.update(n for n in live if initialized(k, n))
        bare += [n for n in live if initialized(k, n) and not any(ty == "InternalIP" for ty, _ in
                                                                  addresses(get_node(k, n)))]
        # The path, not only the end: the taint never goes before the addresses are written.
        t.eq(bare, [], "every Node had its addresses when it was seen untainted")
        conflicts = [e.get("message", "") for e in events(k) if e.get("type") == "Warning"
                     and ("onflict" in e.get("message", "") or "modified" in e.get("message", ""))]
        t.eq(conflicts, [], "no 409 became a Warning Event")
        t.ok(done and seen == set(names), "all %d Nodes initialized after the fault mix" % len(names),
             sorted(set(names) - seen)[:10])
        t.ok(i.proc.poll() is None, "the initializer never exited",
             "exit status %s; its log ends:\n%s" % (i.proc.returncode, i.log()[-2000:]))
        if i.proc.poll() is not None:
            return
        once = {}
        for n in names:
            good = [x for x in writes(k, CLUSTER_SA, n) if x[0] == "patch" and x[1] == "" and x[3] == 200]
            once[n] = len(good)
        t.eq(sorted({n: v for n, v in once.items() if v != 1}.items()), [],
             "every Node initialized exactly once (one successful taint-removing PATCH each)")
        time.sleep(1)
        # Requests still retrying when the last Node is done hold their connections a moment longer
        # (seconds under the sanitizers); a leaked fd stays.
        wait_for(lambda: fd_count(pid) <= fds0 + 2, 10, 0.2)
        rss1, fds1, kinds1 = rss_kb(pid), fd_count(pid), fd_kinds(pid)
        rss_check(t, rss1 <= rss0 + RSS_MARGIN_KB, "RSS after the soak %d kB, after warm-up %d kB (margin %d kB)" %
             (rss1, rss0, RSS_MARGIN_KB))
        t.ok(kinds1["other"] <= kinds0["other"] and kinds1["socket"] <= SOCKETS_MAX,
             "open fds after the soak %d (%s), after warm-up %d (%s); at most %d sockets" %
             (fds1, kinds1, fds0, kinds0, SOCKETS_MAX), fd_targets(pid))

        t.eq(i.stop(), 0, "SIGTERM: clean exit after the soak")
        stats.update(nodes=len(names), seconds=seconds, rss_warm_kb=rss0, rss_end_kb=rss1, fds=[fds0, fds1])

    # Watch restarts, in a fresh process: fault rules apply to watches that start after them, so
    # the rule (every watch ends after one event) is in place before the initializer starts. Each
    # label change on a Node is one event and so forces one restart.
    make_node(k, "churn", tainted=False)
    k.inject({"verb": "watch", "resource": "nodes", "action": "close-watch", "afterEvents": 1, "count": -1})
    base = watch_restarts(k)
    with Initializer(args, state_dir=d, name="watch-churn") as i:
        pid = i.proc.pid
        n = 0

        def churn(upto):
            nonlocal n
            deadline = time.monotonic() + max(20, upto / 3)
            while watch_restarts(k) - base < upto and time.monotonic() < deadline and i.proc.poll() is None:
                for _ in range(10):  # the audit log is read whole: not after every change
                    n += 1
                    k.api("PATCH", "/api/v1/nodes/churn", {"metadata": {"labels": {"churn": str(n)}}},
                          content_type="application/merge-patch+json")
                    time.sleep(0.02)
            return watch_restarts(k) - base

        t.diag("%.1f s: watch restarts begin" % (time.monotonic() - t0))
        warm = churn(max(20, restarts_wanted // 5))
        time.sleep(0.5)
        rss_w0, fds_w0 = rss_kb(pid), fd_count(pid)
        restarts = churn(restarts_wanted + warm)
        time.sleep(0.5)
        rss_w1, fds_w1 = rss_kb(pid), fd_count(pid)
        t.diag("%.1f s: watch restarts done" % (time.monotonic() - t0))
        k.clear_faults()
        t.ok(restarts - warm >= restarts_wanted, "%d watch restarts after a warm-up of %d (wanted %d)" %
             (restarts - warm, warm, restarts_wanted))
        t.ok(fds_w1 <= fds_w0 + 2, "fds across the watch restarts: %d -> %d" % (fds_w0, fds_w1))
        rss_check(t, rss_w1 <= rss_w0 + RSS_MARGIN_KB, "RSS across the watch restarts: %d -> %d kB" % (rss_w0, rss_w1))
        c.add_instance({"platform": "hetzner", "name": "after-churn"})
        make_node(k, "after-churn")
        t.ok(wait_for(lambda: initialized(k, "after-churn"), 30), "still initializing Nodes after the restarts",
             i.log()[-2000:])
        t.eq(i.stop(), 0, "SIGTERM: clean exit after the watch restarts")
        stats.update(watch_restarts=restarts, rss_watch_kb=[rss_w0, rss_w1], fds_watch=[fds_w0, fds_w1])



def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.skip_all("cloudnode-initializer is not built")
    seconds = float(os.environ.get("CN_RELIABILITY_SOAK_SECONDS", "8"))
    restarts = int(os.environ.get("CN_RELIABILITY_WATCH_RESTARTS", "60"))
    seed = int(os.environ.get("CN_RELIABILITY_SEED", str(int(time.time()))))
    t.diag("seed %d (CN_RELIABILITY_SEED to repeat)" % seed)
    stats = {"test": "soak", "faults": 0, "seed": seed}
    with tempfile.TemporaryDirectory() as d:
        with FakeKube(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(soak, k, c, d, random.Random(seed), seconds, restarts, stats)
    record(stats)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
