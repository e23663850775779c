#!/usr/bin/env python3
"""Real boot (TESTING.md tier 3, `make check-vm`): a Debian 12 guest with systemd as PID 1,
provisioned by the real Ignition with the project's config for a role, boots under QEMU and
runs cloudnode-agent and cloudnode-initializer against tests/fake-cloud and
tests/fake-kube-apiserver on the host.

First a harness boot proves the machinery alone (Ignition's files and first-boot presets, the
serial console, the results disk, a clean power-off); then one boot per (platform, role) case.

Environment: CN_VM_CACHE (rootfs cache dir, default BUILDDIR/tests/vm/cache), CN_VM_CASES
(e.g. "aws:bootstrap hetzner:worker"), CN_VM_ACCEL (kvm or tcg), CN_VM_KEEP=1 keeps the work
dir, CN_VM_MIRROR overrides the apt mirror."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)

from cntap import Tap, build, src  # noqa: E402
import vmtest  # noqa: E402

# systemd's catalog id of "Unit X entered failed state" (SD_MESSAGE_UNIT_FAILURE_RESULT).
MESSAGE_UNIT_FAILED = "d9b373ed55a64feb8242e02dbe79a49c"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
KUBELET_USER = "system:node-registration"
DEFAULT_CASES = "aws:bootstrap hetzner:worker"
DROPIN = "/etc/systemd/system/kubelet.service.d/20-cloudnode.conf"
CLOUD_CONF = "/etc/kubernetes/bootstrap-configs/cloud.conf"
STATIC_POD = "/etc/kubernetes/manifests/cloudnode-cloud-node.yaml"
ENV_FILE = "/run/metadata/cloudnode"


def unit_props(text):
    props = {}
    for line in (text or "").splitlines():
        k, _, v = line.partition("=")
        props[k] = v
    return props


def env_file(text):
    """KEY=value lines with shell quoting, as the agent writes them."""
    import shlex
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition("=")
        out[k] = "".join(shlex.split(v)) if v else ""
    return out


def check_boot(t, g, res):
    """What every boot must show: it powered itself off cleanly and nothing failed."""
    t.ok(not g.timed_out and g.exit_code == 0, "%s: guest powered itself off (qemu exit 0, no timeout)" % g.name,
         g.diagnostics())
    t.ok("reboot: Power down" in g.serial(), "%s: serial console shows the kernel's power-down" % g.name)
    t.eq(g.fs_state(), "clean", "%s: root file system was unmounted cleanly" % g.name)
    t.ok("system-state" in res, "%s: collector wrote its results to the second disk" % g.name)
    t.eq((g.result_text("system-state") or "").strip(), "running",
         "%s: boot finished with no failed unit (is-system-running)" % g.name)
    t.eq((g.result_text("failed-units") or "").strip(), "", "%s: no failed units at collection" % g.name)
    journal = g.journal()
    t.ok(len(journal) > 100, "%s: persistent journal read back (%d entries)" % (g.name, len(journal)))
    failed = ["%s: %s" % (e.get("UNIT", "?"), e.get("MESSAGE", "")) for e in journal
              if e.get("MESSAGE_ID") == MESSAGE_UNIT_FAILED]
    t.eq(failed, [], "%s: no unit failed during boot or shutdown (journal)" % g.name)
    boots = {e.get("_BOOT_ID") for e in journal}
    t.eq(len(boots), 1, "%s: one boot in the journal" % g.name)
    return journal


# --- the harness alone -------------------------------------------------------------------------

PROBE_UNIT = """[Unit]
Description=Ignition-enabled probe of the real-boot test
[Service]
Type=notify
NotifyAccess=all
RemainAfterExit=yes
ExecStart=/bin/sh -c 'test "$(cat /etc/cloudnode-vmtest/ignition-probe)" = written-by-ignition && systemd-notify --ready'
[Install]
WantedBy=multi-user.target
"""


def harness(t, base, work, stage):
    g = vmtest.Guest(base, work, "harness")
    g.add_tree(stage)
    g.install_harness(units=["cloudnode-vmtest-probe.service"], files=["/etc/cloudnode-vmtest/ignition-probe"])
    cfg = {"ignition": {"version": "3.3.0"},
           "storage": {"files": [{"path": "/etc/cloudnode-vmtest/ignition-probe", "mode": 0o640,
                                  "contents": {"source": "data:,written-by-ignition"}}]},
           "systemd": {"units": [{"name": "cloudnode-vmtest-probe.service", "enabled": True,
                                  "contents": PROBE_UNIT}]}}
    g.ignition(cfg)
    with open(g.root + "/etc/systemd/system-preset/20-ignition.preset") as f:
        t.eq(f.read().split(), ["enable", "cloudnode-vmtest-probe.service"],
             "harness: Ignition's files stage wrote its preset")
    g.make_disks()
    g.boot("file", {})
    res = g.results()
    check_boot(t, g, res)
    props = unit_props(g.result_text("unit-cloudnode-vmtest-probe.service"))
    t.ok(props.get("ActiveState") == "active" and props.get("Result") == "success",
         "harness: unit enabled only through Ignition's preset ran at first boot and sent READY",
         "%s" % {k: props.get(k) for k in ("ActiveState", "SubState", "Result", "UnitFileState")})
    probe = res.get("files/etc/cloudnode-vmtest/ignition-probe")
    t.ok(probe is not None and probe.mode & 0o777 == 0o640,
         "harness: file written by Ignition is there with its mode 0640",
         probe and oct(probe.mode))
    return g


# --- cloudnode on a platform, in a role -------------------------------------------------------

def missing_pieces(role):
    """What of the system under test is not in this tree yet (named, so the report says so)."""
    need = {
        "Ignition config for role %s" % role: build("ignition", "cloudnode-%s.ign" % role),
        "cloudnode-agent": build("agent", "cloudnode-agent"),
        "cloudnode-initializer": build("initializer", "cloudnode-initializer"),
        "initializer unit": src("initializer", "cloudnode-initializer.service"),
        "tests/fake-cloud": src("tests", "fake-cloud"),
        "tests/pylib/fakecloud.py": src("tests", "pylib", "fakecloud.py"),
        "tests/fake-kube-apiserver": src("tests", "fake-kube-apiserver"),
        "tests/pylib/fakekube.py": src("tests", "pylib", "fakekube.py"),
    }
    return [k for k, p in need.items() if not os.path.exists(p)]


def kubelet_rbac(kube):
    """Real clusters let kubelets register through the Node authorizer; the fake API server
    has RBAC only, so the stand-in's identity gets the same rights on Nodes through a role."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cloudnode-vmtest:node-registration"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "create"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "cloudnode-vmtest:node-registration"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "cloudnode-vmtest:node-registration"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBELET_USER}]}
    for path, body in (("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
                       ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)):
        st, r = kube.api("POST", path, body)
        if st != 201:
            raise vmtest.VMError("creating %s failed: %s %s" % (path, st, r))


def guest_kubeconfig(kube, token):
    with open(os.path.join(kube.state_dir, "ca.crt"), "rb") as f:
        ca = f.read()
    import base64
    cfg = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "vmtest", "cluster": {
               "server": "https://%s:%d" % (vmtest.KUBE_API_ADDR, vmtest.KUBE_API_PORT),
               "certificate-authority-data": base64.b64encode(ca).decode()}}],
           "users": [{"name": "node", "user": {"token": token}}],
           "contexts": [{"name": "vmtest", "context": {"cluster": "vmtest", "user": "node"}}],
           "current-context": "vmtest"}
    return json.dumps(cfg, indent=1).encode(), ca


def cloudnode_case(t, base, work, stage, platform, role):
    from fakecloud import FakeCloud
    from fakekube import FakeKube
    name = "%s-%s" % (platform, role)
    cloud_state = os.path.join(work, name + "-cloud")
    kube_state = os.path.join(work, name + "-kube")
    with FakeCloud(cloud_state) as cloud, \
            FakeKube(kube_state, extra_args=["--san", vmtest.KUBE_API_ADDR]) as kube:
        inst = cloud.add_instance({"platform": platform, "name": "vmtest-" + name,
                                   "private_ipv4": vmtest.GUEST_IP, "mac": vmtest.GUEST_MAC,
                                   "require_token": platform == "aws"})
        with FakeCloud(cloud_state, instance=inst["id"]) as mds:
            mds_port = int(mds.url.rstrip("/").rsplit(":", 1)[1])
            kube_port = int(kube.url.rstrip("/").rsplit(":", 1)[1])
            kubelet_rbac(kube)
            kubelet_token = kube.token_for(KUBELET_USER, ["system:authenticated"])
            # The node's identity for cloudnode-initializer in node mode.
            node_token = kube.token_for("system:serviceaccount:kube-system:cloudnode-initializer",
                                        ["system:serviceaccounts", "system:serviceaccounts:kube-system"])
            kubeconfig, ca = guest_kubeconfig(kube, node_token)

            g = vmtest.Guest(base, work, name)
            g.add_tree(stage)
            g.write_file("/etc/cloudnode-vmtest/ca.crt", ca)
            g.write_file("/etc/cloudnode-vmtest/kubelet.token", kubelet_token, 0o600)
            g.install_harness(
                units=["cloudnode-agent.service", "cloudnode-initializer.service", "kubelet.service"],
                files=[ENV_FILE, DROPIN, CLOUD_CONF, STATIC_POD, "/etc/cloudnode/cloudnode.yaml"],
                kube_env={"KUBE_SERVER": "https://%s:%d" % (vmtest.KUBE_API_ADDR, vmtest.KUBE_API_PORT),
                          "KUBE_CA": "/etc/cloudnode-vmtest/ca.crt",
                          "KUBE_TOKEN_FILE": "/etc/cloudnode-vmtest/kubelet.token"})
            with open(build("ignition", "cloudnode-%s.ign" % role), "rb") as f:
                project = f.read()
            g.ignition(vmtest.Guest.merge_config(project, files=[
                ("/etc/kubernetes/kubeconfig", kubeconfig, 0o600)]))
            g.make_disks()
            g.boot(platform, {"vpc": [(vmtest.KUBE_API_ADDR, vmtest.KUBE_API_PORT, kube_port)],
                              "metadata": [("169.254.169.254", 80, mds_port)]})
            res = g.results()
            journal = check_boot(t, g, res)
            check_cloudnode(t, g, res, journal, inst, kube, mds, platform, role)
    return g


def check_cloudnode(t, g, res, journal, inst, kube, mds, platform, role):
    n = g.name
    agent = unit_props(g.result_text("unit-cloudnode-agent.service"))
    t.ok(agent.get("Type") == "notify" and agent.get("Result") == "success" and agent.get("ActiveState") == "active",
         "%s: cloudnode-agent.service succeeded" % n,
         {k: agent.get(k) for k in ("Type", "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")})
    ready = [e for e in journal if e.get("UNIT") == "cloudnode-agent.service"
             and "Got notification message" in str(e.get("MESSAGE")) and "READY=1" in str(e.get("MESSAGE"))]
    t.ok(ready, "%s: systemd received READY=1 from cloudnode-agent" % n)

    # The metadata service was really asked, the IMDSv2 way on aws.
    reqs = mds.requests()
    t.ok(len(reqs) > 0, "%s: the guest read the fake metadata service (%d requests)" % (n, len(reqs)))
    if platform == "aws":
        t.ok(any(r.get("method") == "PUT" and "/latest/api/token" in r.get("path", "") for r in reqs),
             "%s: IMDSv2 session token requested (tokens required)" % n)

    env = env_file(g.result_text("files" + ENV_FILE))
    t.eq(env.get("CLOUDNODE_PLATFORM"), platform, "%s: %s names the platform" % (n, ENV_FILE))
    t.eq(env.get("CLOUDNODE_INSTANCE_ID"), str(inst["id"]), "%s: %s has the instance id" % (n, ENV_FILE))
    t.eq(env.get("CLOUDNODE_IPV4_PRIVATE"), inst["private_ipv4"], "%s: %s has the private IPv4" % (n, ENV_FILE))
    t.eq(env.get("CLOUDNODE_INSTANCE_TYPE"), inst["type"], "%s: %s has the instance type" % (n, ENV_FILE))
    provider_id = env.get("CLOUDNODE_PROVIDER_ID")
    t.ok(provider_id and provider_id.startswith(platform + "://"), "%s: %s has a %s:// provider id" % (n, ENV_FILE, platform),
         provider_id)

    dropin = g.result_text("files" + DROPIN) or ""
    t.ok("KUBELET_PROVIDERID=%s" % provider_id in dropin, "%s: kubelet drop-in carries the provider id" % n, dropin)
    kubelet = unit_props(g.result_text("unit-kubelet.service"))
    t.ok(DROPIN in kubelet.get("DropInPaths", ""), "%s: the drop-in reached kubelet.service" % n,
         kubelet.get("DropInPaths"))
    t.ok(kubelet.get("Result") == "success" and kubelet.get("ActiveState") == "active",
         "%s: kubelet stand-in registered the Node" % n)
    node_name = (g.result_text("node.json") and json.loads(g.result_text("node.json"))["metadata"]["name"])

    for path in (CLOUD_CONF, STATIC_POD):
        m = res.get("files" + path)
        if role == "bootstrap":
            t.ok(m is not None, "%s: %s exists on the bootstrap role" % (n, path))
        else:
            t.ok(m is None, "%s: no %s on a %s" % (n, path, role))
    if role == "bootstrap":
        m = res.get("files" + CLOUD_CONF)
        t.eq(m and oct(m.mode & 0o777), oct(0o600), "%s: cloud.conf is 0600" % n)
        pod = g.result_text("files" + STATIC_POD) or ""
        t.ok("cloudnode-initializer" in pod and "cloud-controller-manager" in pod,
             "%s: static pod runs cloudnode-initializer as container cloud-controller-manager" % n)

    init = unit_props(g.result_text("unit-cloudnode-initializer.service"))
    t.ok(init.get("ActiveState") == "active" and init.get("SubState") == "running",
         "%s: cloudnode-initializer.service is active" % n,
         {k: init.get(k) for k in ("Type", "ActiveState", "SubState", "Result", "NRestarts")})

    # The Node, as the API server has it.
    st, node = kube.api("GET", "/api/v1/nodes/%s" % node_name) if node_name else (None, None)
    t.eq(st, 200, "%s: the Node exists" % n)
    node = node if isinstance(node, dict) else {}
    spec, meta = node.get("spec", {}), node.get("metadata", {})
    labels = meta.get("labels", {})
    t.eq(spec.get("providerID"), provider_id, "%s: Node providerID set" % n)
    t.eq([x for x in spec.get("taints", []) if x.get("key") == UNINITIALIZED_TAINT], [],
         "%s: uninitialized taint removed" % n)
    t.eq(labels.get("node.kubernetes.io/instance-type"), inst["type"], "%s: instance-type label" % n)
    t.eq(labels.get("topology.kubernetes.io/region"), inst["region"], "%s: region label" % n)
    t.eq(labels.get("topology.kubernetes.io/zone"), inst["zone"], "%s: zone label" % n)
    addrs = {(a.get("type"), a.get("address")) for a in node.get("status", {}).get("addresses", [])}
    t.ok(("InternalIP", inst["private_ipv4"]) in addrs, "%s: Node has InternalIP %s" % (n, inst["private_ipv4"]),
         sorted(addrs))

    writes = [a for a in kube.audit()
              if a.get("verb") in ("create", "update", "patch", "delete")
              and "/api/v1/nodes/%s" % node_name in str(a.get("path", "")) and a.get("user") != KUBELET_USER]
    t.eq(len(writes), 2, "%s: the initializer wrote the Node exactly twice" % n)

    fields = {k for e in journal if e.get("_SYSTEMD_UNIT") in ("cloudnode-agent.service",
                                                                 "cloudnode-initializer.service")
              for k in e if k.startswith("CLOUDNODE_")}
    t.ok(fields, "%s: journal entries of our units carry CLOUDNODE_* fields" % n, sorted(fields))


def staged_install(work):
    """`make install DESTDIR=` of this build tree, laid out as a distribution package would be
    (the units run /usr/bin/...)."""
    stage = os.path.join(work, "stage")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    vmtest.run(["make", "-C", build(), "install", "DESTDIR=" + stage, "prefix=/usr", "sysconfdir=/etc",
                "localstatedir=/var"], env=env, capture_output=True)
    return stage


def main():
    t = Tap()
    why = vmtest.qemu_usable()
    if why:
        sys.stderr.write("\n*** REAL-BOOT TEST SKIPPED: %s ***\n\n" % why)
        t.skip_all("this machine cannot run qemu: %s" % why)
    if os.geteuid() != 0:
        t.ok(False, "the real-boot test runs as root (debootstrap, file ownership in the disk images)")
        return t.done()
    cache = os.environ.get("CN_VM_CACHE") or build("tests", "vm", "cache")
    work = tempfile.mkdtemp(prefix="cn-vm-")
    t0 = time.monotonic()
    ok = False
    try:
        try:
            base = vmtest.rootfs(cache)
            stage = staged_install(work)
        except vmtest.VMError as e:
            t.ok(False, "rootfs and staged install", str(e))
            return t.done()
        t.ok(True, "rootfs (Debian bookworm, debootstrap) and `make install DESTDIR=` ready")

        def one(fn, *args):
            g = None
            try:
                g = fn(t, base, work, stage, *args)
            except vmtest.VMError as e:
                t.ok(False, "%s %s" % (fn.__name__, " ".join(args)), str(e))
            except Exception:
                import traceback
                t.ok(False, "%s %s raised" % (fn.__name__, " ".join(args)), traceback.format_exc())
            return g

        boots = [one(harness)]
        for case in os.environ.get("CN_VM_CASES", DEFAULT_CASES).split():
            platform, role = case.split(":")
            missing = missing_pieces(role)
            if missing:
                t.skip("%s/%s boot" % (platform, role), "not in this tree yet: " + ", ".join(missing))
                continue
            boots.append(one(cloudnode_case, platform, role))
        ok = t.failed == 0
        if not ok:
            for g in boots:
                if g is not None:
                    t.diag(g.diagnostics())
        t.diag("real-boot tier took %.0fs" % (time.monotonic() - t0))
    finally:
        if ok and not os.environ.get("CN_VM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            t.diag("work dir kept: %s" % work)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
