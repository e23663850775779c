#!/usr/bin/env python3
"""The machine controller's API calls per CloudnodeMachine do not grow with the number of
machines: 20 machines created together, made ready and deleted, then the Kubernetes calls
(from the fake API server's audit log) and the cloud calls (the fake cloud's request log) per
machine are counted. One lifecycle needs about 6 of each (finalizer, instance id, readiness,
providerID, bootstrap Secret, finalizer removal; lookup, create, polls, delete); reconciling
every machine on every event, or status writes that echo back as events, made these counts grow
with the number of machines (over 100 per machine at 10 machines)."""
import collections
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)
from cntap import Tap, src  # noqa: E402

mt = __import__("test-controller-machines")  # its harness: one way to drive the controller

MACHINES = 20
# Bounds with headroom over the ~6 calls each that a lifecycle takes, far below what a
# per-event full resync costs at this size.
KUBE_PER_MACHINE = 10
WRITES_PER_MACHINE = 7
CLOUD_PER_MACHINE = 12


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp, mt.machine_env(tmp) as env:
        k, c = env.k, env.c
        ctl = mt.Controller(k, tmp, env.conf)
        try:
            names = ["n%d" % i for i in range(MACHINES)]
            cloud0, kube0 = len(c.requests()), len(k.audit())
            for name in names:
                env.machine(name)
            ok = mt.wait_for(lambda: all(env.ready(x) for x in names), 120, step=0.2)
            t.ok(ok, "%d machines ready" % MACHINES, ctl.output()[-3000:])
            for name in names:
                env.delete(name)
            gone = mt.wait_for(lambda: all(env.gone(x) for x in names), 120, step=0.2)
            t.ok(gone, "and deleted", ctl.output()[-3000:])
            # The machine lifecycle's own calls: CloudnodeMachines and bootstrap Secrets (the
            # controller's other loops, such as its operator status, are not per machine).
            calls = [a for a in k.audit()[kube0:] if a.get("user") == mt.USER and
                     a.get("resource") in ("cloudnodemachines", "secrets")]
            by = collections.Counter("%s %s%s" % (a["verb"], a["resource"],
                                                  "/" + a["subresource"] if a.get("subresource") else "")
                                     for a in calls)
            t.diag("kube calls: %s" % dict(by))
            writes = [a for a in calls if a["verb"] in ("patch", "update", "create")]
            t.ok(len(calls) <= KUBE_PER_MACHINE * MACHINES,
                 "Kubernetes calls per machine bounded: %.1f <= %d" % (len(calls) / MACHINES, KUBE_PER_MACHINE))
            t.ok(len(writes) <= WRITES_PER_MACHINE * MACHINES,
                 "writes per machine bounded (no echo loop): %.1f <= %d" % (len(writes) / MACHINES,
                                                                              WRITES_PER_MACHINE))
            cloud = c.requests()[cloud0:]
            t.diag("cloud calls: %s" % dict(collections.Counter("%s %s" % (r["method"], re.sub(r"/[0-9]+", "/ID", r["path"].split("?")[0]))
                                                                 for r in cloud)))
            t.ok(len(cloud) <= CLOUD_PER_MACHINE * MACHINES,
                 "cloud calls per machine bounded: %.1f <= %d" % (len(cloud) / MACHINES, CLOUD_PER_MACHINE))
            creates = [r for r in cloud if r["method"] == "POST"]
            t.eq(len(creates), MACHINES, "one create per machine")
        finally:
            t.eq(ctl.stop(), 0, "the controller exits cleanly")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
