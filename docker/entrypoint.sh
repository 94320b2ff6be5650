#!/usr/bin/env bash
# Mounts the session's Memory Stores, then runs the agent's command.
#
# Which stores: the resources array in $MEMFS_RESOURCES (default
# /etc/memfs/resources.json) when that file exists, else the --store specs in
# $MEMFS_STORES (space-separated, e.g. "memstore_A memstore_B:read_only").
# Credentials: whatever `memfs mount` reads (docs/guide.md, Configuration):
# $MEMFS_WORK_ITEM_SECRET or $ANTHROPIC_WORK_SECRET, $MEMFS_TOKEN,
# $ANTHROPIC_API_KEY or $ANTHROPIC_AUTH_TOKEN; the URL from $MEMFS_API_URL,
# $ANTHROPIC_BASE_URL or the secret.
# A failed mount stops the container unless MEMFS_OPTIONAL=1.
# On SIGTERM/SIGINT the agent is stopped first, then `memfs unmount --all`
# runs the final sync (give `docker stop -t 45` so its 30 s fit).
#
# This shell lives as long as the agent, and /proc/<pid>/environ shows the
# environment a process was started with, whatever `unset` does later, to
# anyone running as the same user: the agent. So the first run of this script
# only moves the credentials into 0600 files in a fresh 0700 folder and
# re-executes itself without any of them. The second run hands them to
# `memfs mount --daemon` alone (which exits once the stores are mounted; the
# store processes it starts never see them), then removes the folder.
set -uo pipefail

credential_vars=(MEMFS_TOKEN MEMFS_WORK_ITEM_SECRET ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN ANTHROPIC_WORK_SECRET)
# Every variable that may hold a secret: none reaches the agent.
secret_vars=("${credential_vars[@]}" MEMFS_SERVE_TOKEN)

if [[ -z "${MEMFS_ENTRYPOINT_CREDENTIALS:-}" ]]; then
    without=()
    for var in "${secret_vars[@]}"; do
        without+=(-u "$var")
    done
    umask_was=$(umask)
    umask 077
    if credentials=$(mktemp -d "${TMPDIR:-/tmp}/memfs-entrypoint.XXXXXX"); then
        for var in "${credential_vars[@]}"; do
            # printf is a builtin: the value is on no command line.
            [[ -z "${!var:-}" ]] || printf '%s' "${!var}" >"$credentials/$var"
        done
        umask "$umask_was"
        exec env "${without[@]}" MEMFS_ENTRYPOINT_CREDENTIALS="$credentials" "$BASH" "$0" "$@"
    fi
    umask "$umask_was"
    echo "memfs-entrypoint: cannot make a private folder for the credentials in ${TMPDIR:-/tmp}" >&2
    [[ "${MEMFS_OPTIONAL:-0}" == 1 ]] || exit 1
    echo "memfs-entrypoint: MEMFS_OPTIONAL=1, starting without memory" >&2
    exec env "${without[@]}" "$@"
fi

credentials=$MEMFS_ENTRYPOINT_CREDENTIALS
unset MEMFS_ENTRYPOINT_CREDENTIALS
trap 'rm -rf "$credentials"' EXIT
trap 'exit 143' TERM INT HUP

# `memfs mount --daemon` with the credentials in its environment only: this
# subshell's, which it replaces.
mount_stores() {
    (
        for file in "$credentials"/*; do
            [[ -f "$file" ]] && export "${file##*/}=$(<"$file")"
        done
        exec memfs mount --daemon "$@"
    )
}

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
    elif mount_stores "${mount_args[@]}"; then
        mounted=1
    else
        echo "memfs-entrypoint: the stores could not be mounted" >&2
    fi
else
    echo "memfs-entrypoint: no $resources and no MEMFS_STORES: no store is mounted" >&2
fi
rm -rf "$credentials"
if ((${#mount_args[@]} && !mounted)); then
    [[ "${MEMFS_OPTIONAL:-0}" == 1 ]] || exit 1
    echo "memfs-entrypoint: MEMFS_OPTIONAL=1, starting without memory" >&2
fi

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
