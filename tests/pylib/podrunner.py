"""A kubelet and deployment controller for the fake API server, running pods with podman, or as
plain processes of the build tree where podman cannot run containers.

    nodes = {"n1": PodNode("n1", netns="ns1", root="/tmp/n1", api_host="10.231.1.1")}
    with PodRunner(kube, workdir, nodes) as r:        # runtime="podman" (default) or "process"
        r.restarts() -> {pod/container: count}; r.pods(); r.logs(pod)

What it plays, as far as cloudnode's manifests use it:
  - the deployment controller and scheduler: each Deployment gets spec.replicas pods, placed on
    the Nodes (API objects) that are also simulated nodes here, honouring nodeSelector, taints
    and tolerations, and required pod anti-affinity on kubernetes.io/hostname; a changed pod
    template replaces the old pods one at a time (maxSurge 0); Deployment status (replicas,
    updated, ready, available, observedGeneration, Available/Progressing conditions) is written
    back; Pod objects carry nodeName, phase and containerStatuses (restartCount, ready).
  - the kubelet: containers from the pod spec (command/args with $(VAR) expansion, env with
    value and fieldRef, ports, securityContext user/read-only root/capabilities), volumes
    (ConfigMap, Secret with defaultMode/mode and fsGroup, hostPath below the node's root, the service-account token, CA and
    namespace at /var/run/secrets/kubernetes.io/serviceaccount with KUBERNETES_SERVICE_HOST/PORT),
    hostNetwork; the static pods of each node's /etc/kubernetes/manifests with their mirror Pods;
    exited containers restarted with back-off and counted; liveness probes (httpGet, tcpSocket)
    restart the container, readiness probes decide availability.

A pod runs in the network namespace of its node (pod networking is the node's: every pod here
is hostNetwork in effect), so the API server is reached at the node's api_host. Containers run
with podman --runtime runc and the tree's containers.conf (cnpodman): PodmanRuntime, what the
whole-cluster tests use, from the images `make images` built. ProcessRuntime runs the same pods
where podman cannot (a chroot, where "/" is not a mount point, or without the images): each
container is the image's program from the build tree, started in the node's network namespace
with the container's environment; paths of its volume mounts in the arguments point to the
volumes' directories on this host, and the service-account directory is given by
CLOUDNODE_SERVICEACCOUNT_DIR (which the programs' in-cluster config reads). It has no image
filesystem, user, read-only root or capability limits: it shows the flow, the images are judged
by PodmanRuntime."""
import base64
import ctypes
import signal
import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import cnpodman
from cntap import build
from fakecloud import netns_argv

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MANIFESTS = "etc/kubernetes/manifests"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class PodNode:
    """A simulated node: its name, network namespace (None: this host's), root directory (the
    node's "/" for hostPath volumes and static pods) and the address at which the API server is
    reached from it."""

    def __init__(self, name, netns=None, root="/", api_host="127.0.0.1"):
        self.name, self.netns, self.root, self.api_host = name, netns, root, api_host


def _in_netns(netns, fn):
    """fn() in a thread that has entered netns (a thread's namespace is its own)."""
    if not netns:
        return fn()
    out = {}

    def body():
        fd = os.open("/run/netns/" + netns, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                out["r"] = False
                return
        finally:
            os.close(fd)
        out["r"] = fn()
    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out.get("r", False)


def probe_ok(probe, netns, pod_ip="127.0.0.1"):
    """One probe attempt (httpGet or tcpSocket), from the pod's network namespace."""
    timeout = probe.get("timeoutSeconds", 1)
    if "httpGet" in probe:
        g = probe["httpGet"]

        def http_get():
            try:
                c = http.client.HTTPConnection(g.get("host") or pod_ip, int(g["port"]), timeout=timeout)
                c.request("GET", g.get("path", "/"))
                status = c.getresponse().status
                c.close()
                return 200 <= status < 400
            except (OSError, http.client.HTTPException):
                return False
        return _in_netns(netns, http_get)
    if "tcpSocket" in probe:
        def tcp():
            try:
                socket.create_connection((probe["tcpSocket"].get("host") or pod_ip,
                                          int(probe["tcpSocket"]["port"])), timeout).close()
                return True
            except OSError:
                return False
        return _in_netns(netns, tcp)
    return True


def expand(s, env):
    """Kubernetes $(VAR) expansion: known variables are replaced, $$ escapes, unknown ones stay."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def tolerates(tolerations, taint):
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if not t.get("key") and t.get("operator") == "Exists":
            return True
        if t.get("key") == taint.get("key") and (t.get("operator") == "Exists" or
                                                 t.get("value", "") == taint.get("value", "")):
            return True
    return False


def template_hash(template):
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


class Container:
    def __init__(self, spec):
        self.spec = spec
        self.id = None
        self.restarts = 0
        self.next_start = 0.0
        self.started_at = 0.0
        self.live_failures = 0
        self.ready = False
        self.last_exit = None


class Pod:
    def __init__(self, name, namespace, spec, node, owner=None, thash=None, static_path=None, labels=None):
        self.name, self.namespace, self.spec, self.node = name, namespace, spec, node
        self.owner, self.thash, self.static_path = owner, thash, static_path
        self.labels = dict(labels or {})
        self.containers = [Container(c) for c in spec.get("containers", [])]
        self.dir = None
        self.env_base = {}
        self.status_sent = None

    @property
    def key(self):
        return "%s/%s" % (self.namespace, self.name)

    def ready(self):
        return all(c.id and c.ready for c in self.containers)


class Launch:
    """One container to start: what both runtimes need."""

    def __init__(self, name, image, command, args, env, mounts, netns, security):
        self.name, self.image, self.command, self.args = name, image, command, args
        self.env, self.mounts, self.netns, self.security = env, mounts, netns, security


class PodmanRuntime:
    """Containers from the images, with podman."""
    name = "podman"

    def __init__(self, tag):
        self.tag = tag

    def run(self, launch):
        argv = ["run", "-d", "--label", "cloudnode.podrunner=" + self.tag, "--name", launch.name,
                "--network", ("ns:/run/netns/" + launch.netns) if launch.netns else "host"]
        sc = launch.security
        if "runAsUser" in sc:
            argv += ["--user", "%d:%d" % (sc["runAsUser"], sc.get("runAsGroup", sc["runAsUser"]))]
        if sc.get("readOnlyRootFilesystem"):
            argv.append("--read-only")
        caps = sc.get("capabilities") or {}
        for cap in caps.get("drop") or []:
            argv += ["--cap-drop", cap]
        for cap in caps.get("add") or []:
            argv += ["--cap-add", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            argv += ["--security-opt", "no-new-privileges"]
        for k, val in launch.env.items():
            argv += ["-e", "%s=%s" % (k, val)]
        for host, path, ro in launch.mounts:
            argv += ["-v", "%s:%s:%s" % (host, path, "ro" if ro else "rw")]
        if launch.command:
            argv += ["--entrypoint", json.dumps(launch.command)]
        argv.append(launch.image)
        argv += launch.args
        r = cnpodman.podman(*argv)
        if r.returncode != 0:
            raise RuntimeError("podman run %s: %s" % (launch.name, r.stderr.strip()[-400:]))
        return r.stdout.strip().splitlines()[-1]

    def state(self, cid):
        """(running, exit code)"""
        r = cnpodman.podman("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", cid)
        running, _, code = r.stdout.strip().partition(" ")
        return running == "true", code

    def logs(self, cid):
        r = cnpodman.podman("logs", cid)
        return r.stdout + r.stderr

    def kill(self, cid):
        cnpodman.podman("kill", cid)

    def remove(self, cid, grace=None):
        cnpodman.podman("rm", "-f", *(["-t", str(grace)] if grace is not None else []), cid)


# The programs of the images `make images` builds, in the build tree.
IMAGE_PROGRAMS = {"cloudnode-controller": ("controller", "cloudnode-controller"),
                  "cloudnode-initializer": ("initializer", "cloudnode-initializer")}


class ProcessRuntime:
    """Containers as processes of the build tree (see the module's documentation)."""
    name = "process"

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = {}

    @staticmethod
    def program(image):
        repo = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
        if repo not in IMAGE_PROGRAMS:
            raise RuntimeError("no program of the build tree for image %s" % image)
        return build(*IMAGE_PROGRAMS[repo])

    @staticmethod
    def host_path(arg, mounts):
        """arg with a container path below a mount (whole, or after "=") replaced by the volume's
        host path; the longest mount path wins."""
        for host, path, _ in sorted(mounts, key=lambda m: -len(m[1])):
            arg, n = re.subn(r"(^|=)%s(?=/|$)" % re.escape(path.rstrip("/")),
                             lambda m: m.group(1) + host.rstrip("/"), arg)
            if n:
                break
        return arg

    def run(self, launch):
        prog = self.program(launch.image)
        words = list(launch.command[1:]) + list(launch.args)
        argv = [prog] + [self.host_path(a, launch.mounts) for a in words]
        env = dict(launch.env, PATH=os.environ.get("PATH", "/usr/bin:/bin"))
        for host, path, _ in launch.mounts:
            if path == SA_DIR:
                env["CLOUDNODE_SERVICEACCOUNT_DIR"] = host
        os.makedirs(os.path.join(self.workdir, "logs"), exist_ok=True)
        log_path = os.path.join(self.workdir, "logs", launch.name + ".log")
        with open(log_path, "w") as log:
            p = subprocess.Popen(netns_argv(launch.netns, argv) if launch.netns else argv, env=env,
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self.procs[launch.name] = (p, log_path)
        return launch.name

    def state(self, cid):
        code = self.procs[cid][0].poll()
        return code is None, str(code)

    def logs(self, cid):
        with open(self.procs[cid][1], errors="replace") as f:
            return f.read()

    def kill(self, cid):
        p = self.procs[cid][0]
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)

    def remove(self, cid, grace=None):
        p = self.procs.pop(cid, (None, None))[0]
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(grace if grace is not None else 0.5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class PodRunner:
    def __init__(self, kube, workdir, nodes, tag=None, backoff=(2.0, 60.0), period=0.5, runtime="podman"):
        """runtime: "podman" (the images) or "process" (the build tree's programs)."""
        self.kube, self.workdir = kube, workdir
        self.nodes = dict(nodes)
        self.tag = tag or "cnpr%d" % (os.getpid() % 100000)
        self.runtime = PodmanRuntime(self.tag) if runtime == "podman" else ProcessRuntime(workdir)
        self.backoff = backoff
        self.period = period
        self.pods = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = None
        self.errors = []
        self.seq = 0
        self.static_seen = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        if self.thread:
            self.thread.join(60)
        with self.lock:
            for pod in list(self.pods.values()):
                self._kill_pod(pod)
            self.pods.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def add_node(self, node):
        with self.lock:
            self.nodes[node.name] = node

    def _loop(self):
        while not self.stopping.is_set():
            try:
                with self.lock:
                    self.sync()
            except Exception as e:  # noqa: BLE001 -- a test must see it, not lose the thread
                self.errors.append(repr(e))
            self.stopping.wait(self.period)

    # -- observation --------------------------------------------------------------------------

    def restarts(self):
        with self.lock:
            return {"%s/%s" % (p.key, c.spec["name"]): c.restarts for p in self.pods.values()
                    for c in self.containers_of(p)}

    @staticmethod
    def containers_of(pod):
        return pod.containers

    def pod_list(self):
        with self.lock:
            return [(p.key, p.node.name, p.ready(), [c.restarts for c in p.containers]) for p in self.pods.values()]

    def logs(self):
        """Every container's output, for a failing test's diagnostics."""
        out = []
        with self.lock:
            for p in self.pods.values():
                for c in p.containers:
                    if c.id:
                        out.append("--- %s/%s on %s (restarts %d, last exit %s)\n%s" % (
                            p.key, c.spec["name"], p.node.name, c.restarts, c.last_exit, self.runtime.logs(c.id)))
        return "\n".join(out)

    # -- one pass -----------------------------------------------------------------------------

    def sync(self):
        self.sync_static()
        self.sync_deployments()
        for pod in list(self.pods.values()):
            self.sync_pod(pod)
            self.report_pod(pod)

    def _api_nodes(self):
        code, body = self.kube.api("GET", "/api/v1/nodes")
        return (body or {}).get("items", []) if code == 200 else []

    def sync_deployments(self):
        code, body = self.kube.api("GET", "/apis/apps/v1/deployments")
        if code != 200:
            return
        live = set()
        api_nodes = None
        for d in body.get("items", []):
            meta, spec = d["metadata"], d.get("spec", {})
            owner = "%s/%s" % (meta["namespace"], meta["name"])
            live.add(owner)
            thash = template_hash(spec.get("template", {}))
            want = spec.get("replicas", 1)
            mine = [p for p in self.pods.values() if p.owner == owner]
            old = [p for p in mine if p.thash != thash]
            strategy = spec.get("strategy", {})
            max_unavail = 1 if strategy.get("type") != "Recreate" else len(mine)
            unavailable = sum(1 for p in mine if not p.ready())
            # An old pod that is not ready goes at once (as the deployment controller scales down
            # unhealthy old replicas first); a ready one only within maxUnavailable.
            if old and (strategy.get("type") == "Recreate" or unavailable < max_unavail or
                        len(mine) > want or any(not p.ready() for p in old)):
                victim = sorted(old, key=lambda p: p.ready())[0]
                self._delete_pod(victim)
                mine.remove(victim)
            while len(mine) > want:
                victim = sorted(mine, key=lambda p: (p.thash == thash, p.ready()))[0]
                self._delete_pod(victim)
                mine.remove(victim)
            if len(mine) < want:
                if api_nodes is None:
                    api_nodes = self._api_nodes()
                tmpl = spec.get("template", {})
                for _ in range(want - len(mine)):
                    node = self.schedule(tmpl, api_nodes)
                    if not node:
                        break
                    self.seq += 1
                    pod = Pod("%s-%s-%d" % (meta["name"], thash[:8], self.seq), meta["namespace"],
                              tmpl.get("spec", {}), node, owner=owner, thash=thash,
                              labels=tmpl.get("metadata", {}).get("labels"))
                    self.pods[pod.key] = pod
                    mine.append(pod)
            self.report_deployment(d, mine, thash)
        for pod in list(self.pods.values()):
            if pod.owner and pod.owner not in live:
                self._delete_pod(pod)

    def schedule(self, tmpl, api_nodes):
        spec = tmpl.get("spec", {})
        anti = (spec.get("affinity", {}).get("podAntiAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", []))
        for n in sorted(api_nodes, key=lambda n: n["metadata"]["name"]):
            name = n["metadata"]["name"]
            if name not in self.nodes:
                continue
            nl = n["metadata"].get("labels", {})
            if any(nl.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
                continue
            if any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(spec.get("tolerations"), t)
                   for t in n.get("spec", {}).get("taints") or []):
                continue
            clash = False
            for term in anti:
                sel = term.get("labelSelector", {}).get("matchLabels", {})
                for p in self.pods.values():
                    if p.node.name == name and all(p.labels.get(k) == v for k, v in sel.items()):
                        clash = True
            if clash:
                continue
            return self.nodes[name]
        return None

    def sync_static(self):
        for node in list(self.nodes.values()):
            d = os.path.join(node.root, MANIFESTS)
            files = sorted(os.listdir(d)) if os.path.isdir(d) else []
            present = set()
            for f in files:
                if not f.endswith((".yaml", ".yml", ".json")):
                    continue
                path = os.path.join(d, f)
                try:
                    with open(path, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).hexdigest()
                except OSError:
                    continue
                present.add(path)
                if self.static_seen.get(path, (None,))[0] == digest:
                    continue
                old = self.static_seen.get(path)
                if old and old[1] in self.pods:
                    self._delete_pod(self.pods[old[1]])
                r = self.kube.kubectl("create", "--dry-run=client", "-o", "json", "-f", path)
                if r.returncode != 0:
                    self.errors.append("static pod %s: %s" % (path, r.stderr.strip()))
                    self.static_seen[path] = (digest, None)
                    continue
                obj = json.loads(r.stdout)
                meta = obj["metadata"]
                pod = Pod("%s-%s" % (meta["name"], node.name), meta.get("namespace", "default"), obj["spec"],
                          node, static_path=path, labels=meta.get("labels"))
                self.pods[pod.key] = pod
                self.static_seen[path] = (digest, pod.key)
            for path, (_, key) in list(self.static_seen.items()):
                if path.startswith(d + os.sep) and path not in present:
                    if key in self.pods:
                        self._delete_pod(self.pods[key])
                    del self.static_seen[path]

    # -- the kubelet part ---------------------------------------------------------------------

    def _prepare(self, pod):
        """The pod's volumes as directories on this host, and the environment every container
        gets; False while something it needs (a ConfigMap, a Secret) does not exist."""
        pod.dir = os.path.join(self.workdir, "pods", pod.namespace, pod.name)
        mounts = {}
        for v in pod.spec.get("volumes") or []:
            if "hostPath" in v:
                mounts[v["name"]] = os.path.join(pod.node.root, v["hostPath"]["path"].lstrip("/"))
                continue
            src = v.get("configMap") or v.get("secret")
            if src is None:
                mounts[v["name"]] = os.path.join(pod.dir, "empty", v["name"])
                os.makedirs(mounts[v["name"]], exist_ok=True)
                continue
            kind = "configmaps" if "configMap" in v else "secrets"
            name = src.get("name") or src.get("secretName")
            code, obj = self.kube.api("GET", "/api/v1/namespaces/%s/%s/%s" % (pod.namespace, kind, name))
            if code != 200:
                if src.get("optional"):
                    obj = {}
                else:
                    return False
            data = dict(obj.get("data") or {})
            if kind == "secrets":
                data = {k: base64.b64decode(val) for k, val in data.items()}
            else:
                data = {k: val.encode() for k, val in data.items()}
            items = src.get("items") or [{"key": k, "path": k} for k in data]
            target = os.path.join(pod.dir, "volumes", v["name"])
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(target)
            for it in items:
                if it["key"] not in data:
                    return False
                p = os.path.join(target, it["path"])
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "wb") as f:
                    f.write(data[it["key"]])
                os.chmod(p, it.get("mode", src.get("defaultMode", 0o644)))
            fs_group = (pod.spec.get("securityContext") or {}).get("fsGroup")
            if fs_group is not None:
                # The kubelet gives the volume's files to the fsGroup and makes them group-readable.
                for it in items:
                    p = os.path.join(target, it["path"])
                    os.chown(p, -1, fs_group)
                    os.chmod(p, os.stat(p).st_mode | 0o040)
            mounts[v["name"]] = target
        pod.mounts = mounts
        pod.env_base = {}
        sa = pod.spec.get("serviceAccountName") or pod.spec.get("serviceAccount")
        if not pod.static_path and pod.spec.get("automountServiceAccountToken", True):
            sa = sa or "default"
            d = self.kube.serviceaccount_dir(pod.namespace, sa, os.path.join(pod.dir, "serviceaccount"))
            for f in os.listdir(d):
                os.chmod(os.path.join(d, f), 0o644)
            pod.sa_dir = d
            pod.env_base = {"KUBERNETES_SERVICE_HOST": pod.node.api_host,
                            "KUBERNETES_SERVICE_PORT": str(self.kube.port)}
        else:
            pod.sa_dir = None
        return True

    def _field(self, pod, path):
        return {"metadata.namespace": pod.namespace, "metadata.name": pod.name, "spec.nodeName": pod.node.name,
                "spec.serviceAccountName": pod.spec.get("serviceAccountName", "default"),
                "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1"}.get(path, "")

    def _run(self, pod, c):
        spec = c.spec
        env = dict(pod.env_base)
        for e in spec.get("env") or []:
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
            elif "fieldRef" in (e.get("valueFrom") or {}):
                env[e["name"]] = self._field(pod, e["valueFrom"]["fieldRef"]["fieldPath"])
        mounts = []
        for m in spec.get("volumeMounts") or []:
            host = pod.mounts.get(m["name"])
            if host is None:
                raise RuntimeError("%s: volume %s not defined" % (pod.key, m["name"]))
            if m.get("subPath"):
                host = os.path.join(host, m["subPath"])
            mounts.append((host, m["mountPath"], bool(m.get("readOnly"))))
        if pod.sa_dir:
            mounts.append((pod.sa_dir, SA_DIR, True))
        launch = Launch("%s-%s-%s-%s-%d" % (self.tag, pod.namespace, pod.name, spec["name"], c.restarts),
                        spec["image"], [expand(a, env) for a in spec.get("command") or []],
                        [expand(a, env) for a in spec.get("args") or []], env, mounts, pod.node.netns,
                        dict(pod.spec.get("securityContext") or {}, **(spec.get("securityContext") or {})))
        c.id = self.runtime.run(launch)
        c.started_at = time.monotonic()
        c.live_failures = 0
        c.ready = "readinessProbe" not in spec

    def sync_pod(self, pod):
        now = time.monotonic()
        if pod.dir is None or not hasattr(pod, "mounts"):
            if not self._prepare(pod):
                pod.dir = None
                return
        for c in pod.containers:
            if c.id is None:
                if now >= c.next_start:
                    self._run(pod, c)
                continue
            running, code = self.runtime.state(c.id)
            if not running:
                # Exited: restart with back-off, as the kubelet does (restartPolicy Always).
                c.last_exit = code
                self.errors.append("%s/%s exited %s: %s" % (pod.key, c.spec["name"], code,
                                                           self.runtime.logs(c.id).strip()[-600:]))
                self.runtime.remove(c.id)
                c.id = None
                c.ready = False
                delay = min(self.backoff[0] * 2 ** c.restarts, self.backoff[1])
                c.restarts += 1
                c.next_start = now + delay
                continue
            age = now - c.started_at
            lp = c.spec.get("livenessProbe")
            if lp and age >= lp.get("initialDelaySeconds", 0) and self._due(c, "live", lp, now):
                if probe_ok(lp, pod.node.netns):
                    c.live_failures = 0
                else:
                    c.live_failures += 1
                    if c.live_failures >= lp.get("failureThreshold", 3):
                        self.errors.append("%s/%s liveness probe failed %d times: killed" % (
                            pod.key, c.spec["name"], c.live_failures))
                        self.runtime.kill(c.id)
            rp = c.spec.get("readinessProbe")
            if rp and age >= rp.get("initialDelaySeconds", 0) and self._due(c, "ready", rp, now, first=1.0):
                c.ready = probe_ok(rp, pod.node.netns)

    @staticmethod
    def _due(c, what, probe, now, first=None):
        """Whether a probe is due: every periodSeconds; a readiness probe first after `first`
        seconds so that a starting pod becomes ready without waiting a whole period."""
        attr = "_next_" + what
        nxt = getattr(c, attr, None)
        if nxt is None:
            nxt = c.started_at + (first if first is not None else probe.get("initialDelaySeconds", 0))
        if now < nxt:
            setattr(c, attr, nxt)
            return False
        setattr(c, attr, now + probe.get("periodSeconds", 10))
        return True

    def _kill_pod(self, pod):
        for c in pod.containers:
            if c.id:
                self.runtime.remove(c.id, grace=2)
                c.id = None

    def _delete_pod(self, pod):
        self._kill_pod(pod)
        self.pods.pop(pod.key, None)
        # The kubelet's final delete once the containers are gone: no grace period left.
        self.kube.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (pod.namespace, pod.name),
                      {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})

    # -- what is written back -----------------------------------------------------------------

    def report_pod(self, pod):
        statuses = [{"name": c.spec["name"], "image": c.spec["image"], "restartCount": c.restarts,
                     "ready": bool(c.id and c.ready), "started": bool(c.id),
                     "state": {"running": {}} if c.id else {"waiting": {"reason": "CrashLoopBackOff"
                                                                        if c.restarts else "ContainerCreating"}}}
                    for c in pod.containers]
        status = {"phase": "Running" if all(c.id for c in pod.containers) else "Pending",
                  "hostIP": "127.0.0.1", "containerStatuses": statuses,
                  "conditions": [{"type": "Ready", "status": "True" if pod.ready() else "False"}]}
        if status == pod.status_sent:
            return
        path = "/api/v1/namespaces/%s/pods" % pod.namespace
        if pod.status_sent is None:
            self.kube.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": pod.namespace}})
            meta = {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels}
            if pod.static_path:
                meta["annotations"] = {"kubernetes.io/config.mirror": "static",
                                       "kubernetes.io/config.source": "file"}
            self.kube.api("POST", path, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                         "spec": dict(pod.spec, nodeName=pod.node.name)})
        code, _ = self.kube.api("PATCH", "%s/%s/status" % (path, pod.name), {"status": status},
                                "application/merge-patch+json")
        if code < 300:
            pod.status_sent = status

    def report_deployment(self, d, pods, thash):
        meta, spec = d["metadata"], d.get("spec", {})
        want = spec.get("replicas", 1)
        ready = sum(1 for p in pods if p.ready())
        updated = sum(1 for p in pods if p.thash == thash)
        available = ready
        max_unavail = 0 if spec.get("strategy", {}).get("type") == "Recreate" else 1
        status = {"observedGeneration": meta.get("generation", 1), "replicas": len(pods),
                  "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": available,
                  "unavailableReplicas": max(0, want - available),
                  "conditions": [
                      {"type": "Available", "status": "True" if available >= want - max_unavail else "False",
                       "reason": "MinimumReplicasAvailable" if available >= want - max_unavail
                       else "MinimumReplicasUnavailable"},
                      {"type": "Progressing", "status": "True",
                       "reason": "NewReplicaSetAvailable" if updated == want == available
                       else "ReplicaSetUpdated"}]}
        old = d.get("status") or {}
        if all(old.get(k) == v for k, v in status.items() if k != "conditions") and \
                [(c.get("type"), c.get("status")) for c in old.get("conditions") or []] == \
                [(c["type"], c["status"]) for c in status["conditions"]]:
            return
        self.kube.api("PATCH", "/apis/apps/v1/namespaces/%s/deployments/%s/status" % (meta["namespace"], meta["name"]),
                      {"status": status}, "application/merge-patch+json")
