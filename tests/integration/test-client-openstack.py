#!/usr/bin/env python3
"""The OpenStack CLI, `openstack` (Debian's python3-openstackclient, on openstacksdk and
keystoneauth), against the fake Keystone, Nova, Glance and Neutron, for what a Cluster API or
machine-controller user does with it every day: issue a token, read the catalog, list images,
flavors (with their extra specs) and availability zones, import a keypair, create a network and
subnet, create a server from an image and flavor by name and wait for it, list and show it, set
and unset properties, stop and start it, see its port, give it a floating IP and take it away,
and delete everything again (waiting for the deletion); with Octavia in the catalog, `openstack
loadbalancer` (python3-octaviaclient) makes, lists, shows and cascade-deletes a load balancer. Every change is also checked in the fake's inventory. Skipped when the CLI is
not installed."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cliclient import Cli, wait_for  # noqa: E402
from cntap import Tap  # noqa: E402
from fakecloud import OPENSTACK_USER, scratch_server, ssh_public_key  # noqa: E402


def openstack(t, url, home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(HOME=home, OS_AUTH_URL=url + "/v3", OS_USERNAME=OPENSTACK_USER["name"],
               OS_PASSWORD=OPENSTACK_USER["password"], OS_PROJECT_NAME=OPENSTACK_USER["project"],
               OS_USER_DOMAIN_NAME=OPENSTACK_USER["domain"], OS_PROJECT_DOMAIN_NAME=OPENSTACK_USER["domain"],
               OS_IDENTITY_API_VERSION="3", OS_INTERFACE="public")
    return Cli(t, ["openstack"], env, ["-f", "json"])


def catalog(t, o, c):
    tok = o.json("token issue", "token", "issue") or {}
    t.ok(bool(tok.get("id")) and bool(tok.get("expires")), "a token with an expiry", tok)
    types = {e["Type"] for e in o.json("catalog list", "catalog", "list") or []}
    t.ok({"identity", "compute", "image", "network"} <= types, "the catalog has identity, compute, image, network", types)
    images = {i["Name"]: i["Status"] for i in o.json("image list", "image", "list") or []}
    t.eq(images.get("debian-12"), "active", "image list shows debian-12 active")
    img = o.json("image show", "image", "show", "debian-12") or {}
    t.eq((img.get("disk_format"), img.get("visibility")), ("qcow2", "public"), "image show by name")
    flavors = {f["Name"]: f for f in o.json("flavor list", "flavor", "list") or []}
    t.ok({"m1.tiny", "m1.small", "m1.large"} <= set(flavors), "flavor list", sorted(flavors))
    fl = o.json("flavor show", "flavor", "show", "m1.large") or {}
    t.eq(fl.get("properties"), {"hw:cpu_policy": "shared", "hw_rng:allowed": "True"}, "flavor extra specs")
    zones = {z["Zone Name"]: z["Zone Status"] for z in
             o.json("availability zone list --compute", "availability", "zone", "list", "--compute") or []}
    t.eq(zones, {"nova": "available", "az-2": "available", "az-maintenance": "not available"},
         "availability zones as a project member sees them")
    c.settings(nova_extra_zones=["az-3"])
    zones = {z["Zone Name"]: z["Zone Status"] for z in
             o.json("availability zone list --compute", "availability", "zone", "list", "--compute") or []}
    c.settings(nova_extra_zones=[])
    t.eq(zones, {"nova": "available", "az-2": "available", "az-maintenance": "not available", "az-3": "available"},
         "the setting nova_extra_zones adds an available zone")
    nets = {n["Name"] for n in o.json("network list", "network", "list") or []}
    t.ok({"private", "public"} <= nets, "networks private and public", nets)


def lifecycle(t, o, c, tmp):
    keyfile = os.path.join(tmp, "ops.pub")
    with open(keyfile, "w") as f:
        f.write(ssh_public_key("ops@example") + "\n")
    o.ok("keypair create --public-key", "keypair", "create", "--public-key", keyfile, "ops")
    rc, out = o.run("keypair", "create", "--public-key", keyfile, "ops")
    t.ok(rc != 0 and "already exists" in out, "a second keypair named ops is refused", out)
    t.eq([k["Name"] for k in o.json("keypair list", "keypair", "list") or []], ["ops"], "keypair list")

    o.ok("network create", "network", "create", "n2")
    sub = o.json("subnet create", "subnet", "create", "--network", "n2", "--subnet-range", "192.168.5.0/24", "sn2") or {}
    t.eq(sub.get("cidr"), "192.168.5.0/24", "subnet created")
    rc, out = o.run("subnet", "create", "--network", "n2", "--subnet-range", "192.168.5.128/25", "overlap")
    t.ok(rc != 0 and "overlaps" in out, "an overlapping subnet is refused", out)

    srv = o.json("server create --wait", "server", "create", "--image", "debian-12", "--flavor", "m1.small",
                 "--network", "n2", "--key-name", "ops", "--property", "team=infra",
                 "--availability-zone", "az-2", "--wait", "s1") or {}
    t.eq(srv.get("status"), "ACTIVE", "the server is ACTIVE when --wait returns")
    inv = [i for i in c.instances() if i["name"] == "s1"]
    t.eq(len(inv), 1, "the fake holds one server s1")
    o.ok("server create (no wait)", "server", "create", "--image", "cirros-0.6.2-x86_64-disk", "--flavor", "m1.tiny",
         "--network", "private", "s2")

    listed = {s["Name"]: s for s in o.json("server list", "server", "list") or []}
    t.ok({"s1", "s2"} <= set(listed), "server list shows both", sorted(listed))
    s1 = listed.get("s1") or {}
    t.eq((s1.get("Image"), s1.get("Flavor")), ("debian-12", "m1.small"), "listed with image and flavor names")
    t.ok(str(s1.get("Networks")).find("192.168.5.") >= 0, "s1 has an address of its subnet", s1.get("Networks"))
    show = o.json("server show", "server", "show", "s1") or {}
    t.eq((show.get("key_name"), show.get("OS-EXT-AZ:availability_zone"), show.get("properties")),
         ("ops", "az-2", {"team": "infra"}), "server show: keypair, zone, properties")
    t.eq([s["Name"] for s in o.json("server list --name", "server", "list", "--name", "^s1$") or []], ["s1"],
         "server list --name filters by regular expression")

    o.ok("server set --property", "server", "set", "--property", "role=worker", "s1")
    o.ok("server unset --property", "server", "unset", "--property", "team", "s1")
    t.eq([i["labels"] for i in c.instances() if i["name"] == "s1"], [{"role": "worker"}],
         "properties changed in the inventory")
    o.ok("server stop", "server", "stop", "s1")
    t.eq([i["status"] for i in c.instances() if i["name"] == "s1"], ["stopped"], "stopped in the inventory")
    t.eq((o.json("server show (stopped)", "server", "show", "s1") or {}).get("status"), "SHUTOFF", "shown SHUTOFF")
    o.ok("server start", "server", "start", "s1")
    t.eq([i["status"] for i in c.instances() if i["name"] == "s1"], ["running"], "running again")

    ports = o.json("port list --server", "port", "list", "--server", "s1") or []
    t.ok(len(ports) == 1 and "192.168.5." in json.dumps(ports[0].get("Fixed IP Addresses")),
         "one port with the server's address", ports)
    rc, out = o.run("network", "delete", "n2")
    t.ok(rc != 0 and "in use" in out, "a network with a server on it cannot be deleted", out)

    fip = o.json("floating ip create", "floating", "ip", "create", "--description", "api of c1", "public") or {}
    t.ok(fip.get("floating_ip_address", "").startswith("203.0.113.") and fip.get("port_id") is None,
         "a floating IP of the public network, associated with nothing", fip)
    rc, out = o.run("floating", "ip", "create", "private")
    t.ok(rc != 0 and "not a valid external network" in out, "none from a network that is not external", out)
    o.ok("floating ip set --port", "floating", "ip", "set", "--port", ports[0]["ID"] if ports else "-",
         fip.get("floating_ip_address", "-"))
    listed = o.json("floating ip list", "floating", "ip", "list") or []
    t.eq([(f.get("Floating IP Address"), f.get("Fixed IP Address"), f.get("Port")) for f in listed],
         [(fip.get("floating_ip_address"), ports[0]["Fixed IP Addresses"][0]["ip_address"] if ports else None,
           ports[0]["ID"] if ports else None)], "floating ip list: associated with the server's port")
    shown = o.json("floating ip show", "floating", "ip", "show", fip.get("id", "-")) or {}
    # The CLI prints port_details as "key='value', ..." text.
    t.ok(shown.get("description") == "api of c1" and inv and ("device_id='%s'" % inv[0]["id"]) in
         str(shown.get("port_details")), "floating ip show: description and the server", shown)
    o.ok("floating ip unset --port", "floating", "ip", "unset", "--port", fip.get("id", "-"))
    t.eq((o.json("floating ip show (unset)", "floating", "ip", "show", fip.get("id", "-")) or {}).get("port_id"), None,
         "dissociated")
    o.ok("floating ip delete", "floating", "ip", "delete", fip.get("id", "-"))
    t.eq(o.json("floating ip list (empty)", "floating", "ip", "list"), [], "no floating IP left")

    o.ok("server delete --wait", "server", "delete", "--wait", "s1")
    t.eq([i["name"] for i in c.instances() if i["name"] == "s1"], [], "s1 is gone when --wait returns")
    o.ok("server delete", "server", "delete", "s2")
    t.ok(wait_for(lambda: not [i for i in c.instances() if i["name"] == "s2"]), "s2 is gone")
    rc, out = o.run("server", "show", "s1")
    t.ok(rc != 0 and "No server" in out, "a deleted server is not found", out)
    o.ok("network delete", "network", "delete", "n2")
    o.ok("keypair delete", "keypair", "delete", "ops")
    t.eq(o.json("keypair list (empty)", "keypair", "list"), [], "no keypair left")
    t.eq(o.json("server list (empty)", "server", "list"), [], "no server left")


def octavia(t, o, c):
    """python3-octaviaclient (`openstack loadbalancer ...`) against the fake Octavia: absent from
    the catalog until the cloud has it; then a load balancer with listener, pool, member and health
    monitor made and waited for, listed and shown, a change while it is PENDING_UPDATE refused with
    409, and a cascade delete that leaves nothing."""
    if not shutil.which("openstack") or o.run("loadbalancer", "list")[1].find("Unknown command") >= 0:
        t.skip("octavia", "python3-octaviaclient is not installed")
        return
    types = {e["Type"] for e in o.json("catalog list", "catalog", "list") or []}
    t.ok("load-balancer" not in types, "no load-balancer service while the cloud has no Octavia", types)
    c.settings(openstack_octavia=True, octavia_pending_seconds=1.0)
    types = {e["Type"] for e in o.json("catalog list", "catalog", "list") or []}
    t.ok("load-balancer" in types, "the load-balancer service once it has", types)
    lb = o.json("loadbalancer create --wait", "loadbalancer", "create", "--name", "cli-lb", "--vip-subnet-id",
                "private-subnet", "--tag", "team=infra", "--wait") or {}
    t.eq(lb.get("provisioning_status"), "ACTIVE", "the load balancer is ACTIVE when --wait returns")
    t.ok(str(lb.get("vip_address", "")).startswith("10.0."), "its VIP is on the private subnet", lb.get("vip_address"))
    o.ok("listener create", "loadbalancer", "listener", "create", "--name", "cli-l", "--protocol", "TCP",
         "--protocol-port", "6443", "--wait", "cli-lb")
    o.ok("pool create", "loadbalancer", "pool", "create", "--name", "cli-p", "--protocol", "TCP", "--listener",
         "cli-l", "--lb-algorithm", "LEAST_CONNECTIONS", "--wait")
    c.settings(octavia_pending_seconds=8.0)  # longer than the CLI takes to start again
    o.ok("member create", "loadbalancer", "member", "create", "--address", "10.0.0.5", "--protocol-port", "6443",
         "--name", "cli-m", "cli-p")
    rc, out = o.run("loadbalancer", "member", "create", "--address", "10.0.0.6", "--protocol-port", "6443", "cli-p")
    t.ok(rc != 0 and "409" in out and "immutable" in out, "a change while PENDING_UPDATE is refused with 409", out)
    c.settings(octavia_pending_seconds=1.0)
    t.ok(wait_for(lambda: (o.json("loadbalancer show", "loadbalancer", "show", "cli-lb") or {}).get(
        "provisioning_status") == "ACTIVE", 30), "ACTIVE again after the pending time")
    o.ok("healthmonitor create", "loadbalancer", "healthmonitor", "create", "--type", "TCP", "--delay", "5",
         "--timeout", "5", "--max-retries", "3", "--wait", "cli-p")
    listed = o.json("loadbalancer list", "loadbalancer", "list") or []
    t.eq([(x.get("name"), x.get("provisioning_status")) for x in listed], [("cli-lb", "ACTIVE")], "loadbalancer list")
    shown = o.json("loadbalancer show", "loadbalancer", "show", "cli-lb") or {}
    t.eq((shown.get("vip_address"), shown.get("operating_status")), (lb.get("vip_address"), "ONLINE"),
         "loadbalancer show")
    t.eq([(x.get("name"), x.get("protocol"), x.get("protocol_port")) for x in
          o.json("listener list", "loadbalancer", "listener", "list") or []], [("cli-l", "TCP", 6443)],
         "listener list")
    t.eq([(x.get("name"), x.get("lb_algorithm")) for x in o.json("pool list", "loadbalancer", "pool", "list") or []],
         [("cli-p", "LEAST_CONNECTIONS")], "pool list")
    t.eq([(x.get("address"), x.get("protocol_port")) for x in
          o.json("member list", "loadbalancer", "member", "list", "cli-p") or []], [("10.0.0.5", 6443)],
         "member list")
    t.eq([x.get("type") for x in o.json("healthmonitor list", "loadbalancer", "healthmonitor", "list") or []],
         ["TCP"], "healthmonitor list")
    ports = [p for p in o.json("port list", "port", "list", "--device-owner", "Octavia") or []]
    t.eq(len(ports), 1, "the VIP's Neutron port is listed")
    rc, out = o.run("loadbalancer", "delete", "cli-lb")
    t.ok(rc != 0 and "children" in out, "a delete without --cascade is refused while it has children", out)
    o.ok("loadbalancer delete --cascade --wait", "loadbalancer", "delete", "--cascade", "--wait", "cli-lb")
    t.eq((o.json("loadbalancer list", "loadbalancer", "list"), o.json("pool list", "loadbalancer", "pool", "list"),
          o.json("port list", "port", "list", "--device-owner", "Octavia")), ([], [], []),
         "the cascade delete leaves no load balancer, no pool and no VIP port")
    c.settings(openstack_octavia=False)


def main():
    t = Tap()
    if not shutil.which("openstack"):
        t.skip_all("openstack (Debian package python3-openstackclient) is not installed")
    with tempfile.TemporaryDirectory(prefix="cn-openstack-") as tmp, \
            scratch_server(prefix="cn-openstack-cloud-", extra_args=["--build-seconds", "0.3"]) as (c, _):
        o = openstack(t, c.url, tmp)
        t.run(catalog, o, c)
        t.run(lifecycle, o, c, tmp)
        t.run(octavia, o, c)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
