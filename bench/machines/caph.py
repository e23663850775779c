"""bench/machines --peer caph: the Hetzner Cluster API provider (CAPH, syself/cluster-api-provider-
hetzner, built by bench/peers/build.sh from a git repository) through the same machine lifecycles
as cloudnode-controller, on the same fake Hetzner API (tests/fake-cloud) with the same build and
action times.

CAPH's hcloud client always calls https://api.hetzner.cloud/v1 and has no endpoint option, so the
fake serves HTTPS with a certificate for that name from a test CA (SSL_CERT_FILE) and CAPH reaches
it through a CONNECT egress proxy on loopback that tunnels that one name to the fake and refuses
everything else (HTTPS_PROXY; tests/pylib/egressproxy.py). The Kubernetes side is the real
kube-apiserver (tests/realkube): CAPH is a controller-runtime manager whose caches need what the
fake API server does not promise. As in cloudnode's bench, no Cluster API controller runs: the
bench writes what they would (the Cluster provisioned, each Machine with its bootstrap data Secret
and failure domain, the infrastructure machine owned by its Machine) and deletes the
infrastructure machine itself; CAPH runs with --skip-webhooks, and the bench writes the default
its defaulting webhook would (spec.publicNetwork); CAPH's own CRDs are those of its release, with the contract label
clusterctl reads. The HetznerCluster has no control-plane load balancer, no private network and
no placement groups (the bench measures machines, not the cluster).

With core=True (bench-machines --peer caph --capi-core) the real Cluster API core manager
(v1.11.7, tests/realcapi/build.sh, its own CRDs) runs beside CAPH: it adopts the HCloudMachine,
copies its providerID to the Machine, and the bench deletes the Machine instead, which the core
manager turns into the HCloudMachine's deletion; "gone" is then the Machine gone.

Measured per size, as for cloudnode: wall time to every HCloudMachine ready (status.ready and a
providerID) and to every one gone, cloud calls (every request the fake saw: CAPH is its only
client), Kubernetes calls of CAPH's user (the audit log), and CAPH's CPU time and peak RSS
(/proc)."""
import base64
import glob
import os
import subprocess
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TOP_SRCDIR = os.environ.get("CN_TOP_SRCDIR") or os.path.join(HERE, "..", "..")
BUILD = os.path.join(TOP_SRCDIR, "bench", "peers", "build.sh")
NAME = "cluster-api-provider-hetzner"
HOST = "api.hetzner.cloud"
USER = "caph"
NS = "default"
INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/%s/" % NS
HCM = INFRA + "hcloudmachines"
MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/machines" % NS
CLUSTERS = "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/clusters" % NS
SECRETS = "/api/v1/namespaces/%s/secrets" % NS
MERGE = "application/merge-patch+json"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def bindir():
    """(directory of CAPH, None) or (None, why it cannot run here)."""
    r = subprocess.run([BUILD, "--bindir", NAME], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0:
        return r.stdout.strip(), None
    r = subprocess.run([BUILD, NAME], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == 0:
        return r.stdout.strip(), None
    return None, "CAPH is not built: " + " ".join(r.stderr.split()[-40:])


def cpu_ms(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / CLK_TCK


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class CaphEnv:
    def __init__(self, k, c, tmp, capi_core_crd, core_src=None):
        """core_src: the Cluster API module's directory, whose CRDs are installed (and whose core
        manager runs); otherwise capi_core_crd(kind, plural) gives the Cluster and Machine CRDs."""
        self.k, self.c, self.tmp = k, c, tmp
        self.capi_core_crd = capi_core_crd
        self.core_src = core_src
        self.proc = self.core = None

    def setup(self, crd_dir, token, wait_for):
        k = self.k
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        if self.core_src:
            # Too large for a client-side apply's annotation: applied server-side.
            r = subprocess.run(["kubectl", "--kubeconfig", k.kubeconfig, "apply", "--server-side", "-f",
                                os.path.join(self.core_src, "config", "crd", "bases")], capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError("Cluster API CRDs: %s" % r.stderr[-2000:])
        else:
            for kind, plural in (("Cluster", "clusters"), ("Machine", "machines")):
                k.api("POST", crds, self.capi_core_crd(kind, plural))
        for f in sorted(glob.glob(os.path.join(crd_dir, "*.yaml"))):
            with open(f) as fh:
                crd = yaml.safe_load(fh)
            # What clusterctl's and CAPH's kustomization add: the contract CAPH implements.
            crd["metadata"].setdefault("labels", {})["cluster.x-k8s.io/v1beta1"] = "v1beta1"
            st, body = k.api("POST", crds, crd)
            if st not in (201, 409):
                raise RuntimeError("CRD %s: %s %s" % (f, st, body))
        for path in (HCM, INFRA + "hetznerclusters", MACHINES, CLUSTERS):
            if not wait_for(lambda: k.api("GET", path)[0] == 200, 60):
                raise RuntimeError("%s is not served" % path)
        k.api("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hetzner"},
                                "stringData": {"hcloud": token}})
        st, cl = k.api("POST", CLUSTERS, {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1"},
            "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "HetznerCluster",
                                           "name": "c1"}}})
        if st != 201:
            raise RuntimeError("Cluster: %s %s" % (st, cl))
        k.api("PATCH", CLUSTERS + "/c1/status", {"status": {
            "initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": True},
            "failureDomains": [{"name": "fsn1", "controlPlane": True}]}}, MERGE)
        st, body = k.api("POST", INFRA + "hetznerclusters", {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "HetznerCluster",
            "metadata": {"name": "c1", "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                              "name": "c1", "uid": cl["metadata"]["uid"]}]},
            "spec": {"controlPlaneRegions": ["fsn1"], "controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443},
                     "controlPlaneLoadBalancer": {"enabled": False}, "hcloudNetwork": {"enabled": False},
                     "hcloudPlacementGroups": [], "sshKeys": {"hcloud": []},
                     "skipCreatingHetznerSecretInWorkloadCluster": True,
                     "hetznerSecretRef": {"name": "hetzner", "key": {"hcloudToken": "hcloud"}}}})
        if st != 201:
            raise RuntimeError("HetznerCluster: %s %s" % (st, body))

    def start(self, binary, proxy_url, ca_file, free_port):
        kc = self.k.kubeconfig_for(USER, ["system:masters"])
        self.log = os.path.join(self.tmp, "caph.log")
        env = dict(os.environ, KUBECONFIG=kc, HTTPS_PROXY=proxy_url, HTTP_PROXY=proxy_url, NO_PROXY="127.0.0.1",
                   SSL_CERT_FILE=ca_file)
        for v in ("https_proxy", "http_proxy", "no_proxy", "all_proxy", "ALL_PROXY", "SSL_CERT_DIR"):
            env.pop(v, None)
        self.proc = subprocess.Popen(
            [binary, "--leader-elect=false", "--skip-webhooks", "--disable-csr-approval",
             "--metrics-bind-address=127.0.0.1:%d" % free_port(),
             "--health-probe-bind-address=127.0.0.1:%d" % free_port()],
            env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def start_core(self, binary, free_port, certs):
        """The Cluster API core manager, as user capi, its webhooks served with a certificate of
        a CA of the run (nothing calls them: no webhook configuration is installed)."""
        d = os.path.join(self.tmp, "capi-webhook")
        os.makedirs(d, exist_ok=True)
        ca = certs.ensure_ca(d)
        crt, key = certs.issue(d, "serving", ca, "capi-webhook", sans=["127.0.0.1"], server=True)
        os.replace(crt, os.path.join(d, "tls.crt"))
        os.replace(key, os.path.join(d, "tls.key"))
        self.core_log = os.path.join(self.tmp, "capi-core.log")
        self.core = subprocess.Popen(
            [binary, "--leader-elect=false", "--webhook-port=%d" % free_port(), "--webhook-cert-dir=" + d,
             "--health-addr=127.0.0.1:%d" % free_port(), "--diagnostics-address=127.0.0.1:%d" % free_port(),
             "--insecure-diagnostics=true"],
            env=dict(os.environ, KUBECONFIG=self.k.kubeconfig_for("capi", ["system:masters"]), HTTP_PROXY="",
                     HTTPS_PROXY="", NO_PROXY=""),
            stdout=open(self.core_log, "ab"), stderr=subprocess.STDOUT)

    def stop(self):
        import realcapi
        realcapi.stop([p for p in (self.proc, self.core) if p])

    def machine(self, name):
        k = self.k
        k.api("POST", SECRETS, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name + "-bootstrap"},
            "data": {"value": base64.b64encode(b"#cloud-config\nhostname: " + name.encode()).decode()}})
        st, m = k.api("POST", MACHINES, {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": name + "-bootstrap"},
                     "failureDomain": "fsn1",
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "HCloudMachine",
                                           "name": name}}})
        if st != 201:
            raise RuntimeError("Machine %s: %s %s" % (name, st, m))
        st, body = k.api("POST", HCM, {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "HCloudMachine",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                              "name": name, "uid": m["metadata"]["uid"]}]},
            # publicNetwork: what CAPH's defaulting webhook writes (the bench runs without webhooks).
            "spec": {"type": "cx22", "imageName": "ubuntu-24.04",
                     "publicNetwork": {"enableIPv4": True, "enableIPv6": True}}})
        if st != 201:
            raise RuntimeError("HCloudMachine %s: %s %s" % (name, st, body))

    def get(self, name):
        st, o = self.k.api("GET", HCM + "/" + name)
        return o if st == 200 else None

    def ready(self, name):
        o = self.get(name)
        return bool(o and (o.get("status") or {}).get("ready") is True and o["spec"].get("providerID"))

    def delete(self, name):
        self.k.api("DELETE", (MACHINES + "/" if self.core else HCM + "/") + name)

    def gone(self, name):
        if self.core:
            return self.k.api("GET", MACHINES + "/" + name)[0] == 404
        return self.get(name) is None


def run(env, n, prefix, wait_for, timeout, detail=None):
    names = ["%s-%d" % (prefix, i) for i in range(n)]
    pid = env.proc.pid
    cloud0, kube0, cpu0 = len(env.c.requests()), len(env.k.audit()), cpu_ms(pid)
    t0 = time.monotonic()
    for name in names:
        env.machine(name)
    ok = wait_for(lambda: all(env.ready(x) for x in names), timeout, step=0.5)
    t_ready = time.monotonic() - t0
    for name in names:
        env.delete(name)
    gone = wait_for(lambda: all(env.gone(x) for x in names), timeout, step=0.5)
    t_total = time.monotonic() - t0
    cpu = cpu_ms(pid) - cpu0
    creqs = env.c.requests()[cloud0:]
    kreqs = [a for a in env.k.audit()[kube0:] if a.get("user") == USER]
    cloud, kube = len(creqs), len(kreqs)
    if detail:
        detail(n, creqs, kreqs)
    return (n, "%.2f" % (t_ready / n) if ok else "timeout", "%.2f" % (t_total / n) if gone else "timeout",
            cloud / n, kube / n, cpu / n, peak_rss_mib(pid))


def bench(sizes, tmp, settings, wait_for, timeout_for, detail=None, core=False):
    """Rows (machines, s/ready, s/total, cloud calls, kube calls, CPU ms per machine, peak RSS MiB)
    for each size, or (None, why) where CAPH cannot run here. core: the real Cluster API core
    manager runs too."""
    from fakecloud import HETZNER_TOKEN, FakeCloud  # before realkube, which puts tests/ on the path
    from capi import core_crd
    from egressproxy import EgressProxy
    import realkube
    import realcapi
    from realcapi import free_port

    caph_bins, why = bindir()
    if caph_bins is None:
        return None, why
    kube_bins, why = realkube.bindir()
    if kube_bins is None:
        return None, "no real kube-apiserver: %s" % why
    core_src = None
    if core:
        capi_bins, why = realcapi.bins()
        if capi_bins is None:
            return None, "no Cluster API core manager: %s" % why
        core_src = realcapi.module_src()
    rows = []
    with realkube.RealKube(os.path.join(tmp, "caph-kube")) as k, \
            FakeCloud(os.path.join(tmp, "caph-cloud"), tls_names=[HOST]) as c:
        c.settings(**settings)
        proxy = EgressProxy(int(c.url.rsplit(":", 1)[1]), [HOST])
        env = CaphEnv(k, c, tmp, core_crd, core_src)
        try:
            env.setup(os.path.join(os.path.dirname(caph_bins), "crds"), HETZNER_TOKEN, wait_for)
            if core:
                from fakekube import certs
                env.start_core(os.path.join(capi_bins, "cluster-api-manager"), free_port, certs)
            env.start(os.path.join(caph_bins, NAME), proxy.url, c.ca_file, free_port)
            # The HetznerCluster's first reconciles (and their calls) happen before the first size.
            time.sleep(5.0)
            for n in sizes:
                if env.proc.poll() is not None:
                    raise RuntimeError("CAPH exited %s; its log: %s" % (env.proc.returncode, env.log))
                if env.core and env.core.poll() is not None:
                    raise RuntimeError("the core manager exited %s; its log: %s" % (env.core.returncode, env.core_log))
                rows.append(run(env, n, "p%d" % n, wait_for, timeout_for(n), detail))
        finally:
            env.stop()
            proxy.shutdown()
        if proxy.refused:
            raise RuntimeError("CAPH asked the egress proxy for other destinations: %s" % proxy.refused[:5])
    return rows, None
