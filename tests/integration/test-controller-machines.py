#!/usr/bin/env python3
"""cloudnode-controller as a Cluster API infrastructure provider (Hetzner) against the fake API
server (with Cluster API's Cluster and Machine registered as CRDs) and the fake cloud:
create -> ready -> delete, a create and a delete whose answers were lost after the cloud did them,
SIGKILL pinned to every cloud request of a create and a delete (and at a random moment) without
duplicate or orphaned servers, a server removed out of band, an invalid spec as a terminal
condition without retries, and 429 storms. The scenarios are in tests/pylib/capimachines.py,
shared with OpenStack."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

# Controller, USER and wait_for are also the harness of bench/machines.
from capimachines import (USER, Controller, Env, test_invalid_spec, test_kill_points, test_post_commit,  # noqa: E402,F401
                          test_lifecycle, test_out_of_band_delete, test_rate_limited, test_two_replicas,
                          test_wait_for_bootstrap, wait_for, machine_env)
from fakecloud import FakeCloud  # noqa: E402,F401  (bench/machines)
from fakekubeclient import FakeKube  # noqa: E402,F401


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp, machine_env(tmp) as env:
        t.run(test_lifecycle, env)
        t.run(test_wait_for_bootstrap, env)
        t.run(test_invalid_spec, env)
        t.run(test_out_of_band_delete, env)
        t.run(test_rate_limited, env)
        t.run(test_two_replicas, env)
        t.run(test_post_commit, env)
        t.run(test_kill_points, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
