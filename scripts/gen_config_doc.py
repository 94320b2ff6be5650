"""Write docs/configuration.md from memfs's argument parser, so the reference
cannot drift from the code: every flag of every command, and for the
commands that mount, each setting's variable, config file key and default
(`memfs.cli._options`), the credential sources in their order
(`memfs.supervisor`), and the other variables.

    python scripts/gen_config_doc.py          # rewrite docs/configuration.md
    python scripts/gen_config_doc.py --check  # exit 1 when it differs

tests/unit/test_config_doc.py fails when the committed file is not what this
script writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memfs.cli import build_parser  # noqa: E402
from memfs.cli._options import (  # noqa: E402
    CONFIG_OPTION,
    LOG_OPTIONS,
    OTHER_VARIABLES,
    SECRET_KEYS,
    Option,
)
from memfs.supervisor import ENV_SOURCES, URL_ENV, WORKER_OWN_ENV  # noqa: E402

DOC = ROOT / "docs" / "configuration.md"

HOLDS = {
    "token": "a token: an API key (`x-api-key`) when it starts with `sk-ant-api`, else `Authorization: Bearer`",
    "secret": "a work item secret: base64 (URL-safe or standard, padding optional) of "
    '`{"sessions_token", "api_base_url"?}`; its sessions token travels as `Authorization: Bearer`',
    "x-api-key": "an API key, always sent as `x-api-key`",
    "bearer": "a token, always sent as `Authorization: Bearer`",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flag(action: argparse.Action) -> str:
    name = " ".join(sorted(action.option_strings, key=len, reverse=True)[:1])
    if action.nargs == 0:
        return name
    metavar = action.metavar or action.dest.upper()
    return f"{name} {metavar}"


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def _help(action: argparse.Action) -> str:
    text = (action.help or "").replace("%(default)s", str(action.default))
    option: Option | None = getattr(action, "memfs_option", None)
    if option is not None:
        text = option.help
    return _cell(text)


def _settings_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = [
        "| flag | variable | config file key | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for action in _visible(parser):
        option: Option | None = getattr(action, "memfs_option", None)
        if option is None:
            continue
        key = "(not in the file)" if option is CONFIG_OPTION else _code(option.name)
        rows.append(
            f"| {_code(_flag(action))} | {_code(option.env)} | {key} | "
            f"{_cell(option.default_text())} | {_help(action)} |"
        )
    return rows


def _flags_table(
    parser: argparse.ArgumentParser, parent: argparse.ArgumentParser | None = None
) -> list[str]:
    """The flags and arguments of `parser`, but those it shares with `parent`."""
    shared = {s for a in _visible(parent) for s in a.option_strings} if parent else set()
    rows = ["| flag or argument | meaning |", "| --- | --- |"]
    for action in _visible(parser):
        if getattr(action, "memfs_option", None) in LOG_OPTIONS:
            continue
        if shared & set(action.option_strings):
            continue
        name = _flag(action) if action.option_strings else (action.metavar or action.dest)
        rows.append(f"| {_code(str(name))} | {_help(action)} |")
    return rows


def render() -> str:
    parser = build_parser()
    commands = _commands(parser)
    mounting = [n for n, p in commands.items() if p.get_default("_settings")]
    names = " and ".join(f"`memfs {n}`" for n in mounting)
    out = [
        "# Configuration reference",
        "",
        "<!-- Written by scripts/gen_config_doc.py from memfs's argument parser; do not edit:",
        "     run `python scripts/gen_config_doc.py` after changing a flag. -->",
        "",
        f"Every setting of {names} is a flag, a `MEMFS_<FLAG>` variable and a key",
        "of the config file. This page lists them all, then the credentials, the other",
        "variables, and the flags of every other command. What a message in the log",
        "means is in [troubleshooting.md](troubleshooting.md).",
        "",
        "## Where a setting comes from",
        "",
        "The first source that sets it wins:",
        "",
        "| order | source | example | notes |",
        "| --- | --- | --- | --- |",
        "| 1 | the flag | `--sync-interval 30` | `-v` / `-vv` count as `--log-level INFO` / `DEBUG`, below an explicit `--log-level` |",
        "| 2 | its variable, `MEMFS_` and the flag's name in capitals with `_` | `MEMFS_SYNC_INTERVAL=30` | a variable set to blanks counts as unset; switches take `1`/`0`, `true`/`false`, `yes`/`no`; `MEMFS_STORE` holds specs separated by spaces |",
        "| 3 | the config file | `sync-interval = 30` | for the commands that mount; `store` is an array |",
        "| 4 | the default | `15` | the table below |",
        "",
        "- Every value present is checked, even one a stronger source overrides: a bad value",
        "  anywhere is refused before anything mounts, with one sentence that names its",
        "  source and exit status 2: `memfs: MEMFS_SYNC_INTERVAL=abc (environment) is not a",
        '  number of seconds`, `memfs: sync-interval = "abc" in /root/.config/memfs/config.toml',
        "  is not a number of seconds`, `memfs: argument --sync-interval: 'abc' is not a",
        "  number of seconds (see 'memfs mount --help')`.",
        "- Which stores to mount is one setting: `store` and `resources` come together from",
        "  the strongest source that gives either (a `--store` flag ignores a `resources` key).",
        "  The same holds for `token-file` and `secret-file`, and the config file's ones rank",
        "  after every credential variable ([Credentials](#credentials)).",
        "- A switch given in the config file or a variable cannot be turned off by a flag;",
        "  set its variable to `0` (`MEMFS_DAEMON=0 memfs mount ...`).",
        "",
        "## The config file",
        "",
        f"`--config FILE` (or `{CONFIG_OPTION.env}`), else `$XDG_CONFIG_HOME/memfs/config.toml`,",
        "that is `~/.config/memfs/config.toml`; read with Python's `tomllib`. A missing",
        "default file is no error; a missing named one is. Keys are the flags' names",
        "without the leading dashes, spelled with dashes as the flags are: one name for",
        "the flag, the key and this page (`sync_interval` is refused, with a hint). Any",
        "key memfs does not know is refused, naming the key and the file.",
        "",
        "```toml",
        "# ~/.config/memfs/config.toml",
        'store = ["memstore_01ABC", "memstore_02DEF:read_only=/mnt/memory/docs"]',
        'api-url = "https://api.anthropic.com"',
        'secret-file = "~/.config/memfs/work-item-secret"   # a 0600 file',
        "sync-interval = 30",
        'sync-deletions = "log_only"',
        'log-format = "json"',
        "```",
        "",
        "- No secret goes in the file: "
        + ", ".join(f"`{k}`" for k in SECRET_KEYS)
        + " are refused by name.",
        "  Name a file holding the token with `token-file` (or the work item secret with",
        "  `secret-file`) and make that file 0600.",
        "- The file itself may be read by others (0644 is fine), since it holds no secret,",
        "  but it must not be writable by every user nor belong to another user than you or",
        "  root: whoever can change it can send your token to another `api-url`.",
        "- Paths in the file may start with `~`; a relative path is relative to the file's",
        "  folder. Mount paths inside `store` specs must be absolute, as on the command line.",
        "",
        f"## Settings of {names}",
        "",
        *_settings_table(commands[mounting[0]]),
        "",
        "`--log-level` and `--log-format` (and `-v`) are taken by every command, before or after",
        "its name, with their variables; the config file sets them for the commands that mount.",
        "The store processes get the level and the format from the command that starts them.",
        "",
        "## Credentials",
        "",
        "The token and the API's URL: the first source found, in this order, is used.",
        "Tokens never go on the command line (`--token` is refused: `ps` shows it to every",
        "user), never in the config file, and never reach a store process's command line",
        "or environment.",
        "",
        "When a work item secret is given, by any source (`--secret-file`, `MEMFS_SECRET_FILE`,",
        "the `secret` of `--work-item`, `MEMFS_WORK_ITEM_SECRET`, `ANTHROPIC_WORK_SECRET`, or",
        "`secret-file` in the config file),",
        " and ".join(f"`{n}`" for n in WORKER_OWN_ENV) + " are not read at all: on a",
        "worker host they hold the worker's own credential (its environment key), and the",
        "secret's sessions token is the credential of every memory request, so that the",
        "memories a session writes are recorded as that session's (`session_actor`).",
        "`--token-file` and `MEMFS_TOKEN`, given to memfs itself, keep their ranks in the table.",
        "",
        "| order | source | what it holds |",
        "| --- | --- | --- |",
        f"| token 1 | `--token-file FILE` | {HOLDS['token']} |",
        "| token 2 | `--secret-file FILE` | " + HOLDS["secret"] + " |",
        "| token 3 | `MEMFS_TOKEN_FILE` | as `--token-file` |",
        "| token 4 | `MEMFS_SECRET_FILE` | as `--secret-file` |",
        "| token 5 | the `secret` of the work item of `--work-item FILE` (or `MEMFS_WORK_ITEM`, "
        "`work-item` in the config file) | as `--secret-file` |",
    ]
    n = 6
    for name, kind in ENV_SOURCES:
        holds = HOLDS[kind]
        if name in WORKER_OWN_ENV:
            holds += "; not read when a work item secret is given by any source"
        out.append(f"| token {n} | `{name}` | {holds} |")
        n += 1
    out += [
        f"| token {n} | `token-file` in the config file | as `--token-file` |",
        f"| token {n + 1} | `secret-file` in the config file | as `--secret-file` |",
        "| URL 1 | `--api-url URL` | the API's base URL |",
    ]
    for i, name in enumerate(URL_ENV, start=2):
        out.append(f"| URL {i} | `{name}` | the API's base URL |")
    i = len(URL_ENV) + 2
    out += [
        f"| URL {i} | `api-url` in the config file | the API's base URL |",
        f"| URL {i + 1} | the secret's `api_base_url` | only from the secret whose token is used |",
        f"| URL {i + 2} | `https://api.anthropic.com` | the default (`memfs store`: `http://127.0.0.1:8377`) |",
        "",
        "## Other variables",
        "",
        "| variable | used by | meaning |",
        "| --- | --- | --- |",
        *(f"| `{name}` | {used} | {_cell(meaning)} |" for name, used, meaning in OTHER_VARIABLES),
        "",
        "## Every command's flags",
        "",
        "Every command also takes `-v`/`-vv`, `--log-level` and `--log-format` (above).",
        "",
    ]
    for name, sub in commands.items():
        if name in mounting:
            continue
        out += [f"### memfs {name}", "", _cell(sub.description or ""), "", *_flags_table(sub), ""]
        out += _actions(f"memfs {name}", sub, sub, level=4)
    return "\n".join(out).rstrip("\n") + "\n"


def _actions(
    command: str, parser: argparse.ArgumentParser, top: argparse.ArgumentParser, level: int
) -> list[str]:
    """A section for each action of `parser` (and for theirs, one level
    deeper), listing the flags it adds to those of `top`."""
    out: list[str] = []
    for action_name, action_parser in _commands(parser).items():
        table = _flags_table(action_parser, top)
        heading = "#" * level
        out += [f"{heading} {command} {action_name}", "", _cell(action_parser.description or "")]
        if len(table) > 2:
            out += ["", f"The flags of `{top.prog}` above, and:", "", *table, ""]
        else:
            out += ["", f"The flags of `{top.prog}` above.", ""]
        out += _actions(f"{command} {action_name}", action_parser, top, level + 1)
    return out


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if DOC.read_text() != text:
            sys.stderr.write(f"{DOC} differs from what {__file__} writes; run it\n")
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
