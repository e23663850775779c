#!/usr/bin/env python3
"""Node mode on a host with more local addresses than the address tracker keeps (kube-proxy in IPVS
mode puts every Service IP on kube-ipvs0): in a network namespace whose eth0 carries the
instance's IPv4 and IPv6 addresses, a second interface (a veth standing in for kube-ipvs0, as
dummy links are not available here) gets 5000 addresses before cloudnode-initializer starts and
500 more while it runs. The initializer must keep tracking addresses: the Node is initialized with
both of eth0's addresses confirmed as InternalIPs, the process stays up, and an address added to
eth0 afterwards still reaches the Node."""
import ipaddress
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import Initializer, addresses, get_node, initialized, make_node, node_namespace, wait_for  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

SERVICE_NET = ipaddress.ip_network("10.96.0.0/16")


def add_service_ips(d, ns, first, count):
    """count /32 addresses of the Service network on kipvs0, in one ip -batch run."""
    batch = os.path.join(d, "batch-%d" % first)
    with open(batch, "w") as f:
        for n in range(first, first + count):
            f.write("address add %s/32 dev kipvs0\n" % SERVICE_NET[n + 1])
    ns.run(["ip", "-batch", batch], check=True, capture_output=True)


def internal_ips(node):
    return sorted(a for ty, a in addresses(node or {}) if ty == "InternalIP")


def test_many_addresses(t, d, ns, link, k, inst):
    cfg = os.path.join(d, "cloudnode.yaml")
    with open(cfg, "w") as f:
        f.write("platform: aws\nrole: worker\n")
    ns.run(["ip", "link", "add", "kipvs0", "type", "veth", "peer", "name", "kipvs1"], check=True)
    add_service_ips(d, ns, 0, 5000)
    out = ns.run(["ip", "-o", "address", "show", "dev", "kipvs0"], capture_output=True, text=True).stdout
    t.eq(len(out.splitlines()), 5000, "5000 addresses on the second interface")
    args = ["--node-name=many", "--kubeconfig=" + k.node_kubeconfig("many"), "--config=" + cfg,
            "--bind-address=" + link[2], "-v", "4"]
    i = Initializer(args, netns=ns.name, state_dir=d, name="many").start()
    try:
        make_node(k, "many")
        want = sorted([inst["private_ipv4"], inst["ipv6"]])
        node = wait_for(lambda: initialized(k, "many") and internal_ips(get_node(k, "many")) == want and
                        get_node(k, "many"), 60)
        t.ok(node, "the Node is initialized", i.log()[-3000:])
        t.eq(internal_ips(node), want, "with both of eth0's addresses confirmed as InternalIPs")
        add_service_ips(d, ns, 5000, 500)
        time.sleep(1)
        t.ok(i.proc.poll() is None, "500 more addresses while running: the initializer is still up")
        extra = "10.%d.9.9" % (int(inst["private_ipv4"].split(".")[1]))
        ns.run(["ip", "addr", "add", extra + "/32", "dev", "eth0"], check=True)
        # Not an address of the instance: it must not appear, but the tracker must still be alive
        # to tell. The instance's own addresses stay.
        time.sleep(2)
        t.eq(internal_ips(get_node(k, "many")), want, "an unrelated address changes nothing")
        ns.run(["ip", "addr", "del", inst["ipv6"] + "/64", "dev", "eth0"], check=True)
        t.ok(wait_for(lambda: internal_ips(get_node(k, "many")) == [inst["private_ipv4"]], 30),
             "removing eth0's IPv6 address still reaches the Node", i.log()[-2000:])
    finally:
        i.stop()


def main():
    t = Tap()
    if os.geteuid() != 0:
        t.skip_all("network namespaces need root")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            inst = c.add_instance({"platform": "aws", "name": "many"})
            with node_namespace(d, inst, inst, "cna", 252) as (ns, link, k):
                t.run(test_many_addresses, d, ns, link, k, inst)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
