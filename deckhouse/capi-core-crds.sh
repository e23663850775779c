#!/bin/sh
# Copy the Cluster API core CRDs (Cluster, Machine, MachineSet, MachineDeployment,
# MachineHealthCheck) into deckhouse/capi-core-crds/, from the Cluster API release the tests run for
# real (tests/realcapi/build.sh: sigs.k8s.io/cluster-api, its config/crd/bases as controller-gen
# wrote them), each with a header naming where it came from. They are not part of the module:
# in a Deckhouse cluster node-manager installs and serves these kinds (its crds/, with the
# conversion webhook of its capi-controller-manager), and the module must not replace them. The
# copies pin what the module's Cluster API objects are checked against (test-deckhouse-module.py).
#
#   deckhouse/capi-core-crds.sh          build (or find) the pinned release and copy its CRDs
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=$here/capi-core-crds
build=$here/../tests/realcapi/build.sh
version=$(sed -n 's/^CAPI_VERSION=//p' "$build")
"$build" >/dev/null
src=$("$build" --src)
mkdir -p "$dest"
for kind in clusters machines machinesets machinedeployments machinehealthchecks; do
	f=cluster.x-k8s.io_$kind.yaml
	{
		echo "# Cluster API $version (sigs.k8s.io/cluster-api, Apache-2.0): config/crd/bases/$f,"
		echo "# copied unchanged by deckhouse/capi-core-crds.sh; do not edit, run it again."
		cat "$src/config/crd/bases/$f"
	} >"$dest/$f.tmp"
	mv "$dest/$f.tmp" "$dest/$f"
done
echo "$dest"
