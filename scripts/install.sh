#!/usr/bin/env bash
# Sets up everything memfs needs on a Debian 12 machine, and does nothing that
# is already done: system packages (as root, only when missing), the .venv
# virtualenv, and an editable install with the given extras (default: test;
# `none` for memfs alone, what `make demo` runs on, as docker/Dockerfile
# installs it). The test extras add what only the tests use: their Python
# tools, vim, autotools for pjdfstest and the TypeScript recipe's npm packages.
# Re-installs the package only when pyproject.toml changed since the last run
# (for `none`, an install with any extras counts); compiles memfs's bytecode
# each time (quick when nothing changed).
#
# `scripts/install.sh EXTRAS --dry-run` prints what it would install, one
# `install: would ...` line each, and changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-test}"
dry_run=""
[[ "${2:-}" != --dry-run ]] || dry_run=1
# gcc and libc6-dev build pyfuse3 where no compiler is installed (a slim image).
system_packages=(fuse3 libfuse3-dev pkg-config gcc libc6-dev)
# vim: tests/mount/test_readonly.py saves with it into a read-only store.
# The tests build pjdfstest (scripts/pjdfstest.sh) from its source tarball,
# and check the shell scripts with shellcheck (tests/unit/test_deploy_files.py).
[[ ",$extras," != *,test,* ]] || system_packages+=(vim autoconf automake make shellcheck)
python="${PYTHON:-python3}"
target=".[$extras]"
[[ "$extras" != none ]] || target=.
# The TypeScript worker recipe of docs/worker.md is type-checked and run by
# tests/mount/test_worker_recipes.py against the SDK it names: with the test
# extras and npm on the machine, those packages go into build/node_modules
# (again when the SDK there is another version than this one; `make test`
# points MEMFS_TEST_NODE_MODULES there). Without npm, or when the registry
# cannot be reached, those tests say why they are skipped.
recipe_sdk=1.17.0
recipe_packages=()
[[ ",$extras," != *,test,* ]] || recipe_packages=("@anthropic-ai/sdk@$recipe_sdk" typescript@5 @types/node@22)

if [[ -n "$dry_run" ]]; then
    echo "install: would apt-get install (when missing) ${system_packages[*]}"
    echo "install: would pip install -e '$target'"
    ((${#recipe_packages[@]} == 0)) || echo "install: would npm install ${recipe_packages[*]}"
    exit 0
fi

missing=()
for pkg in "${system_packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        echo "install: apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "install: missing system packages ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
fi

if [[ ! -x .venv/bin/python ]]; then
    echo "install: creating .venv with $("$python" --version)"
    "$python" -m venv .venv
fi

stamp=".venv/.memfs-installed-${extras//,/-}"
installed=""
for done_stamp in .venv/.memfs-installed-*; do
    # Any extras hold memfs itself: what `none` asks for.
    if [[ ("$done_stamp" == "$stamp" || "$extras" == none) && ! pyproject.toml -nt "$done_stamp" ]]; then
        installed=1
    fi
done
if [[ -z "$installed" ]]; then
    # The distribution was called `memfs` before it became `memfs-stores`: an
    # older .venv's editable `memfs` (and its egg-info here) would stay beside it.
    if .venv/bin/python -m pip show -q memfs >/dev/null 2>&1; then
        echo "install: pip uninstall memfs (the distribution is memfs-stores now)"
        .venv/bin/python -m pip uninstall -q -y memfs
    fi
    rm -rf memfs.egg-info
    echo "install: pip install -e '$target'"
    .venv/bin/python -m pip install -q -e "$target"
    touch "$stamp"
fi

# An editable install leaves memfs without bytecode, and PYTHONDONTWRITEBYTECODE
# (set in docker/Dockerfile and many CI images) keeps Python from writing it:
# every memfs process would compile memfs anew, ~30 ms for the command line and
# ~60 ms for each store process. compileall writes it anyway; only the files
# changed since the last run are compiled again (a stale .pyc is never used).
.venv/bin/python -m compileall -q memfs >/dev/null || echo "install: memfs's bytecode could not be written; it runs all the same" >&2

installed_sdk=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' build/node_modules/@anthropic-ai/sdk/package.json 2>/dev/null || true)
if ((${#recipe_packages[@]})) && command -v npm >/dev/null 2>&1 \
    && [[ "$installed_sdk" != "$recipe_sdk" || ! -d build/node_modules/@types/node ]]; then
    echo "install: npm install ${recipe_packages[*]} (the TypeScript recipe's test)"
    mkdir -p build
    npm install --prefix build --no-audit --no-fund --no-save --silent "${recipe_packages[@]}" >/dev/null 2>&1 \
        || echo "install: npm could not install the TypeScript recipe's packages; its test is skipped" >&2
fi
