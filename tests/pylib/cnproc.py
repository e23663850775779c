"""cloudnode-controller run for the integration tests: as the service account of
manifests/controller, against a fake API server, with its health and metrics port on loopback.

    c = Controller(k, tmp, ["--leader-elect=false"], cloud_provider="hetzner")
    c.get("/readyz") -> (status, body); c.metrics(); c.output(); c.stop() -> exit code"""
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from cntap import build

NS = "cloudnode"
USER = "system:serviceaccount:%s:cloudnode-controller" % NS


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Controller:
    def __init__(self, k, tmp, args=("--leader-elect=false",), cloud_provider="hetzner", env=None):
        """cloud_provider: passed as --cloud-provider; None leaves the provider to the cluster.
        env: more environment (RELEASE_VERSION, as OpenShift's release sets it)."""
        self.k, self.port = k, free_port()
        args = list(args) + (["--cloud-provider", cloud_provider] if cloud_provider else [])
        # Appended to (O_APPEND): the process and output() share the file offset, and a write
        # after output() seeks to 0 would otherwise land at the start, over the first lines.
        self.log = open(os.path.join(tmp, "controller-%d.log" % time.monotonic_ns()), "a+")
        self.p = subprocess.Popen(
            [build("controller", "cloudnode-controller"), "run", "--kubeconfig", k.kubeconfig_for(USER),
             "--namespace", NS, "--cloud-config-source", NS + "/cloud-provider-config",
             "--bind-address", "127.0.0.1", "--port", str(self.port), "-v", "4"] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, HTTP_PROXY="", HTTPS_PROXY="",
                                                                NO_PROXY="", **(env or {})))

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return None, ""

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode

    def output(self):
        self.log.seek(0)
        return self.log.read()
