#!/bin/sh
# Copy the Cluster API core CRDs the module needs into
# deckhouse/modules/030-cloud-provider-cloudnode/crds/external/, from the Cluster API release the
# tests run for real (tests/realcapi/build.sh: sigs.k8s.io/cluster-api, its config/crd/bases as
# controller-gen wrote them), each with a header naming where it came from. The module's
# infrastructure kinds are Cluster API's contract: a Cluster and its CloudnodeCluster, Machines
# (owned by MachineSets of MachineDeployments) and their CloudnodeMachines, and the
# MachineHealthChecks node-manager makes for node groups.
#
#   deckhouse/external-crds.sh          build (or find) the pinned release and copy its CRDs
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=$here/modules/030-cloud-provider-cloudnode/crds/external
build=$here/../tests/realcapi/build.sh
version=$(sed -n 's/^CAPI_VERSION=//p' "$build")
"$build" >/dev/null
src=$("$build" --src)
mkdir -p "$dest"
for kind in clusters machines machinesets machinedeployments machinehealthchecks; do
	f=cluster.x-k8s.io_$kind.yaml
	{
		echo "# Cluster API $version (sigs.k8s.io/cluster-api, Apache-2.0): config/crd/bases/$f,"
		echo "# copied unchanged by deckhouse/external-crds.sh; do not edit, run it again."
		cat "$src/config/crd/bases/$f"
	} >"$dest/$f.tmp"
	mv "$dest/$f.tmp" "$dest/$f"
done
echo "$dest"
