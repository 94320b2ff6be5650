#!/usr/bin/env bash
# `make demo`: memfs for real on this machine. Starts a local `memfs serve`
# with a seeded demo store and mounts that store at /mnt/memory/demo in the
# foreground; Ctrl-C unmounts (after a final sync) and stops the server. The
# exit status is the mount's.
#
# The server listens on 127.0.0.1:8377 (MEMFS_DEMO_PORT), the URL `memfs store`
# uses by default; when that port is taken it says so and takes a free one.
# The mount has a runtime folder of its own ($demo_dir/run), so that another
# shell's `memfs status` or `memfs unmount --all` neither sees nor ends it.
# $demo_dir/env, written for each run and removed at its end, exports the
# runtime folder, the URL, the token (read from its file) and the store id:
# `source` it in another shell to reach the demo.
#
# The token is generated once into a 0600 file and reaches the server and the
# mount through --token-file (the `memfs store` hints through MEMFS_TOKEN): it
# never appears on a command line.
set -euo pipefail
cd "$(dirname "$0")/.."

memfs=".venv/bin/memfs"
demo_dir="${MEMFS_DEMO_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/memfs-demo}"
mount_path="${MEMFS_DEMO_MOUNT:-/mnt/memory/demo}"
port="${MEMFS_DEMO_PORT:-8377}"
token_file="$demo_dir/token"
env_file="$demo_dir/env"
export MEMFS_RUNTIME_DIR="$demo_dir/run"

mkdir -p "$demo_dir"
chmod 700 "$demo_dir"
if [[ ! -s "$token_file" ]]; then
    (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(32))' >"$token_file")
fi
chmod 600 "$token_file"

server_pid=""
# shellcheck disable=SC2317  # run by the trap below
stop_server() {
    rm -f "$env_file"
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
        echo "demo: server stopped (its data stays in $demo_dir/store.sqlite3)"
    fi
}
trap stop_server EXIT

# Starts memfs serve on port $1 and sets url, or returns 1 once it has exited.
start_server() {
    : >"$demo_dir/serve.out"
    # In its own session, so Ctrl-C reaches only the mount: the server must stay
    # up for the mount's final sync, and is stopped after it.
    env -u MEMFS_SERVE_TOKEN setsid "$memfs" serve --port "$1" --token-file "$token_file" \
        --db "$demo_dir/store.sqlite3" --demo-store demo \
        >"$demo_dir/serve.out" 2>"$demo_dir/serve.log" &
    server_pid=$!
    url=""
    for _ in $(seq 200); do
        url="$(head -n1 "$demo_dir/serve.out" 2>/dev/null || true)"
        [[ -n "$url" ]] && return 0
        kill -0 "$server_pid" 2>/dev/null || return 1
        sleep 0.1
    done
    echo "demo: memfs serve printed no URL within 20 s; its log is $demo_dir/serve.log" >&2
    exit 1
}

# Starts memfs serve on $port, or on a free port when $port is taken (and says so).
start_or_fall_back() {
    start_server "$port" && return 0
    if [[ "$port" != 0 ]] && grep -q "^memfs: cannot listen on " "$demo_dir/serve.log"; then
        start_server 0 || return 1
        echo "demo: port $port is taken, so memfs serve listens on $url instead (source $env_file in another shell for it)"
        return 0
    fi
    return 1
}

# The demo's data is the demo's own: a store file an older memfs made, which
# this one refuses, is moved aside with the demo's cache, and the demo starts
# afresh (saying where the old data went).
set_aside_older_data() {
    local aside name
    aside="$demo_dir/older-$(date +%Y%m%dT%H%M%S)"
    mkdir -p "$aside"
    for name in store.sqlite3 store.sqlite3-wal store.sqlite3-shm cache; do
        if [[ -e "$demo_dir/$name" ]]; then mv "$demo_dir/$name" "$aside/"; fi
    done
    echo "demo: the demo's data was made by an older memfs; it is now in $aside, and the demo starts afresh"
}

if ! start_or_fall_back && grep -q "an older layout" "$demo_dir/serve.log"; then
    set_aside_older_data
    start_or_fall_back || true
fi
if [[ -z "$url" ]]; then
    echo "demo: memfs serve exited before it listened; its log:" >&2
    cat "$demo_dir/serve.log" >&2
    exit 1
fi

export MEMFS_API_URL="$url"
store_id="$(sed -n 's/^memfs serve: demo store demo: \(memstore_[A-Za-z0-9_]*\).*/\1/p' "$demo_dir/serve.log" | head -n1)"
if [[ -z "$store_id" ]]; then
    store_id="$(MEMFS_TOKEN="$(cat "$token_file")" "$memfs" store list | awk -F'\t' '$2 == "demo" { print $1; exit }' || true)"
fi
if [[ -z "$store_id" ]]; then
    echo "demo: no store named demo on $url; the server's log is $demo_dir/serve.log" >&2
    exit 1
fi

{
    echo "# Written by make demo (scripts/demo.sh) for the run now going; in another shell: source $env_file"
    echo "export MEMFS_RUNTIME_DIR=$(printf %q "$MEMFS_RUNTIME_DIR")"
    echo "export MEMFS_API_URL=$(printf %q "$url")"
    echo "export MEMFS_TOKEN=\"\$(cat $(printf %q "$token_file"))\""
    echo "export MEMFS_DEMO_STORE=$(printf %q "$store_id")"
} >"$env_file"
echo "demo: memfs serve at $url, demo store $store_id, data in $demo_dir"
if ! "$memfs" mount --help >/dev/null 2>&1; then
    cat <<MSG
demo: 'memfs mount' is not available in this build yet, so only the server runs.
Try in another shell:
  cd $PWD
  source $env_file
  $memfs store ls $store_id
  $memfs store cat $store_id /README.md
  echo hi | $memfs store put $store_id /notes.md -
  $memfs store log $store_id
Press Ctrl-C to stop the server.
MSG
    wait "$server_pid" || true
    exit 0
fi

cat <<MSG
demo: mounting $store_id at $mount_path (Ctrl-C unmounts after a final sync).
Try in another shell:
  source $env_file   # the demo's runtime folder, URL, token and store id
  ls -la $mount_path
  cat $mount_path/README.md
  echo hi > $mount_path/notes.md
  $PWD/$memfs sync                  # push it now instead of within 15 s
  $PWD/$memfs status
  $PWD/$memfs store cat \$MEMFS_DEMO_STORE /notes.md
  $PWD/$memfs store log \$MEMFS_DEMO_STORE
MSG
# The mount's stderr is also kept in mount.err (by a tee that Ctrl-C leaves
# running, for the final sync's lines), to tell a cache an older memfs made,
# which this one refuses: it is moved aside, and the mount starts afresh.
mount_demo() {
    "$memfs" mount --api-url "$url" --token-file "$token_file" \
        --store "$store_id=$mount_path" --cache-dir "$demo_dir/cache" \
        2> >(trap '' INT; tee "$demo_dir/mount.err" >&2)
}
status=0
mount_demo || status=$?
if [[ "$status" != 0 ]] && grep -q "was made by a development version of memfs" "$demo_dir/mount.err"; then
    aside="$demo_dir/older-$(date +%Y%m%dT%H%M%S)"
    mkdir -p "$aside"
    mv "$demo_dir/cache" "$aside/"
    echo "demo: the demo's cache was made by an older memfs; it is now in $aside, and the mount starts afresh"
    status=0
    mount_demo || status=$?
fi
exit "$status"
