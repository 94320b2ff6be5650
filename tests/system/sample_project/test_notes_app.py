"""Integration tests of notes_app against memfs's fake store, through its
fault proxy. They use only memfs.testing's documented fixtures."""

from __future__ import annotations

import time

import pytest
from notes_app import NotesApp, StoreUnavailable


@pytest.fixture
def app(memory_store, fault_proxy):
    """The app, talking to the store through the fault proxy."""
    app = NotesApp(fault_proxy.url, memory_store.token, memory_store.store_id, backoff=0.01)
    yield app
    app.close()


def test_reads_what_the_store_holds(app, memory_store):
    memory_store.seed({"/todo.md": "buy milk", "/ideas/memfs.md": "a folder"})
    assert app.notes() == {"/ideas/memfs.md": "a folder", "/todo.md": "buy milk"}


def test_a_save_rides_out_an_overloaded_store(app, memory_store, fault_proxy):
    fault_proxy.set(status=529, status_next=3)
    app.save("/todo.md", "buy milk")
    assert memory_store.memories() == {"/todo.md": "buy milk"}
    assert fault_proxy.counters().statuses_injected == 3


def test_a_rate_limit_is_waited_out(app, memory_store, fault_proxy):
    fault_proxy.set(status=429, retry_after=0.3, status_next=1)
    started = time.monotonic()
    app.save("/todo.md", "buy milk")
    assert time.monotonic() - started >= 0.3
    assert memory_store.memories() == {"/todo.md": "buy milk"}


def test_a_lost_answer_does_not_make_a_second_note(app, memory_store, fault_proxy):
    memory_store.seed({"/todo.md": "buy milk"})
    fault_proxy.set(lose_answer_next=1, match_method="POST")
    app.save("/ideas.md", "sleep more")
    counters = fault_proxy.counters()
    assert counters.answers_lost == 1
    assert counters.statuses("POST", r"/memories") == [0, 409, 200]
    assert memory_store.memories() == {"/ideas.md": "sleep more", "/todo.md": "buy milk"}
    assert [(v["operation"], v["path"]) for v in memory_store.versions()] == [
        ("created", "/todo.md"),
        ("created", "/ideas.md"),
    ]


def test_slow_and_dropped_reads_still_read(app, memory_store, fault_proxy):
    memory_store.seed({f"/n{i:02}.md": str(i) for i in range(25)})
    fault_proxy.set(delay=0.05, drop_next=2, match_method="GET")
    assert app.notes() == {f"/n{i:02}.md": str(i) for i in range(25)}
    assert fault_proxy.counters().drops_injected == 2


def test_an_outage_is_reported_and_changes_nothing(app, memory_store, fault_proxy):
    memory_store.seed({"/todo.md": "buy milk"})
    fault_proxy.set(down=True)
    with pytest.raises(StoreUnavailable):
        app.save("/todo.md", "sell milk")
    assert memory_store.memories() == {"/todo.md": "buy milk"}
