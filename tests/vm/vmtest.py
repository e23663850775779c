"""The machinery of the real-boot test (tests/vm/test-vm.py): a cached Debian rootfs, per-boot
disk images provisioned by the real Ignition, QEMU with the guest's metadata and API server
addresses forwarded to fake servers on the host, and the results read back afterwards.

Nothing here knows what cloudnode should do; test-vm.py asserts that."""
import base64
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPE = os.path.join(HERE, "build-rootfs.sh")
GUEST = os.path.join(HERE, "guest")
RELAY = os.path.join(HERE, "relay.py")
IGNITION = os.environ.get("CN_IGNITION") or "/usr/lib/dracut/modules.d/30ignition/ignition"
QEMU = os.environ.get("CN_QEMU") or "qemu-system-x86_64"

# The guest's view of the network (see guest/*.network).
GUEST_IP = "10.0.2.15"
GUEST_MAC = "52:54:00:12:34:56"
METADATA_MAC = "52:54:00:a9:fe:01"
KUBE_API_ADDR = "10.0.2.100"
KUBE_API_PORT = 6443


class VMError(Exception):
    pass


def log(msg):
    """Progress on stderr (the TAP stream is stdout); make check keeps it in the .log file."""
    sys.stderr.write("vmtest: %s\n" % msg)
    sys.stderr.flush()


def run(cmd, **kw):
    kw.setdefault("check", True)
    try:
        return subprocess.run(cmd, **kw)
    except subprocess.CalledProcessError as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise VMError("%s failed with %s\n%s%s" % (" ".join(map(str, cmd)), e.returncode,
                                                   out[-4000:], err[-4000:])) from None


# --- the apt mirror ---------------------------------------------------------------------------

def apt_mirror(suite="bookworm"):
    """The Debian mirror this machine's apt uses for SUITE (the only one the network reaches)."""
    if os.environ.get("CN_VM_MIRROR"):
        return os.environ["CN_VM_MIRROR"]
    entries = []
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        try:
            with open(path) as f:
                for line in f:
                    line = line.split("#", 1)[0].split()
                    if len(line) >= 3 and line[0] == "deb":
                        words = [w for w in line[1:] if not w.startswith("[")]
                        if len(words) >= 2:
                            entries.append((words[0], [words[1]]))
        except OSError:
            pass
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        with open(path) as f:
            text = f.read()
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[0].isspace():
                    continue
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.split()
            if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"])[0] != "no":
                for uri in fields.get("uris", []):
                    entries.append((uri, fields.get("suites", [])))
    for uri, suites in entries:
        if suite in suites:
            return uri
    raise VMError("no apt source for %s in /etc/apt/sources.list(.d); set CN_VM_MIRROR" % suite)


# --- the cached rootfs ------------------------------------------------------------------------

def rootfs(cache_dir):
    """Returns the directory holding root/, vmlinuz and initrd.img, building it when the recipe
    (or the mirror) changed. Concurrent test runs share one build through a lock."""
    mirror = apt_mirror()
    h = hashlib.sha256()
    with open(RECIPE, "rb") as f:
        h.update(f.read())
    h.update(b"\0" + mirror.encode())
    key = h.hexdigest()[:16]
    os.makedirs(cache_dir, exist_ok=True)
    final = os.path.join(cache_dir, "rootfs-" + key)
    with open(os.path.join(cache_dir, "lock"), "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(final, "done")):
            log("rootfs %s cached" % final)
            return final
        # The cache is shared by checkouts, which may be at other recipes: the newest other tree
        # stays, older ones are dead weight, and so are unfinished builds.
        trees = sorted(glob.glob(os.path.join(cache_dir, "rootfs-*")), key=os.path.getmtime, reverse=True)
        for old in trees[1:] + glob.glob(os.path.join(cache_dir, "tmp-*")):
            shutil.rmtree(old, ignore_errors=True)
        keep = {os.path.basename(t)[len("rootfs-"):] for t in trees[:1]} | {key}
        for old in glob.glob(os.path.join(cache_dir, "build-*.log")):
            if os.path.basename(old)[len("build-"):-len(".log")] not in keep:
                os.unlink(old)
        tmp = os.path.join(cache_dir, "tmp-%s-%d" % (key, os.getpid()))
        log("building rootfs from %s with debootstrap (recipe %s) ..." % (mirror, key))
        t0 = time.monotonic()
        with open(os.path.join(cache_dir, "build-%s.log" % key), "wb") as logf:
            r = subprocess.run(["sh", RECIPE, mirror, tmp], stdout=logf, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            with open(os.path.join(cache_dir, "build-%s.log" % key), "rb") as logf:
                tail = logf.read()[-6000:].decode(errors="replace")
            shutil.rmtree(tmp, ignore_errors=True)
            raise VMError("building the rootfs failed (exit %d); log tail:\n%s" % (r.returncode, tail))
        with open(os.path.join(tmp, "done"), "w") as f:
            f.write("%s\n" % mirror)
        os.rename(tmp, final)
        log("rootfs built in %.0fs" % (time.monotonic() - t0))
        return final


# --- the accelerator --------------------------------------------------------------------------

def qemu_usable():
    """None when this machine can run qemu-system-x86_64 at all, else why not."""
    if not shutil.which(QEMU):
        return "%s not found" % QEMU
    try:
        r = subprocess.run([QEMU, "-machine", "none", "-accel", "tcg", "-nodefaults", "-display", "none",
                            "-monitor", "stdio", "-S"], input=b"quit\n", capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot run %s: %s" % (QEMU, e)
    if r.returncode != 0:
        return "%s cannot start a machine: %s" % (QEMU, r.stderr.decode(errors="replace").strip()[-500:])
    return None


def accelerators():
    """Accelerators to try in order. KVM needs /dev/kvm; a PVM host (kvm_pvm, KVM for nested
    guests in cloud VMs) runs only guest kernels built for it, not Debian's, so TCG there."""
    if os.environ.get("CN_VM_ACCEL"):
        return [os.environ["CN_VM_ACCEL"]]
    if os.access("/dev/kvm", os.R_OK | os.W_OK) and not os.path.exists("/sys/module/kvm_pvm"):
        return ["kvm", "tcg"]
    return ["tcg"]


# --- one guest --------------------------------------------------------------------------------

def _data_url(data):
    return "data:;base64," + base64.b64encode(data).decode()


class Guest:
    """One boot: a private copy of the rootfs, provisioned and booted once.

    root      the tree that becomes the root disk (edit it before provision())
    workdir   where the images, logs and extracted results live"""

    def __init__(self, base, workdir, name):
        self.base = base
        self.workdir = os.path.join(workdir, name)
        self.name = name
        os.makedirs(self.workdir)
        self.root = os.path.join(self.workdir, "root")
        self.root_img = os.path.join(self.workdir, "root.img")
        self.results_img = os.path.join(self.workdir, "results.img")
        self.serial_log = os.path.join(self.workdir, "serial.log")
        self.ignition_log = os.path.join(self.workdir, "ignition.log")
        self.results_dir = os.path.join(self.workdir, "results")
        self.journal_dir = os.path.join(self.workdir, "journal")
        self.exit_code = None
        self.timed_out = False
        self.accel = None
        self.boot_seconds = None
        self.cidata_iso = None
        self.smbios_uuid = None
        # Seconds a boot may take (KVM, TCG), and the collector's wait for the boot's end.
        self.timeouts = {"kvm": 240, "tcg": 480}
        self.boot_wait = 150
        run(["cp", "-a", os.path.join(base, "root"), self.root])

    # -- building the disk ---------------------------------------------------------------

    def add_tree(self, src):
        """Copy a tree (e.g. a `make install DESTDIR=` staging dir) over the root, through the
        root's merged-/usr symlinks (/lib -> usr/lib)."""
        pack = subprocess.Popen(["tar", "-C", src, "-cf", "-", "."], stdout=subprocess.PIPE)
        run(["tar", "-C", self.root, "--keep-directory-symlink", "-xf", "-"], stdin=pack.stdout)
        pack.stdout.close()
        if pack.wait() != 0:
            raise VMError("tar of %s failed" % src)

    def install_packages(self, debs, upgrade=()):
        """Install .deb files with the root's own dpkg, chrooted, as an image build does: no
        systemd runs there, so the maintainer scripts enable units and start none. UPGRADE's
        files go to /var/cache/cloudnode-vmtest/upgrade, for the guest to install over them."""
        cache = "/var/cache/cloudnode-vmtest"
        names = []
        for d in debs:
            self.install_file(d, "%s/install/%s" % (cache, os.path.basename(d)))
            names.append("%s/install/%s" % (cache, os.path.basename(d)))
        run(["chroot", self.root, "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
             "DEBIAN_FRONTEND=noninteractive", "dpkg", "-i"] + names, capture_output=True)
        shutil.rmtree(self.root + cache + "/install")
        for d in upgrade:
            self.install_file(d, "%s/upgrade/%s" % (cache, os.path.basename(d)))

    def install_file(self, src, dest, mode=0o644):
        path = self.root + dest
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copyfile(src, path)
        os.chmod(path, mode)

    def write_file(self, dest, data, mode=0o644):
        path = self.root + dest
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def install_harness(self, units, files, kube_env=None, vpc_network=True):
        """The image's own test pieces: networking, the kubelet stand-in, the result collector.
        UNITS and FILES: what the collector records (unit properties, file copies). Without
        VPC_NETWORK the instance's network is left to the provisioning (cloud-init's
        network-config)."""
        if vpc_network:
            self.install_file(os.path.join(GUEST, "10-vmtest-vpc.network"),
                              "/etc/systemd/network/10-vmtest-vpc.network")
        self.install_file(os.path.join(GUEST, "11-vmtest-metadata.network"),
                          "/etc/systemd/network/11-vmtest-metadata.network")
        self.install_file(os.path.join(GUEST, "99-default.preset"), "/usr/lib/systemd/system-preset/99-default.preset")
        own_units = ["cloudnode-vmtest-collect.service"] + (["kubelet.service"] if kube_env is not None else [])
        for unit in own_units:
            self.install_file(os.path.join(GUEST, unit), "/usr/lib/systemd/system/" + unit)
        for script in ("kubelet-register", "collect"):
            self.install_file(os.path.join(GUEST, script), "/usr/libexec/cloudnode-vmtest/" + script, 0o755)
        self.write_file("/etc/cloudnode-vmtest/units", "".join(u + "\n" for u in units))
        self.write_file("/etc/cloudnode-vmtest/files", "".join(f + "\n" for f in files))
        if kube_env is not None:
            self.write_file("/etc/cloudnode-vmtest/kube.env",
                            "".join("%s=%s\n" % kv for kv in sorted(kube_env.items())), 0o600)
        run(["systemctl", "--root=" + self.root, "--quiet", "enable", "systemd-networkd.service"] + own_units,
            capture_output=True)

    def ignition(self, config):
        """Apply an Ignition config (dict) with the real Ignition: fetch and files stages,
        platform `file`, into the root. Its log is kept in ignition.log."""
        cfg = os.path.join(self.workdir, "config.ign")
        with open(cfg, "w") as f:
            json.dump(config, f)
        env = dict(os.environ, IGNITION_CONFIG_FILE=cfg)
        with open(self.ignition_log, "wb") as logf:
            for stage in ("fetch", "files"):
                r = subprocess.run([IGNITION, "-platform", "file", "-stage", stage, "-root", self.root,
                                    "-config-cache", os.path.join(self.workdir, "ignition.json"),
                                    "-state-file", os.path.join(self.workdir, "ignition.state"),
                                    "-log-to-stdout"], env=env, stdout=logf, stderr=subprocess.STDOUT,
                                   cwd=self.workdir)
                if r.returncode != 0:
                    with open(self.ignition_log, "rb") as f:
                        tail = f.read()[-5000:].decode(errors="replace")
                    raise VMError("ignition %s stage failed (exit %d):\n%s" % (stage, r.returncode, tail))

    def cloud_init(self, files, smbios_uuid):
        """Provision with cloud-init instead: the tree's cloud-init is switched on, and FILES
        ({name: bytes}: user-data, meta-data, network-config, vendor-data) become the NoCloud
        drive, an ISO 9660 image labelled cidata made with the genisoimage options Proxmox VE
        uses, attached as an IDE CD-ROM as Proxmox attaches it. SMBIOS_UUID is the VM's SMBIOS
        system UUID (Proxmox's smbios1 uuid)."""
        os.unlink(self.root + "/etc/cloud/cloud-init.disabled")
        # The image's locale, as a cloud image sets it: minbase has none, and cloud-init's locale
        # module would otherwise generate its default (en_US.UTF-8) from locale data the image
        # does not carry.
        self.write_file("/etc/default/locale", "LANG=C.UTF-8\n")
        # cloud-init's four stages are Python programs: under TCG they take minutes.
        self.timeouts = {"kvm": 360, "tcg": 1200}
        self.boot_wait = 900
        tree = os.path.join(self.workdir, "cidata")
        os.makedirs(tree)
        for name, data in files.items():
            with open(os.path.join(tree, name), "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
        self.cidata_iso = os.path.join(self.workdir, "cidata.iso")
        run(["genisoimage", "-quiet", "-iso-level", "3", "-J", "-R", "-V", "cidata", "-o", self.cidata_iso, tree],
            capture_output=True)
        self.smbios_uuid = smbios_uuid

    @staticmethod
    def merge_config(*parents, files=(), units=()):
        """An Ignition 3.3.0 config that merges PARENTS (configs as bytes) and adds FILES
        (path, bytes, mode) and UNITS (name, contents; enabled): how a user composes a node's
        config from the project's."""
        cfg = {
            "ignition": {"version": "3.3.0"},
            "storage": {"files": [{"path": p, "mode": m, "overwrite": True,
                                   "contents": {"source": _data_url(d)}} for p, d, m in files]},
            "systemd": {"units": [{"name": n, "enabled": True, "contents": c} for n, c in units]},
        }
        if parents:
            cfg["ignition"]["config"] = {"merge": [{"source": _data_url(p)} for p in parents]}
        return cfg

    def make_disks(self):
        self.write_file("/etc/cloudnode-vmtest/boot-wait", "%d\n" % self.boot_wait)
        used = int(run(["du", "-sm", self.root], capture_output=True, text=True).stdout.split()[0])
        size = (used + 768) * 1024 * 1024
        with open(self.root_img, "wb") as f:
            f.truncate(size)
        run(["mkfs.ext4", "-q", "-F", "-L", "root", "-d", self.root, self.root_img], capture_output=True)
        # The collector writes a tar straight onto this disk.
        with open(self.results_img, "wb") as f:
            f.truncate(256 * 1024 * 1024)

    # -- booting ---------------------------------------------------------------------------

    def qemu_cmd(self, accel, platform, forwards, extra_cmdline=""):
        """forwards: {"vpc": [(guest_ip, guest_port, host_port)], "metadata": [...]}"""
        def netdev(nid, net, host, dns, fwds):
            s = "user,id=%s,net=%s,host=%s,dns=%s,ipv6=off,restrict=on" % (nid, net, host, dns)
            for gip, gport, hport in fwds:
                s += ",guestfwd=tcp:%s:%d-cmd:%s %s 127.0.0.1 %d" % (gip, gport, sys.executable, RELAY, hport)
            return s
        cmdline = ("root=/dev/vda rw console=ttyS0 panic=-1 "
                   "ignition.platform.id=%s %s" % (platform, extra_cmdline)).strip()
        cmd = [QEMU, "-accel", accel, "-m", "1024", "-smp", "2", "-nodefaults", "-no-user-config",
               "-display", "none", "-no-reboot", "-serial", "file:" + self.serial_log, "-monitor", "none",
               "-kernel", os.path.join(self.base, "vmlinuz"), "-initrd", os.path.join(self.base, "initrd.img"),
               "-append", cmdline,
               "-drive", "file=%s,format=raw,if=virtio,cache=unsafe" % self.root_img,
               "-drive", "file=%s,format=raw,if=virtio,cache=unsafe" % self.results_img,
               "-device", "virtio-rng-pci",
               "-netdev", netdev("vpc", "10.0.2.0/24", "10.0.2.2", "10.0.2.3", forwards.get("vpc", [])),
               "-device", "virtio-net-pci,netdev=vpc,mac=" + GUEST_MAC,
               "-netdev", netdev("mds", "169.254.169.0/24", "169.254.169.1", "169.254.169.3",
                                 forwards.get("metadata", [])),
               "-device", "virtio-net-pci,netdev=mds,mac=" + METADATA_MAC]
        if self.cidata_iso:
            cmd += ["-drive", "file=%s,format=raw,if=ide,index=2,media=cdrom,readonly=on" % self.cidata_iso]
        if self.smbios_uuid:
            cmd += ["-smbios", "type=1,uuid=%s" % self.smbios_uuid]
        if accel == "kvm":
            cmd += ["-cpu", "host"]
        return cmd

    def boot(self, platform, forwards, timeout=None, extra_cmdline=""):
        """Boot until the guest powers off (or the timeout). KVM that shows no kernel output in
        20 s (a host that cannot run this kernel under KVM) falls back to TCG."""
        for accel in accelerators():
            t = timeout or self.timeouts[accel]
            self.accel = accel
            if os.path.exists(self.serial_log):
                os.unlink(self.serial_log)
            cmd = self.qemu_cmd(accel, platform, forwards, extra_cmdline)
            log("%s: booting (%s)" % (self.name, accel))
            t0 = time.monotonic()
            with open(os.path.join(self.workdir, "qemu.stderr"), "wb") as err:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
            fallback = False
            try:
                while True:
                    try:
                        self.exit_code = proc.wait(timeout=1)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    elapsed = time.monotonic() - t0
                    if accel == "kvm" and elapsed > 20 and "Linux version" not in self.serial():
                        fallback = True
                        break
                    if elapsed > t:
                        self.timed_out = True
                        break
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            self.boot_seconds = time.monotonic() - t0
            if fallback:
                log("%s: no kernel output under KVM after 20s; using TCG" % self.name)
                continue
            log("%s: qemu exited %s after %.0fs%s" % (self.name, self.exit_code, self.boot_seconds,
                                                     " (timed out)" if self.timed_out else ""))
            return
        raise VMError("no accelerator could boot the guest")

    # -- reading results ---------------------------------------------------------------------

    def serial(self):
        try:
            with open(self.serial_log, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def qemu_stderr(self):
        try:
            with open(os.path.join(self.workdir, "qemu.stderr"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def results(self):
        """The collector's tar, extracted: {relative path: TarInfo}, files under results_dir.
        Empty when the collector never wrote it."""
        out = {}
        try:
            tf = tarfile.open(self.results_img, "r:")
        except tarfile.TarError:
            return out
        with tf:
            members = [m for m in tf.getmembers() if not m.name.startswith("/") and ".." not in m.name.split("/")]
            os.makedirs(self.results_dir, exist_ok=True)
            for m in members:
                if m.isfile() or m.isdir():
                    tf.extract(m, self.results_dir, set_attrs=False)
                out[os.path.normpath(m.name)] = m
        return out

    def result_text(self, rel):
        try:
            with open(os.path.join(self.results_dir, rel), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return None

    def journal(self):
        """The guest's persistent journal as a list of dicts (journalctl -o json on the files
        read back from the powered-off root disk)."""
        if not os.path.isdir(self.journal_dir):
            os.makedirs(self.journal_dir)
            run(["debugfs", "-R", "rdump /var/log/journal %s" % self.journal_dir, self.root_img],
                capture_output=True)
        files = glob.glob(os.path.join(self.journal_dir, "**", "*.journal"), recursive=True)
        if not files:
            return []
        args = ["journalctl", "--no-pager", "-o", "json"]
        for f in files:
            args += ["--file", f]
        r = subprocess.run(args, capture_output=True)
        entries = []
        for line in r.stdout.decode(errors="replace").splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                pass
        return entries

    def journal_text(self, lines=300):
        files = glob.glob(os.path.join(self.journal_dir, "**", "*.journal"), recursive=True)
        if not files:
            self.journal()
            files = glob.glob(os.path.join(self.journal_dir, "**", "*.journal"), recursive=True)
        if not files:
            return "(no journal on the root disk)"
        args = ["journalctl", "--no-pager", "-o", "short-monotonic", "-p", "info", "-n", str(lines)]
        for f in files:
            args += ["--file", f]
        r = subprocess.run(args, capture_output=True)
        return r.stdout.decode(errors="replace")

    def fs_state(self):
        """"clean" when the guest unmounted its root: the superblock says clean and the journal
        needs no recovery (a journaled ext4 stays "clean" while mounted)."""
        r = subprocess.run(["dumpe2fs", "-h", self.root_img], capture_output=True)
        text = r.stdout.decode(errors="replace")
        m = re.search(r"^Filesystem state:\s*(.*)$", text, re.M)
        feats = re.search(r"^Filesystem features:\s*(.*)$", text, re.M)
        state = m.group(1).strip() if m else None
        if feats and "needs_recovery" in feats.group(1).split():
            state = "%s, needs_recovery" % state
        return state

    def diagnostics(self, serial_lines=60, journal_lines=200):
        tail = "\n".join(self.serial().splitlines()[-serial_lines:])
        return ("--- %s: qemu (%s) exit %s%s, stderr:\n%s\n--- serial console, last %d lines:\n%s\n"
                "--- guest journal, last %d lines:\n%s" % (
                    self.name, self.accel, self.exit_code, " TIMED OUT" if self.timed_out else "",
                    self.qemu_stderr()[-2000:], serial_lines, tail, journal_lines,
                    self.journal_text(journal_lines)))


if __name__ == "__main__":
    # `vmtest.py --apt-mirror` prints the mirror, for the image build (packaging/images.am).
    if sys.argv[1:] == ["--apt-mirror"]:
        print(apt_mirror())
        sys.exit(0)
    sys.exit("usage: vmtest.py --apt-mirror")
