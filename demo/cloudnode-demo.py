#!/usr/bin/env python3
"""make demo: a small simulated fleet brought from first boot to initialized Kubernetes Nodes.

Everything runs on this machine: tests/fake-kube-apiserver and tests/fake-cloud on loopback, the
real cloudnode-controller, and DEMO_NODES simulated VMs. With root, each VM is a network
namespace with its own addresses, a metadata service at 169.254.169.254 and a veth link to the
host, and runs the real cloudnode-agent and cloudnode-initializer (node mode) inside it.
Without root there are no namespaces: the same story runs on loopback ports.

Environment: DEMO_NODES (default 5), DEMO_DIR (default ./demo-run), DEMO_HOLD=0 to exit right
after the summary even on a terminal."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.dirname(HERE)
BUILD = os.environ.get("CN_TOP_BUILDDIR") or SRC
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))

from capi import install_core_crds  # noqa: E402
from cncapi import grant_secrets  # noqa: E402
from fakecloud import HETZNER_TOKEN, FakeCloud, netns_argv  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

# The bootstrap node (the first) is on hetzner, which has a cluster-mode provider and so a
# bootstrap static pod.
PLATFORMS = ["hetzner", "aws", "openstack", "gcp", "azure", "digitalocean"]
TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
NAMESPACE = "cloudnode"
NODE_SA_PREFIX = "system:serviceaccount:cloudnode-nodes:"  # one ServiceAccount per Node
CONTROLLER_SA = "system:serviceaccount:cloudnode:cloudnode-controller"
TTY = sys.stdout.isatty()


def binary(component):
    return os.path.join(BUILD, component, "cloudnode-" + component)


def run(argv, check=True, **kw):
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def stop_process(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()


def say(msg):
    print(msg, flush=True)


class Node:
    def __init__(self, index, platform, role):
        self.index = index
        self.platform = platform
        self.role = role
        self.name = "demo-%d-%s" % (index, platform)
        self.netns = None
        self.instance = None
        self.root = None
        self.procs = []
        self.registered_at = None
        self.initialized_at = None
        self.agent_rc = None


class Demo:
    def __init__(self):
        self.n = int(os.environ.get("DEMO_NODES", "5"))
        self.dir = os.path.abspath(os.environ.get("DEMO_DIR", os.path.join(BUILD, "demo-run")))
        self.use_netns = os.geteuid() == 0 and shutil.which("ip") is not None
        self.tag = "cnd%d" % (os.getpid() % 10000)
        self.kube = None
        self.cloud = None
        self.nodes = []
        self.procs = []
        self.namespaces = []
        self.host_links = []
        self.start = time.monotonic()
        self.events = []
        self.machine = None
        self.machine_created = None

    # -- setup ---------------------------------------------------------------------

    def setup(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        sans = ["10.231.%d.1" % i for i in range(1, self.n + 1)] if self.use_netns else []
        extra = []
        for s in sans:
            extra += ["--san", s]
        rbac = [os.path.join(SRC, "manifests", "operand", f)
                for f in ("node-initializer-rbac.yaml", "cluster-initializer-rbac.yaml")]
        rbac.append(os.path.join(SRC, "manifests", "controller", "controller-rbac.yaml"))
        rbac.append(os.path.join(SRC, "manifests", "overlays", "capi", "controller-capi-rbac.yaml"))
        self.kube = FakeKube(os.path.join(self.dir, "kube"), rbac=[p for p in rbac if os.path.exists(p)],
                             listen=("0.0.0.0:0" if self.use_netns else "127.0.0.1:0"), extra_args=extra)
        self.kube.start()
        if "0.0.0.0" in self.kube.url:
            # Listening on every address for the namespaces; local clients use loopback.
            self.kube.url = self.kube.url.replace("0.0.0.0", "127.0.0.1")
            self.kube.host = "127.0.0.1"
            with open(self.kube.kubeconfig) as f:
                text = f.read().replace("0.0.0.0", "127.0.0.1")
            with open(self.kube.kubeconfig, "w") as f:
                f.write(text)
        self.cloud = FakeCloud(os.path.join(self.dir, "cloud"))
        self.cloud.__enter__()
        say("fake-kube-apiserver  %s" % self.kube.url)
        say("fake-cloud           %s" % self.cloud.url)
        if not self.use_netns:
            say("not root: no network namespaces; the simulated VMs share loopback ports")

    def start_controller(self):
        # The controller's own installation (namespace, identity, RBAC, images) as an installer
        # would apply it; the controller then installs the cluster-side assets itself.
        r = self.kube.kubectl("apply", "-k", os.path.join(SRC, "manifests", "controller"))
        if r.returncode != 0:
            say("installing the controller's own manifests failed: %s" % r.stderr.strip())
            return
        self.install_capi()
        kc = self.kube.kubeconfig_for(CONTROLLER_SA)
        # Hetzner credentials for the machine reconciler, readable by the controller only.
        conf = os.path.join(self.dir, "hetzner-cloud.conf")
        with open(os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("[Global]\ntoken = %s\nendpoint = %s/v1\n" % (HETZNER_TOKEN, self.cloud.url))
        log = open(os.path.join(self.dir, "controller.log"), "w")
        p = subprocess.Popen([binary("controller"), "run", "--kubeconfig", kc, "--namespace", NAMESPACE,
                              "--cloud-config-source", "%s/cloud-provider-config" % NAMESPACE,
                              "--leader-elect=false", "--port", "0", "--cloud-provider", "hetzner",
                              "--machine-provider", "hetzner", "--machine-cloud-config", conf],
                             stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        say("cloudnode-controller running (pid %d), log %s" % (p.pid, log.name))

    def make_netns(self, node):
        i = node.index
        ns = "%s-%d" % (self.tag, i)
        host_if = "%sh%d" % (self.tag, i)
        run(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns])
        self.host_links.append(host_if)
        run(["ip", "addr", "add", "10.231.%d.1/30" % i, "dev", host_if])
        run(["ip", "link", "set", host_if, "up"])
        inst = node.instance

        def nsip(*a):
            run(netns_argv(ns, ["ip"] + list(a)))
        nsip("link", "set", "lo", "up")
        nsip("addr", "add", "10.231.%d.2/30" % i, "dev", "eth0")
        nsip("addr", "add", inst["private_ipv4"] + "/32", "dev", "eth0")
        if inst.get("ipv6"):
            nsip("addr", "add", inst["ipv6"] + "/64", "dev", "eth0", "nodad")
        nsip("link", "set", "eth0", "up")
        # The metadata address lives on a namespace-local veth pair (no dummy module needed).
        nsip("link", "add", "mds0", "type", "veth", "peer", "name", "mds1")
        nsip("addr", "add", "169.254.169.254/32", "dev", "mds0")
        nsip("link", "set", "mds0", "up")
        nsip("link", "set", "mds1", "up")
        node.netns = ns
        md = FakeCloud(os.path.join(self.dir, "cloud"), instance=inst["id"], netns=ns,
                       listen="169.254.169.254:80")
        md.start_server()
        node.procs.append(md)
        return "http://169.254.169.254"

    def ns_argv(self, node, argv):
        return netns_argv(node.netns, argv) if node.netns else argv

    def node_kubeconfig(self, node):
        path = self.kube.node_kubeconfig(node.name)  # the node's own ServiceAccount and token
        if not node.netns:
            return path
        # Inside its namespace a node reaches the API server through its veth peer.
        port = self.kube.url.rsplit(":", 1)[1]
        with open(path) as f:
            text = f.read()
        text = text.replace(self.kube.url, "https://10.231.%d.1:%s" % (node.index, port))
        out = os.path.join(node.root, "etc", "cloudnode", "kubeconfig")
        with open(out, "w") as f:
            f.write(text)
        os.chmod(out, 0o600)
        return out

    def images(self):
        r = self.kube.kubectl("create", "--dry-run=client", "-o", "json", "-f",
                              os.path.join(SRC, "manifests", "controller", "images-configmap.yaml"))
        try:
            return json.loads(json.loads(r.stdout)["data"]["images.json"])
        except (ValueError, KeyError):
            return {"cloudControllerManager": "ghcr.io/cloudnode/cloudnode-initializer:latest"}

    def boot(self, node):
        """One simulated VM: instance in the cloud, metadata service, agent, kubelet stand-in,
        node-mode initializer."""
        node.instance = self.cloud.add_instance({"platform": node.platform, "name": node.name,
                                                 "hostname": node.name})
        node.root = os.path.join(self.dir, "nodes", node.name)
        os.makedirs(os.path.join(node.root, "etc", "cloudnode"))
        if self.use_netns:
            endpoint = self.make_netns(node)
        else:
            endpoint = self.cloud.metadata_url(node.instance["id"])
        kubeconfig = self.node_kubeconfig(node)
        config = {"platform": node.platform, "role": node.role, "nodeName": node.name,
                  "kubeconfig": kubeconfig, "metadata": {"endpoint": endpoint, "timeout": "2s", "retries": 5}}
        if node.role == "bootstrap":
            # The image list an installer ships with the bootstrap Ignition config.
            with open(os.path.join(node.root, "etc", "cloudnode", "images.json"), "w") as f:
                json.dump(self.images(), f)
        cfg = os.path.join(node.root, "etc", "cloudnode", "cloudnode.yaml")
        with open(cfg, "w") as f:
            json.dump(config, f, indent=2)  # JSON is YAML
        with open(os.path.join(node.root, "agent.log"), "w") as log:
            r = subprocess.run(self.ns_argv(node, [binary("agent"), "--root", node.root, "--once"]),
                               stdout=log, stderr=subprocess.STDOUT)
        node.agent_rc = r.returncode
        # The kubelet registers the Node with the uninitialized taint.
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node.name, "labels": {"kubernetes.io/hostname": node.name}},
                "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}}
        self.kube.api("POST", "/api/v1/nodes", body)
        node.registered_at = time.monotonic()
        log = open(os.path.join(node.root, "initializer.log"), "w")
        p = subprocess.Popen(self.ns_argv(node, [binary("initializer"), "--kubeconfig", kubeconfig,
                                                 "--node-name", node.name, "--config", cfg, "--port", "0"]),
                             stdout=log, stderr=subprocess.STDOUT)
        node.procs.append(p)

    # -- the Cluster API machine ----------------------------------------------------

    CAPI = "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/"
    INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/default/"

    def install_capi(self):
        """Cluster API's own Cluster and Machine types (as CRDs, as clusterctl would install them)
        and cloudnode's infrastructure CRDs."""
        install_core_crds(self.kube)
        r = self.kube.kubectl("apply", "--validate=false", "-k", os.path.join(SRC, "manifests", "crds", "capi"))
        if r.returncode != 0:
            self.machine = ("unavailable", "CRDs not applied: %s" % r.stderr.strip()[:200])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.kube.api("GET", self.INFRA + "cloudnodemachines")[0] != 200:
            time.sleep(0.1)

    def create_machine(self):
        """One CloudnodeMachine created the Cluster API way: Cluster, bootstrap data Secret, Machine,
        and the infrastructure machine it owns."""
        if self.machine:
            return
        k = self.kube
        k.api("POST", self.CAPI + "clusters", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                               "metadata": {"name": "demo"}, "spec": {}})
        k.api("PATCH", self.CAPI + "clusters/demo/status",
              {"status": {"initialization": {"infrastructureProvisioned": True}}}, "application/merge-patch+json")
        # The namespace's owner lets the controller read the Secrets of its machines there.
        grant_secrets(k, "default")
        k.api("POST", "/api/v1/namespaces/default/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "demo-machine-bootstrap"},
            "data": {"value": "I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogZGVtby1tYWNoaW5lCg=="}})
        code, m = k.api("POST", self.CAPI + "machines", {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "demo-machine"},
            "spec": {"clusterName": "demo", "bootstrap": {"dataSecretName": "demo-machine-bootstrap"}}})
        if code >= 300:
            self.machine = ("unavailable", "Machine not created: HTTP %d" % code)
            return
        code, _ = k.api("POST", self.INFRA + "cloudnodemachines", {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeMachine",
            "metadata": {"name": "demo-machine", "labels": {"cluster.x-k8s.io/cluster-name": "demo"},
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                              "name": "demo-machine", "uid": m["metadata"]["uid"]}]},
            "spec": {"hetzner": {"serverType": "cx22", "image": "ubuntu-24.04", "location": "fsn1"}}})
        self.machine = ("created", "") if code < 300 else ("unavailable", "CloudnodeMachine: HTTP %d" % code)
        self.machine_created = time.monotonic()

    def machine_row(self):
        if not self.machine or self.machine[0] == "unavailable":
            return None
        code, o = self.kube.api("GET", self.INFRA + "cloudnodemachines/demo-machine")
        if code != 200:
            return None
        st = o.get("status") or {}
        ready = st.get("ready") is True
        if ready and self.machine[0] != "ready":
            self.machine = ("ready", "%.2fs after creation, providerID %s" % (
                time.monotonic() - self.machine_created, o["spec"].get("providerID")))
        addrs = ",".join(a.get("address", "") for a in st.get("addresses") or [])
        return ("machine/demo-machine", "hetzner", o["spec"].get("providerID", ""), addrs,
                "Ready" if ready else "provisioning", self.machine[1].split("s after")[0] + "s" if ready else "")

    # -- display -------------------------------------------------------------------

    def snapshot(self):
        status, body = self.kube.api("GET", "/api/v1/nodes")
        items = {n["metadata"]["name"]: n for n in (body or {}).get("items", [])}
        rows = []
        now = time.monotonic()
        for node in self.nodes:
            obj = items.get(node.name)
            taint = "-"
            pid = ""
            addrs = ""
            if obj:
                taints = obj.get("spec", {}).get("taints") or []
                tainted = any(t.get("key") == TAINT for t in taints)
                taint = "tainted" if tainted else "initialized"
                pid = obj.get("spec", {}).get("providerID", "")
                addrs = ",".join(a["address"] for a in obj.get("status", {}).get("addresses", [])
                                 if a.get("type") in ("InternalIP", "ExternalIP"))
                if not tainted and node.initialized_at is None and node.registered_at is not None:
                    node.initialized_at = now
            t = ("%.2fs" % (node.initialized_at - node.registered_at)) if node.initialized_at else ""
            rows.append((node.name, node.platform, pid, addrs, taint, t))
        m = self.machine_row()
        if m:
            rows.append(m)
        return rows

    def draw(self, rows, last):
        header = ("NODE", "PLATFORM", "PROVIDER ID", "ADDRESSES", "STATE", "TIME")
        if TTY:
            widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
            out = ["\033[H\033[J", "cloudnode demo — %d nodes%s, %.1fs" % (len(self.nodes), " and 1 machine" if len(rows) > len(self.nodes) else "",
                                                        time.monotonic() - self.start), ""]
            for r in [header] + rows:
                out.append("  ".join(str(v).ljust(widths[i]) for i, v in enumerate(r)))
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()
        else:
            for r in rows:
                if last.get(r[0]) != r:
                    say("%-22s %-12s %-12s providerID=%s addresses=%s %s" % (r[0], r[1], r[4], r[2] or "-",
                                                                                 r[3] or "-", r[5]))
            last.update({r[0]: r for r in rows})

    # -- the story -------------------------------------------------------------------

    def main(self):
        self.setup()
        self.start_controller()
        for i in range(1, self.n + 1):
            node = Node(i, PLATFORMS[(i - 1) % len(PLATFORMS)], "bootstrap" if i == 1 else "worker")
            self.nodes.append(node)
        for node in self.nodes:
            self.boot(node)
        self.create_machine()
        last = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = self.snapshot()
            self.draw(rows, last)
            if all(n.initialized_at for n in self.nodes) and (not self.machine or self.machine[0] != "created"):
                break
            time.sleep(0.5)
        self.summary()
        machine_ok = self.machine is not None and self.machine[0] == "ready"
        return 0 if all(n.initialized_at for n in self.nodes) and machine_ok else 1

    def summary(self):
        audit = self.kube.audit()
        say("")
        say("Summary")
        ok = [n for n in self.nodes if n.initialized_at]
        say("  nodes initialized: %d of %d" % (len(ok), len(self.nodes)))
        if ok:
            times = sorted(n.initialized_at - n.registered_at for n in ok)
            say("  time from registration to taint removed: min %.2fs, median %.2fs, max %.2fs"
                % (times[0], times[len(times) // 2], times[-1]))
        writes = [a for a in audit if a.get("user", "").startswith(NODE_SA_PREFIX)
                  and a.get("verb") in ("create", "update", "patch", "delete")
                  and "/nodes/" in a.get("path", "")]
        say("  Node writes by the node-mode initializers: %d (%.1f per node)" % (len(writes), len(writes) / max(len(self.nodes), 1)))
        by_user = {}
        for a in audit:
            by_user[a.get("user", "?")] = by_user.get(a.get("user", "?"), 0) + 1
        for u, c in sorted(by_user.items()):
            say("  API requests by %s: %d" % (u, c))
        say("  cloud requests: %d" % len(self.cloud.requests()))
        for node in self.nodes:
            if node.agent_rc:
                say("  %s: cloudnode-agent exited %d (log %s/agent.log)" % (node.name, node.agent_rc, node.root))
        bootstrap = [n for n in self.nodes if n.role == "bootstrap"]
        for n in bootstrap:
            pod = os.path.join(n.root, "etc", "kubernetes", "manifests", "cloudnode-cloud-node.yaml")
            say("  bootstrap node %s: static pod %s" % (n.name, "written" if os.path.exists(pod) else "MISSING"))
        if self.machine:
            say("  Cluster API machine: %s %s" % self.machine)
        say("")
        say("Look around (while the demo runs):")
        say("  export KUBECONFIG=%s" % self.kube.kubeconfig)
        say("  kubectl get nodes -o wide")
        say("  kubectl get node %s -o yaml" % self.nodes[0].name)
        say("  kubectl -n %s get deployments,configmaps" % NAMESPACE)
        say("  kubectl get events -A")

    def hold(self):
        if TTY and os.environ.get("DEMO_HOLD", "1") != "0":
            say("")
            say("Press Enter or Ctrl-C to stop and clean up.")
            try:
                sys.stdin.readline()
            except KeyboardInterrupt:
                pass

    def cleanup(self):
        for node in self.nodes:
            for p in node.procs:
                if isinstance(p, subprocess.Popen):
                    stop_process(p)
                else:
                    p.stop()
        for p in self.procs:
            stop_process(p)
        for ns in self.namespaces:
            run(["ip", "netns", "del", ns], check=False)
        for link in self.host_links:
            run(["ip", "link", "del", link], check=False)
        if self.cloud:
            self.cloud.stop()
        if self.kube:
            self.kube.stop()


def main():
    demo = Demo()
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    rc = 1
    try:
        rc = demo.main()
        demo.hold()
    except KeyboardInterrupt:
        say("interrupted")
    finally:
        demo.cleanup()
        say("cleaned up: processes stopped%s" % (", network namespaces removed" if demo.use_netns else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main())
