#!/usr/bin/env bash
# Builds pjdfstest (the POSIX filesystem test suite) from its source tarball
# into build/pjdfstest, once per tarball, and prints the folder that holds the
# `pjdfstest` binary and its `tests/`. The tarball is in no package registry:
# it is looked for at $MEMFS_PJDFSTEST_TARBALL, then ../shared/tools/ beside
# this project, then /work/shared/tools/. Neither the source nor the binary is
# ever committed (build/ is git-ignored).
#
# Exit status 3 (and one line on stderr) when no tarball is found, so that a
# test can tell "absent" (a visible skip) from "broken" (a failure).
# The build needs autoconf, automake, gcc and make (scripts/install.sh has them).
set -euo pipefail
cd "$(dirname "$0")/.."

# A path set in the variable is the only one tried.
if [[ -n "${MEMFS_PJDFSTEST_TARBALL:-}" ]]; then
    candidates=("$MEMFS_PJDFSTEST_TARBALL")
else
    candidates=(../shared/tools/pjdfstest-src.tar.gz /work/shared/tools/pjdfstest-src.tar.gz)
fi
tarball=""
for candidate in "${candidates[@]}"; do
    if [[ -f "$candidate" ]]; then
        tarball=$(realpath "$candidate")
        break
    fi
done
if [[ -z "$tarball" ]]; then
    echo "pjdfstest: no source tarball at ${candidates[*]} (set MEMFS_PJDFSTEST_TARBALL to its path)" >&2
    exit 3
fi

out="$PWD/build/pjdfstest"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9 # one build at a time: test workers and `make posix` may ask together

sum=$(sha256sum "$tarball" | cut -d' ' -f1)
if [[ -x "$out/src/pjdfstest/pjdfstest" && "$(cat "$out/.built" 2>/dev/null)" == "$sum" ]]; then
    echo "$out/src/pjdfstest"
    exit 0
fi

for tool in autoreconf automake gcc make; do
    command -v "$tool" >/dev/null || {
        echo "pjdfstest: $tool is missing (apt-get install autoconf automake gcc make)" >&2
        exit 1
    }
done
echo "pjdfstest: building from $tarball" >&2
rm -rf "$out/src" "$out/.built"
mkdir -p "$out/src"
tar -xzf "$tarball" -C "$out/src"
(
    cd "$out/src/pjdfstest"
    autoreconf -ifs >build.log 2>&1 && ./configure >>build.log 2>&1 && make pjdfstest >>build.log 2>&1
) || {
    echo "pjdfstest: the build failed; see $out/src/pjdfstest/build.log" >&2
    exit 1
}
echo "$sum" >"$out/.built"
echo "$out/src/pjdfstest"
