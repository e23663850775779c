#!/usr/bin/env python3
"""Real boot (`make check-vm`): a Debian 12 guest with systemd as PID 1,
with cloudnode installed from its Debian packages (`make deb`) by dpkg and provisioned by the
real Ignition with the project's config for a role (or, on Proxmox VE, by Debian's cloud-init
from a NoCloud drive carrying the project's #cloud-config for the role), boots under QEMU and runs cloudnode-agent
and cloudnode-initializer against tests/fake-cloud and tests/fake-kube-apiserver on the host;
then, in the guest, a newer build of the packages is installed over them and they are purged.

First a harness boot proves the machinery alone (Ignition's files and first-boot presets, the
serial console, the results disk, a clean power-off); then one boot per (platform, role) case.

Environment: CN_VM_CACHE (rootfs cache dir, default $XDG_CACHE_HOME/cloudnode/vm, that is
~/.cache/cloudnode/vm: shared by checkouts, so a clean clone does not debootstrap again), CN_VM_CASES
(e.g. "aws:bootstrap hetzner:worker"), CN_VM_ACCEL (kvm or tcg), CN_VM_KEEP=1 keeps the work
dir, CN_VM_MIRROR overrides the apt mirror."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)

from cntap import Tap, build, src  # noqa: E402
import vmtest  # noqa: E402

# systemd's catalog id of "Unit X entered failed state" (SD_MESSAGE_UNIT_FAILURE_RESULT).
MESSAGE_UNIT_FAILED = "d9b373ed55a64feb8242e02dbe79a49c"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
KUBELET_USER = "system:node-registration"
DEFAULT_CASES = "aws:bootstrap hetzner:worker digitalocean:bootstrap proxmoxve:worker"
DROPIN = "/etc/systemd/system/kubelet.service.d/20-cloudnode.conf"
CLOUD_CONF = "/etc/kubernetes/bootstrap-configs/cloud.conf"
CLUSTER_PROVIDERS = ("aws", "azure", "digitalocean", "gcp", "hetzner", "openstack")
STATIC_POD = "/etc/kubernetes/manifests/cloudnode-cloud-node.yaml"
ENV_FILE = "/run/metadata/cloudnode"
INITIALIZER_KUBECONFIG = "/etc/cloudnode/initializer.kubeconfig"
# Platforms whose Linux nodes are provisioned by cloud-init from a drive the platform attaches
# (Proxmox VE's NoCloud drive), with no metadata service: booted with cloud-init, not Ignition.
CLOUD_INIT_PLATFORMS = ("proxmoxve",)
CLOUD_INIT_FILES = ["/run/cloud-init/result.json", "/run/cloud-init/status.json"]
BOOTSTRAP_KUBECONFIG = "/etc/kubernetes/bootstrap-secrets/kubeconfig"


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
    failed = g.result_text("failed-units")
    t.eq(failed.strip() if failed is not None else "(no results)", "", "%s: no failed units at collection" % g.name)
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


PROBE_FILE = "/etc/cloudnode-vmtest/ignition-probe"
# Added to every boot's Ignition config, so each boot also proves the harness itself: a file
# written by Ignition's files stage, and a unit that only Ignition's preset enables.
PROBE_CONFIG = {"files": [(PROBE_FILE, b"written-by-ignition", 0o640)],
                "units": [("cloudnode-vmtest-probe.service", PROBE_UNIT)]}


def check_harness(t, g, res):
    props = unit_props(g.result_text("unit-cloudnode-vmtest-probe.service"))
    t.ok(props.get("ActiveState") == "active" and props.get("Result") == "success",
         "%s: unit enabled only through Ignition's preset ran at first boot and sent READY" % g.name,
         "%s" % {k: props.get(k) for k in ("ActiveState", "SubState", "Result", "UnitFileState")})
    probe = res.get("files" + PROBE_FILE)
    t.ok(probe is not None and probe.mode & 0o777 == 0o640,
         "%s: file written by Ignition is there with its mode 0640" % g.name, probe and oct(probe.mode))


def check_preset(t, g, *units):
    with open(g.root + "/etc/systemd/system-preset/20-ignition.preset") as f:
        got = set(f.read().splitlines())
    t.ok({"enable " + u for u in units} <= got, "%s: Ignition's files stage wrote its preset" % g.name, sorted(got))


CREDENTIAL_PROBE = "cloudnode-vmtest-credential-probe.service"


def credential_probe(stage):
    """A unit with the product_uuid credential lines of the installed cloudnode-initializer.service,
    its LoadCredential= pointed at a file that does not exist, as on a host without DMI: it must
    start (systemd 252 fails a unit whose LoadCredential= file is missing unless a SetCredential=
    of the same name is its default) and see that default. (unit text, default value)"""
    unit = installed(stage, "/lib/systemd/system/cloudnode-initializer.service",
                     "/usr/lib/systemd/system/cloudnode-initializer.service")
    with open(unit) as f:
        lines = [line for line in f.read().splitlines() if line.startswith(("LoadCredential=product_uuid:",
                                                                            "SetCredential=product_uuid:"))]
    default = next(line.split(":", 1)[1] for line in lines if line.startswith("Set"))
    lines = [("LoadCredential=product_uuid:/nonexistent/sys/class/dmi/id/product_uuid"
              if line.startswith("Load") else line) for line in lines]
    return ("[Unit]\nDescription=credential default of the initializer's unit (real-boot test)\n"
            "[Service]\nType=oneshot\nRemainAfterExit=yes\nDynamicUser=yes\n%s\n"
            "ExecStart=/bin/sh -c 'test \"$(cat \"$CREDENTIALS_DIRECTORY/product_uuid\")\" = %s'\n"
            "[Install]\nWantedBy=multi-user.target\n" % ("\n".join(lines), default)), default


def harness(t, base, work, built):
    """A boot without cloudnode: for when the system under test is not all there."""
    g = vmtest.Guest(base, work, "harness")
    g.install_harness(units=["cloudnode-vmtest-probe.service"], files=[PROBE_FILE])
    g.ignition(vmtest.Guest.merge_config(**PROBE_CONFIG))
    check_preset(t, g, "cloudnode-vmtest-probe.service")
    g.make_disks()
    g.boot("file", {})
    res = g.results()
    check_boot(t, g, res)
    check_harness(t, g, res)
    return g


# --- cloudnode on a platform, in a role -------------------------------------------------------

def installed(stage, *candidates):
    for c in candidates:
        if os.path.exists(stage + c):
            return stage + c
    return None


def ignition_config(stage, role):
    return installed(stage, "/usr/share/cloudnode/ignition/cloudnode-%s.ign" % role)


def cloud_config(stage, role):
    return installed(stage, "/usr/share/cloudnode/ignition/cloudnode-%s.cloud-config.yaml" % role)


def missing_pieces(stage, platform, role):
    """What of the system under test is not in this tree yet (named, so the report says so)."""
    provisioning = (("installed #cloud-config for role %s" % role, cloud_config(stage, role))
                    if platform in CLOUD_INIT_PLATFORMS else
                    ("installed Ignition config for role %s" % role, ignition_config(stage, role)))
    need = {
        provisioning[0]: provisioning[1],
        "cloudnode-agent": installed(stage, "/usr/bin/cloudnode-agent"),
        "cloudnode-initializer": installed(stage, "/usr/bin/cloudnode-initializer"),
        "cloudnode-initializer.service": installed(stage, "/lib/systemd/system/cloudnode-initializer.service",
                                                   "/usr/lib/systemd/system/cloudnode-initializer.service"),
        "tests/fake-cloud": os.path.exists(src("tests", "fake-cloud")) and os.path.exists(
            src("tests", "pylib", "fakecloud.py")),
        "tests/fake-kube-apiserver": os.path.exists(src("tests", "fake-kube-apiserver")) and os.path.exists(
            src("tests", "pylib", "fakekubeclient.py")),
    }
    return [k for k, p in need.items() if not p]


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


def project_images():
    """images.json as the installer hands it to nodes: the project's images ConfigMap."""
    import yaml
    with open(src("manifests", "controller", "images-configmap.yaml")) as f:
        return yaml.safe_load(f)["data"]["images.json"]


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


def cloudnode_case(t, base, work, built, platform, role):
    stage, debs, upgrades = built
    from fakecloud import FakeCloud
    from fakekubeclient import FakeKube
    name = "%s-%s" % (platform, role)
    cloud_state = os.path.join(work, name + "-cloud")
    kube_state = os.path.join(work, name + "-kube")
    with FakeCloud(cloud_state) as cloud, \
            FakeKube(kube_state, rbac=[src("manifests", "operand", "node-initializer-rbac.yaml")],
                     load=[src("manifests", "operand", "node-initializer-admission-policy.yaml")],
                     extra_args=["--san", vmtest.KUBE_API_ADDR]) as kube:
        inst = cloud.add_instance({"platform": platform, "name": "vmtest-" + name,
                                   "private_ipv4": vmtest.GUEST_IP, "mac": vmtest.GUEST_MAC,
                                   "require_token": platform == "aws"})
        with FakeCloud(cloud_state, instance=inst["id"]) as mds:
            mds_port = int(mds.url.rstrip("/").rsplit(":", 1)[1])
            kube_port = int(kube.url.rstrip("/").rsplit(":", 1)[1])
            kubelet_rbac(kube)
            kubelet_token = kube.token_for(KUBELET_USER, ["system:authenticated"])
            # cloudnode-initializer's node-mode identity, as the installer makes it: the node's own
            # ServiceAccount (named as its Node: the metadata host name) and a TokenRequest token.
            initializer_user, node_token = kube.node_identity(inst["hostname"])
            kubeconfig, ca = guest_kubeconfig(kube, node_token)

            cloud_init = platform in CLOUD_INIT_PLATFORMS
            g = vmtest.Guest(base, work, name)
            g.install_packages(debs, upgrades)
            g.write_file("/etc/cloudnode-vmtest/packages", "".join(p + "\n" for p in PACKAGES))
            g.write_file("/etc/cloudnode-vmtest/ca.crt", ca)
            g.write_file("/etc/cloudnode-vmtest/kubelet.token", kubelet_token, 0o600)
            g.install_harness(
                units=["cloudnode-agent.service", "cloudnode-initializer.service", "kubelet.service",
                       "cloudnode-vmtest-probe.service", CREDENTIAL_PROBE],
                files=[ENV_FILE, DROPIN, CLOUD_CONF, STATIC_POD, "/etc/cloudnode/cloudnode.yaml", PROBE_FILE]
                + (CLOUD_INIT_FILES if cloud_init else []),
                kube_env={"KUBE_SERVER": "https://%s:%d" % (vmtest.KUBE_API_ADDR, vmtest.KUBE_API_PORT),
                          "KUBE_CA": "/etc/cloudnode-vmtest/ca.crt",
                          "KUBE_TOKEN_FILE": "/etc/cloudnode-vmtest/kubelet.token"},
                vpc_network=not cloud_init)
            probe, probe_default = credential_probe(stage)
            g.write_file("/etc/systemd/system/" + CREDENTIAL_PROBE, probe)
            os.makedirs(g.root + "/etc/systemd/system/multi-user.target.wants", exist_ok=True)
            os.symlink("/etc/systemd/system/" + CREDENTIAL_PROBE,
                       g.root + "/etc/systemd/system/multi-user.target.wants/" + CREDENTIAL_PROBE)
            # The user's part of the node's config: the initializer's credential, where its unit
            # loads it from (LoadCredential=).
            # A bootstrap VM on a platform with a cluster-mode provider runs the static pod, and
            # its agent waits with the installer's bootstrap kubeconfig for the in-cluster
            # initializer to take over (it never does here: the agent stays active, waiting).
            machine = [(INITIALIZER_KUBECONFIG, kubeconfig, 0o600),
                       ("/etc/cloudnode/images.json", project_images().encode(), 0o644)]
            if role == "bootstrap" and platform in CLUSTER_PROVIDERS:
                admin, _ = guest_kubeconfig(kube, kube.token_for("vmtest-installer", ["system:masters"]))
                machine.append((BOOTSTRAP_KUBECONFIG, admin, 0o600))
            forwards = {"vpc": [(vmtest.KUBE_API_ADDR, vmtest.KUBE_API_PORT, kube_port)]}
            if cloud_init:
                # Proxmox VE's default smbios1 is the VM's UUID alone, which qemu-server passes
                # as -smbios type=1,uuid=...; the agent's providerID is made of it.
                smbios_uuid = str(uuid.uuid4())
                provider_id = "proxmox://" + smbios_uuid
                user_data = nocloud_user_data(stage, role, machine)
                g.cloud_init(nocloud_drive(cloud, inst, user_data, g.workdir), smbios_uuid)
            else:
                provider_id = None
                with open(ignition_config(stage, role), "rb") as f:
                    project = f.read()
                g.ignition(vmtest.Guest.merge_config(project, files=machine + PROBE_CONFIG["files"],
                                                     units=PROBE_CONFIG["units"]))
                check_preset(t, g, "cloudnode-agent.service", "cloudnode-initializer.service")
                forwards["metadata"] = [("169.254.169.254", 80, mds_port)]
            g.make_disks()
            g.boot(platform, forwards)
            res = g.results()
            journal = g.journal()
            node_name = (g.result_text("node-name") or "").strip()
            writes = [(a.get("user"), a.get("verb"), a.get("path"), a.get("code")) for a in kube.audit()
                      if a.get("verb") in ("create", "update", "patch", "delete") and a.get("resource") == "nodes"
                      and a.get("name") == node_name and a.get("user") != KUBELET_USER]
            expected = [(initializer_user, "patch", "/api/v1/nodes/%s/status" % node_name, 200),
                        (initializer_user, "patch", "/api/v1/nodes/%s" % node_name, 200)]
            check_boot(t, g, res)
            if cloud_init:
                check_cloud_init(t, g, res, stage, role)
            else:
                check_harness(t, g, res)
            check_cloudnode(t, g, res, journal, inst, kube, cloud, platform, role, node_name, writes, expected,
                            provider_id)
            props = unit_props(g.result_text("unit-" + CREDENTIAL_PROBE))
            t.ok(props.get("ActiveState") == "active" and props.get("Result") == "success",
                 "%s: the initializer's credential product_uuid, its file missing, defaults to %s"
                 % (name, probe_default),
                 {k: props.get(k) for k in ("ActiveState", "SubState", "Result", "ExecMainStatus")})
            check_packages(t, g)
    return g


def nocloud_user_data(stage, role, machine):
    """user-data for a Proxmox VM given as a custom snippet (cicustom user=): the project's
    #cloud-config for the role, byte for byte, and the machine's own part (MACHINE: its
    credential and images.json as (path, bytes, mode)) in a MIME multi-part archive as
    `cloud-init devel make-mime` writes it; the machine's part appends its write_files to the
    role's (cloud-init's default merge would replace the list), as the Ignition boots merge the
    role's config into the machine's."""
    from email.mime.multipart import MIMEMultipart
    from email.mime.text import MIMEText
    import yaml
    with open(cloud_config(stage, role), encoding="utf-8") as f:
        project = f.read()
    own = {"merge_how": [{"name": "list", "settings": ["append"]},
                         {"name": "dict", "settings": ["no_replace", "recurse_list"]}],
           "write_files": [{"path": p, "encoding": "b64", "content": base64.b64encode(d).decode(),
                            "permissions": "0%o" % m, "owner": "root:root"} for p, d, m in machine]}
    archive = MIMEMultipart()
    for i, text in enumerate((project, "#cloud-config\n" + yaml.safe_dump(own, sort_keys=False))):
        part = MIMEText(text, "cloud-config", "utf-8")
        part.add_header("Content-Disposition", "attachment", filename="part-%d.yaml" % i)
        archive.attach(part)
    return archive.as_string()


def nocloud_drive(cloud, inst, user_data, workdir):
    """The NoCloud drive's files as Proxmox VE writes them: network-config (version 1, from the
    VM's ipconfig0 and net0 MAC) and vendor-data as the fake cloud generates them for the
    instance; user-data from the custom snippet (nocloud_user_data). Custom user-data replaces
    the one Proxmox would generate, which is where Proxmox puts the VM's host name, so the
    meta-data is a custom snippet too (cicustom meta=): the instance id and local-hostname."""
    tree = os.path.join(workdir, "fake-nocloud")
    cloud.write_config_drive(inst["id"], tree, fmt="nocloud")
    files = {}
    for name in ("network-config", "vendor-data"):
        with open(os.path.join(tree, name), "rb") as f:
            files[name] = f.read()
    files["user-data"] = user_data
    files["meta-data"] = "instance-id: %s\nlocal-hostname: %s\n" % (inst["id"], inst["hostname"])
    return files


def check_cloud_init(t, g, res, stage, role):
    """A cloud-init boot: cloud-init found the NoCloud drive, ran every stage without an error,
    and did what the project's #cloud-config says (its files, its units enabled)."""
    import yaml
    n = g.name
    status = g.result_text("cloud-init-status") or ""
    t.ok((g.result_text("cloud-init-status-rc") or "").strip() == "0" and "status: done" in status,
         "%s: cloud-init status --long says done" % n, status)
    try:
        result = json.loads(g.result_text("files/run/cloud-init/result.json") or "null") or {}
        stages = json.loads(g.result_text("files/run/cloud-init/status.json") or "null") or {}
    except ValueError as e:
        result, stages = {"error": str(e)}, {}
    v1 = result.get("v1") or {}
    t.ok("DataSourceNoCloud" in str(v1.get("datasource")) and "/dev/sr0" in str(v1.get("datasource")),
         "%s: cloud-init's datasource is NoCloud from the CD-ROM" % n, v1.get("datasource"))
    t.eq(v1.get("errors"), [], "%s: cloud-init's result.json has no errors" % n)
    errors = {k: v.get("errors") for k, v in (stages.get("v1") or {}).items()
              if isinstance(v, dict) and "errors" in v}
    t.ok(set(errors) >= {"init-local", "init", "modules-config", "modules-final"}
         and not any(errors.values()), "%s: every cloud-init stage ran without errors" % n, errors)
    with open(cloud_config(stage, role), encoding="utf-8") as f:
        project = yaml.safe_load(f)
    want = next(w["content"] for w in project["write_files"] if w["path"] == "/etc/cloudnode/cloudnode.yaml")
    t.eq(g.result_text("files/etc/cloudnode/cloudnode.yaml"), want,
         "%s: /etc/cloudnode/cloudnode.yaml is the role's, written by cloud-init" % n)
    for u in ("cloudnode-agent.service", "cloudnode-initializer.service"):
        props = unit_props(g.result_text("unit-" + u))
        t.eq((props.get("FragmentPath"), props.get("UnitFileState")), ("/etc/systemd/system/" + u, "enabled"),
             "%s: %s is the unit the #cloud-config wrote, enabled" % (n, u))


def check_cloudnode(t, g, res, journal, inst, kube, cloud, platform, role, node_name, writes, expected,
                    expected_provider_id=None):
    n = g.name
    agent = unit_props(g.result_text("unit-cloudnode-agent.service"))
    t.ok(agent.get("Type") == "notify" and agent.get("Result") == "success" and agent.get("ActiveState") == "active",
         # A Type=notify unit is active only after READY=1; exiting without it is a failure
         # ("protocol"), so this also says that systemd received READY=1.
         "%s: cloudnode-agent.service succeeded and sent READY=1" % n,
         {k: agent.get(k) for k in ("Type", "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")})
    # The metadata service was really asked, the IMDSv2 way on aws.
    reqs = [r for r in cloud.requests() if r.get("service") == "metadata"]
    if platform not in CLOUD_INIT_PLATFORMS:
        t.ok(len(reqs) > 0, "%s: the guest read the fake metadata service (%d requests)" % (n, len(reqs)))
    if platform == "aws":
        t.ok(any(r.get("method") == "PUT" and "/latest/api/token" in r.get("path", "") for r in reqs),
             "%s: IMDSv2 session token requested (tokens required)" % n)

    env = env_file(g.result_text("files" + ENV_FILE))
    t.eq(env.get("CLOUDNODE_PLATFORM"), platform, "%s: %s names the platform" % (n, ENV_FILE))
    t.eq(env.get("CLOUDNODE_INSTANCE_ID"), str(inst["id"]), "%s: %s has the instance id" % (n, ENV_FILE))
    t.eq(env.get("CLOUDNODE_IPV4_PRIVATE"), inst["private_ipv4"], "%s: %s has the private IPv4" % (n, ENV_FILE))
    if platform == "aws":
        # What EC2's metadata service itself carries (Hetzner's has no server type, and its
        # region/zone follow hcloud's location/datacenter naming).
        t.eq((env.get("CLOUDNODE_INSTANCE_TYPE"), env.get("CLOUDNODE_REGION"), env.get("CLOUDNODE_ZONE")),
             (inst["type"], inst["region"], inst["zone"]), "%s: %s has instance type, region, zone" % (n, ENV_FILE))
    provider_id = env.get("CLOUDNODE_PROVIDER_ID")
    if expected_provider_id:
        t.eq(provider_id, expected_provider_id, "%s: %s has the provider id of the VM's SMBIOS UUID" % (n, ENV_FILE))
    else:
        # The providerID formats of the providers' own cloud-controller-managers.
        scheme = {"aws": "aws://", "hetzner": "hcloud://", "openstack": "openstack://", "gcp": "gce://",
                  "azure": "azure://", "digitalocean": "digitalocean://"}[platform]
        # GCE and Azure name the instance by its name in the providerID, the others by its id.
        tail = "/" + inst["name"] if platform in ("gcp", "azure") else str(inst["id"])
        t.ok(provider_id and provider_id.startswith(scheme) and provider_id.endswith(tail),
             "%s: %s has a %s provider id ending in the instance's %s" % (n, ENV_FILE, scheme, tail), provider_id)

    dropin = g.result_text("files" + DROPIN) or ""
    t.ok("KUBELET_PROVIDERID=%s" % provider_id in dropin, "%s: kubelet drop-in carries the provider id" % n, dropin)
    kubelet = unit_props(g.result_text("unit-kubelet.service"))
    t.ok(DROPIN in kubelet.get("DropInPaths", ""), "%s: the drop-in reached kubelet.service" % n,
         kubelet.get("DropInPaths"))
    t.ok(kubelet.get("Result") == "success" and kubelet.get("ActiveState") == "active",
         "%s: kubelet stand-in registered the Node" % n)

    # The static pod only where the cluster-mode initializer has a provider (CLUSTER_PROVIDERS).
    pod_expected = role == "bootstrap" and platform in CLUSTER_PROVIDERS
    for path, present in ((CLOUD_CONF, role == "bootstrap"), (STATIC_POD, pod_expected)):
        m = res.get("files" + path)
        if present:
            t.ok(m is not None, "%s: %s exists on the bootstrap role" % (n, path))
        else:
            t.ok(m is None, "%s: no %s on a %s %s" % (n, path, platform, role))
    if role == "bootstrap":
        m = res.get("files" + CLOUD_CONF)
        t.eq(m and oct(m.mode & 0o777), oct(0o600), "%s: cloud.conf is 0600" % n)
    if pod_expected:
        import yaml
        try:
            pod = yaml.safe_load(g.result_text("files" + STATIC_POD) or "") or {}
        except yaml.YAMLError as e:
            pod = {"error": str(e)}
        spec = pod.get("spec") or {}
        containers = spec.get("containers") or [{}]
        image = json.loads(project_images())["cloudControllerManager"]
        t.eq((containers[0].get("name"), containers[0].get("image"), spec.get("hostNetwork"),
              spec.get("priorityClassName")),
             ("cloud-controller-manager", image, True, "system-node-critical"),
             "%s: static pod: container cloud-controller-manager with the images.json image, host network, "
             "node-critical" % n)

    init = unit_props(g.result_text("unit-cloudnode-initializer.service"))
    t.ok(init.get("ActiveState") == "active" and init.get("SubState") == "running",
         "%s: cloudnode-initializer.service is active" % n,
         {k: init.get(k) for k in ("Type", "ActiveState", "SubState", "Result", "NRestarts")})

    # The Node, as the API server has it.
    st, node = kube.api("GET", "/api/v1/nodes/%s" % node_name) if node_name else (None, None)
    if not t.ok(st == 200 and isinstance(node, dict) and provider_id,
                "%s: the Node %s exists (and the agent found a provider id)" % (n, node_name or "(unnamed)"),
                "GET node: %s %s" % (st, node)):
        return
    spec, meta = node.get("spec", {}), node.get("metadata", {})
    labels = meta.get("labels", {})
    t.eq(spec.get("providerID"), provider_id, "%s: Node providerID set" % n)
    t.eq([x for x in spec.get("taints", []) if x.get("key") == UNINITIALIZED_TAINT], [],
         "%s: uninitialized taint removed" % n)
    # The labels say what the node's metadata says (absent where it says nothing).
    for label, key in (("node.kubernetes.io/instance-type", "CLOUDNODE_INSTANCE_TYPE"),
                       ("topology.kubernetes.io/region", "CLOUDNODE_REGION"),
                       ("topology.kubernetes.io/zone", "CLOUDNODE_ZONE")):
        t.eq(labels.get(label), env.get(key), "%s: label %s = %s" % (n, label, key))
    if platform == "digitalocean":
        # DigitalOcean has regions, no zones: its metadata service names the region only.
        t.ok(env.get("CLOUDNODE_REGION") and not env.get("CLOUDNODE_ZONE"), "%s: the metadata gave a region" % n)
    elif platform == "proxmoxve":
        # A NoCloud drive names no region or zone (nor an instance type).
        t.eq([k for k in ("CLOUDNODE_REGION", "CLOUDNODE_ZONE", "CLOUDNODE_INSTANCE_TYPE") if k in env], [],
             "%s: no region, zone or instance type from a NoCloud drive" % n)
    else:
        t.ok(env.get("CLOUDNODE_ZONE"), "%s: the metadata gave a zone" % n)
    addrs = {(a.get("type"), a.get("address")) for a in node.get("status", {}).get("addresses", [])}
    t.ok(("InternalIP", inst["private_ipv4"]) in addrs, "%s: Node has InternalIP %s" % (n, inst["private_ipv4"]),
         sorted(addrs))

    t.eq(writes, expected,
         "%s: exactly two writes to the Node, both by the initializer: status (addresses), then the Node" % n)

    fields = {k for e in journal if e.get("_SYSTEMD_UNIT") in ("cloudnode-agent.service",
                                                                 "cloudnode-initializer.service")
              for k in e if k.startswith("CLOUDNODE_")}
    t.ok(fields, "%s: journal entries of our units carry CLOUDNODE_* fields" % n, sorted(fields))


PACKAGES = ("cloudnode-agent", "cloudnode-initializer", "cloudnode-controller", "cloudnode-ignition")


def packages(work):
    """The Debian packages of this tree (`make deb`: built from its distribution sources, checked
    by lintian), a newer build of each for the guest's upgrade (the same files under a higher
    version, repacked with dpkg-deb), and their files unpacked into a staging dir that the host
    reads (the Ignition configs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    t0 = time.monotonic()
    vmtest.run(["make", "-C", build(), "deb", "DEB_JOBS=2"], env=env, capture_output=True)
    vmtest.log("packages built in %.0fs" % (time.monotonic() - t0))
    debs = {}
    for name in PACKAGES:
        found = [f for f in os.listdir(build("deb")) if f.startswith(name + "_") and f.endswith(".deb")]
        if len(found) != 1:
            raise vmtest.VMError("make deb produced %r for %s" % (found, name))
        debs[name] = build("deb", found[0])
    stage = os.path.join(work, "stage")
    upgrade_dir = os.path.join(work, "upgrade")
    os.makedirs(upgrade_dir)
    upgrades = []
    for name, deb in debs.items():
        vmtest.run(["dpkg-deb", "-x", deb, stage], capture_output=True)
        tree = os.path.join(work, "repack-" + name)
        vmtest.run(["dpkg-deb", "-R", deb, tree], capture_output=True)
        control = os.path.join(tree, "DEBIAN", "control")
        with open(control) as f:
            text = f.read()
        version = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Version: "))
        with open(control, "w") as f:
            f.write(text.replace(version, version + "+upgrade1"))
        out = os.path.join(upgrade_dir, os.path.basename(deb).replace(version, version + "+upgrade1"))
        vmtest.run(["dpkg-deb", "--root-owner-group", "-b", tree, out], capture_output=True)
        upgrades.append(out)
    return stage, list(debs.values()), upgrades


# Files with cloudnode in their name that may stay after a purge: what the provisioning
# (Ignition) wrote, which belongs to the node's configuration, not to the packages, and what the
# agent wrote for other programs (kubelet's drop-in, the bootstrap static pod and cloud config).
PURGE_MAY_STAY = {"/etc/cloudnode", "/etc/cloudnode/cloudnode.yaml", "/etc/cloudnode/initializer.kubeconfig",
                  "/etc/cloudnode/images.json", "/etc/systemd/system/cloudnode-agent.service",
                  "/etc/systemd/system/cloudnode-initializer.service",
                  "/etc/systemd/system/run-cloudnode-configdrive.mount",
                  "/etc/systemd/system/run-cloudnode-cidata.mount", "/etc/tmpfiles.d/cloudnode-agent.conf",
                  "/etc/udev/rules.d/61-cloudnode-configdrive.rules", "/etc/systemd/system/kubelet.service.d/20-cloudnode.conf",
                  "/etc/kubernetes/manifests/cloudnode-cloud-node.yaml"}


def check_packages(t, g):
    """The guest's upgrade to a newer build and the purge (tests/vm/guest/collect)."""
    n = g.name

    def text(name):
        return g.result_text("packages/" + name) or ""
    t.eq(text("upgrade-rc").strip(), "0", "%s: the newer build installs over the older one" % n)
    before = {line.split()[0]: line.split()[1] for line in text("versions-before").splitlines() if line.strip()}
    after = {line.split()[0]: line.split()[1] for line in text("versions-after").splitlines() if line.strip()}
    t.ok(sorted(before) == sorted(PACKAGES) and all(after.get(p) == v + "+upgrade1" for p, v in before.items()),
         "%s: every package went from its version to the newer one" % n, (before, after))
    t.ok(text("config-before") != "" and text("config-before") == text("config-after"),
         "%s: the node's config and credential are unchanged by the upgrade" % n, text("config-after"))
    agent = (unit_props(text("before-cloudnode-agent.service")), unit_props(text("after-cloudnode-agent.service")))
    t.ok(agent[0].get("InvocationID") and agent[0].get("InvocationID") == agent[1].get("InvocationID")
         and agent[1].get("ActiveState") == "active",
         "%s: the agent (work done at boot) is not run again by the upgrade" % n, agent)
    init = (unit_props(text("before-cloudnode-initializer.service")),
            unit_props(text("after-cloudnode-initializer.service")))
    t.ok(init[0].get("InvocationID") and init[1].get("InvocationID") not in ("", init[0].get("InvocationID"))
         and init[1].get("SubState") == "running",
         "%s: the running initializer is restarted onto the new binary and runs" % n, init)
    t.eq(text("purge-rc").strip(), "0", "%s: the packages purge" % n)
    t.eq(sorted(text("status-after-purge").splitlines()),
         sorted("dpkg-query: no packages found matching " + p for p in PACKAGES),
         "%s: dpkg knows none of them after the purge" % n)
    for u in ("cloudnode-agent.service", "cloudnode-initializer.service"):
        props = unit_props(text("purged-" + u))
        t.ok(props.get("ActiveState") == "inactive", "%s: %s was stopped by the purge" % (n, u), props)
    t.eq(text("packaged-left").split(), [], "%s: no file of the packages is left" % n)
    # systemd's PrivateTmp= directories are named after the unit; systemd-tmpfiles removes them.
    left = [f for f in text("named-left").split() if f not in PURGE_MAY_STAY and
            not f.startswith("/var/tmp/systemd-private-")]
    t.eq(left, [], "%s: nothing else named cloudnode is left (the node's provisioned config may stay)" % n)


def main():
    t = Tap()
    why = vmtest.qemu_usable()
    if why:
        sys.stderr.write("\n*** REAL-BOOT TEST SKIPPED: %s ***\n\n" % why)
        t.skip_all("this machine cannot run qemu: %s" % why)
    if os.geteuid() != 0:
        t.ok(False, "the real-boot test runs as root (debootstrap, file ownership in the disk images)")
        return t.done()
    cache = os.environ.get("CN_VM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cloudnode", "vm")
    work = tempfile.mkdtemp(prefix="cn-vm-")
    t0 = time.monotonic()
    ok = False
    try:
        try:
            base = vmtest.rootfs(cache)
            stage, debs, upgrades = packages(work)
        except vmtest.VMError as e:
            t.ok(False, "rootfs and packages", str(e))
            return t.done()
        have = [installed(os.path.join(base, "root"), "/usr/lib/systemd/systemd", "/lib/systemd/systemd"),
                installed(stage, "/usr/bin/cloudnode-agent"), installed(stage, "/usr/bin/cloudnode-initializer")]
        t.ok(all(have), "rootfs (Debian bookworm, debootstrap: systemd) and the packages (make deb, lintian-clean: "
             "the daemons) ready", have)

        def one(fn, *args):
            g = None
            try:
                g = fn(t, base, work, (stage, debs, upgrades), *args)
            except vmtest.VMError as e:
                t.ok(False, "%s %s" % (fn.__name__, " ".join(args)), str(e))
            except Exception:
                import traceback
                t.ok(False, "%s %s raised" % (fn.__name__, " ".join(args)), traceback.format_exc())
            return g

        boots = []
        for case in os.environ.get("CN_VM_CASES", DEFAULT_CASES).split():
            platform, role = case.split(":")
            missing = missing_pieces(stage, platform, role)
            if missing:
                t.skip("%s/%s boot" % (platform, role), "not in this tree yet: " + ", ".join(missing))
                continue
            boots.append(one(cloudnode_case, platform, role))
        if not boots:
            boots.append(one(harness))
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
