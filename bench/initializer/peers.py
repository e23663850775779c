"""The Go cloud-controller-managers that do the initializer's job, run side by side with
cloudnode-initializer on the same fakes: hcloud-cloud-controller-manager against the Hetzner API of
tests/fake-cloud and openstack-cloud-controller-manager against its Keystone, Nova and Neutron.
bench/peers/build.sh builds them (pinned releases, cached in ~/.cache/cloudnode/peers).

Each side gets a fresh API server and fake cloud holding the same N tainted Nodes and their
instances, the same identity (the cluster-mode service account, RBAC enforced), the same
controllers (cloud-node and cloud-node-lifecycle), the same client rate limit (--kube-api-qps,
--kube-api-burst) and the same number of sync workers, and is started once all Nodes exist.
Measured the same way for both: the time until a watch has seen every Node initialized (taint
gone, providerID and addresses set), CPU seconds and peak RSS of the process (/proc) at that
moment, and, one second later, the API requests of that identity in the API server's audit log
and the requests in the fake cloud's request log (the cloud-node-lifecycle controllers poll the
cloud for Nodes that are not Ready, so those counts grow with the wall time)."""
import importlib
import importlib.util
import os
import signal
import sys
import subprocess
import threading
import time

from cninit import BINARY, CLUSTER_SA, RBAC, TAINT, Initializer, hetzner_conf
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER, FakeCloud

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_SH = os.path.join(HERE, "..", "peers", "build.sh")
CONTROLLERS = "cloud-node,cloud-node-lifecycle"
WRITE_VERBS = ("create", "update", "patch", "delete")
SETTLE = 1.0

PEERS = {
    "hetzner": "hcloud-cloud-controller-manager",
    "openstack": "openstack-cloud-controller-manager",
}


def load_fake_cloud_state():
    """tests/fakecloud/state.py, under another package name than the pylib wrapper's module."""
    pkg = os.path.join(HERE, "..", "..", "tests", "fakecloud")
    spec = importlib.util.spec_from_file_location("fakecloud_server", os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fakecloud_server"] = mod
    spec.loader.exec_module(mod)
    return importlib.import_module("fakecloud_server.state")


def build(providers):
    """Builds (or finds) the peers of providers; returns (bindir, None) or (None, why)."""
    names = [PEERS[p] for p in providers]
    p = subprocess.run(["sh", BUILD_SH] + names, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode == 0:
        return p.stdout.strip().splitlines()[-1], None
    why = (p.stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
    if p.returncode == 77:
        return None, why
    raise SystemExit("bench/peers/build.sh failed:\n" + p.stderr)


def openstack_conf(path, cloud_url):
    """One cloud.conf for both sides. openstack-cloud-controller-manager reads the project from
    tenant-name and tenant-domain-name only (project-name is its clouds.yaml spelling; in
    cloud.conf it is ignored and the token comes back unscoped, without a catalog); cloudnode's
    OpenStack provider reads both spellings."""
    u = OPENSTACK_USER
    with open(path, "w") as f:
        f.write("[Global]\nauth-url = %s/v3\nusername = %s\npassword = \"%s\"\nuser-domain-name = %s\n"
                "tenant-name = %s\ntenant-domain-name = %s\nregion = RegionOne\n"
                % (cloud_url, u["name"], u["password"], u["domain"], u["project"], u["domain"]))
    os.chmod(path, 0o600)
    return path


def initialized(node):
    """Done as far as a user can tell: the taint gone, providerID and addresses set (the two
    sides write them in different orders)."""
    return (not any(t.get("key") == TAINT for t in node.get("spec", {}).get("taints") or [])
            and node["spec"].get("providerID") and node.get("status", {}).get("addresses"))


class Initialized(threading.Thread):
    """Watches Nodes and notes when all n of them are initialized()."""

    def __init__(self, k, n):
        super().__init__(daemon=True)
        self.k, self.n = k, n
        self.done = set()
        self.finished = threading.Event()
        self.last = None
        st, lst = k.api("GET", "/api/v1/nodes?limit=1")
        self.rv = lst["metadata"]["resourceVersion"]

    def run(self):
        while not self.finished.is_set():
            try:
                for typ, obj in self.k.watch("/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=%s"
                                             % self.rv, timeout=30):
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    if typ not in ("ADDED", "MODIFIED"):
                        continue
                    name = obj["metadata"]["name"]
                    if initialized(obj):
                        if name not in self.done:
                            self.done.add(name)
                            self.last = time.time()
                        if len(self.done) >= self.n:
                            self.finished.set()
                            return
            except (RuntimeError, OSError):
                time.sleep(0.2)

    def wait(self, proc, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if self.finished.wait(0.5):
                return True
            if proc.poll() is not None:
                return False
        return False


def proc_stats(pid):
    """(CPU seconds, peak RSS MiB) of a running process (VmHWM, which Linux keeps until exit)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024.0
    return cpu, rss


class Peer:
    """A peer cloud-controller-manager process with the Popen interface Initializer has."""

    def __init__(self, argv, env, log_path):
        self.argv, self.env, self.log_path = argv, env, log_path
        self.proc = None

    def __enter__(self):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env)
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


def cloudnode_side(provider, conf, kubeconfig, limits, d):
    args = ["--kubeconfig=" + kubeconfig, "--cloud-provider=" + provider, "--cloud-config=" + conf,
            "--leader-elect=false", "--controllers=" + CONTROLLERS, "--bind-address=127.0.0.1"] + limits
    return Initializer(args, state_dir=d, name="cloudnode")


def peer_side(provider, bindir, c, conf, kubeconfig, limits, d):
    env = dict(os.environ)
    args = ["--kubeconfig=" + kubeconfig, "--cloud-provider=" + provider, "--leader-elect=false",
            "--controllers=" + CONTROLLERS, "--use-service-account-credentials=false",
            # The fake API server speaks JSON only; client-go asks for protobuf by default.
            "--kube-api-content-type=application/json",
            # No serving: the benchmark reads /proc and the servers' logs, not the peer's metrics.
            "--secure-port=0", "--authentication-skip-lookup=true",
            "--allocate-node-cidrs=false", "--configure-cloud-routes=false",
            # Both clouds' instances carry no cluster tag: cloudnode does not ask for one either.
            "--allow-untagged-cloud=true", "-v=" + os.environ.get("CN_PEER_V", "1")] + limits
    if provider == "hetzner":
        env.update({"HCLOUD_TOKEN": HETZNER_TOKEN, "HCLOUD_ENDPOINT": c.url + "/v1",
                    "HCLOUD_LOAD_BALANCERS_ENABLED": "false", "HCLOUD_NETWORK_ROUTES_ENABLED": "false",
                    "HCLOUD_METRICS_ENABLED": "false", "ROBOT_ENABLED": "false"})
    else:
        args.append("--cloud-config=" + conf)
    return Peer([os.path.join(bindir, PEERS[provider])] + args, env, os.path.join(d, "peer.log"))


def run_side(side, provider, n, limits, kube_server, add_instances, make_node, bindir, d):
    """One side on fresh fakes; returns its row."""
    cloud_dir = os.path.join(d, "cloud")
    os.makedirs(cloud_dir)
    add_instances(cloud_dir, provider, n)
    with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(cloud_dir) as c:
        for i in range(n):
            status, out = k.api("POST", "/api/v1/nodes", make_node(i))
            if status != 201:
                raise SystemExit("creating nodes: %s %s" % (status, out))
        if provider == "hetzner":
            conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
        else:
            conf = openstack_conf(os.path.join(d, "openstack.conf"), c.url)
        kubeconfig = k.kubeconfig_for(CLUSTER_SA)
        c.clear_requests()
        watcher = Initialized(k, n)
        watcher.start()
        t0 = time.time()
        if side == "cloudnode":
            proc = cloudnode_side(provider, conf, kubeconfig, limits, d)
        else:
            proc = peer_side(provider, bindir, c, conf, kubeconfig, limits, d)
        with proc:
            ok = watcher.wait(proc.proc, timeout=3600)
            watcher.finished.set()
            if not ok:
                raise SystemExit("%s (%s): %d of %d Nodes initialized; log:\n%s"
                                 % (side, provider, len(watcher.done), n, proc.log()[-4000:]))
            cpu, rss = proc_stats(proc.proc.pid)
            # What a side still sends about the last Nodes (an Event) is part of its cost.
            time.sleep(SETTLE)
        elapsed = watcher.last - t0
        st, lst = k.api("GET", "/api/v1/nodes")
        nodes = {x["metadata"]["name"]: x for x in lst["items"]}
        audit = [r for r in k.audit() if r.get("user") == CLUSTER_SA]
        cloud = [r for r in c.requests() if r.get("service") or r.get("platform")]
    writes = [r for r in audit if r.get("verb") in WRITE_VERBS]
    node_writes = [r for r in writes if r.get("resource") == "nodes"]
    return {"side": side, "provider": provider, "n": n, "elapsed": elapsed, "rate": n / elapsed,
            "cpu_ms": 1000.0 * cpu / n, "rss": rss, "node_writes": len(node_writes) / n,
            "writes": len(writes) / n, "calls": len(audit) / n, "cloud": len(cloud) / n,
            "program": BINARY if side == "cloudnode" else os.path.join(bindir, PEERS[provider]), "nodes": nodes}


HEADER = "%-9s %-36s %6s %8s %8s %12s %8s %13s %11s %10s %12s" % (
    "provider", "program", "nodes", "total s", "nodes/s", "CPU ms/node", "RSS MiB", "Node writes/n",
    "writes/n", "API req/n", "cloud req/n")


def row(r):
    return "%-9s %-36s %6d %8.2f %8.1f %12.2f %8.1f %13.2f %11.2f %10.2f %12.2f" % (
        r["provider"], os.path.basename(r["program"]), r["n"], r["elapsed"], r["rate"], r["cpu_ms"], r["rss"],
        r["node_writes"], r["writes"], r["calls"], r["cloud"])


def ratio(ours, peer):
    def q(a, b):
        return b / a if a else float("inf")
    return ("%-9s %-36s %6s %8.2f %8.2f %12.2f %8.2f %13.2f %11.2f %10.2f %12.2f" % (
        "", "ratio peer/cloudnode", "", q(ours["elapsed"], peer["elapsed"]), q(ours["rate"], peer["rate"]),
        q(ours["cpu_ms"], peer["cpu_ms"]), q(ours["rss"], peer["rss"]), q(ours["node_writes"], peer["node_writes"]),
        q(ours["writes"], peer["writes"]), q(ours["calls"], peer["calls"]), q(ours["cloud"], peer["cloud"])))


def instances_adder(fcstate):
    """add_instances(cloud_dir, provider, n) for run_side: instance i is named as Node i, written
    in one locked step (adding them one by one through the fake's API rewrites its state file
    each time), the Hetzner rate limit out of the way as in the benchmark's own table."""
    def add_instances(cloud_dir, provider, n):
        st = fcstate.State(cloud_dir)
        with st.locked() as s:
            s["settings"]["hetzner_ratelimit_limit"] = 10 ** 9
            s["settings"]["hetzner_ratelimit_refill_per_second"] = 10 ** 6
            for i in range(n):
                fcstate.add_instance(s, {"platform": provider, "name": "bench-%05d" % i})
    return add_instances


def compare(providers, counts, qps, burst, syncs, kube_server, fcstate, make_node, workdir, out):
    """Prints, per provider and N, a row for cloudnode-initializer, one for its peer, and their
    ratios. fcstate is tests/fakecloud/state.py; make_node(i) is the Node object named
    bench-%05d (the benchmark's own, so both tables measure the same Nodes)."""
    add_instances = instances_adder(fcstate)
    import tempfile
    bindir, why = build(providers)
    limits = ["--kube-api-qps=%s" % qps, "--kube-api-burst=%s" % burst, "--concurrent-node-syncs=%d" % syncs]
    out.write("\nside by side: controllers %s, %s\n" % (CONTROLLERS, " ".join(limits)))
    if bindir is None:
        out.write("peers not run: %s\n" % why)
        return
    out.write(HEADER + "\n")
    for provider in providers:
        for n in counts:
            rows = []
            for side in ("cloudnode", "peer"):
                d = tempfile.mkdtemp(dir=workdir)
                rows.append(run_side(side, provider, n, limits, kube_server, add_instances, make_node, bindir, d))
                out.write(row(rows[-1]) + "\n")
                out.flush()
            out.write(ratio(*rows) + "\n")
            out.flush()
