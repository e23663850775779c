#!/usr/bin/env python3
"""cloudnode-initializer in cluster mode with --cloud-provider=aws, =digitalocean, =gcp, =azure and =proxmoxve
against tests/fake-kube-apiserver (the cluster-mode service account's RBAC of the shipped
manifests) and the cloud APIs of tests/fake-cloud: Nodes found by name and Nodes with a
providerID initialized with two writes each (dual-stack addresses, instance type, region and
zone), an answer that cannot be used (a Warning Event that says so, nothing written), throttling
ridden out, the lifecycle controller (the Node of an instance that is gone deleted, a stopped one
tainted shut down), and the bootstrap static pod cloudnode-agent renders on a control-plane VM of
that cloud, run as its arguments say. aws and digitalocean use keys and tokens of the cloud
config (aws's static pod: the instance role); gcp and azure the token of the VM's own identity
(GCE metadata server, Azure IMDS managed identity), as the bootstrap static pod gets it; proxmoxve
an API token, then a username and password, over HTTPS verified with the test CA, with Nodes
whose providerID is upstream's proxmox://<region>/<vmid> or the agent's proxmox://<SMBIOS UUID>."""
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402
from cninit import (BINARY, CLUSTER_SA, RBAC, SHUTDOWN_TAINT, Initializer, addresses, aws_conf, do_conf,  # noqa: E402
                    events, get_node, initialized, make_node, pve_conf, set_status, tainted, wait_for, writes)
from fakecloud import AWS_ACCESS_KEY, DO_TOKEN, PVE_TOKEN, PVE_USER, FakeCloud, tls_args  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402


def pid(inst):
    return "aws:///%s/%s" % (inst["zone"], inst["id"])


def args_for(k, conf, *extra, provider="aws"):
    return ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=" + provider, "--cloud-config=" + conf,
            "--leader-elect=false", "--bind-address=127.0.0.1", "-v", "4"] + list(extra)


def test_initialize_aws(t, k, c, d):
    by_name = c.add_instance({"platform": "aws", "name": "n1"})
    by_id = c.add_instance({"platform": "aws", "name": "n2"})
    make_node(k, by_name["hostname"])
    make_node(k, by_id["hostname"], provider_id=pid(by_id))
    conf = aws_conf(os.path.join(d, "aws.conf"), c.url, "NodeIPFamilies = ipv4, ipv6\n")
    env = {"AWS_EC2_METADATA_DISABLED": "true"}
    with Initializer(args_for(k, conf, "--controllers=cloud-node"), state_dir=d, name="aws", env=env) as i:
        done = wait_for(lambda: initialized(k, by_name["hostname"]) and initialized(k, by_id["hostname"]), 30)
        t.ok(done, "both Nodes are initialized", i.log()[-3000:])
        for inst in (by_name, by_id):
            name = inst["hostname"]
            node = get_node(k, name) or {"metadata": {}, "spec": {}}
            labels = node["metadata"].get("labels", {})
            t.eq(node["spec"].get("providerID"), pid(inst), "%s: providerID aws:///zone/id" % name)
            t.eq((labels.get("node.kubernetes.io/instance-type"), labels.get("topology.kubernetes.io/region"),
                  labels.get("topology.kubernetes.io/zone")), (inst["type"], "us-east-1", "us-east-1a"),
                 "%s: instance type, region and zone labels" % name)
            public_dns = "ec2-%s.compute-1.amazonaws.com" % inst["public_ipv4"].replace(".", "-")
            t.eq(addresses(node), [("InternalIP", inst["private_ipv4"]), ("InternalIP", inst["ipv6"]),
                                   ("ExternalIP", inst["public_ipv4"]), ("InternalDNS", name), ("ExternalDNS", public_dns),
                                   ("Hostname", name)], "%s: dual-stack addresses, in the Node's deterministic order" % name)
            t.eq(writes(k, CLUSTER_SA, name), [("patch", "status", name, 200), ("patch", "", name, 200)],
                 "%s: exactly two writes, status first" % name)

        # An answer that cannot be used: a clear Warning event and nothing written.
        bad = c.add_instance({"platform": "aws", "name": "n3"})
        c.fail({"platform": "aws", "service": "api", "status": 200, "content_type": "text/xml",
                "body": "<DescribeInstancesResponse><reservationSet><item>"})
        make_node(k, bad["hostname"])
        ev = wait_for(lambda: events(k, bad["hostname"], "FailedToGetInstance"), 20)
        t.ok(ev and ev[0].get("type") == "Warning" and "malformed answer from the EC2 API" in ev[0].get("message", ""),
             "malformed answer: Warning event naming it", ev or i.log()[-2000:])
        t.eq(writes(k, CLUSTER_SA, bad["hostname"]), [], "malformed answer: nothing written")
        c.clear_faults()
        c.throttle("aws", service="api", count=3)
        t.ok(wait_for(lambda: initialized(k, bad["hostname"]), 30), "after the fault and throttling, initialized")
        t.ok(AWS_ACCESS_KEY["secret"] not in json.dumps(events(k)) and AWS_ACCESS_KEY["secret"] not in i.log(),
             "the secret key is in no event and no log line")
        st, text = i.get("/metrics")
        t.ok('cloudnode_initializer_cloud_requests_total{provider="aws",operation="instance_metadata",result="ok"}'
             in text, "cloud requests counted for aws", text[:1500])
        t.eq(i.stop(), 0, "SIGTERM: clean exit")


def check_lifecycle(t, k, c, d, provider, platform, conf, pid, gone_node, make_gone, env=None):
    """The Node of the instance make_gone() made vanish is deleted; a stopped one is tainted."""
    gone = c.add_instance({"platform": platform, "name": "lc-gone"})
    stop = c.add_instance({"platform": platform, "name": "lc-stop"})
    for inst in (gone, stop):
        make_node(k, gone_node(inst), tainted=False, provider_id=pid(inst), ready=False)
    make_gone(gone)
    c.stop(stop["id"])
    args = args_for(k, conf, "--controllers=*,-cloud-node", "--node-monitor-period=1s", "--node-startup-grace-period=0s",
                    provider=provider)
    with Initializer(args, state_dir=d, name=provider + "-lifecycle", env=env) as i:
        t.ok(wait_for(lambda: get_node(k, gone_node(gone)) is None, 30),
             "%s: the Node of an instance that is gone is deleted" % provider, i.log()[-2000:])
        t.ok(wait_for(lambda: tainted(get_node(k, gone_node(stop)), SHUTDOWN_TAINT), 30),
             "%s: stopped instance: shutdown taint" % provider)
        c.start(stop["id"])
        set_status(k, gone_node(stop), {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]})
        t.ok(wait_for(lambda: not tainted(get_node(k, gone_node(stop)), SHUTDOWN_TAINT), 30),
             "%s: running and Ready again: shutdown taint removed" % provider)
        t.ok(get_node(k, gone_node(stop)) is not None, "%s: a stopped instance's Node is not deleted" % provider)
    for n in (gone_node(gone), gone_node(stop)):
        k.api("DELETE", "/api/v1/nodes/" + n)


def test_lifecycle_aws(t, k, c, d):
    check_lifecycle(t, k, c, d, "aws", "aws", aws_conf(os.path.join(d, "lc.conf"), c.url), pid, lambda i: i["hostname"],
                    lambda i: c.update_instance(i["id"], {"extra": {"ec2_terminated": True}, "status": "stopped"}),
                    env={"AWS_EC2_METADATA_DISABLED": "true"})


def test_static_pod_aws(t, k, c, d):
    """The bootstrap static pod the agent renders on an aws control-plane VM, its command run as
    kubelet would run it: the instance role's credentials from IMDS (v2 required), the EC2
    endpoint from the cloud config the agent wrote."""
    ctl = c.add_instance({"platform": "aws", "name": "ctl", "extra": {"iam_role": "control-plane"},
                          "require_token": True})
    root = os.path.join(d, "root-ctl")
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    override = {"Service": "ec2", "Region": "us-east-1", "URL": c.url + "/ec2", "SigningRegion": "us-east-1"}
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"platform": "aws", "role": "bootstrap", "metadata": {"endpoint": c.metadata_url(ctl["id"])},
                        "cloudConfig": {"ServiceOverride": {"1": override}}}, f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        json.dump({"cloudControllerManager": "example.com/cloudnode-initializer:test"}, f)
    p = subprocess.run([build("agent", "cloudnode-agent"), "--root", root, "--once"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
    pod_path = os.path.join(root, "etc", "kubernetes", "manifests", "cloudnode-cloud-node.yaml")
    if not t.ok(p.returncode == 0 and os.path.exists(pod_path), "aws: the agent renders the bootstrap static pod",
                p.stderr):
        return
    with open(pod_path) as f:
        container = yaml.safe_load(f)["spec"]["containers"][0]
    # Paths under the test's root; the kubeconfig of the cluster-mode identity.
    args = []
    for a in container["args"]:
        if a.startswith("--kubeconfig="):
            a = "--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA)
        elif a.startswith("--cloud-config="):
            a = "--cloud-config=" + root + a.split("=", 1)[1]
        elif a.startswith(("--port=", "--bind-address=")):
            continue
        args.append(a)
    t.ok("--cloud-provider=aws" in args and "--controllers=cloud-node" in args, "aws: the pod runs cluster mode", args)
    make_node(k, ctl["hostname"])
    # kubelet's host network reaches 169.254.169.254; here the SDKs' endpoint variable points there.
    env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": c.metadata_url(ctl["id"])}
    with Initializer(args + ["--bind-address=127.0.0.1"], state_dir=d, name="static-pod", env=env) as i:
        node = wait_for(lambda: initialized(k, ctl["hostname"]), 30)
        t.ok(node and node["spec"].get("providerID") == pid(ctl),
             "aws: the static pod's initializer initializes the control-plane Node", i.log()[-3000:])
        fetched = [r for r in c.requests() if r.get("path", "").endswith("/security-credentials/control-plane")]
        t.ok(len(fetched) == 1, "aws: with the instance role's credentials", fetched)


def do_pid(inst):
    return "digitalocean://%s" % inst["id"]


def test_initialize_digitalocean(t, k, c, d):
    by_name = c.add_instance({"platform": "digitalocean", "name": "do-1"})
    by_id = c.add_instance({"platform": "digitalocean", "name": "do-2"})
    make_node(k, "do-1")
    make_node(k, "do-2", provider_id=do_pid(by_id))
    conf = do_conf(os.path.join(d, "do.conf"), c.url)
    with Initializer(args_for(k, conf, "--controllers=cloud-node", provider="digitalocean"), state_dir=d,
                     name="do") as i:
        t.ok(wait_for(lambda: initialized(k, "do-1") and initialized(k, "do-2"), 30),
             "digitalocean: both Nodes are initialized", i.log()[-3000:])
        for inst in (by_name, by_id):
            name = inst["name"]
            node = get_node(k, name) or {"metadata": {}, "spec": {}}
            labels = node["metadata"].get("labels", {})
            t.eq((node["spec"].get("providerID"), labels.get("node.kubernetes.io/instance-type"),
                  labels.get("topology.kubernetes.io/region"), labels.get("topology.kubernetes.io/zone")),
                 (do_pid(inst), inst["type"], "nyc3", "nyc3"), "%s: providerID, size, region and zone" % name)
            t.eq(addresses(node), [("InternalIP", inst["private_ipv4"]), ("ExternalIP", inst["public_ipv4"]),
                                   ("ExternalIP", inst["ipv6"]), ("Hostname", name)], "%s: dual-stack addresses" % name)
            t.eq(writes(k, CLUSTER_SA, name), [("patch", "status", name, 200), ("patch", "", name, 200)],
                 "%s: exactly two writes, status first" % name)
        bad = c.add_instance({"platform": "digitalocean", "name": "do-3"})
        c.fail({"platform": "digitalocean", "service": "api", "status": 200, "body": "{\"droplets\": 7}"})
        make_node(k, "do-3")
        ev = wait_for(lambda: events(k, "do-3", "FailedToGetInstance"), 20)
        t.ok(ev and "malformed answer from the DigitalOcean API" in ev[0].get("message", ""),
             "digitalocean: malformed answer: Warning event naming it", ev or i.log()[-2000:])
        t.eq(writes(k, CLUSTER_SA, "do-3"), [], "digitalocean: malformed answer: nothing written")
        c.clear_faults()
        c.throttle("digitalocean", service="api", count=3)
        t.ok(wait_for(lambda: initialized(k, bad["name"]), 30), "digitalocean: after the fault and throttling, initialized")
        t.ok(DO_TOKEN not in json.dumps(events(k)) and DO_TOKEN not in i.log(), "digitalocean: the token is nowhere")
        t.eq(i.stop(), 0, "digitalocean: SIGTERM: clean exit")


def test_lifecycle_digitalocean(t, k, c, d):
    check_lifecycle(t, k, c, d, "digitalocean", "digitalocean", do_conf(os.path.join(d, "dolc.conf"), c.url), do_pid,
                    lambda i: i["name"], lambda i: c.remove_instance(i["id"]))


def pve_vmid(inst):
    return int((inst.get("extra") or {}).get("vmid") or 100 + inst["numeric_id"])


def pve_pid(inst):
    return "proxmox://pve/%d" % pve_vmid(inst)


def pve_uuid(c, inst):
    st, _, cfg = c.api("GET", "/api2/json/nodes/%s/qemu/%d/config" % (inst["zone"], pve_vmid(inst)), headers={
        "Authorization": "PVEAPIToken=%s!%s=%s" % (PVE_TOKEN["user"], PVE_TOKEN["name"], PVE_TOKEN["secret"])})
    return cfg["data"]["smbios1"].split("uuid=", 1)[1]


def test_initialize_proxmox(t, k, c, d, ca):
    for password in (False, True):
        how = "password" if password else "token"
        by_name = c.add_instance({"platform": "proxmoxve", "name": "pve-%s-1" % how, "zone": "pve2"})
        by_id = c.add_instance({"platform": "proxmoxve", "name": "pve-%s-2" % how,
                                "extra": {"cores": 4, "memory": 4096}})
        by_uuid = c.add_instance({"platform": "proxmoxve", "name": "pve-%s-3" % how, "extra": {"agent_running": False}})
        uuid_pid = "proxmox://" + pve_uuid(c, by_uuid)
        make_node(k, by_name["name"])
        make_node(k, by_id["name"], provider_id=pve_pid(by_id))
        make_node(k, by_uuid["name"], provider_id=uuid_pid)
        conf = pve_conf(os.path.join(d, "pve-%s.conf" % how), c.tls_url, ca, password)
        want = {by_name["name"]: (pve_pid(by_name), "2VCPU-2GB", "pve2",
                                  [("InternalIP", by_name["private_ipv4"]), ("ExternalIP", by_name["public_ipv4"]),
                                   ("ExternalIP", by_name["ipv6"]), ("Hostname", by_name["name"])]),
                by_id["name"]: (pve_pid(by_id), "4VCPU-4GB", "pve1",
                                [("InternalIP", by_id["private_ipv4"]), ("ExternalIP", by_id["public_ipv4"]),
                                 ("ExternalIP", by_id["ipv6"]), ("Hostname", by_id["name"])]),
                by_uuid["name"]: (uuid_pid, "2VCPU-2GB", "pve1",
                                  [("InternalIP", by_uuid["private_ipv4"]), ("InternalIP", by_uuid["ipv6"]),
                                   ("Hostname", by_uuid["name"])])}
        with Initializer(args_for(k, conf, "--controllers=cloud-node", provider="proxmoxve"), state_dir=d,
                         name="pve-" + how) as i:
            t.ok(wait_for(lambda: all(initialized(k, n) for n in want), 30),
                 "proxmoxve (%s): the three Nodes are initialized" % how, i.log()[-3000:])
            for name, (pid_, itype, zone, addrs) in want.items():
                node = get_node(k, name) or {"metadata": {}, "spec": {}}
                labels = node["metadata"].get("labels", {})
                t.eq((node["spec"].get("providerID"), labels.get("node.kubernetes.io/instance-type"),
                      labels.get("topology.kubernetes.io/region"), labels.get("topology.kubernetes.io/zone")),
                     (pid_, itype, "pve", zone), "proxmoxve %s: providerID, instance type, region and zone" % name)
                t.eq(sorted(addresses(node)), sorted(addrs),
                     "proxmoxve %s: addresses (guest agent, else the config's ipconfig0)" % name)
                t.eq(writes(k, CLUSTER_SA, name), [("patch", "status", name, 200), ("patch", "", name, 200)],
                     "proxmoxve %s: exactly two writes, status first" % name)
            t.ok(all(s not in i.log() and s not in json.dumps(events(k))
                     for s in (PVE_TOKEN["secret"], PVE_USER["password"])),
                 "proxmoxve (%s): no secret in a log line or an event" % how)
            t.eq(i.stop(), 0, "proxmoxve (%s): SIGTERM: clean exit" % how)
        for inst in (by_name, by_id, by_uuid):
            k.api("DELETE", "/api/v1/nodes/" + inst["name"])

    # A wrong token: a Warning Event that says so, nothing written.
    wrong = c.add_instance({"platform": "proxmoxve", "name": "pve-wrong"})
    make_node(k, "pve-wrong")
    conf = pve_conf(os.path.join(d, "pve-wrong.conf"), c.tls_url, ca)
    with open(conf) as f:
        text = f.read().replace(PVE_TOKEN["secret"], "not-the-secret")
    with open(conf, "w") as f:
        f.write(text)
    with Initializer(args_for(k, conf, "--controllers=cloud-node", provider="proxmoxve"), state_dir=d,
                     name="pve-wrong") as i:
        ev = wait_for(lambda: events(k, "pve-wrong", "FailedToGetInstance"), 20)
        t.ok(ev and ev[0].get("type") == "Warning" and "refused the API token" in ev[0].get("message", ""),
             "proxmoxve: a wrong token: a Warning Event that says so", ev or i.log()[-2000:])
        t.eq(writes(k, CLUSTER_SA, "pve-wrong"), [], "proxmoxve: a wrong token: nothing written")
        t.ok("not-the-secret" not in i.log() and "not-the-secret" not in json.dumps(events(k)),
             "proxmoxve: the wrong secret is not echoed either")
    k.api("DELETE", "/api/v1/nodes/pve-wrong")
    c.remove_instance(wrong["id"])


def test_lifecycle_proxmox(t, k, c, d, ca):
    check_lifecycle(t, k, c, d, "proxmoxve", "proxmoxve", pve_conf(os.path.join(d, "pvelc.conf"), c.tls_url, ca), pve_pid,
                    lambda i: i["name"], lambda i: c.remove_instance(i["id"]))


def pod_args(k, root, args):
    """The static pod's arguments as the test runs them: the cluster-mode identity's kubeconfig,
    the cloud config under the test's root, the default port."""
    run = []
    for a in args:
        if a.startswith("--kubeconfig="):
            a = "--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA)
        elif a.startswith("--cloud-config="):
            a = "--cloud-config=" + os.path.join(root, a.split("=", 1)[1].lstrip("/"))
        elif a.startswith("--port="):
            continue
        run.append(a)
    return run


def test_static_pod_proxmox(t, k, c, d, ca):
    """The bootstrap static pod the agent renders on a Proxmox VE control-plane VM (cloud-init drive,
    SMBIOS UUID), run with its arguments and the cloud.conf the agent wrote from cloudConfig: it
    initializes a worker's Node and its own, whose kubelet has the agent's proxmox://<UUID>."""
    vm = c.add_instance({"platform": "proxmoxve", "name": "pve-cp-pod"})
    w = c.add_instance({"platform": "proxmoxve", "name": "pve-pod-w1", "zone": "pve2"})
    root = tempfile.mkdtemp(prefix="root", dir=d)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    c.write_config_drive(vm["id"], os.path.join(root, "run", "cloudnode", "cidata"), fmt="nocloud")
    uuid = pve_uuid(c, vm)
    dmi = os.path.join(root, "sys", "class", "dmi", "id")
    os.makedirs(dmi)
    with open(os.path.join(dmi, "product_uuid"), "w") as f:
        f.write(uuid.upper() + "\n")
    settings = {"url": c.tls_url, "region": "pve", "ca-file": ca, "token-id": "%s!%s" % (PVE_TOKEN["user"], PVE_TOKEN["name"]),
                "token-secret": PVE_TOKEN["secret"]}
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"platform": "proxmoxve", "role": "control-plane", "cloudConfig": {"Global": settings}}, f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        f.write('{"cloudControllerManager": "example.com/cloudnode-initializer:test"}')
    r = subprocess.run([build("agent", "cloudnode-agent"), "--root", root, "--once"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
    t.eq(r.returncode, 0, "proxmoxve: the agent runs on a control-plane VM") or t.diag(r.stderr)
    pod_path = os.path.join(root, "etc", "kubernetes", "manifests", "cloudnode-cloud-node.yaml")
    if not t.ok(os.path.exists(pod_path), "proxmoxve: it renders the bootstrap static pod", r.stderr):
        return
    with open(pod_path) as f:
        args = yaml.safe_load(f)["spec"]["containers"][0]["args"]
    make_node(k, w["name"])
    make_node(k, vm["name"], provider_id="proxmox://" + uuid)
    run = pod_args(k, root, args)
    t.ok("--cloud-provider=proxmoxve" in run, "proxmoxve: the pod runs its provider", args)
    with Initializer(run + ["--bind-address=127.0.0.1"], state_dir=d, name="pve-static-pod") as i:
        ok = wait_for(lambda: initialized(k, w["name"]) and initialized(k, vm["name"]), 30)
        t.ok(ok, "proxmoxve: the static pod's initializer initializes the Nodes", i.log()[-2000:])
        t.eq(((get_node(k, w["name"]) or {}).get("spec", {}).get("providerID"),
              (get_node(k, vm["name"]) or {}).get("spec", {}).get("providerID")),
             (pve_pid(w), "proxmox://" + uuid), "proxmoxve: the worker gets proxmox://pve/<vmid>, the VM the agent ran "
             "on keeps its SMBIOS UUID form")
        t.ok(PVE_TOKEN["secret"] not in i.log(), "proxmoxve: the token secret is in no log line")


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
    cp = c.add_instance({"platform": cloud.platform, "name": cloud.platform + "-cp1"})
    check_lifecycle(t, k, c, d, cloud.platform, cloud.platform, write_conf(d, cloud, c, cp), cloud.pid,
                    lambda i: i["name"], lambda i: c.remove_instance(i["id"]))

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
    r = subprocess.run([build("agent", "cloudnode-agent"), "--root", root, "--platform", p, "--once"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
    t.eq(r.returncode, 0, "%s: the agent runs on a control-plane VM" % p) or t.diag(r.stderr)
    pod_path = os.path.join(root, "etc", "kubernetes", "manifests", "cloudnode-cloud-node.yaml")
    t.ok(os.path.exists(pod_path), "%s: it renders the bootstrap static pod" % p)
    with open(pod_path) as f:
        args = yaml.safe_load(f)["spec"]["containers"][0]["args"]
    make_node(k, cloud.node_name(w))
    run = pod_args(k, root, args)
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
        tls, ca = tls_args(d)
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, \
                FakeCloud(os.path.join(d, "cloud"), extra_args=tls) as c:
            t.run(test_initialize_aws, k, c, d)
            t.run(test_lifecycle_aws, k, c, d)
            t.run(test_static_pod_aws, k, c, d)
            t.run(test_initialize_digitalocean, k, c, d)
            t.run(test_lifecycle_digitalocean, k, c, d)
            t.run(test_initialize_proxmox, k, c, d, ca)
            t.run(test_lifecycle_proxmox, k, c, d, ca)
            t.run(test_static_pod_proxmox, k, c, d, ca)
            for cloud in (Gcp(), Azure()):
                for fn in (test_initialize, test_lifecycle, test_static_pod):
                    t.run(fn, k, c, d, cloud)
    sys.exit(t.done())


main()
