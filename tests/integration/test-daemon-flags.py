#!/usr/bin/env python3
"""The skeleton cloudnode-initializer and cloudnode-controller share: the flags both take are
parsed and validated the same way (a bad value or inconsistent leader election periods: one line,
exit 2), --help exits 0, and a failure while setting up is logged once and exits 1."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402

INITIALIZER = [build("initializer", "cloudnode-initializer"), "--cloud-provider=hetzner", "--port=0"]
CONTROLLER = [build("controller", "cloudnode-controller"), "run", "--namespace=cloudnode", "--port=0"]
DAEMONS = {"cloudnode-initializer": INITIALIZER, "cloudnode-controller": CONTROLLER}


def run(argv):
    # A token lets cluster mode get past its cloud provider to the kubeconfig.
    env = dict(os.environ, KUBECONFIG="", HCLOUD_TOKEN="not-a-real-token")
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)


def lines(p):
    return [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]


def test_shared_flags(t, tmp):
    for name, argv in DAEMONS.items():
        for bad, flag in [("--kube-api-qps=0", "--kube-api-qps"), ("--kube-api-burst=0", "--kube-api-burst"),
                          ("--port=70000", "--port"), ("--leader-elect=maybe", "--leader-elect"),
                          ("--leader-elect-retry-period=soon", "--leader-elect-retry-period"), ("-v=x", "-v"),
                          ("--gather-window=1s", "--gather-window")]:
            p = run(argv + [bad])
            t.ok(p.returncode == 2 and len(lines(p)) == 1 and flag in p.stderr,
                 "%s %s: exit 2 with one line naming the flag" % (name, bad), p.stderr)
        p = run(argv + ["--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=6s"])
        t.ok(p.returncode == 2 and len(lines(p)) == 1 and "retry period < renew deadline < lease duration" in p.stderr,
             "%s: inconsistent leader election periods refused" % name, p.stderr)
        p = run([argv[0], "--help"])
        t.ok(p.returncode == 0 and "--leader-elect" in p.stdout, "%s --help exits 0" % name, p.stderr)


def test_setup_failure_logged_once(t, tmp):
    missing = os.path.join(tmp, "no-such-kubeconfig")
    for name, argv in DAEMONS.items():
        p = run(argv + ["--leader-elect=false", "--kubeconfig=" + missing])
        t.eq(p.returncode, 1, "%s: a kubeconfig that cannot be read exits 1" % name)
        said = [x for x in lines(p) if "fail" in x.lower()]
        t.ok(len(said) == 1 and "kubeconfig" in said[0], "%s: the failure is logged once" % name, lines(p))


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        t.run(test_shared_flags, tmp)
        t.run(test_setup_failure_logged_once, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
