#!/usr/bin/env python3
"""Hetzner's own CLI, `hcloud` (Debian's hcloud-cli, built on hcloud-go), against the Hetzner
fake, for what a Cluster API or machine-controller user does with it every day: list the catalog,
create SSH keys, networks with subnets, placement groups and load balancers, create a server from
an image by name (waiting on its actions), find it by label, describe it, label it, power it off
and on, snapshot it, and delete everything again. Every step is also checked in the fake's
inventory, so a client that only prints does not pass. Skipped when hcloud is not installed."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cliclient import Cli, wait_for  # noqa: E402
from cntap import Tap  # noqa: E402
from fakecloud import HETZNER_TOKEN, scratch_server, ssh_public_key  # noqa: E402


def hcloud(t, url, home):
    env = dict(os.environ, HOME=home, HCLOUD_ENDPOINT=url + "/v1", HCLOUD_TOKEN=HETZNER_TOKEN,
               HCLOUD_CONFIG=os.path.join(home, "cli.toml"))
    return Cli(t, ["hcloud", "--poll-interval", "100ms"], env, ["-o", "json"], timeout=60)


def catalog(t, h, c):
    names = [i["name"] for i in h.json("image list", "image", "list", "--type", "system") or []]
    t.ok("debian-12" in names and "ubuntu-24.04" in names, "system images are listed by name", names)
    t.eq(names.count("debian-12"), 2, "debian-12 is listed once per architecture")
    types = [s["name"] for s in h.json("server-type list", "server-type", "list") or []]
    t.ok("cx22" in types and "cax11" in types, "server types are listed", types)
    locs = [loc["name"] for loc in h.json("location list", "location", "list") or []]
    t.ok({"fsn1", "nbg1", "hel1"} <= set(locs), "locations are listed", locs)
    dcs = [d["name"] for d in h.json("datacenter list", "datacenter", "list") or []]
    t.ok("fsn1-dc14" in dcs, "datacenters are listed", dcs)
    lbt = [x["name"] for x in h.json("load-balancer-type list", "load-balancer-type", "list") or []]
    t.ok("lb11" in lbt, "load balancer types are listed", lbt)


def lifecycle(t, h, c, tmp):
    keyfile = os.path.join(tmp, "k1.pub")
    with open(keyfile, "w") as f:
        f.write(ssh_public_key("ops@example") + "\n")
    h.ok("ssh-key create", "ssh-key", "create", "--name", "k1", "--public-key-from-file", keyfile)
    rc, out = h.run("ssh-key", "create", "--name", "k2", "--public-key-from-file", keyfile)
    t.ok(rc != 0 and "uniqueness_error" in out, "the same key twice is refused as not unique", out)
    rc, out = h.run("ssh-key", "create", "--name", "bad", "--public-key", "ssh-ed25519 bm90IGEga2V5")
    t.ok(rc != 0 and "invalid_input" in out, "a malformed public key is refused", out)
    keys = h.json("ssh-key list", "ssh-key", "list") or []
    t.ok(len(keys) == 1 and keys[0]["fingerprint"].count(":") == 15, "one key with an MD5 fingerprint", keys)

    h.ok("network create", "network", "create", "--name", "n1", "--ip-range", "10.1.0.0/16")
    h.ok("network add-subnet", "network", "add-subnet", "n1", "--type", "cloud", "--network-zone",
         "eu-central", "--ip-range", "10.1.0.0/24")
    rc, out = h.run("network", "add-subnet", "n1", "--type", "cloud", "--network-zone", "eu-central",
                    "--ip-range", "10.2.0.0/24")
    t.ok(rc != 0 and "invalid_input" in out, "a subnet outside the network's range is refused", out)
    h.ok("placement-group create", "placement-group", "create", "--name", "pg1", "--type", "spread")

    h.ok("server create (waits for its actions)", "server", "create", "--name", "s1", "--type", "cx22",
         "--image", "debian-12", "--ssh-key", "k1", "--network", "n1", "--placement-group", "pg1",
         "--location", "nbg1", "--label", "role=worker", "--label", "cluster=c1")
    rc, out = h.run("server", "create", "--name", "s1", "--type", "cx22", "--image", "debian-12")
    t.ok(rc != 0 and "uniqueness_error" in out, "a second server named s1 is refused", out)
    inv = [i for i in c.instances() if i["name"] == "s1"]
    t.eq(len(inv), 1, "the fake holds exactly one server s1")

    listed = h.json("server list -l", "server", "list", "-l", "role=worker,cluster in (c1,c2)") or []
    t.eq([s["name"] for s in listed], ["s1"], "a label selector finds the server")
    t.eq(h.json("server list -l (no match)", "server", "list", "-l", "role!=worker"), [],
         "a non-matching selector finds nothing")
    s = h.json("server describe", "server", "describe", "s1") or {}
    t.eq((s.get("status"), (s.get("image") or {}).get("name"), (s.get("server_type") or {}).get("name"),
          (s.get("datacenter") or {}).get("location", {}).get("name")),
         ("running", "debian-12", "cx22", "nbg1"), "described: running debian-12 cx22 in nbg1")
    priv = s.get("private_net") or []
    t.ok(len(priv) == 1 and priv[0]["ip"].startswith("10.1.0."), "attached to n1 with an address of its subnet", priv)
    t.eq((s.get("placement_group") or {}).get("name"), "pg1", "in placement group pg1")
    if inv:
        t.eq(inv[0]["private_ipv4"], priv[0]["ip"] if priv else None, "the metadata service sees the same private address")

    h.ok("server add-label", "server", "add-label", "s1", "tier=gold")
    h.ok("server remove-label", "server", "remove-label", "s1", "cluster")
    t.eq([i["labels"] for i in c.instances() if i["name"] == "s1"], [{"role": "worker", "tier": "gold"}],
         "labels changed in the inventory")
    h.ok("server poweroff", "server", "poweroff", "s1")
    t.eq([i["status"] for i in c.instances() if i["name"] == "s1"], ["stopped"], "powered off")
    t.eq([x["status"] for x in h.json("server list (off)", "server", "list") or []], ["off"], "listed as off")
    h.ok("server poweron", "server", "poweron", "s1")
    t.eq([i["status"] for i in c.instances() if i["name"] == "s1"], ["running"], "powered on again")
    h.ok("server reboot", "server", "reboot", "s1")

    h.ok("server create-image", "server", "create-image", "--type", "snapshot", "--description", "golden",
         "--label", "image=golden", "s1")
    snaps = h.json("image list --type snapshot", "image", "list", "--type", "snapshot", "-l", "image=golden") or []
    t.ok(len(snaps) == 1 and snaps[0]["description"] == "golden", "the snapshot is listed by label", snaps)

    h.ok("load-balancer create", "load-balancer", "create", "--name", "lb1", "--type", "lb11", "--location", "fsn1")
    h.ok("load-balancer add-target", "load-balancer", "add-target", "lb1", "--server", "s1")
    h.ok("load-balancer add-service", "load-balancer", "add-service", "lb1", "--protocol", "tcp",
         "--listen-port", "6443", "--destination-port", "6443")
    h.ok("load-balancer attach-to-network", "load-balancer", "attach-to-network", "lb1", "--network", "n1")
    lb = h.json("load-balancer describe", "load-balancer", "describe", "lb1") or {}
    t.eq(([x["server"]["id"] for x in lb.get("targets") or []], [x["listen_port"] for x in lb.get("services") or []]),
         ([int(inv[0]["id"])] if inv else [], [6443]), "the load balancer has s1 as target and a 6443 service")
    t.ok(any(p["ip"].startswith("10.1.0.") for p in lb.get("private_net") or []), "the load balancer has an address in n1",
         lb.get("private_net"))

    h.ok("load-balancer delete", "load-balancer", "delete", "lb1")
    h.ok("server delete", "server", "delete", "s1")
    t.ok(wait_for(lambda: not [i for i in c.instances() if i["name"] == "s1"]), "s1 is gone from the inventory")
    rc, out = h.run("server", "describe", "nosuch")
    t.ok(rc != 0 and "not found" in out, "describing an unknown server fails", out)
    if snaps:
        rc, out = h.run("image", "delete", "debian-12")
        t.ok(rc != 0, "a system image cannot be deleted", out)
        h.ok("image delete (snapshot)", "image", "delete", str(snaps[0]["id"]))
    h.ok("network delete", "network", "delete", "n1")
    h.ok("placement-group delete", "placement-group", "delete", "pg1")
    h.ok("ssh-key delete", "ssh-key", "delete", "k1")
    t.eq((h.json("network list", "network", "list", "-l", "x!=y") or [{}])[0].get("name"), "default",
         "only the default network is left")
    t.eq(h.json("ssh-key list (empty)", "ssh-key", "list"), [], "no SSH key is left")
    t.eq(h.json("load-balancer list (empty)", "load-balancer", "list"), [], "no load balancer is left")


def main():
    t = Tap()
    if not shutil.which("hcloud"):
        t.skip_all("hcloud (Debian package hcloud-cli) is not installed")
    with tempfile.TemporaryDirectory(prefix="cn-hcloud-") as tmp, \
            scratch_server(prefix="cn-hcloud-cloud-", extra_args=["--action-seconds", "0.2"]) as (c, _):
        h = hcloud(t, c.url, tmp)
        t.run(catalog, h, c)
        t.run(lifecycle, h, c, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
