#!/usr/bin/env bash
# CI's packaging check (.ci/run): memfs as a worker image gets it, from the
# wheel alone. Builds the sdist and the wheel into dist/ (`python -m build`
# builds the wheel from the sdist, so the sdist is proved complete too),
# checks the wheel holds every file of the memfs package, installs it into a
# fresh virtualenv outside the clone as docker/Dockerfile does and, from a
# folder outside the clone (so nothing can come from the source tree), runs
# `memfs --version` and one real mount: that venv's `memfs serve` with a demo
# store, `memfs mount --daemon`, a write, `memfs sync`, `memfs store cat` of
# what the store holds, and `memfs unmount`. Needs `make install` first (the
# .venv's `build`, and the system packages pyfuse3 is compiled with) and root
# or fusermount3 for the mount. Everything but dist/ is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python="${PYTHON:-python3}"
started=$(date +%s)

say() { echo "check_wheel: $*"; }
fail() {
    echo "check_wheel: FAILED: $*" >&2
    exit 1
}
# A step's output goes to a log, shown only when the step fails.
quiet() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 || {
        cat "$log" >&2
        fail "$*"
    }
}

work=$(mktemp -d "${TMPDIR:-/tmp}/memfs-wheel.XXXXXX")
venv="$work/venv"
memfs="$venv/bin/memfs"
mount_path="$work/mnt/demo"
server_pid=""
cleanup() {
    if grep -qs " $mount_path fuse" /proc/mounts; then
        timeout 60 "$memfs" unmount --all >/dev/null 2>&1 || fusermount3 -uz "$mount_path" || true
    fi
    if [[ -n "$server_pid" ]]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# 1. The sdist and the wheel.
rm -f dist/memfs_stores-*
quiet "$work/build.log" .venv/bin/python -m build --outdir dist .
sdists=(dist/memfs_stores-*.tar.gz) wheels=(dist/memfs_stores-*-py3-none-any.whl)
[[ ${#sdists[@]} -eq 1 && -f "${sdists[0]}" ]] || fail "python -m build made no sdist: ${sdists[*]}"
[[ ${#wheels[@]} -eq 1 && -f "${wheels[0]}" ]] || fail "python -m build made no wheel: ${wheels[*]}"
wheel="$root/${wheels[0]}"
version=${wheel##*/memfs_stores-}
version=${version%%-*}
say "built ${sdists[0]} ($(du -k "${sdists[0]}" | cut -f1) kB) and ${wheels[0]} ($(du -k "$wheel" | cut -f1) kB)"

# 2. Every file of the package is in the wheel (modules, and any data file
# memfs reads at run time), and nothing of the tests is.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files memfs >"$work/package-files"
else
    find memfs -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | sort >"$work/package-files"
fi
.venv/bin/python - "$wheel" "$work/package-files" <<'PY' || fail "the wheel's files"
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
with open(sys.argv[2]) as f:
    wanted = [line.strip() for line in f if line.strip()]
missing = [p for p in wanted if p not in names]
strays = sorted(n for n in names if not n.startswith(("memfs/", "memfs_stores-")))
if missing or strays:
    print(f"missing from the wheel: {missing}; not memfs: {strays}", file=sys.stderr)
    sys.exit(1)
print(f"check_wheel: the wheel holds all {len(wanted)} files of the memfs package")
PY

# 3. A fresh virtualenv with the wheel, used from outside the clone. The two
# pip steps of docker/Dockerfile: the wheels of memfs and its dependencies
# (pyfuse3 compiled), then an install from those alone.
quiet "$work/venv.log" "$python" -m venv "$venv"
quiet "$work/pip-wheel.log" "$venv/bin/python" -m pip wheel --wheel-dir "$work/wheels" "$wheel"
quiet "$work/pip-install.log" \
    "$venv/bin/python" -m pip install --no-index --find-links "$work/wheels" memfs-stores
cd "$work"
unset PYTHONPATH
for var in MEMFS_TOKEN MEMFS_WORK_ITEM_SECRET ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN \
    ANTHROPIC_WORK_SECRET ANTHROPIC_BASE_URL MEMFS_API_URL MEMFS_CONFIG; do
    unset "$var"
done
export MEMFS_RUNTIME_DIR="$work/run" XDG_CONFIG_HOME="$work/config"
where=$("$venv/bin/python" -c 'import memfs; print(memfs.__file__)')
[[ "$where" == "$venv"/lib/* ]] || fail "memfs was imported from $where, not from the venv"
got=$("$memfs" --version) || fail "memfs --version"
[[ "$got" == "memfs $version" ]] || fail "memfs --version printed '$got', not 'memfs $version'"
say "installed in a fresh venv ($("$venv/bin/python" --version), $("$venv/bin/pip" --version | cut -d' ' -f1-2)): $got, memfs from $where"

# 4. One real mount of a demo store of that venv's `memfs serve`.
token_file="$work/token"
(umask 077 && "$venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))' >"$token_file")
MEMFS_SERVE_TOKEN="$(cat "$token_file")" setsid "$memfs" serve --port 0 \
    --db "$work/store.sqlite3" --demo-store demo >"$work/serve.out" 2>"$work/serve.log" &
server_pid=$!
url=""
for _ in $(seq 200); do
    url=$(head -n1 "$work/serve.out" 2>/dev/null || true)
    [[ -z "$url" ]] || break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; fail "memfs serve exited"; }
    sleep 0.1
done
[[ -n "$url" ]] || fail "memfs serve printed no URL within 20 s"
store_id=$(sed -n 's/^memfs serve: demo store demo: \(memstore_[A-Za-z0-9_]*\).*/\1/p' "$work/serve.log")
[[ -n "$store_id" ]] || { cat "$work/serve.log" >&2; fail "memfs serve named no demo store"; }

"$memfs" mount --daemon --api-url "$url" --token-file "$token_file" \
    --store "$store_id=$mount_path" --cache-dir "$work/cache" || fail "memfs mount"
grep -qs " $mount_path fuse" /proc/mounts || fail "$mount_path is not mounted"
grep -q "demo store" "$mount_path/README.md" || fail "the demo store's README.md reads wrong"
note="written through the wheel's mount at $(date -u +%FT%TZ)"
echo "$note" >"$mount_path/from-the-wheel.md"
"$memfs" sync "$mount_path" || fail "memfs sync"
held=$("$memfs" store --api-url "$url" --token-file "$token_file" cat "$store_id" /from-the-wheel.md) ||
    fail "memfs store cat"
[[ "$held" == "$note" ]] || fail "the store holds '$held', not '$note'"
"$memfs" unmount "$mount_path" || fail "memfs unmount"
! grep -qs " $mount_path fuse" /proc/mounts || fail "$mount_path is still mounted"
say "mounted demo store $store_id of $url at $mount_path, wrote, synced, read it back from the store, unmounted"
say "ok in $(($(date +%s) - started)) s"
