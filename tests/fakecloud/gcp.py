"""Google Cloud: the OAuth 2.0 token endpoint (JWT bearer grant of service account keys, RS256
signatures verified with openssl) and the Compute Engine v1 API for instances: get, list and
aggregatedList (filter, maxResults/pageToken), insert, delete, start, stop, setLabels, and zone
operations (get, wait). Every Compute request needs a bearer token this fake issued, from the
token endpoint or the metadata server (metadata.py); tokens expire after `gcp_token_ttl`
seconds. Errors have the API's JSON shape ({"error": {"code", "message", "errors": [{"reason"}],
"status"}}); beyond `gcp_requests_per_second` (0: no limit) requests are refused with GCE's 403
rateLimitExceeded.

Routes: /oauth2/token (the token_uri of the keys), /compute/v1/projects/<project>/..."""
import base64
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.parse

from . import state as st_mod
from .state import StateError
from .web import json_response

PROJECT = "cloudnode-test"
PROJECT_NUMBER = "123456789012"
SCOPES_OK = ("https://www.googleapis.com/auth/compute", "https://www.googleapis.com/auth/cloud-platform")
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_SERVICE_ACCOUNT = "%s-compute@developer.gserviceaccount.com" % PROJECT_NUMBER
STATUS = {"running": "RUNNING", "stopped": "TERMINATED"}


def error(status, message, reason, status_text=None, domain="global"):
    names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION", 429: "RESOURCE_EXHAUSTED"}
    body = {"error": {"code": status, "message": message,
                      "errors": [{"message": message, "domain": domain, "reason": reason}]}}
    if status_text or status in names:
        body["error"]["status"] = status_text or names[status]
    return json_response(body, status, "application/json; charset=UTF-8")


def rate_limited():
    return error(403, "Rate Limit Exceeded", "rateLimitExceeded", status_text="")


def _oauth_error(err, description, status=400):
    return json_response({"error": err, "error_description": description}, status, "application/json; charset=utf-8")


def issue_token(state, subject, project=PROJECT):
    ttl = int(state.read()["settings"]["gcp_token_ttl"])
    return {"access_token": state.sign("gcp", {"sub": subject, "project": project}, ttl),
            "expires_in": ttl, "token_type": "Bearer"}


def _b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def verify_rs256(public_pem, data, signature):
    """Whether signature is data's RSASSA-PKCS1-v1_5 SHA-256 signature under public_pem."""
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, blob in (("key.pem", public_pem.encode()), ("data", data), ("sig", signature)):
            paths[name] = os.path.join(d, name)
            with open(paths[name], "wb") as f:
                f.write(blob)
        p = subprocess.run(["openssl", "dgst", "-sha256", "-verify", paths["key.pem"], "-signature", paths["sig"],
                            paths["data"]], capture_output=True)
        return p.returncode == 0


class Api:
    def __init__(self, state):
        self.state = state

    # -- OAuth 2.0 token endpoint --------------------------------------------------------

    def token(self, req):
        if req.method != "POST":
            return _oauth_error("invalid_request", "Method not allowed", 405)
        ctype = (req.header("Content-Type") or "").split(";")[0].strip()
        if ctype != "application/x-www-form-urlencoded":
            return _oauth_error("invalid_request", "Bad Request")
        form = dict(urllib.parse.parse_qsl(req.body.decode("utf-8", "replace")))
        if form.get("grant_type") != JWT_GRANT:
            return _oauth_error("unsupported_grant_type", "Invalid grant_type: %s" % form.get("grant_type", ""))
        parts = (form.get("assertion") or "").split(".")
        if len(parts) != 3:
            return _oauth_error("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) "
                                "and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        try:
            header, claims = json.loads(_b64url(parts[0])), json.loads(_b64url(parts[1]))
            signature = _b64url(parts[2])
        except (ValueError, TypeError):
            return _oauth_error("invalid_grant", "Invalid JWT: could not be decoded")
        if header.get("alg") != "RS256":
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        accounts = {a["client_email"]: a for a in self.state.read()["settings"]["gcp_service_accounts"]}
        account = accounts.get(claims.get("iss"))
        if account is None:
            return _oauth_error("invalid_grant", "Invalid grant: account not found")
        if header.get("kid") and account.get("private_key_id") and header["kid"] != account["private_key_id"]:
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        if not verify_rs256(account["public_key"], (parts[0] + "." + parts[1]).encode(), signature):
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if (not isinstance(iat, int) or not isinstance(exp, int) or exp - iat > 3600 or exp < now or
                iat > now + 300):
            return _oauth_error("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) "
                                "and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        if claims.get("aud") != req.base_url + "/oauth2/token":
            return _oauth_error("invalid_grant", "Invalid JWT: Failed audience check.")
        scopes = (claims.get("scope") or "").split()
        if not any(s in SCOPES_OK for s in scopes):
            return _oauth_error("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        return json_response(issue_token(self.state, account["client_email"], account.get("project_id") or PROJECT))

    # -- Compute Engine ------------------------------------------------------------------

    def handle(self, req):
        if req.path == "/oauth2/token":
            return self.token(req)
        auth = req.header("Authorization") or ""
        if not auth.startswith("Bearer "):
            return error(401, "Request is missing required authentication credential. Expected OAuth 2 access "
                         "token, login cookie or other valid authentication credential.", "required")
        if self.state.verify("gcp", auth[len("Bearer "):].strip()) is None:
            return error(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, "
                         "login cookie or other valid authentication credential.", "authError")
        rate = float(self.state.read()["settings"].get("gcp_requests_per_second") or 0)
        if rate > 0:
            with self.state.buckets() as b:
                left, _ = st_mod.take_token(b, "gcp-compute", max(1, int(rate)), rate, time.time())
            if left < 0:
                return rate_limited()
        parts = [p for p in req.path[len("/compute/v1/"):].split("/") if p]
        try:
            return self.route(req, parts)
        except StateError as e:
            return error(e.status, e.message, "invalid" if e.status == 400 else "notFound")
        except ValueError:
            return error(400, "Invalid JSON payload received.", "parseError")

    def route(self, req, parts):
        m = req.method
        if len(parts) < 2 or parts[0] != "projects":
            return error(404, "Not Found", "notFound")
        if parts[1] != PROJECT:
            return error(404, "The resource 'projects/%s' was not found" % parts[1], "notFound")
        rest = parts[2:]
        if rest == ["aggregated", "instances"] and m == "GET":
            return self.aggregated(req)
        if len(rest) >= 3 and rest[0] == "zones" and rest[2] == "instances":
            zone = rest[1]
            if len(rest) == 3:
                if m == "GET":
                    return self.list(req, zone)
                if m == "POST":
                    return self.insert(req, zone)
            name = rest[3] if len(rest) > 3 else None
            if len(rest) == 4:
                if m == "GET":
                    return json_response(self.resource(req, self.find(zone, name)))
                if m == "DELETE":
                    inst = self.find(zone, name)
                    with self.state.locked() as st:
                        st["instances"][inst["id"]]["delete_at"] = time.time()
                    return self.operation(req, zone, "delete", inst)
            if len(rest) == 5 and m == "POST":
                inst = self.find(zone, name)
                if rest[4] in ("start", "stop"):
                    self.state.update_instance(inst["id"], {"status": "running" if rest[4] == "start" else "stopped"})
                    return self.operation(req, zone, rest[4], inst)
                if rest[4] == "setLabels":
                    body = req.json()
                    if body.get("labelFingerprint") != self.fingerprint(inst.get("labels") or {}):
                        return error(412, "Labels fingerprint either invalid or resource labels have changed",
                                     "conditionNotMet", "FAILED_PRECONDITION")
                    self.state.update_instance(inst["id"], {"labels": dict(body.get("labels") or {})})
                    return self.operation(req, zone, "setLabels", inst)
        if len(rest) >= 4 and rest[0] == "zones" and rest[2] == "operations":
            op = self.state.verify("gcp-op", rest[3])
            if op is None:
                return error(404, "The resource 'projects/%s/zones/%s/operations/%s' was not found"
                             % (PROJECT, rest[1], rest[3]), "notFound")
            if (len(rest) == 4 and m == "GET") or (len(rest) == 5 and rest[4] == "wait" and m == "POST"):
                return json_response(self.operation_body(req, rest[1], rest[3], op))
        return error(404, "Not Found", "notFound")

    # -- helpers ---------------------------------------------------------------------------

    def instances(self):
        return [i for i in self.state.instances() if i["platform"] == "gcp"]

    def find(self, zone, name):
        for inst in self.instances():
            if inst["zone"] == zone and inst["name"] == name:
                return inst
        raise StateError(404, "The resource 'projects/%s/zones/%s/instances/%s' was not found" % (PROJECT, zone, name))

    @staticmethod
    def fingerprint(labels):
        return base64.b64encode(json.dumps(labels, sort_keys=True).encode()[:8].ljust(8, b"=")).decode()

    @staticmethod
    def base(req):
        return req.base_url + "/compute/v1/projects/" + PROJECT

    def resource(self, req, inst):
        base = self.base(req)
        zone = "%s/zones/%s" % (base, inst["zone"])
        region = "%s/regions/%s" % (base, inst["zone"].rsplit("-", 1)[0])
        nic = {"kind": "compute#networkInterface", "name": "nic0", "fingerprint": "zJ3Y4eVzR9Q=",
               "network": base + "/global/networks/default",
               "subnetwork": region + "/subnetworks/default",
               "networkIP": inst.get("private_ipv4") or "", "stackType": "IPV4_ONLY"}
        if inst.get("public_ipv4"):
            nic["accessConfigs"] = [{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT",
                                     "name": "External NAT", "natIP": inst["public_ipv4"], "networkTier": "PREMIUM"}]
        if inst.get("ipv6"):
            nic["stackType"] = "IPV4_IPV6"
            nic["ipv6AccessType"] = "EXTERNAL"
            nic["ipv6AccessConfigs"] = [{"kind": "compute#accessConfig", "type": "DIRECT_IPV6",
                                         "name": "external-ipv6", "externalIpv6": inst["ipv6"],
                                         "externalIpv6PrefixLength": 96, "networkTier": "PREMIUM"}]
        labels = inst.get("labels") or {}
        created = time.strftime("%Y-%m-%dT%H:%M:%S.000-07:00", time.gmtime(inst["created"]))
        return {
            "kind": "compute#instance",
            "id": inst["id"],
            "creationTimestamp": created,
            "name": inst["name"],
            "tags": {"fingerprint": "42WmSpB8rSM="},
            "machineType": "%s/machineTypes/%s" % (zone, inst["type"]),
            "status": STATUS[inst["status"]],
            "zone": zone,
            "canIpForward": False,
            "networkInterfaces": [nic],
            "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
                       "source": "%s/disks/%s" % (zone, inst["name"]), "deviceName": "persistent-disk-0",
                       "index": 0, "boot": True, "autoDelete": True, "interface": "SCSI", "diskSizeGb": "10"}],
            "metadata": {"kind": "compute#metadata", "fingerprint": "8Gg9P8Xhcy4="},
            "serviceAccounts": [{"email": DEFAULT_SERVICE_ACCOUNT,
                                 "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
            "selfLink": "%s/instances/%s" % (zone, inst["name"]),
            "scheduling": {"onHostMaintenance": "MIGRATE", "automaticRestart": True, "preemptible": False},
            "cpuPlatform": "Intel Broadwell",
            "labels": labels,
            "labelFingerprint": self.fingerprint(labels),
            "startRestricted": False,
            "deletionProtection": False,
            "fingerprint": "v7Nxq4q1N5E=",
        }

    def operation(self, req, zone, kind, inst):
        op_id = self.state.sign("gcp-op", {"kind": kind, "target": inst["name"], "id": inst["id"]}, 3600)
        return json_response(self.operation_body(req, zone, op_id, {"kind": kind, "target": inst["name"],
                                                                    "id": inst["id"]}))

    def operation_body(self, req, zone, op_id, op):
        zurl = "%s/zones/%s" % (self.base(req), zone)
        return {"kind": "compute#operation", "id": str(abs(hash(op_id)) % 10 ** 19), "name": op_id,
                "zone": zurl, "operationType": op["kind"], "targetLink": "%s/instances/%s" % (zurl, op["target"]),
                "targetId": op["id"], "status": "DONE", "progress": 100,
                "selfLink": "%s/operations/%s" % (zurl, op_id)}

    @staticmethod
    def filter_fn(expr):
        """The comparisons of the list filter syntax the clients send: `name = "x"`, `name eq x`,
        `status != TERMINATED`, `labels.k = v`, joined with AND or spaces, parenthesised or not."""
        expr = (expr or "").strip()
        if not expr:
            return lambda r: True
        tests = []
        for m in re.finditer(r'\(?\s*([A-Za-z][\w.]*)\s*(=|!=|\beq\b|\bne\b)\s*("(?:[^"\\]|\\.)*"|[^\s()]+)\s*\)?', expr):
            field, op, value = m.group(1), m.group(2), m.group(3)
            if value.startswith('"'):
                value = value[1:-1]
            tests.append((field, op in ("=", "eq"), op in ("eq", "ne"), value))
        if not tests:
            raise StateError(400, "Invalid value for field 'filter': '%s'. Invalid list filter expression." % expr)

        def get(r, field):
            v = r
            for p in field.split("."):
                v = v.get(p) if isinstance(v, dict) else None
            return "" if v is None else str(v)

        def match(r):
            for field, positive, regex, value in tests:
                got = get(r, field)
                hit = re.fullmatch(value, got) is not None if regex else got == value
                if hit != positive:
                    return False
            return True
        return match

    @staticmethod
    def page(req, items):
        try:
            size = int(req.query.get("maxResults") or 500)
            start = int(req.query.get("pageToken") or 0)
        except ValueError:
            raise StateError(400, "Invalid value for field 'pageToken'")
        if not 0 <= size <= 500:
            raise StateError(400, "Invalid value for field 'maxResults': '%d'. Must be less than or equal to 500"
                             % size)
        # The server may return fewer results than maxResults: tests make pages small.
        size = min(size or 500, int(req.state.read()["settings"]["gcp_page_size"]))
        chunk = items[start:start + size]
        nxt = str(start + size) if start + size < len(items) else None
        return chunk, nxt

    def matching(self, req, zone=None):
        """One page of the instances (of zone) that pass the filter. As on the real API, the page
        is cut before the filter applies, so a page may hold fewer items than asked, or none,
        and still name a next page."""
        keep = self.filter_fn(req.query.get("filter"))
        every = [i for i in self.instances() if zone is None or i["zone"] == zone]
        chunk, nxt = self.page(req, every)
        return [r for r in (self.resource(req, i) for i in chunk) if keep(r)], nxt

    def list(self, req, zone):
        chunk, nxt = self.matching(req, zone)
        body = {"kind": "compute#instanceList", "id": "projects/%s/zones/%s/instances" % (PROJECT, zone),
                "items": chunk, "selfLink": "%s/zones/%s/instances" % (self.base(req), zone)}
        if not chunk:
            del body["items"]
        if nxt:
            body["nextPageToken"] = nxt
        return json_response(body)

    def aggregated(self, req):
        chunk, nxt = self.matching(req)
        items = {}
        for r in chunk:
            items.setdefault("zones/" + r["zone"].rsplit("/", 1)[1], {"instances": []})["instances"].append(r)
        for zone in sorted({i["zone"] for i in self.instances()}):
            items.setdefault("zones/" + zone, {"warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": "There are no results for scope 'zones/%s' on this page." % zone,
                "data": [{"key": "scope", "value": "zones/" + zone}]}})
        body = {"kind": "compute#instanceAggregatedList", "id": "projects/%s/aggregated/instances" % PROJECT,
                "items": items, "selfLink": self.base(req) + "/aggregated/instances"}
        if nxt:
            body["nextPageToken"] = nxt
        return json_response(body)

    def insert(self, req, zone):
        body = req.json()
        name = body.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
            return error(400, "Invalid value for field 'resource.name': '%s'. Must be a match of regex "
                         "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name, "invalid")
        if any(i["zone"] == zone and i["name"] == name for i in self.instances()):
            return error(409, "The resource 'projects/%s/zones/%s/instances/%s' already exists"
                         % (PROJECT, zone, name), "alreadyExists")
        mtype = (body.get("machineType") or "").rsplit("/", 1)[-1]
        if not mtype:
            return error(400, "Invalid value for field 'resource.machineType': ''.", "invalid")
        inst = self.state.add_instance({"platform": "gcp", "name": name, "zone": zone, "type": mtype,
                                        "region": zone.rsplit("-", 1)[0],
                                        "labels": dict(body.get("labels") or {})}, source="gcp-api")
        return self.operation(req, zone, "insert", inst)
