"""Helpers of the cloudnode-initializer integration tests: run the daemon, create Nodes in the
fake API server, wait for conditions, count API writes in the audit log.

    with Initializer(args, netns=None, env=None) as i:
        i.port, i.log(), i.get("/metrics"), i.notify_messages(), i.proc
"""
import contextlib
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

from cntap import wait_for  # noqa: F401 (re-exported for the tests)
from fakecloud import AWS_ACCESS_KEY, DO_TOKEN, PVE_TOKEN, PVE_USER, FakeCloud, Netns, netns_argv
from fakekubeclient import kube_server

BUILD = os.environ.get("CN_TOP_BUILDDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.path.join(BUILD, "initializer", "cloudnode-initializer")
TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"
CLUSTER_SA = "system:serviceaccount:cloudnode:cloudnode-cloud-controller-manager"
NODE_NAMESPACE = "cloudnode-nodes"


def node_user(name):
    """The identity of node name's initializer: its own ServiceAccount (fakekubeclient's
    node_kubeconfig() mints its credential)."""
    return "system:serviceaccount:%s:%s" % (NODE_NAMESPACE, name)


RBAC = [os.path.join(SRC, "manifests", "operand", "cluster-initializer-rbac.yaml"),
        os.path.join(SRC, "manifests", "operand", "node-initializer-rbac.yaml")]
NODE_POLICY = os.path.join(SRC, "manifests", "operand", "node-initializer-admission-policy.yaml")


@contextlib.contextmanager
def node_namespace(d, inst, netns_inst, tag, net):
    """Where a node-mode initializer runs: a network namespace (fakecloud.Netns, eth0 with
    netns_inst's addresses), inst's metadata at 169.254.169.254 inside it, and a fake API server
    with the shipped RBAC and node admission policy, reached over a veth pair (host interface
    named tag + pid, on 10.net.N.0/24). Yields (ns, link, k), link = (host interface, host
    address, namespace address)."""
    idx = os.getpid() % 200 + 20
    host_if = "%s%d" % (tag, os.getpid())
    link = (host_if, "10.%d.%d.1" % (net, idx), "10.%d.%d.2" % (net, idx))
    with Netns(instance=netns_inst) as ns:
        subprocess.run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "kapi0", "netns", ns.name],
                       check=True, capture_output=True)
        try:
            subprocess.run(["ip", "addr", "add", link[1] + "/24", "dev", host_if], check=True, capture_output=True)
            subprocess.run(["ip", "link", "set", host_if, "up"], check=True, capture_output=True)
            ns.run(["ip", "addr", "add", link[2] + "/24", "dev", "kapi0"], check=True)
            ns.run(["ip", "link", "set", "kapi0", "up"], check=True)
            with FakeCloud(os.path.join(d, "cloud"), instance=inst["id"], netns=ns.name,
                           listen="169.254.169.254:80"), \
                 kube_server(os.path.join(d, "kube"), rbac=RBAC, load=[NODE_POLICY], listen=link[1] + ":0") as k:
                yield ns, link, k
        finally:
            subprocess.run(["ip", "link", "del", host_if], capture_output=True)


def make_node(k, name, tainted=True, provider_id=None, annotations=None, labels=None, addresses=None,
              taints=None, ready=None):
    taint_list = list(taints or [])
    if tainted:
        taint_list.insert(0, {"key": TAINT, "value": "true", "effect": "NoSchedule"})
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
            "spec": {}}
    if annotations:
        node["metadata"]["annotations"] = annotations
    if taint_list:
        node["spec"]["taints"] = taint_list
    if provider_id:
        node["spec"]["providerID"] = provider_id
    status = {}
    if addresses is not None:
        status["addresses"] = addresses
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                 "reason": "KubeletReady" if ready else "KubeletNotReady"}]
    # As a kubelet registers: one create with the status (a Node's create keeps it), so that no
    # second write races the initializer's own.
    if status:
        node["status"] = status
    st, out = k.api("POST", "/api/v1/nodes", node)
    if st != 201:
        raise RuntimeError("creating node %s: %s %s" % (name, st, out))
    if status and (out or {}).get("status", {}).get("addresses") != status.get("addresses"):
        raise RuntimeError("creating node %s: the API server dropped its status: %s" % (name, out))
    return out


def set_status(k, name, status):
    st, out = k.api("PATCH", "/api/v1/nodes/%s/status" % name, {"status": status},
                    content_type="application/merge-patch+json")
    if st != 200:
        raise RuntimeError("patching status of %s: %s %s" % (name, st, out))
    return out


def get_node(k, name):
    st, out = k.api("GET", "/api/v1/nodes/" + name)
    return out if st == 200 else None


def condition(node, ctype):
    """The Node's status condition of that type, or None."""
    return next((c for c in (node or {}).get("status", {}).get("conditions", []) if c.get("type") == ctype), None)


def tainted(node, key=TAINT):
    return any(t.get("key") == key for t in (node or {}).get("spec", {}).get("taints") or [])


def addresses(node):
    return [(a["type"], a["address"]) for a in (node or {}).get("status", {}).get("addresses") or []]


def expected_addresses(inst):
    """The addresses cluster mode gives the Node of a fake-cloud Hetzner instance, in order."""
    return [("InternalIP", inst["private_ipv4"]), ("ExternalIP", inst["public_ipv4"]),
            ("ExternalIP", inst["ipv6"]), ("Hostname", inst["name"])]


def initialized(k, name):
    n = get_node(k, name)
    return n if n and not tainted(n) else None


def events(k, name=None, reason=None):
    st, out = k.api("GET", "/api/v1/namespaces/default/events")
    items = out.get("items", []) if st == 200 else []
    return [e for e in items if (name is None or e.get("involvedObject", {}).get("name") == name)
            and (reason is None or e.get("reason") == reason)]


def request_start(r):
    """When the server got the request: audit records are written when the response is done, by
    concurrent server threads, so their order in the log is not the order of the requests. The
    time of receipt is taken when the request came, not derived from the end and the duration:
    a server thread paused between reading the clock for one and the other would move the start
    of its request before that of one answered earlier."""
    return _timestamp(r.get("received") or r["time"]) - (0 if r.get("received") else float(r.get("duration") or 0))


def _timestamp(text):
    return datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def writes(k, user, name=None):
    """Successful and failed writes to Nodes by user, as (verb, subresource, name, code), in the
    order the server received them."""
    out = []
    for r in sorted(k.audit(), key=request_start):
        if r.get("user") != user or r.get("resource") != "nodes":
            continue
        if r.get("verb") not in ("patch", "update", "create", "delete"):
            continue
        if name is not None and r.get("name") != name:
            continue
        out.append((r["verb"], r.get("subresource") or "", r.get("name"), r.get("code")))
    return out


def node_gets(k, user):
    """GETs of single Nodes by user (list and watch have no name)."""
    return [r for r in k.audit() if r.get("user") == user and r.get("resource") == "nodes"
            and r.get("verb") == "get" and r.get("name")]


class Initializer:
    def __init__(self, args, netns=None, env=None, state_dir=None, name="initializer"):
        self.args = list(args)
        self.netns = netns
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.dir = state_dir or tempfile.mkdtemp()
        self.name = name
        self.log_path = os.path.join(self.dir, name + ".log")
        self.port = None
        self.proc = None
        self.notify = None

    def start(self):
        self.notify_path = os.path.join(self.dir, name_sock(self.name))
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.notify.setblocking(False)
        self.env["NOTIFY_SOCKET"] = self.notify_path
        if not any(a.startswith("--port") for a in self.args):
            self.port = free_port()
            self.args.append("--port=%d" % self.port)
        cmd = [BINARY] + self.args
        if self.netns:
            cmd = netns_argv(self.netns, cmd)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env)
        if self.port and not wait_for(self._find_port, 20):
            raise RuntimeError("cloudnode-initializer did not start serving:\n" + self.log())
        return self

    def _find_port(self):
        if self.proc.poll() is not None:
            raise RuntimeError("cloudnode-initializer exited with %s:\n%s" % (self.proc.returncode, self.log()))
        m = re.search(r"/metrics on \S+ port (\d+)", self.log())
        return int(m.group(1)) if m else None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def notify_messages(self):
        out = []
        while True:
            try:
                out.append(self.notify.recv(4096).decode())
            except BlockingIOError:
                return out

    def get(self, path, host="127.0.0.1"):
        try:
            with urllib.request.urlopen("http://%s:%d%s" % (host, self.port, path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def send_signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.notify:
            self.notify.close()
            self.notify = None
            os.unlink(self.notify_path)
        rc, self.proc = self.proc.returncode, None
        return rc

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def free_port():
    """A port that was free a moment ago (--port=0 turns the server off, as upstream)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def name_sock(name):
    return name + ".notify"


def hetzner_conf(path, cloud_url, token):
    with open(path, "w") as f:
        f.write("[Global]\ntoken = %s\nendpoint = %s/v1\n" % (token, cloud_url))
    os.chmod(path, 0o600)
    return path


def aws_conf(path, url, extra=""):
    """cloud.conf of the aws provider: the fake's access key and its EC2 endpoint (us-east-1)."""
    with open(path, "w") as f:
        f.write("[Global]\nZone = us-east-1a\naccess-key-id = %s\nsecret-access-key = %s\n%s"
                '[ServiceOverride "1"]\nService = ec2\nRegion = us-east-1\nURL = %s/ec2\nSigningRegion = us-east-1\n'
                % (AWS_ACCESS_KEY["id"], AWS_ACCESS_KEY["secret"], extra, url))
    os.chmod(path, 0o600)
    return path


def pve_conf(path, tls_url, ca, password=False):
    """cloud.conf of the proxmoxve provider: the fake's API over HTTPS (tls_url) verified with the
    test CA, cluster pve, and the fake's API token (or, with password, root@pam's password)."""
    auth = ("username = %s\npassword = %s\n" % (PVE_USER["user"], PVE_USER["password"]) if password else
            "token-id = %s!%s\ntoken-secret = %s\n" % (PVE_TOKEN["user"], PVE_TOKEN["name"], PVE_TOKEN["secret"]))
    with open(path, "w") as f:
        f.write("[Global]\nurl = %s/api2/json\nregion = pve\nca-file = %s\n%s" % (tls_url, ca, auth))
    os.chmod(path, 0o600)
    return path


def do_conf(path, url):
    """cloud.conf of the digitalocean provider: the fake's API token and endpoint."""
    with open(path, "w") as f:
        f.write("[Global]\nendpoint = %s\ntoken = %s\n" % (url, DO_TOKEN))
    os.chmod(path, 0o600)
    return path
