#!/usr/bin/env python3
"""Hostile metadata end to end: the fake cloud's admin API sets instance fields (hostname, type,
zone, region) to values with newlines, quotes, NUL, control characters, huge lengths, YAML and INI
syntax, label-syntax violations; an OpenStack config drive carries invalid UTF-8. For each value
cloudnode-agent (control-plane role: env file, kubelet drop-in, cloud.conf, and the static pod on
OpenStack, which has a cluster-mode provider) refuses (non-zero exit, every previous file
byte-identical and not rewritten) what it must (control characters, invalid UTF-8, values over
1 KiB: MUST_REFUSE), and refuses or writes outputs for the others that read back, through sh, systemd's env-file parser, a systemd-quoting parser, configparser and
YAML, with the same structure as a clean run and the value unchanged.

CN_RELIABILITY_STATS=FILE appends the figures as one JSON line (tests/reliability/report.py)."""
import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))
from relutil import record  # noqa: E402
from cntap import Tap, build  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

import yaml  # noqa: E402

AGENT = build("agent", "cloudnode-agent")
ENV = "run/metadata/cloudnode"
DROPIN = "etc/systemd/system/kubelet.service.d/20-cloudnode.conf"
CLOUD_CONF = "etc/kubernetes/bootstrap-configs/cloud.conf"
POD = "etc/kubernetes/manifests/cloudnode-cloud-node.yaml"
OUTPUTS = (ENV, DROPIN, CLOUD_CONF, POD)
GEN = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
FIELDS = {"hostname": "CLOUDNODE_HOSTNAME", "type": "CLOUDNODE_INSTANCE_TYPE", "zone": "CLOUDNODE_ZONE",
          "region": "CLOUDNODE_REGION"}
VALUES = {
    "newline": "a\nKUBELET_PROVIDERID=evil",
    "cr": "a\rb",
    "nul": "a\x00b",
    "tab": "a\tb",
    "escape": "a\x1b[2Jb",
    "del": "a\x7fb",
    "u2028": "a\u2028b",
    "quotes": "q\"u'o `id` $(id) \\ %n %% ;x #y",
    "ini": "z\" ; [Evil]\nx=1",
    "ini-inline": "z [Global] = 1",
    "yaml": ": - {a: b} &x *y !!python/object:os.system '",
    "unicode": "zon\u00e9-\u00fc-\u65e5",
    "label-syntax": "-Bad_Label.Value-",
    "long": "y" * 4096,
    "huge": "x" * 200000,
    "empty": "",
}
# What every field must refuse, whatever else a field's syntax allows: control characters, and
# values over the 1 KiB cap of a metadata value (lib/metadata/metadata.c). The other values may
# be refused by a field's own syntax or accepted, and then must read back unchanged.
MUST_REFUSE = {"newline", "cr", "nul", "tab", "escape", "del", "long", "huge"}


def make_root(tmp, endpoint):
    root = tempfile.mkdtemp(prefix="root", dir=tmp)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"role": "control-plane", "metadata": {"endpoint": endpoint, "retries": 0}}, f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        json.dump({"cloudControllerManager": "example.com/ccm:test"}, f)
    return root


def run_agent(root, *extra):
    e = dict(os.environ, CLOUDNODE_LOG_TARGET="console")
    e.pop("NOTIFY_SOCKET", None)
    return subprocess.run([AGENT, "--root", root, "--once"] + list(extra),
                          capture_output=True, env=e, timeout=60)


def state(root):
    out = {}
    for rel in OUTPUTS:
        p = os.path.join(root, rel)
        if os.path.exists(p):
            with open(p, "rb") as f:
                out[rel] = (f.read(), os.stat(p).st_mtime_ns)
    return out


def sh_env(path):
    out = subprocess.run(["sh", "-c", 'set -a; . "$1" && env -0', "sh", path], capture_output=True,
                         check=True).stdout
    env = {}
    for item in out.split(b"\0"):
        k, _, v = item.partition(b"=")
        if k.startswith(b"CLOUDNODE_"):
            env[k.decode()] = v.decode("utf-8", "surrogateescape")
    return env


def systemd_env(path, tmp):
    """The env file through systemd's EnvironmentFile= parser (environment.d generator), or None."""
    if not os.path.exists(GEN):
        return None
    conf = os.path.join(tmp, "xdg", "environment.d")
    shutil.rmtree(os.path.join(tmp, "xdg"), ignore_errors=True)
    os.makedirs(conf)
    shutil.copy(path, os.path.join(conf, "50-cloudnode.conf"))
    p = subprocess.run([GEN], env={"XDG_CONFIG_HOME": os.path.join(tmp, "xdg")}, capture_output=True)
    env = {}
    for line in p.stdout.split(b"\n"):
        if line.startswith(b"CLOUDNODE_"):
            k = line.split(b"=", 1)[0].decode()
            # The generator prints shell-escaped assignments; sh unescapes them.
            v = subprocess.run(["sh", "-c", 'eval "$1"; printf %s "$' + k + '"', "sh", line],
                               capture_output=True).stdout
            env[k] = v.decode("utf-8", "surrogateescape")
    return env


def unit_environment(text):
    """Environment= assignments of a unit drop-in, unquoted by systemd's rules for one
    double-quoted word ("\\" escapes, "%%" specifier); anything else in the file is reported."""
    env, other = {}, []
    for line in text.split("\n"):
        if not line or line.startswith("#") or line == "[Service]":
            continue
        if line.startswith('Environment="') and line.endswith('"'):
            body, out, i = line[len('Environment="'):-1], [], 0
            while i < len(body):
                ch = body[i]
                if ch == "\\" and i + 1 < len(body):
                    out.append(body[i + 1])
                    i += 2
                    continue
                if ch == '"':
                    other.append(line)
                    break
                if ch == "%" and body[i + 1:i + 2] == "%":
                    i += 1
                out.append(ch)
                i += 1
            k, _, v = "".join(out).partition("=")
            env[k] = v
        else:
            other.append(line)
    return env, other


def shape(x):
    if isinstance(x, dict):
        return {k: shape(v) for k, v in x.items()}
    if isinstance(x, list):
        return [shape(v) for v in x]
    return type(x).__name__


def ini(text):
    cp = configparser.ConfigParser(interpolation=None, strict=True)
    cp.optionxform = str
    cp.read_string(text)
    return {s: dict(cp[s]) for s in cp.sections()}


def reads_back(root, tmp, good, field, value):
    """Problems with accepted outputs, compared to a clean run's (good) structure."""
    problems = []
    env = sh_env(os.path.join(root, ENV))
    if set(env) - set(good["env"]):
        problems.append(("env: new variables", sorted(set(env) - set(good["env"]))))
    if value is None:
        # Invalid UTF-8 in: accepted only if nothing invalid came out.
        for rel in OUTPUTS:
            with open(os.path.join(root, rel), "rb") as f:
                try:
                    f.read().decode("utf-8")
                except UnicodeDecodeError as e:
                    problems.append(("%s: invalid UTF-8 written" % rel, str(e)))
    var = FIELDS.get(field)
    if var and value is not None and var in env and env[var] != value:
        problems.append(("env: %s changed" % var, env[var][:80]))
    sd = systemd_env(os.path.join(root, ENV), tmp)
    if sd is not None:
        if set(sd) != set(env):
            problems.append(("systemd env: variables differ from sh", sorted(set(sd) ^ set(env))))
        elif "$" not in (value or "") and sd != env:  # the generator expands $VAR, EnvironmentFile= does not
            problems.append(("systemd env: values differ from sh", [k for k in sd if sd[k] != env[k]]))
    with open(os.path.join(root, DROPIN)) as f:
        dropin, other = unit_environment(f.read())
    if other or set(dropin) - {"KUBELET_PROVIDERID", "KUBELET_NODE_NAME"}:
        problems.append(("drop-in structure", other, sorted(dropin)))
    if field == "hostname" and dropin.get("KUBELET_NODE_NAME") not in (None, value, good["node"]):
        problems.append(("drop-in node name", dropin.get("KUBELET_NODE_NAME", "")[:80]))
    try:
        with open(os.path.join(root, CLOUD_CONF)) as f:
            conf = ini(f.read())
        if {s: sorted(v) for s, v in conf.items()} != {s: sorted(v) for s, v in good["conf"].items()}:
            problems.append(("cloud.conf structure", conf))
    except configparser.Error as e:
        problems.append(("cloud.conf does not parse", str(e)))
    if good["pod"] is None:
        if os.path.exists(os.path.join(root, POD)):
            problems.append(("static pod written where the clean run wrote none", ""))
        return problems
    try:
        with open(os.path.join(root, POD)) as f:
            pod = yaml.safe_load(f)
        if shape(pod) != shape(good["pod"]):
            problems.append(("static pod structure", pod))
    except yaml.YAMLError as e:
        problems.append(("static pod does not parse", str(e)))
    return problems


def good_view(root):
    with open(os.path.join(root, DROPIN)) as f:
        dropin, _ = unit_environment(f.read())
    with open(os.path.join(root, CLOUD_CONF)) as f:
        conf = ini(f.read())
    pod = None
    if os.path.exists(os.path.join(root, POD)):
        with open(os.path.join(root, POD)) as f:
            pod = yaml.safe_load(f)
    return {"env": sh_env(os.path.join(root, ENV)), "node": dropin.get("KUBELET_NODE_NAME"), "conf": conf,
            "pod": pod}


def check_case(t, tmp, root, good, name, field, value, run, stats, must_refuse):
    before = state(root)
    p = run()
    stats["cases"] += 1
    after = state(root)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        t.ok(False, "%s = %s: agent crashed" % (field, name), err[-500:])
        return
    if p.returncode != 0:
        stats["refused"] += 1
        t.ok(after == before and err.strip(), "%s = %s: refused (exit %d), previous files kept" %
             (field, name, p.returncode), (err[-300:], sorted(k for k in after if after[k] != before.get(k))))
        return
    stats["accepted"] += 1
    if must_refuse:
        t.ok(False, "%s = %s: must be refused (a control character, invalid UTF-8 or over 1 KiB), "
             "was accepted" % (field, name))
        return
    problems = reads_back(root, tmp, good, field, value)
    t.ok(not problems, "%s = %s: accepted, every output reads back with its structure and the value" %
         (field, name), problems)


def main():
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="cn-hostile-")
    stats = {"test": "hostile", "cases": 0, "refused": 0, "accepted": 0}
    try:
        with FakeCloud(os.path.join(tmp, "fc"), platform="aws") as c:
            inst = c.instance
            clean = {k: inst[k] for k in FIELDS}
            root = make_root(tmp, c.url)
            p = run_agent(root, "--platform", "aws")
            t.eq(p.returncode, 0, "clean run writes the env file, drop-in and cloud.conf") or t.diag(p.stderr)
            good = good_view(root)
            for field in FIELDS:
                for name, value in VALUES.items():
                    c.update_instance(inst["id"], {field: value})
                    check_case(t, tmp, root, good, name, field, value,
                               lambda: run_agent(root, "--platform", "aws"), stats, name in MUST_REFUSE)
                    c.update_instance(inst["id"], clean)

            # Invalid UTF-8 cannot travel through the fake cloud's JSON admin API: an OpenStack
            # config drive (read from disk, no network) carries it instead.
            os_inst = c.add_instance({"platform": "openstack"})
            oroot = make_root(tmp, "http://127.0.0.1:9")
            with open(os.path.join(oroot, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
                yaml.safe_dump({"platform": "openstack", "role": "control-plane",
                                "metadata": {"configDrive": "/cd", "endpoint": "http://127.0.0.1:9", "retries": 0}}, f)
            c.write_config_drive(os_inst["id"], os.path.join(oroot, "cd"), fmt="config-2")
            p = run_agent(oroot)
            t.eq(p.returncode, 0, "openstack config drive: clean run") or t.diag(p.stderr)
            ogood = good_view(oroot)
            t.ok(ogood["pod"] is not None, "openstack: the static pod is written too")
            docs = []
            for d, _, names in os.walk(os.path.join(oroot, "cd")):
                docs += [os.path.join(d, n) for n in names if n == "meta_data.json"]
            originals = {}
            for path in docs:
                with open(path, "rb") as f:
                    originals[path] = f.read()
            for field, key, bad in (("zone", b'"availability_zone": "', b"\xff\xfe"),
                                    ("hostname", b'"hostname": "', b"\xc3\x28"),
                                    ("hostname", b'"hostname": "', b"\xed\xa0\x80")):
                for path, doc in originals.items():
                    with open(path, "wb") as f:
                        f.write(doc.replace(key, key + bad, 1))
                check_case(t, tmp, oroot, ogood, "invalid UTF-8 %r" % bad, field, None, lambda: run_agent(oroot),
                           stats, True)
                for path, doc in originals.items():
                    with open(path, "wb") as f:
                        f.write(doc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record(stats)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
