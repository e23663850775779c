#!/usr/bin/env python3
"""cloudnode-agent against tests/fake-cloud on loopback: every platform end to end, the fetch
policy (retries, optional keys, IMDSv1 fallback, deadline, size cap), hostile metadata (rejected,
previous good files kept), the outputs of each role, sd_notify, and the metadata subcommand."""
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

import yaml  # noqa: E402

AGENT = build("agent", "cloudnode-agent")
ENV = "run/metadata/cloudnode"
DROPIN = "etc/systemd/system/kubelet.service.d/20-cloudnode.conf"
CLOUD_CONF = "etc/kubernetes/bootstrap-configs/cloud.conf"
POD = "etc/kubernetes/manifests/cloudnode-cloud-node.yaml"
IMAGE = "example.com/cloudnode-initializer:test"


def make_root(tmp, config, name="root"):
    root = tempfile.mkdtemp(prefix=name, dir=tmp)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump(config, f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        json.dump({"cloudControllerManager": IMAGE}, f)
    return root


def agent(root, *args, env=None, timeout=60):
    e = dict(os.environ, CLOUDNODE_LOG_TARGET="console")
    e.pop("NOTIFY_SOCKET", None)
    e.update(env or {})
    p = subprocess.run([AGENT, "--root", root] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def sh_env(path):
    """The env file as a POSIX shell reads it (`.`), every CLOUDNODE_/AFTERBURN_ variable."""
    out = subprocess.run(["sh", "-c", 'set -a; . "$1" && env -0', "sh", path], stdout=subprocess.PIPE, check=True).stdout
    env = {}
    for item in out.decode().split("\0"):
        k, _, v = item.partition("=")
        if k.startswith(("CLOUDNODE_", "AFTERBURN_")):
            env[k] = v
    return env


def read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()


def mode(root, rel):
    return stat.S_IMODE(os.stat(os.path.join(root, rel)).st_mode)


def expected(platform, inst):
    """What the agent must report for a fake-cloud instance, by the rules of each platform's
    cloud-controller-manager (providerID) and the documented derivations."""
    e = {"CLOUDNODE_PLATFORM": platform, "CLOUDNODE_IPV4_PRIVATE": inst["private_ipv4"]}
    if platform == "aws":
        e.update(CLOUDNODE_INSTANCE_ID=inst["id"], CLOUDNODE_PROVIDER_ID="aws:///%s/%s" % (inst["zone"], inst["id"]),
                 CLOUDNODE_ZONE=inst["zone"], CLOUDNODE_REGION=inst["region"], CLOUDNODE_INSTANCE_TYPE=inst["type"])
    elif platform == "openstack":
        e.update(CLOUDNODE_INSTANCE_ID=inst["id"], CLOUDNODE_PROVIDER_ID="openstack:///%s" % inst["id"],
                 CLOUDNODE_ZONE=inst["zone"], CLOUDNODE_INSTANCE_TYPE=inst["type"])
    elif platform == "hetzner":
        e.update(CLOUDNODE_INSTANCE_ID=inst["id"], CLOUDNODE_PROVIDER_ID="hcloud://%s" % inst["id"],
                 CLOUDNODE_ZONE=inst["zone"], CLOUDNODE_REGION=inst["zone"].split("-")[0])
    elif platform == "gcp":
        e.update(CLOUDNODE_ZONE=inst["zone"], CLOUDNODE_REGION=inst["zone"].rsplit("-", 1)[0],
                 CLOUDNODE_INSTANCE_TYPE=inst["type"])
    elif platform == "azure":
        e.update(CLOUDNODE_REGION=inst["region"], CLOUDNODE_ZONE="%s-%s" % (inst["region"], inst["zone"]),
                 CLOUDNODE_INSTANCE_TYPE=inst["type"])
    elif platform == "digitalocean":
        e.update(CLOUDNODE_INSTANCE_ID=str(inst["id"]), CLOUDNODE_PROVIDER_ID="digitalocean://%s" % inst["id"],
                 CLOUDNODE_REGION=inst["region"])
    if platform != "hetzner" or inst.get("public_ipv4"):
        e["CLOUDNODE_IPV4_PUBLIC"] = inst["public_ipv4"]
    return e


def check_platform(t, tmp, platform):
    with FakeCloud(os.path.join(tmp, "fc-" + platform), platform=platform) as c:
        inst = c.instance
        root = make_root(tmp, {"metadata": {"endpoint": c.url}})
        rc, out, err = agent(root, "--platform", platform, "--once")
        t.eq(rc, 0, "%s: --once succeeds" % platform) or t.diag(err)
        if rc != 0:
            return
        env = sh_env(os.path.join(root, ENV))
        want = expected(platform, inst)
        t.eq({k: env.get(k) for k in want}, want, "%s: env file values" % platform)
        pid = env.get("CLOUDNODE_PROVIDER_ID", "")
        if platform == "gcp":
            t.ok(pid.startswith("gce://") and pid.endswith("/%s/%s" % (inst["zone"], inst["name"])),
                 "gcp: providerID gce://<project>/<zone>/<name>", pid)
        if platform == "azure":
            t.ok(pid.startswith("azure:///subscriptions/") and pid.endswith("/virtualMachines/%s" % inst["name"]),
                 "azure: providerID azure://<resource id>", pid)
        t.ok(env.get("CLOUDNODE_HOSTNAME"), "%s: hostname present" % platform, env)
        dropin = read(root, DROPIN)
        t.ok('Environment="KUBELET_PROVIDERID=%s"' % pid in dropin and "KUBELET_NODE_NAME=" in dropin,
             "%s: kubelet drop-in" % platform, dropin)
        t.eq((mode(root, ENV), mode(root, DROPIN)), (0o644, 0o644), "%s: modes 0644" % platform)
        t.ok(not os.path.exists(os.path.join(root, CLOUD_CONF)), "%s: worker gets no cloud.conf" % platform)


def test_platforms(t, tmp):
    for p in ("aws", "gcp", "azure", "digitalocean", "hetzner", "openstack"):
        check_platform(t, tmp, p)


def test_config_drives(t, tmp):
    with FakeCloud(os.path.join(tmp, "fc-drives")) as c:
        os_inst = c.add_instance({"platform": "openstack"})
        drive = os.path.join(tmp, "configdrive")
        c.write_config_drive(os_inst["id"], drive, fmt="config-2")
        # An endpoint that refuses connections: the drive alone must be enough.
        root = make_root(tmp, {"platform": "openstack",
                               "metadata": {"configDrive": drive, "endpoint": "http://127.0.0.1:9"}})
        # --root prefixes the drive path too; the drive is outside, so use a root-relative path.
        os.rename(drive, os.path.join(root, "configdrive"))
        with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
            yaml.safe_dump({"platform": "openstack", "metadata": {"configDrive": "/configdrive",
                                                                  "endpoint": "http://127.0.0.1:9"}}, f)
        rc, out, err = agent(root, "--once")
        env = sh_env(os.path.join(root, ENV)) if rc == 0 else {}
        t.ok(rc == 0 and env.get("CLOUDNODE_PROVIDER_ID") == "openstack:///%s" % os_inst["id"],
             "openstack: config drive preferred, no network needed", (rc, err, env))
        t.eq(env.get("CLOUDNODE_IPV4_PRIVATE"), os_inst["private_ipv4"], "openstack: drive's ec2 document")

        px = c.add_instance({"platform": "proxmoxve"})
        root = make_root(tmp, {"platform": "proxmoxve"})
        c.write_config_drive(px["id"], os.path.join(root, "run", "cloudnode", "cidata"), fmt="nocloud")
        rc, out, err = agent(root, "--once")
        env = sh_env(os.path.join(root, ENV)) if rc == 0 else {}
        t.ok(rc == 0 and env.get("CLOUDNODE_INSTANCE_ID") and "CLOUDNODE_PROVIDER_ID" not in env,
             "proxmoxve: cidata drive at the default mount point; no providerID without the SMBIOS UUID",
             (rc, err, env))
        t.eq(env.get("CLOUDNODE_IPV4_PRIVATE"), px["private_ipv4"], "proxmoxve: address from network-config")
        # DMI's SMBIOS uuid, read under the root, names the VM in the providerID.
        dmi = os.path.join(root, "sys", "class", "dmi", "id")
        os.makedirs(dmi)
        with open(os.path.join(dmi, "product_uuid"), "w") as f:
            f.write("0C6D4F2B-1B2C-4F5A-9A2B-1234567890AB\n")
        rc, out, err = agent(root, "--once")
        env = sh_env(os.path.join(root, ENV)) if rc == 0 else {}
        t.eq(env.get("CLOUDNODE_PROVIDER_ID"), "proxmox://0c6d4f2b-1b2c-4f5a-9a2b-1234567890ab",
             "proxmoxve: providerID from the SMBIOS uuid")

        # Non-UTF-8 on a drive: rejected, nothing written.
        root = make_root(tmp, {"platform": "openstack", "metadata": {"configDrive": "/cd"}})
        c.write_config_drive(os_inst["id"], os.path.join(root, "cd"), fmt="config-2")
        md = os.path.join(root, "cd", "openstack", "latest", "meta_data.json")
        with open(md, "rb") as f:
            doc = f.read()
        with open(md, "wb") as f:
            f.write(doc.replace(b'"hostname": "', b'"hostname": "\xff\xfe', 1))
        rc, out, err = agent(root, "--once")
        t.ok(rc == 4 and "meta_data.json" in err and not os.path.exists(os.path.join(root, ENV)),
             "non-UTF-8 in a drive document rejected (exit 4), naming the document", (rc, err))


def test_fetch_policy(t, tmp):
    with FakeCloud(os.path.join(tmp, "fc-policy"), platform="aws") as c:
        inst = c.instance
        cfg = {"metadata": {"endpoint": c.url, "timeout": "1s", "retries": 3, "deadline": "20s"}}

        c.fail({"path": "/meta-data/instance-id$", "status": 500, "count": 2})
        c.clear_requests()
        root = make_root(tmp, cfg)
        rc, out, err = agent(root, "--platform", "aws", "--once")
        hits = [r for r in c.requests() if r["path"].endswith("/meta-data/instance-id")]
        t.ok(rc == 0 and len(hits) == 3, "a 500 is retried: 3 GETs, then success", (rc, len(hits), err))
        c.clear_faults()

        c.fail({"path": "/meta-data/public-ipv4$", "status": 404})
        root = make_root(tmp, cfg)
        rc, out, err = agent(root, "--platform", "aws", "--once")
        env = sh_env(os.path.join(root, ENV)) if rc == 0 else {}
        t.ok(rc == 0 and "CLOUDNODE_IPV4_PUBLIC" not in env and env.get("CLOUDNODE_INSTANCE_ID") == inst["id"],
             "404 on an optional key: absent, not an error", (rc, err))
        c.clear_faults()

        c.fail({"path": "/meta-data/instance-id$", "status": 404})
        root = make_root(tmp, cfg)
        rc, out, err = agent(root, "--platform", "aws", "--once")
        t.ok(rc == 1 and "instance-id" in err and "404" in err, "404 on a required key: exit 1 naming it", (rc, err))
        c.clear_faults()

        c.fail({"method": "PUT", "path": "/api/token", "status": 403})
        c.clear_requests()
        root = make_root(tmp, cfg)
        rc, out, err = agent(root, "--platform", "aws", "--once")
        gets = [r for r in c.requests() if r["method"] == "GET"]
        t.ok(rc == 0 and gets and all("X-aws-ec2-metadata-token" not in r["headers"] for r in gets),
             "IMDSv2 token refused: falls back to IMDSv1", (rc, err))
        root = make_root(tmp, dict(cfg, metadata=dict(cfg["metadata"], requireIMDSv2=True)))
        rc, out, err = agent(root, "--platform", "aws", "--once")
        t.ok(rc == 1 and "IMDSv2" in err, "requireIMDSv2: no fallback", (rc, err))
        c.clear_faults()

        c.clear_requests()
        root = make_root(tmp, cfg)
        rc, out, err = agent(root, "--platform", "aws", "--once")
        gets = [r for r in c.requests() if r["method"] == "GET"]
        t.ok(rc == 0 and gets and all("X-aws-ec2-metadata-token" in r["headers"] for r in gets),
             "IMDSv2: every GET carries the session token", (rc, err))

        c.fail({"path": "/meta-data/instance-type$", "latency": 30})
        root = make_root(tmp, {"metadata": {"endpoint": c.url, "timeout": "300ms", "retries": 100,
                                            "deadline": "2s"}})
        start = time.monotonic()
        rc, out, err = agent(root, "--platform", "aws", "--once")
        took = time.monotonic() - start
        t.ok(rc == 1 and "deadline" in err and took < 20, "a slow key ends at the overall deadline", (rc, err, took))
        c.clear_faults()

        c.fail({"path": "/meta-data/hostname$", "status": 200, "body": "x" * (70 * 1024)})
        root = make_root(tmp, cfg)
        rc, out, err = agent(root, "--platform", "aws", "--once")
        t.ok(rc == 4 and "limit" in err, "oversized response rejected (exit 4)", (rc, err))
        c.clear_faults()


def test_hostile_keeps_previous(t, tmp):
    with FakeCloud(os.path.join(tmp, "fc-hostile"), platform="aws") as c:
        root = make_root(tmp, {"role": "control-plane", "metadata": {"endpoint": c.url, "retries": 0}})
        rc, out, err = agent(root, "--platform", "aws", "--once")
        t.eq(rc, 0, "control-plane: good run") or t.diag(err)
        files = [ENV, DROPIN, CLOUD_CONF]
        before = {f: (read(root, f), os.stat(os.path.join(root, f)).st_mtime_ns) for f in files}
        t.eq(mode(root, CLOUD_CONF), 0o600, "cloud.conf 0600")
        t.eq(mode(root, POD), 0o600, "aws has a cluster-mode provider: the bootstrap static pod is written")
        t.ok("Zone = " in read(root, CLOUD_CONF), "cloud.conf carries the zone", read(root, CLOUD_CONF))

        rc, out, err = agent(root, "--platform", "aws", "--once")
        after = {f: (read(root, f), os.stat(os.path.join(root, f)).st_mtime_ns) for f in files}
        t.ok(rc == 0 and after == before and "0 file(s) updated" in err, "unchanged content is not rewritten",
             (rc, err))

        for name, body in (("newline", "host\nKUBELET_PROVIDERID=evil"), ("NUL", "host\u0000x"),
                           ("escape", "host\u001b[2J")):
            c.fail({"path": "/meta-data/hostname$", "status": 200, "body": body})
            rc, out, err = agent(root, "--platform", "aws", "--once")
            now = {f: (read(root, f), os.stat(os.path.join(root, f)).st_mtime_ns) for f in files}
            t.ok(rc == 4 and now == before and "hostname" in err,
                 "hostile hostname (%s): exit 4, previous files kept" % name, (rc, err))
            c.clear_faults()

        # Values that are legal but hostile to naive writers are written so they read back exactly.
        weird = "m5.\"large' $(id) `id` \\ [Global] #: &a *b"
        c.fail({"path": "/meta-data/instance-type$", "status": 200, "body": weird})
        c.fail({"path": "/meta-data/placement/availability-zone$", "status": 200, "body": 'us-east-1a"\n[Evil]'})
        rc, out, err = agent(root, "--platform", "aws", "--once")
        t.ok(rc == 4, "newline in the zone (used in cloud.conf) rejected", (rc, err))
        c.clear_faults()
        c.fail({"path": "/meta-data/instance-type$", "status": 200, "body": weird})
        c.fail({"path": "/meta-data/placement/availability-zone$", "status": 200, "body": 'us-east-1a"; [Evil] #'})
        rc, out, err = agent(root, "--platform", "aws", "--once")
        env = sh_env(os.path.join(root, ENV)) if rc == 0 else {}
        t.eq((rc, env.get("CLOUDNODE_INSTANCE_TYPE")), (0, weird), "quotes, $(), backticks, [section]: read back exactly")
        conf = read(root, CLOUD_CONF)
        t.ok([l for l in conf.splitlines() if l.startswith("[")] == ["[Global]"],
             "cloud.conf structure unchanged by a hostile zone", conf)
        c.clear_faults()


def test_static_pod_where_a_provider_exists(t, tmp):
    for platform in ("aws", "azure", "digitalocean", "gcp", "hetzner", "openstack"):
        with FakeCloud(os.path.join(tmp, "fc-pod-" + platform), platform=platform) as c:
            root = make_root(tmp, {"role": "control-plane", "metadata": {"endpoint": c.url, "retries": 0}},
                             name="root-pod-" + platform)
            rc, out, err = agent(root, "--platform", platform, "--once")
            t.eq(rc, 0, "%s control-plane: good run" % platform) or t.diag(err)
            t.eq((mode(root, CLOUD_CONF), mode(root, POD)), (0o600, 0o600),
                 "%s: cloud.conf and the bootstrap static pod written, 0600" % platform)
            pod = yaml.safe_load(read(root, POD))
            c0 = pod["spec"]["containers"][0]
            t.ok(c0["image"] == IMAGE and "--cloud-provider=%s" % platform in c0["args"],
                 "%s: static pod with the images.json image and the platform as provider" % platform, c0)


def test_systemd_reads_env_file(t, tmp):
    """systemd's own env-file parser (the one EnvironmentFile= uses) through the environment.d
    generator, which reads files with it and prints the result. The generator also expands $VAR,
    which EnvironmentFile= does not, so this value has no '$' (sh covers that case above)."""
    gen = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
    if not os.path.exists(gen):
        t.skip("systemd reads the env file back", "systemd's environment.d generator not installed")
        return
    with FakeCloud(os.path.join(tmp, "fc-sd"), platform="aws") as c:
        weird = "a\"b'c `id` \\ d [x] #y"
        c.fail({"path": "/meta-data/instance-type$", "status": 200, "body": weird})
        root = make_root(tmp, {"metadata": {"endpoint": c.url}})
        rc, out, err = agent(root, "--platform", "aws", "--once")
        conf = os.path.join(tmp, "xdg", "environment.d")
        os.makedirs(conf, exist_ok=True)
        with open(os.path.join(root, ENV)) as src, open(os.path.join(conf, "50-cloudnode.conf"), "w") as dst:
            dst.write(src.read())
        p = subprocess.run([gen], env={"XDG_CONFIG_HOME": os.path.join(tmp, "xdg")}, stdout=subprocess.PIPE,
                           text=True)
        got = None
        for line in p.stdout.splitlines():
            if line.startswith("CLOUDNODE_INSTANCE_TYPE="):
                # The generator prints shell-escaped values; sh unescapes them.
                got = subprocess.run(["sh", "-c", "eval \"$1\"; printf %s \"$CLOUDNODE_INSTANCE_TYPE\"", "sh", line],
                                     stdout=subprocess.PIPE, text=True).stdout
        t.eq(got, weird, "systemd's env-file parser reads the value back exactly")


def test_cli(t, tmp):
    with FakeCloud(os.path.join(tmp, "fc-cli"), platform="gcp") as c:
        inst = c.instance
        root = make_root(tmp, {"metadata": {"endpoint": c.url}})
        rc, out, err = agent(root, "metadata", "--platform", "gcp", "--format", "json")
        doc = json.loads(out) if rc == 0 else {}
        t.ok(rc == 0 and doc.get("zone") == inst["zone"] and doc.get("ipv4Private") == [inst["private_ipv4"]],
             "metadata --format json", (rc, out, err))
        t.ok(not os.path.exists(os.path.join(root, ENV)), "metadata subcommand writes nothing")
        rc, out, err = agent(root, "metadata", "--platform", "gcp")
        t.ok(rc == 0 and 'CLOUDNODE_ZONE="%s"' % inst["zone"] in out, "metadata --format env (default)", out)
        rc, out, err = agent(root, "--platform", "gcp", "--once", "--afterburn-compat")
        env = sh_env(os.path.join(root, ENV))
        t.eq((env.get("AFTERBURN_GCP_IP_LOCAL_0"), env.get("AFTERBURN_GCP_MACHINE_TYPE")),
             (inst["private_ipv4"], inst["type"]), "--afterburn-compat: Afterburn's names")

        # The detected platform: kernel command line under --root.
        os.makedirs(os.path.join(root, "proc"))
        with open(os.path.join(root, "proc", "cmdline"), "w") as f:
            f.write("root=/dev/vda1 ignition.platform.id=gcp\n")
        rc, out, err = agent(root, "metadata", "--format", "json")
        t.ok(rc == 0 and json.loads(out).get("platform") == "gcp", "platform from ignition.platform.id=", err)

        rc, out, err = agent(root, "--once", "--dry-run", "--platform", "gcp")
        t.ok(rc == 0 and "# /run/metadata/cloudnode" in out, "--dry-run prints the files", out)

        # sd_notify: READY=1 with a STATUS= line.
        sock_path = os.path.join(tmp, "notify.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(sock_path)
        s.settimeout(5)
        rc, out, err = agent(root, "--platform", "gcp", "--once", env={"NOTIFY_SOCKET": sock_path})
        msgs = []
        try:
            while True:
                s.settimeout(0.5)
                msgs.append(s.recv(4096).decode())
        except socket.timeout:
            pass
        s.close()
        ready = [m for m in msgs if "READY=1" in m.split("\n")]
        t.ok(rc == 0 and ready and "STATUS=gcp instance %s" % inst["id"] in ready[0], "READY=1 and STATUS= sent",
             msgs)


def journal_capture(args):
    """Our own socket at journald's address, so the agent's sd_journal_sendv() datagrams come to
    us. Prints them as JSON lists of fields. With --private-mount it runs inside a private mount
    namespace (see test_journal_fields) and puts a tmpfs over /run/systemd first; without, no
    journald owns the address and the socket is bound there directly, then removed."""
    private = args[0] == "--private-mount"
    if private:
        args = args[1:]
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run/systemd"], check=True)
    os.makedirs("/run/systemd/journal", exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("/run/systemd/journal/socket")
    rc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        env=dict(os.environ, CLOUDNODE_LOG_TARGET="journal")).returncode
    if not private:
        os.unlink("/run/systemd/journal/socket")  # the bound socket keeps the datagrams it has
    s.settimeout(0.2)
    entries = []
    try:
        while True:
            data = s.recv(1 << 20)
            fields, i = {}, 0
            # Native protocol: KEY=value\n, or KEY\n<le64 size><value>\n for binary values.
            while i < len(data):
                nl = data.index(b"\n", i)
                line = data[i:nl]
                if b"=" in line:
                    k, _, v = line.partition(b"=")
                    i = nl + 1
                else:
                    k = line
                    n = int.from_bytes(data[nl + 1:nl + 9], "little")
                    v = data[nl + 9:nl + 9 + n]
                    i = nl + 9 + n + 1
                fields[k.decode()] = v.decode(errors="replace")
            entries.append(fields)
    except socket.timeout:
        pass
    print(json.dumps({"rc": rc, "entries": entries}))


def test_journal_fields(t, tmp):
    # Where journald listens, a private mount namespace hides its socket from the capture; in a
    # root without journald (a build chroot, whose "/" cannot be made private) nothing listens at
    # the address and the capture binds it directly.
    journald = os.path.exists("/run/systemd/journal/socket")
    if os.geteuid() != 0 or (journald and not shutil.which("unshare")):
        t.skip("journal fields", "needs root, and unshare(1) for a private mount namespace where journald runs")
        return
    with FakeCloud(os.path.join(tmp, "fc-journal"), platform="aws") as c:
        inst = c.instance
        root = make_root(tmp, {"metadata": {"endpoint": c.url}})
        capture = [sys.executable, os.path.abspath(__file__), "--journal-capture"]
        if journald:
            capture = ["unshare", "-m", "--propagation", "private"] + capture + ["--private-mount"]
        p = subprocess.run(capture + [AGENT, "--root", root, "--platform", "aws", "--once"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        try:
            out = json.loads(p.stdout)
        except ValueError:
            t.ok(False, "journal capture ran", p.stdout + p.stderr)
            return
        summary = [e for e in out["entries"] if e.get("CLOUDNODE_INSTANCE_ID")]
        t.ok(out["rc"] == 0 and summary, "summary line sent to the journal", out)
        if summary:
            e = summary[-1]
            t.eq((e.get("CLOUDNODE_PLATFORM"), e.get("CLOUDNODE_INSTANCE_ID"), e.get("SYSLOG_IDENTIFIER")),
                 ("aws", inst["id"], "cloudnode-agent"), "journal fields CLOUDNODE_PLATFORM, CLOUDNODE_INSTANCE_ID")
            t.ok(inst["id"] in e.get("MESSAGE", ""), "summary MESSAGE names the instance", e)


def test_errors(t, tmp):
    root = make_root(tmp, {"metdata": {}})
    rc, out, err = agent(root, "--once", "--platform", "aws")
    t.ok(rc == 2 and "unknown key 'metdata'" in err, "unknown config key: exit 2 naming the key", (rc, err))
    root = make_root(tmp, {})
    rc, out, err = agent(root, "--once")
    t.ok(rc == 3 and "detect" in err, "no platform detectable: exit 3", (rc, err))
    os.makedirs(os.path.join(root, "proc"))
    with open(os.path.join(root, "proc", "cmdline"), "w") as f:
        f.write("ignition.platform.id=vmware\n")
    rc, out, err = agent(root, "--once")
    t.ok(rc == 3 and "not supported" in err, "unsupported platform on the command line: exit 3", (rc, err))
    rc, out, err = agent(root, "--bogus")
    t.eq(rc, 2, "bad flag: exit 2")
    rc, out, err = agent(root, "--help")
    t.ok(rc == 0 and "Exit status" in out, "--help documents the exit codes", out)
    root = make_root(tmp, {"platform": "aws", "metadata": {"endpoint": "http://127.0.0.1:9", "retries": 1,
                                                           "timeout": "200ms"}})
    rc, out, err = agent(root, "--once")
    t.ok(rc == 1 and "127.0.0.1:9" in err, "connection refused: exit 1 naming the URL", (rc, err))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--journal-capture":
        journal_capture(sys.argv[2:])
        return 0
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        for fn in (test_platforms, test_config_drives, test_fetch_policy, test_hostile_keeps_previous,
                   test_static_pod_where_a_provider_exists,
                   test_systemd_reads_env_file, test_cli, test_journal_fields, test_errors):
            t.run(fn, tempfile.mkdtemp(dir=tmp))
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
