#!/usr/bin/env python3
"""cloudnode-controller render: bootstrap static pod and cloud.conf from an Infrastructure object,
through the agent's renderers; bad input gives one clear error and writes nothing."""
import json
import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import yaml  # noqa: E402
from cntap import Tap, build  # noqa: E402

BIN = build("controller", "cloudnode-controller")

INFRA_YAML = """apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata:
  name: cluster
spec:
  platformSpec:
    type: OpenStack
status:
  platform: OpenStack
  platformStatus:
    type: OpenStack
  controlPlaneTopology: HighlyAvailable
"""


def render(tmp, *args):
    return subprocess.run([BIN, "render"] + list(args), capture_output=True, text=True)


def test_openstack(t, tmp):
    infra = os.path.join(tmp, "infra.yaml")
    with open(infra, "w") as f:
        f.write(INFRA_YAML)
    images = os.path.join(tmp, "images.json")
    with open(images, "w") as f:
        json.dump({"cloudControllerManager": "registry.example/cn:7", "cloudNodeManager": "registry.example/cn:7"}, f)
    conf = os.path.join(tmp, "cloud.yaml")
    with open(conf, "w") as f:
        yaml.safe_dump({"Global": {"auth-url": "https://keystone.example:5000/v3", "region": "RegionOne"}}, f)
    dest = os.path.join(tmp, "out")
    p = render(tmp, "--dest-dir", dest, "--cluster-infrastructure-file", infra, "--images-file", images,
               "--cloud-config-file", conf)
    t.eq(p.returncode, 0, "render succeeds")
    if p.returncode:
        t.diag(p.stderr)
        return
    pod_path = os.path.join(dest, "bootstrap", "cloudnode-cloud-node-pod.yaml")
    t.ok(os.path.exists(pod_path), "writes bootstrap/<name>-<kind>.yaml", os.listdir(dest))
    with open(pod_path) as f:
        pod = yaml.safe_load(f)
    t.eq(pod["metadata"]["namespace"], "kube-system", "static pod in kube-system")
    c = pod["spec"]["containers"][0]
    t.eq(c["name"], "cloud-controller-manager", "container named for image substitution")
    t.eq(c["image"], "registry.example/cn:7", "image from images.json")
    args = c.get("args", []) + c.get("command", [])
    t.ok("--controllers=cloud-node" in args and "--leader-elect=false" in args,
         "runs only the cloud-node controller without leader election", args)
    cc_path = os.path.join(dest, "config", "cloud.conf")
    t.eq(stat.S_IMODE(os.stat(cc_path).st_mode), 0o600, "cloud.conf is 0600")
    with open(cc_path) as f:
        text = f.read()
    t.ok("keystone.example" in text and "RegionOne" in text, "cloud config settings rendered", text)

    evil = os.path.join(tmp, "evil.yaml")
    with open(evil, "w") as f:
        yaml.safe_dump({"Global": {"region": "RegionOne\n[Evil]\nx = y"}}, f)
    dest2 = os.path.join(tmp, "out-evil")
    p = render(tmp, "--dest-dir", dest2, "--cluster-infrastructure-file", infra, "--cloud-config-file", evil)
    t.ok(p.returncode != 0 and p.stderr.strip().count("\n") == 0 and "evil.yaml" in p.stderr,
         "a value that could add a section is refused with one line", p.stderr)
    t.ok(not os.path.exists(dest2), "and nothing is written")


def test_json_and_builtin_image(t, tmp):
    infra = os.path.join(tmp, "infra.json")
    with open(infra, "w") as f:
        json.dump(yaml.safe_load(INFRA_YAML.replace("OpenStack", "AWS")), f)
    dest = os.path.join(tmp, "out-json")
    p = render(tmp, "--dest-dir", dest, "--cluster-infrastructure-file", infra)
    t.eq(p.returncode, 0, "JSON Infrastructure accepted", )
    if p.returncode:
        t.diag(p.stderr)
        return
    with open(os.path.join(dest, "bootstrap", "cloudnode-cloud-node-pod.yaml")) as f:
        pod = yaml.safe_load(f)
    t.ok(pod["spec"]["containers"][0]["image"], "built-in image used without --images-file")


def test_bad_input(t, tmp):
    dest = os.path.join(tmp, "out-bad")
    p = render(tmp, "--dest-dir", dest, "--cluster-infrastructure-file", os.path.join(tmp, "missing.yaml"))
    t.ok(p.returncode != 0 and p.stderr.strip().count("\n") == 0 and "missing.yaml" in p.stderr,
         "missing file: one clear line naming it", p.stderr)
    t.ok(not os.path.exists(dest), "nothing written on error")
    noplat = os.path.join(tmp, "noplat.yaml")
    with open(noplat, "w") as f:
        f.write("apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata:\n  name: cluster\n")
    p = render(tmp, "--dest-dir", dest, "--cluster-infrastructure-file", noplat)
    t.ok(p.returncode != 0 and "platform" in p.stderr, "Infrastructure without a platform is refused", p.stderr)
    other = os.path.join(tmp, "other.yaml")
    with open(other, "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    p = render(tmp, "--dest-dir", dest, "--cluster-infrastructure-file", other)
    t.ok(p.returncode != 0 and "Infrastructure" in p.stderr, "other kinds are refused", p.stderr)
    p = subprocess.run([BIN, "render", "--dest-dir", dest], capture_output=True, text=True)
    t.eq(p.returncode, 2, "missing flag is a usage error")
    p = subprocess.run([BIN, "frobnicate"], capture_output=True, text=True)
    t.ok(p.returncode == 2 and "frobnicate" in p.stderr, "unknown command named", p.stderr)


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        t.run(test_openstack, tmp)
        t.run(test_json_and_builtin_image, tmp)
        t.run(test_bad_input, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
