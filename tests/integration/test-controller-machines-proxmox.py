#!/usr/bin/env python3
"""cloudnode-controller as a Cluster API infrastructure provider on Proxmox VE, against the fake
API server (Cluster API's Cluster and Machine as CRDs) and the fake cloud's Proxmox VE API over
HTTPS: create -> ready -> delete (a full clone of the template with the spec's cores, memory, pool
and tags, the machine's UID in its description and tag, the bootstrap data in a NoCloud seed ISO
read back with isoinfo, started; deleted with purge, seed and all, nothing left), a clone onto a
VMID another client took meanwhile, a template that does not exist as a terminal condition,
malformed answers (a task id, a task status, a VM id) as one clear error each and then retried,
SIGKILL pinned to every cloud request of a create and a delete (no second clone, no orphan), two
replicas whose leader is killed while its clone is held (one VM per machine), and a
controller restarted after the clone without a second one, and a username and password (a ticket
and CSRF tokens) instead of an API token; migrate_uid (clusterctl move) on its own; a Machine's failure domain (a node) is where its VM is cloned to.
The provider-neutral scenarios are in tests/pylib/capimachines.py."""
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402

from fakecloud import PVE_USER  # noqa: E402
from capimachines import (UID_LABEL, test_invalid_spec, test_kill_points, test_lifecycle,  # noqa: E402
                          test_placement, test_two_replicas, test_wait_for_bootstrap, machine_env, wait_for)

TAG = "cloudnode-machine-"
EADDRINUSE = 98


def pve_files(env):
    return env.c._admin_ok("GET", "/pve-files")


def seeds(env):
    return sorted(v for files in pve_files(env).values() for v in files if ":iso/cloudnode-" in v)


def pve_log(env, mark=0):
    return [r for r in env.c.requests()[mark:] if r.get("platform") == "proxmoxve"]


def clones(log):
    return [r for r in log if r.get("method") == "POST" and r.get("path", "").endswith("/clone")]


def isoinfo(path, *args):
    return subprocess.run(["isoinfo", "-i", path] + list(args), capture_output=True, text=True, timeout=30,
                          check=True).stdout


# cloud-init's NoCloud reader of a mounted seed (pathprefix2dict), its YAML loader and its network
# config parser, on the files as Linux's isofs shows them (Joliet names).
CLOUD_INIT_READ = """
import json, sys
from cloudinit import util
from cloudinit.net import network_state
seed = util.pathprefix2dict(sys.argv[1], required=["user-data", "meta-data"], optional=["network-config"])
md = util.load_yaml(seed["meta-data"])
ns = network_state.parse_net_config_data(util.load_yaml(seed["network-config"]))
print(json.dumps({"meta": md, "user": seed["user-data"].decode(), "net_version": ns.version,
                  "dhcp": [s["type"] for i in ns.iter_interfaces() for s in i["subnets"]]}))
"""


def check_with_cloud_init(t, iso):
    with tempfile.TemporaryDirectory() as d:
        for name in ("user-data", "meta-data", "network-config"):
            with open(os.path.join(d, name), "w") as f:
                f.write(isoinfo(iso, "-J", "-x", "/" + name))
        r = subprocess.run(["/usr/bin/python3", "-c", CLOUD_INIT_READ, d], capture_output=True, text=True, timeout=60)
        got = json.loads(r.stdout) if r.returncode == 0 else {}
        t.ok(got.get("user", "").startswith("#cloud-config") and got.get("meta", {}).get("instance-id") and
             got.get("net_version") == 2 and got.get("dhcp") == ["dhcp4"],
             "cloud-init's NoCloud reader takes the seed: meta-data, user-data, network-config (DHCP)",
             got or r.stderr[-2000:])


def test_pve_view(t, env):
    """What the Proxmox VE API was asked and what the VM and its seed hold."""
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        cnm = env.machine("pv")
        uid = cnm["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("pv"), 40), "ready", ctl.output()[-3000:])
        vms = env.servers(uid)
        t.eq(len(vms), 1, "one VM")
        if not vms:
            return
        vm = vms[0]
        cfg = vm["extra"].get("pve_config") or {}
        t.eq((vm["zone"], vm["status"], vm["extra"].get("cores"), vm["extra"].get("memory"), vm["extra"].get("pool")),
             ("pve2", "running", 4, 8192, "k8s"), "cloned onto the target node, running, with cores, memory and pool")
        t.eq(sorted(cfg.get("tags", "").split(";")), sorted(["k8s", TAG + uid]), "tags: the spec's and the machine's")
        t.ok((UID_LABEL + ": " + uid) in cfg.get("description", "").splitlines(), "the UID in the description",
             cfg.get("description"))
        seed = "local:iso/cloudnode-%s.iso" % uid
        t.eq(cfg.get("ide2"), seed + ",media=cdrom", "the seed attached as the cdrom ide2")
        st = env.get("pv")["status"]
        t.eq((st.get("instanceID"), st.get("instanceState")), (str(vm["extra"]["vmid"]), "running"),
             "status.instanceID is the VMID, instanceState PVE's")
        t.ok(any(a["address"] == vm["private_ipv4"] for a in st.get("addresses", [])),
             "addresses from the guest agent", st.get("addresses"))

        files = pve_files(env).get("pve2/local", {})
        t.eq(sorted(files), [seed], "the seed is on the target node's ISO storage")
        with tempfile.NamedTemporaryFile(suffix=".iso") as f:
            f.write(base64.b64decode(files[seed]["data"]))
            f.flush()
            t.ok("Volume id: cidata\n" in isoinfo(f.name, "-d"), "the seed's volume id is cidata")
            t.eq(sorted(isoinfo(f.name, "-J", "-f").split()), ["/meta-data", "/network-config", "/user-data"],
                 "its files, with their Joliet names")
            t.eq(isoinfo(f.name, "-J", "-x", "/user-data"), "#cloud-config\nhostname: pv",
                 "user-data is the bootstrap data")
            meta = json.loads(isoinfo(f.name, "-J", "-x", "/meta-data"))
            t.eq(meta, {"instance-id": uid, "local-hostname": "pv"}, "meta-data: instance-id and hostname")
            net = json.loads(isoinfo(f.name, "-J", "-x", "/network-config"))
            t.eq(net.get("version"), 2, "network-config: version 2")
            check_with_cloud_init(t, f.name)

        env.delete("pv")
        t.ok(wait_for(lambda: env.gone("pv"), 40), "deleted", ctl.output()[-2000:])
        t.eq(env.servers(uid), [], "no VM left")
        t.eq(seeds(env), [], "no seed left")
        log = pve_log(env, mark)
        t.eq(len(clones(log)), 1, "one clone request")
        deletes = [r["path"] for r in log if r.get("method") == "DELETE"]
        t.eq(len(deletes), 2, "two DELETEs: the seed and the VM (%s)" % deletes)
        t.ok(any(re.search(r"/qemu/%d\?" % vm["extra"]["vmid"], p) and "purge=1" in p and
                 "destroy-unreferenced-disks=1" in p for p in deletes), "the VM with purge and its disks", deletes)
        t.ok(all("5f0c4b4e" not in json.dumps(r) for r in log), "the token's secret is in no logged request")
    finally:
        ctl.stop()


def test_restart_after_clone(t, env):
    """The controller dies while the clone task runs; the next one finds the clone by its UID and
    finishes it, never cloning twice."""
    mark = len(env.c.requests())
    # the clone's task status: held once the clone was asked for, until the controller is killed
    rule = env.c.fail({"path": "/tasks/UPID:pve1:[^/]*:qmclone:[^/]*/status$", "count": 1, "reset": True,
                       "after_commit": True, "latency": 30})
    ctl = env.controller()
    try:
        uid = env.machine("rs")["metadata"]["uid"]
        t.ok(wait_for(lambda: next((r for r in env.c.requests() if r.get("fault") == rule["id"]), None), 40),
             "the controller awaits the clone task", ctl.output()[-2000:])
        ctl.kill()
    finally:
        ctl.stop()
        env.c.clear_faults()
    vms = env.servers(uid)
    t.ok(len(vms) == 1 and TAG + uid not in str(vms[0]["extra"].get("pve_config", {}).get("tags")),
         "one VM, cut short: not tagged", vms)
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: env.ready("rs"), 40), "ready after the restart", ctl.output()[-2000:])
        t.eq(len(env.servers(uid)), 1, "still one VM")
        t.eq(len(clones(pve_log(env, mark))), 1, "and one clone request")
        env.delete("rs")
        t.ok(wait_for(lambda: env.gone("rs"), 40), "deleted")
        t.eq((env.servers(uid), seeds(env)), ([], []), "nothing left")
    finally:
        ctl.stop()


def test_nextid_taken(t, env):
    """Another client takes the VMID between nextid and the clone: the clone is refused with PVE's
    "already exists" and the next free VMID is asked for."""
    taken = env.c.add_instance({"platform": "proxmoxve", "name": "other", "zone": "pve1", "status": "stopped",
                                "extra": {"vmid": 777}})
    env.c.fail({"method": "GET", "path": "/cluster/nextid$", "count": 1, "status": 200,
                "body": {"data": "777"}})
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        uid = env.machine("nx")["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("nx"), 40), "ready", ctl.output()[-2000:])
        cl = clones(pve_log(env, mark))
        t.eq([r["status"] for r in cl], [500, 200], "the clone onto the taken VMID refused, the next one done")
        vms = env.servers(uid)
        t.ok(len(vms) == 1 and vms[0]["extra"]["vmid"] != 777, "one VM, not the taken VMID", vms)
        t.eq(env.c.get_instance(taken["id"])["name"], "other", "the other client's VM untouched")
        env.delete("nx")
        t.ok(wait_for(lambda: env.gone("nx"), 40), "deleted")
        t.ok(env.c.get_instance(taken["id"]) is not None, "and the other VM stays")
    finally:
        ctl.stop()
        env.c.clear_faults()
        env.c.remove_instance(taken["id"])


def test_malformed_answers(t, env):
    """Malformed answers of the API: each one is one clear error, the create is retried, and one VM
    results."""
    cases = [
        ({"method": "GET", "path": "/cluster/nextid$", "status": 200, "body": {"data": "a lot"}},
         "the Proxmox VE API answered no usable VM id"),
        ({"method": "POST", "path": "/clone$", "status": 200, "body": {"data": "UPID:../../etc/passwd"}},
         "the Proxmox VE API answered no usable task id (UPID)"),
        ({"method": "GET", "path": "/tasks/.*/status$", "status": 200, "body": {"data": {"status": "done?"}}},
         "malformed task status from the Proxmox VE API"),
        ({"method": "GET", "path": "/cluster/resources", "status": 200, "body": {"data": {"vms": []}}},
         "malformed VM list from the Proxmox VE API"),
    ]
    for i, (fault, message) in enumerate(cases):
        name = "mal%d" % i
        env.c.fail(dict(fault, count=1))
        ctl = env.controller()
        try:
            uid = env.machine(name)["metadata"]["uid"]
            t.ok(wait_for(lambda: env.ready(name), 40), "%s: ready after the malformed answer" % name,
                 ctl.output()[-2000:])
            out = ctl.output()
            t.eq(out.count(message), 1, "%s: one error saying \"%s\"" % (name, message))
            t.eq(len(env.servers(uid)), 1, "%s: one VM" % name)
            env.delete(name)
            t.ok(wait_for(lambda: env.gone(name), 40), "%s: deleted" % name, ctl.output()[-2000:])
            t.eq((env.servers(uid), seeds(env)), ([], []), "%s: nothing left" % name)
        finally:
            ctl.stop()
            env.c.clear_faults()


def test_password(t, env):
    """A username and password instead of an API token: one ticket for the lifecycle, every write
    (the multipart upload among them) with its CSRF token."""
    conf = os.path.join(env.tmp, "pve-password.conf")
    with open(env.conf) as f:
        text = f.read()
    text = re.sub(r"token-id = .*\n", "username = %s\n" % PVE_USER["user"], text)
    text = re.sub(r"token-secret = .*\n", "password = %s\n" % PVE_USER["password"], text)
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    token_conf, env.conf = env.conf, conf
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        uid = env.machine("pw")["metadata"]["uid"]
        t.ok(wait_for(lambda: env.ready("pw"), 40), "ready with a ticket", ctl.output()[-2000:])
        t.eq(len(env.servers(uid)), 1, "one VM")
        env.delete("pw")
        t.ok(wait_for(lambda: env.gone("pw"), 40), "deleted", ctl.output()[-2000:])
        t.eq((env.servers(uid), seeds(env)), ([], []), "nothing left")
        log = pve_log(env, mark)
        logins = [r for r in log if r.get("path", "").endswith("/access/ticket")]
        t.eq(len(logins), 1, "one login serves the lifecycle")
        t.eq([r for r in log if r.get("status") == 401], [], "no write refused (the CSRF token goes with each)")
        t.ok(all(PVE_USER["password"] not in json.dumps(r.get("headers")) for r in log), "no password in a header")
    finally:
        env.conf = token_conf
        ctl.stop()


def provider_calls(env, *args):
    """The provider's machine calls through tests/provider-lookup, one JSON result per call."""
    out = subprocess.run([build("tests", "provider-lookup"), "proxmoxve", env.conf] + list(args),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_migrate_calls(t, env):
    """migrate_uid on its own: the VM named by providerID takes the new UID in its tag and
    description, once; another machine's VM or a missing one is refused."""
    vm = env.c.add_instance({"platform": "proxmoxve", "name": "mg", "zone": "pve1", "extra": {
        "vmid": 4242, "pve_config": {"tags": "k8s;%su1" % TAG, "description": UID_LABEL + ": u1\nnote\n"}}})
    pid = "proxmox://pve/4242"
    r1, r2, r3, r4 = provider_calls(env, "migrate", pid + ",u1,u2", "migrate", pid + ",u1,u2",
                                    "migrate", pid + ",wrong,u3", "migrate", "proxmox://pve/4343,,u3")
    cfg = env.c.get_instance(vm["id"])["extra"]["pve_config"]
    t.eq((r1["error"], r1.get("instance", {}).get("id")), (0, "4242"), "migrate_uid relabels the VM")
    t.eq((sorted(cfg["tags"].split(";")), cfg["description"]), (sorted(["k8s", TAG + "u2"]),
                                                                   UID_LABEL + ": u2\nnote\n"),
         "its tag and description's UID line changed, the rest kept")
    t.eq(r2["error"], 0, "a repeated migrate_uid finds it done")
    t.eq((r3["error"], r3["class"]), (-EADDRINUSE, "terminal"), "a VM carrying another machine's UID is refused")
    t.eq(r4["class"], "not-found", "migrate_uid of a missing VM is not-found")
    r5, = provider_calls(env, "cleanup", "mg,u2")
    t.eq((r5["error"], r5["done"]), (0, False), "cleanup of the relabeled VM goes on")
    t.ok(wait_for(lambda: provider_calls(env, "cleanup", "mg,u2")[0]["done"], 20), "until it is gone")
    t.eq([i for i in env.c.instances() if i["id"] == vm["id"]], [], "and the VM is deleted")


def test_nothing_left(t, env):
    vms = [i for i in env.c.instances() if i["platform"] == "proxmoxve" and i["name"] != "tmpl"]
    t.eq((vms, seeds(env)), ([], []), "after every scenario: only the template, no seed")


def main():
    t = Tap()
    if subprocess.run(["sh", "-c", "command -v isoinfo"], capture_output=True).returncode != 0:
        t.skip_all("isoinfo (genisoimage) is not installed")
    with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, provider="proxmoxve") as env:
        env.c.settings(pve_task_seconds=0.15)
        t.run(test_lifecycle, env)
        t.run(test_pve_view, env)
        t.run(test_restart_after_clone, env)
        t.run(test_nextid_taken, env)
        t.run(test_malformed_answers, env)
        t.run(test_password, env)
        t.run(test_migrate_calls, env)
        t.run(test_invalid_spec, env)
        t.run(test_wait_for_bootstrap, env)
        t.run(test_placement, env)
        t.run(test_kill_points, env)
        t.run(test_two_replicas, env)
        t.run(test_nothing_left, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
