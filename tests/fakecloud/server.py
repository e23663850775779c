"""HTTP front of tests/fake-cloud: routing, the admin API, faults and the request log.

Routing on the main port (in this order):
  /_admin/...                     admin API (not logged, never faulted)
  /_instance/<id>/<path>          metadata of instance <id>, <path> as seen at 169.254.169.254
  header X-Fake-Cloud-Instance    same, choosing the instance by header
  /v1/...                         Hetzner Cloud API
  /ec2/...                        Amazon EC2 Query API
  /v2/...                         DigitalOcean API v2
  /v3, /v3/...                    OpenStack Keystone v3
  /compute/v2.1/...               OpenStack Nova (the Keystone catalog points here)
  /image/...                      OpenStack Glance v2 (image catalog)
  /network/...                    OpenStack Neutron v2.0 (networks, subnets, ports, security groups)
  /load-balancer/...              OpenStack Octavia v2 (in the catalog with the openstack_octavia setting)
  /compute/v1/..., /oauth2/token  Google Compute Engine and OAuth 2.0 token endpoint
  /arm/..., /aad/...              Azure Resource Manager and Entra ID token endpoint
  /api2/json/...                  Proxmox VE API (also on the --tls-listen port, as on port 8006)
  Host: login.microsoftonline.com the Entra ID authority host, at its own paths
  anything else                   metadata of the default instance (--platform), else 404
With --instance ID only that instance's metadata is served, at the root."""
import argparse
import json
import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import configdrive, faults, metadata
from .state import PLATFORMS, State, StateError
from .web import Request, json_response, text

LOGGED_HEADERS = ("Authorization", "X-Auth-Token", "X-Subject-Token", "X-aws-ec2-metadata-token",
                  "X-aws-ec2-metadata-token-ttl-seconds", "Metadata-Flavor", "X-Google-Metadata-Request",
                  "Metadata", "X-Forwarded-For", "User-Agent", "Content-Type", "Accept",
                  "OpenStack-API-Version", "X-OpenStack-Nova-API-Version", "X-Fake-Cloud-Instance",
                  "X-Amz-Security-Token")
SECRET_HEADERS = {"authorization", "x-auth-token", "x-subject-token", "x-aws-ec2-metadata-token",
                  "x-amz-security-token"}

INSTANCE_HEADER = "X-Fake-Cloud-Instance"


def _redact(name, value):
    if name.lower() not in SECRET_HEADERS:
        return value
    if name.lower() == "authorization" and " " in value:
        return value.split(" ", 1)[0] + " <redacted>"
    return "<redacted>"


class App:
    def __init__(self, state, only_instance=None, apis=None, hosts=None):
        self.state = state
        self.only_instance = only_instance
        self.apis = apis or []  # (prefix, platform, service, handler)
        # (host name, platform, service, handler): a cloud's well-known host, for a client whose
        # requests for that name reach the fake (through a proxy, as behind an egress proxy).
        self.hosts = hosts or []
        self.log_path = os.path.join(state.dir, "requests.jsonl")
        self.log_lock = threading.Lock()

    # -- routing -------------------------------------------------------------------

    def route(self, req):
        """(kind, handler args); kind is admin, api, metadata or none."""
        path = req.path
        if self.only_instance is None and (path == "/_admin" or path.startswith("/_admin/")):
            return ("admin", None)
        if self.only_instance is not None:
            return ("metadata", (self.only_instance, path))
        if path.startswith("/_instance/"):
            rest = path[len("/_instance/"):]
            iid, _, sub = rest.partition("/")
            return ("metadata", (iid, "/" + sub))
        hdr = req.header(INSTANCE_HEADER)
        if hdr:
            return ("metadata", (hdr, path))
        host = (req.header("Host") or "").rsplit(":", 1)[0].lower()
        for name, platform, service, handler in self.hosts:
            if host == name:
                req.platform, req.service = platform, service
                return ("api", handler)
        for prefix, platform, service, handler in self.apis:
            if path == prefix or path.startswith(prefix + "/"):
                req.platform, req.service = platform, service
                return ("api", handler)
        default = self.state.read().get("default_instance")
        if default:
            return ("metadata", (default, path))
        return ("none", None)

    def handle(self, req):
        """Returns (Response or None for a connection reset, fault rule or None, logged)."""
        kind, arg = self.route(req)
        if kind == "admin":
            return self.admin(req), None, False
        if kind == "none":
            return text("404 page not found\n", 404), None, True
        inst = None
        if kind == "metadata":
            iid, sub = arg
            if sub != req.path:
                req.log_path = sub + ("?" + req.query_string if req.query_string else "")
            inst = self.state.instance(iid)
            req.instance_id = iid
            req.service = "metadata"
            req.platform = inst["platform"] if inst else None
            if inst is None:
                return text("no such instance\n", 404), None, True
        rule = faults.take(self.state, req)
        if rule and rule.get("after_commit"):
            # Served (and committed) as usual; the caller then loses the answer.
            return self.serve(kind, arg, req, inst), rule, True
        if rule:
            if rule.get("latency"):
                time.sleep(float(rule["latency"]))
            if rule.get("reset"):
                return None, rule, True
            if rule.get("status") or rule.get("throttle"):
                return faults.rule_response(rule, req, self.state.read()), rule, True
        return self.serve(kind, arg, req, inst), rule, True

    @staticmethod
    def serve(kind, arg, req, inst):
        if kind == "metadata":
            return metadata.serve(req, inst, arg[1])
        return arg(req)

    # -- request log ---------------------------------------------------------------

    def log(self, req, status, rule, remote, dropped=False):
        now = time.time()
        headers = {}
        for name in LOGGED_HEADERS:
            v = req.header(name)
            if v is not None:
                headers[name] = _redact(name, v)
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % (int(now * 1000) % 1000),
            "method": req.method,
            "path": req.log_path or req.raw_path,
            "platform": req.platform,
            "service": req.service,
            "instance": req.instance_id,
            "status": status,
            "headers": headers,
            "remote": remote[0] if isinstance(remote, tuple) else remote,
        }
        if isinstance(remote, tuple) and len(remote) > 1:
            entry["remotePort"] = remote[1]
        if req.log_path:
            entry["url"] = req.raw_path
        if rule:
            entry["fault"] = rule["id"]
        if dropped:
            entry["responseDropped"] = True
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self.log_lock:
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    # -- admin API -----------------------------------------------------------------

    def admin(self, req):
        try:
            return self._admin(req)
        except StateError as e:
            return json_response({"error": e.message}, e.status)
        except ValueError as e:
            return json_response({"error": "bad request body: %s" % e}, 400)

    def _admin(self, req):
        parts = [p for p in req.path.split("/") if p][1:]
        m = req.method
        st = self.state
        if parts == ["health"]:
            return json_response({"ok": True})
        if parts == ["instances"]:
            if m == "GET":
                return json_response({"instances": st.instances()})
            if m == "POST":
                return json_response(st.add_instance(req.json()), 201)
        if len(parts) >= 2 and parts[0] == "instances":
            iid = parts[1]
            if len(parts) == 2:
                if m == "GET":
                    inst = st.instance(iid)
                    if inst is None:
                        raise StateError(404, "no instance %s" % iid)
                    return json_response(inst)
                if m == "PATCH":
                    return json_response(st.update_instance(iid, req.json()))
                if m == "DELETE":
                    return json_response(st.remove_instance(iid))
            if len(parts) == 3 and m == "POST":
                if parts[2] in ("stop", "start"):
                    return json_response(st.update_instance(iid, {"status": "stopped" if parts[2] == "stop" else "running"}))
                if parts[2] == "config-drive":
                    body = req.json()
                    inst = st.instance(iid)
                    if inst is None:
                        raise StateError(404, "no instance %s" % iid)
                    if not body.get("path"):
                        raise StateError(400, "config-drive needs a path")
                    files = configdrive.write(inst, body["path"], body.get("format"))
                    return json_response({"path": body["path"], "files": files})
        if parts == ["default"] and m == "GET":
            d = st.read().get("default_instance")
            return json_response(st.instance(d) if d else None)
        if parts == ["faults"]:
            if m == "GET":
                return json_response({"faults": st.read()["faults"]})
            if m == "POST":
                rule = faults.new_rule(req.json())
                with st.locked() as s:
                    s["faults"].append(rule)
                return json_response(rule, 201)
            if m == "DELETE":
                with st.locked() as s:
                    s["faults"] = []
                return json_response({"faults": []})
        if len(parts) == 2 and parts[0] == "faults" and m == "DELETE":
            with st.locked() as s:
                before = len(s["faults"])
                s["faults"] = [r for r in s["faults"] if r["id"] != parts[1]]
                if len(s["faults"]) == before:
                    raise StateError(404, "no fault %s" % parts[1])
            return json_response({"deleted": parts[1]})
        if parts == ["settings"]:
            if m == "GET":
                return json_response(st.read()["settings"])
            if m == "PATCH":
                changes = req.json()
                with st.locked() as s:
                    unknown = set(changes) - set(s["settings"])
                    if unknown:
                        raise StateError(400, "unknown setting(s): %s" % ", ".join(sorted(unknown)))
                    s["settings"].update(changes)
                    return json_response(s["settings"])
        if parts == ["pve-files"] and m == "GET":
            # Every file on the Proxmox VE storages, with the bytes of uploads (base64, "data").
            return json_response(st.read().get("pve_storage", {}))
        if parts == ["pve-files"] and m == "POST":
            # A file put on a Proxmox VE storage outside the API (snippets are copied there by hand).
            from . import proxmox
            return json_response(proxmox.add_file(st, req.json()), 201)
        if parts == ["requests"] and m == "GET":
            return json_response({"requests": read_log(self.log_path)})
        if parts == ["requests"] and m == "DELETE":
            with self.log_lock:
                open(self.log_path, "w").close()
            return json_response({"requests": []})
        return json_response({"error": "no admin route %s %s" % (m, req.path)}, 404)


def read_log(path):
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-cloud"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def _dispatch(self):
        app = self.server.app
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self.send_error(400, "bad request body framing")
            return
        req = Request(self.command, self.path, self.headers, body, app.state)
        req.service = None
        host = self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]
        req.base_url = self.server.scheme + "://" + host
        if self.server.only_instance is None and req.path.startswith("/_instance/"):
            iid = req.path[len("/_instance/"):].split("/", 1)[0]
            req.base_url += "/_instance/" + iid
        try:
            resp, rule, logged = app.handle(req)
        except Exception as e:  # a bug in the fake must show up, not hang the client
            import traceback
            traceback.print_exc()
            resp, rule, logged = text("fake-cloud internal error: %s\n" % e, 500), None, True
        remote = tuple(self.client_address[:2]) if isinstance(self.client_address, tuple) else self.client_address
        if resp is not None and rule and rule.get("after_commit"):
            # Logged with the status the server meant to send before the answer is held and
            # dropped, so a test sees the commit while the client still waits.
            app.log(req, resp.status, rule, remote, dropped=True)
            time.sleep(float(rule.get("latency") or 0))
            self._reset()
            return
        if resp is None:
            if logged:
                app.log(req, 0, rule, remote)
            self._reset()
            return
        if logged:
            app.log(req, resp.status, rule, remote)
        self.send_response_only(resp.status, resp.reason)
        self.send_header("Server", resp.server or "fake-cloud")
        self.send_header("Date", self.date_time_string())
        for k, v in resp.headers:
            self.send_header(k, v)
        # RFC 9110: no Content-Length (and no body) on 204 and 304.
        if resp.status not in (204, 304):
            self.send_header("Content-Length", str(len(resp.body)))
        self.end_headers()
        if self.command != "HEAD" and resp.status not in (204, 304):
            self.wfile.write(resp.body)

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"x", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = self.headers.get("Content-Length")
        return self.rfile.read(int(length)) if length else b""

    def _reset(self):
        # SO_LINGER with a zero timeout makes close() send a TCP RST: the client sees
        # "connection reset by peer", like a dropped connection.
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, app, family, tls=None):
        self.address_family = family
        self.app = app
        self.only_instance = app.only_instance
        self.scheme = "https" if tls else "http"
        self.tls = tls
        super().__init__(addr, Handler)

    def get_request(self):
        # The handshake runs in the request's own thread (finish_request), so a client that
        # connects and says nothing holds up no one.
        sock, addr = super().get_request()
        return (self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False) if self.tls
                else sock), addr

    def finish_request(self, request, client_address):
        if self.tls:
            try:
                request.do_handshake()
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)


def parse_listen(s):
    if s.startswith("["):
        host, _, port = s[1:].partition("]:")
        return host, int(port), socket.AF_INET6
    host, _, port = s.rpartition(":")
    if not host:
        raise ValueError("--listen wants HOST:PORT, got %r" % s)
    return host, int(port), socket.AF_INET6 if ":" in host else socket.AF_INET


def build_hosts(state):
    from . import azure
    return [(azure.AUTHORITY_HOST, "azure", "aad", azure.Api(state).handle)]


def build_apis(state):
    from . import aws_ec2, azure, digitalocean, gcp, hetzner, openstack, openstack_octavia, openstack_services, proxmox
    return [("/v1", "hetzner", "api", hetzner.Api(state).handle),
            ("/ec2", "aws", "api", aws_ec2.Api(state).handle),
            ("/v2", "digitalocean", "api", digitalocean.Api(state).handle),
            ("/arm", "azure", "arm", azure.Api(state).handle),
            ("/aad", "azure", "aad", azure.Api(state).handle),
            ("/compute/v1", "gcp", "compute", gcp.Api(state).handle),
            ("/oauth2", "gcp", "oauth2", gcp.Api(state).handle),
            ("/v3", "openstack", "identity", openstack.Keystone(state).handle),
            ("/compute/v2.1", "openstack", "compute", openstack.Nova(state).handle),
            ("/image", "openstack", "image", openstack_services.Glance(state).handle),
            ("/network", "openstack", "network", openstack_services.Neutron(state).handle),
            ("/load-balancer", "openstack", "load-balancer", openstack_octavia.Octavia(state).handle),
            ("/api2/json", "proxmoxve", "api", proxmox.Api(state).handle)]


def ensure_default(state, platform):
    with state.locked() as st:
        cur = st.get("default_instance")
        if cur and cur in st["instances"] and st["instances"][cur]["platform"] == platform:
            return st["instances"][cur]
        from .state import add_instance
        inst = add_instance(st, {"platform": platform}, source="default")
        st["default_instance"] = inst["id"]
        return inst


def main(argv=None):
    p = argparse.ArgumentParser(prog="fake-cloud", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0 picks a free one)")
    p.add_argument("--state-dir", required=True, help="directory holding the shared inventory and request log")
    p.add_argument("--platform", choices=PLATFORMS, help="create a default instance of this platform whose "
                   "metadata is served at the root")
    p.add_argument("--instance", help="serve only this instance's metadata (for a network namespace)")
    p.add_argument("--action-seconds", type=float, help="how long Hetzner actions run")
    p.add_argument("--build-seconds", type=float, help="how long new servers stay initializing/BUILD")
    p.add_argument("--config-drive", metavar="DIR", help="write the default (or --instance) instance's "
                   "config drive tree to DIR at start")
    p.add_argument("--config-drive-format", choices=configdrive.FORMATS, help="config-2 or nocloud "
                   "(default: nocloud for proxmoxve, else config-2)")
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM, chain "
                   "included); needs --tls-key")
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    p.add_argument("--tls-listen", metavar="HOST:PORT", help="keep --listen plain HTTP and serve "
                   "everything over HTTPS (--tls-cert) here too, as Proxmox VE clients want it")
    p.add_argument("--write-config-drive", metavar="DIR", help="write the --instance's config drive "
                   "tree to DIR and exit without serving")
    args = p.parse_args(argv)

    try:
        state = State(args.state_dir)
    except OSError as e:
        print("fake-cloud: cannot use state directory %s: %s" % (args.state_dir, e.strerror), file=sys.stderr)
        return 1
    except StateError as e:
        print("fake-cloud: %s" % e.message, file=sys.stderr)
        return 1
    if args.action_seconds is not None or args.build_seconds is not None:
        with state.locked() as st:
            if args.action_seconds is not None:
                st["settings"]["action_seconds"] = args.action_seconds
            if args.build_seconds is not None:
                st["settings"]["build_seconds"] = args.build_seconds

    inst = None
    if args.instance:
        inst = state.instance(args.instance)
        if inst is None:
            print("fake-cloud: no instance %s in %s" % (args.instance, args.state_dir), file=sys.stderr)
            return 1
    elif args.platform:
        inst = ensure_default(state, args.platform)

    drive = args.write_config_drive or args.config_drive
    if drive:
        if inst is None:
            print("fake-cloud: a config drive needs --instance or --platform", file=sys.stderr)
            return 1
        configdrive.write(inst, drive, args.config_drive_format)
        if args.write_config_drive:
            print(os.path.abspath(drive))
            return 0

    try:
        host, port, family = parse_listen(args.listen)
    except ValueError as e:
        print("fake-cloud: %s" % e, file=sys.stderr)
        return 1
    tls = None
    if bool(args.tls_cert) != bool(args.tls_key):
        print("fake-cloud: --tls-cert and --tls-key go together", file=sys.stderr)
        return 1
    if args.tls_listen and not args.tls_cert:
        print("fake-cloud: --tls-listen needs --tls-cert and --tls-key", file=sys.stderr)
        return 1
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            tls.load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as e:
            print("fake-cloud: cannot load %s: %s" % (args.tls_cert, e), file=sys.stderr)
            return 1
    app = App(state, only_instance=args.instance, apis=None if args.instance else build_apis(state),
              hosts=None if args.instance else build_hosts(state))
    try:
        httpd = Server((host, port), app, family, None if args.tls_listen else tls)
    except OSError as e:
        print("fake-cloud: cannot listen on %s: %s" % (args.listen, e.strerror), file=sys.stderr)
        return 1
    real_port = httpd.server_address[1]
    url = "%s://%s:%d" % (httpd.scheme, "[%s]" % host if family == socket.AF_INET6 else host, real_port)
    tls_httpd = None
    if args.tls_listen:
        try:
            thost, tport, tfamily = parse_listen(args.tls_listen)
            tls_httpd = Server((thost, tport), app, tfamily, tls)
        except (ValueError, OSError) as e:
            print("fake-cloud: cannot serve HTTPS on %s: %s" % (args.tls_listen, e), file=sys.stderr)
            return 1
        threading.Thread(target=tls_httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    print(url)
    if tls_httpd is not None:
        print("tls https://%s:%d" % ("[%s]" % thost if tfamily == socket.AF_INET6 else thost,
                                     tls_httpd.server_address[1]))
    if not args.instance:
        print("hetzner-api %s/v1" % url)
        print("keystone %s/v3" % url)
        print("gce-api %s/compute/v1" % url)
        print("admin %s/_admin" % url)
    if inst is not None:
        print("instance %s %s" % (inst["platform"], inst["id"]))
    sys.stdout.flush()

    def stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()
        if tls_httpd is not None:
            threading.Thread(target=tls_httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
    return 0
