#!/usr/bin/env python3
"""make demo, non-interactively with three machines: the install flow of the whole-cluster test
told step by step (manifests applied, the bootstrap static pod, the operand installed by the
controller, the hand-off), every Node initialized with no container restart, and nothing left
behind (processes, network namespaces, host links, the host address)."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src  # noqa: E402


def netns():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return set(line.split()[0] for line in r.stdout.splitlines() if line.strip())


def main():
    t = Tap()
    if os.geteuid() != 0:
        t.skip_all("needs root (the demo's machines are network namespaces)")
    tmp = tempfile.mkdtemp(prefix="cn-demo-test-")
    before = netns()
    env = dict(os.environ, DEMO_NODES="3", DEMO_HOLD="0", DEMO_DIR=os.path.join(tmp, "run"))
    p = subprocess.run([sys.executable, src("demo", "cloudnode-demo.py")], env=env, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = p.stdout + p.stderr
    t.eq(p.returncode, 0, "the demo exits 0") or t.diag(out[-3000:])
    t.ok("pods run as processes of the build tree" in out, "by default the pods run as the build tree's programs")
    for step in ("kubectl apply -k manifests/base", "cloudnode-agent wrote the static pod",
                 "The first Nodes are initialized", "the in-cluster initializer took over", "handed off: no static pod",
                 "Boot 1 worker(s)"):
        t.ok(step in out, "the story tells: %s" % step, out[-2500:])
    t.ok("nodes initialized: 3 of 3" in out, "all three machines' Nodes are initialized", out[-2000:])
    t.ok("container restarts: 0" in out and "problems: none" in out, "no container restart, nothing broken",
         out[-1500:])
    t.ok("FAILED" not in out, "no step failed", [ln for ln in out.splitlines() if "FAILED" in ln])
    t.ok("\033[" not in p.stdout, "the output has no screen redraws")
    t.eq(set(n for n in netns() - before if n.startswith("cne")), set(), "no network namespace left behind")
    r = subprocess.run(["pgrep", "-f", os.path.join(tmp, "run")], capture_output=True, text=True)
    t.eq(r.stdout.strip(), "", "no process of the demo left running")
    if t.failed:
        t.diag("kept %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
