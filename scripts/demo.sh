#!/usr/bin/env bash
# `make demo`: memfs for real on this machine. Starts a local `memfs serve`
# with a seeded demo store and mounts that store at /mnt/memory/demo in the
# foreground; Ctrl-C unmounts (after a final sync) and stops the server.
#
# The token is generated once into a 0600 file and reaches the server and the
# mount through --token-file (the `memfs store` hints through MEMFS_TOKEN): it
# never appears on a command line.
set -euo pipefail
cd "$(dirname "$0")/.."

memfs=".venv/bin/memfs"
demo_dir="${MEMFS_DEMO_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/memfs-demo}"
mount_path="${MEMFS_DEMO_MOUNT:-/mnt/memory/demo}"
token_file="$demo_dir/token"

mkdir -p "$demo_dir"
chmod 700 "$demo_dir"
if [[ ! -s "$token_file" ]]; then
    (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(32))' >"$token_file")
fi
chmod 600 "$token_file"

server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
        echo "demo: server stopped (its data stays in $demo_dir/store.sqlite3)"
    fi
}
trap stop_server EXIT

: >"$demo_dir/serve.out"
# In its own session, so Ctrl-C reaches only the mount: the server must stay
# up for the mount's final sync, and is stopped after it.
env -u MEMFS_SERVE_TOKEN setsid "$memfs" serve --port 0 --token-file "$token_file" \
    --db "$demo_dir/store.sqlite3" --demo-store demo \
    >"$demo_dir/serve.out" 2>"$demo_dir/serve.log" &
server_pid=$!

url=""
for _ in $(seq 200); do
    url="$(head -n1 "$demo_dir/serve.out" 2>/dev/null || true)"
    [[ -n "$url" ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "demo: memfs serve exited before it listened; its log:" >&2
        cat "$demo_dir/serve.log" >&2
        exit 1
    fi
    sleep 0.1
done
if [[ -z "$url" ]]; then
    echo "demo: memfs serve printed no URL within 20 s; its log is $demo_dir/serve.log" >&2
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

echo "demo: memfs serve at $url, demo store $store_id, data in $demo_dir"
if ! "$memfs" mount --help >/dev/null 2>&1; then
    cat <<MSG
demo: 'memfs mount' is not available in this build yet, so only the server runs.
Try in another shell:
  cd $PWD
  export MEMFS_API_URL=$url MEMFS_TOKEN="\$(cat $token_file)"
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
  ls -la $mount_path
  cat $mount_path/README.md
  echo hi > $mount_path/notes.md
  $PWD/$memfs sync                  # push it now instead of within 15 s
  export MEMFS_API_URL=$url MEMFS_TOKEN="\$(cat $token_file)"
  $PWD/$memfs store cat $store_id /notes.md
  $PWD/$memfs store log $store_id
MSG
status=0
"$memfs" mount --api-url "$url" --token-file "$token_file" \
    --store "$store_id=$mount_path" --cache-dir "$demo_dir/cache" || status=$?
exit "$status"
