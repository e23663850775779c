"""Amazon EC2's Query API (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/) under /ec2:
DescribeInstances (instance ids, filters, MaxResults/NextToken pages), RunInstances,
StopInstances, StartInstances, RebootInstances, TerminateInstances, CreateTags, DeleteTags and
DescribeTags, answered in the API's XML. Every request must carry a valid Signature Version 4
(Authorization header) by a known access key, or temporary credentials of an instance role
(the session token in X-Amz-Security-Token; an expired one is refused with RequestExpired).
Errors are <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>
with the API's codes and statuses; throttling is RequestLimitExceeded (503)."""
import hashlib
import hmac
import re
import secrets
import time
import urllib.parse
import uuid
from xml.sax.saxutils import escape

from . import state as st_mod
from .state import StateError
from .web import Response

API_VERSION = "2016-11-15"
NS = "http://ec2.amazonaws.com/doc/%s/" % API_VERSION
OWNER = "123456789012"
STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}
# A request signed more than this far from the server's clock is refused (SigV4 allows 5 minutes).
CLOCK_SKEW = 300
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
SIGV4_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request,\s*"
                        r"SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$")


class Ec2Error(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status, code, message):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code><Message>%s</Message>'
            '</Error></Errors><RequestID>%s</RequestID></Response>' % (escape(code), escape(message), uuid.uuid4()))
    return Response(status, body, "text/xml;charset=UTF-8", server="AmazonEC2")


def throttle_response():
    return error_response(503, "RequestLimitExceeded", "Request limit exceeded.")


def status_response(status):
    codes = {400: "InvalidParameterValue", 401: "AuthFailure", 403: "UnauthorizedOperation",
             404: "InvalidAction", 500: "InternalError", 503: "Unavailable"}
    return error_response(status, codes.get(status, "InternalError"), "injected failure")


def _xml(tag, value):
    """<tag>value</tag> from a str, a list of items, or a dict of children (None: left out)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        value = "true" if value else "false"
    if isinstance(value, (int, float)):
        value = str(value)
    if isinstance(value, str):
        return "<%s>%s</%s>" % (tag, escape(value), tag) if value else "<%s/>" % tag
    if isinstance(value, list):
        if not value:
            return "<%s/>" % tag
        return "<%s>%s</%s>" % (tag, "".join(_xml("item", v) for v in value), tag)
    return "<%s>%s</%s>" % (tag, "".join(_xml(k, v) for k, v in value.items()), tag)


def xml_response(action, fields):
    body = '<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s">%s</%sResponse>' % (
        action, NS, "".join(_xml(k, v) for k, v in [("requestId", str(uuid.uuid4()))] + list(fields.items())), action)
    return Response(200, body, "text/xml;charset=UTF-8", server="AmazonEC2")


def role_secret(state, access_key_id):
    """The secret key of temporary credentials, derived from the fake's secret (nothing stored)."""
    return hmac.new(bytes.fromhex(state.read()["secret"]), access_key_id.encode(), hashlib.sha256).hexdigest()[:40]


def role_credentials(state, inst):
    """The JSON document of meta-data/iam/security-credentials/ROLE."""
    ttl = state.read()["settings"].get("aws_role_credentials_ttl", 21600)
    akid = "ASIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    now = time.time()
    return {
        "Code": "Success",
        "LastUpdated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "Type": "AWS-HMAC",
        "AccessKeyId": akid,
        "SecretAccessKey": role_secret(state, akid),
        "Token": state.sign("aws-session", {"a": akid, "i": inst["id"]}, ttl),
        "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + ttl)),
    }


def _uri_encode(s, slash=True):
    return urllib.parse.quote(s, safe="-_.~" + ("/" if not slash else ""))


def canonical_query(qs):
    pairs = urllib.parse.parse_qsl(qs, keep_blank_values=True)
    return "&".join("%s=%s" % (_uri_encode(k), _uri_encode(v)) for k, v in sorted(pairs))


def verify_sigv4(req, state):
    """(access key id, region) of a correctly signed request, else raises Ec2Error as EC2 does."""
    auth = req.header("Authorization")
    if not auth:
        raise Ec2Error(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
    m = SIGV4_AUTH.match(auth.strip())
    if not m:
        raise Ec2Error(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
    akid, date, region, service, signed, signature = m.groups()
    settings = state.read()["settings"]
    token = req.header("X-Amz-Security-Token")
    if akid.startswith("ASIA"):
        payload = state.verify("aws-session", token, expired_ok=True) if token else None
        if payload is None or payload.get("a") != akid:
            raise Ec2Error(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
        if payload["exp"] < time.time():
            raise Ec2Error(400, "RequestExpired", "Request has expired.")
        secret = role_secret(state, akid)
    else:
        keys = {k["access_key_id"]: k["secret_access_key"] for k in settings["aws_credentials"]}
        if akid not in keys:
            raise Ec2Error(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
        secret = keys[akid]
    if service != "ec2":
        raise Ec2Error(401, "AuthFailure", "Credential should be scoped to correct service: 'ec2'.")
    amz_date = req.header("X-Amz-Date") or ""
    try:
        t = time.mktime(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")) - time.timezone
    except ValueError:
        raise Ec2Error(400, "IncompleteSignature", "Request must contain a valid X-Amz-Date header")
    if abs(t - time.time()) > CLOCK_SKEW:
        raise Ec2Error(400, "RequestExpired", "Request has expired.")
    if amz_date[:8] != date:
        raise Ec2Error(401, "AuthFailure", "Credential should be scoped to a valid date")
    names = signed.split(";")
    if "host" not in names or names != sorted(names) or (token and "x-amz-security-token" not in names):
        raise Ec2Error(400, "IncompleteSignature", "Authorization header requires signed host and date headers")
    headers = "".join("%s:%s\n" % (n, " ".join((req.header(n) or "").split())) for n in names)
    payload_hash = req.header("X-Amz-Content-SHA256") or hashlib.sha256(req.body or b"").hexdigest()
    path = urllib.parse.urlsplit(req.raw_path).path or "/"
    creq = "\n".join([req.method, path, canonical_query(req.query_string), headers, signed, payload_hash])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, signature):
        raise Ec2Error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the "
                       "signature you provided. Check your AWS Secret Access Key and signing method.")
    return akid, region


def _indexed(params, prefix):
    """Values of prefix.1, prefix.2, ... in index order."""
    out = []
    for k, v in params.items():
        m = re.fullmatch(re.escape(prefix) + r"\.(\d+)", k)
        if m:
            out.append((int(m.group(1)), v))
    return [v for _, v in sorted(out)]


def _filters(params):
    out = {}
    for k, name in params.items():
        m = re.fullmatch(r"Filter\.(\d+)\.Name", k)
        if m:
            out[name] = _indexed(params, "Filter.%s.Value" % m.group(1))
    return out


def _tags(params, prefix="Tag"):
    tags = {}
    for k, key in params.items():
        m = re.fullmatch(re.escape(prefix) + r"\.(\d+)\.Key", k)
        if m:
            tags[key] = params.get("%s.%s.Value" % (prefix, m.group(1)), "")
    return tags


def ec2_state(inst):
    if inst.get("extra", {}).get("ec2_terminated"):
        return "terminated"
    return "running" if inst["status"] == "running" else "stopped"


def _public_dns(inst):
    pub = inst.get("public_ipv4")
    if not pub or ec2_state(inst) != "running":
        return ""
    dashed = pub.replace(".", "-")
    return ("ec2-%s.compute-1.amazonaws.com" if inst["region"] == "us-east-1"
            else "ec2-%%s.%s.compute.amazonaws.com" % inst["region"]) % dashed


def instance_xml(inst):
    state = ec2_state(inst)
    running = state == "running"
    mac = inst["mac"]
    eni = "eni-%s" % hashlib.sha1(mac.encode()).hexdigest()[:17]
    pub = inst.get("public_ipv4") if running else None
    assoc = {"publicIp": pub, "publicDnsName": _public_dns(inst), "ipOwnerId": "amazon"} if pub else None
    priv = inst.get("private_ipv4")
    iface = {
        "networkInterfaceId": eni, "subnetId": "subnet-0123456789abcdef0", "vpcId": "vpc-0123456789abcdef0",
        "description": "", "ownerId": OWNER, "status": "in-use", "macAddress": mac,
        "privateIpAddress": priv, "privateDnsName": inst["hostname"], "sourceDestCheck": True,
        "groupSet": [{"groupId": "sg-0123456789abcdef0", "groupName": "default"}],
        "attachment": {"attachmentId": "eni-attach-%s" % eni[4:], "deviceIndex": "0", "status": "attached",
                       "attachTime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(inst["created"])),
                       "deleteOnTermination": True, "networkCardIndex": "0"},
        "association": assoc,
        "privateIpAddressesSet": ([{"privateIpAddress": priv, "privateDnsName": inst["hostname"], "primary": True,
                                    "association": assoc}] if priv else []),
        "ipv6AddressesSet": [{"ipv6Address": inst["ipv6"]}] if inst.get("ipv6") else [],
        "interfaceType": "interface",
    }
    extra_ifaces = inst.get("extra", {}).get("ec2_interfaces") or []
    return {
        "instanceId": inst["id"],
        "imageId": inst["image"],
        "instanceState": {"code": str(STATE_CODES[state]), "name": state},
        "privateDnsName": inst["hostname"] if state != "terminated" else "",
        "dnsName": _public_dns(inst),
        "reason": "",
        "amiLaunchIndex": "0",
        "productCodes": [],
        "instanceType": inst["type"],
        "launchTime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(inst["created"])),
        "placement": {"availabilityZone": inst["zone"], "groupName": "", "tenancy": "default"},
        "monitoring": {"state": "disabled"},
        "subnetId": "subnet-0123456789abcdef0" if state != "terminated" else None,
        "vpcId": "vpc-0123456789abcdef0" if state != "terminated" else None,
        "privateIpAddress": priv if state != "terminated" else None,
        "ipAddress": pub,
        "sourceDestCheck": True,
        "groupSet": [{"groupId": "sg-0123456789abcdef0", "groupName": "default"}],
        "architecture": "x86_64",
        "rootDeviceType": "ebs",
        "rootDeviceName": "/dev/xvda",
        "blockDeviceMapping": [],
        "virtualizationType": "hvm",
        "clientToken": "",
        "tagSet": [{"key": k, "value": v} for k, v in sorted(inst.get("labels", {}).items())],
        "hypervisor": "xen",
        "networkInterfaceSet": [iface] + list(extra_ifaces) if state != "terminated" else [],
        "ebsOptimized": False,
        "enaSupport": True,
    }


def _state_change(inst, previous):
    cur = ec2_state(inst)
    shown = {"stopped": "stopping", "terminated": "shutting-down", "running": "pending"}.get(cur, cur)
    if cur == previous:
        shown = cur
    return {"instanceId": inst["id"], "currentState": {"code": str(STATE_CODES[shown]), "name": shown},
            "previousState": {"code": str(STATE_CODES[previous]), "name": previous}}


def _matches(inst, filters):
    values = {
        "instance-id": [inst["id"]],
        "private-dns-name": [inst["hostname"]],
        "instance-state-name": [ec2_state(inst)],
        "instance-type": [inst["type"]],
        "availability-zone": [inst["zone"]],
        "private-ip-address": [inst.get("private_ipv4") or ""],
        "tag-key": list(inst.get("labels", {})),
    }
    for name, wanted in filters.items():
        if name.startswith("tag:"):
            have = [inst.get("labels", {}).get(name[4:])]
        elif name in values:
            have = values[name]
        else:
            raise Ec2Error(400, "InvalidParameterValue", "The filter '%s' is invalid" % name)
        pats = [re.compile(re.escape(w).replace(r"\*", ".*").replace(r"\?", ".") + r"\Z") for w in wanted]
        if not any(h is not None and p.match(h) for h in have for p in pats):
            return False
    return True


class Api:
    def __init__(self, state):
        self.state = state

    def handle(self, req):
        try:
            if req.method not in ("POST", "GET"):
                raise Ec2Error(400, "InvalidAction", "The action is not valid for this web service.")
            ctype = (req.header("Content-Type") or "").split(";")[0].strip().lower()
            params = dict(urllib.parse.parse_qsl(req.query_string, keep_blank_values=True))
            if req.method == "POST":
                if ctype != "application/x-www-form-urlencoded":
                    raise Ec2Error(400, "InvalidParameterValue", "unsupported content type")
                params.update(urllib.parse.parse_qsl(req.body.decode("utf-8"), keep_blank_values=True))
            _, region = verify_sigv4(req, self.state)
            action = params.get("Action")
            fn = getattr(self, "do_" + (action or ""), None)
            if fn is None:
                raise Ec2Error(400, "InvalidAction", "The action %s is not valid for this web service." % action)
            return fn(params, region)
        except Ec2Error as e:
            return error_response(e.status, e.code, e.message)
        except (StateError, UnicodeDecodeError) as e:
            return error_response(400, "InvalidParameterValue", str(e))

    # -- helpers -------------------------------------------------------------------------

    def _instances(self, st, ids, region):
        out = []
        for iid in ids:
            if not INSTANCE_ID.match(iid):
                raise Ec2Error(400, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"" % iid)
            inst = st["instances"].get(iid)
            if inst is None or inst["platform"] != "aws" or st_mod.gone(inst) or inst["region"] != region:
                raise Ec2Error(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % iid)
            out.append(inst)
        return out

    def _all(self, region):
        st = self.state.read()
        return [i for i in self.state.instances(st) if i["platform"] == "aws" and i["region"] == region]

    # -- actions ---------------------------------------------------------------------------

    def do_DescribeInstances(self, params, region):
        ids = _indexed(params, "InstanceId")
        filters = _filters(params)
        if ids and ("MaxResults" in params):
            raise Ec2Error(400, "InvalidParameterCombination",
                           "The parameter instancesSet cannot be used with the parameter maxResults")
        st = self.state.read()
        insts = self._instances(st, ids, region) if ids else self._all(region)
        insts = [i for i in insts if _matches(i, filters)]
        start = 0
        token = params.get("NextToken")
        if token:
            payload = self.state.verify("ec2-page", token)
            if payload is None:
                raise Ec2Error(400, "InvalidParameterValue", "The token '%s' is invalid." % token[:40])
            start = payload["o"]
        end = len(insts)
        if "MaxResults" in params:
            try:
                n = int(params["MaxResults"])
            except ValueError:
                raise Ec2Error(400, "InvalidParameterValue", "Invalid value for MaxResults")
            if not 5 <= n <= 1000:
                raise Ec2Error(400, "InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. "
                               "Expecting a value greater than 5." % n)
            end = min(len(insts), start + n)
        page = insts[start:end]
        fields = {"reservationSet": [{
            "reservationId": "r-%s" % hashlib.sha1(i["id"].encode()).hexdigest()[:17],
            "ownerId": OWNER, "groupSet": [], "instancesSet": [instance_xml(i)]} for i in page]}
        if end < len(insts):
            fields["nextToken"] = self.state.sign("ec2-page", {"o": end}, 3600)
        return xml_response("DescribeInstances", fields)

    def do_RunInstances(self, params, region):
        for p in ("ImageId", "MinCount", "MaxCount"):
            if p not in params:
                raise Ec2Error(400, "MissingParameter", "The request must contain the parameter %s" % p)
        try:
            count = int(params["MaxCount"])
            if int(params["MinCount"]) < 1 or count < int(params["MinCount"]):
                raise ValueError
        except ValueError:
            raise Ec2Error(400, "InvalidParameterValue", "Invalid MinCount/MaxCount")
        if not re.fullmatch(r"ami-[0-9a-f]{8,17}", params["ImageId"]):
            raise Ec2Error(400, "InvalidAMIID.Malformed", "Invalid id: \"%s\"" % params["ImageId"])
        zone = params.get("Placement.AvailabilityZone") or region + "a"
        if not zone.startswith(region):
            raise Ec2Error(400, "InvalidParameterValue", "Invalid availability zone: [%s]" % zone)
        tags = {}
        for k, v in params.items():
            m = re.fullmatch(r"TagSpecification\.(\d+)\.ResourceType", k)
            if m and v == "instance":
                tags.update(_tags(params, "TagSpecification.%s.Tag" % m.group(1)))
        created = []
        with self.state.locked() as st:
            for _ in range(count):
                spec = {"platform": "aws", "region": region, "zone": zone, "image": params["ImageId"],
                        "type": params.get("InstanceType", "m1.small"), "labels": dict(tags)}
                if tags.get("Name"):
                    spec["name"] = tags["Name"]
                created.append(st_mod.add_instance(st, spec, source="api"))
        items = []
        for inst in created:
            x = instance_xml(inst)
            x["instanceState"] = {"code": "0", "name": "pending"}
            items.append(x)
        return xml_response("RunInstances", {"reservationId": "r-%s" % secrets.token_hex(8)[:17], "ownerId": OWNER,
                                             "groupSet": [], "instancesSet": items})

    def _set_states(self, params, region, action, change):
        ids = _indexed(params, "InstanceId")
        if not ids:
            raise Ec2Error(400, "MissingParameter", "The request must contain the parameter InstanceId")
        out = []
        with self.state.locked() as st:
            for inst in self._instances(st, ids, region):
                previous = ec2_state(inst)
                change(inst, previous)
                out.append(_state_change(inst, previous))
        return out

    def _power(self, params, region, action, status, verb):
        def change(inst, previous):
            if previous == "terminated":
                raise Ec2Error(400, "IncorrectInstanceState", "The instance '%s' is not in a state from which "
                               "it can be %s." % (inst["id"], verb))
            inst["status"] = status
        return xml_response(action, {"instancesSet": self._set_states(params, region, action, change)})

    def do_StopInstances(self, params, region):
        return self._power(params, region, "StopInstances", "stopped", "stopped")

    def do_StartInstances(self, params, region):
        return self._power(params, region, "StartInstances", "running", "started")

    def do_TerminateInstances(self, params, region):
        def terminate(inst, previous):
            inst.setdefault("extra", {})["ec2_terminated"] = True
            inst["status"] = "stopped"
        return xml_response("TerminateInstances",
                            {"instancesSet": self._set_states(params, region, "terminate", terminate)})

    def do_RebootInstances(self, params, region):
        self._set_states(params, region, "reboot", lambda inst, previous: None)
        return xml_response("RebootInstances", {"return": True})

    def _resources(self, params):
        ids = _indexed(params, "ResourceId")
        if not ids:
            raise Ec2Error(400, "MissingParameter", "The request must contain the parameter ResourceId")
        return ids

    def do_CreateTags(self, params, region):
        ids = self._resources(params)
        tags = _tags(params)
        if not tags:
            raise Ec2Error(400, "MissingParameter", "The request must contain the parameter Tag")
        with self.state.locked() as st:
            for inst in self._instances(st, ids, region):
                if len(set(inst["labels"]) | set(tags)) > 50:
                    raise Ec2Error(400, "TagLimitExceeded", "The maximum number of Tags for a resource has "
                                   "been reached.")
                inst["labels"].update(tags)
        return xml_response("CreateTags", {"return": True})

    def do_DeleteTags(self, params, region):
        ids = self._resources(params)
        tags = {}
        for k, key in params.items():
            m = re.fullmatch(r"Tag\.(\d+)\.Key", k)
            if m:
                tags[key] = params.get("Tag.%s.Value" % m.group(1))
        with self.state.locked() as st:
            for inst in self._instances(st, ids, region):
                for key, value in tags.items():
                    if key in inst["labels"] and (value is None or inst["labels"][key] == value):
                        del inst["labels"][key]
        return xml_response("DeleteTags", {"return": True})

    def do_DescribeTags(self, params, region):
        filters = _filters(params)
        items = []
        for inst in self._all(region):
            for k, v in sorted(inst.get("labels", {}).items()):
                if filters.get("resource-id") and inst["id"] not in filters["resource-id"]:
                    continue
                if filters.get("key") and k not in filters["key"]:
                    continue
                items.append({"resourceId": inst["id"], "resourceType": "instance", "key": k, "value": v})
        return xml_response("DescribeTags", {"tagSet": items})
