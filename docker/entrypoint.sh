#!/usr/bin/env bash
# Mounts the session's Memory Stores, then runs the agent's command.
#
# Which stores: the resources array in $MEMFS_RESOURCES (default
# /etc/memfs/resources.json) when that file exists, else the --store specs in
# $MEMFS_STORES (space-separated, e.g. "memstore_A memstore_B:read_only").
# Credentials: $MEMFS_WORK_ITEM_SECRET, or $MEMFS_TOKEN with $MEMFS_API_URL
# (memfs reads them from the environment; they never go on a command line).
# A failed mount stops the container unless MEMFS_OPTIONAL=1.
# On SIGTERM/SIGINT the agent is stopped first, then `memfs unmount --all`
# runs the final sync (give `docker stop -t 45` so its 30 s fit).
set -uo pipefail

resources="${MEMFS_RESOURCES:-/etc/memfs/resources.json}"
mount_args=()
if [[ -f "$resources" ]]; then
    mount_args+=(--resources "$resources")
elif [[ -n "${MEMFS_STORES:-}" ]]; then
    for spec in $MEMFS_STORES; do
        mount_args+=(--store "$spec")
    done
fi

mounted=0
if ((${#mount_args[@]})); then
    if [[ ! -e /dev/fuse ]]; then
        echo "memfs-entrypoint: /dev/fuse is missing; run the container with --device /dev/fuse --cap-add SYS_ADMIN (or --privileged)" >&2
        [[ "${MEMFS_OPTIONAL:-0}" == 1 ]] || exit 1
    elif memfs mount --daemon "${mount_args[@]}"; then
        mounted=1
    else
        echo "memfs-entrypoint: the stores could not be mounted" >&2
        [[ "${MEMFS_OPTIONAL:-0}" == 1 ]] || exit 1
        echo "memfs-entrypoint: MEMFS_OPTIONAL=1, starting without memory" >&2
    fi
else
    echo "memfs-entrypoint: no $resources and no MEMFS_STORES: no store is mounted" >&2
fi

# The agent must not inherit the credentials it has no use for.
unset MEMFS_TOKEN MEMFS_WORK_ITEM_SECRET

if ((!mounted)); then
    exec "$@"
fi

"$@" &
agent=$!
forward() { kill -TERM "$agent" 2>/dev/null; }
trap forward TERM INT HUP
status=0
wait "$agent" || status=$?
# `wait` returns early when a trapped signal arrives: wait for the agent itself.
while kill -0 "$agent" 2>/dev/null; do
    wait "$agent" || status=$?
done
memfs unmount --all || echo "memfs-entrypoint: some changes were not uploaded; they stay in /var/cache/memfs for the next mount" >&2
exit "$status"
