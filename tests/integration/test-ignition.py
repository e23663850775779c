#!/usr/bin/env python3
"""The generated provisioning configs: every .ign passes ignition-validate, embeds the unit files
byte for byte and writes a node config the agent accepts; the MachineConfigs carry the pool labels;
every #cloud-config passes `cloud-init schema` and carries the same files."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src, build  # noqa: E402

import yaml  # noqa: E402

ROLES = ("bootstrap", "control-plane", "worker")
POOLS = {"control-plane": "master", "worker": "worker"}


def data(source):
    prefix = "data:;base64,"
    assert source.startswith(prefix), source[:40]
    return base64.b64decode(source[len(prefix):])


def read_src(rel):
    with open(src(rel), "rb") as f:
        return f.read()


def read_build(rel):
    with open(build(rel), "rb") as f:
        return f.read()


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def check_node_config(t, role, content, tmp):
    cfg = yaml.safe_load(content)
    t.eq(cfg.get("role"), role, "%s: node config role" % role)
    # The agent itself must accept what we ship: a full dry run under a root holding this config, a
    # metadata document for platform "file" and an images.json (used by bootstrap/control-plane).
    root = tempfile.mkdtemp(dir=tmp)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "wb") as f:
        f.write(content)
    with open(os.path.join(root, "etc", "cloudnode", "metadata.yaml"), "w") as f:
        f.write("instanceID: test-node\nhostname: test-node\n")
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        json.dump({"cloudControllerManager": "example.com/cloudnode-initializer:test"}, f)
    rc, out = run([build("agent", "cloudnode-agent"), "--platform", "file", "--dry-run", "--root", root])
    t.ok(rc == 0, "%s: node config accepted by cloudnode-agent" % role, out)
    t.eq(os.listdir(root), ["etc"], "%s: --dry-run wrote nothing" % role)


def test_ignition(t, tmp):
    for role in ROLES:
        path = build("ignition", "cloudnode-%s.ign" % role)
        rc, out = run(["ignition-validate", path])
        t.ok(rc == 0, "%s: ignition-validate" % role, out)
        with open(path) as f:
            ign = json.load(f)
        t.eq(ign["ignition"]["version"], "3.3.0", "%s: spec 3.3.0" % role)
        units = {u["name"]: u for u in ign["systemd"]["units"]}
        t.eq(units["cloudnode-agent.service"].get("contents", "").encode(), read_build("units/cloudnode-agent.service"),
             "%s: agent unit embedded byte for byte" % role)
        t.eq(units["cloudnode-initializer.service"].get("contents", "").encode(),
             read_build("units/cloudnode-initializer.service"), "%s: initializer unit embedded byte for byte" % role)
        t.ok(units["cloudnode-agent.service"].get("enabled") is True, "%s: agent unit enabled" % role)
        t.ok(units.get("cloudnode-initializer.service", {}).get("enabled") is True, "%s: initializer enabled" % role)
        t.eq(units["run-cloudnode-configdrive.mount"].get("contents", "").encode(),
             read_src("units/run-cloudnode-configdrive.mount"), "%s: config drive mount embedded" % role)
        files = {f["path"]: f for f in ign["storage"]["files"]}
        t.eq(data(files["/etc/tmpfiles.d/cloudnode-agent.conf"]["contents"]["source"]),
             read_src("units/tmpfiles/cloudnode-agent.conf"), "%s: tmpfiles snippet embedded" % role)
        check_node_config(t, role, data(files["/etc/cloudnode/cloudnode.yaml"]["contents"]["source"]), tmp)
    # The validator must be able to fail on our kind of file.
    bad = os.path.join(tmp, "bad.ign")
    with open(bad, "w") as f:
        json.dump({"ignition": {"version": "3.3.0"}, "systemd": {"units": [{"name": "x", "enabled": True}]}}, f)
    rc, out = run(["ignition-validate", bad])
    t.ok(rc != 0, "ignition-validate rejects a unit with an invalid name", out)


def test_machineconfig(t, tmp):
    for role, pool in POOLS.items():
        with open(build("ignition", "cloudnode-%s.machineconfig.yaml" % role)) as f:
            mc = yaml.safe_load(f)
        with open(build("ignition", "cloudnode-%s.ign" % role)) as f:
            ign = json.load(f)
        t.eq((mc["apiVersion"], mc["kind"]), ("machineconfiguration.openshift.io/v1", "MachineConfig"),
             "%s: MachineConfig kind" % role)
        t.eq(mc["metadata"]["labels"].get("machineconfiguration.openshift.io/role"), pool, "%s: pool label" % role)
        t.eq(mc["spec"]["config"], ign, "%s: wraps the Ignition config unchanged" % role)
    t.ok(not os.path.exists(build("ignition", "cloudnode-bootstrap.machineconfig.yaml")),
         "no MachineConfig for the bootstrap node")


def test_cloud_config(t, tmp):
    for role in ROLES:
        path = build("ignition", "cloudnode-%s.cloud-config.yaml" % role)
        rc, out = run(["cloud-init", "schema", "-c", path])
        t.ok(rc == 0, "%s: cloud-init schema" % role, out)
        with open(path) as f:
            text = f.read()
        t.ok(text.startswith("#cloud-config\n"), "%s: #cloud-config header" % role)
        doc = yaml.safe_load(text)
        files = {f["path"]: f for f in doc["write_files"]}
        t.eq(files["/etc/systemd/system/cloudnode-agent.service"]["content"].encode(),
             read_build("units/cloudnode-agent.service"), "%s: agent unit written byte for byte" % role)
        t.eq(files["/etc/systemd/system/cloudnode-initializer.service"]["content"].encode(),
             read_build("units/cloudnode-initializer.service"), "%s: initializer unit written byte for byte" % role)
        t.eq(yaml.safe_load(files["/etc/cloudnode/cloudnode.yaml"]["content"]).get("role"), role,
             "%s: node config role" % role)
        enabled = [c[-1] for c in doc["runcmd"] if c[:2] == ["systemctl", "enable"]]
        t.eq(sorted(enabled), ["cloudnode-agent.service", "cloudnode-initializer.service"], "%s: units enabled" % role)
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("#cloud-config\nwrite_files: 5\n")
    rc, out = run(["cloud-init", "schema", "-c", bad])
    t.ok(rc != 0, "cloud-init schema rejects a malformed document", out)


def main():
    t = Tap()
    for tool in ("ignition-validate", "cloud-init"):
        if not shutil.which(tool):
            t.skip_all("%s not installed (Debian package %s)" % (tool, "ignition" if tool == "ignition-validate" else "cloud-init"))
    with tempfile.TemporaryDirectory() as tmp:
        for fn in (test_ignition, test_machineconfig, test_cloud_config):
            t.run(fn, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
