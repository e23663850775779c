#!/usr/bin/env python3
"""tests/fake-cloud config drive trees: the OpenStack config-2 layout and the NoCloud drive
Proxmox VE attaches, written by the admin API and by the command line."""
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import FAKE_CLOUD, FakeCloud  # noqa: E402


def read(*p):
    with open(os.path.join(*p), encoding="utf-8") as f:
        return f.read()


def test_config2(t, tmp, c):
    inst = c.add_instance({"platform": "openstack", "name": "os-1", "user_data": "#cloud-config\n",
                           "labels": {"k": "v"}, "ssh_keys": ["ssh-ed25519 AAAA test"]})
    dest = os.path.join(tmp, "config-2")
    files = c.write_config_drive(inst["id"], dest)
    for f in ("openstack/latest/meta_data.json", "openstack/latest/network_data.json",
              "openstack/latest/user_data", "openstack/2012-08-10/meta_data.json", "ec2/latest/meta-data.json"):
        t.ok(f in files and os.path.isfile(os.path.join(dest, f)), "config-2 has %s" % f)
    t.ok("openstack/2012-08-10/network_data.json" not in files, "no network_data.json before 2015-10-15")
    md = json.loads(read(dest, "openstack/latest/meta_data.json"))
    _, _, served = c.get("/openstack/latest/meta_data.json", base=c.metadata_url(inst["id"]))
    t.eq(md, served, "drive meta_data.json equals the metadata service's")
    t.eq((md["uuid"], md["name"], md["meta"], md["public_keys"]),
         (inst["id"], "os-1", {"k": "v"}, {"key0": "ssh-ed25519 AAAA test"}), "meta_data.json content")
    nd = json.loads(read(dest, "openstack/latest/network_data.json"))
    t.ok(any(n.get("ip_address") == inst["private_ipv4"] for n in nd["networks"]), "network_data.json address")
    t.eq(read(dest, "openstack/latest/user_data"), "#cloud-config\n", "user_data")
    ec2 = json.loads(read(dest, "ec2/latest/meta-data.json"))
    t.eq((ec2["local-ipv4"], ec2["placement"]["availability-zone"], ec2["ami-launch-index"]),
         (inst["private_ipv4"], inst["zone"], 0), "ec2 meta-data.json")
    t.ok(isinstance(ec2["security-groups"], list), "ec2 security-groups is a list")


def test_nocloud(t, tmp, c):
    inst = c.add_instance({"platform": "proxmoxve", "name": "pve-1"})
    dest = os.path.join(tmp, "nocloud")
    files = c.write_config_drive(inst["id"], dest)
    t.eq(sorted(files), ["meta-data", "network-config", "user-data", "vendor-data"], "NoCloud file set")
    t.eq(read(dest, "meta-data"), "instance-id: %s\n" % inst["id"], "meta-data")
    nc = read(dest, "network-config")
    t.ok(nc.startswith("version: 1\nconfig:\n"), "network-config version 1", nc)
    t.eq(yaml.safe_load(nc)["config"], [
        {"type": "physical", "name": "eth0", "mac_address": inst["mac"], "subnets": [
            {"type": "static", "address": inst["private_ipv4"], "netmask": "255.255.255.0",
             "gateway": inst["private_ipv4"].rsplit(".", 1)[0] + ".1"},
            {"type": "static6", "address": inst["ipv6"] + "/64"}]},
        {"type": "nameserver", "address": ["192.0.2.53"], "search": ["local"]}],
        "network-config: the VM config's ipconfig0 as qemu-server writes it (no gw6 set: no IPv6 gateway)")
    other = c.add_instance({"platform": "proxmoxve", "name": "pve-2", "extra": {"pve_config": {
        "net1": "virtio=AA:BB:CC:00:00:01,bridge=vmbr1", "ipconfig0": "ip=dhcp,ip6=auto",
        "ipconfig1": "ip=192.0.2.9/28,gw=192.0.2.1,ip6=2001:db8:1::9/64,gw6=2001:db8:1::1",
        "net2": "virtio=AA:BB:CC:00:00:02,bridge=vmbr2", "nameserver": "192.0.2.1 192.0.2.2",
        "searchdomain": "example.org"}}})
    c.write_config_drive(other["id"], os.path.join(tmp, "nocloud-2"))
    t.eq(yaml.safe_load(read(tmp, "nocloud-2", "network-config"))["config"], [
        {"type": "physical", "name": "eth0", "mac_address": other["mac"],
         "subnets": [{"type": "dhcp4"}, {"type": "ipv6_slaac"}]},
        {"type": "physical", "name": "eth1", "mac_address": "aa:bb:cc:00:00:01", "subnets": [
            {"type": "static", "address": "192.0.2.9", "netmask": "255.255.255.240", "gateway": "192.0.2.1"},
            {"type": "static6", "address": "2001:db8:1::9/64", "gateway": "2001:db8:1::1"}]},
        {"type": "nameserver", "address": ["192.0.2.1", "192.0.2.2"], "search": ["example.org"]}],
        "network-config: dhcp and SLAAC, gateways from gw=/gw6=, a net without ipconfig left out, "
        "the VM's own DNS")
    t.ok(read(dest, "user-data").startswith("#cloud-config\nhostname: pve-1\n"), "generated user-data")
    st, _, err = c._admin("POST", "/instances/%s/config-drive" % inst["id"], {"path": dest, "format": "iso"})
    t.eq(st, 400, "unknown format rejected")
    t.eq(c.get("/", base=c.metadata_url(inst["id"]))[0], 404, "proxmoxve has no HTTP metadata service")


def test_cli(t, tmp, c):
    inst = c.add_instance({"platform": "openstack", "name": "cli-1"})
    dest = os.path.join(tmp, "cli-drive")
    r = subprocess.run([sys.executable, FAKE_CLOUD, "--state-dir", c.state_dir, "--instance", inst["id"],
                        "--write-config-drive", dest], capture_output=True, text=True, timeout=30)
    t.eq((r.returncode, r.stdout.strip()), (0, os.path.abspath(dest)), "--write-config-drive writes and exits")
    t.eq(json.loads(read(dest, "openstack/latest/meta_data.json"))["name"], "cli-1", "CLI drive content")
    r = subprocess.run([sys.executable, FAKE_CLOUD, "--state-dir", c.state_dir, "--instance", "nope",
                        "--write-config-drive", dest], capture_output=True, text=True, timeout=30)
    t.ok(r.returncode != 0 and "no instance nope" in r.stderr and len(r.stderr.splitlines()) == 1,
         "unknown instance: one clear error line", r.stderr)
    bad = os.path.join(tmp, "bad-state")
    os.makedirs(bad)
    with open(os.path.join(bad, "state.json"), "w") as f:
        f.write("{broken")
    r = subprocess.run([sys.executable, FAKE_CLOUD, "--state-dir", bad, "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=30)
    t.ok(r.returncode != 0 and "not valid JSON" in r.stderr and r.stdout == "", "corrupt state: one clear error",
         r.stderr)
    t.eq(read(bad, "state.json"), "{broken", "corrupt state file left as it was")
    pve_state = os.path.join(tmp, "pve-state")
    pdest = os.path.join(tmp, "pve-drive")
    with FakeCloud(pve_state, platform="proxmoxve", extra_args=["--config-drive", pdest]) as p:
        t.eq(read(pdest, "meta-data"), "instance-id: %s\n" % p.instance["id"], "--config-drive at start")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory(prefix="cn-fake-drive-") as tmp:
        with FakeCloud(os.path.join(tmp, "state")) as c:
            for fn in (test_config2, test_nocloud, test_cli):
                t.run(fn, tmp, c)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
