#!/usr/bin/env python3
"""Benchmark of cloudnode-agent: per platform, a full `--once` run against tests/fake-cloud on
loopback (wall time, CPU time, peak RSS; median of repeated runs), and cloud-init's EC2 datasource
(Debian's cloud-init) crawling the same fake IMDS, with the ratio cloud-init / cloudnode-agent.

    bench-agent.py --agent PATH --rusage-run PATH [--repeat N] [--platforms aws,gcp,...]

Prints a table. Not part of `make check`: timings belong here, not in assertions."""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))
from fakecloud import FakeCloud  # noqa: E402

PLATFORMS = ("aws", "gcp", "azure", "digitalocean", "hetzner", "openstack")
CLOUD_INIT_PYTHON = "/usr/bin/python3"


RUSAGE_RUN = None


def run_measured(cmd, env=None):
    """Runs cmd; returns (wall s, cpu s, peak RSS KiB) of that program alone, its rusage taken by
    bench/rusage-run (forked from Python, a program's ru_maxrss would be the interpreter's)."""
    start = time.monotonic()
    p = subprocess.run([RUSAGE_RUN] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.monotonic() - start
    err = p.stderr.decode(errors="replace")
    last = err.rstrip("\n").rsplit("\n", 1)[-1].split()
    if len(last) != 5 or last[0] != "rusage-run:":
        raise RuntimeError("%s: no rusage-run line: %s" % (cmd[0], err.strip()[-500:]))
    utime, stime, maxrss, status = (int(x) for x in last[1:])
    if status != 0:
        raise RuntimeError("%s failed (%d): %s" % (cmd[0], status, err.strip()))
    return wall, (utime + stime) / 1e6, maxrss


def median_of(samples):
    return tuple(statistics.median(s[i] for s in samples) for i in range(3))


def bench_agent(agent, c, platform, repeat, tmp):
    samples = []
    for i in range(repeat):
        root = tempfile.mkdtemp(dir=tmp)
        os.makedirs(os.path.join(root, "etc", "cloudnode"))
        with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
            json.dump({"platform": platform, "metadata": {"endpoint": c.url}}, f)
        c.clear_requests()
        samples.append(run_measured([agent, "--root", root, "--once"],
                                    env=dict(os.environ, CLOUDNODE_LOG_TARGET="console")))
        requests = len(c.requests())
        shutil.rmtree(root)
    return median_of(samples), requests


def bench_cloud_init(c, repeat):
    samples = []
    for i in range(repeat):
        c.clear_requests()
        samples.append(run_measured([CLOUD_INIT_PYTHON, os.path.join(HERE, "cloud-init-ec2-crawl.py"), c.url]))
        requests = len(c.requests())
    return median_of(samples), requests


def row(platform, tool, m, requests, ratio=""):
    wall, cpu, rss = m
    return "%-13s %-22s %9.1f %9.1f %10d %9d  %s" % (platform, tool, wall * 1000, cpu * 1000, rss, requests, ratio)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("BENCH_REPEAT", "11")))
    ap.add_argument("--platforms", default=",".join(PLATFORMS))
    ap.add_argument("--rusage-run", required=True, help="bench/rusage-run, built with the agent")
    a = ap.parse_args()
    agent = os.path.abspath(a.agent)
    global RUSAGE_RUN
    RUSAGE_RUN = os.path.abspath(a.rusage_run)
    have_cloud_init = subprocess.run([CLOUD_INIT_PYTHON, "-c", "import cloudinit"],
                                     stderr=subprocess.DEVNULL).returncode == 0
    print("cloudnode-agent --once against tests/fake-cloud on 127.0.0.1; median of %d runs" % a.repeat)
    print("%-13s %-22s %9s %9s %10s %9s  %s" % ("platform", "tool", "wall ms", "cpu ms", "rss KiB", "requests",
                                               "ratio (cloud-init/agent)"))
    with tempfile.TemporaryDirectory() as tmp:
        for platform in a.platforms.split(","):
            with FakeCloud(os.path.join(tmp, "fc-" + platform), platform=platform) as c:
                m, n = bench_agent(agent, c, platform, a.repeat, tmp)
                print(row(platform, "cloudnode-agent", m, n))
                if platform != "aws":
                    continue
                if not have_cloud_init:
                    print(row(platform, "cloud-init Ec2", (0, 0, 0), 0, "not measured: cloud-init not installed"))
                    continue
                ci, n = bench_cloud_init(c, a.repeat)
                ratio = "wall %.1fx  cpu %.1fx  rss %.1fx" % (ci[0] / m[0], ci[1] / m[1] if m[1] else float("inf"),
                                                               ci[2] / m[2])
                print(row(platform, "cloud-init Ec2 crawl", ci, n, ratio))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
