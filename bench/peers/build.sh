#!/bin/sh
# Build the Go programs of other projects that do the jobs cloudnode does, so the benchmarks run
# them side by side with ours on the same fakes. Benchmark tools only: their code is fetched at
# build time and never part of cloudnode. Each program is built once per pinned version into
# $CN_PEERS_CACHE (default ~/.cache/cloudnode/peers); a second run finds the binaries and does
# nothing. Exits 77 (and says why) when there is no Go >= 1.23 (the one tests/realkube/build.sh
# finds) or the sources cannot be fetched.
#
#   build.sh [NAME...]   build what is missing (default: all), print the directory holding them
#   build.sh --bindir    print that directory
#   build.sh --bindir cluster-api-provider-hetzner   print the directory holding CAPH (and its CRDs
#                        in ../crds) when it is built, exit 1 otherwise
#
# Names: hcloud-cloud-controller-manager, openstack-cloud-controller-manager, and, built only
# when named, cluster-api-provider-hetzner (CAPH, into a directory of its own, printed).
#
# The module proxy serves cloud-provider-openstack; where it does not serve the hcloud
# cloud-controller-manager, CN_HCLOUD_CCM_GIT may name a git repository (a clone or a bare
# mirror) holding its release tag, whose tree is used instead.
#
# CAPH: the module proxy refuses github.com/syself/cluster-api-provider-hetzner (403), so its tree
# always comes from a git repository holding the release tag, CN_CAPH_GIT (default: the mirror
# /work/.mirror/syself+cluster-api-provider-hetzner/repo when it is there). The release vendors
# its whole module graph, which is built as it is (-mod=vendor: nothing is fetched). v1.1.8 needs
# go 1.25.12 (Cluster API v1.13.4, k8s.io v0.35.5): the Go used is the newest of /usr/local/go
# and the one tests/realkube/build.sh finds, exit 77 when it is older.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

# Pinned releases: the newest whose module graph declares go <= 1.23 (Debian 12's golang-1.23),
# both on Kubernetes 1.32. Every k8s.io staging module is raised to the patch release the real
# kube-apiserver of the tests is built from, so the two builds share the module cache.
HCLOUD_CCM_VERSION=v1.24.0
OPENSTACK_CCM_VERSION=v1.32.0
# The checksum database has no record of this cloud-provider-openstack release; these are the
# hashes of the module the proxy served when it was pinned, so a later build verifies against them.
OPENSTACK_CCM_SUM="k8s.io/cloud-provider-openstack v1.32.0 h1:OT6w6pdtw1vl27NITizdBUFw23ysiz+vPWFDxRtWeio=
k8s.io/cloud-provider-openstack v1.32.0/go.mod h1:71BTtfZU/OTOevcITmgNDuXz9+quavzCU214KrRuVXc="
CAPH_VERSION=v1.1.8
CAPH_GO_MINOR_MIN=25
KUBE_VERSION=v1.32.13
KUBE_STAGING_VERSION=v0.32.13

cache=${CN_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudnode/peers}
bindir=$cache/hcloud-ccm-$HCLOUD_CCM_VERSION-openstack-ccm-$OPENSTACK_CCM_VERSION/bin

caph_dir=$cache/caph-$CAPH_VERSION
if [ "${1:-}" = --bindir ]; then
	if [ "${2:-}" = cluster-api-provider-hetzner ]; then
		[ -x "$caph_dir/bin/cluster-api-provider-hetzner" ] || exit 1
		echo "$caph_dir/bin"
		exit 0
	fi
	echo "$bindir"
	exit 0
fi
if [ "${1:-}" = cluster-api-provider-hetzner ] && [ $# -eq 1 ]; then
	if [ -x "$caph_dir/bin/cluster-api-provider-hetzner" ]; then
		echo "$caph_dir/bin"
		exit 0
	fi
	git=${CN_CAPH_GIT:-/work/.mirror/syself+cluster-api-provider-hetzner/repo}
	if ! git -C "$git" rev-parse -q --verify "$CAPH_VERSION^{commit}" >/dev/null 2>&1; then
		echo "peers: no git repository holding CAPH $CAPH_VERSION (CN_CAPH_GIT=$git); the module proxy refuses it" >&2
		exit 77
	fi
	go=""
	for g in /usr/local/go/bin/go $("$here/../../tests/realkube/build.sh" --go 2>/dev/null || true); do
		m=$(GOTOOLCHAIN=local "$g" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
		if [ -n "$m" ] && [ "$m" -ge "$CAPH_GO_MINOR_MIN" ]; then
			go=$g
			break
		fi
	done
	if [ -z "$go" ]; then
		echo "peers: CAPH $CAPH_VERSION needs go >= 1.$CAPH_GO_MINOR_MIN; none found" >&2
		exit 77
	fi
	mkdir -p "$cache" "$caph_dir/bin" "$caph_dir/crds"
	exec 9>"$cache/lock"
	flock 9
	w=$cache/build-caph-$CAPH_VERSION
	rm -rf "$w"
	mkdir -p "$w/src"
	git -C "$git" archive "$CAPH_VERSION" | tar -x -C "$w/src"
	echo "peers: building cluster-api-provider-hetzner $CAPH_VERSION with $(GOTOOLCHAIN=local "$go" env GOVERSION)" >&2
	(cd "$w/src" && GOTOOLCHAIN=local GOFLAGS=-mod=vendor CGO_ENABLED=0 "$go" build -p 2 -trimpath -ldflags='-s -w' \
		-o "$caph_dir/bin/cluster-api-provider-hetzner.tmp" .)
	cp "$w/src"/config/crd/bases/*.yaml "$caph_dir/crds/"
	mv "$caph_dir/bin/cluster-api-provider-hetzner.tmp" "$caph_dir/bin/cluster-api-provider-hetzner"
	echo "$caph_dir/bin"
	exit 0
fi
names=${*:-hcloud-cloud-controller-manager openstack-cloud-controller-manager}
missing=""
for n in $names; do
	case $n in
	hcloud-cloud-controller-manager | openstack-cloud-controller-manager) ;;
	*) echo "peers: unknown program '$n'" >&2; exit 2 ;;
	esac
	[ -x "$bindir/$n" ] || missing="$missing $n"
done
if [ -z "$missing" ]; then
	echo "$bindir"
	exit 0
fi

go=$("$here/../../tests/realkube/build.sh" --go) || exit $?
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$cache" "$bindir"
exec 9>"$cache/lock"
flock 9

staging_replaces() {
	for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
		cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
		cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
		kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet \
		legacy-cloud-providers metrics mount-utils pod-security-admission sample-apiserver \
		sample-cli-plugin sample-controller; do
		printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$KUBE_STAGING_VERSION"
	done
}

unreachable='dial tcp|x509|certificate|no such host|i/o timeout|connection refused|proxyconnect|TLS handshake|network is unreachable|403 Forbidden|404 Not Found|410 Gone'

# build NAME DIR PACKAGE: fetch the module graph of the throwaway module in DIR and build PACKAGE.
build() {
	echo "peers: building $1 ($3) with $("$go" env GOVERSION)" >&2
	if ! (cd "$2" && "$go" list -deps "$3" >/dev/null 2>"$2/fetch.err"); then
		if grep -qiE "$unreachable" "$2/fetch.err"; then
			echo "peers: the modules of $1 cannot be fetched from here:" >&2
			grep -m1 -iE "$unreachable" "$2/fetch.err" >&2
			exit 77
		fi
		cat "$2/fetch.err" >&2
		exit 1
	fi
	newest=$(cd "$2" && "$go" list -m -f '{{.GoVersion}}' all | sort -V | tail -n 1)
	case $newest in
	1.2[0-3] | 1.2[0-3].* | 1.1[0-9] | 1.1[0-9].* | "") ;;
	*)
		echo "peers: $1 needs go $newest, more than Debian 12's 1.23: pin an older release" >&2
		exit 1
		;;
	esac
	(cd "$2" && "$go" build -trimpath -ldflags='-s -w' -o "$bindir/$1.tmp" "$3")
	mv "$bindir/$1.tmp" "$bindir/$1"
}

hcloud() {
	w=$cache/build-hcloud-ccm-$HCLOUD_CCM_VERSION
	rm -rf "$w"
	mkdir -p "$w"
	src=""
	if [ -n "${CN_HCLOUD_CCM_GIT:-}" ]; then
		mkdir -p "$w/src"
		git -C "$CN_HCLOUD_CCM_GIT" archive "$HCLOUD_CCM_VERSION" | tar -x -C "$w/src"
		src="github.com/hetznercloud/hcloud-cloud-controller-manager => ./src"
	fi
	cat >"$w/go.mod" <<MOD
module cloudnode.invalid/peers/hcloud

go 1.23.0

require github.com/hetznercloud/hcloud-cloud-controller-manager $HCLOUD_CCM_VERSION

replace (
$(staging_replaces)
	$src
)
MOD
	printf '//go:build tools\n\npackage peers\n\nimport _ "github.com/hetznercloud/hcloud-cloud-controller-manager"\n' >"$w/tools.go"
	build hcloud-cloud-controller-manager "$w" github.com/hetznercloud/hcloud-cloud-controller-manager
}

openstack() {
	w=$cache/build-openstack-ccm-$OPENSTACK_CCM_VERSION
	mkdir -p "$w"
	# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with paths,
	# which a dependant does not inherit: the replaces above name the published releases.
	cat >"$w/go.mod" <<MOD
module cloudnode.invalid/peers/openstack

go 1.23.0

require (
	k8s.io/cloud-provider-openstack $OPENSTACK_CCM_VERSION
	k8s.io/kubernetes $KUBE_VERSION
)

replace (
$(staging_replaces)
)
MOD
	echo "$OPENSTACK_CCM_SUM" >"$w/go.sum"
	printf '//go:build tools\n\npackage peers\n\nimport _ "k8s.io/cloud-provider-openstack/cmd/openstack-cloud-controller-manager"\n' >"$w/tools.go"
	build openstack-cloud-controller-manager "$w" k8s.io/cloud-provider-openstack/cmd/openstack-cloud-controller-manager
}

for n in $missing; do
	case $n in
	hcloud-cloud-controller-manager) hcloud ;;
	openstack-cloud-controller-manager) openstack ;;
	esac
done
echo "$bindir"
