#!/usr/bin/env python3
"""cloudnode-initializer in cluster mode with --cloud-provider=aws against tests/fake-kube-apiserver
(the cluster-mode service account's RBAC) and the EC2 API of tests/fake-cloud: Nodes named by
their private DNS name and Nodes with a providerID initialized with two writes each (dual-stack
with NodeIPFamilies), an EC2 answer that cannot be used (a Warning Event that says so, nothing
written), throttling, and the lifecycle controller (a terminated instance's Node deleted, a
stopped one tainted shut down)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import (BINARY, CLUSTER_SA, RBAC, SHUTDOWN_TAINT, Initializer, addresses, events, get_node,  # noqa: E402
                    initialized, make_node, set_status, tainted, wait_for, writes)
from fakecloud import AWS_ACCESS_KEY, FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402


def aws_conf(path, url, extra=""):
    with open(path, "w") as f:
        f.write("[Global]\nZone = us-east-1a\naccess-key-id = %s\nsecret-access-key = %s\n%s"
                '[ServiceOverride "1"]\nService = ec2\nRegion = us-east-1\nURL = %s/ec2\nSigningRegion = us-east-1\n'
                % (AWS_ACCESS_KEY["id"], AWS_ACCESS_KEY["secret"], extra, url))
    os.chmod(path, 0o600)
    return path


def pid(inst):
    return "aws:///%s/%s" % (inst["zone"], inst["id"])


def args_for(k, conf, *extra):
    return ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=aws", "--cloud-config=" + conf,
            "--leader-elect=false", "--bind-address=127.0.0.1", "-v", "4"] + list(extra)


def test_initialize(t, k, c, d):
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


def test_lifecycle(t, k, c, d):
    gone = c.add_instance({"platform": "aws", "name": "lc-gone"})
    stop = c.add_instance({"platform": "aws", "name": "lc-stop"})
    make_node(k, gone["hostname"], tainted=False, provider_id=pid(gone), ready=False)
    make_node(k, stop["hostname"], tainted=False, provider_id=pid(stop), ready=False)
    c.update_instance(gone["id"], {"extra": {"ec2_terminated": True}, "status": "stopped"})
    c.stop(stop["id"])
    conf = aws_conf(os.path.join(d, "lc.conf"), c.url)
    args = args_for(k, conf, "--controllers=*,-cloud-node", "--node-monitor-period=1s", "--node-startup-grace-period=0s")
    with Initializer(args, state_dir=d, name="aws-lifecycle", env={"AWS_EC2_METADATA_DISABLED": "true"}) as i:
        t.ok(wait_for(lambda: get_node(k, gone["hostname"]) is None, 30), "Node of a terminated instance is deleted",
             i.log()[-2000:])
        t.ok(wait_for(lambda: tainted(get_node(k, stop["hostname"]), SHUTDOWN_TAINT), 30),
             "stopped instance: shutdown taint")
        c.start(stop["id"])
        set_status(k, stop["hostname"], {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]})
        t.ok(wait_for(lambda: not tainted(get_node(k, stop["hostname"]), SHUTDOWN_TAINT), 30),
             "running and Ready again: shutdown taint removed")
        t.ok(get_node(k, stop["hostname"]) is not None, "a stopped instance's Node is not deleted")


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    with tempfile.TemporaryDirectory() as d:
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_initialize, k, c, d)
            t.run(test_lifecycle, k, c, d)
    sys.exit(t.done())


main()
