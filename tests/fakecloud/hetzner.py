"""Hetzner Cloud API (https://docs.hetzner.cloud/) under /v1: servers, actions, server
types, locations, datacenters, and (hetzner_resources) images, SSH keys, networks, placement
groups and load balancers; bearer tokens, RateLimit-* headers on every response, and
errors as {"error": {"code", "message", "details"}}."""
import hashlib
import ipaddress
import re
import secrets
import time

from . import state as st_mod
from .hetzner_resources import Resources
from .state import StateError
from .web import iso8601, json_response

LOCATIONS = [
    {"id": 1, "name": "fsn1", "description": "Falkenstein DC Park 1", "country": "DE", "city": "Falkenstein",
     "latitude": 50.47612, "longitude": 12.370071, "network_zone": "eu-central"},
    {"id": 2, "name": "nbg1", "description": "Nuremberg DC Park 1", "country": "DE", "city": "Nuremberg",
     "latitude": 49.452102, "longitude": 11.076665, "network_zone": "eu-central"},
    {"id": 3, "name": "hel1", "description": "Helsinki DC Park 1", "country": "FI", "city": "Helsinki",
     "latitude": 60.169855, "longitude": 24.938379, "network_zone": "eu-central"},
    {"id": 4, "name": "ash", "description": "Ashburn, VA", "country": "US", "city": "Ashburn, VA",
     "latitude": 39.045821, "longitude": -77.487073, "network_zone": "us-east"},
    {"id": 5, "name": "hil", "description": "Hillsboro, OR", "country": "US", "city": "Hillsboro, OR",
     "latitude": 45.54222, "longitude": -122.951924, "network_zone": "us-west"},
    {"id": 6, "name": "sin", "description": "Singapore", "country": "SG", "city": "Singapore",
     "latitude": 1.283333, "longitude": 103.833333, "network_zone": "ap-southeast"},
]
DATACENTERS = [
    {"id": 4, "name": "fsn1-dc14", "description": "Falkenstein 1 virtual DC 14", "location": "fsn1"},
    {"id": 2, "name": "nbg1-dc3", "description": "Nuremberg 1 virtual DC 3", "location": "nbg1"},
    {"id": 3, "name": "hel1-dc2", "description": "Helsinki 1 virtual DC 2", "location": "hel1"},
    {"id": 5, "name": "ash-dc1", "description": "Ashburn virtual DC 1", "location": "ash"},
    {"id": 6, "name": "hil-dc1", "description": "Hillsboro virtual DC 1", "location": "hil"},
    {"id": 7, "name": "sin-dc1", "description": "Singapore virtual DC 1", "location": "sin"},
]
SERVER_TYPES = [
    {"id": 104, "name": "cx22", "description": "CX22", "cores": 2, "memory": 4.0, "disk": 40,
     "cpu_type": "shared", "architecture": "x86", "category": "cost_optimized"},
    {"id": 105, "name": "cx32", "description": "CX32", "cores": 4, "memory": 8.0, "disk": 80,
     "cpu_type": "shared", "architecture": "x86", "category": "cost_optimized"},
    {"id": 22, "name": "cpx11", "description": "CPX 11", "cores": 2, "memory": 2.0, "disk": 40,
     "cpu_type": "shared", "architecture": "x86", "category": "regular_purpose"},
    {"id": 45, "name": "cax11", "description": "CAX11", "cores": 2, "memory": 4.0, "disk": 40,
     "cpu_type": "shared", "architecture": "arm", "category": "cost_optimized"},
    {"id": 96, "name": "ccx13", "description": "CCX13 Dedicated CPU", "cores": 2, "memory": 8.0, "disk": 80,
     "cpu_type": "dedicated", "architecture": "x86", "category": "general_purpose"},
]
IMAGES = {"ubuntu-22.04": 67794396, "ubuntu-24.04": 161547269, "debian-12": 114690387,
          "debian-13": 310554929, "fedora-41": 202381476, "rocky-9": 76766499}

LABEL_NAME = re.compile(r"^[a-zA-Z0-9]([-_.a-zA-Z0-9]{0,61}[a-zA-Z0-9])?$")
LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
HOSTNAME = re.compile(r"^(?=.{1,253}$)[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
                      r"(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$")


class ApiError(Exception):
    def __init__(self, status, code, message, details=None):
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def error(status, code, message, details=None):
    return json_response({"error": {"code": code, "message": message,
                                    "details": details if details is not None else {}}}, status)


def invalid_field(name, msg):
    return ApiError(422, "invalid_input", "invalid input in field '%s': %s" % (name, msg),
                    {"fields": [{"name": name, "messages": [msg]}]})


def valid_label(k, v):
    if not isinstance(k, str) or not isinstance(v, str):
        return False
    prefix, _, name = k.rpartition("/")
    if prefix and (len(prefix) > 253 or not LABEL_PREFIX.match(prefix)):
        return False
    if not LABEL_NAME.match(name):
        return False
    return v == "" or bool(LABEL_NAME.match(v))


def json_body(req):
    try:
        body = req.json()
    except ValueError as e:
        raise ApiError(400, "json_error", "invalid JSON: %s" % e)
    if not isinstance(body, dict):
        raise ApiError(400, "json_error", "request body must be a JSON object")
    return body


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


SET_TERM = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
EQ_TERM = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
HAS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def parse_selector(sel):
    """Label selector as the Hetzner API documents it: k=v, k==v, k!=v, k, !k, k in (..),
    k notin (..), joined by commas (AND). Returns a predicate on a labels dict."""
    terms = []
    for raw in _split_top(sel):
        m = SET_TERM.match(raw)
        if m:
            vals = {v.strip() for v in m.group(3).split(",")}
            terms.append((m.group(1), m.group(2), vals))
            continue
        m = EQ_TERM.match(raw)
        if m:
            terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
            continue
        m = HAS_TERM.match(raw)
        if m:
            terms.append((m.group(2), "absent" if m.group(1) else "present", None))
            continue
        raise invalid_field("label_selector", "invalid label selector")

    def pred(labels):
        for key, op, val in terms:
            have = key in labels
            if op == "=" and labels.get(key) != val:
                return False
            if op == "!=" and have and labels[key] == val:
                return False
            if op == "in" and labels.get(key) not in val:
                return False
            if op == "notin" and have and labels[key] in val:
                return False
            if op == "present" and not have:
                return False
            if op == "absent" and have:
                return False
        return True
    return pred


def _find(items, name_or_id):
    """The catalog entry named or numbered name_or_id, else None."""
    for item in items:
        if str(name_or_id) in (item["name"], str(item["id"])):
            return item
    return None


def location_by(name_or_id):
    return _find(LOCATIONS, name_or_id)


def datacenter_by(name_or_id):
    return _find(DATACENTERS, name_or_id)


def server_type_by(name_or_id):
    return _find(SERVER_TYPES, name_or_id)


def server_type_json(t):
    price = {"net": "0.0052000000", "gross": "0.0061880000000000"}
    monthly = {"net": "3.2900000000", "gross": "3.9151000000000000"}
    return dict(t, deprecated=False, deprecation=None, storage_type="local",
                prices=[{"location": loc["name"], "price_hourly": price, "price_monthly": monthly,
                         "included_traffic": 21990232555520,
                         "price_per_tb_traffic": {"net": "1.0000000000", "gross": "1.1900000000000000"}}
                        for loc in LOCATIONS],
                locations=[{"id": loc["id"], "name": loc["name"], "deprecation": None} for loc in LOCATIONS])


def datacenter_json(dc):
    loc = location_by(dc["location"])
    ids = [t["id"] for t in SERVER_TYPES]
    return {"id": dc["id"], "name": dc["name"], "description": dc["description"], "location": loc,
            "server_types": {"supported": ids, "available": ids, "available_for_migration": ids}}


def action_json(a, settings, now):
    t = max(float(settings.get("action_seconds", 1.0)), 0.0)
    done = now >= a["started"] + t
    out = {"id": a["id"], "command": a["command"], "status": "running", "progress": 0,
           "started": iso8601(a["started"]), "finished": None,
           "resources": a["resources"], "error": None}
    if done:
        if a.get("error"):
            out.update(status="error", progress=100, finished=iso8601(a["started"] + t), error=a["error"])
        else:
            out.update(status="success", progress=100, finished=iso8601(a["started"] + t))
    elif t > 0:
        out["progress"] = min(99, int(100 * (now - a["started"]) / t))
    return out


def meta(total, page, per_page):
    last = max(1, (total + per_page - 1) // per_page)
    return {"pagination": {"page": page, "per_page": per_page,
                           "previous_page": page - 1 if page > 1 else None,
                           "next_page": page + 1 if page < last else None,
                           "last_page": last, "total_entries": total}}


class Api(Resources):
    def __init__(self, state):
        self.state = state

    # -- plumbing ------------------------------------------------------------------

    def handle(self, req):
        token = None
        auth = req.header("Authorization") or ""
        if auth[:7].lower() == "bearer ":
            token = auth[7:].strip()
        now = time.time()
        settings = self.state.read()["settings"]
        if token not in settings["hetzner_tokens"]:
            return error(401, "unauthorized", "unable to authenticate")
        with self.state.buckets() as b:
            limit, remaining, reset = self._ratelimit(b, settings, token, now)
        if remaining < 0:
            resp = error(429, "rate_limit_exceeded", "limit of %d requests per hour reached" % limit)
            remaining = 0
        else:
            try:
                resp = self.route(req, now)
            except ApiError as e:
                resp = error(e.status, e.code, e.message, e.details)
            except StateError as e:
                resp = error(422, "invalid_input", e.message)
        resp.add("RateLimit-Limit", limit).add("RateLimit-Remaining", remaining).add("RateLimit-Reset", reset)
        return resp

    def _ratelimit(self, buckets, s, token, now):
        limit = int(s["hetzner_ratelimit_limit"])
        rate = float(s["hetzner_ratelimit_refill_per_second"])
        key = "hetzner:" + hashlib.sha256(token.encode()).hexdigest()[:16]
        remaining, tokens = st_mod.take_token(buckets, key, limit, rate, now)
        reset = int(now + ((limit - tokens) / rate if rate > 0 else 3600))
        return limit, remaining, reset

    def route(self, req, now):
        parts = [p for p in req.path.split("/") if p][1:]
        m = req.method
        if parts == ["servers"]:
            if m == "GET":
                return self.list_servers(req, now)
            if m == "POST":
                return self.create_server(req, now)
        if len(parts) == 2 and parts[0] == "servers":
            if m == "GET":
                return json_response({"server": self.server_json(self._server(parts[1]), now)})
            if m == "DELETE":
                return self.delete_server(parts[1], now)
            if m == "PUT":
                return self.update_server(req, parts[1], now)
        if len(parts) == 4 and parts[0] == "servers" and parts[2] == "actions" and m == "POST":
            more = getattr(self, "server_" + parts[3], None)
            if more is not None:
                return more(req, parts[1], now)
            return self.power_action(parts[1], parts[3], now)
        if len(parts) == 3 and parts[0] == "servers" and parts[2] == "actions" and m == "GET":
            st = self.state.read()
            self._server(parts[1], st)
            acts = [action_json(a, st["settings"], now) for a in st["actions"].values()
                    if any(r["type"] == "server" and str(r["id"]) == parts[1] for r in a["resources"])]
            return self._paged(req, "actions", acts)
        if parts == ["actions"] and m == "GET":
            ids = req.query_all.get("id", [])
            st = self.state.read()
            acts = [st["actions"][i] for i in ids if i in st["actions"]] if ids else list(st["actions"].values())
            return self._paged(req, "actions", [action_json(a, st["settings"], now) for a in acts])
        if len(parts) == 2 and parts[0] == "actions" and m == "GET":
            st = self.state.read()
            a = st["actions"].get(parts[1])
            if a is None:
                raise ApiError(404, "not_found", "action with ID '%s' not found" % parts[1])
            return json_response({"action": action_json(a, st["settings"], now)})
        if parts == ["server_types"] and m == "GET":
            items = [server_type_json(t) for t in SERVER_TYPES
                     if not req.query.get("name") or t["name"] == req.query["name"]]
            return self._paged(req, "server_types", items)
        if len(parts) == 2 and parts[0] == "server_types" and m == "GET":
            t = server_type_by(parts[1]) if parts[1].isdigit() else None
            if t is None:
                raise ApiError(404, "not_found", "server type with ID '%s' not found" % parts[1])
            return json_response({"server_type": server_type_json(t)})
        if parts == ["locations"] and m == "GET":
            items = [loc for loc in LOCATIONS if not req.query.get("name") or loc["name"] == req.query["name"]]
            return self._paged(req, "locations", items)
        if len(parts) == 2 and parts[0] == "locations" and m == "GET":
            loc = location_by(parts[1]) if parts[1].isdigit() else None
            if loc is None:
                raise ApiError(404, "not_found", "location with ID '%s' not found" % parts[1])
            return json_response({"location": loc})
        if parts == ["datacenters"] and m == "GET":
            items = [datacenter_json(dc) for dc in DATACENTERS
                     if not req.query.get("name") or dc["name"] == req.query["name"]]
            return self._paged(req, "datacenters", items)
        if len(parts) == 2 and parts[0] == "datacenters" and m == "GET":
            dc = datacenter_by(parts[1]) if parts[1].isdigit() else None
            if dc is None:
                raise ApiError(404, "not_found", "datacenter with ID '%s' not found" % parts[1])
            return json_response({"datacenter": datacenter_json(dc)})
        resp = self.route_resources(req, parts, now)
        if resp is not None:
            return resp
        raise ApiError(404, "not_found", "not found")

    def _paged(self, req, key, items):
        try:
            page = int(req.query.get("page", "1"))
            per_page = int(req.query.get("per_page", "25"))
        except ValueError:
            raise invalid_field("page", "must be an integer")
        if page < 1 or not 1 <= per_page <= 50:
            raise invalid_field("per_page" if page >= 1 else "page", "out of range")
        start = (page - 1) * per_page
        return json_response({key: items[start:start + per_page], "meta": meta(len(items), page, per_page)})

    def _server(self, sid, st=None):
        st = st or self.state.read()
        inst = st["instances"].get(sid)
        if inst is None or inst["platform"] != "hetzner" or st_mod.gone(inst):
            raise ApiError(404, "not_found", "server with ID '%s' not found" % sid)
        return inst

    def _new_action(self, st, command, sid, now, err=None):
        aid = str(st_mod._next(st, "action"))
        a = {"id": int(aid), "command": command, "started": now, "error": err,
             "resources": [{"id": int(sid), "type": "server"}]}
        st["actions"][aid] = a
        return a

    # -- servers -------------------------------------------------------------------

    def server_json(self, inst, now):
        dc = datacenter_by(inst["zone"]) or DATACENTERS[0]
        loc = location_by(dc["location"])
        t = server_type_by(inst["type"]) or SERVER_TYPES[0]
        if inst.get("delete_at"):
            status = "deleting"
        elif now < inst["ready_at"]:
            status = "initializing"
        elif inst["status"] == "stopped":
            status = "off"
        else:
            status = "running"
        ext = inst.get("extra") or {}
        image = ext.get("image") or inst["image"]
        st = self.state.read()
        img = self.image_by(st, ext.get("image_id") or image, t["architecture"])
        pub = None
        if inst.get("public_ipv4"):
            pub = {"id": 1000000 + inst["numeric_id"], "ip": inst["public_ipv4"], "blocked": False,
                   "dns_ptr": "static.%s.clients.your-server.de" % ".".join(reversed(inst["public_ipv4"].split(".")))}
        pub6 = None
        if inst.get("ipv6"):
            net = ipaddress.ip_network(inst["ipv6"] + "/64", strict=False)
            pub6 = {"id": 2000000 + inst["numeric_id"], "ip": str(net), "blocked": False, "dns_ptr": []}
        private = [dict(a, mac_address="86:00:%02x:%s" % (k, inst["mac"][9:]))
                   for k, a in enumerate(self.attachments(inst))]
        group = None
        if ext.get("placement_group"):
            g = st.get("hetzner", {}).get("placement_groups", {}).get(str(ext["placement_group"]))
            group = self.placement_group_json(g, st) if g else None
        return {
            "id": int(inst["id"]),
            "name": inst["name"],
            "status": status,
            "created": iso8601(inst["created"]),
            "public_net": {"ipv4": pub, "ipv6": pub6, "floating_ips": [], "firewalls": []},
            "private_net": private,
            "server_type": server_type_json(t),
            "datacenter": datacenter_json(dc),
            "location": loc,
            "image": img,
            "iso": None,
            "rescue_enabled": False,
            "locked": False,
            "backup_window": None,
            "outgoing_traffic": 0,
            "ingoing_traffic": 0,
            "included_traffic": 21990232555520,
            "protection": {"delete": False, "rebuild": False},
            "labels": dict(inst.get("labels") or {}),
            "volumes": [],
            "load_balancers": [],
            "primary_disk_size": t["disk"],
            "placement_group": group,
        }

    def list_servers(self, req, now):
        pred = parse_selector(req.query["label_selector"]) if req.query.get("label_selector") else None
        name = req.query.get("name")
        statuses = set(req.query_all.get("status", []))
        if name is not None:
            candidates = self.state.instances_named(name, "hetzner")
        else:
            candidates = [i for i in self.state.instances() if i["platform"] == "hetzner"]
        out = []
        for inst in candidates:
            if pred and not pred(inst.get("labels") or {}):
                continue
            j = self.server_json(inst, now)
            if statuses and j["status"] not in statuses:
                continue
            out.append(j)
        out.sort(key=lambda s: s["id"])
        return self._paged(req, "servers", out)

    def create_server(self, req, now):
        body = json_body(req)
        for f in ("name", "server_type", "image"):
            if body.get(f) in (None, ""):
                raise invalid_field(f, "Missing data for required field.")
        name = body["name"]
        if not isinstance(name, str) or not HOSTNAME.match(name):
            raise invalid_field("name", "must be a valid hostname")
        t = server_type_by(body["server_type"])
        if t is None:
            raise invalid_field("server_type", "server type %s not found" % body["server_type"])
        if body.get("location") and body.get("datacenter"):
            raise invalid_field("location", "location and datacenter are mutually exclusive")
        dc = DATACENTERS[0]
        if body.get("location"):
            loc = location_by(body["location"])
            if loc is None:
                raise invalid_field("location", "location %s not found" % body["location"])
            dc = next(d for d in DATACENTERS if d["location"] == loc["name"])
        elif body.get("datacenter"):
            dc = datacenter_by(body["datacenter"])
            if dc is None:
                raise invalid_field("datacenter", "datacenter %s not found" % body["datacenter"])
        labels = body.get("labels") or {}
        if not isinstance(labels, dict) or not all(valid_label(k, v) for k, v in labels.items()):
            raise invalid_field("labels", "label key or value is invalid")
        ud = body.get("user_data")
        if ud is not None and (not isinstance(ud, str) or len(ud.encode()) > 32768):
            raise invalid_field("user_data", "must be a string of at most 32 KiB")
        networks = body.get("networks") or []
        if not isinstance(networks, list):
            raise invalid_field("networks", "must be a list of network IDs")
        public_net = body.get("public_net") or {}
        start = body.get("start_after_create", True)
        loc = location_by(dc["location"])
        with self.state.locked() as st:
            st_mod.sweep(st, now)
            img = self.image_by(st, body["image"], t["architecture"])
            if img is None or img["architecture"] != t["architecture"]:
                raise invalid_field("image", "image %s not found for architecture %s" % (body["image"], t["architecture"]))
            if any(i["platform"] == "hetzner" and i["name"] == name for i in st["instances"].values()):
                raise ApiError(409, "uniqueness_error", "server name is already used",
                               {"fields": [{"name": "name"}]})
            spec = {"platform": "hetzner", "name": name, "type": t["name"], "zone": dc["name"],
                    "region": loc["network_zone"], "labels": labels, "user_data": ud,
                    "ssh_keys": self.ssh_key_ids(st, body.get("ssh_keys") or []),
                    "status": "running" if start else "stopped",
                    "extra": {"image": img["name"] or img["os_flavor"], "image_id": img["id"]}}
            inst = st_mod.add_instance(st, spec, source="hetzner")
            first_ip, inst["private_ipv4"] = inst["private_ipv4"], None
            for k, nid in enumerate(networks):
                net = self.state_network(st, nid)
                keep = first_ip if k == 0 and net and self.in_network(net, first_ip) else None
                self.attach(st, inst, nid, keep)
            if body.get("placement_group"):
                self.place(st, inst, body["placement_group"])
            if public_net.get("enable_ipv4") is False:
                inst["public_ipv4"] = None
            if public_net.get("enable_ipv6") is False:
                inst["ipv6"] = None
            inst["ready_at"] = now + float(st["settings"]["action_seconds"])
            errs = st["settings"].get("hetzner_action_errors") or []
            err = errs.pop(0) if errs else None
            st["settings"]["hetzner_action_errors"] = errs
            action = self._new_action(st, "create_server", inst["id"], now, err)
            nexts = [self._new_action(st, "start_server", inst["id"], now)] if start else []
            settings = dict(st["settings"])
        return json_response({
            "server": self.server_json(inst, now),
            "action": action_json(action, settings, now),
            "next_actions": [action_json(a, settings, now) for a in nexts],
            "root_password": None if spec["ssh_keys"] else secrets.token_urlsafe(15),
        }, 201)

    def update_server(self, req, sid, now):
        """PUT /servers/{id}: name and labels; labels replace the server's whole label set."""
        body = json_body(req)
        labels = body.get("labels")
        if labels is not None and (not isinstance(labels, dict) or
                                   not all(valid_label(k, v) for k, v in labels.items())):
            raise invalid_field("labels", "label key or value is invalid")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not HOSTNAME.match(name)):
            raise invalid_field("name", "must be a valid hostname")
        with self.state.locked() as st:
            inst = self._server(sid, st)
            if name is not None and any(i["platform"] == "hetzner" and i["name"] == name and i is not inst
                                        for i in st["instances"].values()):
                raise ApiError(409, "uniqueness_error", "server name is already used",
                               {"fields": [{"name": "name"}]})
            if labels is not None:
                inst["labels"] = dict(labels)
            if name is not None:
                inst["name"] = name
        return json_response({"server": self.server_json(inst, now)})

    def delete_server(self, sid, now):
        with self.state.locked() as st:
            inst = self._server(sid, st)
            inst["delete_at"] = now + float(st["settings"]["action_seconds"])
            action = self._new_action(st, "delete_server", sid, now)
            settings = dict(st["settings"])
        return json_response({"action": action_json(action, settings, now)})

    def power_action(self, sid, command, now):
        target = {"poweroff": "stopped", "shutdown": "stopped", "poweron": "running",
                  "reboot": "running", "reset": "running"}.get(command)
        if target is None:
            raise ApiError(404, "not_found", "not found")
        with self.state.locked() as st:
            inst = self._server(sid, st)
            inst["status"] = target
            action = self._new_action(st, {"poweroff": "stop_server", "poweron": "start_server",
                                           "shutdown": "shutdown_server", "reboot": "reboot_server",
                                           "reset": "reset_server"}[command], sid, now)
            settings = dict(st["settings"])
        return json_response({"action": action_json(action, settings, now)}, 201)
