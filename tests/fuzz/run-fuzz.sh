#!/bin/sh
# Run every fuzz target for a fixed number of runs over its seed corpus; TAP output.
# Usage: run-fuzz.sh [--runs N] [NAME...]   (default runs: $FUZZ_RUNS or 2000)
set -u
top_src="${CN_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
top_build="${CN_TOP_BUILDDIR:-$top_src}"
runs="${FUZZ_RUNS:-2000}"
if [ "${1:-}" = "--runs" ]; then runs="$2"; shift 2; fi
names="${*:-${FUZZ_NAMES:-}}"
if [ -z "$names" ]; then
        for b in "$top_build"/tests/fuzz/fuzz-*; do
                case "$b" in *.c|*.o|*.log|*.trs) continue ;; esac
                [ -x "$b" ] && names="$names ${b##*/fuzz-}"
        done
fi
if [ -z "$names" ]; then
        echo "1..0 # SKIP no fuzz targets built"
        exit 0
fi
n=0; failed=0
for name in $names; do
        n=$((n + 1))
        bin="$top_build/tests/fuzz/fuzz-$name"
        corpus_src="$top_src/tests/fuzz/corpus/$name"
        work=$(mktemp -d)
        [ -d "$corpus_src" ] && cp -r "$corpus_src/." "$work/"
        if out=$("$bin" -runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
                        -artifact_prefix="$work/" "$work" 2>&1); then
                execs=$(printf '%s\n' "$out" | sed -n 's/^Done \([0-9]*\) runs.*/\1/p' | tail -n 1)
                echo "ok $n - fuzz $name: ${execs:-?} inputs without a crash"
        else
                echo "not ok $n - fuzz $name crashed"
                printf '%s\n' "$out" | tail -n 40 | sed 's/^/# /'
                for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
                        [ -f "$a" ] && echo "# artifact: $(od -An -c "$a" | head -n 5 | tr -s ' ')"
                done
                failed=$((failed + 1))
        fi
        rm -rf "$work"
done
echo "1..$n"
[ "$failed" -eq 0 ]
