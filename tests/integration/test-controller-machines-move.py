#!/usr/bin/env python3
"""cloudnode-controller after a clusterctl move: the CloudnodeMachine is recreated with a new UID
but names its server (spec.providerID, and status.instanceID when the status moved too). The
controller relabels that server with the new UID (migrate_uid: Hetzner PUT /servers/{id}, Nova
POST /servers/{id}/metadata, Proxmox VE PUT .../qemu/{vmid}/config with the tag and description) instead of creating a second one, and deletion afterwards still finds
it. Run for each provider with a machine lifecycle."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

from capimachines import CNM, MERGE, machine_env, wait_for  # noqa: E402


def move(env, name, keep_status):
    """What clusterctl move leaves behind in the target: the same object under a new UID."""
    old = env.get(name)
    env.k.api("PATCH", CNM + "/" + name, {"metadata": {"finalizers": None}}, MERGE)
    env.k.api("DELETE", CNM + "/" + name)
    if not wait_for(lambda: env.gone(name), 10):
        raise AssertionError("%s was not deleted before its move" % name)
    meta = {k: old["metadata"][k] for k in ("name", "labels", "ownerReferences", "annotations")
            if k in old["metadata"]}
    code, new = env.k.api("POST", CNM, {"apiVersion": old["apiVersion"], "kind": old["kind"], "metadata": meta,
                                        "spec": old["spec"]})
    assert code == 201, new
    if keep_status:
        env.k.api("PATCH", CNM + "/" + name + "/status", {"status": old["status"]}, MERGE)
    return old, new


def creates(env, mark):
    return [r for r in env.c.requests()[mark:] if env.is_create(r)]


def check_move(t, env, name, keep_status):
    what = "%s, with its status" % env.provider if keep_status else "%s, without its status" % env.provider
    ctl = env.controller()
    try:
        env.machine(name)
        t.ok(wait_for(lambda: env.ready(name), 40), "%s: ready" % name, ctl.output()[-2000:])
    finally:
        ctl.stop()
    old, new = move(env, name, keep_status)
    servers = env.servers(old["metadata"]["uid"])
    t.eq(len(servers), 1, "%s: one server under the old UID" % name)
    mark = len(env.c.requests())
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: env.ready(name) and env.servers(new["metadata"]["uid"]), 40),
             "moved %s: ready again" % what, ctl.output()[-2000:])
        t.eq([s["id"] for s in env.servers(new["metadata"]["uid"])], [s["id"] for s in servers],
             "moved %s: the same server now carries the new UID" % what)
        t.eq(env.servers(old["metadata"]["uid"]), [], "moved %s: and no longer the old one" % what)
        t.eq(creates(env, mark), [], "moved %s: no second server created" % what)
        moved = env.servers(new["metadata"]["uid"])
        owner_of = env.profile.get("owner_of")
        if owner_of:
            # Proxmox VE: the tag and the description's UID line both say the new UID
            cfg = (moved[0]["extra"].get("pve_config") or {}) if moved else {}
            t.ok(("cloudnode-machine-" + new["metadata"]["uid"]) in cfg.get("tags", "").split(";") and
                 "cloudnode.io/machine-uid: " + new["metadata"]["uid"] in cfg.get("description", "").splitlines() and
                 old["metadata"]["uid"] not in cfg.get("tags", "") + cfg.get("description", ""),
                 "the new UID in the tag and the description, the old one in neither", cfg)
        else:
            labels = moved[0].get("labels") if moved else {}
            t.ok("cloudnode.io/machine-uid" in labels, "the UID label is set", labels)
        t.eq(env.get(name)["spec"]["providerID"], old["spec"]["providerID"], "providerID unchanged")
        env.delete(name)
        t.ok(wait_for(lambda: env.gone(name), 40), "moved %s: deleted" % what)
        t.eq(env.servers(new["metadata"]["uid"]), [], "moved %s: with its server" % what)
        if env.profile.get("owner_of"):
            seeds = [v for f in env.c._admin_ok("GET", "/pve-files").values() for v in f if ":iso/cloudnode-" in v]
            t.eq(seeds, [], "moved %s: and its seed, named after the old UID" % what)
    finally:
        ctl.stop()


def test_move_with_status(t, env):
    check_move(t, env, "mv1", True)


def test_move_without_status(t, env):
    check_move(t, env, "mv2", False)


def main():
    t = Tap()
    for provider in ("hetzner", "openstack", "proxmoxve"):
        with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, provider, 0.3, 0.2) as env:
            t.run(test_move_with_status, env)
            t.run(test_move_without_status, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
