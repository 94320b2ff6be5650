"""Every warning and error memfs can log, and every sentence a command
refuses with, is in docs/troubleshooting.md with what it means and what to
do (in the manner of mountpoint-s3's semantics doc test).

The code is read, not run: every `log.warning/error/exception/critical(...)`
and `ledger.log_once(...)` call in memfs/, and every `raise ConfigError(...)`,
`MountError`, `InvalidSecret`, `InvalidResources`, `InvalidStoreId`, `InvalidWorkItem` or `UsageError` with a literal or an
f-string sentence. A log call must carry a literal `event` (in `extra=` or
`event=`); its row in the doc's table names that event in backticks. A
message is matched by its literal text: the pieces between its placeholders
(`%s`, `{e}`) must all stand in that one row, where the doc writes a
placeholder as a word in capitals (`conflict on PATH: ... kept at COPY`).
Events the doc lists that the code no longer logs fail the test too.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "troubleshooting.md"
LOG_METHODS = {"warning", "error", "exception", "critical"}
SENTENCE_ERRORS = {
    "ConfigError",
    "MountError",
    "InvalidSecret",
    "InvalidResources",
    "InvalidStoreId",
    "InvalidWorkItem",
    "UsageError",
}
PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgi]")
SHORTEST_PIECE = 3
"""Pieces shorter than this (`: `, ` (`) say nothing and are not looked for."""


@dataclass
class Message:
    where: str
    kind: str  # "log" or "error"
    pieces: list[str]
    event: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text!r}" + (f" (event {self.event})" if self.event else "")


def _template(node: ast.expr) -> str | None:
    """The message with each placeholder as \\0; None when it is not literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return PRINTF.sub("\0", node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            else:
                out.append("\0")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    return None


def _event(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "event" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
        if kw.arg == "extra" and isinstance(kw.value, ast.Dict):
            for key, value in zip(kw.value.keys, kw.value.values, strict=True):
                named = isinstance(key, ast.Constant) and key.value == "event"
                if named and isinstance(value, ast.Constant):
                    return str(value.value)
    return None


def _normal(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split())


@functools.cache
def code_messages() -> list[Message]:
    found = []
    for path in sorted((ROOT / "memfs").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                is_log = (
                    attr in LOG_METHODS
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in ("log", "logger")
                )
                if is_log and node.args:
                    template = _template(node.args[0])
                elif attr == "log_once" and len(node.args) >= 2:
                    template = _template(node.args[1])
                else:
                    continue
                found.append(_message(where, "log", template, _event(node), node))
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                name = func.id if isinstance(func, ast.Name) else None
                if name in SENTENCE_ERRORS and node.exc.args:
                    template = _template(node.exc.args[0])
                    if template is not None:
                        found.append(_message(where, "error", template, None, node))
    return found


def _message(where: str, kind: str, template: str | None, event: str | None, node) -> Message:
    text = template if template is not None else ast.unparse(node)
    pieces = []
    if template is not None:
        pieces = [_normal(p) for p in template.split("\0")]
        pieces = [p for p in pieces if len(p.strip(" .,;:()")) >= SHORTEST_PIECE]
    return Message(where, kind, pieces, event, text.replace("\0", "…"))


def doc_rows(section: str | None = None) -> list[str]:
    """The table rows of the doc, or of its `## section`."""
    text = DOC.read_text()
    if section is not None:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [_normal(line) for line in text.splitlines() if line.startswith("|")]


def _row_for(message: Message, rows: list[str]) -> str | None:
    for row in rows:
        if message.event is not None and f"`{message.event}`" not in row.split("|")[1]:
            continue
        if all(piece in row for piece in message.pieces):
            return row
    return None


def test_every_log_call_names_its_event():
    missing = [str(m) for m in code_messages() if m.kind == "log" and m.event is None]
    assert not missing, "log calls without a literal event name:\n" + "\n".join(missing)


def test_every_message_the_code_can_print_is_in_the_troubleshooting_doc():
    rows = doc_rows()
    missing = [str(m) for m in code_messages() if _row_for(m, rows) is None]
    assert not missing, f"not in {DOC.relative_to(ROOT)}:\n" + "\n".join(missing)


def test_every_event_the_doc_lists_is_one_the_code_logs():
    tree_events = {m.event for m in code_messages() if m.event}
    for path in (ROOT / "memfs").rglob("*.py"):
        tree_events |= set(re.findall(r'"event": "(\w+)"', path.read_text()))
    listed = set()
    for row in doc_rows("Log messages"):
        first = row.split("|")[1]
        listed |= set(re.findall(r"`(\w+)`", first))
    assert listed - tree_events == set()
