#!/usr/bin/env python3
"""Deleting a machine-controller MachineDeployment (cluster.k8s.io/v1alpha1) deletes everything
under it, as in a cluster: the garbage collector deletes its MachineSets and their Machines through
their ownerReferences, and cloudnode-controller deletes each Machine's server and Node before it
lets the Machine go; nothing is left in the cloud. Against the fake API server (its garbage
collector) and, as tests/realkube/test-controller-mc-cascade.real, against the real kube-apiserver
with kube-controller-manager's garbage collector."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakekubeclient import server_kind  # noqa: E402
from mcmachines import MACHINEDEPLOYMENTS, MACHINESETS, NODES, USER, mc_env, wait_for  # noqa: E402


def test_cascade(t, env):
    ctl = env.controller()
    try:
        env.machinedeployment("md-gc", env.hetzner_spec(), 2)

        def live():
            return [m for m in env.all_machines() if not m["metadata"].get("deletionTimestamp")]

        def up():
            env.kubelets()
            ms = live()
            return len(ms) == 2 and all(env.provisioned(m["metadata"]["name"]) for m in ms) and len(env.available()) == 2
        t.ok(wait_for(up, 120), "a MachineDeployment of two Machines, their servers and Nodes", ctl.output()[-3000:])
        machines = env.all_machines()
        uids = [m["metadata"]["uid"] for m in machines]
        nodes = [m["status"]["nodeRef"]["name"] for m in machines]
        sets = [s["metadata"]["name"] for s in env.k.api("GET", MACHINESETS)[1].get("items", [])]
        t.eq(len(sets), 1, "one MachineSet")
        t.eq([len(env.servers(u)) for u in uids], [1, 1], "a server each")

        code, _ = env.k.api("DELETE", MACHINEDEPLOYMENTS + "/md-gc")
        t.eq(code, 200, "kubectl delete machinedeployment (background propagation)")
        t.ok(wait_for(lambda: env.k.api("GET", MACHINESETS)[1].get("items") == [], 60),
             "the garbage collector deletes its MachineSet", env.k.api("GET", MACHINESETS)[1].get("items"))
        t.ok(wait_for(lambda: not env.all_machines(), 120), "and the MachineSet's Machines, which go once their "
             "servers and Nodes are deleted", ctl.output()[-3000:])
        t.eq([env.k.api("GET", NODES + "/" + n)[0] for n in nodes], [404, 404], "the Nodes are gone")
        t.eq([env.servers(u) for u in uids], [[], []], "the servers are gone")
        t.eq([i for i in env.c.instances() if (i.get("labels") or {}).get("my") == "label"], [],
             "nothing is left in the cloud")
        t.eq([a for a in env.k.audit() if a["user"] == USER and a["verb"] == "delete" and
              a["resource"] in ("machinesets", "machinedeployments")], [],
             "the controller deleted no MachineSet: the garbage collector did")
    finally:
        ctl.stop()


def main():
    t = Tap()
    server = {"garbage_collector": True} if server_kind() == "real" else {}
    with tempfile.TemporaryDirectory() as tmp, mc_env(tmp, **server) as env:
        t.run(test_cascade, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
