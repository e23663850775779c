"""podman as the tests run it: the tree's containers.conf (runc, cgroupfs, no default ulimits)
through CONTAINERS_CONF, and helpers to inspect the images `make images` built (CN_IMAGES)."""
import json
import os
import shutil
import subprocess

from cntap import root_is_mount, src


def env():
    return dict(os.environ, CONTAINERS_CONF=src("packaging", "containers.conf"))


def podman(*args, check=False, timeout=120, **kw):
    return subprocess.run(["podman", "--runtime", "runc"] + list(args), env=env(), capture_output=True,
                          text=True, check=check, timeout=timeout, **kw)


def usable():
    """None when podman can run containers here, else why not."""
    if not shutil.which("podman"):
        return "podman is not installed (make bootstrap-deps installs it)"
    if not root_is_mount():
        return "/ is not a mount point here (a chroot): podman cannot unpack image layers"
    p = podman("info", "--format", "{{.Host.OCIRuntime.Name}}")
    if p.returncode != 0:
        return "podman info failed: %s" % p.stderr.strip()[-500:]
    return None


def built_images():
    """The references make images builds, in the order of IMAGES."""
    return os.environ.get("CN_IMAGES", "").split()


def inspect(ref):
    p = podman("image", "inspect", ref)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)[0]
