"""Config drive trees written to a directory, standing in for a mounted drive.

config-2: the OpenStack layout (volume label config-2): openstack/<version>/meta_data.json,
network_data.json, user_data, vendor_data*.json, plus ec2/<version>/meta-data.json and
user-data, with the same documents the metadata service serves.
nocloud: the layout of the drive Proxmox VE attaches (volume label cidata): user-data,
meta-data, network-config (version 1) and vendor-data at the root."""
import json
import os

from . import metadata, yamlout

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


def proxmox_network_config(inst):
    subnets = []
    if inst.get("private_ipv4"):
        ip = inst["private_ipv4"]
        subnets.append({"type": "static", "address": ip, "netmask": "255.255.255.0",
                        "gateway": metadata._gateway(ip)})
    if inst.get("ipv6"):
        subnets.append({"type": "static6", "address": inst["ipv6"] + "/64",
                        "gateway": metadata._gateway(inst["ipv6"], 64)})
    if not subnets:
        subnets.append({"type": "dhcp"})
    return {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": inst["mac"], "subnets": subnets},
        {"type": "nameserver", "address": ["192.0.2.53"], "search": ["local"]},
    ]}


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
