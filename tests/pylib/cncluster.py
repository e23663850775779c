"""A whole simulated cluster, installed as a user installs cloudnode: the fake API server and the
fake cloud on one host address that every node reaches, simulated nodes (a network namespace each,
with the instance's metadata service at 169.254.169.254 and a default route to the host), the
node-side units as the generated Ignition configs set them up (cloudnode-agent, then the node-mode
cloudnode-initializer), and the pod runner (podrunner.py) as every node's kubelet, running the
Deployments and the static pods from the images `make images` built (runtime "podman", the
whole-cluster tests), or as processes of the build tree (runtime "process", `make demo` where
podman cannot run containers).

    with Cluster(tmp) as c:
        c.install_base()  or  c.apply("-k", ...)
        node = c.boot("bootstrap-0", "bootstrap")
        c.wait(...); c.problems() -> [what a user would call broken]

Needs root (network namespaces; podman for the images)."""
import base64
import json
import os
import re
import signal
import subprocess
import time
from urllib.parse import unquote_to_bytes

from cntap import build, src
from fakecloud import HETZNER_TOKEN, FakeCloud, netns_argv
from fakekubeclient import FakeKube
from podrunner import PodNode, PodRunner

TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
PROGRAMS = {"cloudnode-agent": ("agent", "cloudnode-agent"),
            "cloudnode-initializer": ("initializer", "cloudnode-initializer")}


def run(argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def ignition(role):
    """The files and enabled units of ignition/cloudnode-ROLE.ign: ({path: bytes}, {unit: text})."""
    with open(build("ignition", "cloudnode-%s.ign" % role)) as f:
        cfg = json.load(f)
    files = {}
    for f in cfg.get("storage", {}).get("files", []):
        source = f["contents"]["source"]
        meta, _, data = source.partition(",")
        files[f["path"]] = base64.b64decode(data) if meta.endswith(";base64") else unquote_to_bytes(data)
    units = {u["name"]: u.get("contents", "") for u in cfg.get("systemd", {}).get("units", []) if u.get("enabled")}
    return files, units


def exec_start(unit_text):
    """ExecStart= of a unit as argv (the units use no quoting)."""
    for line in unit_text.splitlines():
        if line.startswith("ExecStart="):
            return line[len("ExecStart="):].split()
    return None


def env_file(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, sep, v = line.strip().partition("=")
                if sep and not k.startswith("#"):
                    out[k] = v.strip("\"'")
    return out

# The node-mode identities: one ServiceAccount per Node, named as it (node_credential()).
NODE_USER_PREFIX = "system:serviceaccount:cloudnode-nodes:"

class SimNode:
    def __init__(self, cluster, index, name, role):
        self.cluster, self.index, self.name, self.role = cluster, index, name, role
        self.netns = "%s-%d" % (cluster.tag, index)
        self.host_if = "%sh%d" % (cluster.tag, index)
        self.root = os.path.join(cluster.dir, "nodes", name)
        self.procs = {}
        self.logs = {}
        self.metadata = None
        self.instance = None
        self.agent_rc = None


class Cluster:
    def __init__(self, workdir, namespace="cloudnode", rbac=(), runtime="podman"):
        self.dir = workdir
        self.runtime = runtime
        self.namespace = namespace
        n = os.getpid() % 64
        self.tag = "cne%d" % (os.getpid() % 100000)
        self.net = "10.%d" % (64 + n)
        self.host = "%s.0.1" % self.net
        self.rbac = list(rbac)
        self.nodes = []
        self.kube = self.cloud = self.runner = None

    # -- setup ------------------------------------------------------------------------------

    def __enter__(self):
        os.makedirs(self.dir, exist_ok=True)
        # One host address for the API server and the cloud API, reached from every namespace
        # through its default route. Its /16 follows the pid; one in use (another run, or one
        # that was killed before it could remove its address) moves it to the next free one.
        first = int(self.net.split(".")[1]) - 64
        for i in range(64):
            self.net = "10.%d" % (64 + (first + i) % 64)
            self.host = "%s.0.1" % self.net
            r = run(["ip", "addr", "add", self.host + "/32", "dev", "lo"], check=False)
            if r.returncode == 0:
                break
            if "File exists" not in r.stderr and "already assigned" not in r.stderr:
                raise RuntimeError("ip addr add %s/32 dev lo: %s" % (self.host, r.stderr.strip()))
        else:
            raise RuntimeError("no free 10.64.0.0/10 network for the cluster's host address")
        self.kube = FakeKube(os.path.join(self.dir, "kube"), rbac=self.rbac, listen=self.host + ":0",
                             extra_args=["--san", self.host]).start()
        self.cloud = FakeCloud(os.path.join(self.dir, "cloud"), listen=self.host + ":0").start_server()
        self.runner = PodRunner(self.kube, os.path.join(self.dir, "runner"), {}, tag=self.tag,
                                runtime=self.runtime).start()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.runner:
            self.runner.stop()
        for node in self.nodes:
            for p in node.procs.values():
                self._stop(p)
            if node.metadata:
                node.metadata.stop()
            run(["ip", "netns", "del", node.netns], check=False)
            run(["ip", "link", "del", node.host_if], check=False)
        if self.cloud:
            self.cloud.stop()
        if self.kube:
            self.kube.stop()
        run(["ip", "addr", "del", self.host + "/32", "dev", "lo"], check=False)

    @staticmethod
    def _stop(p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def kubectl(self, *args, **kw):
        return self.kube.kubectl(*args, **kw)

    def apply(self, *args):
        """kubectl apply, again while the CRDs it just created are not served yet (as a user
        would): the last CompletedProcess."""
        r = None
        for _ in range(10):
            r = self.kubectl("apply", *args)
            if r.returncode == 0:
                break
            self.wait(lambda: False, 1)
        return r

    def install_base(self, provider="hetzner"):
        """A plain Kubernetes install as manifests/README.md describes it: manifests/base applied,
        the source cloud config ConfigMap, and the CloudnodeOperator naming the provider. Returns
        [(ok, what was done)]."""
        r = self.apply("-k", src("manifests", "base"))
        done = [(r.returncode == 0, "kubectl apply -k manifests/base" + ("" if r.returncode == 0 else
                                                                          ": " + r.stderr[-1500:]))]
        code, _ = self.kube.api("POST", "/api/v1/namespaces/cloudnode/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cloud-provider-config"},
            "data": {"config": self.cloud_conf()}})
        done.append((code == 201, "the source cloud config ConfigMap cloudnode/cloud-provider-config created"))
        code, _ = self.kube.api("POST", "/apis/operator.cloudnode.io/v1alpha1/cloudnodeoperators", {
            "apiVersion": "operator.cloudnode.io/v1alpha1", "kind": "CloudnodeOperator",
            "metadata": {"name": "cloudnode"}, "spec": {"cloudProvider": provider}})
        done.append((code == 201, "CloudnodeOperator cloudnode with spec.cloudProvider %s created" % provider))
        return done

    def cloud_conf(self):
        """The Hetzner cloud.conf an installer writes: the token and the (fake) API endpoint."""
        return "[Global]\ntoken = %s\nendpoint = %s/v1\n" % (HETZNER_TOKEN, self.cloud.url)

    def images_json(self):
        r = self.kubectl("create", "--dry-run=client", "-o", "json", "-f",
                         src("manifests", "controller", "images-configmap.yaml"))
        return json.loads(r.stdout)["data"]["images.json"]

    # -- nodes ------------------------------------------------------------------------------

    def _netns(self, node):
        i = node.index
        run(["ip", "netns", "add", node.netns])
        run(["ip", "link", "add", node.host_if, "type", "veth", "peer", "name", "eth0", "netns", node.netns])
        run(["ip", "addr", "add", "%s.%d.1/30" % (self.net, i), "dev", node.host_if])
        run(["ip", "link", "set", node.host_if, "up"])

        def nsip(*a):
            run(netns_argv(node.netns, ["ip"] + list(a)))
        nsip("link", "set", "lo", "up")
        nsip("addr", "add", "%s.%d.2/30" % (self.net, i), "dev", "eth0")
        nsip("addr", "add", node.instance["private_ipv4"] + "/32", "dev", "eth0")
        nsip("link", "set", "eth0", "up")
        nsip("route", "add", "default", "via", "%s.%d.1" % (self.net, i))
        nsip("link", "add", "mds0", "type", "veth", "peer", "name", "mds1")
        nsip("addr", "add", "169.254.169.254/32", "dev", "mds0")
        nsip("link", "set", "mds0", "up")
        nsip("link", "set", "mds1", "up")
        node.metadata = FakeCloud(os.path.join(self.dir, "cloud"), instance=node.instance["id"],
                                  netns=node.netns, listen="169.254.169.254:80").start_server()

    def _write(self, node, path, data, mode=0o644):
        p = os.path.join(node.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return p

    def _argv(self, node, argv, env):
        """A unit's ExecStart for this simulated node: the built program, %d (credentials) and
        ${VAR} filled in, paths of the node's filesystem below its root."""
        prog = os.path.basename(argv[0])
        out = [build(*PROGRAMS[prog])]
        for a in argv[1:]:
            a = a.replace("%d", os.path.join(node.root, "run", "credentials"))
            a = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), a)
            a = re.sub(r"=(/etc/\S*)", lambda m: "=" + os.path.join(node.root, m.group(1).lstrip("/")), a)
            out.append(a)
        if prog == "cloudnode-agent":
            out += ["--root", node.root]
        return out

    def _start(self, node, name, argv):
        log = open(os.path.join(node.root, name + ".log"), "w")
        node.logs[name] = log.name
        node.procs[name] = subprocess.Popen(netns_argv(node.netns, argv), stdout=log, stderr=subprocess.STDOUT)
        return node.procs[name]

    def node_credential(self, name):
        """The node-mode initializer's kubeconfig for Node name, as the installer makes it: the
        node's own ServiceAccount in cloudnode-nodes and a token from the TokenRequest API."""
        with open(self.kube.node_kubeconfig(name)) as f:
            return f.read()

    def boot(self, name, role):
        """One machine booted with the Ignition config of its role: its files written, the agent
        run as its unit runs it, the kubelet (pod runner) registering the Node with the
        uninitialized taint, and the node-mode initializer started after the agent."""
        node = SimNode(self, len(self.nodes) + 1, name, role)
        self.nodes.append(node)
        node.instance = self.cloud.add_instance({"platform": "hetzner", "name": name, "hostname": name})
        os.makedirs(node.root)
        self._netns(node)
        files, units = ignition(role)
        for path, data in files.items():
            self._write(node, path, data)
        # What the Ignition config leaves to the installer: the platform (detected from DMI on a
        # real machine), the provider settings, and credentials.
        with open(os.path.join(node.root, "etc/cloudnode/cloudnode.yaml"), "a") as f:
            f.write("\nplatform: hetzner\ncloudConfig:\n  Global:\n    token: %s\n    endpoint: %s/v1\n"
                    % (HETZNER_TOKEN, self.cloud.url))
        credential = self.node_credential(name)
        self._write(node, "/etc/cloudnode/initializer.kubeconfig", credential, 0o600)
        self._write(node, "/run/credentials/kubeconfig", credential, 0o600)
        if role != "worker":
            self._write(node, "/etc/cloudnode/images.json", self.images_json())
            self._write(node, "/etc/kubernetes/bootstrap-secrets/kubeconfig", open(self.kube.kubeconfig).read(), 0o600)
        self.runner.add_node(PodNode(name, netns=node.netns, root=node.root, api_host=self.host))
        agent = self._start(node, "agent", self._argv(node, exec_start(units["cloudnode-agent.service"]), {}))
        # cloudnode-agent is Type=notify: the initializer and the kubelet start after its first
        # pass (the metadata environment file written).
        env_path = os.path.join(node.root, "run/metadata/cloudnode")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not os.path.exists(env_path) and agent.poll() is None:
            time.sleep(0.1)
        labels = {"kubernetes.io/hostname": name}
        if role != "worker":
            labels[CONTROL_PLANE] = ""
        self.kube.api("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}})
        # The kubelet reports Ready, which lets the API server's not-ready taint go (the
        # uninitialized taint stays until the initializer removes it).
        self.kube.api("PATCH", "/api/v1/nodes/%s/status" % name,
                      {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}},
                      "application/merge-patch+json")
        unit = units.get("cloudnode-initializer.service")
        if unit and os.path.exists(env_path):
            self._start(node, "initializer", self._argv(node, exec_start(unit), env_file(env_path)))
        return node

    # -- observation ------------------------------------------------------------------------

    def node_objects(self):
        return self.kube.api("GET", "/api/v1/nodes")[1].get("items", [])

    def tainted(self):
        return sorted(n["metadata"]["name"] for n in self.node_objects()
                      if any(t.get("key") == TAINT for t in n.get("spec", {}).get("taints") or []))

    def deployments(self):
        return self.kube.api("GET", "/apis/apps/v1/deployments")[1].get("items", [])

    def unavailable(self):
        out = []
        for d in self.deployments():
            st, want = d.get("status") or {}, d["spec"].get("replicas", 1)
            if st.get("availableReplicas", 0) < want or st.get("updatedReplicas", 0) < want:
                out.append("%s/%s: %s of %d available, %s updated" % (
                    d["metadata"]["namespace"], d["metadata"]["name"], st.get("availableReplicas", 0), want,
                    st.get("updatedReplicas", 0)))
        return out

    def static_pods(self):
        """Static pod manifests left on the nodes, and mirror Pods in the API."""
        left = []
        for node in self.nodes:
            d = os.path.join(node.root, "etc/kubernetes/manifests")
            left += ["%s:%s" % (node.name, f) for f in (os.listdir(d) if os.path.isdir(d) else [])]
        code, body = self.kube.api("GET", "/api/v1/pods")
        left += ["mirror pod %s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])
                 for p in (body or {}).get("items", [])
                 if "kubernetes.io/config.mirror" in (p["metadata"].get("annotations") or {})]
        return left

    def restarted(self):
        return {k: v for k, v in self.runner.restarts().items() if v}

    def problems(self):
        """Everything a user would call broken: container restarts, unavailable Deployments,
        static pods left behind, tainted Nodes."""
        out = ["restarted: %s %d time(s)" % kv for kv in sorted(self.restarted().items())]
        out += ["unavailable: " + u for u in self.unavailable()]
        out += ["static pod left: " + s for s in self.static_pods()]
        out += ["tainted: " + n for n in self.tainted()]
        return out

    def diagnostics(self):
        parts = ["runner errors:"] + self.runner.errors[-20:]
        for node in self.nodes:
            for name, path in node.logs.items():
                with open(path, errors="replace") as f:
                    parts.append("--- %s %s (exit %s)\n%s" % (node.name, name, node.procs[name].poll(),
                                                               f.read()[-1500:]))
        parts.append(self.runner.logs()[-6000:])
        return "\n".join(parts)

    def wait(self, fn, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = fn()
            if v:
                return v
            time.sleep(0.5)
        return fn()
