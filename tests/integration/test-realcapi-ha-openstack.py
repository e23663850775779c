#!/usr/bin/env python3
"""test-realcapi-ha.py's scenario on OpenStack: the fake Keystone, Nova, Neutron and Octavia, the
control-plane endpoint an Octavia load balancer (its members the control-plane servers) behind a
Neutron floating IP on its VIP, the failure domains 3 Nova availability zones (one machine in
each), the machines' credentials the cluster's own Secret
(templates/cluster-template-openstack-ha.yaml). A cloud without Octavia (the floating IP on a
control-plane server) is covered by test-controller-cluster-lb.py, without a second run of this.
Its cost, once the binaries are cached: about 3 min of wall time on a loaded 2-core machine."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import sibling_test  # noqa: E402

if __name__ == "__main__":
    sibling_test("test-realcapi-ha.py").main("openstack")
