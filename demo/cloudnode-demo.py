#!/usr/bin/env python3
"""make demo: cloudnode installed on a simulated cluster the way a user installs it, told step by
step. It drives the machinery of the whole-cluster test (tests/pylib/cncluster.py): the fake API
server and the fake cloud on one host address, machines booted from the generated Ignition configs
in network namespaces (cloudnode-agent, the node-mode cloudnode-initializer, a metadata service at
169.254.169.254 each), and the pod runner as every node's kubelet. The story: manifests/base
applied, the bootstrap machine's static pod initializing the first Nodes, cloudnode-controller
(its own Deployment) installing the initializer Deployment, the agents handing off, workers
initialized.

The pods run as processes of the build tree (the pod runner's "process" runtime), so the demo
needs nothing but `make` and works where podman cannot run containers (a chroot);
DEMO_RUNTIME=podman runs them from the images `make images` built instead, as `make check-e2e`
does. Needs root (network namespaces).

Environment: DEMO_NODES (machines in all, default 4: bootstrap, control plane, workers),
DEMO_DIR (default ./demo-run), DEMO_RUNTIME (process or podman), DEMO_HOLD=0 to exit right after
the summary even on a terminal."""
import os
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.dirname(HERE)
BUILD = os.environ.get("CN_TOP_BUILDDIR") or SRC
os.environ.setdefault("CN_TOP_SRCDIR", SRC)
os.environ.setdefault("CN_TOP_BUILDDIR", BUILD)
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))

from cncluster import NODE_SA, Cluster  # noqa: E402

OPERAND = "cloudnode/cloudnode-cloud-controller-manager"
TTY = sys.stdout.isatty()


class Story:
    def __init__(self, c):
        self.c = c
        self.start = time.monotonic()
        self.failed = []

    def say(self, msg):
        print("[%5.1fs] %s" % (time.monotonic() - self.start, msg), flush=True)

    def step(self, ok, what, detail=""):
        """One thing the story expects; a failure is said and remembered, the story goes on."""
        if not ok:
            self.failed.append(what)
            self.say("FAILED: %s %s" % (what, detail))
        return ok

    def wait(self, fn, timeout, what):
        got = self.c.wait(fn, timeout)
        self.step(bool(got), what)
        return got

    def table(self):
        rows = [("NODE", "PROVIDER ID", "ADDRESSES", "STATE")]
        for n in self.c.node_objects():
            tainted = any(t.get("key") == "node.cloudprovider.kubernetes.io/uninitialized"
                          for t in n.get("spec", {}).get("taints") or [])
            rows.append((n["metadata"]["name"], n.get("spec", {}).get("providerID", "-"),
                         ",".join(a["address"] for a in (n.get("status") or {}).get("addresses") or []) or "-",
                         "tainted" if tainted else "initialized"))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            print("    " + "  ".join(v.ljust(widths[i]) for i, v in enumerate(r)), flush=True)


def story(c, n):
    s = Story(c)
    s.say("fake-kube-apiserver %s, fake-cloud %s; pods run as %s" % (
        c.kube.url, c.cloud.url, "processes of the build tree" if c.runtime == "process" else
        "containers of the images (podman)"))

    s.say("1. Install cloudnode as manifests/README.md says: kubectl apply -k manifests/base, the cloud "
          "config ConfigMap, the CloudnodeOperator naming the provider (hetzner).")
    for ok, what in c.install_base():
        s.step(ok, what)
        s.say("   " + what)
    s.say("   The controller's Deployment is applied; the initializer Deployment is applied scaled to zero: "
          "the controller fills in its provider and scales it up.")

    s.say("2. Boot the bootstrap machine from ignition/cloudnode-bootstrap.ign.")
    boot = c.boot("demo-bootstrap", "bootstrap")
    pod = os.path.join(boot.root, "etc/kubernetes/manifests/cloudnode-cloud-node.yaml")
    if s.step(os.path.exists(pod), "the agent wrote the bootstrap static pod"):
        s.say("   cloudnode-agent wrote the static pod %s; the kubelet runs it "
              "(cloudnode-initializer, cluster mode, the bootstrap kubeconfig)." % pod[len(boot.root):])
    s.say("3. Boot the first control-plane machine.")
    c.boot("demo-master-1", "control-plane")
    if s.wait(lambda: not c.tainted(), 90, "the first Nodes initialized"):
        s.say("   The first Nodes are initialized (providerID, addresses, labels; uninitialized taint removed):")
        s.table()

    s.say("4. cloudnode-controller, running on the control plane, installs the operand.")
    if s.wait(lambda: any(d["metadata"]["name"] == "cloudnode-cloud-controller-manager" and
                          d["spec"].get("replicas", 0) > 0 for d in c.deployments()) and
              not [u for u in c.unavailable() if u.startswith(OPERAND)], 120,
              "the initializer Deployment applied and available"):
        s.say("   Deployment %s is available: the in-cluster initializer took over." % OPERAND)

    s.say("5. The agents see it and hand off: the bootstrap static pods are removed.")
    if s.wait(lambda: not c.static_pods(), 60, "the bootstrap static pods removed"):
        s.say("   handed off: no static pod left, no mirror Pod left.")

    workers = ["demo-worker-%d" % i for i in range(1, max(n - 2, 0) + 1)]
    if workers:
        s.say("6. Boot %d worker(s) from ignition/cloudnode-worker.ign." % len(workers))
        for w in workers:
            c.boot(w, "worker")
        s.wait(lambda: not c.tainted() and len(c.node_objects()) == len(c.nodes), 60, "the workers initialized")

    c.wait(lambda: not c.problems(), 10)
    problems = c.problems()
    s.step(not problems, "nothing broken", problems)
    audit = c.kube.audit()
    writes = [a for a in audit if a.get("user") == NODE_SA % "cloudnode" and a.get("verb") in ("patch", "update")
              and "/nodes/" in a.get("path", "")]
    print(flush=True)
    print("Summary", flush=True)
    initialized = len(c.node_objects()) - len(c.tainted())
    print("  nodes initialized: %d of %d" % (initialized, len(c.nodes)), flush=True)
    s.table()
    print("  handed off: %s" % ("yes" if not c.static_pods() else "no, left: %s" % c.static_pods()), flush=True)
    print("  container restarts: %d" % sum(c.runner.restarts().values()), flush=True)
    print("  Node writes by the node-mode initializers: %d; API requests in all: %d; cloud requests: %d"
          % (len(writes), len(audit), len(c.cloud.requests())), flush=True)
    print("  problems: %s" % ("none" if not problems else "; ".join(problems)), flush=True)
    print("  logs: %s (nodes/*/agent.log, runner/logs/)" % c.dir, flush=True)
    if s.failed:
        print("  FAILED: %s" % "; ".join(s.failed), flush=True)
    return 0 if not s.failed else 1


def hold(c):
    if TTY and os.environ.get("DEMO_HOLD", "1") != "0":
        print("\nLook around while the demo runs:\n  export KUBECONFIG=%s\n  kubectl get nodes -o wide\n"
              "  kubectl -n cloudnode get deployments,pods\n  kubectl get cloudnodeoperator cloudnode -o yaml\n"
              "Press Enter or Ctrl-C to stop and clean up." % c.kube.kubeconfig, flush=True)
        try:
            sys.stdin.readline()
        except KeyboardInterrupt:
            pass


def main():
    if os.geteuid() != 0:
        print("make demo needs root: the simulated machines are network namespaces", file=sys.stderr)
        return 1
    runtime = os.environ.get("DEMO_RUNTIME", "process")
    if runtime not in ("process", "podman"):
        print("DEMO_RUNTIME must be process or podman, not %r" % runtime, file=sys.stderr)
        return 1
    n = int(os.environ.get("DEMO_NODES", "4"))
    workdir = os.path.abspath(os.environ.get("DEMO_DIR", os.path.join(BUILD, "demo-run")))
    shutil.rmtree(workdir, ignore_errors=True)
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    rc = 1
    try:
        with Cluster(workdir, runtime=runtime) as c:
            rc = story(c, n)
            hold(c)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print("cleaned up: processes stopped, network namespaces removed", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
