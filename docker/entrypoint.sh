#!/usr/bin/env bash
# Mounts the session's Memory Stores and runs the agent's command with
# `memfs run`: the stores are mounted before the command starts, the final
# sync runs when it ends, and the container exits with the command's status
# (75 when the command succeeded but the final sync left files behind).
#
# Which stores: the resources array in $MEMFS_RESOURCES (default
# /etc/memfs/resources.json) when that file exists, else the --store specs in
# $MEMFS_STORES (space-separated, e.g. "memstore_A memstore_B:read_only").
# Credentials: whatever `memfs mount` reads (docs/guide.md, Configuration):
# $MEMFS_TOKEN, $MEMFS_WORK_ITEM_SECRET or $ANTHROPIC_WORK_SECRET,
# $ANTHROPIC_API_KEY or $ANTHROPIC_AUTH_TOKEN; the URL from $MEMFS_API_URL,
# $ANTHROPIC_BASE_URL or the secret.
# The agent: the command runs as $MEMFS_AGENT_USER (the image sets `agent`),
# and the stores are mounted with --allow-other and that user's --uid and
# --gid so that it can write them; unset, empty or root: as the caller.
# A failed mount stops the container (status 1) unless MEMFS_OPTIONAL=1.
# On SIGTERM/SIGINT (docker stop) `memfs run` stops the agent first, then
# runs the final sync (give `docker stop -t 45` so its 30 s fit).
#
# `memfs run` lives as long as the agent, and /proc/<pid>/environ shows the
# environment a process was started with, whatever `unset` does later. So the
# first run of this script only moves the credentials into 0600 files in a
# fresh 0700 folder and re-executes itself without any of them. The second
# run hands the one `memfs mount` would use to `memfs run` on a pipe
# (--token-file or --secret-file /dev/fd/3: read once, then empty), removes
# the folder, and becomes `memfs run`. Its third run, as `memfs run`'s
# command, drops to the agent's user and becomes the agent's command.
set -uo pipefail

# In `memfs mount`'s order: a work item secret before the host's own keys,
# which memfs does not read when a secret is given.
credential_vars=(MEMFS_TOKEN MEMFS_WORK_ITEM_SECRET ANTHROPIC_WORK_SECRET ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN)
# Every variable that may hold a secret: none reaches the agent.
secret_vars=("${credential_vars[@]}" MEMFS_SERVE_TOKEN)

say() { echo "memfs-entrypoint: $*" >&2; }

# The agent's uid, gid, home and name, when the command is to run as another user.
agent_uid='' agent_gid='' agent_home='' agent_name=''
agent_identity() {
    local user="${MEMFS_AGENT_USER:-}"
    [[ -n "$user" && "$(id -u)" -eq 0 ]] || return 0
    local entry
    if ! entry=$(getent passwd "$user"); then
        say "MEMFS_AGENT_USER names no user of this image: $user"
        exit 1
    fi
    IFS=: read -r agent_name _ agent_uid agent_gid _ agent_home _ <<<"$entry"
    if ((agent_uid == 0)); then
        agent_uid='' agent_gid=''
    fi
}

# Become the agent's command, as the agent's user when there is one.
start_agent() {
    if [[ -n "$agent_uid" ]]; then
        exec setpriv --reuid="$agent_uid" --regid="$agent_gid" --init-groups \
            env HOME="$agent_home" USER="$agent_name" LOGNAME="$agent_name" "$@"
    fi
    exec "$@"
}

# Third run: `memfs run`'s command.
if [[ "${MEMFS_ENTRYPOINT_STAGE:-}" == agent ]]; then
    unset MEMFS_ENTRYPOINT_STAGE
    if [[ -n "${MEMFS_ENTRYPOINT_STARTED:-}" ]]; then
        : >"$MEMFS_ENTRYPOINT_STARTED"
        unset MEMFS_ENTRYPOINT_STARTED
    fi
    agent_identity
    start_agent "$@"
fi

# First run: the credentials out of the environment.
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
    say "cannot make a private folder for the credentials in ${TMPDIR:-/tmp}"
    [[ "${MEMFS_OPTIONAL:-0}" == 1 ]] || exit 1
    say "MEMFS_OPTIONAL=1, starting without memory"
    agent_identity
    for var in "${secret_vars[@]}"; do
        unset "$var"
    done
    start_agent "$@"
fi

# Second run.
credentials=$MEMFS_ENTRYPOINT_CREDENTIALS
unset MEMFS_ENTRYPOINT_CREDENTIALS
trap 'rm -rf "$credentials"' EXIT
agent_identity

# The credential memfs would pick from the environment (the same order),
# on fd 3: a pipe that is empty once memfs has read it.
credential_args=()
for var in "${credential_vars[@]}"; do
    file="$credentials/$var"
    [[ -f "$file" ]] || continue
    case "$var" in
        *_SECRET) flag=--secret-file ;;
        *) flag=--token-file ;;
    esac
    exec 3<<<"$(<"$file")"
    credential_args=("$flag" /dev/fd/3)
    break
done
rm -rf "$credentials"

without_memory() {
    [[ "${MEMFS_OPTIONAL:-0}" == 1 ]] || exit 1
    say "MEMFS_OPTIONAL=1, starting without memory"
    exec 3<&-
    [[ -z "${started:-}" ]] || rm -rf "$started"
    trap - INT QUIT TERM HUP EXIT
    start_agent "$@"
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
if ((!${#mount_args[@]})); then
    say "no $resources and no MEMFS_STORES: no store is mounted"
    exec 3<&-
    start_agent "$@"
fi
if [[ ! -e /dev/fuse ]]; then
    say "/dev/fuse is missing; run the container with --device /dev/fuse --cap-add SYS_ADMIN (or --privileged)"
    without_memory "$@"
fi
if [[ -n "$agent_uid" ]]; then
    mount_args+=(--allow-other --uid "$agent_uid" --gid "$agent_gid")
fi

export MEMFS_ENTRYPOINT_STAGE=agent
if [[ "${MEMFS_OPTIONAL:-0}" != 1 ]]; then
    trap - EXIT
    exec memfs run "${mount_args[@]}" "${credential_args[@]}" -- "$BASH" "$0" "$@"
fi

# MEMFS_OPTIONAL=1: stay, to start the agent without memory if `memfs run`
# fails before its command starts (the third run leaves a mark). A terminal's
# Ctrl-C reaches `memfs run` and the agent by their process group; a
# SIGTERM or SIGHUP sent to this shell is passed to `memfs run`.
started=$(mktemp -d "${TMPDIR:-/tmp}/memfs-entrypoint.XXXXXX") || exit 1
trap 'rm -rf "$started"' EXIT
trap '' INT QUIT
MEMFS_ENTRYPOINT_STARTED="$started/started" \
    memfs run "${mount_args[@]}" "${credential_args[@]}" -- "$BASH" "$0" "$@" <&0 &
memfs=$!
exec 3<&-
trap 'kill -TERM "$memfs" 2>/dev/null' TERM
trap 'kill -HUP "$memfs" 2>/dev/null' HUP
status=0
wait "$memfs" || status=$?
# `wait` returns early when a trapped signal arrives: wait for memfs itself.
while kill -0 "$memfs" 2>/dev/null; do
    wait "$memfs" || status=$?
done
unset MEMFS_ENTRYPOINT_STAGE
if [[ -e "$started/started" ]]; then
    exit "$status"
fi
say "the stores could not be mounted"
without_memory "$@"
