#!/usr/bin/env python3
"""Throughput of tests/fake-kube-apiserver on this machine: T client threads, each on its own
keep-alive HTTPS connection as the admin identity, doing GET or merge-PATCH of Nodes for a
fixed time, plus one watch that must see every write. Loopback only; bounded in time.

    python3 tests/fakekube/bench.py [--threads 4] [--seconds 5]"""
import argparse
import http.client
import json
import os
import shutil
import ssl
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from fakekubeclient import FakeKube  # noqa: E402


def worker(k, mode, idx, stop, counts, errors):
    ctx = ssl.create_default_context(cafile=os.path.join(k.state_dir, "ca.crt"))
    ctx.load_cert_chain(os.path.join(k.state_dir, "admin.crt"), os.path.join(k.state_dir, "admin.key"))
    c = http.client.HTTPSConnection(k.host, k.port, context=ctx, timeout=30)
    n = 0
    i = 0
    while not stop.is_set():
        if mode == "newconn":
            c.close()
            c = http.client.HTTPSConnection(k.host, k.port, context=ctx, timeout=30)
        name = "bench-%d-%d" % (idx, i % 10)
        i += 1
        do_patch = mode == "patch" or (mode == "mixed" and i % 2 == 0)
        if do_patch:
            body = json.dumps({"metadata": {"labels": {"n": str(i)}}})
            c.request("PATCH", "/api/v1/nodes/" + name, body=body,
                      headers={"Content-Type": "application/merge-patch+json", "Accept": "application/json"})
        else:
            c.request("GET", "/api/v1/nodes/" + name, headers={"Accept": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            errors.append(r.status)
        n += 1
    c.close()
    counts[idx] = n


def run(k, mode, threads, seconds):
    stop = threading.Event()
    counts = [0] * threads
    errors = []
    ths = [threading.Thread(target=worker, args=(k, mode, i, stop, counts, errors)) for i in range(threads)]
    t0 = time.monotonic()
    for t in ths:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ths:
        t.join(60)
    el = time.monotonic() - t0
    return sum(counts) / el, len(errors)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seconds", type=float, default=5)
    a = p.parse_args()
    d = tempfile.mkdtemp(prefix="fakekube-bench-")
    try:
        with FakeKube(d) as k:
            for i in range(a.threads):
                for j in range(10):
                    k.api("POST", "/api/v1/nodes", {"metadata": {"name": "bench-%d-%d" % (i, j)}})
            seen = []
            st, lst = k.api("GET", "/api/v1/nodes")

            def watch():
                for ev in k.watch("/api/v1/nodes?watch=1&resourceVersion=%s&timeoutSeconds=%d"
                                  % (lst["metadata"]["resourceVersion"], int(a.seconds * 3 + 10)),
                                  timeout=a.seconds * 3 + 20):
                    seen.append(ev[0])
            wt = threading.Thread(target=watch, daemon=True)
            wt.start()
            print("| load (%d threads, keep-alive HTTPS, %.0f s each) | requests/s | errors |" % (a.threads, a.seconds))
            print("|---|---|---|")
            for mode in ("get", "patch", "mixed", "newconn"):
                rate, errs = run(k, mode, a.threads, a.seconds)
                print("| %s | %.0f | %d |" % ({"get": "GET node", "patch": "merge PATCH node",
                                               "mixed": "GET/PATCH alternating",
                                               "newconn": "GET node, new TLS connection each"}[mode], rate, errs))
            st, r = k.api("GET", "/fakekube/state")
            time.sleep(1)
            print("\nwatch events seen: %d; writes committed: %d" % (
                len(seen), r["resourceVersion"] - int(lst["metadata"]["resourceVersion"])))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
