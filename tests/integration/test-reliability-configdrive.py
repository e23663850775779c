#!/usr/bin/env python3
"""Hostile config drives. A drive labelled config-2 or cidata is preferred over the metadata
service, and anyone who can attach a block device can label one, so: a FIFO in place of a drive
document must not hang cloudnode-agent (it is refused at once), a symbolic link on the drive must
not make the agent read a file of the host, and only ISO 9660 and FAT drives are mounted by the
shipped units (udev rule and mount units)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build, src  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

import yaml  # noqa: E402

AGENT = build("agent", "cloudnode-agent")
ENV = "run/metadata/cloudnode"
MD = ("cd", "openstack", "latest", "meta_data.json")


def make_root(tmp, name):
    root = tempfile.mkdtemp(prefix=name, dir=tmp)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"platform": "openstack", "metadata": {"configDrive": "/cd", "endpoint": "http://127.0.0.1:9"}},
                       f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        json.dump({"cloudControllerManager": "example.com/cloudnode-initializer:test"}, f)
    return root


def agent(root):
    e = dict(os.environ, CLOUDNODE_LOG_TARGET="console")
    e.pop("NOTIFY_SOCKET", None)
    try:
        p = subprocess.run([AGENT, "--root", root, "--once"], capture_output=True, text=True, env=e, timeout=20)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return None, "timed out after 20 s"


def test_fifo(t, tmp, c, inst):
    root = make_root(tmp, "fifo")
    c.write_config_drive(inst["id"], os.path.join(root, "cd"), fmt="config-2")
    md = os.path.join(root, *MD)
    os.unlink(md)
    os.mkfifo(md)
    rc, err = agent(root)
    t.ok(rc is not None and rc != 0, "a FIFO as meta_data.json is refused, not waited on", (rc, err[-1500:]))
    t.ok(not os.path.exists(os.path.join(root, ENV)), "and nothing is written")


def test_symlink(t, tmp, c, inst):
    root = make_root(tmp, "symlink")
    c.write_config_drive(inst["id"], os.path.join(root, "cd"), fmt="config-2")
    md = os.path.join(root, *MD)
    # A document of the host the drive points at: valid metadata, so only the link itself can
    # make the agent refuse it.
    host_doc = os.path.join(tmp, "host-document.json")
    os.rename(md, host_doc)
    os.symlink(host_doc, md)
    rc, err = agent(root)
    t.ok(rc is not None and rc != 0, "a symbolic link as meta_data.json is not followed", (rc, err[-1500:]))
    t.ok(not os.path.exists(os.path.join(root, ENV)), "and nothing is written")


def test_units(t):
    name = "61-cloudnode-configdrive.rules"
    with open(src("units", name)) as f:
        rules = [line for line in f if "SYSTEMD_WANTS" in line]
    # udev runs rules files in the lexical order of their names, and ID_FS_LABEL/ID_FS_TYPE are
    # set during the same event by 60-persistent-storage.rules: a rule before it never matches.
    t.ok(name > "60-persistent-storage.rules" and "ID_FS_LABEL" in "".join(rules),
         "the drive rules run after 60-persistent-storage.rules, which sets the ID_FS_* they match", name)
    t.ok(len(rules) == 2 and all('ENV{ID_FS_TYPE}=="iso9660|vfat"' in line for line in rules),
         "udev starts a drive's mount only for ISO 9660 and FAT", rules)
    for unit in ("run-cloudnode-configdrive.mount", "run-cloudnode-cidata.mount"):
        with open(src("units", unit)) as f:
            lines = [line.strip() for line in f]
        t.ok("Type=iso9660,vfat" in lines, "%s mounts ISO 9660 or FAT only" % unit)
        t.ok(any(line.startswith("Options=") and "ro" in line[8:].split(",") for line in lines),
             "%s mounts read-only" % unit)


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp, FakeCloud(os.path.join(tmp, "cloud")) as c:
        inst = c.add_instance({"platform": "openstack"})
        t.run(test_fifo, tmp, c, inst)
        t.run(test_symlink, tmp, c, inst)
        t.run(test_units)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
