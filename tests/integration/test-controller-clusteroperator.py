#!/usr/bin/env python3
"""On a cluster that serves config.openshift.io ClusterOperators, cloudnode-controller reports its
conditions on the "cloudnode" ClusterOperator (with the openshift overlay's RBAC), not on its own
CloudnodeOperator object."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
from cntap import Tap, sibling_test  # noqa: E402
import openshift  # noqa: E402

# The cluster setup and the controller process of the apply test, shared rather than copied.
apply = sibling_test("test-controller-apply.py")

CO = openshift.CO


def conditions(k):
    code, co = k.api("GET", CO + "/cloudnode")
    if code != 200:
        return {}
    return {c["type"]: c["status"] for c in (co.get("status") or {}).get("conditions") or []}


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with openshift.Cluster(tmp, "OpenStack") as k:
            apply.setup_cluster(k)
            # No --cloud-provider and no CloudnodeOperator: the provider is the Infrastructure's.
            with openshift.controller(t, k, tmp, cloud_provider=None) as c:
                got = apply.wait_for(
                    lambda: apply.roll_out(k) or (lambda cs: cs if cs.get("Available") == "True" and
                                                  cs.get("Degraded") == "False" else None)(conditions(k)), timeout=60)
                t.ok(got, "the ClusterOperator reports Available=True, Degraded=False", c.output()[-3000:])
                t.ok("Progressing" in (got or {}), "and carries a Progressing condition", got)
                t.eq(apply.provider_args(apply.get(k, apply.DEPLOY)), ["--cloud-provider=openstack"],
                     "the initializer's --cloud-provider is the Infrastructure platform")
                code, _ = k.api("GET", apply.STATUS)
                t.eq(code, 404, "no CloudnodeOperator object is created when ClusterOperators exist")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
