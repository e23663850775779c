"""The inventory shared by every fake-cloud process that uses the same state directory.

One JSON file (DIR/state.json) holds instances, Hetzner actions, fault rules, rate-limit
buckets and settings. Each change takes an exclusive flock on DIR/state.lock, re-reads the
file, applies the change and replaces the file atomically, so a main process and several
per-namespace `--instance` processes always agree.

Reads are the hot path (every API and metadata request makes some), so each process keeps the
last parsed state and parses the file again only when its identity (inode, mtime_ns, size)
changed. Request-rate token buckets change on every throttled request; they live in their own
small file (DIR/ratelimit.json, same lock) so counting a request does not rewrite the inventory."""
import base64
import contextlib
import copy
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
import uuid

PLATFORMS = ("aws", "openstack", "hetzner", "gcp", "azure", "digitalocean", "proxmoxve")

DEFAULT_SETTINGS = {
    # Seconds a Hetzner action stays "running" and a new server stays "initializing"
    # (Nova: BUILD). Tests lower these to stay fast.
    "action_seconds": 1.0,
    "build_seconds": 1.0,
    # Keystone token lifetime.
    "token_ttl": 3600,
    # Hetzner: bearer tokens accepted by /v1. The real API refills one request per second
    # up to 3600; tests can make the bucket small.
    "hetzner_tokens": ["hcloud-test-token"],
    "hetzner_ratelimit_limit": 3600,
    "hetzner_ratelimit_refill_per_second": 1.0,
    # Keystone identities.
    "openstack_users": [
        {"name": "demo", "id": "u-demo", "password": "demo-password", "domain": "Default",
         "project": "demo", "project_id": "p-demo"},
    ],
    "openstack_application_credentials": [
        {"id": "appcred-demo", "name": "cloudnode", "secret": "appcred-secret",
         "user": "demo", "project": "demo", "project_id": "p-demo"},
    ],
    "openstack_region": "RegionOne",
    # Nova: available compute availability zones beyond nova and az-2 (and the unavailable
    # az-maintenance), e.g. ["az-3"] for a test that spreads machines over 3 zones.
    "nova_extra_zones": [],
    # Octavia (service type load-balancer) in the Keystone catalog, and how long its objects stay
    # PENDING_* after a change.
    "openstack_octavia": False,
    "octavia_pending_seconds": 0.5,
    # Errors the next create actions (Hetzner) / builds (Nova) end with, consumed in order:
    # Hetzner {"code", "message"}; Nova {"code", "message", "details"}.
    "hetzner_action_errors": [],
    "nova_build_errors": [],
    # Hetzner: the public IPv4 address every new load balancer gets (null: 198.51.100.N); a test
    # whose load balancer must reach a loopback API server sets 127.0.0.1.
    "hetzner_lb_public_ipv4": None,
    # Neutron: the address the first floating IP gets (null or taken: 203.0.113.N); a test whose
    # floating IP must reach a loopback API server sets a 127.x address.
    "neutron_floating_ip_address": None,
    # Google: access token lifetime, the service account keys the OAuth endpoint knows
    # ({"client_email", "public_key" (PEM), "private_key_id", "project_id"}), and the Compute
    # API's request rate beyond which it answers 403 rateLimitExceeded (0: no limit).
    "gcp_token_ttl": 3599,
    "gcp_service_accounts": [],
    "gcp_requests_per_second": 0,
    "gcp_page_size": 500,
    # Azure: token lifetime, the service principals of the Entra ID token endpoint
    # ({"client_id", "secret"}), ARM reads per second beyond which it answers 429 (0: no
    # limit), and the page size of ARM lists.
    "azure_token_ttl": 3599,
    "azure_service_principals": [],
    "azure_arm_reads_per_second": 0,
    "azure_page_size": 1000,
    # EC2 API access keys (the example keys of the AWS documentation), and the lifetime of the
    # temporary credentials of an instance role (IMDS iam/security-credentials/ROLE).
    "aws_credentials": [{"access_key_id": "AKIAIOSFODNN7EXAMPLE",
                         "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}],
    "aws_role_credentials_ttl": 21600,
    # DigitalOcean API tokens ({"token", "expires": UNIX time or null}).
    "do_tokens": [{"token": "dop_v1_cloudnode_test"}],
    # Azure IMDS answers 429 beyond 5 requests per second per VM (0 turns the limit off).
    "azure_imds_requests_per_second": 5,
    # Proxmox VE: the cluster's name and nodes, API tokens ({"tokenid": "USER@REALM!ID", "secret"}),
    # users of ticket logins ({"userid", "password"}), the ticket lifetime (2 h, as pveproxy), how
    # long tasks run, the storages with the content types each holds, and the resource pools.
    "pve_cluster_name": "pve",
    "pve_nodes": ["pve1", "pve2"],
    "pve_tokens": [{"tokenid": "root@pam!cloudnode", "secret": "5f0c4b4e-6a8e-4c52-9d2b-0c9c3a4e7f11"}],
    "pve_users": [{"userid": "root@pam", "password": "pve-test-password"}],
    "pve_ticket_ttl": 7200,
    "pve_task_seconds": 0.3,
    "pve_storages": {"local": ["iso", "vztmpl", "snippets", "import"], "local-lvm": ["images", "rootdir"]},
    "pve_pools": ["k8s"],
}

# Per-platform defaults, taken from the examples in each cloud's documentation.
PLATFORM_DEFAULTS = {
    "aws": {"type": "m5.large", "region": "us-east-1", "zone": "us-east-1a", "image": "ami-0abcdef1234567890"},
    "openstack": {"type": "m1.small", "region": "RegionOne", "zone": "nova", "image": "70a599e0-31e7-49b7-b260-868f441e862b"},
    "hetzner": {"type": "cx22", "region": "eu-central", "zone": "fsn1-dc14", "image": "ubuntu-24.04"},
    "gcp": {"type": "n1-standard-1", "region": "us-central1", "zone": "us-central1-a", "image": "debian-12"},
    "azure": {"type": "Standard_D2s_v3", "region": "westeurope", "zone": "1", "image": "debian-12"},
    "digitalocean": {"type": "s-1vcpu-1gb", "region": "nyc3", "zone": "nyc3", "image": "debian-12-x64"},
    "proxmoxve": {"type": "qemu", "region": "pve", "zone": "pve1", "image": "debian-12"},
}

INSTANCE_KEYS = ("id", "name", "platform", "type", "region", "zone", "private_ipv4", "public_ipv4",
                 "ipv6", "mac", "hostname", "status", "labels", "user_data", "require_token",
                 "image", "ssh_keys", "error", "created", "ready_at", "source", "numeric_id",
                 "project_id", "network_id", "vendor_data", "delete_at", "extra")


class StateError(Exception):
    """A request the inventory cannot satisfy; status is the HTTP status an admin call returns."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def _empty():
    return {
        "secret": secrets.token_hex(32),
        "settings": copy.deepcopy(DEFAULT_SETTINGS),
        "default_instance": None,
        "instances": {},
        "order": [],
        "counters": {"host": 10, "action": 1000, "numeric": 100000},
        "actions": {},
        "faults": [],
        "ratelimit": {},
        "pve_tasks": {},
        "pve_storage": {},
    }


class State:
    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, "state.json")
        self.lock_path = os.path.join(directory, "state.lock")
        self.buckets_path = os.path.join(directory, "ratelimit.json")
        # (file identity, parsed state, name index or None, open fd of that file). Replaced
        # whole, never mutated, so a request thread may keep using the snapshot it got while
        # another writes. Holding the file open keeps its inode number from being reused by a
        # later state file, so an unchanged (inode, mtime_ns, size) means unchanged content.
        self._cache = (None, None, None, None)
        self._cache_lock = threading.Lock()
        with self.locked():
            pass

    @contextlib.contextmanager
    def _flock(self, mode):
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _ident(s):
        return (s.st_dev, s.st_ino, s.st_mtime_ns, s.st_size)

    def _set_cache(self, ident, st, index, fd):
        with self._cache_lock:
            old = self._cache
            self._cache = (ident, st, index, fd)
        if old[3] is not None and old[3] != fd:
            os.close(old[3])

    def _parse(self):
        """(parsed state, identity, fd kept open) of the file, or of an empty state."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return _empty(), None, None
        try:
            ident = self._ident(os.fstat(fd))
            with os.fdopen(os.dup(fd), encoding="utf-8") as f:
                st = json.load(f)
        except ValueError as e:
            os.close(fd)
            raise StateError(500, "%s is not valid JSON: %s" % (self.path, e))
        except BaseException:
            os.close(fd)
            raise
        if not isinstance(st, dict):
            os.close(fd)
            raise StateError(500, "%s does not hold a JSON object" % self.path)
        base = _empty()
        for k, v in base.items():
            st.setdefault(k, v)
        for k, v in DEFAULT_SETTINGS.items():
            st["settings"].setdefault(k, copy.deepcopy(v))
        return st, ident, fd

    def _load(self):
        """The parsed state, from the cache while the file is unchanged (caller holds the lock)."""
        cached = self._cache
        if cached[0] is not None:
            try:
                if self._ident(os.stat(self.path)) == cached[0]:
                    return cached[1]
            except FileNotFoundError:
                pass
        st, ident, fd = self._parse()
        if fd is not None:
            self._set_cache(ident, st, None, fd)
        return st

    def _save(self, st):
        tmp = self.path + ".tmp.%d.%d" % (os.getpid(), threading.get_ident())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(os.dup(fd), "w", encoding="utf-8") as f:
                json.dump(st, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, self.path)
        except BaseException:
            os.close(fd)
            raise
        self._set_cache(self._ident(os.fstat(fd)), st, None, fd)

    @contextlib.contextmanager
    def locked(self):
        """Read-modify-write under the exclusive lock; the dict yielded is written back.
        It is a private copy: readers keep the snapshot they have until the write lands."""
        with self._flock(fcntl.LOCK_EX):
            st, _, fd = self._parse()
            if fd is not None:
                os.close(fd)
            yield st
            self._save(st)

    def read(self):
        """The current state, shared with other readers: do not modify it."""
        with self._flock(fcntl.LOCK_SH):
            return self._load()

    @contextlib.contextmanager
    def buckets(self):
        """Read-modify-write of the token buckets ({"ratelimit": {key: bucket}}, see
        take_token) under the same exclusive lock as the state."""
        with self._flock(fcntl.LOCK_EX):
            try:
                with open(self.buckets_path, encoding="utf-8") as f:
                    b = json.load(f)
            except (FileNotFoundError, ValueError):
                b = {}
            if not isinstance(b, dict) or not isinstance(b.get("ratelimit"), dict):
                b = {"ratelimit": {}}
            yield b
            tmp = self.buckets_path + ".tmp.%d.%d" % (os.getpid(), threading.get_ident())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(b, f)
            os.rename(tmp, self.buckets_path)

    def instances_named(self, name, platform=None):
        """Live instances called name (of that platform), in creation order, through an index
        built once per state change."""
        with self._flock(fcntl.LOCK_SH):
            st = self._load()
            ident, cst, index, fd = self._cache
            if cst is not st:
                index = None
            if index is None:
                index = {}
                for i in st["order"]:
                    inst = st["instances"].get(i)
                    if inst is not None:
                        index.setdefault(inst["name"], []).append(inst)
                with self._cache_lock:
                    if self._cache[1] is st:
                        self._cache = (ident, st, index, fd)
        return [inst for inst in index.get(name, ())
                if not gone(inst) and (platform is None or inst["platform"] == platform)]

    # -- instances -------------------------------------------------------------------

    def instance(self, iid):
        inst = self.read()["instances"].get(str(iid))
        return inst if inst and not gone(inst) else None

    def instances(self, st=None):
        st = st or self.read()
        return [st["instances"][i] for i in st["order"]
                if i in st["instances"] and not gone(st["instances"][i])]

    def add_instance(self, spec, source="admin"):
        with self.locked() as st:
            return add_instance(st, spec, source)

    def update_instance(self, iid, changes):
        with self.locked() as st:
            inst = st["instances"].get(str(iid))
            if inst is None:
                raise StateError(404, "no instance %s" % iid)
            for k, v in changes.items():
                if k not in INSTANCE_KEYS or k in ("id", "platform"):
                    raise StateError(400, "field %r cannot be changed" % k)
                inst[k] = v
            validate_instance(inst)
            return inst

    def remove_instance(self, iid):
        with self.locked() as st:
            return remove_instance(st, iid)

    # -- signed tokens: valid in every process sharing the directory, no storage -------

    def sign(self, kind, payload, ttl):
        st = self.read()
        body = dict(payload, k=kind, exp=int(time.time() + ttl), n=secrets.token_hex(4))
        raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        mac = hmac.new(bytes.fromhex(st["secret"]), raw, hashlib.sha256).digest()[:16]
        return base64.urlsafe_b64encode(raw + mac).decode().rstrip("=")

    def verify(self, kind, token, expired_ok=False):
        """Payload of a valid, unexpired (or, with expired_ok, expired) token of that kind, else None."""
        if not token:
            return None
        try:
            blob = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (ValueError, TypeError):
            return None
        raw, mac = blob[:-16], blob[-16:]
        st = self.read()
        want = hmac.new(bytes.fromhex(st["secret"]), raw, hashlib.sha256).digest()[:16]
        if not hmac.compare_digest(mac, want):
            return None
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        if body.get("k") != kind or (body.get("exp", 0) < time.time() and not expired_ok):
            return None
        return body


def _next(st, counter):
    st["counters"][counter] = st["counters"].get(counter, 0) + 1
    return st["counters"][counter]


def _new_id(platform, st):
    n = _next(st, "numeric")
    if platform == "aws":
        return "i-%017x" % (0x0a1b2c3d4e5f60000 + n)
    if platform in ("openstack", "azure"):
        return str(uuid.uuid4())
    if platform == "gcp":
        return str(4_000_000_000_000_000_000 + n)
    if platform == "proxmoxve":
        return hashlib.sha1(("pve-%d-%s" % (n, st["secret"])).encode()).hexdigest()
    return str(n)  # hetzner, digitalocean: integer ids


def default_hostname(platform, name, ip, region, project="cloudnode-test"):
    if platform == "aws":
        dashed = "ip-" + (ip or "0.0.0.0").replace(".", "-")
        return dashed + (".ec2.internal" if region == "us-east-1" else ".%s.compute.internal" % region)
    if platform == "openstack":
        return name + ".novalocal"
    if platform == "gcp":
        return "%s.c.%s.internal" % (name, project)
    return name


def validate_instance(inst):
    if inst["platform"] not in PLATFORMS:
        raise StateError(400, "unknown platform %r (known: %s)" % (inst["platform"], ", ".join(PLATFORMS)))
    if inst["status"] not in ("running", "stopped"):
        raise StateError(400, "status must be running or stopped")
    if not isinstance(inst.get("labels"), dict):
        raise StateError(400, "labels must be an object")
    if not isinstance(inst.get("name"), str) or not inst["name"]:
        raise StateError(400, "name must be a non-empty string")


def add_instance(st, spec, source="admin"):
    spec = dict(spec or {})
    unknown = set(spec) - set(INSTANCE_KEYS)
    if unknown:
        raise StateError(400, "unknown instance field(s): %s" % ", ".join(sorted(unknown)))
    platform = spec.get("platform")
    if platform not in PLATFORMS:
        raise StateError(400, "platform must be one of %s" % ", ".join(PLATFORMS))
    iid = str(spec.get("id") or _new_id(platform, st))
    if iid in st["instances"]:
        raise StateError(409, "instance %s exists" % iid)
    d = PLATFORM_DEFAULTS[platform]
    h = _next(st, "host")
    now = time.time()
    name = spec.get("name") or "node-%d" % h
    inst = {
        "id": iid,
        "name": name,
        "platform": platform,
        "type": d["type"],
        "region": d["region"],
        "zone": d["zone"],
        "image": d["image"],
        "private_ipv4": "10.0.%d.%d" % (h // 250, h % 250 + 2),
        "public_ipv4": "203.0.113.%d" % (h % 250 + 2),
        "ipv6": "2001:db8:%x::1" % h,
        "mac": "02:00:00:%02x:%02x:%02x" % ((h >> 16) & 255, (h >> 8) & 255, h & 255),
        "status": "running",
        "labels": {},
        "user_data": None,
        "vendor_data": None,
        "require_token": False,
        "ssh_keys": [],
        "error": None,
        "created": now,
        "ready_at": now,
        "source": source,
        "numeric_id": h,
        "project_id": "p-demo",
        "network_id": 4711,
        # Set when a cloud API deleted the instance; it disappears at that time.
        "delete_at": None,
        # Per-API details that have no platform-neutral field (image ref, flavor id, ...).
        "extra": {},
    }
    inst.update({k: v for k, v in spec.items() if k != "id"})
    inst["id"] = iid
    if not spec.get("hostname"):
        inst["hostname"] = default_hostname(platform, name, inst["private_ipv4"], inst["region"])
    validate_instance(inst)
    st["instances"][iid] = inst
    st["order"].append(iid)
    return inst


def remove_instance(st, iid):
    inst = st["instances"].pop(str(iid), None)
    if inst is None:
        raise StateError(404, "no instance %s" % iid)
    st["order"] = [i for i in st["order"] if i != str(iid)]
    if st.get("default_instance") == str(iid):
        st["default_instance"] = None
    return inst


def gone(inst, now=None):
    return bool(inst.get("delete_at")) and inst["delete_at"] <= (now or time.time())


def sweep(st, now=None):
    """Drop instances whose API deletion has completed."""
    now = now or time.time()
    for iid in [i for i, inst in st["instances"].items() if inst.get("delete_at") and inst["delete_at"] <= now]:
        remove_instance(st, iid)


def take_token(st, key, limit, rate, now):
    """Token bucket kept in st["ratelimit"] (the state's, or the dict State.buckets() yields):
    capacity limit, refilled at rate per second. Returns (whole tokens left after taking one, or -1 when none was there; exact tokens left)."""
    b = st["ratelimit"].get(key) or {"tokens": float(limit), "t": now}
    tokens = min(float(limit), b["tokens"] + (now - b["t"]) * rate)
    if tokens >= 1:
        tokens -= 1
        remaining = int(tokens)
    else:
        remaining = -1
    st["ratelimit"][key] = {"tokens": tokens, "t": now}
    return remaining, tokens
