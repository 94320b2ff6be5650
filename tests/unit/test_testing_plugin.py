"""memfs's own suite installs memfs but does not opt in to `memfs.testing`:
the plugin's switch is loaded (the pytest11 entry point) and must stay inert,
with no fixture of the plugin and no hook besides its flag and setting."""

from __future__ import annotations

import pytest

import memfs.testing
from memfs.testing._proxy import FaultSettings


def test_the_switch_is_loaded_and_adds_only_its_flag(pytestconfig):
    switch = pytestconfig.pluginmanager.get_plugin("memfs")
    assert switch is not None and switch.__name__ == "memfs.testing._switch"
    hooks = {caller.name for caller in pytestconfig.pluginmanager.get_hookcallers(switch) or []}
    assert hooks == {"pytest_addoption", "pytest_configure"}
    assert pytestconfig.getoption("memfs") is False


def test_this_suite_sees_no_fixture_of_the_plugin(request, pytestconfig):
    assert not pytestconfig.pluginmanager.has_plugin("memfs.testing")
    assert not pytestconfig.pluginmanager.has_plugin("memfs.testing._fixtures")
    for name in ("memory_store", "make_memory_store", "fault_proxy"):
        with pytest.raises(pytest.FixtureLookupError):
            request.getfixturevalue(name)


def test_the_public_names_are_all_there():
    for name in memfs.testing.__all__:
        assert getattr(memfs.testing, name).__module__.startswith("memfs.testing.")
    with pytest.raises(AttributeError):
        memfs.testing.NoSuchThing  # noqa: B018


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status_rat": 0.5}, "no fault setting 'status_rat'"),
        ({"status_rate": 2}, "status_rate must be a share from 0 to 1, not 2"),
        ({"status": "529"}, "status must be an HTTP status from 100 to 599, not '529'"),
        ({"drop_next": -1}, "drop_next must be a count, 0 or more, not -1"),
        ({"retry_after": True}, "retry_after must be a number of seconds, 0 or more, not True"),
        ({"down": 1}, "down must be true or false, not 1"),
        ({"headers": {"x": 1}}, "headers must be an object of strings"),
        ({"match_path": "(["}, "match_path is not a regex"),
    ],
)
def test_a_bad_fault_setting_is_one_sentence_and_changes_nothing(changes, message):
    settings = FaultSettings()
    with pytest.raises((TypeError, ValueError), match=message.replace("(", r"\(")):
        settings.change(**{"drop_rate": 0.5, **changes})
    assert settings == FaultSettings()
    settings.change(delay=1, status_rate=1)
    assert settings.delay == 1.0 and isinstance(settings.delay, float)
