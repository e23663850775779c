"""Fault rules shared through the state file, and each cloud's own error and throttle
responses (the bodies and headers its real service sends)."""
import json
import re
import secrets
import time

from . import aws_ec2, digitalocean, metadata
from .state import StateError
from .web import json_response, text

FAULT_KEYS = {"method", "path", "platform", "service", "instance", "count", "skip", "status", "body", "headers",
              "latency", "reset", "throttle", "content_type", "after_commit"}


def new_rule(spec):
    unknown = set(spec) - FAULT_KEYS
    if unknown:
        raise StateError(400, "unknown fault field(s): %s" % ", ".join(sorted(unknown)))
    for key in ("method", "path"):
        if spec.get(key) is not None:
            try:
                re.compile(spec[key])
            except re.error as e:
                raise StateError(400, "%s is not a regular expression: %s" % (key, e))
    if spec.get("count") is not None and (not isinstance(spec["count"], int) or spec["count"] < 1):
        raise StateError(400, "count must be a positive integer (omit it for every request)")
    if spec.get("skip") is not None and (not isinstance(spec["skip"], int) or spec["skip"] < 0):
        raise StateError(400, "skip must be a non-negative integer")
    if spec.get("after_commit") and not spec.get("reset"):
        # The write was done; all that can go wrong now is the answer (a timeout is a long
        # latency before the reset).
        raise StateError(400, "after_commit goes with reset (and optionally latency)")
    if spec.get("status") is not None and not (isinstance(spec["status"], int) and 100 <= spec["status"] <= 599):
        raise StateError(400, "status must be an HTTP status code")
    if not any(spec.get(k) for k in ("status", "latency", "reset", "throttle")):
        raise StateError(400, "a fault needs status, latency, reset or throttle")
    rule = dict(spec)
    rule["id"] = "f-" + secrets.token_hex(4)
    rule["hits"] = 0
    return rule


def take(state, req):
    """The first rule matching req, with its count consumed (None if none matches)."""
    st = state.read()
    if not st["faults"]:
        return None
    with state.locked() as st:
        for rule in st["faults"]:
            if rule.get("method") and not re.fullmatch(rule["method"], req.method, re.I):
                continue
            # Paths are matched as the instance sees them, so one rule fits the main port's
            # /_instance/<id>/ prefix and a namespace server alike.
            if rule.get("path") and not re.search(rule["path"], req.log_path or req.raw_path):
                continue
            if rule.get("platform") and rule["platform"] != req.platform:
                continue
            if rule.get("service") and rule["service"] != req.service:
                continue
            if rule.get("instance") and str(rule["instance"]) != str(req.instance_id):
                continue
            if rule.get("skip"):
                # Passes over the first N matching requests: a fault pinned to the Nth one.
                rule["skip"] -= 1
                continue
            rule["hits"] += 1
            if rule.get("count") is not None:
                rule["count"] -= 1
                if rule["count"] <= 0:
                    st["faults"] = [r for r in st["faults"] if r is not rule]
            return dict(rule)
    return None


def throttle_response(platform, service, st=None):
    now = time.time()
    if platform == "hetzner":
        limit = (st or {}).get("settings", {}).get("hetzner_ratelimit_limit", 3600)
        resp = json_response({"error": {"code": "rate_limit_exceeded",
                                        "message": "limit of %d requests per hour reached" % limit,
                                        "details": {}}}, 429)
        return resp.add("RateLimit-Limit", limit).add("RateLimit-Remaining", 0).add("RateLimit-Reset", int(now) + 1)
    if platform == "openstack" and service != "metadata":
        return json_response({"overLimit": {"code": 429, "message": "This request was rate-limited.",
                                            "retryAfter": "1"}}, 429).add("Retry-After", 1)
    if platform == "digitalocean" and service == "api":
        return digitalocean.throttle_response()
    if platform == "azure" and service == "arm":
        from . import azure
        return azure.arm_error(429, "TooManyRequests", "The request is being throttled.",
                               headers=[("Retry-After", "3"), ("x-ms-ratelimit-remaining-subscription-reads", "0")])
    if platform == "azure":
        return json_response({"error": "Too many requests"}, 429, "application/json; charset=utf-8")
    if platform == "aws":
        return aws_ec2.throttle_response() if service == "api" else metadata.aws_error(429)
    if platform == "gcp" and service == "compute":
        from . import gcp
        return gcp.rate_limited()
    if platform == "gcp":
        return metadata._gcp_html(429, "Too Many Requests", "Too many requests.")
    return text("Too Many Requests\n", 429)


def error_response(platform, service, status):
    """The body a fault with only a status sends: shaped like that cloud's errors."""
    if platform == "hetzner":
        codes = {400: "json_error", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 409: "conflict", 412: "resource_unavailable",
                 422: "invalid_input", 423: "locked", 429: "rate_limit_exceeded", 503: "unavailable",
                 504: "timeout"}
        return json_response({"error": {"code": codes.get(status, "server_error"),
                                        "message": "injected failure", "details": {}}}, status)
    if platform == "openstack" and service == "compute":
        names = {400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
                 409: "conflictingRequest", 413: "overLimit", 429: "overLimit"}
        return json_response({names.get(status, "computeFault"): {"code": status, "message": "injected failure"}}, status)
    if platform == "openstack" and service == "identity":
        return json_response({"error": {"code": status, "message": "injected failure", "title": "Error"}}, status)
    if platform == "aws":
        return aws_ec2.status_response(status) if service == "api" else metadata.aws_error(status)
    if platform == "digitalocean" and service == "api":
        return digitalocean.status_response(status)
    if platform == "gcp" and service == "compute":
        from . import gcp
        return gcp.error(status, "injected failure", "backendError" if status >= 500 else "invalid")
    if platform == "gcp":
        return metadata._gcp_html(status, "Error", "injected failure")
    if platform == "azure" and service == "arm":
        from . import azure
        return azure.arm_error(status, "InternalServerError" if status >= 500 else "BadRequest", "injected failure")
    if platform == "azure":
        return json_response({"error": "injected failure"}, status, "application/json; charset=utf-8")
    if platform == "proxmoxve" and service == "api":
        from . import proxmox
        return proxmox.status_response(status)
    return text("injected failure\n", status)


def rule_response(rule, req, st):
    platform, service = req.platform, req.service
    if rule.get("throttle"):
        resp = throttle_response(platform, service, st)
    else:
        body = rule.get("body")
        if body is None:
            resp = error_response(platform, service, rule["status"])
        else:
            if not isinstance(body, str):
                body = json.dumps(body)
            ctype = rule.get("content_type") or ("application/json" if body[:1] in "{[" else "text/plain")
            resp = text(body, rule["status"], ctype)
    for k, v in (rule.get("headers") or {}).items():
        resp.add(k, v)
    return resp
