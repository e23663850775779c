"""machine-controller's Machine API (cluster.k8s.io/v1alpha1) served by cloudnode-controller, against
tests/fake-kube-apiserver (with manifests/overlays/machine-controller's CRDs and RBAC) and
tests/fake-cloud: the environment the test programs test-controller-mc-machines*.py share.

    with mc_env(tmp) as env:
        ctl = env.controller()
        env.machine("m1", env.hetzner_spec())"""
import base64
import contextlib
import os
import time

import yaml
import cnproc
from cntap import src, wait_for  # noqa: F401 (re-exported)
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER, FakeCloud
from fakekubeclient import kube_server

NS = "kube-system"
MACHINES = "/apis/cluster.k8s.io/v1alpha1/namespaces/%s/machines" % NS
MACHINESETS = "/apis/cluster.k8s.io/v1alpha1/namespaces/%s/machinesets" % NS
MACHINEDEPLOYMENTS = "/apis/cluster.k8s.io/v1alpha1/namespaces/%s/machinedeployments" % NS
SECRETS = "/api/v1/namespaces/%s/secrets" % NS
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps" % NS
PODS = "/api/v1/namespaces/%s/pods"
PDBS = "/apis/policy/v1/namespaces/%s/poddisruptionbudgets"
NODES = "/api/v1/nodes"
MERGE = "application/merge-patch+json"
UID_LABEL = "cloudnode.io/machine-uid"
FINALIZER = "machine-delete-finalizer"
USER = cnproc.USER
OVERLAY = ("manifests", "overlays", "machine-controller")
RBAC = [src("manifests", "controller", "controller-rbac.yaml"), src(*OVERLAY, "controller-mc-rbac.yaml")]
CRDS = ["cluster.k8s.io_machines.yaml", "cluster.k8s.io_machinesets.yaml", "cluster.k8s.io_machinedeployments.yaml"]


def b64(s):
    return base64.b64encode(s.encode()).decode()


@contextlib.contextmanager
def mc_env(tmp, build_seconds=0.3, action_seconds=0.2, **server):
    """server: more arguments of the API server (garbage_collector=True, with the real one)."""
    with kube_server(os.path.join(tmp, "kube"), rbac=RBAC, **server) as k, FakeCloud(os.path.join(tmp, "cloud")) as c:
        c.settings(build_seconds=build_seconds, action_seconds=action_seconds)
        env = Env(k, c, tmp)
        env.setup()
        yield env


class Env:
    def __init__(self, k, c, tmp):
        self.k, self.c, self.tmp = k, c, tmp

    def setup(self):
        k = self.k
        for f in CRDS:
            with open(src(*OVERLAY, f)) as fh:
                code, body = k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))
                assert code in (201, 409), (code, body)
        wait_for(lambda: k.api("GET", MACHINES)[0] == 200)
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cloudnode"}})
        self.secret("machine-controller-hetzner", {"token": HETZNER_TOKEN})
        self.secret("worker-userdata", {"value": "#cloud-config\nhostname: worker\n"})

    def controller(self, extra=(), env=None):
        """cloudnode-controller with the overlay's flag (the Hetzner API at the fake cloud, as an
        operator points HCLOUD_ENDPOINT at a private endpoint)."""
        old = dict(os.environ)
        os.environ.update({"HCLOUD_ENDPOINT": self.c.url + "/v1"}, **(env or {}))
        try:
            return cnproc.Controller(self.k, self.tmp, ["--leader-elect=false", "--operand=false",
                                                        "--machine-controller-namespace", NS] + list(extra),
                                     cloud_provider=None)
        finally:
            os.environ.clear()
            os.environ.update(old)

    def secret(self, name, data, ns=NS):
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "data": {k: b64(v) for k, v in data.items()}}
        code, o = self.k.api("POST", "/api/v1/namespaces/%s/secrets" % ns, body)
        if code == 409:
            code, o = self.k.api("PUT", "/api/v1/namespaces/%s/secrets/%s" % (ns, name), body)
        assert code in (200, 201), (code, o)

    def configmap(self, name, data):
        code, o = self.k.api("POST", CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                                  "data": data})
        assert code in (201, 409), (code, o)

    @staticmethod
    def hetzner_spec(os_name="ubuntu", **extra):
        cps = {"token": {"secretKeyRef": {"namespace": NS, "name": "machine-controller-hetzner", "key": "token"}},
               "serverType": "cx22", "location": "fsn1", "image": "ubuntu-24.04", "labels": {"my": "label"}}
        cps.update(extra)
        return {"cloudProvider": "hetzner", "cloudProviderSpec": cps, "operatingSystem": os_name,
                "operatingSystemSpec": {"distUpgradeOnBoot": False}, "sshPublicKeys": ["ssh-ed25519 AAAA test"]}

    def openstack_secret(self):
        self.secret("machine-controller-openstack", {
            "identityEndpoint": self.c.url + "/v3", "username": OPENSTACK_USER["name"],
            "password": OPENSTACK_USER["password"], "domainName": OPENSTACK_USER["domain"],
            "projectName": OPENSTACK_USER["project"], "region": "RegionOne"})

    @staticmethod
    def openstack_spec():
        def ref(key):
            return {"secretKeyRef": {"namespace": NS, "name": "machine-controller-openstack", "key": key}}
        cps = {k: ref(k) for k in ("identityEndpoint", "username", "password", "domainName", "projectName", "region")}
        cps.update({"image": "ubuntu-24.04", "flavor": "m1.small", "tags": {"team": "infra"},
                    "securityGroups": [{"configMapKeyRef": {"namespace": NS, "name": "machine-controller",
                                                            "key": "securityGroup"}}]})
        return {"cloudProvider": "openstack", "cloudProviderSpec": cps, "operatingSystem": "ubuntu",
                "operatingSystemSpec": {"distUpgradeOnBoot": True}}

    def machine(self, name, spec, annotations=None, **machine_spec):
        code, m = self.k.api("POST", MACHINES, {
            "apiVersion": "cluster.k8s.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "annotations": dict({"cloudnode.io/user-data-secret": "worker-userdata"},
                                                           **(annotations or {}))},
            "spec": dict({"providerSpec": {"value": spec}, "versions": {"kubelet": "1.33.4"}}, **machine_spec)})
        assert code == 201, (code, m)
        return m

    def machineset(self, name, spec, replicas, policy=None):
        body = {"apiVersion": "cluster.k8s.io/v1alpha1", "kind": "MachineSet", "metadata": {"name": name},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"set": name}},
                         "template": {"metadata": {"labels": {"set": name},
                                                   "annotations": {"cloudnode.io/user-data-secret": "worker-userdata"}},
                                      "spec": {"providerSpec": {"value": spec}, "versions": {"kubelet": "1.33.4"}}}}}
        if policy:
            body["spec"]["deletePolicy"] = policy
        code, o = self.k.api("POST", MACHINESETS, body)
        assert code == 201, (code, o)
        return o

    def machinedeployment(self, name, spec, replicas, **extra):
        """A MachineDeployment of replicas Machines of spec (maxSurge 1, maxUnavailable 0); extra:
        more of its spec."""
        body = {"apiVersion": "cluster.k8s.io/v1alpha1", "kind": "MachineDeployment", "metadata": {"name": name},
                "spec": dict({"replicas": replicas, "selector": {"matchLabels": {"md": name}},
                              "strategy": {"type": "RollingUpdate",
                                           "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                              "template": {"metadata": {"labels": {"md": name}, "annotations": {
                                  "cloudnode.io/user-data-secret": "worker-userdata"}},
                                  "spec": {"providerSpec": {"value": spec}, "versions": {"kubelet": "1.33.4"}}}},
                             **extra)}
        code, o = self.k.api("POST", MACHINEDEPLOYMENTS, body)
        assert code == 201, (code, o)
        return o

    def machines_of(self, kind, uid):
        """The live (not deleting) Machines whose controller is the object."""
        code, lst = self.k.api("GET", MACHINES)
        return [m for m in lst.get("items", []) if not m["metadata"].get("deletionTimestamp") and any(
            r.get("kind") == kind and r.get("uid") == uid and r.get("controller")
            for r in m["metadata"].get("ownerReferences", []))]

    def all_machines(self):
        return self.k.api("GET", MACHINES)[1].get("items", [])

    def get(self, name):
        code, o = self.k.api("GET", MACHINES + "/" + name)
        return o if code == 200 else None

    def delete(self, name):
        self.k.api("DELETE", MACHINES + "/" + name)

    def gone(self, name):
        return self.get(name) is None

    def servers(self, uid):
        return [i for i in self.c.instances() if (i.get("labels") or {}).get(UID_LABEL) == uid]

    def provisioned(self, name):
        o = self.get(name)
        return o and o["spec"].get("providerID") and (o.get("status") or {}).get("addresses")

    def kubelet_registers(self, name, ready=True, labels=None, taints=None):
        """What the server's kubelet (and the cloud node initializer) do once it boots: a Node
        named as the server, with its providerID, Ready (since now) unless told otherwise."""
        pid = self.get(name)["spec"]["providerID"]
        spec = {"providerID": pid}
        if taints:
            spec["taints"] = taints
        code, n = self.k.api("POST", NODES, {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"conditions": [self.ready_condition(ready)]}})
        assert code == 201, (code, n)
        return n

    @staticmethod
    def ready_condition(ready=True):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": now,
                "lastHeartbeatTime": now}

    def node_becomes_ready(self, name):
        code, n = self.k.api("PATCH", NODES + "/" + name + "/status",
                             {"status": {"conditions": [self.ready_condition(True)]}}, MERGE)
        assert code == 200, (code, n)

    def kubelets(self):
        """Every provisioned Machine's server boots: its Node registers (kubelet_registers)."""
        nodes = {n["metadata"]["name"] for n in self.k.api("GET", NODES)[1].get("items", [])}
        for m in self.all_machines():
            name = m["metadata"]["name"]
            if name not in nodes and m["spec"].get("providerID") and not m["metadata"].get("deletionTimestamp"):
                self.kubelet_registers(name)

    def available(self):
        """The Machines that are not being deleted and whose Node is Ready."""
        nodes = {n["metadata"]["name"] for n in self.k.api("GET", NODES)[1].get("items", [])}
        return [m for m in self.all_machines() if not m["metadata"].get("deletionTimestamp") and
                (m.get("status") or {}).get("nodeRef", {}).get("name") in nodes]

    def pod(self, name, node, ns="default", labels=None, owner=None):
        meta = {"name": name, "labels": labels or {}}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "u-" + name,
                                        "controller": True}]
        code, p = self.k.api("POST", PODS % ns, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                                 "spec": {"nodeName": node,
                                                          "containers": [{"name": "c", "image": "x"}]}})
        assert code == 201, (code, p)
        self.k.api("PATCH", PODS % ns + "/" + name + "/status", {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}, MERGE)

    def events(self, reason):
        code, evs = self.k.api("GET", "/api/v1/namespaces/%s/events" % NS)
        return [e for e in (evs or {}).get("items", []) if e.get("reason") == reason]
