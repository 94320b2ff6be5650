"""Where each setting of a mount comes from: the flag, else `MEMFS_<FLAG>`,
else the config file, else the default, as the settings `settle` makes
(`MountSettings` for the commands that mount); and the one sentence (exit 2)
for a bad value from any of them. Parsing only: nothing is mounted here (the
mount tier runs the same through real mounts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memfs import ConfigError
from memfs.cli import build_parser, main
from memfs.cli._config import mount_credentials, settle
from memfs.cli._options import MOUNT_OPTIONS

# name -> (flag argv, variable text, TOML value) and the values each gives.
SAMPLES: dict[str, tuple[list[str], str, object, tuple[object, object, object]]] = {
    "store": (["--store", "memstore_f"], "memstore_e memstore_e2:read_only", ["memstore_t"],
              (("memstore_f",), ("memstore_e", "memstore_e2:read_only"), ("memstore_t",))),
    "metrics-addr": (["--metrics-addr", "127.0.0.1:9001"], "127.0.0.1:9002", "127.0.0.1:9003",
                     ("127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003")),
    "resources": (["--resources", "/f.json"], "/e.json", "/t.json", ("/f.json", "/e.json", "/t.json")),
    "work-item": (["--work-item", "/f.json"], "/e.json", "/t.json", ("/f.json", "/e.json", "/t.json")),
    "session": (["--session", "sesn_f"], "sesn_e", "sesn_t", ("sesn_f", "sesn_e", "sesn_t")),
    "root": (["--root", "/f"], "/e", "/t", ("/f", "/e", "/t")),
    "api-url": (["--api-url", "http://f"], "http://e", "http://t", ("http://f", "http://e", "http://t")),
    "token-file": (["--token-file", "/f"], "/e", "/t", ("/f", "/e", "/t")),
    "secret-file": (["--secret-file", "/f"], "/e", "/t", ("/f", "/e", "/t")),
    "cache-dir": (["--cache-dir", "/f"], "/e", "/t", ("/f", "/e", "/t")),
    "uid": (["--uid", "1"], "2", 3, (1, 2, 3)),
    "gid": (["--gid", "1"], "2", 3, (1, 2, 3)),
    "allow-other": (["--allow-other"], "no", True, (True, False, True)),
    "sync-interval": (["--sync-interval", "6"], "7.5", 8, (6.0, 7.5, 8.0)),
    "sync-deletions": (["--sync-deletions", "disabled"], "log_only", "disabled",
                       ("disabled", "log_only", "disabled")),
    "final-sync-timeout": (["--final-sync-timeout", "1"], "2", 3.5, (1.0, 2.0, 3.5)),
    "sync-concurrency": (["--sync-concurrency", "1"], "2", 3, (1, 2, 3)),
    "start-timeout": (["--start-timeout", "1"], "2.5", 4, (1.0, 2.5, 4.0)),
    "session-check-interval": (["--session-check-interval", "1"], "0.5", 90, (1.0, 0.5, 90.0)),
    "write-behind": (["--write-behind", "no"], "yes", False, (False, True, False)),
    "cache-size": (["--cache-size", "1K"], "2M", 4096, (1024, 2 * 1024**2, 4096)),
    "cache-memory": (["--cache-memory", "1K"], "2M", 4096, (1024, 2 * 1024**2, 4096)),
    "daemon": (["--daemon"], "0", True, (True, False, True)),
    "log-level": (["--log-level", "error"], "DEBUG", "info", ("ERROR", "DEBUG", "INFO")),
    "log-format": (["--log-format", "json"], "text", "json", ("json", "text", "json")),
}  # fmt: skip


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _settle(argv: list[str], env: dict[str, str], config: str | None, tmp: Path):
    env = {"XDG_CONFIG_HOME": str(tmp / "xdg"), **env}
    if config is not None:
        (tmp / "xdg" / "memfs").mkdir(parents=True, exist_ok=True)
        (tmp / "xdg" / "memfs" / "config.toml").write_text(config)
    args = build_parser().parse_args(["mount", *argv])
    args.verbose += args.verbose_after
    return settle(args, env)


def _value(settings, dest: str):
    """A setting's value: the log settings are every command's, the others the mount's."""
    return getattr(settings if dest.startswith("log_") else settings.mount, dest)


def test_every_flag_has_a_sample():
    assert set(SAMPLES) == {o.name for o in MOUNT_OPTIONS} | {"log-level", "log-format"}


@pytest.mark.parametrize("name", list(SAMPLES))
@pytest.mark.parametrize("given", ["flag env file", "env file", "file", "nothing"])
def test_flag_wins_over_variable_over_file_over_default(name, given, tmp_path):
    flag, text, value, (from_flag, from_env, from_file) = SAMPLES[name]
    dest = name.replace("-", "_")
    variable = "MEMFS_" + dest.upper()
    argv = flag if "flag" in given else []
    env = {variable: text} if "env" in given else {}
    config = f"{name} = {_toml(value)}\n" if "file" in given else None
    settings = _settle(argv, env, config, tmp_path)
    source = settings.sources[dest]
    expected = {"flag env file": from_flag, "env file": from_env, "file": from_file}
    if given == "nothing":
        default = next((o.default for o in MOUNT_OPTIONS if o.name == name), None)
        assert (source.tier, _value(settings, dest)) == (
            "default",
            "text" if name == "log-format" else default,
        )
    else:
        assert _value(settings, dest) == expected[given]
        assert source.tier == given.split()[0].replace("env", "environment")


def test_store_and_resources_come_from_one_source(tmp_path):
    mount = _settle([], {"MEMFS_STORE": "memstore_e"}, 'resources = "/r.json"\n', tmp_path).mount
    assert (mount.store, mount.resources) == (("memstore_e",), None)
    mount = _settle(["--resources", "/f.json"], {"MEMFS_STORE": "memstore_e"}, None, tmp_path).mount
    assert (mount.store, mount.resources) == ((), "/f.json")


def test_a_work_item_or_a_session_names_the_stores_as_store_and_resources_do(tmp_path):
    """They are one setting with `store` and `resources`: the strongest source
    that names stores at all wins, the weaker ones count for nothing."""
    mount = _settle(["--work-item", "-"], {"MEMFS_STORE": "memstore_e"}, None, tmp_path).mount
    assert (mount.work_item, mount.store, mount.session) == ("-", (), None)
    mount = _settle([], {"MEMFS_SESSION": "sesn_e"}, 'store = ["memstore_t"]\n', tmp_path).mount
    assert (mount.session, mount.store) == ("sesn_e", ())
    mount = _settle(["--store", "memstore_f"], {"MEMFS_WORK_ITEM": "/w.json"}, None, tmp_path).mount
    assert (mount.store, mount.work_item) == (("memstore_f",), None)


def test_minus_v_is_a_flag_and_wins_over_the_variable(tmp_path):
    args = _settle(["-v"], {"MEMFS_LOG_LEVEL": "ERROR"}, 'log-level = "DEBUG"\n', tmp_path)
    assert args.log_level == "INFO"
    args = _settle(["-vv", "--log-level", "WARNING"], {}, None, tmp_path)
    assert args.log_level == "WARNING"
    args = _settle([], {}, None, tmp_path / "no config")
    assert args.log_level is None  # the store processes' own default (INFO)


def test_paths_in_the_file_are_relative_to_its_folder(tmp_path):
    mount = _settle([], {}, 'cache-dir = "cache"\ntoken-file = "~/token"\n', tmp_path).mount
    assert mount.cache_dir == str(tmp_path / "xdg" / "memfs" / "cache")
    assert mount.token_file == os.path.expanduser("~/token")


def test_a_blank_variable_counts_as_unset(tmp_path):
    mount = _settle([], {"MEMFS_SYNC_INTERVAL": "  "}, "sync-interval = 20\n", tmp_path).mount
    assert mount.sync_interval == 20.0


# ------------------------------------------------------------------ refusals

ENV_REFUSALS = {
    "MEMFS_SYNC_INTERVAL=abc": "MEMFS_SYNC_INTERVAL=abc (environment) is not a number of seconds",
    "MEMFS_SYNC_INTERVAL=4": "MEMFS_SYNC_INTERVAL=4 (environment) must be at least 5 seconds",
    "MEMFS_FINAL_SYNC_TIMEOUT=0": "MEMFS_FINAL_SYNC_TIMEOUT=0 (environment) must be more than 0 seconds",
    "MEMFS_SYNC_CONCURRENCY=33": "MEMFS_SYNC_CONCURRENCY=33 (environment) must be between 1 and 32",
    "MEMFS_UID=me": "MEMFS_UID=me (environment) is not a whole number",
    "MEMFS_GID=4294967295": "MEMFS_GID=4294967295 (environment) must be between 0 and 4294967294",
    "MEMFS_ALLOW_OTHER=maybe": "MEMFS_ALLOW_OTHER=maybe (environment) is not one of 1/0, true/false, yes/no",
    "MEMFS_SYNC_DELETIONS=never": "MEMFS_SYNC_DELETIONS=never (environment) is not one of enabled, log_only, disabled",
    "MEMFS_STORE=memstore_a :read_only": "MEMFS_STORE=memstore_a :read_only (environment) has a store ':read_only' that names no store id",
    "MEMFS_LOG_FORMAT=xml": "MEMFS_LOG_FORMAT=xml (environment) is not one of text, json",
    "MEMFS_LOG_LEVEL=loud": "MEMFS_LOG_LEVEL=loud (environment) is not one of DEBUG, INFO, WARNING, ERROR",
    "MEMFS_CONFIG=/nonexistent.toml": "the config file /nonexistent.toml does not exist",
}  # fmt: skip

FILE_REFUSALS = {
    'sync-interval = "abc"': 'sync-interval = "abc" in {path} is not a number of seconds',
    "sync-interval = true": "sync-interval = true in {path} is not a number of seconds",
    "sync-concurrency = 2.5": "sync-concurrency = 2.5 in {path} is not a whole number",
    "allow-other = 1.5": "allow-other = 1.5 in {path} is not one of 1/0, true/false, yes/no",
    "root = 5": "root = 5 in {path} is not a string",
    'store = "memstore_a"': None,  # a string is a list of one, as in a variable
    'store = ["memstore_a:ro"]': "store = [\"memstore_a:ro\"] in {path} has a store 'memstore_a:ro' that has access 'ro': it must be read_only or read_write",
    "sync_interval = 30": "sync_interval in {path} is not a memfs setting; did you mean sync-interval?",
    "interval = 30": "interval in {path} is not a memfs setting",
    'token = "sk-ant-api03-x"': "token in {path} is not taken: a secret does not go in the config file; name a file that holds it with token-file (or secret-file for a work item secret)",
    "[mount]": "mount in {path} is not a memfs setting",
    "sync-interval = ": "the config file {path} is not TOML: Invalid value (at line 1, column 17)",
}  # fmt: skip


@pytest.mark.parametrize("assignment", list(ENV_REFUSALS))
def test_a_bad_variable_is_one_sentence_naming_it(assignment, tmp_path, capsys):
    name, _, value = assignment.partition("=")
    env = {"XDG_CONFIG_HOME": str(tmp_path), name: value}
    with pytest.raises(ConfigError) as e:
        settle(build_parser().parse_args(["mount", "--store", "memstore_a"]), env)
    assert str(e.value) == ENV_REFUSALS[assignment]


@pytest.mark.parametrize("line", list(FILE_REFUSALS))
def test_a_bad_file_value_is_one_sentence_naming_the_key_and_the_file(line, tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(line + "\n")
    args = build_parser().parse_args(["mount", "--config", str(path)])
    if FILE_REFUSALS[line] is None:
        assert settle(args, {}).mount.store == ("memstore_a",)
        return
    with pytest.raises(ConfigError) as e:
        settle(args, {})
    assert str(e.value) == FILE_REFUSALS[line].format(path=path)


def test_a_bad_value_is_refused_even_where_a_stronger_source_overrides_it(tmp_path):
    with pytest.raises(ConfigError, match="MEMFS_SYNC_INTERVAL=abc"):
        _settle(["--sync-interval", "20"], {"MEMFS_SYNC_INTERVAL": "abc"}, None, tmp_path)


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (
            ["--sync-interval", "abc"],
            "memfs: argument --sync-interval: 'abc' is not a number of seconds "
            "(see 'memfs mount --help')\n",
        ),
        (
            ["--sync-concurrency", "0"],
            "memfs: argument --sync-concurrency: '0' must be between 1 and 32 "
            "(see 'memfs mount --help')\n",
        ),
        (
            ["--uid", "99999999999"],
            "memfs: argument --uid: '99999999999' must be between 0 and 4294967294 "
            "(see 'memfs mount --help')\n",
        ),
        (
            ["--store", "memstore_a:ro"],
            "memfs: argument --store: 'memstore_a:ro' has access 'ro': it must be read_only or "
            "read_write (see 'memfs mount --help')\n",
        ),
    ],
)
def test_a_bad_flag_is_one_sentence_naming_it(argv, sentence, capsys):
    with pytest.raises(SystemExit) as e:
        main(["mount", *argv])
    assert e.value.code == 2
    assert capsys.readouterr().err == sentence


def test_main_exits_2_with_the_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("MEMFS_SYNC_INTERVAL", "abc")
    assert main(["mount", "--store", "memstore_a"]) == 2
    assert capsys.readouterr().err == (
        "memfs: MEMFS_SYNC_INTERVAL=abc (environment) is not a number of seconds\n"
    )


def test_a_missing_default_file_is_no_error(tmp_path):
    settings = _settle([], {}, None, tmp_path)
    assert settings.config_file is None


def test_a_file_every_user_may_change_is_refused(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("sync-interval = 20\n")
    os.chmod(path, 0o666)
    with pytest.raises(ConfigError) as e:
        settle(build_parser().parse_args(["mount", "--config", str(path)]), {})
    assert str(e.value) == (
        f"the config file {path} can be written by every user (mode 0666); make it 0600 or 0644"
    )


# ------------------------------------------------------------------ credentials


def _credentials(argv, env, config, tmp):
    settings = _settle(argv, env, config, tmp)
    return mount_credentials(settings, {"XDG_CONFIG_HOME": str(tmp / "xdg"), **env})


def test_credentials_from_the_file_rank_after_every_variable(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file")
    config = f'token-file = "{token_file}"\napi-url = "http://file"\n'
    creds = _credentials([], {}, config, tmp_path)
    assert (creds.token, creds.api_url, creds.source) == (
        "from-file",
        "http://file",
        f"token-file in {tmp_path / 'xdg' / 'memfs' / 'config.toml'}",
    )
    creds = _credentials(
        [], {"MEMFS_TOKEN": "from-env", "ANTHROPIC_BASE_URL": "http://e"}, config, tmp_path
    )
    assert (creds.token, creds.api_url, creds.source) == ("from-env", "http://e", "MEMFS_TOKEN")


def test_the_token_file_variable_ranks_before_the_token_variable(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file")
    env = {"MEMFS_TOKEN_FILE": str(token_file), "MEMFS_TOKEN": "from-env"}
    creds = _credentials([], env, None, tmp_path)
    assert (creds.token, creds.source) == ("from-file", "MEMFS_TOKEN_FILE")
    with pytest.raises(ConfigError, match="cannot read the work item secret file /nonexistent"):
        _credentials(["--secret-file", "/nonexistent"], env, None, tmp_path)


# ------------------------------------------------------------------ the settings object


def test_the_settings_of_a_mount_are_one_frozen_typed_object(tmp_path):
    """`settle` makes them once: each value of its type (the deletions mode
    an enum), the object frozen, and what every store gets derived from it."""
    import dataclasses

    from memfs.api import Deletions
    from memfs.supervisor import MountSettings

    settings = _settle(
        ["--sync-deletions", "log_only", "--store", "memstore_a"],
        {"MEMFS_SYNC_INTERVAL": "20"},
        'sync-concurrency = 4\ncache-dir = "cache"\n',
        tmp_path,
    )
    mount = settings.mount
    assert isinstance(mount, MountSettings)
    assert mount.sync_deletions is Deletions.LOG_ONLY
    assert (mount.store, mount.sync_interval, mount.sync_concurrency) == (("memstore_a",), 20.0, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mount.sync_interval = 5.0
    each = mount.store_settings()
    assert each.sync_deletions is Deletions.LOG_ONLY
    assert (each.sync_interval, each.sync_concurrency) == (20.0, 4)
    assert each.cache_dir == str(tmp_path / "xdg" / "memfs" / "cache")


def test_a_command_that_does_not_mount_has_no_mount_settings(tmp_path):
    args = build_parser().parse_args(["status"])
    args.verbose += args.verbose_after
    settings = settle(args, {"XDG_CONFIG_HOME": str(tmp_path), "MEMFS_LOG_FORMAT": "json"})
    assert (settings.mount, settings.log_format) == (None, "json")


def test_at_debug_each_setting_says_where_it_came_from(tmp_path, caplog):
    import logging

    from memfs.cli._config import log_sources

    settings = _settle(
        ["--store", "memstore_a", "--sync-deletions", "disabled"],
        {"MEMFS_UID": "7"},
        None,
        tmp_path,
    )
    with caplog.at_level(logging.DEBUG, logger="memfs"):
        log_sources(settings)
    assert [r.getMessage() for r in caplog.records] == [
        "store is ['memstore_a'] (from --store)",
        "uid is 7 (from MEMFS_UID)",
        "sync-deletions is disabled (from --sync-deletions)",
    ]
