"""Python wrapper around tests/fake-cloud for the integration tests.

    with FakeCloud(state_dir, platform="aws") as c:
        c.url                         base URL; the default instance's metadata is at the root
        c.instance                    the default instance (dict) when platform= was given
        c.add_instance({"platform": "gcp", "name": "n1", ...}) -> dict
        c.instances(); c.get_instance(id); c.update_instance(id, {...}); c.remove_instance(id)
        c.stop(id) / c.start(id)      stop or start an instance; c.stop() stops the server
        c.metadata_url(id)            base URL serving instance <id>'s metadata on this port
        c.requests()                  the request log (list of dicts)
        c.fail({...}) -> rule         fault injection, see below; c.clear_faults()
        c.throttle(platform, count=None)
        c.settings(**changes)         read or change settings (action_seconds, build_seconds, ...)
        c.write_config_drive(id, dest, fmt=None) -> list of files written
        c.get(path, headers={}) / c.api(method, path, body=None, headers={}) -> (status, headers, body)

A fault rule is a dict with any of: method (regex), path (regex searched in path+query),
platform, service (metadata, api, identity, compute), instance, count (default: every request),
and what to do: status (+ body, headers, content_type), latency (seconds, alone it only
delays), reset (true: close the connection with a TCP RST), throttle (true: 429 with the
cloud's own headers and body).

Several servers can share one state_dir: e.g. a per-namespace server for one instance
    FakeCloud(state_dir, instance=id, netns="ns1", listen="169.254.169.254:80")
serves that instance at the standard address inside the namespace.

    run_with_server(t, fns, *args, prefix=..., **kwargs) runs fn(t, c, *args) for each test
    function against one FakeCloud(**kwargs) in a temporary state directory."""
import base64
import contextlib
import json
import os
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fakekube import certs  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(_HERE, "..", ".."))
FAKE_CLOUD = os.path.join(_SRC, "tests", "fake-cloud")

HETZNER_TOKEN = "hcloud-test-token"
# A DigitalOcean API token the fake accepts (settings do_tokens).
DO_TOKEN = "dop_v1_cloudnode_test"
# The fake EC2 API's access key (the example key of the AWS documentation).
AWS_ACCESS_KEY = {"id": "AKIAIOSFODNN7EXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
OPENSTACK_USER = {"name": "demo", "password": "demo-password", "domain": "Default", "project": "demo"}
OPENSTACK_APP_CREDENTIAL = {"id": "appcred-demo", "secret": "appcred-secret"}
# The fake Proxmox VE API's token and user (settings pve_tokens, pve_users).
PVE_TOKEN = {"user": "root@pam", "name": "cloudnode", "secret": "5f0c4b4e-6a8e-4c52-9d2b-0c9c3a4e7f11"}
PVE_USER = {"user": "root@pam", "password": "pve-test-password"}


def tls_files(d, name="fake-cloud"):
    """A test CA and a server certificate for 127.0.0.1 and localhost signed by it, in d:
    (ca.crt, server.crt, server.key)."""
    sys.path.insert(0, os.path.join(_SRC, "tests"))
    from fakekube import certs
    ca = certs.ensure_ca(d)
    crt, key = certs.issue(d, name, ca, name, sans=("127.0.0.1", "localhost"), server=True)
    return ca[0], crt, key


def tls_args(d):
    """extra_args of a FakeCloud that also serves HTTPS (tls_url) with a certificate of a fresh test
    CA; returns (args, CA file)."""
    ca, crt, key = tls_files(d)
    return ["--tls-listen", "127.0.0.1:0", "--tls-cert", crt, "--tls-key", key], ca


def netns_argv(name, argv):
    """argv run inside the named network namespace. nsenter enters the network namespace only:
    `ip netns exec` and `ip -n` also enter a new mount namespace and make "/" a slave mount, which
    fails where "/" is not a mount point (a chroot, as a fresh build root is)."""
    return ["nsenter", "--net=/run/netns/" + name, "--"] + list(argv)


def ssh_public_key(comment):
    """An ed25519 public key line with a well-formed blob (the key itself is random), as clients
    upload to the Hetzner and Nova keypair APIs."""
    def sshstr(b):
        return struct.pack(">I", len(b)) + b
    blob = sshstr(b"ssh-ed25519") + sshstr(os.urandom(32))
    return "ssh-ed25519 %s %s" % (base64.b64encode(blob).decode(), comment)


class FakeCloudError(Exception):
    pass


class FakeCloud:
    def __init__(self, state_dir, platform=None, listen="127.0.0.1:0", instance=None, netns=None,
                 extra_args=None, tls_names=None):
        """tls_names: serve HTTPS with a certificate for these names (and 127.0.0.1) issued by a
        test CA made in state_dir; self.ca_file is that CA, for clients to trust."""
        self.tls_names = list(tls_names or [])
        self.ca_file = None
        self.ssl_context = None
        self.state_dir = state_dir
        self.platform = platform
        self.listen = listen
        self.instance_id = instance
        self.netns = netns
        self.extra_args = list(extra_args or [])
        self.proc = None
        self.url = None
        self.admin_url = None
        self.instance = None
        self.lines = []

    # -- process -------------------------------------------------------------------

    def start_server(self):
        cmd = [sys.executable, FAKE_CLOUD, "--listen", self.listen, "--state-dir", self.state_dir]
        if self.platform:
            cmd += ["--platform", self.platform]
        if self.instance_id:
            cmd += ["--instance", str(self.instance_id)]
        cmd += self.extra_args
        if self.tls_names:
            cmd += self._tls_args()
        if self.netns:
            cmd = netns_argv(self.netns, cmd)
        os.makedirs(self.state_dir, exist_ok=True)
        self.stderr_path = os.path.join(self.state_dir, "fake-cloud-%s.stderr" % (self.instance_id or "main"))
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        first = self.proc.stdout.readline().strip()
        if not first.startswith("http"):
            self.proc.kill()
            self.proc.wait()
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                err = f.read()
            raise FakeCloudError("fake-cloud did not start: %r %s" % (first, err.strip()))
        self.url = first
        self.tls_url = None
        if "--tls-listen" in self.extra_args:
            tls = self.proc.stdout.readline().strip()
            if not tls.startswith("tls https://"):
                raise FakeCloudError("fake-cloud did not announce its HTTPS listener: %r" % tls)
            self.tls_url = tls.split(" ", 1)[1]
        # The remaining banner lines are drained so the pipe never fills.
        threading.Thread(target=self._drain, daemon=True).start()
        if self.instance_id:
            self.admin_url = None
        else:
            self.admin_url = self.url + "/_admin"
            if self.platform:
                _, _, self.instance = self._admin("GET", "/default")
        return self

    def _tls_args(self):
        d = os.path.join(self.state_dir, "tls")
        os.makedirs(d, exist_ok=True)
        ca = certs.ensure_ca(d)
        crt, key = certs.issue(d, "fake-cloud", ca, "fake-cloud", sans=sorted(set(self.tls_names) | {"127.0.0.1"}),
                               server=True)
        self.ca_file = ca[0]
        self.ssl_context = ssl.create_default_context(cafile=self.ca_file)
        return ["--tls-cert", crt, "--tls-key", key]

    def _drain(self):
        try:
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
        except (OSError, ValueError):
            pass

    def __enter__(self):
        return self.start_server()

    def __exit__(self, *exc):
        self.stop()

    def stop(self, instance_id=None):
        """With an id, stop that instance; without, terminate the server."""
        if instance_id is not None:
            return self._admin_ok("POST", "/instances/%s/stop" % instance_id)
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return None

    def start(self, instance_id):
        return self._admin_ok("POST", "/instances/%s/start" % instance_id)

    # -- HTTP ----------------------------------------------------------------------

    def api(self, method, path, body=None, headers=None, base=None):
        """One request; returns (status, headers dict, body) with JSON bodies parsed."""
        url = (base or self.url) + path
        data = None
        hdrs = dict(headers or {})
        if body is not None:
            if isinstance(body, (bytes, str)):
                data = body.encode() if isinstance(body, str) else body
            else:
                data = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        opener = urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(context=self.ssl_context))
        try:
            with opener.open(req, timeout=30) as r:
                status, rh, raw = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, rh, raw = e.code, dict(e.headers), e.read()
        ctype = rh.get("Content-Type", "")
        if "json" in ctype:
            try:
                return status, rh, json.loads(raw)
            except ValueError:
                pass
        return status, rh, raw.decode("utf-8", "replace")

    def get(self, path, headers=None, base=None):
        return self.api("GET", path, headers=headers, base=base)

    def _admin(self, method, path, body=None):
        if not self.admin_url:
            raise FakeCloudError("this server (--instance) has no admin API; use the main one")
        return self.api(method, "/_admin" + path, body)

    def _admin_ok(self, method, path, body=None):
        status, _, out = self._admin(method, path, body)
        if status >= 300:
            raise FakeCloudError("%s %s: %s %s" % (method, path, status, out))
        return out

    # -- inventory and control -----------------------------------------------------

    def add_instance(self, spec):
        return self._admin_ok("POST", "/instances", spec)

    def instances(self):
        return self._admin_ok("GET", "/instances")["instances"]

    def get_instance(self, iid):
        return self._admin_ok("GET", "/instances/%s" % iid)

    def update_instance(self, iid, changes):
        return self._admin_ok("PATCH", "/instances/%s" % iid, changes)

    def remove_instance(self, iid):
        return self._admin_ok("DELETE", "/instances/%s" % iid)

    def metadata_url(self, iid=None):
        if iid is None:
            return self.url
        return "%s/_instance/%s" % (self.url, iid)

    def requests(self):
        return self._admin_ok("GET", "/requests")["requests"]

    def clear_requests(self):
        return self._admin_ok("DELETE", "/requests")

    def fail(self, rule):
        return self._admin_ok("POST", "/faults", rule)

    def throttle(self, platform, count=None, **match):
        rule = dict(match, platform=platform, throttle=True)
        if count is not None:
            rule["count"] = count
        return self.fail(rule)

    def faults(self):
        return self._admin_ok("GET", "/faults")["faults"]

    def clear_faults(self):
        return self._admin_ok("DELETE", "/faults")

    def settings(self, **changes):
        if changes:
            return self._admin_ok("PATCH", "/settings", changes)
        return self._admin_ok("GET", "/settings")

    def write_config_drive(self, iid, dest, fmt=None):
        body = {"path": dest}
        if fmt:
            body["format"] = fmt
        return self._admin_ok("POST", "/instances/%s/config-drive" % iid, body)["files"]


def neutron(cloud, method, path, body=None, base="/network/v2.0"):
    """One Neutron (or, with base, Octavia) request to the fake as OPENSTACK_USER (a token from its
    Keystone)."""
    scoped = {"name": OPENSTACK_USER["project"], "domain": {"name": OPENSTACK_USER["domain"]}}
    auth = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": OPENSTACK_USER["name"], "password": OPENSTACK_USER["password"],
        "domain": {"name": OPENSTACK_USER["domain"]}}}}, "scope": {"project": scoped}}}
    code, headers, _ = cloud.api("POST", "/v3/auth/tokens", auth)
    if code != 201:
        raise FakeCloudError("POST /v3/auth/tokens: %s" % code)
    code, _, out = cloud.api(method, base + path, body, headers={"X-Auth-Token": headers["X-Subject-Token"]})
    if code >= 300:
        raise FakeCloudError("%s %s: %s %s" % (method, path, code, out))
    return out


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


class Netns:
    """A network namespace for one instance, with the metadata address on a namespace-local
    interface:

        with Netns(instance=inst) as ns, \\
             FakeCloud(state_dir, instance=inst["id"], netns=ns.name, listen="169.254.169.254:80"):
            ns.run(["cloudnode-agent", ...])

    Inside: lo up; a veth pair eth0 <-> mds0 (both ends in the namespace); mds0 holds
    169.254.169.254/32; eth0 has the instance's MAC, private IPv4 (/24) and IPv6 (/64), so
    netlink sees the addresses the metadata reports. Needs root (ip netns)."""

    METADATA_ADDR = "169.254.169.254"
    _seq = 0

    def __init__(self, name=None, instance=None):
        Netns._seq += 1
        self.name = name or "cn-fc-%d-%d" % (os.getpid(), Netns._seq)
        self.instance = instance
        self.created = False

    def _ip(self, *args):
        subprocess.run(netns_argv(self.name, ["ip"] + list(args)), check=True, capture_output=True)

    def create(self):
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True)
        self.created = True
        try:
            self._ip("link", "set", "lo", "up")
            self._ip("link", "add", "eth0", "type", "veth", "peer", "name", "mds0")
            self._ip("addr", "add", self.METADATA_ADDR + "/32", "dev", "mds0")
            inst = self.instance or {}
            if inst.get("mac"):
                self._ip("link", "set", "eth0", "address", inst["mac"])
            if inst.get("private_ipv4"):
                self._ip("addr", "add", inst["private_ipv4"] + "/24", "dev", "eth0")
            if inst.get("ipv6"):
                self._ip("addr", "add", inst["ipv6"] + "/64", "dev", "eth0", "nodad")
            self._ip("link", "set", "mds0", "up")
            self._ip("link", "set", "eth0", "up")
        except subprocess.CalledProcessError:
            self.delete()
            raise
        return self

    def delete(self):
        if self.created:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
            self.created = False

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.delete()

    def argv(self, argv):
        return netns_argv(self.name, argv)

    def run(self, argv, **kw):
        return subprocess.run(self.argv(argv), **kw)

    def popen(self, argv, **kw):
        return subprocess.Popen(self.argv(argv), **kw)


@contextlib.contextmanager
def scratch_server(prefix="cn-fake-cloud-", **kwargs):
    """A FakeCloud in a temporary state directory that is removed afterwards; yields (cloud, dir)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        with FakeCloud(tmp, **kwargs) as c:
            yield c, tmp


def run_with_server(t, fns, *args, prefix="cn-fake-cloud-", **kwargs):
    """Runs test functions fn(t, c, *args) against one scratch server (see cntap.Tap.run)."""
    with scratch_server(prefix, **kwargs) as (c, _):
        for fn in fns:
            t.run(fn, c, *args)
