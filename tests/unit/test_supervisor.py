"""What `memfs mount` makes of its arguments before anything is mounted:
`--store` strings, credentials from files, the environment or a work item
secret, and the refusals of `build_specs` (pure code, no network)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from memfs._exceptions import ConfigError, InvalidResources, InvalidSecret
from memfs.api import Resource
from memfs.control import StoreSettings
from memfs.supervisor import Credentials, build_specs, parse_store_arg, resolve_credentials

UNREACHABLE = "http://127.0.0.1:9"
"""Nothing listens there: a test that would reach the network fails loudly."""
CREDS = Credentials(UNREACHABLE, "tok")


def _secret(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _specs(resources, creds=CREDS, root="/mnt/memory", **overrides):
    return build_specs(
        resources, creds, StoreSettings(cache_dir="/tmp/cache", **overrides), root=root
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("memstore_1", Resource("memstore_1", "read_write", mount_path=None)),
        ("memstore_1:read_only", Resource("memstore_1", "read_only", mount_path=None)),
        ("memstore_1:read_write=/m/x", Resource("memstore_1", "read_write", mount_path="/m/x")),
        ("memstore_1=/m/a=b", Resource("memstore_1", "read_write", mount_path="/m/a=b")),
        ("memstore_1:read_only=rel/x", Resource("memstore_1", "read_only", mount_path="rel/x")),
    ],
)
def test_parse_store_arg_reads_id_access_and_path(text, expected):
    assert parse_store_arg(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "names no store id"),
        (":read_only", "names no store id"),
        ("memstore_1:ro", "must be read_only or read_write"),
        ("memstore_1=", "empty mount path"),
        ("../escaped-store", "names no store id of the API's form"),
        ("memstore_a/../b=/m/x", "names no store id of the API's form"),
        ("memstore_a,allow_other", "names no store id of the API's form"),
        ("memstore_" + "a" * 120, "names no store id of the API's form"),
        ("store_abc", "names no store id of the API's form"),
    ],
)
def test_parse_store_arg_refuses_with_a_sentence(text, words):
    with pytest.raises(ConfigError) as e:
        parse_store_arg(text)
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_credentials_come_from_token_file_env_or_secret(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    secret = _secret({"sessions_token": "from-secret", "api_base_url": "http://127.0.0.1:7/"})
    secret_file = tmp_path / "secret"
    secret_file.write_text(secret + "\n")
    env = {"MEMFS_TOKEN": "from-env", "MEMFS_WORK_ITEM_SECRET": secret}

    def resolve(env, token_file=None, secret_file=None, api_url=None):
        return resolve_credentials(
            api_url=api_url,
            token_file=token_file and str(token_file),
            secret_file=secret_file and str(secret_file),
            env=env,
        )

    # The token file wins over the environment; the URL falls back to the public API.
    assert resolve(env={}, token_file=token_file) == Credentials(
        "https://api.anthropic.com", "from-file"
    )
    assert resolve(env=env).token == "from-env"
    # The work item secret brings its own URL (trailing slash dropped) ...
    assert resolve(env={"MEMFS_WORK_ITEM_SECRET": secret}) == Credentials(
        "http://127.0.0.1:7", "from-secret"
    )
    assert resolve(env={}, secret_file=secret_file).token == "from-secret"
    # ... which MEMFS_API_URL and --api-url override, in that order.
    with_url = {"MEMFS_WORK_ITEM_SECRET": secret, "MEMFS_API_URL": "http://127.0.0.1:8"}
    assert resolve(env=with_url).api_url == "http://127.0.0.1:8"
    assert resolve(env=with_url, api_url="http://127.0.0.1:6").api_url == "http://127.0.0.1:6"
    assert resolve(env={}) is None
    assert "from-file" not in repr(resolve(env={}, token_file=token_file))


def test_credentials_refuse_unusable_files_and_secrets(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    with pytest.raises(ConfigError, match="token file .* is empty"):
        resolve_credentials(api_url=None, token_file=str(empty), secret_file=None, env={})
    with pytest.raises(ConfigError, match="cannot read the token file"):
        resolve_credentials(
            api_url=None, token_file=str(tmp_path / "missing"), secret_file=None, env={}
        )
    with pytest.raises(InvalidSecret, match="not URL-safe base64"):
        resolve_credentials(
            api_url=None, token_file=None, secret_file=None, env={"MEMFS_WORK_ITEM_SECRET": "%%%"}
        )
    no_token = _secret({"api_base_url": "http://x"})
    with pytest.raises(InvalidSecret, match="no sessions_token"):
        resolve_credentials(
            api_url=None,
            token_file=None,
            secret_file=None,
            env={"MEMFS_WORK_ITEM_SECRET": no_token},
        )


def test_build_specs_honours_given_paths_without_asking_the_store():
    specs = _specs(
        [
            Resource("memstore_a", "read_only", mount_path="/mnt/elsewhere/a/"),
            Resource("memstore_b", "read_write", mount_path="/srv/b"),
        ],
        uid=1000,
        gid=1001,
    )
    assert [(s.store_id, s.mount_path, s.read_only) for s in specs] == [
        ("memstore_a", "/mnt/elsewhere/a", True),
        ("memstore_b", "/srv/b", False),
    ]
    assert all(s.token == "tok" and s.api_url == UNREACHABLE for s in specs)
    assert (specs[0].uid, specs[0].gid) == (1000, 1001)
    assert "tok" not in repr(specs[0])


@pytest.mark.parametrize(
    ("resources", "overrides", "words"),
    [
        (
            [Resource(f"memstore_{i}", mount_path=f"/m/{i}") for i in range(9)],
            {},
            "9 stores were given; at most 8",
        ),
        ([Resource("memstore_a", mount_path="/m/a")] * 2, {}, "store memstore_a is given twice"),
        (
            [Resource("memstore_a", mount_path="/m/x"), Resource("memstore_b", mount_path="/m/x/")],
            {},
            "would both mount at /m/x",
        ),
        (
            [Resource("memstore_a", mount_path="//m/x"), Resource("memstore_b", mount_path="/m/x")],
            {},
            "would both mount at /m/x",
        ),
        (
            [
                Resource("memstore_a", mount_path="/m/a"),
                Resource("memstore_b", mount_path="/m/a/b"),
            ],
            {},
            "would mount one inside the other (/m/a and /m/a/b)",
        ),
        ([Resource("memstore_a", mount_path="m/a")], {}, "must be absolute"),
        ([Resource("memstore_a", mount_path="/m/../etc")], {}, "may not contain '..'"),
    ],
)
def test_build_specs_refusals_come_before_any_request(resources, overrides, words):
    with pytest.raises(ConfigError) as e:
        _specs(resources, **overrides)
    assert words in str(e.value)


@pytest.mark.parametrize(
    "store_id",
    [
        "memstore_0123456789ABCDEFGHIJKLmn",
        "memstore_01JAbCdEfGhJkMnPqRsTvWxYz0",
        "memstore_1",
        "memstore_" + "a" * 119,
    ],
)
def test_store_ids_of_the_api_form_are_taken(store_id):
    from memfs.api import check_store_id

    assert check_store_id(store_id) == store_id


@pytest.mark.parametrize(
    "store_id",
    [
        "",
        "memstore_",
        "../escaped-store",
        "memstore_a/../../b",
        "memstore_a\n",
        "memstore_a b",
        "memstore_a,allow_other",
        "memstore_é",
        "memstore_" + "a" * 120,
        "mem_abc",
        42,
    ],
)
def test_a_store_id_not_of_the_api_form_names_nothing(store_id):
    from memfs._exceptions import InvalidStoreId
    from memfs.api import Resource, check_store_id, parse_resources

    with pytest.raises(InvalidStoreId) as e:
        check_store_id(store_id)
    assert "is not a store id" in str(e.value) and "\n" not in str(e.value)
    assert len(str(e.value)) < 200
    if isinstance(store_id, str) and store_id:
        with pytest.raises(InvalidStoreId):
            _specs([Resource(store_id, mount_path="/m/a")])
        with pytest.raises(InvalidResources) as refused:
            parse_resources([{"memory_store_id": store_id}])
        assert "resources[0]" in str(refused.value) and "not a store id" in str(refused.value)


def test_build_specs_without_credentials_says_memories_need_a_token():
    with pytest.raises(ConfigError) as e:
        _specs([Resource("memstore_a", mount_path="/m/a")], creds=None)
    assert "the session's memories cannot be mounted without a token" in str(e.value)
    # Nothing to mount needs no token.
    assert _specs([], creds=None) == []


# ------------------------------------------------- resources and secrets


def test_resources_are_taken_exactly_as_the_api_returns_them():
    from memfs.api import parse_resources

    entries = [
        # access null or absent: read-write; unknown fields are ignored.
        {"type": "memory_store", "memory_store_id": "memstore_a", "access": None},
        {
            "type": "memory_store",
            "memory_store_id": "memstore_b",
            "name": "Team Notes",
            "description": "what the team knows",
            "instructions": "read before answering",
            "some_future_field": {"nested": [1, 2]},
        },
        {"type": "memory_store", "memory_store_id": "memstore_c", "access": "read_only"},
        {"type": "file", "file_id": "file_1"},
    ]
    assert parse_resources(entries) == [
        Resource("memstore_a", "read_write"),
        Resource("memstore_b", "read_write", name="Team Notes", description="what the team knows"),
        Resource("memstore_c", "read_only"),
    ]


def test_a_resource_without_mount_path_mounts_at_the_slug_of_its_own_name():
    # The resource's name is enough: the store is not asked (nothing listens at CREDS' URL).
    specs = _specs([Resource("memstore_a", name="User Preferences")], root="/srv/mem")
    assert [(s.mount_path, s.name) for s in specs] == [
        ("/srv/mem/user-preferences", "User Preferences")
    ]


@pytest.mark.parametrize(
    "layout",
    [
        "{b64}",
        "  {b64}\n",
        "{b64}{pad}",
        "\n{b64}{pad}\n\n",
        "{head}\n{tail}",
        "{head}\r\n {tail}{pad}",
    ],
)
@pytest.mark.parametrize("alphabet", ["urlsafe", "standard"])
@pytest.mark.parametrize(
    "token", ["a~~~???", "ab~~~???", "abc~~~???"], ids=["pad1", "pad0", "pad2"]
)
def test_work_item_secrets_in_either_alphabet_padded_or_not(layout, alphabet, token):
    from memfs.api import parse_work_item_secret

    # '~~~' and '???' make '+' and '/' in the standard alphabet, '-' and '_' in the URL-safe one.
    obj = {"sessions_token": token, "api_base_url": "http://h:1", "other": 1}
    encode = base64.urlsafe_b64encode if alphabet == "urlsafe" else base64.standard_b64encode
    padded = encode(json.dumps(obj).encode()).decode()
    b64 = padded.rstrip("=")
    assert ("+" in b64 and "/" in b64) == (alphabet == "standard")
    text = layout.format(b64=b64, pad=padded[len(b64) :], head=b64[:10], tail=b64[10:])
    secret = parse_work_item_secret(text)
    assert (secret.sessions_token, secret.api_base_url) == (token, "http://h:1")


def test_a_work_item_secret_wrapped_over_lines_like_base64_prints_it():
    from memfs.api import parse_work_item_secret

    obj = {"sessions_token": "t" * 120}
    wrapped = base64.encodebytes(json.dumps(obj).encode()).decode()
    assert wrapped.count("\n") > 1
    assert parse_work_item_secret(wrapped).sessions_token == "t" * 120


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        ({"api_base_url": "http://x"}, "no sessions_token"),
        ({"sessions_token": ""}, "no sessions_token"),
        ({"sessions_token": "   "}, "no sessions_token"),
        ({"sessions_token": 12}, "no sessions_token"),
        (["sessions_token"], "no sessions_token"),
        ({"sessions_token": "t", "api_base_url": 5}, "api_base_url is not a string"),
    ],
)
def test_work_item_secrets_without_a_usable_token_are_refused(obj, words):
    from memfs.api import parse_work_item_secret

    with pytest.raises(InvalidSecret) as e:
        parse_work_item_secret(_secret(obj))
    assert words in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["%%%", "a", "abc!", "", "  \n"])
def test_text_that_is_not_base64_json_is_not_a_secret(text):
    from memfs.api import parse_work_item_secret

    with pytest.raises(InvalidSecret, match="is not URL-safe base64"):
        parse_work_item_secret(text)


# ------------------------------------------------------- credential sources


def test_credential_sources_in_their_order_of_precedence(tmp_path: Path):
    """Flags, then the work item's secret, then MEMFS_*, then the SDKs'
    ANTHROPIC_*: take the winner away and the next one speaks. API keys travel
    as x-api-key, everything else (sessions tokens above all) as a bearer
    token. The host's own ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN speak
    only once no work item secret is left anywhere."""
    token_file = tmp_path / "token"
    token_file.write_text("file-token\n")
    secret_file = tmp_path / "secret"
    secret_file.write_text(_secret({"sessions_token": "file-secret"}))
    flags = {
        "token_file": str(token_file),
        "secret_file": str(secret_file),
        "work_item_secret": _secret({"sessions_token": "work-item-secret"}),
    }
    env = {
        "MEMFS_TOKEN": "memfs-token",
        "MEMFS_WORK_ITEM_SECRET": _secret({"sessions_token": "memfs-secret"}),
        "ANTHROPIC_API_KEY": "api-key-of-any-shape",
        "ANTHROPIC_AUTH_TOKEN": "sk-ant-api-but-an-auth-token",
        "ANTHROPIC_WORK_SECRET": _secret({"sessions_token": "sk-ant-api-session"}),
    }
    expected = [
        ("token_file", "file-token", "bearer"),
        ("secret_file", "file-secret", "bearer"),
        ("work_item_secret", "work-item-secret", "bearer"),
        ("MEMFS_TOKEN", "memfs-token", "bearer"),
        ("MEMFS_WORK_ITEM_SECRET", "memfs-secret", "bearer"),
        ("ANTHROPIC_WORK_SECRET", "sk-ant-api-session", "bearer"),
        ("ANTHROPIC_API_KEY", "api-key-of-any-shape", "x-api-key"),
        ("ANTHROPIC_AUTH_TOKEN", "sk-ant-api-but-an-auth-token", "bearer"),
    ]
    for source, token, auth in expected:
        creds = resolve_credentials(api_url=None, env=env, **flags)
        assert creds is not None
        assert (creds.token, creds.auth) == (token, auth), source
        assert creds.api_url == "https://api.anthropic.com"
        flags.pop(source, None)
        env.pop(source, None)
    assert resolve_credentials(api_url=None, env=env) is None
    # Set but blank counts as not set.
    blank = {"MEMFS_TOKEN": " ", "ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "tok"}
    creds = resolve_credentials(api_url=None, token_file=None, secret_file=None, env=blank)
    assert (creds.token, creds.auth) == ("tok", "bearer")


@pytest.mark.parametrize(
    "where",
    [
        "secret_file",
        "work_item_secret",
        "MEMFS_WORK_ITEM_SECRET",
        "ANTHROPIC_WORK_SECRET",
        "config",
    ],
)
def test_with_a_work_item_secret_the_hosts_own_sdk_credentials_are_never_used(
    tmp_path: Path, where
):
    """A worker host exports ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN for its
    own client; a secret from any source makes its sessions token the
    credential, even one ranked after them (the config file's secret-file).
    A token given to memfs itself (MEMFS_TOKEN) keeps its rank."""
    from memfs.supervisor import ConfigFallback

    secret = _secret({"sessions_token": "the-sessions-token"})
    secret_file = tmp_path / "secret"
    secret_file.write_text(secret)
    host = {"ANTHROPIC_API_KEY": "sk-ant-api03-wrong", "ANTHROPIC_AUTH_TOKEN": "wrong"}
    kwargs: dict = {}
    env = dict(host)
    if where == "secret_file":
        kwargs["secret_file"] = str(secret_file)
    elif where == "work_item_secret":
        kwargs["work_item_secret"] = secret
    elif where == "config":
        kwargs["fallback"] = ConfigFallback(secret_file=str(secret_file), where="config.toml")
    else:
        env[where] = secret
    creds = resolve_credentials(api_url=None, env=env, **kwargs)
    assert creds is not None
    assert (creds.token, creds.auth) == ("the-sessions-token", "bearer")
    creds = resolve_credentials(api_url=None, env={**env, "MEMFS_TOKEN": "mine"}, **kwargs)
    assert creds is not None
    expected = "the-sessions-token" if where in ("secret_file", "work_item_secret") else "mine"
    assert creds.token == expected


@pytest.mark.parametrize("where", ["token_file", "MEMFS_TOKEN"])
def test_a_token_that_is_an_api_key_travels_as_x_api_key(tmp_path: Path, where):
    key = "sk-ant-api03-" + "x" * 20
    token_file = tmp_path / "token"
    token_file.write_text(key + "\n")
    if where == "token_file":
        creds = resolve_credentials(
            api_url=None, token_file=str(token_file), secret_file=None, env={}
        )
    else:
        creds = resolve_credentials(
            api_url=None, token_file=None, secret_file=None, env={"MEMFS_TOKEN": key}
        )
    assert (creds.token, creds.auth) == (key, "x-api-key")
    assert key not in repr(creds)


def test_the_api_url_in_its_order_of_precedence():
    secret = _secret({"sessions_token": "s", "api_base_url": "http://secret:1/"})
    env = {
        "ANTHROPIC_WORK_SECRET": secret,
        "ANTHROPIC_BASE_URL": "http://anthropic-base:2/",
        "MEMFS_API_URL": "http://memfs:3",
    }

    def url(api_url=None, **changes):
        e = {k: v for k, v in {**env, **changes}.items() if v is not None}
        creds = resolve_credentials(api_url=api_url, token_file=None, secret_file=None, env=e)
        return creds.api_url

    assert url(api_url="http://flag:4/") == "http://flag:4"
    assert url() == "http://memfs:3"
    assert url(MEMFS_API_URL=None) == "http://anthropic-base:2"
    assert url(MEMFS_API_URL=None, ANTHROPIC_BASE_URL=None) == "http://secret:1"
    # A secret that is not the credential in use brings no URL.
    assert (
        url(MEMFS_API_URL=None, ANTHROPIC_BASE_URL=None, MEMFS_TOKEN="t")
        == "https://api.anthropic.com"
    )


def test_the_spec_handed_to_a_store_process_carries_the_auth_mode():
    from memfs.control import StoreLaunch

    creds = Credentials(UNREACHABLE, "sk-ant-api03-key", "x-api-key")
    (spec,) = _specs([Resource("memstore_a", mount_path="/m/a")], creds=creds)
    assert spec.auth == "x-api-key"
    assert StoreLaunch.from_json(StoreLaunch(spec).to_json()).spec.auth == "x-api-key"
    assert "sk-ant-api03-key" not in repr(spec)


def test_a_followed_session_reaches_the_daemon_follower_with_its_settings_typed():
    """The daemon follower's launch carries the settings every store it mounts
    gets, as JSON (`spec_settings`), and reads them back as they were."""
    from memfs.api import Deletions
    from memfs.supervisor import FollowedStore, SessionToFollow

    settings = StoreSettings(
        cache_dir="/c", uid=7, sync_deletions=Deletions.LOG_ONLY, sync_concurrency=3
    )
    resource = Resource("memstore_a", "read_only", mount_path="/m/a")
    session = SessionToFollow(
        "sesn_1",
        CREDS,
        settings,
        "/mnt/memory",
        [FollowedStore(resource, "/m/a")],
    )
    sent = json.loads(json.dumps(session.to_json()))
    assert sent["spec_settings"] == {
        "root": "/mnt/memory",
        "cache_dir": "/c",
        "uid": 7,
        "gid": None,
        "allow_other": False,
        "sync_interval": 15.0,
        "sync_deletions": "log_only",
        "final_sync_timeout": 30.0,
        "sync_concurrency": 3,
        "start_timeout": 30.0,
        "write_behind": True,
        "cache_size": 256 * 1024 * 1024,
        "cache_memory": 8 * 1024 * 1024,
    }
    again = SessionToFollow.from_json(sent)
    assert again == session and again.settings.sync_deletions is Deletions.LOG_ONLY


def test_stores_mounted_together_list_their_stores_with_fewer_requests_at_once():
    """Stores mounted by one `memfs mount` share the machine: each lists its
    store by folder with its share of the requests a store alone sends."""
    from memfs.mount._store import listing_concurrency

    alone = _specs([Resource("memstore_a", "read_write", mount_path="/m/a")])
    eight = _specs(
        [Resource(f"memstore_{i}", "read_write", mount_path=f"/m/{i}") for i in range(8)]
    )
    assert [s.stores_mounted for s in alone] == [1]
    assert {s.stores_mounted for s in eight} == {8}
    assert listing_concurrency(alone[0]) == 32  # the final sync's requests at once
    assert 1 < listing_concurrency(eight[0]) < listing_concurrency(alone[0])
