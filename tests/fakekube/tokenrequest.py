"""The token subresource of ServiceAccounts (authentication.k8s.io/v1 TokenRequest), as
`kubectl create token` uses it: POST /api/v1/namespaces/NS/serviceaccounts/NAME/token mints a
bound token for that ServiceAccount (RBAC verb `create` on `serviceaccounts/token`). As on the
real server the token authenticates as system:serviceaccount:NS:NAME only while it has not
expired and the ServiceAccount it was minted for still exists with the same UID: deleting the
ServiceAccount revokes every token minted for it. The token here is opaque, not a JWT (no client
of the project reads inside it)."""
import datetime
import secrets
import threading
import time

from . import errors

DEFAULT_SECONDS = 3600          # TokenRequestSpec's default
MIN_SECONDS = 600               # "may not specify a duration less than 10 minutes"
MAX_SECONDS = 1 << 32           # "may not specify a duration larger than 2^32 seconds"
AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]


def _rfc3339(t):
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class BoundTokens:
    """token -> (namespace, name, ServiceAccount UID, expiry as time.time())."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = {}

    def add(self, ns, name, uid, expiry):
        tok = secrets.token_urlsafe(32)
        with self.lock:
            self.tokens[tok] = (ns, name, uid, expiry)
        return tok

    def authenticate(self, store, sa_rt, tok):
        """(user, groups) of a live bound token, None for an unknown one, False for one that is
        expired or whose ServiceAccount is gone or was recreated (401 either way)."""
        with self.lock:
            ent = self.tokens.get(tok)
        if ent is None:
            return None
        ns, name, uid, expiry = ent
        if time.time() >= expiry:
            return False
        try:
            sa = store.get(sa_rt, ns, name)
        except errors.ApiError:
            return False
        if sa["metadata"].get("uid") != uid:
            return False
        return "system:serviceaccount:%s:%s" % (ns, name), []


def handle(handler, store, bound, rt, ns, name, verb, body, ctype, dry_run):
    """Answers one request on serviceaccounts/NAME/token (JSON or, as kubectl sends it, protobuf)."""
    if verb != "create":
        raise errors.method_not_allowed()
    req = handler.decode(body, ctype) if body.strip() else {}
    if not isinstance(req, dict) or req.get("kind") not in (None, "TokenRequest") or \
            req.get("apiVersion") not in (None, "authentication.k8s.io/v1"):
        raise errors.bad_request("the body of the request must be an authentication.k8s.io/v1 TokenRequest")
    spec = req.get("spec") or {}
    seconds = spec.get("expirationSeconds", DEFAULT_SECONDS)
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise errors.bad_request("spec.expirationSeconds must be an integer")
    if seconds < MIN_SECONDS:
        raise errors.invalid("authentication.k8s.io", "TokenRequest", name, [errors.FieldError(
            "spec.expirationSeconds", "Invalid value", seconds, "may not specify a duration less than 10 minutes")])
    if seconds > MAX_SECONDS:
        raise errors.invalid("authentication.k8s.io", "TokenRequest", name, [errors.FieldError(
            "spec.expirationSeconds", "Invalid value", seconds, "may not specify a duration larger than 2^32 seconds")])
    sa = store.get(rt, ns, name)    # 404 serviceaccounts "NAME" not found, as the real registry
    now = time.time()
    expiry = now + seconds
    tok = "" if dry_run else bound.add(ns, name, sa["metadata"]["uid"], expiry)
    handler.send_obj(201, {
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": _rfc3339(now)},
        "spec": {"audiences": spec.get("audiences") or AUDIENCES, "expirationSeconds": seconds,
                 "boundObjectRef": spec.get("boundObjectRef")},
        "status": {"token": tok, "expirationTimestamp": _rfc3339(expiry)}})
