#!/usr/bin/env python3
"""Cluster mode's cloud credentials from a Secret mounted as files (--cloud-credentials-dir), laid
out as the kubelet lays out a Secret volume (files linked through ..data, which an update swaps
atomically): a token there is used over cloud.conf, which holds none; a rotated Secret is picked
up by the running process, without a restart; the token appears in no log line, Event or metric."""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import CLUSTER_SA, RBAC, Initializer, events, initialized, make_node, wait_for  # noqa: E402
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

OLD_TOKEN = "revoked-token-9c1d"


def write_secret_volume(d, data):
    """What the kubelet's atomic writer does for a Secret volume: a fresh timestamped directory with
    the keys, ..data swapped to it with a rename, and each key a link through ..data."""
    stamp = "..%d" % time.monotonic_ns()
    os.mkdir(os.path.join(d, stamp))
    for key, value in data.items():
        with open(os.path.join(d, stamp, key), "w") as f:
            f.write(value)
    tmp = os.path.join(d, "..data_tmp")
    os.symlink(stamp, tmp)
    os.rename(tmp, os.path.join(d, "..data"))
    for key in data:
        link = os.path.join(d, key)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", key), link)


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as d:
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            c.add_instance({"platform": "hetzner", "name": "n1"})
            c.add_instance({"platform": "hetzner", "name": "n2"})
            conf = os.path.join(d, "cloud.conf")
            with open(conf, "w") as f:
                f.write("[Global]\nendpoint = %s/v1\n" % c.url)
            creds = os.path.join(d, "credentials")
            os.mkdir(creds)
            write_secret_volume(creds, {"token": OLD_TOKEN + "\n"})
            make_node(k, "n1")
            args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=hetzner",
                    "--cloud-config=" + conf, "--cloud-credentials-dir=" + creds, "--leader-elect=false",
                    "--controllers=cloud-node", "--bind-address=127.0.0.1", "-v", "4"]
            with Initializer(args, state_dir=d, name="creds") as i:
                ev = wait_for(lambda: events(k, "n1", "FailedToGetInstance"), 30)
                t.ok(ev and "refused" in ev[0].get("message", ""),
                     "the Secret's token is the one used: the cloud refuses the revoked one", i.log()[-2000:])
                pid = i.proc.pid

                write_secret_volume(creds, {"token": HETZNER_TOKEN + "\n"})
                t.ok(wait_for(lambda: initialized(k, "n1"), 60),
                     "after the Secret is rotated the Node is initialized", i.log()[-2000:])
                t.ok(i.proc.poll() is None and i.proc.pid == pid, "by the same process, not restarted")
                t.ok("cloud credentials in %s changed" % creds in i.log(), "the log says the credentials changed")
                make_node(k, "n2")
                t.ok(wait_for(lambda: initialized(k, "n2"), 30), "and a Node that comes later too")

                code, metrics = i.get("/metrics")
                t.eq(code, 200, "metrics are served")
                everything = i.log() + json.dumps(events(k)) + metrics
                for token in (OLD_TOKEN, HETZNER_TOKEN):
                    t.ok(token not in everything, "the token %s... is in no log line, Event or metric" % token[:4])
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
