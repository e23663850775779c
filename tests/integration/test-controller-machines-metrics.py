#!/usr/bin/env python3
"""cloudnode-controller's /metrics during a machine lifecycle: CloudnodeMachines by phase
(Provisioning, Running, Deleting, Failed) as the machines move through them, and cloud API
requests by operation and result (ok, not-found, terminal, retryable) agreeing with what the fake
cloud saw, CloudnodeMachines by the provider's machine labels (size, location); the exposition
passes promtool check metrics."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

from capimachines import machine_env  # noqa: E402
from cncapi import Controller, wait_for  # noqa: E402

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text, name):
    """{frozenset(labels): value} of one metric."""
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name:
            out[frozenset(LABEL.findall(m.group(2) or ""))] = float(m.group(3))
    return out


def phases(ctl):
    s = samples(ctl.metrics(), "cloudnode_machines")
    return {dict(k)["phase"]: v for k, v in s.items() if dict(k).get("provider") == "hetzner"}


def calls(ctl):
    s = samples(ctl.metrics(), "cloudnode_cloud_api_requests_total")
    return {(dict(k)["operation"], dict(k)["result"]): v for k, v in s.items() if dict(k).get("provider") == "hetzner"}


def our_requests(env):
    return [r for r in env.c.requests() if (r.get("headers") or {}).get("User-Agent", "").startswith("cloudnode")]


def test_lifecycle_metrics(t, env):
    ctl = Controller(env.k, env.tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", env.conf])
    try:
        t.ok(wait_for(lambda: phases(ctl).get("Running") == 0, 20), "phases are exported from the start",
             ctl.output()[-1500:])
        t.eq(phases(ctl), {"Provisioning": 0, "Running": 0, "Deleting": 0, "Failed": 0}, "all four, zero")

        # The machine's first lookup finds nothing and it is created; the lookups that poll it
        # are refused (503) until a scrape has seen it Provisioning: the phase lasts as long as
        # the test needs, however loaded the machine is.
        env.c.fail({"platform": "hetzner", "method": "GET", "path": r"^/v1/servers\?label_selector=", "skip": 1,
                    "status": 503})
        env.machine("mt1")
        seen = []

        def provisioning():
            seen.append((round(time.monotonic() - t0, 2), phases(ctl), (env.get("mt1") or {}).get("status")))
            return seen[-1][1].get("Provisioning") == 1

        t0 = time.monotonic()
        t.ok(wait_for(provisioning, 20), "a new machine is Provisioning",
             "\n".join(map(repr, seen[:3] + seen[-3:])) + "\n" + ctl.output()[-3000:])
        env.c.clear_faults()
        t.ok(wait_for(lambda: env.ready("mt1"), 40), "ready")
        t.ok(wait_for(lambda: phases(ctl) == {"Provisioning": 0, "Running": 1, "Deleting": 0, "Failed": 0}, 20),
             "then Running", phases(ctl))
        c = calls(ctl)
        t.eq(c.get(("machine_create", "ok")), 1, "one create")
        t.ok(set(r for _, r in c) <= {"ok", "not-found", "terminal", "retryable"}, "results are classified")
        t.ok(c.get(("machine_get", "ok"), 0) >= 1, "polled until running", c)

        env.machine("mt2", spec={"serverType": "cx999", "image": "ubuntu-24.04", "location": "fsn1"})
        t.ok(wait_for(lambda: phases(ctl).get("Failed") == 1, 30), "an invalid spec is Failed", phases(ctl))
        c = calls(ctl)
        t.eq(c.get(("machine_create", "terminal")), 1, "its create counted as terminal")

        # The cloud refuses deletes for a while: the machine stays Deleting and the refusals count
        # as retryable.
        env.c.fail({"platform": "hetzner", "method": "DELETE", "path": "^/v1/servers/", "status": 503})
        env.delete("mt1")
        t.ok(wait_for(lambda: phases(ctl).get("Deleting") == 1 and phases(ctl).get("Running") == 0, 20),
             "a machine being deleted is Deleting", phases(ctl))
        t.ok(wait_for(lambda: calls(ctl).get(("machine_delete", "retryable"), 0) >= 2, 30),
             "refused deletes count as retryable", calls(ctl))
        env.c.clear_faults()
        t.ok(wait_for(lambda: env.gone("mt1"), 60), "deleted once the cloud allows it")
        t.ok(wait_for(lambda: calls(ctl).get(("machine_delete", "ok"), 0) == 1, 20), "one delete went through",
             calls(ctl))
        env.delete("mt2")
        t.ok(wait_for(lambda: env.gone("mt2"), 30), "the failed machine is deleted")
        t.ok(wait_for(lambda: phases(ctl) == {"Provisioning": 0, "Running": 0, "Deleting": 0, "Failed": 0}, 20),
             "all phases back to zero", phases(ctl))

        c = calls(ctl)
        t.eq(c.get(("machine_create", "terminal")), 1, "an invalid spec is sent to the cloud once, however busy")
        seen = our_requests(env)
        # A lookup still in flight when its machine leaves the cache is cancelled and has no result
        # to count; creates and deletes are never cancelled that way and add up exactly.
        t.ok(0 < sum(c.values()) <= len(seen), "no request counted that the cloud did not see (%d of %d)"
             % (sum(c.values()), len(seen)))
        posts = [r for r in seen if r["method"] == "POST" and r["path"] == "/v1/servers"]
        t.eq(int(c.get(("machine_create", "ok"), 0) + c.get(("machine_create", "terminal"), 0)), len(posts),
             "creates by result add up to the creates the cloud saw")
        deletes = [r for r in seen if r["method"] == "DELETE"]
        t.eq(int(sum(v for (op, _), v in c.items() if op == "machine_delete")), len(deletes),
             "deletes by result add up to the deletes the cloud saw")

        text = ctl.metrics()
        promtool = shutil.which("promtool")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            t.ok(p.returncode == 0, "promtool check metrics passes", p.stdout + p.stderr)
        else:
            t.skip("promtool check metrics", "promtool not installed")
    finally:
        t.eq(ctl.stop(), 0, "SIGTERM: clean exit")
        env.c.clear_faults()


def by_spec(ctl):
    return {(dict(k)["provider"], dict(k)["size"], dict(k)["location"]): v
            for k, v in samples(ctl.metrics(), "cloudnode_machines_by_spec").items()}


def test_spec_metrics(t, env):
    """CloudnodeMachines counted by the provider's machine labels (size and location): a series
    per combination in use, gone with its last machine."""
    ctl = Controller(env.k, env.tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", env.conf])
    try:
        env.cluster("cms", failure_domains=["fsn1", "hel1"])
        env.machine("ms1", cluster="cms")
        env.machine("ms2", cluster="cms")
        env.machine("ms3", cluster="cms", spec={"serverType": "cx32", "image": "ubuntu-24.04", "location": "nbg1"})
        env.machine("ms4", cluster="cms", failure_domain="hel1")
        want = {("hetzner", "cx22", "fsn1"): 2, ("hetzner", "cx32", "nbg1"): 1, ("hetzner", "cx22", "hel1"): 1}
        t.ok(wait_for(lambda: by_spec(ctl) == want, 30),
             "machines by size and location (a Machine's failure domain is its location)", by_spec(ctl))
        t.ok(wait_for(lambda: all(env.ready(n) for n in ("ms1", "ms2", "ms3", "ms4")), 40), "all ready",
             ctl.output()[-1500:])
        env.delete("ms4")
        env.delete("ms3")
        t.ok(wait_for(lambda: by_spec(ctl) == {("hetzner", "cx22", "fsn1"): 2}, 30),
             "the last machine of a size takes its series with it", by_spec(ctl))
        env.delete("ms1")
        t.ok(wait_for(lambda: by_spec(ctl) == {("hetzner", "cx22", "fsn1"): 1}, 30), "a deleted machine is not counted",
             by_spec(ctl))
        env.delete("ms2")
        t.ok(wait_for(lambda: all(env.gone(n) for n in ("ms1", "ms2", "ms3", "ms4")), 40), "all deleted")
        t.ok(wait_for(lambda: by_spec(ctl) == {}, 20), "and no series is left", by_spec(ctl))
    finally:
        t.eq(ctl.stop(), 0, "SIGTERM: clean exit")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, "hetzner", 1.0, 0.5) as env:
        t.run(test_lifecycle_metrics, env)
        t.run(test_spec_metrics, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
