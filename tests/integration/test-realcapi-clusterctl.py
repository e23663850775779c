#!/usr/bin/env python3
"""The real Cluster API drives cloudnode's infrastructure provider: Cluster API v1.11.7's core
manager, kubeadm bootstrap and control-plane managers and clusterctl (tests/realcapi/build.sh),
two real kube-apiservers (the management cluster, and the workload cluster whose API server is
the Cluster's control-plane endpoint), the Hetzner API of tests/fake-cloud.

- `clusterctl init --infrastructure cloudnode` (and the core, kubeadm bootstrap and kubeadm
  control-plane providers) from a local repository named in clusterctl's `providers:`
  configuration; cert-manager from a local file through its `cert-manager:` configuration.
- The providers' Deployments run as processes (tests/pylib/realcapi.py: their args, env,
  ServiceAccount tokens, Secret volumes; webhooks on loopback), cloudnode-controller among them.
- The topology flavor (templates/cluster-template-topology.yaml) and the ClusterClass it names:
  rendered by clusterctl, created, the ClusterClass reconciled by Cluster API's controller and the
  Cluster accepted by its topology webhook in a dry run.
- The OpenStack flavor (templates/cluster-template-openstack.yaml) rendered by clusterctl and
  accepted by the management cluster in a server-side dry run, its credentials Secret labelled
  for clusterctl move.
- `clusterctl generate cluster` from templates/cluster-template.yaml, applied with kubectl: the
  Cluster's CloudnodeCluster is provisioned; the control-plane Machine's KubeadmConfig (init) and
  the MachineDeployment's KubeadmConfigTemplate give each Machine its bootstrap data, which
  reaches the server cloudnode creates; each server registers a Node in the workload cluster
  (what its kubelet does, by name, with the uninitialized taint) and cloudnode-initializer in
  cluster mode initializes it (providerID, addresses); the real Machine controller finds the
  Node by providerID and the Machines reach Running.
- The MachineDeployment scaled from 2 to 3.
- `clusterctl move` to a second management cluster (installed the same way): nothing is left in
  the first; in the second the Cluster is unpaused, the Machines are Running, the second
  controller adopts the CloudnodeMachines (relabels each server with the new uid) and no server
  is created or deleted.
- The Cluster deleted in the second management cluster: every Machine, CloudnodeMachine and
  server goes.

The workload cluster's CA is the Cluster's <name>-ca Secret (a CA the user brings, which Cluster
API then uses for the workload kubeconfig and the kubeadm join data). The control plane is a
stand-alone Machine, not a KubeadmControlPlane: KCP judges its Machines by the etcd and
kube-apiserver static pods kubeadm runs on them (it reads etcd members through the Pods of the
workload cluster), which needs a kubelet and kubeadm on the server; see docs/design.md.

Skips (plan 1..0) where Go or the Go module proxy is missing (an older Go runs the pinned
go1.24 toolchain). Its cost, once the
binaries are cached: 90 to 110 s of wall time on a loaded 2-core machine."""
import base64
import glob
import os
import subprocess
import sys
import threading

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build, wait_for  # noqa: E402
from cninit import CLUSTER_SA, RBAC as INIT_RBAC, TAINT, hetzner_conf  # noqa: E402
from fakecloud import HETZNER_TOKEN  # noqa: E402
import realcapi  # noqa: E402
import realkube  # noqa: E402

NS = "default"
CAPI = "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/" % NS
INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/%s/" % NS
UID_LABEL = "cloudnode.io/machine-uid"


def check_openstack_flavor(t, repo, mgmt):
    """templates/cluster-template-openstack.yaml: rendered by clusterctl (--flavor openstack), its
    objects accepted by the management cluster's API server and the providers' webhooks (a
    server-side dry run: the CRDs' schemas and CEL rules judge them, nothing is created), and its
    credentials Secret, which every cloudnode object names, labelled for clusterctl move."""
    conf_b64 = base64.b64encode(b"[Global]\nauth-url = https://keystone.example/v3\n").decode()
    r = repo.clusterctl(mgmt.kubeconfig, "generate", "cluster", "c2", "--infrastructure",
                        "cloudnode:" + realcapi.CLOUDNODE_VERSION, "--flavor", "openstack",
                        "--kubernetes-version", "v1.32.13", "--worker-machine-count", "2", "--target-namespace", NS,
                        env={"CONTROL_PLANE_ENDPOINT_HOST": "192.0.2.10", "OPENSTACK_CLOUD_CONF_B64": conf_b64,
                             "OPENSTACK_NETWORK_ID": "7b1c5e2a-55f4-4c41-9d0a-3f1b6c2d9e10",
                             "OPENSTACK_SSH_KEY_NAME": "ops"},
                        check=False)
    t.ok(r.returncode == 0, "clusterctl generate cluster --flavor openstack renders the template", r.stderr[-3000:])
    if r.returncode:
        return
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    t.eq(kinds, sorted(["Cluster", "CloudnodeCluster", "Machine", "KubeadmConfig", "CloudnodeMachine",
                        "MachineDeployment", "KubeadmConfigTemplate", "CloudnodeMachineTemplate", "Secret",
                        "ClusterResourceSet"]),
         "the OpenStack flavor's objects")
    crs = next((d for d in docs if d["kind"] == "ClusterResourceSet"), {}).get("spec", {})
    t.eq((crs.get("clusterSelector"), crs.get("resources")),
         ({"matchLabels": {"cluster.x-k8s.io/cluster-name": "c2"}},
          [{"kind": "Secret", "name": "c2-cloudnode-cloud-config"}]),
         "its ClusterResourceSet applies the cloud config Secret the controller publishes for c2")
    secret = next((d for d in docs if d["kind"] == "Secret"), {})
    t.ok("clusterctl.cluster.x-k8s.io/move" in secret.get("metadata", {}).get("labels", {}),
         "its credentials Secret is labelled for clusterctl move")
    t.eq(base64.b64decode(secret.get("data", {}).get("cloud.conf", "")).decode(errors="replace"),
         base64.b64decode(conf_b64).decode(), "and holds the cloud.conf given")
    specs = [d["spec"] for d in docs if d["kind"] in ("CloudnodeCluster", "CloudnodeMachine")] + \
        [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "CloudnodeMachineTemplate"]
    t.eq(sorted({s.get("credentials", {}).get("secretRef", {}).get("name") for s in specs}),
         [secret.get("metadata", {}).get("name")], "every cloudnode object names that Secret")
    a = subprocess.run(["kubectl", "--kubeconfig", mgmt.kubeconfig, "apply", "--dry-run=server", "-f", "-"],
                       input=r.stdout, capture_output=True, text=True)
    t.ok(a.returncode == 0, "the management cluster accepts every object of the OpenStack flavor (dry run)",
         a.stdout + a.stderr)


def check_topology_flavor(t, repo, mgmt):
    """templates/cluster-template-topology.yaml with the ClusterClass it names
    (templates/clusterclass-cloudnode-hetzner.yaml), which clusterctl adds: rendered, the ClusterClass
    and its templates (a CloudnodeClusterTemplate, a KubeadmControlPlaneTemplate, the
    CloudnodeMachineTemplates) created, the ClusterClass reconciled by Cluster API's own controller
    (every template it names found), and the Cluster with its topology accepted in a server-side
    dry run by the topology webhook, which checks it against the ClusterClass."""
    r = repo.clusterctl(mgmt.kubeconfig, "generate", "cluster", "c3", "--infrastructure",
                        "cloudnode:" + realcapi.CLOUDNODE_VERSION, "--flavor", "topology",
                        "--kubernetes-version", "v1.32.13", "--control-plane-machine-count", "3",
                        "--worker-machine-count", "3", "--target-namespace", NS, check=False)
    t.ok(r.returncode == 0, "clusterctl generate cluster --flavor topology renders the template and its ClusterClass",
         r.stderr[-3000:])
    if r.returncode:
        return
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    t.eq(sorted(d["kind"] for d in docs),
         sorted(["Cluster", "ClusterClass", "CloudnodeClusterTemplate", "KubeadmControlPlaneTemplate",
                 "CloudnodeMachineTemplate", "CloudnodeMachineTemplate", "KubeadmConfigTemplate"]),
         "the topology flavor's objects: the Cluster and the ClusterClass with its templates")
    cluster = [d for d in docs if d["kind"] == "Cluster"]
    rest = [d for d in docs if d["kind"] != "Cluster"]
    a = subprocess.run(["kubectl", "--kubeconfig", mgmt.kubeconfig, "apply", "-f", "-"],
                       input=yaml.safe_dump_all(rest), capture_output=True, text=True)
    t.ok(a.returncode == 0, "the management cluster accepts the ClusterClass and its templates", a.stdout + a.stderr)

    def reconciled():
        st, cc = mgmt.api("GET", CAPI + "clusterclasses/cloudnode-hetzner")
        conds = {c["type"]: c for c in ((cc or {}).get("status") or {}).get("conditions") or []}
        ok = conds.get("RefVersionsUpToDate", {}).get("status") == "True" and \
            conds.get("VariablesReady", {}).get("status") == "True"
        return cc if ok else None
    cc = wait_for(reconciled, 60)
    t.ok(cc is not None, "Cluster API's ClusterClass controller finds every template the ClusterClass names",
         (mgmt.api("GET", CAPI + "clusterclasses/cloudnode-hetzner")[1] or {}).get("status"))
    a = subprocess.run(["kubectl", "--kubeconfig", mgmt.kubeconfig, "apply", "--dry-run=server", "-f", "-"],
                       input=yaml.safe_dump_all(cluster), capture_output=True, text=True)
    t.ok(a.returncode == 0, "the topology webhook accepts the Cluster: 3 control-plane machines, a "
         "MachineDeployment of 3 (dry run)", a.stdout + a.stderr)


class Kubelets:
    """What each server's kubelet does on boot: registers its Node (named after the server, with
    the uninitialized taint, as a kubelet with --cloud-provider=external does), as the node."""

    def __init__(self, wl, cloud):
        self.wl, self.cloud, self.done = wl, cloud, set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.3):
            try:
                for inst in self.cloud.instances():
                    name = inst["name"]
                    if name in self.done or inst.get("status") != "running":
                        continue
                    tok = self.wl.token_for("system:node:" + name, ["system:nodes"])
                    st, _ = self.wl.api("POST", "/api/v1/nodes", {
                        "apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                        "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}}, token=tok)
                    if st in (201, 409):
                        self.done.add(name)
            except (OSError, KeyError, RuntimeError):
                pass


def running(mgmt):
    return [m for m in realcapi.items(mgmt, CAPI + "machines") if (m.get("status") or {}).get("phase") == "Running"]


def main():
    t = Tap()
    bindir = realcapi.bins_or_skip(t)

    def run(tmp, mgmt, wl, cloud, procs):
        cloud.settings(build_seconds=0.3, action_seconds=0.2)
        scenario(t, tmp, bindir, mgmt, wl, cloud, procs)
    # Its servers' state and the managers' logs stay for a failed run only.
    realcapi.run_clusters(t, "cn-realcapi-", INIT_RBAC, run)
    t.done()


def scenario(t, tmp, bindir, mgmt, wl, cloud, procs):
    repo = realcapi.Repository(tmp, bindir)
    conf = hetzner_conf(os.path.join(tmp, "hetzner.conf"), cloud.url, HETZNER_TOKEN)
    with open(conf, "rb") as f:
        conf_b64 = base64.b64encode(f.read()).decode()

    if not realcapi.install(t, tmp, repo, mgmt, conf_b64, procs, "mgmt"):
        return
    init = subprocess.Popen(
        [build("initializer", "cloudnode-initializer"), "--kubeconfig=" + wl.kubeconfig_for(CLUSTER_SA),
         "--cloud-provider=hetzner", "--cloud-config=" + conf, "--leader-elect=false", "--controllers=cloud-node",
         "--bind-address=127.0.0.1", "--port=0", "--concurrent-node-syncs=2"],
        stdout=open(os.path.join(tmp, "initializer.log"), "ab"), stderr=subprocess.STDOUT,
        env=dict(os.environ, HTTP_PROXY="", HTTPS_PROXY="", NO_PROXY=""))
    procs.append(init)
    kubelets = Kubelets(wl, cloud)
    kubelets.thread.start()

    # --- clusterctl generate cluster ---------------------------------------------------------
    r = repo.clusterctl(mgmt.kubeconfig, "generate", "cluster", "c1", "--infrastructure",
                        "cloudnode:" + realcapi.CLOUDNODE_VERSION, "--kubernetes-version", "v1.32.13",
                        "--worker-machine-count", "2", "--target-namespace", NS,
                        env={"CONTROL_PLANE_ENDPOINT_HOST": "127.0.0.1", "CONTROL_PLANE_ENDPOINT_PORT": str(wl.port)},
                        check=False)
    t.ok(r.returncode == 0 and "kind: MachineDeployment" in r.stdout,
         "clusterctl generate cluster renders the template", r.stderr[-3000:])
    if r.returncode:
        return
    with open(os.path.join(wl.state_dir, "ca.crt"), "rb") as f:
        ca_crt = f.read()
    with open(os.path.join(wl.state_dir, "ca.key"), "rb") as f:
        ca_key = f.read()
    st, body = mgmt.api("POST", "/api/v1/namespaces/%s/secrets" % NS, {
        "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
        "metadata": {"name": "c1-ca", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "data": {"tls.crt": base64.b64encode(ca_crt).decode(), "tls.key": base64.b64encode(ca_key).decode()}})
    t.eq(st, 201, "the workload cluster's CA as the Cluster's c1-ca Secret")
    a = subprocess.run(["kubectl", "--kubeconfig", mgmt.kubeconfig, "apply", "-f", "-"], input=r.stdout,
                       capture_output=True, text=True)
    t.ok(a.returncode == 0, "kubectl apply of the generated cluster (through the providers' webhooks)",
         a.stdout + a.stderr)
    check_openstack_flavor(t, repo, mgmt)
    check_topology_flavor(t, repo, mgmt)

    # --- the machines come up ----------------------------------------------------------------
    def log_tail(k=mgmt):
        out = []
        for path in sorted(glob.glob(os.path.join(tmp, "providers-*", "capi-system-*.log")) +
                           glob.glob(os.path.join(tmp, "providers-*", "cloudnode-system-*.log")) +
                           [os.path.join(tmp, "initializer.log")]):
            out.append("== %s\n%s" % (path, open(path, errors="replace").read()[-2000:]))
        out.append("== machines\n%s" % realcapi.dump([(m["metadata"]["name"], m.get("status")) for m in
                                                      realcapi.items(k, CAPI + "machines")]))
        return "\n".join(out)

    ok = wait_for(lambda: len(running(mgmt)) == 3, 180, 1)
    t.ok(ok, "the control-plane Machine and both workers reach Running", None if ok else log_tail())
    servers = {"hcloud://%s" % i["id"]: i for i in cloud.instances()}
    nodes = {n["spec"].get("providerID"): n for n in realcapi.items(wl, "/api/v1/nodes")}
    for m in running(mgmt):
        pid = m["spec"].get("providerID")
        node = nodes.get(pid) or {}
        t.ok(pid in servers and node.get("metadata", {}).get("name") == m["status"].get("nodeRef", {}).get("name"),
             "%s: providerID names a server, nodeRef the Node our initializer gave it" % m["metadata"]["name"])
        ud = servers.get(pid, {}).get("user_data") or ""
        cp = "cluster.x-k8s.io/control-plane" in m["metadata"].get("labels", {})
        t.ok(("kubeadm init" if cp else "kubeadm join") in ud,
             "%s: the server's user data is the kubeadm bootstrap data (%s)" % (
                 m["metadata"]["name"], "init" if cp else "join"))
    def workload_cloud_config():
        st, cm = wl.api("GET", "/api/v1/namespaces/cloudnode/configmaps/cloud-provider-config")
        return cm.get("data", {}).get("config") if st == 200 else None
    conf_text = wait_for(workload_cloud_config, 60, 1)
    t.ok(conf_text and ("endpoint = %s/v1" % cloud.url) in conf_text and HETZNER_TOKEN not in conf_text,
         "Cluster API's ClusterResourceSet put the published cloud config (without the token) into the "
         "workload cluster as cloudnode/cloud-provider-config", conf_text or log_tail())
    st, c1 = mgmt.api("GET", CAPI + "clusters/c1")
    t.eq(((c1.get("status") or {}).get("initialization") or {}).get("infrastructureProvisioned"), True,
         "the Cluster's infrastructure is provisioned (CloudnodeCluster)")
    t.eq([(c["status"]) for c in (c1.get("status") or {}).get("conditions", []) if c["type"] == "ControlPlaneInitialized"],
         ["True"], "the Cluster's control plane is initialized")

    # --- scale -------------------------------------------------------------------------------
    st, _ = mgmt.api("PATCH", CAPI + "machinedeployments/c1-md-0", {"spec": {"replicas": 3}},
                     "application/merge-patch+json")
    t.eq(st, 200, "the MachineDeployment scaled to 3")
    ok = wait_for(lambda: len(running(mgmt)) == 4 and len(cloud.instances()) == 4, 120, 1)
    t.ok(ok, "a third worker Machine reaches Running on a fourth server", None if ok else log_tail())

    # --- clusterctl move ----------------------------------------------------------------------
    with realkube.RealKube(os.path.join(tmp, "mgmt2-kube")) as mgmt2:
        if not realcapi.install(t, tmp, repo, mgmt2, conf_b64, procs, "mgmt2"):
            return
        before = sorted(i["id"] for i in cloud.instances())
        r = repo.clusterctl(mgmt.kubeconfig, "move", "--to-kubeconfig", mgmt2.kubeconfig, "--namespace", NS,
                            check=False)
        t.ok(r.returncode == 0, "clusterctl move to the second management cluster", r.stdout[-3000:] + r.stderr[-3000:])
        t.eq((realcapi.items(mgmt, CAPI + "clusters"), len(realcapi.items(mgmt, INFRA + "cloudnodemachines"))), ([], 0),
             "nothing of the cluster is left in the first management cluster")
        ok = wait_for(lambda: len(running(mgmt2)) == 4 and
                      not (realcapi.items(mgmt2, CAPI + "clusters")[0]["spec"].get("paused")), 60, 1)
        t.ok(ok, "in the second, the Cluster is unpaused and its four Machines are Running", None if ok else log_tail(mgmt2))
        def relabeled():
            servers = {"hcloud://%s" % i["id"]: i for i in cloud.instances()}
            cnms = realcapi.items(mgmt2, INFRA + "cloudnodemachines")
            return len(cnms) == 4 and all(
                (servers.get(m["spec"].get("providerID")) or {}).get("labels", {}).get(UID_LABEL) == m["metadata"]["uid"]
                for m in cnms)
        ok = wait_for(relabeled, 60, 1)
        t.ok(ok, "the second controller adopts the moved CloudnodeMachines: each server is relabeled "
             "with its new uid", None if ok else log_tail(mgmt2))
        t.eq(sorted(i["id"] for i in cloud.instances()), before, "the same four servers: none created, none deleted")

        # --- delete ----------------------------------------------------------------------------
        st, _ = mgmt2.api("DELETE", CAPI + "clusters/c1")
        t.eq(st, 200, "the Cluster deleted")
        ok = wait_for(lambda: mgmt2.api("GET", CAPI + "clusters/c1")[0] == 404, 120, 1)
        t.ok(ok, "the Cluster goes", None if ok else log_tail(mgmt2))
        t.eq((len(realcapi.items(mgmt2, CAPI + "machines")), len(realcapi.items(mgmt2, INFRA + "cloudnodemachines")),
              len(realcapi.items(mgmt2, INFRA + "cloudnodeclusters")), len(cloud.instances())), (0, 0, 0, 0),
             "no Machine, CloudnodeMachine, CloudnodeCluster or server is left")
    kubelets.stop.set()


if __name__ == "__main__":
    main()
