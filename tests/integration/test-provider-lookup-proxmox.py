#!/usr/bin/env python3
"""lib/provider/provider.h's proxmoxve provider against the Proxmox VE fake of tests/fake-cloud over
HTTPS: lookups by providerID (proxmox://<region>/<vmid>, as proxmox-cloud-controller-manager
writes it, and proxmox://<SMBIOS UUID>, as cloudnode-agent writes it from the VM) and by VM name;
instance type, region and zone; addresses from the guest agent and, when it does not answer,
from the config's ipconfig; a stopped VM, a deleted one, another cluster's providerID. Both
authentications (API token; username and password with a ticket, renewed when the API refuses
it), TLS verified with the configured CA or a pinned certificate fingerprint (a certificate of
another CA or another fingerprint is refused), the settings refused with a clear reason, and
PVE's errors classified: a locked VM and 596 retryable, a wrong token terminal. No secret appears
in any answer."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import PVE_TOKEN, PVE_USER, FakeCloud, tls_args, tls_files  # noqa: E402
from providerlookup import TOOL, addrs, eq, write  # noqa: E402
from providerlookup import lookup as provider_lookup  # noqa: E402

SECRETS = (PVE_TOKEN["secret"], PVE_USER["password"])


def lookup(conf, *calls):
    res = provider_lookup("proxmoxve", conf, *calls)
    for s in SECRETS:
        assert s not in json.dumps(res), "a secret in the answer"
    return res


def token_conf(d, c, ca=None, fingerprint=None, secret=PVE_TOKEN["secret"], name="token.conf", extra=""):
    s = "[Global]\nurl = %s/api2/json\nregion = pve\ntoken-id = %s!%s\ntoken-secret = %s\n" % (
        c.tls_url, PVE_TOKEN["user"], PVE_TOKEN["name"], secret)
    if ca:
        s += "ca-file = %s\n" % ca
    if fingerprint:
        s += "fingerprint = %s\n" % fingerprint
    return write(os.path.join(d, name), s + extra)


def password_conf(d, c, ca, password=PVE_USER["password"], name="password.conf"):
    pw = write(os.path.join(d, name + ".pw"), password + "\n")
    return write(os.path.join(d, name), "[Global]\nurl = %s\nregion = pve\nusername = %s\npassword-file = %s\n"
                 "ca-file = %s\n" % (c.tls_url, PVE_USER["user"], pw, ca))


def vmid(inst):
    return int((inst.get("extra") or {}).get("vmid") or 100 + inst["numeric_id"])


def smbios(c, inst):
    _, _, cfg = c.api("GET", "/api2/json/nodes/%s/qemu/%d/config" % (inst["zone"], vmid(inst)),
                      headers={"Authorization": "PVEAPIToken=%s!%s=%s" % (PVE_TOKEN["user"], PVE_TOKEN["name"],
                                                                           PVE_TOKEN["secret"])})
    return cfg["data"]["smbios1"].split("uuid=", 1)[1]


def api_log(c, since):
    return [r for r in c.requests()[since:] if r.get("platform") == "proxmoxve"]


def test_lookups(t, c, d, ca):
    w1 = c.add_instance({"platform": "proxmoxve", "name": "w1", "zone": "pve2", "extra": {"cores": 4, "memory": 8192}})
    c.add_instance({"platform": "proxmoxve", "name": "other", "zone": "pve1"})
    conf = token_conf(d, c, ca=ca)
    pid = "proxmox://pve/%d" % vmid(w1)
    uuid = smbios(c, w1)
    before = len(c.requests())
    by_id, by_name, by_uuid, ex, nex, sd = lookup(conf, "metadata", pid, "metadata", "w1",
                                                  "metadata", "proxmox://" + uuid,
                                                  "exists", "w1", "exists", "nosuch", "shutdown", pid)
    eq(t, by_id["error"], 0, "lookup by providerID proxmox://<region>/<vmid> succeeds", by_id)
    eq(t, (by_id["providerID"], by_id["instanceID"]), (pid, str(vmid(w1))), "providerID and instance id", by_id)
    eq(t, (by_id["instanceType"], by_id["region"], by_id["zone"]), ("4VCPU-8GB", "pve", "pve2"),
       "instance type <cpus>VCPU-<GiB>GB, region the cluster, zone the PVE node", by_id)
    eq(t, addrs(by_id), [("Hostname", "w1"), ("InternalIP", w1["private_ipv4"]), ("ExternalIP", w1["public_ipv4"]),
                         ("ExternalIP", w1["ipv6"])],
       "addresses from the guest agent: private IPv4 internal, public ones external, no loopback or link-local",
       by_id)
    eq(t, (by_name.get("providerID"), by_name.get("zone")), (pid, "pve2"), "lookup by VM name finds the same VM",
       by_name)
    eq(t, (by_uuid.get("error"), by_uuid.get("instanceID"), by_uuid.get("providerID")),
       (0, str(vmid(w1)), "proxmox://" + smbios(c, w1)),
       "the agent's proxmox://<SMBIOS UUID> finds the VM and keeps its providerID", by_uuid)
    eq(t, (ex["error"], ex["value"], nex["error"], nex["value"]), (0, True, 0, False), "exists: true, and false for an "
       "unknown name", nex)
    eq(t, (sd["error"], sd["value"]), (0, False), "a running VM is not shut down", sd)
    log = api_log(c, before)
    t.ok(log and all(r["headers"].get("Authorization") == "<redacted>" for r in log),
         "every request carries the API token (redacted in the log)", log[:3])
    eq(t, log[0]["path"], "/api2/json/cluster/resources?type=vm", "a lookup starts from the cluster's VM list")

    c.update_instance(w1["id"], {"extra": {"cores": 4, "memory": 8192, "agent_running": False}})
    r, = lookup(conf, "metadata", pid)
    eq(t, addrs(r), [("Hostname", "w1"), ("InternalIP", w1["private_ipv4"]), ("InternalIP", w1["ipv6"])],
       "guest agent not running: the addresses of the config's ipconfig0", r)
    c.update_instance(w1["id"], {"extra": {"cores": 4, "memory": 8192, "pve_config": {"agent": None}}})
    r, = lookup(conf, "metadata", pid)
    eq(t, (r["error"], len(addrs(r))), (0, 3), "no agent configured: the config's ipconfig0 too", r)
    for n in range(5):
        c.add_instance({"platform": "proxmoxve", "name": "filler-%d" % n})
    before = len(c.requests())
    r1, r2 = lookup(conf, "exists", "proxmox://" + uuid.upper(), "exists", "proxmox://" + uuid)
    configs = [r["path"] for r in api_log(c, before) if r["path"].endswith("/config")]
    eq(t, (r1.get("value"), r2.get("value")), (True, True), "the SMBIOS UUID matches in any case", r1)
    t.ok(len(configs) >= 2 and configs[-1] == configs[-2] and
         len([p for p in configs if p.endswith("/%d/config" % vmid(w1))]) == 2,
         "the second lookup by UUID reads only the config of the VM found the first time", configs)
    c.stop(w1["id"])
    r1, r2 = lookup(conf, "shutdown", pid, "metadata", "proxmox://" + uuid)
    eq(t, (r1["error"], r1["value"]), (0, True), "a stopped VM is shut down", r1)
    eq(t, (r2["error"], r2["shutdown"]), (0, True), "a stopped VM found by SMBIOS UUID is shut down", r2)
    c.start(w1["id"])
    r1, r2, r3 = lookup(conf, "exists", "proxmox://other-cluster/%d" % vmid(w1), "metadata", "proxmox://pve/99999",
                        "metadata", "proxmox://00000000-0000-0000-0000-000000000000")
    eq(t, (r1["class"], r1.get("message")),
       ("terminal", "the providerID names another Proxmox VE cluster (region) than the cloud config's"),
       "another cluster's providerID is refused, never reported gone (its Node must not be deleted)", r1)
    eq(t, (r2["class"], r3["class"]), ("not-found", "not-found"), "unknown vmid and unknown UUID are not-found", r3)
    r, = lookup(conf, "metadata", "proxmox://pve/abc")
    eq(t, r["class"], "terminal", "a malformed providerID is refused as terminal", r)
    c.remove_instance(w1["id"])
    r, = lookup(conf, "exists", pid)
    eq(t, (r["error"], r["value"]), (0, False), "a deleted VM does not exist", r)
    tmpl = c.add_instance({"platform": "proxmoxve", "name": "tmpl", "extra": {"template": True}})
    r, = lookup(conf, "exists", "tmpl")
    eq(t, r["value"], False, "a template is no Node's VM", r)
    c.remove_instance(tmpl["id"])


def test_password(t, c, d, ca):
    w2 = c.add_instance({"platform": "proxmoxve", "name": "w2"})
    conf = password_conf(d, c, ca)
    before = len(c.requests())
    r1, r2 = lookup(conf, "metadata", "w2", "exists", "proxmox://pve/%d" % vmid(w2))
    eq(t, (r1["error"], r1["providerID"], r2["value"]), (0, "proxmox://pve/%d" % vmid(w2), True),
       "username and password: lookups succeed", r1)
    log = api_log(c, before)
    eq(t, [r["path"] for r in log if r["method"] == "POST"], ["/api2/json/access/ticket"],
       "one login for both lookups: the ticket is reused")
    # A ticket the API refuses (it expired early) is replaced once, by one provider object.
    p = subprocess.Popen([TOOL, "proxmoxve", conf, "exists", "w2", "wait", "-", "exists", "w2"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    p.stdout.readline()
    c.settings(pve_ticket_ttl=3)
    time.sleep(4)
    before = len(c.requests())
    out, _ = p.communicate("\n", timeout=60)
    c.settings(pve_ticket_ttl=7200)
    r = json.loads(out.splitlines()[0])
    logins = [x for x in api_log(c, before) if x["path"] == "/api2/json/access/ticket"]
    eq(t, (r["error"], r["value"]), (0, True), "an expired ticket is renewed and the lookup succeeds", r)
    eq(t, len(logins), 1, "exactly one new login after the refusal")
    bad = password_conf(d, c, ca, password="wrong", name="bad.conf")
    r, = lookup(bad, "exists", "w2")
    eq(t, (r["class"], r.get("message")), ("terminal", "the Proxmox VE API refused the username or password"),
       "a wrong password is terminal with a clear message", r)
    c.remove_instance(w2["id"])


def test_tls_and_errors(t, c, d, ca):
    w3 = c.add_instance({"platform": "proxmoxve", "name": "w3"})
    pid = "proxmox://pve/%d" % vmid(w3)
    r, = lookup(token_conf(d, c, ca=ca, secret="wrong", name="wrong.conf"), "exists", pid)
    eq(t, (r["class"], r.get("message")), ("terminal", "the Proxmox VE API refused the API token"),
       "a wrong token secret is terminal with a clear message", r)
    other = os.path.join(d, "other")
    os.makedirs(other, exist_ok=True)
    other_ca, _, _ = tls_files(other)
    r, = lookup(token_conf(d, c, ca=other_ca, name="other.conf"), "exists", pid)
    eq(t, (r["class"], r.get("message"), r.get("value")),
       ("terminal", "the Proxmox VE API's certificate is not trusted: check ca-file or fingerprint", False),
       "a server certificate of another CA is refused, terminal, with a clear message", r)
    crt = os.path.join(d, "fake-cloud.crt")
    fp = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-fingerprint", "-sha256"], capture_output=True,
                        text=True, check=True).stdout.strip().split("=", 1)[1]
    r, = lookup(token_conf(d, c, fingerprint=fp, name="pin.conf"), "metadata", pid)
    eq(t, (r["error"], r.get("providerID")), (0, pid), "the pinned SHA-256 fingerprint of the certificate is trusted", r)
    wrong_fp = ("00" if not fp.startswith("00") else "11") + fp[2:]
    r, = lookup(token_conf(d, c, fingerprint=wrong_fp, name="pin2.conf"), "metadata", pid)
    eq(t, (r["class"], r.get("providerID")), ("terminal", None), "another fingerprint is refused", r)
    r, = lookup(token_conf(d, c, fingerprint=fp.replace(":", "").lower(), name="pin3.conf"), "exists", pid)
    eq(t, r.get("value"), True, "the fingerprint may be written without colons, in any case", r)

    c.update_instance(w3["id"], {"extra": {"lock": "backup"}})
    c.fail({"platform": "proxmoxve", "path": "/status/current", "status": 500, "count": 1,
            "body": {"data": None, "message": "VM is locked (backup)\n"}})
    r, = lookup(token_conf(d, c, ca=ca), "metadata", pid)
    eq(t, (r["class"], r.get("message")), ("retryable", "VM is locked (backup)"), "a locked VM is retryable", r)
    c.update_instance(w3["id"], {"extra": {}})
    c.fail({"platform": "proxmoxve", "path": "/cluster/resources", "status": 596, "count": 1})
    r, = lookup(token_conf(d, c, ca=ca), "metadata", pid)
    eq(t, r["class"], "retryable", "596 (pveproxy cannot reach the node) is retryable", r)
    c.fail({"platform": "proxmoxve", "path": "/config", "status": 500, "count": 1,
            "body": {"data": None, "message": "got timeout\n"}})
    r, = lookup(token_conf(d, c, ca=ca), "metadata", pid)
    eq(t, (r["class"], r.get("message")), ("retryable", "got timeout"), "a storage timeout is retryable", r)
    c.clear_faults()
    c.remove_instance(w3["id"])


def test_settings(t, c, d, ca):
    cases = [
        ("[Global]\nregion = pve\ntoken-id = root@pam!x\ntoken-secret = s\n", "url must be set"),
        ("[Global]\nurl = http://127.0.0.1:1\nregion = pve\ntoken-id = root@pam!x\ntoken-secret = s\n",
         "https://"),
        ("[Global]\nurl = https://127.0.0.1:1\ntoken-id = root@pam!x\ntoken-secret = s\n", "region"),
        ("[Global]\nurl = https://127.0.0.1:1\nregion = pve\n", "token-id"),
        ("[Global]\nurl = https://127.0.0.1:1\nregion = pve\ntoken-id = root!x\ntoken-secret = s\n", "USER@REALM"),
        ("[Global]\nurl = https://127.0.0.1:1\nregion = pve\ntoken-id = root@pam!x\n", "token-secret"),
        ("[Global]\nurl = https://127.0.0.1:1\nregion = pve\ntoken-id = root@pam!x\ntoken-secret = s\n"
         "fingerprint = zz\n", "fingerprint"),
        ("[Global]\nurl = https://127.0.0.1:1\nregion = pve\ntoken-id = root@pam!x\ntoken-secret = s\n"
         "fingerprint = %s\nca-file = %s\n" % ("AA:" * 31 + "AA", ca), "not both"),
    ]
    for n, (text, want) in enumerate(cases):
        conf = write(os.path.join(d, "bad%d.conf" % n), text)
        p = subprocess.run([TOOL, "proxmoxve", conf, "exists", "x"], capture_output=True, text=True, timeout=30)
        t.ok(p.returncode != 0 and want in p.stderr and len(p.stderr.strip().splitlines()) == 1,
             "bad settings refused with one line naming %r" % want, p.stderr)


def main():
    t = Tap()
    if not os.path.exists(TOOL):
        t.bail_out("tests/provider-lookup is not built")
    with tempfile.TemporaryDirectory(prefix="cn-pve-lookup-") as d:
        args, ca = tls_args(d)
        with FakeCloud(os.path.join(d, "state"), extra_args=args) as c:
            for fn in (test_lookups, test_password, test_tls_and_errors, test_settings):
                t.run(fn, c, d, ca)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
