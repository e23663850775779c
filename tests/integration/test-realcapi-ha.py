#!/usr/bin/env python3
"""The real Cluster API runs a highly available cluster on cloudnode's infrastructure provider, as
a user runs it: Cluster API v1.11.7's core, kubeadm bootstrap and kubeadm control-plane (KCP)
managers and clusterctl (tests/realcapi/build.sh), two real kube-apiservers (the management
cluster, and the workload cluster whose API server the load balancer's address reaches), the
fake cloud. One scenario per provider: hetzner here (its Load Balancer,
templates/cluster-template-ha.yaml), openstack in test-realcapi-ha-openstack.py (an Octavia load
balancer behind a floating IP, 3 Nova availability zones, templates/cluster-template-openstack-ha.yaml);
see the classes Hetzner and OpenStack.

- `clusterctl init` with cloudnode's infrastructure-components.yaml; `clusterctl generate
  cluster --flavor ha` (or openstack-ha): a KubeadmControlPlane of 3 machines spread over the
  failure domains, a MachineDeployment of 3 workers, no endpoint given by the user. cloudnode
  creates the load balancer and writes its address into the CloudnodeCluster's
  spec.controlPlaneEndpoint; Cluster API copies it to the Cluster and the managers reach the
  workload API server through it (the fake cloud gives the load balancer a loopback address,
  where the workload API server listens on the load balancer's port).
- The cloud config cloudnode publishes (the Secret c1-cloudnode-cloud-config) reaches the workload
  cluster as the ConfigMap cloudnode/cloud-provider-config, through the template's
  ClusterResourceSet, without the credential.
- The MachineDeployment scaled 3 -> 4 -> 2; the control plane 3 -> 1 -> 3 (etcd is external, so
  KCP allows any count).
- A rolling template change: new CloudnodeMachineTemplates (another server type) named by the
  KubeadmControlPlane and the MachineDeployment; the machines are replaced one by one.
- `clusterctl move` of the whole cluster to a second management cluster: the same servers and
  load balancer, relabeled with the new uids.
- Deletion: no Machine, server or load balancer is left (on OpenStack no Octavia load balancer,
  listener, pool, member or health monitor, and no floating IP).
All along, a sampler of the cloud checks that the servers never exceed the count expected in each
phase plus the rollout surge, that no two servers share a name and that there is never more than
one load balancer; after each phase the load balancer's targets are exactly the servers of the
current control-plane machines.

What stands in for the machines (no kubelet, no kubeadm, no etcd Pod runs here): Kubelets below
registers each running server's Node (named after it, with the uninitialized taint) and reports
it Ready, as its kubelet does; on a control-plane server it also does what kubeadm and the kubelet
do there: the node-role.kubernetes.io/control-plane label, the mirror Pods of kube-apiserver,
kube-controller-manager and kube-scheduler (Running, Ready), and on the first one the kubeadm-config
ConfigMap with the ClusterConfiguration of the server's own bootstrap data. KCP judges the machines
by those Pods. etcd is external (the template's clusterConfiguration.etcd.external), so KCP reads
no etcd members (which needs a port-forward to etcd Pods, hence a kubelet). KCP's certificate-expiry
check also dials the kube-apiserver Pod through a port-forward: Kubelets writes the annotation KCP
keeps its answer in (the workload API server's real expiry), so KCP does not dial.

Skips (plan 1..0) where Go or the Go module proxy is missing."""
import base64
import glob
import os
import ssl
import subprocess
import sys
import threading
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build, wait_for  # noqa: E402
from cninit import CLUSTER_SA, RBAC as INIT_RBAC, TAINT, hetzner_conf  # noqa: E402
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER, FakeCloudError, neutron  # noqa: E402
import realcapi  # noqa: E402
import realkube  # noqa: E402
from fakekube import certs  # noqa: E402

NS = "default"
CAPI = "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/" % NS
KCP = "/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/%s/" % NS
INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/%s/" % NS
CP_LABEL = "cluster.x-k8s.io/control-plane"
ROLE_CP = "node-role.kubernetes.io/control-plane"
CP_OF = "cloudnode.io/control-plane-of"
K8S = "v1.32.13"
EXPIRY = "machine.cluster.x-k8s.io/certificates-expiry"
LB_DESCRIPTION = "cloudnode control-plane endpoint of cluster "
OCTAVIA = "/load-balancer/v2/lbaas"
items = realcapi.items


class Hetzner:
    """The Hetzner Load Balancer: its public address 127.0.0.1 (a fake-cloud setting), its port
    the workload API server's; its target, a label selector, is every control-plane server."""
    name = "hetzner"
    flavor = "ha"
    prefix = "hcloud://"
    domains = ["fsn1", "hel1", "nbg1"]  # the locations of eu-central
    type_field = "serverType"
    new_type = "cx32"
    listen = "127.0.0.1:0"
    lb_host = "127.0.0.1"

    def __init__(self, cloud, tmp):
        self.cloud = cloud
        self.conf = hetzner_conf(os.path.join(tmp, "hetzner.conf"), cloud.url, HETZNER_TOKEN)
        cloud.settings(build_seconds=0.3, action_seconds=0.2, hetzner_lb_public_ipv4=self.lb_host)

    targets = "every one"

    @staticmethod
    def targets_ok(ids, cps):
        return ids == cps

    def init_env(self):
        return {}

    def cloud_config_ok(self, text):
        """The published cloud config: the API's endpoint, not the token."""
        return ("endpoint = %s/v1" % self.cloud.url) in text and HETZNER_TOKEN not in text

    def generate_env(self, wl):
        return {"CONTROL_PLANE_LOADBALANCER_PORT": str(wl.port)}

    def servers(self):
        return [i for i in self.cloud.instances() if i.get("platform") == "hetzner"]

    def server_type(self, inst):
        return inst.get("type")

    def server_domain(self, inst):
        return (inst.get("zone") or "").split("-")[0]

    def load_balancers(self):
        """[(address, port, {server ids targeted}, labels)] of every load balancer."""
        st, _, body = self.cloud.api("GET", "/v1/load_balancers",
                                     headers={"Authorization": "Bearer " + HETZNER_TOKEN})
        if st != 200:
            raise RuntimeError("GET /v1/load_balancers: %s %s" % (st, body))
        out = []
        for lb in body["load_balancers"]:
            ids = set()
            for tg in lb["targets"]:
                if tg["type"] == "server":
                    ids.add(str(tg["server"]["id"]))
                for sub in tg.get("targets") or []:
                    ids.add(str(sub["server"]["id"]))
            ports = [s["listen_port"] for s in lb["services"]]
            out.append((lb["public_net"]["ipv4"]["ip"], ports[0] if ports else None, ids, lb["labels"]))
        return out


    def leftovers(self):
        """What of the load balancer is left after the cluster's deletion: {kind: count}."""
        return {"load_balancers": len(self.load_balancers())}


class OpenStack:
    """Octavia, as on most OpenStack clouds (the fake's catalog has it: openstack_octavia): a load
    balancer with its VIP on the project's network, a TCP listener on the workload API server's
    port, a pool whose members are every control-plane server, a health monitor, and a Neutron
    floating IP on the VIP's port, 127.0.64.43 (a fake-cloud setting), where the workload API
    server listens. The region's available Nova availability zones are 3 (nova, az-2 and az-3,
    the fake-cloud setting nova_extra_zones): KCP puts one machine in each. The endpoint of a
    cloud without Octavia, a floating IP on a control-plane server, is covered by
    test-controller-cluster-lb.py (test_openstack_floating_ip, and the clusterctl move cases)."""
    name = "openstack"
    flavor = "openstack-ha"
    prefix = "openstack:///"
    domains = ["az-2", "az-3", "nova"]
    type_field = "flavor"
    new_type = "m1.large"
    lb_host = "127.0.64.43"
    listen = lb_host + ":6443"  # the template's listener port, 6443

    def __init__(self, cloud, tmp):
        self.cloud = cloud
        self.conf = os.path.join(tmp, "openstack.conf")
        with open(self.conf, "w") as f:
            f.write("[Global]\nauth-url = %s/v3\nusername = %s\npassword = \"%s\"\nuser-domain-name = %s\n"
                    "project-name = %s\nproject-domain-name = %s\nregion = RegionOne\n"
                    % (cloud.url, OPENSTACK_USER["name"], OPENSTACK_USER["password"], OPENSTACK_USER["domain"],
                       OPENSTACK_USER["project"], OPENSTACK_USER["domain"]))
        os.chmod(self.conf, 0o600)
        cloud.settings(build_seconds=0.3, action_seconds=0.2, neutron_floating_ip_address=self.lb_host,
                       openstack_octavia=True, octavia_pending_seconds=0.2, nova_extra_zones=["az-3"])

    def init_env(self):
        return {"CLOUDNODE_PROVIDER": "openstack"}

    def cloud_config_ok(self, text):
        """The published cloud config: Keystone and the project, not the user and password."""
        return ("auth-url = %s/v3" % self.cloud.url) in text and "project-name = " in text and \
            OPENSTACK_USER["password"] not in text and "username" not in text

    def generate_env(self, wl):
        net = next(n["id"] for n in neutron(self.cloud, "GET", "/networks")["networks"] if not n["router:external"])
        with open(self.conf, "rb") as f:
            conf = base64.b64encode(f.read()).decode()
        return {"OPENSTACK_CLOUD_CONF_B64": conf, "OPENSTACK_NETWORK_ID": net, "OPENSTACK_SSH_KEY_NAME": "ops"}

    def servers(self):
        return [i for i in self.cloud.instances() if i.get("platform") == "openstack"]

    def server_type(self, inst):
        return inst.get("type")

    def server_domain(self, inst):
        return inst.get("zone")

    targets = "every one"

    @staticmethod
    def targets_ok(ids, cps):
        return ids == cps

    def octavia(self, table, lb=None):
        """Octavia's objects of table (under lb's id: those of that load balancer)."""
        objs = neutron(self.cloud, "GET", "/" + table, base=OCTAVIA)[table.split("/")[-1]]
        return [o for o in objs if lb is None or lb in [x["id"] for x in o.get("loadbalancers") or []]]

    def load_balancers(self):
        """Octavia's load balancers: the floating IP on the VIP's port, the listener's port, the
        servers whose addresses are the members, the uid of the description."""
        fips = {f.get("port_id"): f["floating_ip_address"]
                for f in neutron(self.cloud, "GET", "/floatingips")["floatingips"]}
        by_addr = {i.get(k): i["id"] for i in self.servers() for k in ("private_ipv4", "ipv6") if i.get(k)}
        out = []
        for lb in self.octavia("loadbalancers"):
            ports = [li["protocol_port"] for li in self.octavia("listeners", lb["id"])]
            ids = set()
            for pool in self.octavia("pools", lb["id"]):
                ids |= {by_addr.get(m["address"], m["address"]) for m in self.octavia("pools/%s/members" % pool["id"])}
            desc = lb.get("description") or ""
            uid = desc[len(LB_DESCRIPTION):] if desc.startswith(LB_DESCRIPTION) else None
            out.append((fips.get(lb["vip_port_id"]), ports[0] if ports else None, ids, {"cloudnode.io/cluster-uid": uid}))
        return out

    def leftovers(self):
        """What of the load balancer is left after the cluster's deletion: {kind: count}."""
        out = {t: len(self.octavia(t)) for t in ("loadbalancers", "listeners", "pools", "healthmonitors")}
        out["members"] = sum(len(self.octavia("pools/%s/members" % p["id"])) for p in self.octavia("pools"))
        out["floatingips"] = len(neutron(self.cloud, "GET", "/floatingips")["floatingips"])
        return out


class Kubelets:
    """What each server's kubelet (and, on a control-plane server, kubeadm) does on boot; see the
    module's docstring. Runs until stop is set. And what KCP reads through a port-forward to each
    kube-apiserver Pod (which needs a kubelet): the expiry of the API server's certificate, the
    workload API server's real one, written where KCP keeps it (the annotation on the machine's
    KubeadmConfig, in the management cluster self.mgmt), so that KCP does not dial the Node."""

    def __init__(self, wl, provider, mgmt):
        self.wl, self.provider, self.mgmt, self.done = wl, provider, mgmt, set()
        self.stop = threading.Event()
        self.errors = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        not_after = ssl._ssl._test_decode_cert(os.path.join(wl.state_dir, "apiserver.crt"))["notAfter"]
        self.expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(not_after, "%b %d %H:%M:%S %Y %Z"))

    def run(self):
        while not self.stop.wait(0.3):
            try:
                for inst in self.provider.servers():
                    if inst["name"] not in self.done and inst.get("status") == "running":
                        if self.boot(inst):
                            self.done.add(inst["name"])
                for kc in items(self.mgmt, "/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/%s/kubeadmconfigs" % NS):
                    if is_cp(kc) and EXPIRY not in (kc["metadata"].get("annotations") or {}):
                        self.mgmt.api("PATCH", "/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/%s/kubeadmconfigs/%s"
                                      % (NS, kc["metadata"]["name"]), {"metadata": {"annotations": {EXPIRY: self.expiry}}},
                                      "application/merge-patch+json")
            except (OSError, KeyError, RuntimeError) as e:
                self.errors.append(str(e))

    def boot(self, inst):
        """Whether every step is done (each is idempotent: 409 is done)."""
        name = inst["name"]
        tok = self.wl.token_for("system:node:" + name, ["system:nodes"])
        st, node = self.wl.api("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}}, token=tok)
        if st == 409:
            st, node = self.wl.api("GET", "/api/v1/nodes/" + name)
        if st not in (200, 201):
            return False
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        st, _ = self.wl.api("PATCH", "/api/v1/nodes/%s/status" % name, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": now, "lastTransitionTime": now}] + [
            {"type": t, "status": "False", "reason": "KubeletHas" + r, "lastHeartbeatTime": now, "lastTransitionTime": now}
            for t, r in (("MemoryPressure", "SufficientMemory"), ("DiskPressure", "NoDiskPressure"),
                         ("PIDPressure", "SufficientPID"))]}}, "application/strategic-merge-patch+json", token=tok)
        if st != 200:
            return False
        ud = inst.get("user_data") or ""
        if CP_OF not in (inst.get("labels") or {}) and "kubeadm init" not in ud and "controlPlane:" not in ud:
            return True
        # kubeadm init uploads its ClusterConfiguration (KCP takes the cluster for initialized
        # once it is there) and marks the node a control-plane node; kubeadm join --control-plane
        # marks it too.
        if "kubeadm init" in ud and not self.upload_config(ud):
            return False
        st, _ = self.wl.api("PATCH", "/api/v1/nodes/" + name, {"metadata": {"labels": {ROLE_CP: ""}}},
                            "application/merge-patch+json")
        if st != 200:
            return False
        for comp in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            if not self.mirror_pod(comp, node, tok):
                return False
        return True

    def upload_config(self, ud):
        """The kubeadm-config ConfigMap: the ClusterConfiguration of the kubeadm configuration file
        the bootstrap data writes."""
        doc = yaml.safe_load(ud)
        conf = next((f["content"] for f in doc.get("write_files") or [] if f["path"] == "/run/kubeadm/kubeadm.yaml"))
        cc = next(d for d in yaml.safe_load_all(conf) if d and d.get("kind") == "ClusterConfiguration")
        st, _ = self.wl.api("POST", "/api/v1/namespaces/kube-system/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubeadm-config"},
            "data": {"ClusterConfiguration": yaml.safe_dump(cc)}})
        return st in (201, 409)

    def mirror_pod(self, comp, node, tok):
        """The kubelet's mirror Pod of a static Pod, created and reported Running and Ready as the
        node (the NodeRestriction admission plugin allows a node its own mirror Pods)."""
        node_name = node["metadata"]["name"]
        pod_name = "%s-%s" % (comp, node_name)
        st, _ = self.wl.api("POST", "/api/v1/namespaces/kube-system/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "labels": {"component": comp, "tier": "control-plane"},
                         "annotations": {"kubernetes.io/config.mirror": pod_name, "kubernetes.io/config.source": "file"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                              "uid": node["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": node_name, "hostNetwork": True, "priorityClassName": "system-node-critical",
                     "containers": [{"name": comp, "image": "registry.k8s.io/%s:%s" % (comp, K8S)}]}}, token=tok)
        if st not in (201, 409):
            return False
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        st, _ = self.wl.api("PATCH", "/api/v1/namespaces/kube-system/pods/%s/status" % pod_name, {"status": {
            "phase": "Running", "startTime": now,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                           for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": comp, "ready": True, "restartCount": 0, "started": True,
                                   "image": "registry.k8s.io/%s:%s" % (comp, K8S), "imageID": "",
                                   "state": {"running": {"startedAt": now}}}]}},
            "application/merge-patch+json", token=tok)
        return st == 200


class Sampler:
    """Samples the cloud every half second: the largest number of servers and of load balancers
    seen, any two servers of one name at once, and every sample above the current limit."""

    def __init__(self, provider):
        self.provider = provider
        self.limit, self.phase = None, ""
        self.violations, self.duplicates, self.max_lbs, self.samples = [], [], 0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.5):
            try:
                servers = [i for i in self.provider.servers() if i.get("status") != "deleted"]
                lbs = self.provider.load_balancers()
            except (OSError, RuntimeError, FakeCloudError):
                continue
            self.samples += 1
            names = [i["name"] for i in servers]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                self.duplicates.append((self.phase, dup))
            self.max_lbs = max(self.max_lbs, len(lbs))
            if self.limit is not None and len(servers) > self.limit:
                self.violations.append((self.phase, len(servers), self.limit))

    def expect(self, phase, limit):
        self.phase, self.limit = phase, limit

    def check(self, t):
        t.ok(not self.violations and not self.duplicates and self.max_lbs <= 1,
             "%s: never more servers than expected plus the surge, no two of one name, at most one load balancer "
             "(%d samples)" % (self.phase, self.samples),
             realcapi.dump({"over": self.violations[:10], "duplicates": self.duplicates[:10], "max_lbs": self.max_lbs}))
        self.violations, self.duplicates, self.max_lbs = [], [], 0


def machines(k):
    return items(k, CAPI + "machines")


def is_cp(m):
    return CP_LABEL in (m["metadata"].get("labels") or {})


def spread(cps):
    """The failure domains of the control-plane machines, if they are spread evenly (the counts
    differ by one at most): KCP's placement."""
    fds = [m["spec"].get("failureDomain") for m in cps]
    counts = [fds.count(fd) for fd in set(fds)]
    return sorted(set(fds)) if counts and max(counts) - min(counts) <= 1 else fds


def running(k):
    return [m for m in machines(k) if (m.get("status") or {}).get("phase") == "Running"
            and not m["metadata"].get("deletionTimestamp")]


def main(provider="hetzner"):
    t = Tap()
    bindir = realcapi.bins_or_skip(t)
    cls = {"hetzner": Hetzner, "openstack": OpenStack}[provider]

    def run(tmp, mgmt, wl, cloud, procs):
        scenario(t, tmp, bindir, mgmt, wl, cls(cloud, tmp), procs)
    realcapi.run_clusters(t, "cn-realcapi-ha-%s-" % provider, INIT_RBAC, run, cls.listen)
    t.done()


def ca_secret(mgmt, name, crt, key=None):
    data = {"tls.crt": base64.b64encode(crt).decode()}
    if key is not None:
        data["tls.key"] = base64.b64encode(key).decode()
    st, body = mgmt.api("POST", "/api/v1/namespaces/%s/secrets" % NS, {
        "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "c1"}}, "data": data})
    return st


def read(path):
    with open(path, "rb") as f:
        return f.read()


def scenario(t, tmp, bindir, mgmt, wl, p, procs):
    repo = realcapi.Repository(tmp, bindir)
    conf_b64 = base64.b64encode(read(p.conf)).decode()
    if not realcapi.install(t, tmp, repo, mgmt, conf_b64, procs, "mgmt", NS, p.init_env()):
        return
    init = subprocess.Popen(
        [build("initializer", "cloudnode-initializer"), "--kubeconfig=" + wl.kubeconfig_for(CLUSTER_SA),
         "--cloud-provider=" + p.name, "--cloud-config=" + p.conf, "--leader-elect=false", "--controllers=cloud-node",
         "--bind-address=127.0.0.1", "--port=0", "--concurrent-node-syncs=2"],
        stdout=open(os.path.join(tmp, "initializer.log"), "ab"), stderr=subprocess.STDOUT,
        env=dict(os.environ, HTTP_PROXY="", HTTPS_PROXY="", NO_PROXY=""))
    procs.append(init)
    kubelets = Kubelets(wl, p, mgmt)
    kubelets.thread.start()
    sampler = Sampler(p)
    sampler.thread.start()

    def log_tail(k=mgmt):
        out = []
        for path in sorted(glob.glob(os.path.join(tmp, "providers-*", "*.log")) +
                           [os.path.join(tmp, "initializer.log")]):
            out.append("== %s\n%s" % (path, open(path, errors="replace").read()[-2500:]))
        out.append("== machines\n%s" % realcapi.dump([(m["metadata"]["name"], (m.get("status") or {}).get("phase"),
                                                      m["spec"].get("failureDomain")) for m in machines(k)]))
        out.append("== kubelets: %s" % kubelets.errors[-5:])
        out.append("== KubeadmControlPlane status\n%s" % realcapi.dump(
            (k.api("GET", KCP + "kubeadmcontrolplanes/c1-control-plane")[1] or {}).get("status")))
        out.append("== Machine conditions\n%s" % realcapi.dump(
            [(m["metadata"]["name"], [(c["type"], c["status"], c.get("message")) for c in
                                      (m.get("status") or {}).get("conditions") or [] if c["status"] != "True"])
             for m in machines(k)]))
        return "\n".join(out)

    # --- the user's Secrets and clusterctl generate cluster --------------------------------------
    ca = (read(os.path.join(wl.state_dir, "ca.crt")), read(os.path.join(wl.state_dir, "ca.key")))
    etcd_dir = os.path.join(tmp, "etcd-pki")
    os.makedirs(etcd_dir)
    etcd_ca = certs.ensure_ca(etcd_dir)
    client = certs.issue(etcd_dir, "apiserver-etcd-client", etcd_ca, "kube-apiserver-etcd-client")
    t.eq([ca_secret(mgmt, "c1-ca", *ca), ca_secret(mgmt, "c1-etcd", read(etcd_ca[0])),
          ca_secret(mgmt, "c1-apiserver-etcd-client", read(client[0]), read(client[1]))], [201] * 3,
         "the user's Secrets: the workload cluster's CA, the external etcd's CA and the API servers' etcd client "
         "certificate")
    r = repo.clusterctl(mgmt.kubeconfig, "generate", "cluster", "c1", "--infrastructure",
                        "cloudnode:" + realcapi.CLOUDNODE_VERSION, "--flavor", p.flavor, "--kubernetes-version", K8S,
                        "--control-plane-machine-count", "3", "--worker-machine-count", "3", "--target-namespace", NS,
                        env=dict({"ETCD_ENDPOINT": "https://etcd.c1.example:2379"}, **p.generate_env(wl)), check=False)
    t.ok(r.returncode == 0, "clusterctl generate cluster --flavor %s renders the template" % p.flavor, r.stderr[-3000:])
    if r.returncode:
        return
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    kcp_doc = next((d for d in docs if d["kind"] == "KubeadmControlPlane"), {})
    t.eq(([d["kind"] for d in docs if "controlPlaneEndpoint" in d.get("spec", {})],
          kcp_doc.get("spec", {}).get("replicas"),
          sorted(((kcp_doc.get("spec", {}).get("kubeadmConfigSpec") or {}).get("clusterConfiguration", {})
                  .get("etcd") or {}).keys())),
         ([], 3, ["external"]),
         "the template sets no control-plane endpoint; a KubeadmControlPlane of 3 with external etcd")
    sampler.expect("creation", 6)
    a = subprocess.run(["kubectl", "--kubeconfig", mgmt.kubeconfig, "apply", "-f", "-"], input=r.stdout,
                       capture_output=True, text=True)
    t.ok(a.returncode == 0, "kubectl apply of the generated cluster (through the providers' webhooks)",
         a.stdout + a.stderr)

    # --- the endpoint is the load balancer's ------------------------------------------------------
    def endpoint(path, k=mgmt):
        st, o = k.api("GET", path)
        ep = (o or {}).get("spec", {}).get("controlPlaneEndpoint") or {}
        return (ep.get("host"), ep.get("port")) if ep.get("host") else None
    ok = wait_for(lambda: endpoint(CAPI + "clusters/c1") and len(p.load_balancers()) == 1, 90, 1)
    lbs = p.load_balancers()
    t.ok(ok, "cloudnode creates one load balancer; the Cluster gets a control-plane endpoint", None if ok else log_tail())
    if not ok:
        return
    lb_addr = (lbs[0][0], lbs[0][1])
    t.eq((endpoint(INFRA + "cloudnodeclusters/c1"), endpoint(CAPI + "clusters/c1"), lb_addr),
         ((p.lb_host, wl.port),) * 3,
         "the CloudnodeCluster's and the Cluster's endpoint are the load balancer's address and port, which reach "
         "the workload API server")
    st, cnc = mgmt.api("GET", INFRA + "cloudnodeclusters/c1")
    writers = sorted(f["manager"] for f in cnc["metadata"].get("managedFields") or []
                     if "f:controlPlaneEndpoint" in (f.get("fieldsV1") or {}).get("f:spec", {}))
    t.ok(writers and not any("kubectl" in w for w in writers),
         "the CloudnodeCluster's endpoint was written by the provider, not by the user's kubectl apply (%s)"
         % ", ".join(writers), realcapi.dump(cnc["metadata"].get("managedFields")))
    t.eq(lbs[0][3].get("cloudnode.io/cluster-uid"), cnc["metadata"]["uid"],
         "the load balancer carries the CloudnodeCluster's uid")

    def lb_targets_match(k):
        lbs = p.load_balancers()
        want = {m["spec"].get("providerID", "")[len(p.prefix):] for m in machines(k) if is_cp(m)}
        return len(lbs) == 1 and p.targets_ok(lbs[0][2], want) and "" not in want, \
            ([(a, port, sorted(ids), labels) for a, port, ids, labels in lbs], sorted(want))

    def settled(k, cps, workers):
        ms = running(k)
        if len(machines(k)) != cps + workers or len(ms) != cps + workers:
            return False
        if sum(1 for m in ms if is_cp(m)) != cps or len(p.servers()) != cps + workers:
            return False
        st, kcp = k.api("GET", KCP + "kubeadmcontrolplanes/c1-control-plane")
        return st == 200 and (kcp.get("status") or {}).get("upToDateReplicas") == cps and \
            (kcp.get("status") or {}).get("readyReplicas") == cps

    ok = wait_for(lambda: settled(mgmt, 3, 3), 150, 1)
    t.ok(ok, "3 control-plane Machines (KCP ready) and 3 workers reach Running", None if ok else log_tail())
    if not ok:
        return
    sampler.check(t)
    st, kubeconfig = mgmt.api("GET", "/api/v1/namespaces/%s/secrets/c1-kubeconfig" % NS)
    server = yaml.safe_load(base64.b64decode(kubeconfig["data"]["value"]))["clusters"][0]["cluster"]["server"]
    t.eq(server, "https://%s:%d" % (p.lb_host, wl.port), "KCP's kubeconfig of the workload cluster names the load balancer")
    servers = {p.prefix + i["id"]: i for i in p.servers()}
    cps = [m for m in running(mgmt) if is_cp(m)]
    t.eq(spread(cps), p.domains, "KCP spreads the control plane evenly over the failure domains")
    t.eq([p.server_domain(servers.get(m["spec"]["providerID"], {})) for m in cps],
         [m["spec"].get("failureDomain") for m in cps], "each control-plane server is in its Machine's failure domain")
    ok, why = lb_targets_match(mgmt)
    t.ok(ok, "the load balancer's targets: %s of the 3 control-plane servers" % p.targets, realcapi.dump(why))

    # --- the cloud config in the workload cluster ----------------------------------------------
    def workload_cloud_config():
        st, cm = wl.api("GET", "/api/v1/namespaces/cloudnode/configmaps/cloud-provider-config")
        return (cm.get("data") or {}).get("config") if st == 200 else None
    conf_text = wait_for(workload_cloud_config, 60, 1)
    t.ok(conf_text and p.cloud_config_ok(conf_text),
         "Cluster API's ClusterResourceSet put the cloud config cloudnode published (without the credential) into "
         "the workload cluster as cloudnode/cloud-provider-config", conf_text or log_tail())
    published = mgmt.api("GET", "/api/v1/namespaces/%s/secrets/c1-cloudnode-cloud-config" % NS)[1].get("data")

    # --- scale ---------------------------------------------------------------------------------
    for workers, limit in ((4, 7), (2, 7)):
        sampler.expect("workers to %d" % workers, limit)
        st, _ = mgmt.api("PATCH", CAPI + "machinedeployments/c1-md-0", {"spec": {"replicas": workers}},
                         "application/merge-patch+json")
        ok = st == 200 and wait_for(lambda: settled(mgmt, 3, workers), 120, 1)
        t.ok(ok, "the MachineDeployment scaled to %d: %d workers Running on as many servers" % (workers, workers),
             None if ok else log_tail())
        sampler.check(t)
    for cps_n in (1, 3):
        sampler.expect("control plane to %d" % cps_n, 5)
        st, _ = mgmt.api("PATCH", KCP + "kubeadmcontrolplanes/c1-control-plane", {"spec": {"replicas": cps_n}},
                         "application/merge-patch+json")
        ok = st == 200 and wait_for(lambda: settled(mgmt, cps_n, 2), 180, 1)
        t.ok(ok, "the KubeadmControlPlane scaled to %d" % cps_n, None if ok else log_tail())
        sampler.check(t)
        ok, why = wait_for(lambda: lb_targets_match(mgmt)[0], 30, 1), lb_targets_match(mgmt)[1]
        t.ok(ok, "the load balancer's targets: %s of the %d control-plane servers" % (p.targets, cps_n), realcapi.dump(why))
    cps = [m for m in running(mgmt) if is_cp(m)]
    t.eq(spread(cps), p.domains, "scaled back up, the control plane is again spread over the failure domains")

    # --- rolling template change ---------------------------------------------------------------
    before = {i["id"] for i in p.servers()}
    for tmpl in ("c1-control-plane", "c1-md-0"):
        st, o = mgmt.api("GET", INFRA + "cloudnodemachinetemplates/" + tmpl)
        spec = o["spec"]
        spec["template"]["spec"][p.name][p.type_field] = p.new_type
        st, _ = mgmt.api("POST", INFRA + "cloudnodemachinetemplates", {
            "apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": {"name": tmpl + "-v2"}, "spec": spec})
        t.eq(st, 201, "a new CloudnodeMachineTemplate %s-v2 (%s %s)" % (tmpl, p.type_field, p.new_type))
    # KCP and the MachineDeployment each surge by one machine.
    sampler.expect("rolling template change", 7)
    st1, _ = mgmt.api("PATCH", KCP + "kubeadmcontrolplanes/c1-control-plane", {"spec": {"machineTemplate": {"spec": {
        "infrastructureRef": {"name": "c1-control-plane-v2"}}}}}, "application/merge-patch+json")
    st2, _ = mgmt.api("PATCH", CAPI + "machinedeployments/c1-md-0", {"spec": {"template": {"spec": {
        "infrastructureRef": {"name": "c1-md-0-v2"}}}}}, "application/merge-patch+json")
    t.eq((st1, st2), (200, 200), "the KubeadmControlPlane and the MachineDeployment name the new templates")

    def rolled():
        if not settled(mgmt, 3, 2):
            return False
        return all(p.server_type(i) == p.new_type and i["id"] not in before for i in p.servers())
    ok = wait_for(rolled, 360, 2)
    t.ok(ok, "every machine replaced: 3 control-plane and 2 worker servers of type %s, none of the old left" % p.new_type,
         None if ok else log_tail())
    sampler.check(t)
    ok, why = lb_targets_match(mgmt)
    t.ok(ok, "the load balancer's targets: %s of the 3 new control-plane servers" % p.targets, realcapi.dump(why))
    cps = [m for m in running(mgmt) if is_cp(m)]
    t.eq(spread(cps), p.domains, "the new control plane is again spread over the failure domains")

    # --- clusterctl move -----------------------------------------------------------------------
    with realkube.RealKube(os.path.join(tmp, "mgmt2-kube")) as mgmt2:
        if not realcapi.install(t, tmp, repo, mgmt2, conf_b64, procs, "mgmt2", NS, p.init_env()):
            return
        kubelets.mgmt = mgmt2
        sampler.expect("clusterctl move", 5)
        before = sorted(i["id"] for i in p.servers())
        r = repo.clusterctl(mgmt.kubeconfig, "move", "--to-kubeconfig", mgmt2.kubeconfig, "--namespace", NS,
                            check=False)
        t.ok(r.returncode == 0, "clusterctl move to the second management cluster", r.stdout[-3000:] + r.stderr[-3000:])
        t.eq((items(mgmt, CAPI + "clusters"), len(items(mgmt, INFRA + "cloudnodemachines")),
              len(items(mgmt, KCP + "kubeadmcontrolplanes"))), ([], 0, 0),
             "nothing of the cluster is left in the first management cluster")

        def adopted():
            if not settled(mgmt2, 3, 2):
                return False
            st, cnc = mgmt2.api("GET", INFRA + "cloudnodeclusters/c1")
            lbs = p.load_balancers()
            return st == 200 and len(lbs) == 1 and lbs[0][3].get("cloudnode.io/cluster-uid") == cnc["metadata"]["uid"]
        ok = wait_for(adopted, 120, 1)
        t.ok(ok, "in the second, the cluster is reconciled: its Machines Running, KCP ready, the load balancer "
             "relabeled with the new CloudnodeCluster's uid", None if ok else log_tail(mgmt2))
        t.eq(sorted(i["id"] for i in p.servers()), before, "the same five servers: none created, none deleted")
        ok, why = lb_targets_match(mgmt2)
        t.ok(ok, "the load balancer's targets are still %s of the 3 control-plane servers" % p.targets, realcapi.dump(why))
        t.eq((endpoint(INFRA + "cloudnodeclusters/c1", mgmt2), endpoint(CAPI + "clusters/c1", mgmt2)),
             ((p.lb_host, wl.port),) * 2,
             "the moved Cluster keeps the load balancer's endpoint")
        st, moved = mgmt2.api("GET", "/api/v1/namespaces/%s/secrets/c1-cloudnode-cloud-config" % NS)
        t.ok(st == 200 and moved.get("data") == published and workload_cloud_config() == conf_text,
             "the published cloud config Secret is the same in the second management cluster, the workload "
             "cluster's ConfigMap unchanged", realcapi.dump((st, moved.get("data"), published)))
        sampler.check(t)

        # --- delete ------------------------------------------------------------------------------
        sampler.expect("deletion", 5)
        st, _ = mgmt2.api("DELETE", CAPI + "clusters/c1")
        t.eq(st, 200, "the Cluster deleted")
        ok = wait_for(lambda: mgmt2.api("GET", CAPI + "clusters/c1")[0] == 404, 180, 1)
        t.ok(ok, "the Cluster goes", None if ok else log_tail(mgmt2))
        t.eq((len(machines(mgmt2)), len(items(mgmt2, INFRA + "cloudnodemachines")),
              len(items(mgmt2, INFRA + "cloudnodeclusters")), len(p.servers())),
             (0, 0, 0, 0), "no Machine, CloudnodeMachine, CloudnodeCluster or server is left")
        left = p.leftovers()
        t.eq(left, dict.fromkeys(left, 0), "nothing of the load balancer is left: " + ", ".join(sorted(left)))
        sampler.check(t)
    sampler.stop.set()
    kubelets.stop.set()


if __name__ == "__main__":
    main()
