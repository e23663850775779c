#!/usr/bin/env python3
"""cloudnode-controller pauses a CloudnodeMachine as Cluster API asks (Cluster spec.paused, the
cluster.x-k8s.io/paused annotation: a Paused condition, no cloud call) and places each
CloudnodeMachine each CloudnodeMachine in its Machine's failure domain
(Machine.spec.failureDomain, checked against the Cluster's status.failureDomains): a Hetzner
location, a Nova availability zone; an unlisted one is a terminal condition without a cloud
call; a credentials Secret that clusterctl move would leave behind
is reported with a Warning Event. Both providers, against the fake API server and the fake cloud (tests/pylib/capimachines.py)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

from capimachines import machine_env, test_credentials_not_movable, test_paused, test_placement  # noqa: E402


def main():
    t = Tap()
    for provider in ("hetzner", "openstack"):
        with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, provider=provider) as env:
            t.diag("provider %s" % provider)
            t.run(test_placement, env)
            t.run(test_paused, env)
            t.run(test_credentials_not_movable, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
