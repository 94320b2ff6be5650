#!/usr/bin/env bash
# Builds libfuse's own C++ low-level in-memory example (`example/memfs_ll.cc`),
# the FUSE floor bench/agent_workload.py measures memfs against, out of tree
# into build/memfs_ll, and prints the path of the `memfs_ll` binary. libfuse's
# source is never committed here (build/ is git-ignored). It is taken from
# $MEMFS_LIBFUSE_SRC when set (a source folder, a bare or normal git
# directory, a tarball, or a git URL), else cloned from
# https://github.com/libfuse/libfuse (depth 1).
#
# Exit status 3 (and one line on stderr) when no source can be had, so that
# a caller can tell "absent" (a skip with a line) from "broken" (a failure).
# Needs meson and ninja (`pip install meson ninja`, in the bench extra), a C
# and a C++ compiler; libfuse builds its own library beside the example.
set -euo pipefail
cd "$(dirname "$0")/.."

venv_bin="$PWD/.venv/bin"
[[ -d "$venv_bin" ]] && export PATH="$venv_bin:$PATH"
for tool in meson ninja cc c++ git; do
    command -v "$tool" >/dev/null || {
        echo "memfs_ll: $tool is missing (meson and ninja: pip install meson ninja)" >&2
        exit 1
    }
done

out="$PWD/build/memfs_ll"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

source="${MEMFS_LIBFUSE_SRC:-https://github.com/libfuse/libfuse}"
new="$out/src.new"
rm -rf "$new"
mkdir -p "$new"
if [[ -f "$source" ]]; then
    tar -xf "$source" -C "$new" --strip-components=1
elif [[ -d "$source" && -f "$source/meson.build" ]]; then
    cp -a "$source/." "$new/"
elif [[ -d "$source" ]] && git --git-dir="$source" rev-parse --verify -q HEAD >/dev/null; then
    git --git-dir="$source" archive HEAD | tar -x -C "$new"
elif [[ "$source" == *://* || "$source" == git@* ]]; then
    rmdir "$new"
    git clone -q --depth 1 "$source" "$new" 2>"$out/clone.log" || {
        echo "memfs_ll: could not clone $source (set MEMFS_LIBFUSE_SRC to libfuse's source)" >&2
        exit 3
    }
else
    echo "memfs_ll: no libfuse source at $source (set MEMFS_LIBFUSE_SRC)" >&2
    exit 3
fi
[[ -f "$new/example/memfs_ll.cc" ]] || {
    echo "memfs_ll: $source has no example/memfs_ll.cc (libfuse 3.18 or later has it)" >&2
    exit 3
}
# Only now is a build there before replaced.
rm -rf "$out/src" "$out/build"
mv "$new" "$out/src"
# The example leaves the `struct stat` of its getattr and setattr replies
# uninitialised: a garbage st_blksize (up to 2^31) then makes Python's open()
# fail ("invalid buffering size") in some rounds. Zero them, nothing else.
sed -i -e 's/^\(\s*\)struct stat stbuf;$/\1struct stat stbuf = {};/' \
    -e 's/^\(\s*\)struct stat st;$/\1struct stat st = {};/' "$out/src/example/memfs_ll.cc"
(
    cd "$out/src"
    meson setup "$out/build" -Dexamples=true -Dutils=false -Dtests=false >"$out/build.log" 2>&1 &&
        ninja -C "$out/build" example/memfs_ll >>"$out/build.log" 2>&1
) || {
    echo "memfs_ll: the build failed; see $out/build.log" >&2
    exit 1
}
if [[ -d "$out/src/.git" ]]; then
    rev=$(git -C "$out/src" rev-parse HEAD)
elif [[ -d "$source" ]] && git --git-dir="$source" rev-parse --verify -q HEAD >/dev/null; then
    rev=$(git --git-dir="$source" rev-parse HEAD)
else
    rev=""
fi
echo "$source $rev" >"$out/.source"
echo "$out/build/example/memfs_ll"
