#!/usr/bin/python3
"""Crawls an EC2 metadata service with cloud-init's EC2 datasource (Debian's cloud-init package),
the way cloud-init does on an AWS instance (IMDSv2 token, API version probe, meta-data tree,
user-data, identity document), without touching the host. Usage: cloud-init-ec2-crawl.py URL"""
import sys
import tempfile

from cloudinit import distros, helpers
from cloudinit.sources.DataSourceEc2 import CloudNames, DataSourceEc2


def main():
    url = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        paths = helpers.Paths({"cloud_dir": tmp, "run_dir": tmp})
        distro = distros.fetch("debian")("debian", {}, paths)
        cfg = {"datasource": {"Ec2": {"metadata_urls": [url], "timeout": 2, "max_wait": 10}}}
        ds = DataSourceEc2(cfg, distro, paths)
        # Behave as on AWS (DMI would say so there): IMDSv2 token first.
        ds._cloud_name = CloudNames.AWS
        md = ds.crawl_metadata()
        iid = (md.get("meta-data") or {}).get("instance-id")
        if not iid:
            print("cloud-init crawled nothing from %s" % url, file=sys.stderr)
            return 1
        print(iid)
        return 0


if __name__ == "__main__":
    sys.exit(main())
