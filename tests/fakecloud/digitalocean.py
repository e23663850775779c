"""DigitalOcean API v2 (https://docs.digitalocean.com/reference/api/) under /v2: the account,
droplets (list with page/per_page, name and tag_name filters; get; create; delete), droplet
actions (power_off, power_on, shutdown, reboot) and tagging droplets. Bearer tokens are checked
(settings do_tokens: {"token", "expires"}; an expired or unknown token is 401), every answer
carries ratelimit-limit/-remaining/-reset, a throttled one is 429, and errors are
{"id", "message"} as the API sends them."""
import re
import time

from . import state as st_mod
from .state import StateError
from .web import json_response

REGIONS = {"nyc1": "New York 1", "nyc3": "New York 3", "ams3": "Amsterdam 3", "fra1": "Frankfurt 1",
           "lon1": "London 1", "sfo3": "San Francisco 3", "sgp1": "Singapore 1"}
SIZES = {"s-1vcpu-1gb": (1024, 1, 25), "s-2vcpu-2gb": (2048, 2, 60), "s-2vcpu-4gb": (4096, 2, 80),
         "s-4vcpu-8gb": (8192, 4, 160)}
NAME = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,253}[a-zA-Z0-9])?$")
TAG = re.compile(r"^[a-zA-Z0-9_\-:]{1,255}$")
RATE_LIMIT = 5000


def error(status, ident, message):
    return json_response({"id": ident, "message": message}, status)


def throttle_response():
    return error(429, "too_many_requests", "API Rate limit exceeded.").add(
        "ratelimit-limit", RATE_LIMIT).add("ratelimit-remaining", 0).add("ratelimit-reset", int(time.time()) + 1)


def status_response(status):
    idents = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 422: "unprocessable_entity",
              429: "too_many_requests", 500: "server_error", 503: "service_unavailable"}
    return error(status, idents.get(status, "server_error"), "injected failure")


class ApiError(Exception):
    def __init__(self, status, ident, message):
        super().__init__(message)
        self.status, self.ident, self.message = status, ident, message


def droplet_json(inst):
    mem, vcpus, disk = SIZES.get(inst["type"], (1024, 1, 25))
    v4 = []
    if inst.get("private_ipv4"):
        v4.append({"ip_address": inst["private_ipv4"], "netmask": "255.255.240.0", "gateway": "10.0.0.1",
                   "type": "private"})
    if inst.get("public_ipv4"):
        v4.append({"ip_address": inst["public_ipv4"], "netmask": "255.255.255.0", "gateway": "203.0.113.1",
                   "type": "public"})
    v6 = [{"ip_address": inst["ipv6"], "netmask": 64, "gateway": inst["ipv6"].rsplit(":", 1)[0] + ":1",
           "type": "public"}] if inst.get("ipv6") else []
    return {
        "id": int(inst["id"]),
        "name": inst["name"],
        "memory": mem, "vcpus": vcpus, "disk": disk,
        "locked": False,
        "status": "active" if inst["status"] == "running" else "off",
        "kernel": None,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inst["created"])),
        "features": ["droplet_agent", "private_networking"] + (["ipv6"] if v6 else []),
        "backup_ids": [], "next_backup_window": None, "snapshot_ids": [],
        "image": {"id": 106569146, "name": "12 x64", "distribution": "Debian", "slug": inst["image"],
                  "public": True, "regions": sorted(REGIONS), "created_at": "2022-06-14T17:20:13Z",
                  "min_disk_size": 10, "type": "base", "size_gigabytes": 0.96, "description": "Debian 12 x64",
                  "tags": [], "status": "available"},
        "volume_ids": [],
        "size": {"slug": inst["type"], "memory": mem, "vcpus": vcpus, "disk": disk, "transfer": 1.0,
                 "price_monthly": 6.0, "price_hourly": 0.00893, "regions": sorted(REGIONS), "available": True},
        "size_slug": inst["type"],
        "networks": {"v4": v4, "v6": v6},
        "region": {"name": REGIONS.get(inst["region"], inst["region"]), "slug": inst["region"],
                   "features": ["backups", "ipv6", "metadata", "install_agent"], "available": True,
                   "sizes": sorted(SIZES)},
        "tags": sorted(inst.get("labels") or {}),
        "vpc_uuid": "5a4981aa-9653-4bd1-bef5-d6bff52042e4",
    }


class Api:
    def __init__(self, state):
        self.state = state

    def handle(self, req):
        now = time.time()
        try:
            self._auth(req, now)
            resp = self.route(req)
        except ApiError as e:
            resp = error(e.status, e.ident, e.message)
        except StateError as e:
            resp = error(e.status, "unprocessable_entity", e.message)
        except ValueError:
            resp = error(400, "bad_request", "unable to parse the request body")
        return resp.add("ratelimit-limit", RATE_LIMIT).add("ratelimit-remaining", RATE_LIMIT - 1).add(
            "ratelimit-reset", int(now) + 60)

    def _auth(self, req, now):
        auth = req.header("Authorization") or ""
        token = auth[7:] if auth[:7].lower() == "bearer " else None
        for t in self.state.read()["settings"]["do_tokens"]:
            if token and t["token"] == token and (not t.get("expires") or t["expires"] > now):
                return
        raise ApiError(401, "unauthorized", "Unable to authenticate you")

    def _droplet(self, did, st=None):
        st = st or self.state.read()
        inst = st["instances"].get(did)
        if not did.isdigit() or inst is None or inst["platform"] != "digitalocean" or st_mod.gone(inst):
            raise ApiError(404, "not_found", "The resource you were accessing could not be found.")
        return inst

    def route(self, req):
        parts = [p for p in req.path.split("/") if p][1:]
        m = req.method
        if parts == ["account"] and m == "GET":
            return json_response({"account": {"droplet_limit": 25, "floating_ip_limit": 3, "email": "ops@example.com",
                                              "uuid": "b6fr89dbf6d9156cace5f3c78dc9851d957381ef", "email_verified": True,
                                              "status": "active", "status_message": ""}})
        if parts == ["droplets"]:
            if m == "GET":
                return self.list_droplets(req)
            if m == "POST":
                return self.create_droplet(req)
        if len(parts) == 2 and parts[0] == "droplets":
            if m == "GET":
                return json_response({"droplet": droplet_json(self._droplet(parts[1]))})
            if m == "DELETE":
                with self.state.locked() as st:
                    self._droplet(parts[1], st)
                    st_mod.remove_instance(st, parts[1])
                return json_response(None, 204)
        if len(parts) == 3 and parts[0] == "droplets" and parts[2] == "actions" and m == "POST":
            return self.action(req, parts[1])
        if len(parts) == 3 and parts[0] == "tags" and parts[2] == "resources" and m in ("POST", "DELETE"):
            return self.tag(req, parts[1], m == "POST")
        raise ApiError(404, "not_found", "The resource you were accessing could not be found.")

    def list_droplets(self, req):
        try:
            page = int(req.query.get("page", "1"))
            per_page = int(req.query.get("per_page", "20"))
        except ValueError:
            raise ApiError(400, "bad_request", "page and per_page must be integers")
        if page < 1 or not 1 <= per_page <= 200:
            raise ApiError(400, "bad_request", "per_page must be between 1 and 200")
        name, tag = req.query.get("name"), req.query.get("tag_name")
        if name is not None and tag is not None:
            raise ApiError(422, "unprocessable_entity", "name and tag_name cannot be combined")
        insts = self.state.instances_named(name, "digitalocean") if name is not None else \
            [i for i in self.state.instances() if i["platform"] == "digitalocean"]
        if tag is not None:
            insts = [i for i in insts if tag in (i.get("labels") or {})]
        total = len(insts)
        chunk = insts[(page - 1) * per_page:page * per_page]
        base = req.base_url + "/v2/droplets?"
        extra = "".join("&%s=%s" % (k, req.query[k]) for k in ("name", "tag_name") if k in req.query)
        last = max(1, (total + per_page - 1) // per_page)
        pages = {}
        if page < last:
            pages["next"] = "%spage=%d&per_page=%d%s" % (base, page + 1, per_page, extra)
            pages["last"] = "%spage=%d&per_page=%d%s" % (base, last, per_page, extra)
        if page > 1:
            pages["first"] = "%spage=1&per_page=%d%s" % (base, per_page, extra)
            pages["prev"] = "%spage=%d&per_page=%d%s" % (base, page - 1, per_page, extra)
        return json_response({"droplets": [droplet_json(i) for i in chunk], "links": {"pages": pages} if pages else {},
                              "meta": {"total": total}})

    def create_droplet(self, req):
        body = req.json()
        if not isinstance(body, dict):
            raise ApiError(400, "bad_request", "the request body must be a JSON object")
        names = body.get("names") or ([body["name"]] if body.get("name") else [])
        for f in ("region", "size", "image"):
            if not body.get(f):
                raise ApiError(422, "unprocessable_entity", "%s is required" % f)
        if not names or not all(isinstance(n, str) and NAME.match(n) for n in names) or len(names) > 10:
            raise ApiError(422, "unprocessable_entity", "Name Only valid hostname characters are allowed. (a-z, A-Z, "
                           "0-9, . and -)")
        if body["region"] not in REGIONS:
            raise ApiError(422, "unprocessable_entity", "Region is not available")
        if body["size"] not in SIZES:
            raise ApiError(422, "unprocessable_entity", "Size is not available")
        tags = body.get("tags") or []
        if not all(isinstance(t, str) and TAG.match(t) for t in tags):
            raise ApiError(422, "unprocessable_entity", "tags must be valid tag names")
        created = []
        with self.state.locked() as st:
            for n in names:
                spec = {"platform": "digitalocean", "name": n, "region": body["region"], "zone": body["region"],
                        "type": body["size"], "image": str(body["image"]), "labels": {t: "" for t in tags}}
                if not body.get("ipv6"):
                    spec["ipv6"] = None
                if body.get("user_data"):
                    spec["user_data"] = body["user_data"]
                created.append(st_mod.add_instance(st, spec, source="api"))
        actions = [{"id": 36804636 + i, "rel": "create", "href": "%s/v2/actions/%d" % (req.base_url, 36804636 + i)}
                   for i in range(len(created))]
        if len(created) == 1 and body.get("name"):
            return json_response({"droplet": droplet_json(created[0]), "links": {"actions": actions}}, 202)
        return json_response({"droplets": [droplet_json(i) for i in created], "links": {"actions": actions}}, 202)

    def action(self, req, did):
        body = req.json()
        kind = body.get("type") if isinstance(body, dict) else None
        status = {"power_off": "stopped", "shutdown": "stopped", "power_on": "running", "reboot": "running",
                  "power_cycle": "running"}.get(kind)
        if status is None:
            raise ApiError(422, "unprocessable_entity", "Action type is invalid")
        with self.state.locked() as st:
            inst = self._droplet(did, st)
            inst["status"] = status
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return json_response({"action": {"id": 36077293, "status": "completed", "type": kind, "started_at": now,
                                         "completed_at": now, "resource_id": int(did), "resource_type": "droplet",
                                         "region_slug": inst["region"]}}, 201)

    def tag(self, req, tag, add):
        if not TAG.match(tag):
            raise ApiError(422, "unprocessable_entity", "tag name is invalid")
        body = req.json()
        res = body.get("resources") if isinstance(body, dict) else None
        if not isinstance(res, list) or not res:
            raise ApiError(422, "unprocessable_entity", "resources are required")
        with self.state.locked() as st:
            for r in res:
                if not isinstance(r, dict) or r.get("resource_type") != "droplet":
                    raise ApiError(422, "unprocessable_entity", "only droplets can be tagged here")
                inst = self._droplet(str(r.get("resource_id")), st)
                if add:
                    inst["labels"][tag] = ""
                else:
                    inst["labels"].pop(tag, None)
        return json_response(None, 204)
