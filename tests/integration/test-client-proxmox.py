#!/usr/bin/env python3
"""Debian's python3-proxmoxer (1.2), the Python client Proxmox VE users script with, against the
Proxmox VE fake over HTTPS, verifying the fake's certificate with the test CA (never
verify_ssl=False): with an API token and with a password (ticket and CSRF token), list nodes and
VMs, read a VM's config and status, read its addresses through the guest agent, clone a template
and wait for the task, reconfigure, start, stop and delete the clone. Every change is also checked
in the fake's inventory, so a client that only prints does not pass. The refusals a user meets are
checked too: a wrong token, a wrong password, a write without the CSRF token, a certificate of
another CA, a locked VM, a taken VM id. The calls of a Cluster API machine's life (a full clone into
a pool with a description, tags, a seed ISO uploaded, attached, deleted, the VM destroyed with
purge) are made with both authentications.

proxmoxer is Debian's package, importable by Debian's python3; when the interpreter running this
test is another one, the test runs itself again under /usr/bin/python3."""
import os
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import proxmoxer
    from proxmoxer import ProxmoxAPI
    from proxmoxer.core import ResourceException
except ImportError:
    proxmoxer = None
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, wait_for  # noqa: E402
from fakecloud import PVE_TOKEN, PVE_USER, FakeCloud, tls_args, tls_files  # noqa: E402


def wait_task(api, node, upid, timeout=30):
    """proxmoxer 1.2 has no proxmoxer.tools.Tasks: poll the task's status as users do."""
    end = time.monotonic() + timeout
    while True:
        st = api.nodes(node).tasks(upid).status.get()
        if st["status"] == "stopped" or time.monotonic() > end:
            return st
        time.sleep(0.1)


def by_name(c, name):
    return [i for i in c.instances() if i["name"] == name]


def raises(fn):
    try:
        fn()
    except ResourceException as e:
        return e
    return None


def everyday(t, c, api, how):
    """The operations of a user's script, with one authentication."""
    nodes = sorted(n["node"] for n in api.nodes.get())
    t.eq(nodes, ["pve1", "pve2"], "%s: nodes are listed" % how)
    vms = {v["name"]: v for v in api.cluster.resources.get(type="vm")}
    t.ok({"web1", "tmpl"} <= set(vms), "%s: VMs are listed cluster-wide" % how, vms)
    web1 = vms["web1"]
    t.eq((web1["node"], web1["type"], web1["status"]), ("pve1", "qemu", "running"),
         "%s: a VM's node, type and state in the cluster resources" % how)
    listed = [v["vmid"] for v in api.nodes("pve1").qemu.get()]
    t.ok(web1["vmid"] in listed, "%s: the VM is listed on its node" % how, listed)
    cfg = api.nodes("pve1").qemu(web1["vmid"]).config.get()
    inst = by_name(c, "web1")[0]
    t.eq((cfg["name"], cfg["cores"], cfg["memory"]), ("web1", 2, "4096"), "%s: config: name, cores, memory" % how)
    t.ok(cfg["smbios1"].startswith("uuid=") and inst["private_ipv4"] in cfg.get("ipconfig0", ""),
         "%s: config: SMBIOS UUID and cloud-init ipconfig0" % how, cfg)
    cur = api.nodes("pve1").qemu(web1["vmid"]).status.current.get()
    t.eq((cur["status"], cur["cpus"], cur["maxmem"]), ("running", 2, 4096 * 1024 * 1024),
         "%s: status/current: state, cpus, maxmem" % how)
    ifs = api.nodes("pve1").qemu(web1["vmid"]).agent("network-get-interfaces").get()["result"]
    ips = [a["ip-address"] for i in ifs for a in i["ip-addresses"]]
    t.ok(inst["private_ipv4"] in ips and inst["ipv6"] in ips, "%s: the guest agent reports the addresses" % how, ifs)

    newid = int(api.cluster.nextid.get())
    t.ok(newid >= 100 and newid not in [v["vmid"] for v in vms.values()], "%s: nextid is a free VM id" % how, newid)
    e = raises(lambda: api.cluster.nextid.get(vmid=web1["vmid"]))
    t.ok(e is not None and e.status_code == 400, "%s: nextid refuses a taken id" % how, e)
    clone_name = "clone-" + how
    upid = api.nodes("pve1").qemu(vms["tmpl"]["vmid"]).clone.post(newid=newid, name=clone_name, target="pve2")
    t.ok(upid.startswith("UPID:pve1:"), "%s: clone answers a task" % how, upid)
    e = raises(lambda: api.nodes("pve2").qemu(newid).status.start.post())
    t.ok(e is not None and e.status_code == 500 and "locked" in str(e),
         "%s: the clone is locked while the task runs" % how, e)
    st = wait_task(api, "pve1", upid)
    t.eq((st["status"], st.get("exitstatus")), ("stopped", "OK"), "%s: the clone task ends OK" % how)
    made = by_name(c, clone_name)
    t.ok(len(made) == 1 and made[0]["zone"] == "pve2" and made[0]["status"] == "stopped",
         "%s: the clone is in the inventory, stopped, on the target node" % how, made)
    e = raises(lambda: api.nodes("pve1").qemu(vms["tmpl"]["vmid"]).clone.post(newid=newid, name="again"))
    t.ok(e is not None and "already exists" in str(e), "%s: a clone onto a taken id is refused" % how, e)

    api.nodes("pve2").qemu(newid).config.put(cores=4, memory=8192, ipconfig0="ip=dhcp")
    cfg = api.nodes("pve2").qemu(newid).config.get()
    t.eq((cfg["cores"], cfg["memory"], cfg["ipconfig0"]), (4, "8192", "ip=dhcp"), "%s: config PUT changes it" % how)
    upid = api.nodes("pve2").qemu(newid).config.post(description="from proxmoxer", digest=cfg["digest"])
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "%s: config POST runs as a task" % how)
    e = raises(lambda: api.nodes("pve2").qemu(newid).config.put(name="x", digest=cfg["digest"]))
    t.ok(e is not None and "modified" in str(e), "%s: a stale digest is refused" % how, e)

    upid = api.nodes("pve2").qemu(newid).status.start.post()
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "%s: start task OK" % how)
    t.eq(by_name(c, clone_name)[0]["status"], "running", "%s: the clone runs" % how)
    e = raises(lambda: api.nodes("pve2").qemu(newid).delete(purge=1))
    t.ok(e is not None and "running" in str(e), "%s: a running VM cannot be destroyed" % how, e)
    upid = api.nodes("pve2").qemu(newid).status.stop.post()
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "%s: stop task OK" % how)
    t.eq(api.nodes("pve2").qemu(newid).status.current.get()["status"], "stopped", "%s: the clone is stopped" % how)
    upid = api.nodes("pve2").qemu(newid).delete(purge=1)
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "%s: delete task OK" % how)
    t.ok(wait_for(lambda: not by_name(c, clone_name), 5), "%s: the clone is gone from the inventory" % how)
    e = raises(lambda: api.nodes("pve2").qemu(newid).config.get())
    t.ok(e is not None and e.status_code == 500 and "does not exist" in str(e),
         "%s: a deleted VM's config is an error" % how, e)


def machine_calls(t, c, api):
    """The calls of a Cluster API machine's life, as proxmoxer users make them: a full clone with
    description and pool, tags listed cluster-wide, a seed ISO uploaded and attached as cdrom, then
    the ISO deleted and the VM destroyed with purge and its unreferenced disks."""
    tmpl = by_name(c, "tmpl")[0]
    tmpl_id = int(tmpl["extra"].get("vmid") or 100 + tmpl["numeric_id"])
    newid = int(api.cluster.nextid.get())
    upid = api.nodes("pve1").qemu(tmpl_id).clone.post(newid=newid, name="m-capi", full=1, target="pve2", pool="k8s",
                                                      description="cloudnode.io/machine-uid: u-1\n")
    t.eq(wait_task(api, "pve1", upid).get("exitstatus"), "OK", "a full clone into a pool ends OK")
    cfg = api.nodes("pve2").qemu(newid).config.get()
    t.eq(cfg.get("description"), "cloudnode.io/machine-uid: u-1\n", "the clone has the description it was given")
    e = raises(lambda: api.nodes("pve1").qemu(tmpl_id).clone.post(newid=newid + 1, name="x", pool="nosuch"))
    t.ok(e is not None and e.status_code == 500 and "pool 'nosuch' does not exist" in str(e),
         "a clone into a pool that does not exist is refused", e)
    e = raises(lambda: api.nodes("pve1").qemu(tmpl_id).clone.post(newid=newid, name="again"))
    t.ok(e is not None and e.status_code == 500 and "VM %d already exists" % newid in str(e),
         "a clone onto a VMID in use: PVE's check_vmid_unused message", e)

    with tempfile.NamedTemporaryFile(suffix=".iso") as f:
        f.write(b"\0" * 8192)
        f.flush()
        with open(f.name, "rb") as fh:
            upid = api.nodes("pve2").storage("local").upload.post(content="iso", filename=fh)
        name = os.path.basename(f.name)
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "the seed ISO upload ends OK")
    volid = "local:iso/" + name
    e = raises(lambda: api.nodes("pve2").qemu(newid).config.post(ide2="local:iso/missing.iso,media=cdrom"))
    t.ok(e is not None and "does not exist" in str(e), "a cdrom naming a missing ISO is refused", e)
    upid = api.nodes("pve2").qemu(newid).config.post(ide2=volid + ",media=cdrom", cores=2, memory=2048)
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "the ISO attached as cdrom")
    api.nodes("pve2").qemu(newid).config.put(tags="k8s;cloudnode-machine-u-1")
    e = raises(lambda: api.nodes("pve2").qemu(newid).config.put(tags="bad tag!"))
    t.ok(e is not None and e.status_code == 400, "a tag outside PVE's format is refused", e)
    vm = [v for v in api.cluster.resources.get(type="vm") if v["vmid"] == newid]
    t.ok(len(vm) == 1 and vm[0].get("tags") == "k8s;cloudnode-machine-u-1" and vm[0].get("pool") == "k8s",
         "the cluster resources list the VM's tags and pool", vm)

    upid = api.nodes("pve2").storage("local").content(volid).delete()
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "the ISO is deleted")
    isos = [x["volid"] for x in api.nodes("pve2").storage("local").content.get(content="iso")]
    t.ok(volid not in isos, "and no longer listed", isos)
    e = raises(lambda: api.nodes("pve2").storage("local").content(volid).delete())
    t.ok(e is not None and e.status_code == 500 and "does not exist" in str(e), "deleting it again is an error", e)
    upid = api.nodes("pve2").qemu(newid).delete(purge=1, **{"destroy-unreferenced-disks": 1})
    t.eq(wait_task(api, "pve2", upid).get("exitstatus"), "OK", "destroy with purge and unreferenced disks ends OK")
    t.ok(wait_for(lambda: not by_name(c, "m-capi"), 5), "the VM is gone")


def faults(t, c, api):
    vmid = int((by_name(c, "web1")[0]["extra"] or {}).get("vmid") or 100 + by_name(c, "web1")[0]["numeric_id"])
    iid = by_name(c, "web1")[0]["id"]
    c.update_instance(iid, {"extra": {"agent_running": False}})
    e = raises(lambda: api.nodes("pve1").qemu(vmid).agent("network-get-interfaces").get())
    t.ok(e is not None and e.status_code == 500 and "QEMU guest agent is not running" in str(e),
         "the agent being off is a 500 with PVE's message", e)
    c.update_instance(iid, {"extra": {"lock": "backup"}})
    e = raises(lambda: api.nodes("pve1").qemu(vmid).status.shutdown.post())
    t.ok(e is not None and "VM is locked (backup)" in str(e), "a locked VM refuses power actions", e)
    c.update_instance(iid, {"extra": {}})
    c.fail({"platform": "proxmoxve", "path": "/status/current", "status": 596, "count": 1})
    e = raises(lambda: api.nodes("pve1").qemu(vmid).status.current.get())
    t.ok(e is not None and e.status_code == 596, "an injected 596 (pveproxy cannot reach the node) reaches the client", e)
    c.clear_faults()
    t.eq(api.nodes("pve1").qemu(vmid).status.current.get()["status"], "running", "after the fault, answers again")

    # Storage: ISO images upload through the API; snippets cannot (they are files on the storage).
    with tempfile.NamedTemporaryFile(suffix=".iso") as f:
        f.write(b"\0" * 4096)
        f.flush()
        with open(f.name, "rb") as fh:
            upid = api.nodes("pve1").storage("local").upload.post(content="iso", filename=fh)
        t.ok(upid.startswith("UPID:pve1:"), "an ISO upload answers a task", upid)
        with open(f.name, "rb") as fh:
            e = raises(lambda: api.nodes("pve1").storage("local").upload.post(content="snippets", filename=fh))
        t.ok(e is not None and e.status_code == 400, "snippets cannot be uploaded through the API, as on PVE", e)
    isos = [x["volid"] for x in api.nodes("pve1").storage("local").content.get(content="iso")]
    t.ok(len(isos) == 1 and isos[0].startswith("local:iso/"), "the upload is in the storage content", isos)
    c._admin_ok("POST", "/pve-files", {"node": "pve1", "storage": "local", "content": "snippets",
                                       "filename": "user-data.yaml", "size": 120})
    snippets = api.nodes("pve1").storage("local").content.get(content="snippets")
    t.eq([(x["volid"], x["content"]) for x in snippets], [("local:snippets/user-data.yaml", "snippets")],
         "snippets copied onto the storage are listed with content=snippets")
    t.eq(api.nodes("pve2").storage("local").content.get(content="snippets"), [], "storages are per node")
    e = raises(lambda: api.nodes("pve1").storage("nosuch").content.get())
    t.ok(e is not None and e.status_code == 500 and "does not exist" in str(e), "an unknown storage is an error", e)


def refusals(t, c, host, ca, d):
    bad = ProxmoxAPI(host, user=PVE_TOKEN["user"], token_name=PVE_TOKEN["name"], token_value="wrong", verify_ssl=ca)
    e = raises(lambda: bad.nodes.get())
    t.ok(e is not None and e.status_code == 401, "a wrong token secret is 401", e)
    try:
        ProxmoxAPI(host, user=PVE_USER["user"], password="wrong", verify_ssl=ca)
        t.ok(False, "a wrong password is refused")
    except Exception as e:  # proxmoxer 1.2 raises AuthenticationError
        t.ok("authenticate" in str(e).lower(), "a wrong password is refused at login", e)
    # A ticket without the CSRF token reads but cannot write, as pveproxy checks.
    api = ProxmoxAPI(host, user=PVE_USER["user"], password=PVE_USER["password"], verify_ssl=ca)
    ticket, _ = api.get_tokens()
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request("https://%s/api2/json/nodes/pve1/qemu/%d/status/stop" % (host, 999), method="POST",
                                 headers={"Cookie": "PVEAuthCookie=" + ticket}, data=b"")
    try:
        urllib.request.urlopen(req, context=ctx, timeout=10)
        status = 200
    except urllib.error.HTTPError as e:
        status, reason = e.code, e.reason
    t.ok(status == 401 and "csrf" in reason.lower(), "a write with a ticket but no CSRF token is 401", (status,))
    # Another CA's certificate is not trusted.
    other_ca, _, _ = tls_files(os.path.join(d, "other"))
    try:
        ProxmoxAPI(host, user=PVE_TOKEN["user"], token_name=PVE_TOKEN["name"], token_value=PVE_TOKEN["secret"],
                   verify_ssl=other_ca).nodes.get()
        t.ok(False, "a server certificate of another CA is refused")
    except Exception as e:
        t.ok("certificate verify failed" in str(e).lower() or "ssl" in type(e).__name__.lower() or "SSLError" in str(e),
             "a server certificate of another CA is refused", e)


def main():
    t = Tap()
    if proxmoxer is None:
        t.skip_all("python3-proxmoxer is not installed")
    with tempfile.TemporaryDirectory(prefix="cn-proxmoxer-") as d:
        os.makedirs(os.path.join(d, "other"))
        args, ca = tls_args(d)
        with FakeCloud(os.path.join(d, "state"), extra_args=args) as c:
            c.settings(pve_task_seconds=0.3)
            c.add_instance({"platform": "proxmoxve", "name": "web1", "extra": {"memory": 4096}})
            c.add_instance({"platform": "proxmoxve", "name": "tmpl", "status": "stopped",
                            "extra": {"template": True}})
            host = c.tls_url[len("https://"):]
            token = ProxmoxAPI(host, user=PVE_TOKEN["user"], token_name=PVE_TOKEN["name"],
                               token_value=PVE_TOKEN["secret"], verify_ssl=ca)
            t.run(everyday, c, token, "token")
            password = ProxmoxAPI(host, user=PVE_USER["user"], password=PVE_USER["password"], verify_ssl=ca)
            t.run(everyday, c, password, "password")
            t.run(machine_calls, c, password)
            t.run(machine_calls, c, token)
            t.run(faults, c, password)
            t.run(refusals, c, host, ca, d)
            log = [r for r in c.requests() if r.get("platform") == "proxmoxve"]
            t.ok(log and all("wrong" not in str(r["headers"]) and PVE_TOKEN["secret"] not in str(r["headers"])
                             for r in log), "no secret in the fake's request log")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
