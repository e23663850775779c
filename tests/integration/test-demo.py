#!/usr/bin/env python3
"""make demo, non-interactively with two nodes: every node initialized, the machine Ready, and
nothing left behind (processes, network namespaces, host links)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build, src  # noqa: E402


def netns():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return set(line.split()[0] for line in r.stdout.splitlines() if line.strip())


def main():
    t = Tap()
    import tempfile
    tmp = tempfile.mkdtemp(prefix="cn-demo-test-")
    before = netns() if os.geteuid() == 0 else set()
    env = dict(os.environ, DEMO_NODES="2", DEMO_HOLD="0", DEMO_DIR=os.path.join(tmp, "run"))
    p = subprocess.run([sys.executable, src("demo", "cloudnode-demo.py")], env=env, capture_output=True,
                       text=True, timeout=240, stdin=subprocess.DEVNULL)
    out = p.stdout + p.stderr
    t.eq(p.returncode, 0, "the demo exits 0") or t.diag(out[-3000:])
    t.ok("nodes initialized: 2 of 2" in out, "both simulated nodes are initialized", out[-2000:])
    t.ok("(2.0 per node)" in out, "two Node writes per node", [l for l in out.splitlines() if "writes" in l])
    t.ok("Cluster API machine: ready" in out, "the CloudnodeMachine becomes Ready", out[-2000:])
    t.ok("static pod written" in out, "the bootstrap node has its static pod")
    t.ok("\033[" not in p.stdout, "without a terminal the output has no screen redraws")
    if os.geteuid() == 0:
        # Only the demo's own namespaces (named cnd<N>-<i>): other tests may run alongside.
        t.eq(set(n for n in netns() - before if n.startswith("cnd")), set(), "no network namespace left behind")
        r = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True)
        t.ok("cnd" not in r.stdout.replace("cndemo", ""), "no host veth left behind", r.stdout)
    r = subprocess.run(["pgrep", "-f", os.path.join(tmp, "run")], capture_output=True, text=True)
    t.eq(r.stdout.strip(), "", "no process of the demo left running")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
