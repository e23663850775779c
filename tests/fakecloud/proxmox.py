"""Proxmox VE API (https://pve.proxmox.com/pve-docs/api-viewer/) under /api2/json: the instances of
platform proxmoxve as QEMU VMs of a cluster (setting pve_cluster_name) whose nodes are the setting
pve_nodes; an instance's zone is its node.

Authentication as pveproxy checks it: an API token (`Authorization: PVEAPIToken=USER@REALM!ID=SECRET`,
setting pve_tokens) or a ticket (POST /access/ticket with username and password, setting pve_users;
the ticket goes in the cookie PVEAuthCookie and every write also needs the CSRFPreventionToken
header; tickets expire after pve_ticket_ttl seconds, 2 h as on PVE). Anything else is 401.

Answers are {"data": ...}. Errors carry their message as the HTTP reason phrase (what PVE sends and
proxmoxer reports) and in the body {"data": null, "message": "...\\n"}; parameter errors are 400
with {"errors": {param: text}}. Long operations (clone, start, stop, delete, upload, volume delete) answer a UPID;
GET /nodes/{node}/tasks/{upid}/status says "running" until pve_task_seconds passed, then "stopped"
with exitstatus "OK" or the error.

A VM of the inventory: vmid extra.vmid (default 100 + numeric_id), config from the instance
(cores extra.cores, memory extra.memory in MiB, smbios1 uuid extra.smbios_uuid, net0 with the MAC,
ipconfig0 with the addresses) overridden by extra.pve_config; extra.agent_running (default true)
says whether the QEMU guest agent answers; extra.lock and extra.template as in the config;
extra.pool the VM's pool (setting pve_pools), which /cluster/resources lists with its tags.

Clones as PVE's clone_vm: the new VMID checked unused first ("VM N already exists on node ..."),
name, description, pool, storage (full clones only), target. Storage content: upload (iso names
ending .iso/.img), list, DELETE .../content/{volid}; a cdrom (ideN) naming an ISO volume must exist
on the VM's node. Uploaded bytes are kept for the tests (GET /_admin/pve-files)."""
import email.parser
import email.policy
import base64
import hashlib
import hmac
import json
import re
import time
import urllib.parse
import uuid

from . import state as st_mod
from .state import StateError
from .web import json_response

PVE_VERSION = {"version": "8.2.4", "release": "8.2", "repoid": "faa83925c9641325"}
NODE_MEM = 64 * 1024 ** 3


class PveError(Exception):
    def __init__(self, status, message, errors=None):
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors


def error(status, message, errors=None):
    body = {"data": None}
    if errors:
        body["errors"] = errors
    else:
        body["message"] = message + "\n"
    resp = json_response(body, status)
    # pveproxy puts the message in the status line, which is what clients show.
    resp.reason = message.replace("\r", " ").replace("\n", " ")
    return resp


def status_response(status):
    """An injected fault without a body."""
    return error(status, "injected failure")


def data(obj, status=200):
    return json_response({"data": obj}, status)


def vmid_of(inst):
    return int((inst.get("extra") or {}).get("vmid") or 100 + inst["numeric_id"])


def smbios_uuid(inst):
    return (inst.get("extra") or {}).get("smbios_uuid") or str(uuid.uuid5(uuid.NAMESPACE_URL, "pve:" + inst["id"]))


def vm_config(inst):
    ex = inst.get("extra") or {}
    cfg = {
        "name": inst["name"],
        "cores": int(ex.get("cores", 2)),
        "sockets": 1,
        "memory": str(ex.get("memory", 2048)),
        "ostype": "l26",
        "boot": "order=scsi0",
        "scsihw": "virtio-scsi-single",
        "scsi0": "local-lvm:vm-%d-disk-0,size=20G" % vmid_of(inst),
        "ide2": "local-lvm:vm-%d-cloudinit,media=cdrom" % vmid_of(inst),
        "net0": "virtio=%s,bridge=vmbr0" % inst["mac"].upper(),
        "smbios1": "uuid=%s" % smbios_uuid(inst),
        "vmgenid": str(uuid.uuid5(uuid.NAMESPACE_URL, "vmgenid:" + inst["id"])),
        "agent": "1",
    }
    ip = []
    if inst.get("private_ipv4"):
        ip.append("ip=%s/24,gw=%s" % (inst["private_ipv4"], inst["private_ipv4"].rsplit(".", 1)[0] + ".1"))
    if inst.get("ipv6"):
        ip.append("ip6=%s/64" % inst["ipv6"])
    if ip:
        cfg["ipconfig0"] = ",".join(ip)
    if ex.get("template"):
        cfg["template"] = 1
    if ex.get("lock"):
        cfg["lock"] = ex["lock"]
    for k, v in (ex.get("pve_config") or {}).items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    cfg["digest"] = hashlib.sha1(json.dumps(cfg, sort_keys=True).encode()).hexdigest()
    return cfg


def _maxmem(cfg):
    return int(str(cfg.get("memory", 512))) * 1024 * 1024


def _cpus(cfg):
    return int(cfg.get("cores", 1)) * int(cfg.get("sockets", 1))


def _agent_enabled(cfg):
    return str(cfg.get("agent", "0")).split(",")[0] in ("1", "enabled=1")


def add_file(state, spec):
    """Admin: a file on a node's storage, as an operator copies snippets there ({"node", "storage",
    "content", "filename", "size"})."""
    st = state.read()
    if spec.get("node") not in st["settings"]["pve_nodes"] or \
            spec.get("content") not in st["settings"]["pve_storages"].get(spec.get("storage"), []):
        raise StateError(400, "unknown node, storage or content type of that storage")
    name = spec.get("filename") or ""
    if not name or "/" in name or name.startswith("."):
        raise StateError(400, "filename must be a plain file name")
    volid = "%s:%s/%s" % (spec["storage"], spec["content"], name)
    entry = {"content": spec["content"], "format": name.rsplit(".", 1)[-1] if "." in name else "raw",
             "size": int(spec.get("size", 0)), "ctime": int(time.time())}
    with state.locked() as s:
        s.setdefault("pve_storage", {}).setdefault("%s/%s" % (spec["node"], spec["storage"]), {})[volid] = entry
    return dict(entry, volid=volid)


class Api:
    def __init__(self, state):
        self.state = state

    # -- auth ------------------------------------------------------------------------

    def _sign(self, text):
        return hmac.new(self.state.read()["secret"].encode(), text.encode(), hashlib.sha256).hexdigest()

    def _ticket(self, user, now):
        stamp = "%08X" % int(now)
        plain = "PVE:%s:%s" % (user, stamp)
        return plain + "::" + self._sign(plain), "%s:%s" % (stamp, self._sign("csrf:%s:%s" % (user, stamp)))

    def _check_ticket(self, ticket, now):
        """The user of a valid, unexpired ticket, else None."""
        plain, _, sig = ticket.partition("::")
        parts = plain.split(":")
        if len(parts) != 3 or parts[0] != "PVE" or not hmac.compare_digest(sig, self._sign(plain)):
            return None, None
        try:
            issued = int(parts[2], 16)
        except ValueError:
            return None, None
        if now - issued > self.state.read()["settings"]["pve_ticket_ttl"] or issued > now + 300:
            return None, None
        return parts[1], parts[2]

    def _auth(self, req, now):
        auth = req.header("Authorization") or ""
        if auth.startswith("PVEAPIToken="):
            tokenid, sep, secret = auth[len("PVEAPIToken="):].partition("=")
            for t in self.state.read()["settings"]["pve_tokens"]:
                if sep and t["tokenid"] == tokenid and hmac.compare_digest(t["secret"], secret):
                    return
            raise PveError(401, "no such token '%s' in user '%s'" % (
                tokenid.partition("!")[2], tokenid.partition("!")[0]) if sep else "invalid token value")
        cookies = {}
        for part in (req.header("Cookie") or "").split(";"):
            k, _, v = part.strip().partition("=")
            cookies[k] = urllib.parse.unquote(v)
        ticket = cookies.get("PVEAuthCookie")
        if not ticket:
            raise PveError(401, "No ticket")
        user, stamp = self._check_ticket(ticket, now)
        if user is None:
            raise PveError(401, "invalid PVE ticket")
        if req.method != "GET":
            csrf = req.header("CSRFPreventionToken") or ""
            want = "%s:%s" % (stamp, self._sign("csrf:%s:%s" % (user, stamp)))
            if not hmac.compare_digest(csrf, want):
                raise PveError(401, "Permission denied - invalid csrf token")

    def login(self, req, now):
        p = self._params(req)
        user, password = p.get("username", ""), p.get("password", "")
        if "@" not in user and p.get("realm"):
            user += "@" + p["realm"]
        for u in self.state.read()["settings"]["pve_users"]:
            if u["userid"] == user and hmac.compare_digest(u["password"], password):
                ticket, csrf = self._ticket(user, now)
                return data({"username": user, "ticket": ticket, "CSRFPreventionToken": csrf,
                             "cap": {"vms": {"VM.Audit": 1, "VM.PowerMgmt": 1, "VM.Clone": 1, "VM.Allocate": 1}}})
        # The same passed-in ticket renews a session, as proxmoxer does.
        if self._check_ticket(password, now)[0] == user:
            ticket, csrf = self._ticket(user, now)
            return data({"username": user, "ticket": ticket, "CSRFPreventionToken": csrf})
        return error(401, "authentication failure")

    # -- request plumbing --------------------------------------------------------------

    @staticmethod
    def _params(req):
        out = dict(req.query)
        ctype = req.header("Content-Type") or ""
        if req.body and ctype.startswith("application/json"):
            out.update({k: v if isinstance(v, str) else json.dumps(v) if isinstance(v, (dict, list)) else str(v)
                        for k, v in json.loads(req.body.decode()).items()})
        elif req.body and ctype.startswith("application/x-www-form-urlencoded"):
            out.update(dict(urllib.parse.parse_qsl(req.body.decode(), keep_blank_values=True)))
        return out

    def handle(self, req):
        now = time.time()
        try:
            parts = [p for p in req.path.split("/") if p][2:]
            if parts == ["access", "ticket"] and req.method == "POST":
                return self.login(req, now)
            self._auth(req, now)
            return self.route(req, parts, now)
        except PveError as e:
            return error(e.status, e.message, e.errors)
        except StateError as e:
            return error(e.status, e.message)
        except (ValueError, KeyError) as e:
            return error(400, "Parameter verification failed.", {"_": str(e)})

    def _settings(self):
        return self.state.read()["settings"]

    def _nodes(self):
        return list(self._settings()["pve_nodes"])

    def _vms(self, st=None):
        st = st or self.state.read()
        out = []
        for iid in st["order"]:
            inst = st["instances"].get(iid)
            if inst and inst["platform"] == "proxmoxve" and not st_mod.gone(inst):
                out.append(inst)
        return out

    def _vm(self, node, vmid, st=None):
        try:
            vmid = int(vmid)
        except ValueError:
            raise PveError(400, "Parameter verification failed.", {"vmid": "type check ('integer') failed"})
        for inst in self._vms(st):
            if vmid_of(inst) == vmid:
                if inst["zone"] != node:
                    break
                return inst
        raise PveError(500, "Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist" % (node, vmid))

    def _node(self, node):
        if node not in self._nodes():
            raise PveError(595, "no such cluster node '%s'" % node)

    # -- tasks -----------------------------------------------------------------------

    def _new_task(self, st, node, kind, vmid, now, effect, err=None):
        """A UPID whose effect (a dict of instance changes, or "delete") applies when it ends."""
        n = st["counters"].get("pve_task", 0) + 1
        st["counters"]["pve_task"] = n
        upid = "UPID:%s:%08X:%08X:%08X:%s:%s:root@pam:" % (node, 4000 + n, 100000 + n, int(now), kind, vmid)
        st.setdefault("pve_tasks", {})[upid] = {
            "node": node, "type": kind, "id": str(vmid), "start": now,
            "end": now + float(st["settings"]["pve_task_seconds"]), "effect": effect, "error": err}
        return upid

    def _settle(self, st, now):
        """Applies the effects of the tasks that ended."""
        for upid, t in st.get("pve_tasks", {}).items():
            if t.get("done") or t["end"] > now:
                continue
            t["done"] = True
            iid, changes = t["effect"] if t["effect"] else (None, None)
            inst = st["instances"].get(iid) if iid else None
            if inst is None or t["error"]:
                if t["type"] == "qmclone" and inst is not None:
                    st_mod.remove_instance(st, iid)
                continue
            if changes == "delete":
                st_mod.remove_instance(st, iid)
            else:
                extra = dict(inst.get("extra") or {})
                extra.update(changes.pop("extra", {}))
                inst.update(changes)
                inst["extra"] = extra

    def task_status(self, node, upid, now):
        with self.state.locked() as st:
            self._settle(st, now)
            t = st.get("pve_tasks", {}).get(upid)
        if t is None or t["node"] != node:
            raise PveError(500, "no such task")
        out = {"upid": upid, "node": node, "type": t["type"], "id": t["id"], "user": "root@pam",
               "starttime": int(t["start"]), "pid": int(upid.split(":")[2], 16), "pstart": int(upid.split(":")[3], 16)}
        if t.get("done"):
            out.update(status="stopped", exitstatus=t["error"] or "OK")
        else:
            out["status"] = "running"
        return data(out)

    # -- routes --------------------------------------------------------------------

    def route(self, req, parts, now):
        m = req.method
        with self.state.locked() as st:
            self._settle(st, now)
        if parts == ["version"] and m == "GET":
            return data(PVE_VERSION)
        if parts == ["cluster", "resources"] and m == "GET":
            return data(self.resources(req.query.get("type")))
        if parts == ["cluster", "nextid"] and m == "GET":
            return self.nextid(req.query.get("vmid"))
        if parts == ["nodes"] and m == "GET":
            return data([self.node_json(n) for n in self._nodes()])
        if len(parts) >= 2 and parts[0] == "nodes":
            node = parts[1]
            self._node(node)
            rest = parts[2:]
            if rest == ["qemu"] and m == "GET":
                return data([self.vm_status_json(i) for i in self._vms() if i["zone"] == node])
            if len(rest) == 4 and rest[:2] == ["tasks"] and rest[3] == "status" and m == "GET":
                return self.task_status(node, rest[2], now)
            if len(rest) >= 2 and rest[0] == "tasks" and m == "GET":
                return self.task_status(node, rest[1], now)
            if len(rest) >= 2 and rest[0] == "qemu":
                return self.qemu(req, node, rest[1], rest[2:], now)
            if len(rest) >= 3 and rest[0] == "storage":
                return self.storage(req, node, rest[1], rest[2:], now)
        raise PveError(501, "Method '%s /%s' not implemented" % (m, "/".join(parts)))

    def node_json(self, node):
        vms = [i for i in self._vms() if i["zone"] == node]
        return {"node": node, "status": "online", "type": "node", "id": "node/" + node, "level": "",
                "maxcpu": 32, "cpu": 0.02, "maxmem": NODE_MEM, "mem": sum(_maxmem(vm_config(i)) for i in vms),
                "maxdisk": 100 * 1024 ** 3, "disk": 10 * 1024 ** 3, "uptime": 86400,
                "ssl_fingerprint": "AA:" * 31 + "AA"}

    def vm_status_json(self, inst):
        cfg = vm_config(inst)
        running = inst["status"] == "running"
        out = {"vmid": vmid_of(inst), "name": inst["name"], "status": "running" if running else "stopped",
               "cpus": _cpus(cfg), "maxmem": _maxmem(cfg), "mem": _maxmem(cfg) // 2 if running else 0,
               "maxdisk": 20 * 1024 ** 3, "disk": 0, "cpu": 0.01 if running else 0,
               "uptime": int(time.time() - inst["created"]) if running else 0,
               "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0}
        if cfg.get("template"):
            out["template"] = 1
        if cfg.get("lock"):
            out["lock"] = cfg["lock"]
        return out

    def resources(self, kind):
        out = []
        if kind in (None, "node"):
            for n in self._nodes():
                j = self.node_json(n)
                out.append(dict(j, type="node"))
        if kind in (None, "vm"):
            for inst in self._vms():
                j = self.vm_status_json(inst)
                j.update(id="qemu/%d" % j["vmid"], type="qemu", node=inst["zone"], template=j.get("template", 0),
                         maxcpu=j.pop("cpus"))
                # As PVE 8: tags ("a;b") and pool only when the VM has them.
                cfg = vm_config(inst)
                if cfg.get("tags"):
                    j["tags"] = cfg["tags"]
                if (inst.get("extra") or {}).get("pool"):
                    j["pool"] = inst["extra"]["pool"]
                out.append(j)
        if kind not in (None, "node", "vm", "storage", "sdn"):
            raise PveError(400, "Parameter verification failed.",
                           {"type": "value '%s' does not have a value in the enumeration 'vm, storage, node, sdn'"
                            % kind})
        return out

    def nextid(self, want):
        taken = {vmid_of(i) for i in self._vms()}
        if want is not None:
            try:
                n = int(want)
            except ValueError:
                raise PveError(400, "Parameter verification failed.", {"vmid": "type check ('integer') failed"})
            if n in taken:
                raise PveError(400, "Parameter verification failed.", {"vmid": "VM %d already exists" % n})
            return data(str(n))
        n = 100
        while n in taken:
            n += 1
        return data(str(n))

    def qemu(self, req, node, vmid, rest, now):
        m = req.method
        if rest == [] and m == "DELETE":
            return self.destroy(req, node, vmid, now)
        inst = self._vm(node, vmid)
        cfg = vm_config(inst)
        if rest == [] and m == "GET":
            return data([{"subdir": s} for s in ("config", "pending", "status", "agent", "clone", "snapshot")])
        if rest == ["config"] and m == "GET":
            return data(cfg)
        if rest == ["config"] and m in ("POST", "PUT"):
            return self.set_config(req, node, inst, cfg, now, m == "POST")
        if rest == ["status", "current"] and m == "GET":
            out = self.vm_status_json(inst)
            out.update(qmpstatus=out["status"], agent=1 if _agent_enabled(cfg) else 0)
            return data(out)
        if len(rest) == 2 and rest[0] == "status" and rest[1] in ("start", "stop", "shutdown", "reboot") \
                and m == "POST":
            return self.power(node, inst, cfg, rest[1], now)
        if rest == ["agent", "network-get-interfaces"] and m == "GET":
            return data({"result": self.agent_interfaces(inst, cfg)})
        if rest == ["clone"] and m == "POST":
            return self.clone(req, node, inst, cfg, now)
        raise PveError(501, "Method '%s /nodes/%s/qemu/%s/%s' not implemented" % (m, node, vmid, "/".join(rest)))

    @staticmethod
    def _check_lock(cfg):
        if cfg.get("lock"):
            raise PveError(500, "VM is locked (%s)" % cfg["lock"])

    def set_config(self, req, node, inst, cfg, now, asynchronous):
        p = self._params(req)
        self._check_lock(cfg)
        if p.get("digest") and p["digest"] != cfg["digest"]:
            raise PveError(500, "detected modified configuration - file changed by other user? Try again.")
        changes = {k: v for k, v in p.items() if k not in ("digest", "delete", "skiplock", "node", "vmid")}
        for k in changes:
            if k in ("smbios1", "vmgenid", "digest") or not k.replace("_", "").isalnum():
                raise PveError(400, "Parameter verification failed.", {k: "property is not defined in schema"})
        for k in ("cores", "sockets", "memory"):
            if k in changes and not str(changes[k]).isdigit():
                raise PveError(400, "Parameter verification failed.", {k: "type check ('integer') failed"})
        for tag in [x for x in re.split("[;, ]", changes.get("tags", "")) if x]:
            if not re.fullmatch(r"(?i)[a-z0-9_][a-z0-9_\-+.]*", tag):
                raise PveError(400, "Parameter verification failed.", {"tags": "invalid format - invalid tag '%s'" % tag})
        for k in ("ide0", "ide1", "ide2", "ide3"):
            vol = changes.get(k, "").split(",")[0]
            if ":iso/" in vol:
                files = self.state.read().get("pve_storage", {}).get("%s/%s" % (node, vol.split(":")[0]), {})
                if vol not in files:
                    raise PveError(500, "volume '%s' does not exist" % vol)
        with self.state.locked() as st:
            i = st["instances"][inst["id"]]
            extra = dict(i.get("extra") or {})
            pve = dict(extra.get("pve_config") or {})
            for k in [d for d in p.get("delete", "").split(",") if d]:
                pve[k] = None
            for k, v in changes.items():
                if k == "name":
                    i["name"] = v
                elif k == "cores":
                    extra["cores"] = int(v)
                elif k == "memory":
                    extra["memory"] = int(v)
                else:
                    pve[k] = v
            extra["pve_config"] = pve
            i["extra"] = extra
            if asynchronous:
                return data(self._new_task(st, node, "qmconfig", vmid_of(i), now, None))
        return data(None)

    def power(self, node, inst, cfg, action, now):
        if action != "stop":
            self._check_lock(cfg)
        running = inst["status"] == "running"
        err = None
        if action == "start" and running:
            err = "VM %d already running" % vmid_of(inst)
        if action in ("shutdown", "reboot") and not running:
            err = "VM %d not running" % vmid_of(inst)
        if cfg.get("template"):
            raise PveError(500, "you can't start a vm if it's a template")
        status = {"start": "running", "stop": "stopped", "shutdown": "stopped", "reboot": "running"}[action]
        with self.state.locked() as st:
            upid = self._new_task(st, node, "qm" + action, vmid_of(inst), now, (inst["id"], {"status": status}), err)
        return data(upid)

    def agent_interfaces(self, inst, cfg):
        if not _agent_enabled(cfg):
            raise PveError(500, "No QEMU guest agent configured")
        if inst["status"] != "running":
            raise PveError(500, "VM %d is not running" % vmid_of(inst))
        if not (inst.get("extra") or {}).get("agent_running", True):
            raise PveError(500, "QEMU guest agent is not running")
        eth = {"name": "eth0", "hardware-address": inst["mac"].lower(), "ip-addresses": [],
               "statistics": {"rx-bytes": 1024, "tx-bytes": 2048, "rx-packets": 10, "tx-packets": 12,
                              "rx-errs": 0, "tx-errs": 0, "rx-dropped": 0, "tx-dropped": 0}}
        if inst.get("private_ipv4"):
            eth["ip-addresses"].append({"ip-address-type": "ipv4", "ip-address": inst["private_ipv4"], "prefix": 24})
        if inst.get("public_ipv4"):
            eth["ip-addresses"].append({"ip-address-type": "ipv4", "ip-address": inst["public_ipv4"], "prefix": 24})
        if inst.get("ipv6"):
            eth["ip-addresses"].append({"ip-address-type": "ipv6", "ip-address": inst["ipv6"], "prefix": 64})
            eth["ip-addresses"].append({"ip-address-type": "ipv6", "prefix": 64, "ip-address":
                                        "fe80::ff:fe00:%x" % inst["numeric_id"]})
        lo = {"name": "lo", "hardware-address": "00:00:00:00:00:00",
              "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8},
                               {"ip-address-type": "ipv6", "ip-address": "::1", "prefix": 128}]}
        return [lo, eth]

    def clone(self, req, node, inst, cfg, now):
        p = self._params(req)
        if "newid" not in p:
            raise PveError(400, "Parameter verification failed.", {"newid": "property is missing and it is not optional"})
        try:
            newid = int(p["newid"])
        except ValueError:
            raise PveError(400, "Parameter verification failed.", {"newid": "type check ('integer') failed"})
        if not 100 <= newid <= 999999999:
            raise PveError(400, "Parameter verification failed.", {"newid": "value must have a minimum value of 100"})
        target = p.get("target") or node
        self._node(target)
        if target != node and not cfg.get("template") and not p.get("full"):
            raise PveError(500, "Can't clone to other node if VM is not a template (use full clone)")
        self._check_lock(cfg)
        name = p.get("name") or "Copy-of-VM-" + inst["name"]
        pool = p.get("pool")
        if pool is not None and pool not in self._settings()["pve_pools"]:
            raise PveError(500, "pool '%s' does not exist" % pool)
        storage = p.get("storage")
        if storage is not None and "images" not in self._settings()["pve_storages"].get(storage, []):
            raise PveError(500, "storage '%s' does not exist or does not support VM images" % storage)
        if storage is not None and p.get("full") not in ("1", "true"):
            raise PveError(400, "Parameter verification failed.", {"storage": "option 'storage' requires a full clone"})
        with self.state.locked() as st:
            # PVE::Cluster::check_vmid_unused, the first check of a clone
            for i in self._vms(st):
                if vmid_of(i) == newid:
                    raise PveError(500, "VM %d already exists on node '%s'" % (newid, i["zone"]))
            ex = inst.get("extra") or {}
            extra = {"vmid": newid, "lock": "clone", "cores": ex.get("cores", 2), "memory": ex.get("memory", 2048),
                     "pve_config": {k: v for k, v in (ex.get("pve_config") or {}).items()
                                    if k not in ("template", "lock")}}
            if p.get("description") is not None:
                extra["pve_config"]["description"] = p["description"]
            if pool is not None:
                extra["pool"] = pool
            st["counters"]["host"] = max(st["counters"]["host"], newid - 100)
            new = st_mod.add_instance(st, {"platform": "proxmoxve", "name": name, "zone": target,
                                           "region": inst["region"], "status": "stopped", "extra": extra},
                                      source="api")
            new["numeric_id"] = newid - 100
            upid = self._new_task(st, node, "qmclone", vmid_of(inst), now, (new["id"], {"extra": {"lock": None}}))
        return data(upid)

    def destroy(self, req, node, vmid, now):
        for k in ("purge", "destroy-unreferenced-disks", "skiplock"):
            if req.query.get(k, "0") not in ("0", "1"):
                raise PveError(400, "Parameter verification failed.", {k: "type check ('boolean') failed"})
        inst = self._vm(node, vmid)
        cfg = vm_config(inst)
        self._check_lock(cfg)
        if inst["status"] == "running":
            raise PveError(500, "VM %d is running - destroy failed" % vmid_of(inst))
        with self.state.locked() as st:
            upid = self._new_task(st, node, "qmdestroy", vmid_of(inst), now, (inst["id"], "delete"))
        return data(upid)

    # -- storage ---------------------------------------------------------------------

    def storage(self, req, node, storage, rest, now):
        if storage not in self._settings()["pve_storages"]:
            raise PveError(500, "storage '%s' does not exist" % storage)
        allowed = self._settings()["pve_storages"][storage]
        with self.state.locked() as st:
            files = st.setdefault("pve_storage", {}).setdefault("%s/%s" % (node, storage), {})
            if rest == ["content"] and req.method == "GET":
                want = req.query.get("content")
                return data([dict({k: x for k, x in f.items() if k != "data"}, volid=v) for v, f in sorted(files.items())
                             if not want or f["content"] == want])
            if len(rest) >= 2 and rest[0] == "content" and req.method == "DELETE":
                # The volume id's "/" arrives decoded: the rest of the path is the volume.
                volid = "/".join(rest[1:])
                if ":" not in volid:
                    volid = "%s:%s" % (storage, volid)
                if volid not in files:
                    raise PveError(500, "volume '%s' does not exist" % volid)
                del files[volid]
                return data(self._new_task(st, node, "imgdel", volid.replace(":", "-").replace("/", "-"), now, None))
            if rest == ["upload"] and req.method == "POST":
                content, filename, blob = self._upload_parts(req)
                if content not in ("iso", "vztmpl", "import"):
                    # The API uploads only these; snippets are files on the storage's path.
                    raise PveError(400, "Parameter verification failed.",
                                   {"content": "value '%s' does not have a value in the enumeration "
                                               "'iso, vztmpl, import'" % content})
                if content not in allowed:
                    raise PveError(500, "storage '%s' does not support content-type '%s'" % (storage, content))
                if content == "iso" and not re.search(r"\.(iso|img)$", filename, re.I):
                    raise PveError(400, "Parameter verification failed.", {"filename": "wrong file extension"})
                volid = "%s:%s/%s" % (storage, content, filename)
                # The bytes are kept for the tests (GET /_admin/pve-files), never listed by the API.
                files[volid] = {"content": content, "format": filename.rsplit(".", 1)[-1], "size": len(blob),
                                "ctime": int(now), "data": base64.b64encode(blob).decode()}
                return data(self._new_task(st, node, "imgcopy", "", now, None))
        raise PveError(501, "Method '%s /nodes/%s/storage/%s/%s' not implemented" % (
            req.method, node, storage, "/".join(rest)))

    @staticmethod
    def _upload_parts(req):
        ctype = req.header("Content-Type") or ""
        if not ctype.startswith("multipart/form-data"):
            raise PveError(400, "Parameter verification failed.", {"filename": "upload needs multipart/form-data"})
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + req.body)
        fields, filename, blob = {}, None, None
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if part.get_filename():
                filename, blob = part.get_filename(), part.get_payload(decode=True) or b""
            elif name:
                fields[name] = (part.get_payload(decode=True) or b"").decode()
        if not filename or "/" in filename or filename.startswith("."):
            raise PveError(400, "Parameter verification failed.", {"filename": "invalid filename"})
        return fields.get("content", ""), fields.get("filename") or filename, blob
