#!/usr/bin/env python3
"""Tenant isolation of Cluster API machines, once per provider with a machine lifecycle (Hetzner,
OpenStack): a CloudnodeMachine created with a spec.providerID that names the server of another,
live CloudnodeMachine must not take that server over. The controller refuses the relabel with a
terminal failure on the newcomer; the server keeps its owner's UID, the owner stays ready, and
deleting the newcomer leaves the server in place.

A legitimate move (the old object gone, see test-controller-machines-move.py) still relabels."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from capimachines import machine_env, wait_for  # noqa: E402


def failure(env, name):
    o = env.get(name)
    return ((o or {}).get("status") or {}).get("failureReason")


def test_provider_id_takeover(t, env):
    ctl = env.controller()
    try:
        owner = env.machine("owner")
        t.ok(wait_for(lambda: env.ready("owner"), 40), "%s: the owner machine is ready" % env.provider,
             ctl.output()[-2000:])
        uid = owner["metadata"]["uid"]
        servers = env.servers(uid)
        t.eq(len(servers), 1, "%s: one server carries the owner's UID" % env.provider)
        pid = env.get("owner")["spec"]["providerID"]
        mark = len(env.c.requests())
        thief = env.machine("thief", extra_spec={"providerID": pid})
        tuid = thief["metadata"]["uid"]
        t.ok(wait_for(lambda: failure(env, "thief") or env.servers(tuid), 20),
             "%s: the newcomer naming the owner's server is decided" % env.provider, ctl.output()[-3000:])
        t.eq([s["id"] for s in env.servers(uid)], [s["id"] for s in servers],
             "%s: the server still carries the owner's UID" % env.provider)
        t.eq(env.servers(tuid), [], "%s: and not the newcomer's" % env.provider)
        t.eq(failure(env, "thief"), "InstanceOwnedElsewhere",
             "%s: the newcomer failed with a terminal reason" % env.provider)
        t.eq([r for r in env.c.requests()[mark:] if env.is_create(r)], [],
             "%s: no server created for the newcomer" % env.provider)
        env.delete("thief")
        t.ok(wait_for(lambda: env.gone("thief"), 30), "%s: the newcomer can be deleted" % env.provider,
             ctl.output()[-3000:])
        t.eq([s["id"] for s in env.servers(uid)], [s["id"] for s in servers],
             "%s: deleting it left the owner's server in place" % env.provider)
        t.ok(env.ready("owner"), "%s: the owner is still ready" % env.provider)
        env.delete("owner")
        t.ok(wait_for(lambda: env.gone("owner"), 40), "%s: the owner is deleted" % env.provider)
        t.eq(env.servers(uid), [], "%s: with its server" % env.provider)
    finally:
        ctl.stop()


def main():
    t = Tap()
    for provider in ("hetzner", "openstack"):
        with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, provider, 0.3, 0.2) as env:
            t.run(test_provider_id_takeover, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
