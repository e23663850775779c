#!/usr/bin/env python3
"""cloudnode-initializer in cluster mode with --cloud-provider=gcp and =azure against
tests/fake-kube-apiserver (RBAC of the shipped manifests) and the cloud APIs of tests/fake-cloud,
each with the token of the VM's own identity (GCE metadata server, Azure IMDS managed identity),
as the bootstrap static pod gets it: Nodes by providerID and by name initialized with two writes
each (dual-stack addresses, instance type, region and zone), a hostile answer ending as a Warning
Event with nothing written, throttling riding out, the lifecycle controller (a deleted instance's
Node deleted, a stopped one tainted as shut down), and the bootstrap static pod cloudnode-agent
renders on a control-plane VM of that cloud, run as its arguments say."""
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import (BINARY, BUILD, CLUSTER_SA, RBAC, SHUTDOWN_TAINT, Initializer, addresses, events,  # noqa: E402
                    get_node, initialized, make_node, set_status, tainted, wait_for, writes)
from fakecloud import FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402


class Gcp:
    platform = "gcp"
    project = "cloudnode-test"
    api = {"platform": "gcp", "service": "compute"}
    token_path = "/service-accounts/default/token"
    region = "us-central1"

    def settings(self, c, vm):
        return {"api-endpoint": c.url + "/compute/v1", "metadata-endpoint": c.metadata_url(vm["id"])}

    def conf(self, c, vm):
        return dict(self.settings(c, vm), **{"project-id": self.project, "local-zone": vm["zone"]})

    def pid(self, inst):
        return "gce://%s/%s/%s" % (self.project, inst["zone"], inst["name"])

    @staticmethod
    def instance(n):
        return {"zone": "us-central1-%s" % "abc"[n % 3]}

    def node_name(self, inst):
        return inst["name"] + ".c.%s.internal" % self.project

    @staticmethod
    def zone(inst):
        return inst["zone"]

    @staticmethod
    def addresses(inst):
        return [("InternalIP", inst["private_ipv4"]), ("InternalIP", inst["ipv6"]), ("ExternalIP", inst["public_ipv4"])]

    def hostile(self, inst):
        return {"id": "7", "name": inst["name"] + "/../x", "zone": "zones/us-central1-a"}


class Azure:
    platform = "azure"
    sub = "8d10da13-8125-4ba9-a717-bf7490507b3d"
    api = {"platform": "azure", "service": "arm"}
    token_path = "/metadata/identity/oauth2/token"
    region = "westeurope"

    def settings(self, c, vm):
        return {"resourceManagerEndpoint": c.url + "/arm", "useManagedIdentityExtension": "true",
                "metadata-endpoint": c.metadata_url(vm["id"])}

    def conf(self, c, vm):
        return dict(self.settings(c, vm), subscriptionId=self.sub, resourceGroup="cloudnode-rg", location=self.region)

    def pid(self, inst):
        return ("azure:///subscriptions/%s/resourceGroups/cloudnode-rg/providers/Microsoft.Compute/virtualMachines/%s"
                % (self.sub, inst["name"]))

    @staticmethod
    def instance(n):
        return {"zone": str(n % 3 + 1)}

    def node_name(self, inst):
        return inst["name"]

    def zone(self, inst):
        return "%s-%s" % (self.region, inst["zone"])

    @staticmethod
    def addresses(inst):
        return [("InternalIP", inst["private_ipv4"]), ("InternalIP", inst["ipv6"]), ("ExternalIP", inst["public_ipv4"]),
                ("Hostname", inst["hostname"])]

    def hostile(self, inst):
        return {"id": self.pid(inst)[len("azure://"):] + "/../../x", "name": inst["name"], "location": self.region}


def write_conf(d, cloud, c, vm):
    path = os.path.join(d, "%s.conf" % cloud.platform)
    with open(path, "w") as f:
        f.write("[Global]\n" + "".join("%s = %s\n" % kv for kv in cloud.conf(c, vm).items()))
    return path


def test_initialize(t, k, c, d, cloud):
    p = cloud.platform
    cp = c.add_instance({"platform": p, "name": p + "-cp0"})  # the control-plane VM the pod runs on
    insts = [c.add_instance(dict(cloud.instance(n), platform=p, name="%s-w%d" % (p, n))) for n in range(1, 4)]
    names = [insts[0]["name"], cloud.node_name(insts[1]), insts[2]["name"]]
    make_node(k, names[0], provider_id=cloud.pid(insts[0]))
    make_node(k, names[1])
    make_node(k, names[2])
    bad = c.add_instance({"platform": p, "name": p + "-bad"})
    make_node(k, bad["name"], provider_id=cloud.pid(bad))
    c.fail(dict(cloud.api, path=bad["name"], status=200, body=cloud.hostile(bad)))
    c.throttle(p, count=3, path=insts[2]["name"], **{"service": cloud.api["service"]})
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=" + p,
            "--cloud-config=" + write_conf(d, cloud, c, cp), "--leader-elect=false", "--controllers=cloud-node",
            "--bind-address=127.0.0.1", "-v", "4"]
    before = len(c.requests())
    with Initializer(args, state_dir=d, name=p) as i:
        t.ok(wait_for(lambda: all(initialized(k, n) for n in names), 60), "%s: the three Nodes are initialized" % p,
             i.log()[-3000:])
        for name, inst in zip(names, insts):
            node = get_node(k, name)
            t.eq(node["spec"].get("providerID"), cloud.pid(inst), "%s %s: providerID" % (p, name))
            labels = node["metadata"]["labels"]
            t.eq((labels.get("node.kubernetes.io/instance-type"), labels.get("topology.kubernetes.io/region"),
                  labels.get("topology.kubernetes.io/zone")), (inst["type"], cloud.region, cloud.zone(inst)),
                 "%s %s: instance type, region and zone labels" % (p, name))
            t.eq(sorted(addresses(node)), sorted(cloud.addresses(inst)), "%s %s: dual-stack addresses" % (p, name))
            t.eq(writes(k, CLUSTER_SA, name), [("patch", "status", name, 200), ("patch", "", name, 200)],
                 "%s %s: exactly two writes" % (p, name))
        ev = wait_for(lambda: events(k, bad["name"], "FailedToGetInstance"), 20)
        t.ok(ev and ev[0].get("type") == "Warning" and "unexpected" in ev[0].get("message", ""),
             "%s: a hostile answer: a Warning Event that says what was wrong" % p, ev)
        t.ok(tainted(get_node(k, bad["name"])), "%s: that Node stays tainted" % p)
        t.eq(writes(k, CLUSTER_SA, bad["name"]), [], "%s: nothing is written to it" % p)
        toks = [r for r in c.requests()[before:] if r.get("path", "").split("?")[0].endswith(cloud.token_path)]
        t.eq(len(toks), 1, "%s: one token of the VM's identity serves every lookup" % p)
    c.clear_faults()


def test_lifecycle(t, k, c, d, cloud):
    p = cloud.platform
    cp = c.add_instance({"platform": p, "name": p + "-cp1"})
    a = c.add_instance({"platform": p, "name": p + "-lc-gone"})
    b = c.add_instance({"platform": p, "name": p + "-lc-stop"})
    make_node(k, a["name"], tainted=False, provider_id=cloud.pid(a), ready=False)
    make_node(k, b["name"], tainted=False, provider_id=cloud.pid(b), ready=False)
    c.remove_instance(a["id"])
    c.stop(b["id"])
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=" + p,
            "--cloud-config=" + write_conf(d, cloud, c, cp), "--leader-elect=false", "--controllers=*,-cloud-node",
            "--bind-address=127.0.0.1", "--node-monitor-period=1s", "--node-startup-grace-period=0s", "-v", "4"]
    with Initializer(args, state_dir=d, name=p + "-lifecycle") as i:
        t.ok(wait_for(lambda: get_node(k, a["name"]) is None, 30), "%s: the Node of a deleted instance is deleted" % p,
             i.log()[-2000:])
        t.ok(wait_for(lambda: tainted(get_node(k, b["name"]), SHUTDOWN_TAINT), 30),
             "%s: a stopped instance: shutdown taint" % p)
        c.start(b["id"])
        set_status(k, b["name"], {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]})
        t.ok(wait_for(lambda: not tainted(get_node(k, b["name"]), SHUTDOWN_TAINT), 30),
             "%s: running and Ready again: the taint is removed" % p)
        t.ok(get_node(k, b["name"]) is not None, "%s: a stopped instance's Node is not deleted" % p)


def test_static_pod(t, k, c, d, cloud):
    """The agent's bootstrap static pod on a control-plane VM: its initializer, started with the
    pod's arguments (paths under the test's root) and the rendered cloud.conf, initializes a Node
    with the token of the VM's own identity."""
    p = cloud.platform
    vm = c.add_instance({"platform": p, "name": p + "-cp-pod"})
    w = c.add_instance(dict(cloud.instance(2), platform=p, name=p + "-pod-w1"))
    root = tempfile.mkdtemp(prefix="root", dir=d)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"role": "control-plane", "metadata": {"endpoint": c.metadata_url(vm["id"]), "retries": 0},
                        "cloudConfig": {"Global": cloud.settings(c, vm)}}, f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        f.write('{"cloudControllerManager": "example.com/cloudnode-initializer:test"}')
    r = subprocess.run([os.path.join(BUILD, "agent", "cloudnode-agent"), "--root", root, "--platform", p, "--once"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
    t.eq(r.returncode, 0, "%s: the agent runs on a control-plane VM" % p) or t.diag(r.stderr)
    pod_path = os.path.join(root, "etc", "kubernetes", "manifests", "cloudnode-cloud-node.yaml")
    t.ok(os.path.exists(pod_path), "%s: it renders the bootstrap static pod" % p)
    with open(pod_path) as f:
        args = yaml.safe_load(f)["spec"]["containers"][0]["args"]
    make_node(k, cloud.node_name(w))
    run = []
    for a in args:
        if a.startswith("--kubeconfig="):
            a = "--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA)
        elif a.startswith("--cloud-config="):
            a = "--cloud-config=" + os.path.join(root, a.split("=", 1)[1].lstrip("/"))
        elif a.startswith("--port="):
            continue
        run.append(a)
    t.ok("--cloud-provider=" + p in run, "%s: the pod runs its provider" % p, args)
    with Initializer(run + ["--bind-address=127.0.0.1"], state_dir=d, name=p + "-static-pod") as i:
        node = wait_for(lambda: initialized(k, cloud.node_name(w)), 30)
        t.ok(node, "%s: the static pod's initializer initializes a Node" % p, i.log()[-2000:])
        t.eq((node or {}).get("spec", {}).get("providerID"), cloud.pid(w), "%s: with its providerID" % p)


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    with tempfile.TemporaryDirectory() as d:
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            for cloud in (Gcp(), Azure()):
                for fn in (test_initialize, test_lifecycle, test_static_pod):
                    t.run(fn, k, c, d, cloud)
    sys.exit(t.done())


main()
