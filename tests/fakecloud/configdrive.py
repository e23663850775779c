"""Config drive trees written to a directory, standing in for a mounted drive.

config-2: the OpenStack layout (volume label config-2): openstack/<version>/meta_data.json,
network_data.json, user_data, vendor_data*.json, plus ec2/<version>/meta-data.json and
user-data, with the same documents the metadata service serves.
nocloud: the layout of the drive Proxmox VE attaches (volume label cidata): user-data,
meta-data, network-config (version 1) and vendor-data at the root."""
import ipaddress
import json
import os

from . import metadata, yamlout
from .proxmox import vm_config

FORMATS = ("config-2", "nocloud")
CONFIG2_VERSIONS = ("2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30",
                    "2016-10-06", "2017-02-22", "2018-08-27", "2020-10-14", "latest")


def _ec2_json(tree):
    """meta-data.json on a config drive: the EC2 tree as nested JSON, with the types Nova
    writes there (a list of security groups, an integer launch index)."""
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out[k] = _ec2_json(v)
        elif k == "security-groups":
            out[k] = v.split("\n")
        elif k == "ami-launch-index":
            out[k] = int(v)
        else:
            out[k] = v
    return out


def config2_files(inst):
    files = {}
    docs = metadata.openstack_files(inst)
    for version in CONFIG2_VERSIONS:
        for name, body in docs.items():
            if version != "latest" and name == "network_data.json" and version < "2015-10-15":
                continue
            if version != "latest" and name == "vendor_data2.json" and version < "2016-10-06":
                continue
            files["openstack/%s/%s" % (version, name)] = body
    ec2 = json.dumps(_ec2_json(metadata.ec2_meta_tree(inst, nova=True)))
    for version in ("2009-04-04", "latest"):
        files["ec2/%s/meta-data.json" % version] = ec2
        if "user_data" in docs:
            files["ec2/%s/user-data" % version] = docs["user_data"]
    return files


# The DNS settings of the Proxmox VE host (its resolv.conf), which qemu-server hands to VMs whose
# config sets no nameserver or searchdomain of its own.
PVE_HOST_RESOLV = {"nameserver": "192.0.2.53", "searchdomain": "local"}


def _property_string(s):
    """A Proxmox property string ("virtio=MAC,bridge=vmbr0", "ip=A/24,gw=G") as a dict; a bare
    first item (a net's model without a MAC) maps to None."""
    out = {}
    for part in (s or "").split(","):
        k, sep, v = part.partition("=")
        if k:
            out[k] = v if sep else None
    return out


def proxmox_network_config(inst):
    """network-config as qemu-server writes it for the NoCloud format (PVE::QemuServer::Cloudinit,
    nocloud_network), from the VM config the fake Proxmox VE API serves: one physical entry per
    netN that has an ipconfigN, named ethN with the lower-case MAC of netN; ip= becomes a static
    subnet (address and netmask apart) or dhcp4, ip6= a static6 subnet (address with its prefix),
    dhcp6 or ipv6_slaac; a subnet has a gateway only when gw= (gw6=) is set; then one nameserver
    entry from the VM's nameserver/searchdomain, else the host's."""
    cfg = vm_config(inst)
    config = []
    for key in sorted(k for k in cfg if k.startswith("net") and k[3:].isdigit()):
        n = key[3:]
        if not cfg.get("ipconfig" + n):
            continue
        net, ipc = _property_string(cfg[key]), _property_string(cfg["ipconfig" + n])
        mac = next(v for k, v in net.items() if k in ("virtio", "e1000", "rtl8139", "vmxnet3") and v)
        subnets = []
        ip = ipc.get("ip")
        if ip == "dhcp":
            subnets.append({"type": "dhcp4"})
        elif ip:
            iface = ipaddress.ip_interface(ip)
            subnets.append({"type": "static", "address": str(iface.ip), "netmask": str(iface.netmask)})
            if ipc.get("gw"):
                subnets[-1]["gateway"] = ipc["gw"]
        ip6 = ipc.get("ip6")
        if ip6 in ("dhcp", "auto"):
            subnets.append({"type": "dhcp6" if ip6 == "dhcp" else "ipv6_slaac"})
        elif ip6:
            subnets.append({"type": "static6", "address": ip6})
            if ipc.get("gw6"):
                subnets[-1]["gateway"] = ipc["gw6"]
        config.append({"type": "physical", "name": "eth" + n, "mac_address": mac.lower(), "subnets": subnets})
    nameservers = (cfg.get("nameserver") or PVE_HOST_RESOLV["nameserver"]).split()
    search = (cfg.get("searchdomain") or PVE_HOST_RESOLV["searchdomain"]).split()
    config.append({"type": "nameserver", "address": nameservers, "search": search})
    return {"version": 1, "config": config}


def nocloud_files(inst):
    ud = metadata._user_data_bytes(inst)
    if ud is None:
        # What Proxmox generates from the VM's cloud-init settings when no custom user-data
        # snippet is set.
        ud = ("#cloud-config\nhostname: %s\nmanage_etc_hosts: true\nfqdn: %s\n"
              "chpasswd:\n  expire: False\nusers:\n  - default\npackage_upgrade: true\n"
              % (inst["hostname"], inst["hostname"])).encode()
    return {
        "meta-data": "instance-id: %s\n" % inst["id"],
        "user-data": ud,
        "network-config": yamlout.dump(proxmox_network_config(inst)),
        "vendor-data": inst.get("vendor_data") or "",
    }


def write(inst, dest, fmt=None):
    fmt = fmt or ("nocloud" if inst["platform"] == "proxmoxve" else "config-2")
    if fmt not in FORMATS:
        from .state import StateError
        raise StateError(400, "config drive format must be one of %s" % ", ".join(FORMATS))
    files = nocloud_files(inst) if fmt == "nocloud" else config2_files(inst)
    for rel, body in files.items():
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(body.encode("utf-8") if isinstance(body, str) else body)
        os.rename(tmp, path)
    return sorted(files)
