#!/usr/bin/env python3
"""Generates the per-role Ignition configs, MachineConfig wrappers and #cloud-config user-data
from ignition/cloudnode.yaml (see the comment there). Run at build time:

    ignition-gen.py --srcdir SRC --builddir BUILD --out-dir DIR

Everything is serialized with json/yaml libraries; file and unit contents are read from the tree
byte for byte."""
import argparse
import base64
import json
import os
import sys

import yaml

IGNITION_VERSION = "3.3.0"


def data_url(data):
    return "data:;base64," + base64.b64encode(data).decode("ascii")


def load_source(srcdir):
    with open(os.path.join(srcdir, "ignition", "cloudnode.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read(srcdir, rel):
    with open(os.path.join(srcdir, rel), "rb") as f:
        return f.read()


def node_config(src, role):
    cfg = merge(src.get("nodeConfig") or {}, src["roles"][role].get("nodeConfig") or {})
    text = "# Written by Ignition/cloud-init from cloudnode's %s config. See cloudnode.yaml(5).\n" % role
    return (text + yaml.safe_dump(cfg, default_flow_style=False, sort_keys=True)).encode("utf-8")


def units(src, dirs):
    out = []
    for u in src["units"]:
        base, rel = (dirs["build"], u["built"]) if "built" in u else (dirs["src"], u["file"])
        contents = read(base, rel).decode("utf-8")
        out.append((u["name"], contents, bool(u.get("enabled"))))
    return out


def files(src, dirs, role):
    out = [("/etc/cloudnode/cloudnode.yaml", node_config(src, role), 0o644)]
    for f in src["files"]:
        out.append((f["path"], read(dirs["src"], f["file"]), f["mode"]))
    return out


def ignition(src, dirs, role):
    cfg = {"ignition": {"version": IGNITION_VERSION}, "storage": {"files": []}, "systemd": {"units": []}}
    for path, data, mode in files(src, dirs, role):
        cfg["storage"]["files"].append({"path": path, "mode": mode, "overwrite": True,
                                        "contents": {"source": data_url(data)}})
    for name, contents, enabled in units(src, dirs):
        unit = {"name": name, "contents": contents}
        if enabled:
            unit["enabled"] = True
        cfg["systemd"]["units"].append(unit)
    return cfg


def machine_config(role, pool, ign):
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "99-%s-cloudnode" % pool,
                     "labels": {"machineconfiguration.openshift.io/role": pool}},
        "spec": {"config": ign},
    }


def cloud_config(src, dirs, role):
    wf = []
    for path, data, mode in files(src, dirs, role):
        wf.append({"path": path, "content": data.decode("utf-8"), "permissions": "0%o" % mode,
                   "owner": "root:root"})
    enable = []
    for name, contents, enabled in units(src, dirs):
        wf.append({"path": "/etc/systemd/system/" + name, "content": contents, "permissions": "0644",
                   "owner": "root:root"})
        if enabled:
            enable.append(name)
    # runcmd runs after write_files; the agent's tmpfiles and udev rule are applied first so that
    # its unit finds its directories and a config drive is mounted.
    runcmd = [["systemd-tmpfiles", "--create", "/etc/tmpfiles.d/cloudnode-agent.conf"],
              ["udevadm", "control", "--reload"],
              ["udevadm", "trigger", "--subsystem-match=block", "--action=add"],
              ["systemctl", "daemon-reload"]]
    # One command per unit: systemctl gives up on the whole list when one unit is not installed.
    runcmd += [["systemctl", "enable", "--now", "--no-block", name] for name in enable]
    doc = {"write_files": wf, "runcmd": runcmd}
    return "#cloud-config\n" + yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, width=1 << 20)


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--srcdir", required=True)
    ap.add_argument("--builddir", required=True)
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args()
    src = load_source(a.srcdir)
    dirs = {"src": a.srcdir, "build": a.builddir}
    os.makedirs(a.out_dir, exist_ok=True)
    for role, spec in src["roles"].items():
        ign = ignition(src, dirs, role)
        write(os.path.join(a.out_dir, "cloudnode-%s.ign" % role), json.dumps(ign, indent=2, sort_keys=True) + "\n")
        if spec.get("machineConfigPool"):
            mc = machine_config(role, spec["machineConfigPool"], ign)
            write(os.path.join(a.out_dir, "cloudnode-%s.machineconfig.yaml" % role),
                  yaml.safe_dump(mc, default_flow_style=False, sort_keys=False, width=1 << 20))
        write(os.path.join(a.out_dir, "cloudnode-%s.cloud-config.yaml" % role), cloud_config(src, dirs, role))
    return 0


if __name__ == "__main__":
    sys.exit(main())
