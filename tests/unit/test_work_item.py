"""A claimed work item, as `memfs.api.parse_work_item` reads it: the poll's
JSON of a session's work, unknown fields ignored, every refusal one
sentence that quotes nothing of the secret."""

from __future__ import annotations

import pytest

from memfs._exceptions import InvalidWorkItem
from memfs.api import parse_work_item, session_id_problem
from memfs.supervisor import resolve_credentials

SECRET = "eyJzZXNzaW9uc190b2tlbiI6InRvay1zZWNyZXQtdmFsdWUifQ"


def test_a_session_s_work_item_as_the_poll_returns_it():
    item = parse_work_item(
        {
            "id": "work_01",
            "type": "work",
            "environment_id": "env_01",
            "data": {"type": "session", "id": "sesn_01ABC"},
            "secret": SECRET,
            "state": "claimed",
            "unknown": {"fields": "ignored"},
        }
    )
    assert (item.id, item.environment_id, item.session_id, item.secret) == (
        "work_01",
        "env_01",
        "sesn_01ABC",
        SECRET,
    )
    assert SECRET not in repr(item)
    assert (
        parse_work_item({"data": {"type": "session", "id": "sesn_x"}, "secret": None}).secret
        is None
    )


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        ([], "is not a JSON object"),
        ({"id": "work_01"}, "has no data object"),
        (
            {"data": {"type": "healthcheck", "id": "x"}},
            "is not a session's: its data.type is 'healthcheck'",
        ),
        ({"data": {"id": "sesn_x"}}, 'is not a session\'s: its data.type is not "session"'),
        ({"data": {"type": "session", "id": "../etc"}}, "names a data.id that is not a session id"),
        ({"data": {"type": "session"}}, "names a data.id that is not a session id"),
        (
            {"data": {"type": "session", "id": "sesn_x"}, "secret": 42},
            "has a secret that is not a string",
        ),
    ],
)
def test_what_is_not_a_session_s_work_item_is_one_sentence(obj, words):
    with pytest.raises(InvalidWorkItem) as e:
        parse_work_item(obj, "the work item on standard input")
    assert str(e.value).startswith("the work item on standard input ")
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["sesn_01ABC", "sesn-with_dash", "a" * 128])
def test_session_ids(value):
    assert session_id_problem(value) is None


@pytest.mark.parametrize("value", ["", "a" * 129, "sesn/x", "sesn x", "..", 7, None])
def test_what_is_not_a_session_id(value):
    assert session_id_problem(value) is not None


def test_a_session_s_work_never_takes_the_host_s_own_sdk_credentials():
    host = {"ANTHROPIC_API_KEY": "sk-ant-api03-host", "ANTHROPIC_AUTH_TOKEN": "host-token"}
    assert resolve_credentials(api_url=None, env=host, for_session=True) is None
    creds = resolve_credentials(api_url=None, env={**host, "MEMFS_TOKEN": "mine"}, for_session=True)
    assert creds is not None and creds.token == "mine"
    creds = resolve_credentials(api_url=None, env=host)
    assert creds is not None and creds.token == "sk-ant-api03-host"
