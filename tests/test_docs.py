"""The README and every --help must be true: each command they show runs and exits as documented.

Commands are read from whatever the documents say today, so the test follows edits to them:

* README: ``$ ipd ...`` lines of console blocks, ``ipd ...`` / ``.venv/bin/ipd ...`` segments of sh
  blocks, and inline code spans that start with ``ipd`` (spans with placeholders such as ``HW1``,
  ``FILE``, ``[...]`` or ``a|b`` are syntax, not examples, and are skipped, as are bare command
  names the prose mentions, like ``ipd explain``); its Python blocks are run too, and an override
  in them (``sets=[...]``) must change what they print;
* ``--help``: every ``Example:`` paragraph of every command.

A command runs in-process in a temporary directory (files it writes land there; README commands
share one directory, in order, so ``diff base.json new.json`` finds its inputs). ``A | jq ...``
runs A; ``A > FILE`` writes A's output to FILE; ``A; B`` runs both. The expected exit code is 0,
or N where a comment says "exit N" ("when"/"if" in the comment: 0 or N).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import hashlib
import io
import json
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

import helpers
import pytest
import typer
from helpers import Run, run_cli, run_cli_once

from ipd_cli.cli import app

# with pytest-xdist: on one worker with tests/test_validation.py, so the commands both run
# (`ipd calibrate`, `ipd validate --split checking`) run once per session (run_cli_once is per process)
pytestmark = pytest.mark.xdist_group("validate-calibrate")

README = Path(__file__).resolve().parent.parent / "README.md"
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9]*$")


@dataclass
class Example:
    text: str  # as documented
    argv: list[str]  # after "ipd"
    stdout_to: str | None  # "> FILE"
    codes: set[int]  # documented exit codes
    mention: bool = False  # an inline span of prose: 'ipd serve --curve' may name an option, not run


def _comment_codes(comment: str) -> set[int]:
    m = re.search(r"\bexit (\d+)", comment)
    if not m:
        return {0}
    code = int(m.group(1))
    return {0, code} if re.search(r"\b(when|if)\b", comment) else {code}


def _parse(command: str, comment: str = "") -> Example | None:
    """One shell command as an Example, or None when it is not an ipd command."""
    words = shlex.split(command)
    if not words or not (words[0] == "ipd" or words[0].endswith("/ipd")):
        return None
    if "|" in words:
        words = words[: words.index("|")]
    stdout_to = None
    if ">" in words:
        at = words.index(">")
        stdout_to, words = words[at + 1], words[:at]
    return Example(command, words[1:], stdout_to, _comment_codes(comment))


def _split_comment(line: str) -> tuple[str, str]:
    """'cmd  # comment' or 'cmd (comment)' -> (cmd, comment)."""
    line = line.strip()
    if " #" in line:
        command, _, comment = line.partition(" #")
        return command, comment
    if line.endswith(")") and " (" in line:
        at = line.rindex(" (")
        return line[:at], line[at + 2 : -1]
    return line, ""


def _is_placeholder(command: str) -> bool:
    if any(mark in command for mark in ("...", "|", "[", "]", "\\")):
        return True
    for word in command.split():
        for part in re.split(r"[=.,:]", word.lstrip("-")):
            if PLACEHOLDER.match(part):
                return True
    return False


@functools.cache
def _click_app():
    """The app's click command tree, built once (20 ms a build; the README has a hundred spans)."""
    return typer.main.get_command(app)


def _only_names(argv: list[str]) -> bool:
    """A bare command name ('ipd explain'): a mention, unless the command needs no argument."""
    command = _click_app()
    for word in argv:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            return False
        command = sub
    return any(p.required for p in getattr(command, "params", [])) or hasattr(command, "commands")


def readme_examples(text: str) -> list[Example]:
    out: list[Example] = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        for line in body.splitlines():
            if lang == "console" and line.startswith("$ "):
                command, comment = _split_comment(line[2:])
                out += [e for e in [_parse(part, comment) for part in command.split(";")] if e]
            elif lang == "sh":
                out += [e for e in (_parse(part.strip()) for part in line.split("&&")) if e]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`(ipd [^`]+)`", prose):
        command = " ".join(span.split())
        if _is_placeholder(command):
            continue
        ex = _parse(command)
        if ex and not _only_names(ex.argv):
            ex.mention = True
            out.append(ex)
    return out


def help_examples() -> list[tuple[str, list[Example]]]:
    """(command path, its Example: commands) for every command of the app."""

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        yield path, cmd

    out = []
    for path, cmd in walk(typer.main.get_command(app), []):
        for para in re.split(r"\n\s*\n", cmd.help or ""):
            para = " ".join(para.split())
            if not para.startswith("Example: "):
                continue
            line, comment = _split_comment(para.removeprefix("Example: "))
            examples = [e for e in (_parse(c, comment) for c in line.split(";")) if e]
            out.append((" ".join(path) or "ipd", examples))
    return out


def _run(ex: Example, where: Path) -> str | None:
    """Run one example in ``where``; a line describing the failure, or None."""
    if not _writes_files(ex.argv):
        r = _cached(ex)
    elif any((where / a).exists() for a in ex.argv):  # it reads a file an example before it wrote
        r = run_cli(*ex.argv)
    else:
        r = _written_once(ex.argv, where)
    if ex.mention and r.code == 2 and ("Missing " in r.stderr or "requires an argument" in r.stderr):
        return None  # prose naming a command and an option ('ipd serve --curve'), not an example
    if ex.stdout_to and r.code == 0:
        (where / ex.stdout_to).write_text(r.stdout, encoding="utf-8")
    if r.code not in ex.codes:
        return f"{ex.text!r}: exit {r.code}, documented {sorted(ex.codes)}: {r.stderr.strip()[:300]}"
    return None


def _stateless(ex: Example) -> bool:
    """An example whose run no later example reads: no ``> FILE``, no ``-o``."""
    return ex.stdout_to is None and not _writes_files(ex.argv)


def _writes_files(argv: list[str]) -> bool:
    return any(a in ("-o", "--output") or a.startswith("--output=") for a in argv)


def _cached(ex: Example):
    """The README, the --help texts and the tests repeat commands: run each that writes no file once.
    ``A > FILE`` is A (in-process, stdout is captured either way; :func:`_run` writes it to FILE):
    the README's procurement sweep is its ``ipd sweep --help`` example, ``ipd schema`` the one that
    writes the schema to a file."""
    return run_cli_once(*ex.argv)


_WRITTEN: dict[tuple[str, ...], tuple[Run, dict[str, str]]] = {}


def _written_once(argv: list[str], where: Path) -> Run:
    """A command that writes files (``-o``) and reads none of ``where``'s, run once per session in a
    directory of its own (across pytest-xdist workers as :func:`helpers.run_cli_once` runs): its
    result, and the files it wrote put in ``where`` as it wrote them. The README and the --help
    examples write the same files (``ipd compare vera-rubin blackwell -o base.json``, ``ipd plot
    curve ... -o curves.png``)."""
    key = tuple(argv)
    if key not in _WRITTEN:
        _WRITTEN[key] = _shared_writes(key) if helpers.SHARED is not None else _writes(key)
    r, files = _WRITTEN[key]
    for name, data in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_bytes(base64.b64decode(data))
    return r


def _writes(argv: tuple[str, ...]) -> tuple[Run, dict[str, str]]:
    """``ipd ARGV`` run in an empty directory, and the files it left there (base64, by path)."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        r = run_cli(*argv)
        files = {
            str(f.relative_to(tmp)): base64.b64encode(f.read_bytes()).decode()
            for f in sorted(Path(tmp).rglob("*"))
            if f.is_file()
        }
    return r, files


def _shared_writes(argv: tuple[str, ...]) -> tuple[Run, dict[str, str]]:
    """:func:`_writes` once per session: the first worker to ask runs it (under a file lock), the
    others read what it stored."""
    assert helpers.SHARED is not None
    name = hashlib.sha256("\0".join(argv).encode()).hexdigest()[:24]
    done = helpers.SHARED / f"writes-{name}.json"
    with open(helpers.SHARED / f"writes-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            stored = json.loads(done.read_text(encoding="utf-8"))
            return Run(**stored["run"]), stored["files"]
        r, files = _writes(argv)
        tmp = done.with_suffix(".tmp")
        stored = {"run": {"code": r.code, "stdout": r.stdout, "stderr": r.stderr}, "files": files}
        tmp.write_text(json.dumps(stored), encoding="utf-8")
        tmp.replace(done)
        return r, files


def _run_all(examples: list[Example], where: Path) -> list[str]:
    return [failure for ex in examples if (failure := _run(ex, where))]


def test_the_readme_shows_runnable_commands():
    found = readme_examples(README.read_text(encoding="utf-8"))
    argvs = [e.argv for e in found]
    assert ["compare", "vera-rubin", "blackwell"] in argvs  # the extraction works
    assert any(a[0] == "sweep" for a in argvs) and any(a[0] == "diff" for a in argvs)


@pytest.fixture
def in_tmp_path(tmp_path, monkeypatch):
    """The test runs in its own empty directory (its examples write files there and read them back).
    Through a fixture, not the test's own ``monkeypatch`` argument: a directory changes no estimate,
    so the examples keep the session's shared results (conftest.py's RL results and catalog)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.slow  # runs ipd calibrate and ipd validate
def test_every_readme_command_exits_as_documented(in_tmp_path):
    tmp_path = in_tmp_path
    # a command a --help example runs with the same exit codes, writing no file, is run there (the
    # help tests are parametrized, so pytest-xdist spreads them; here one worker would run
    # `ipd calibrate` while the other waited for it)
    in_help = {
        (tuple(e.argv), frozenset(e.codes)) for _, exs in help_examples() for e in exs if _stateless(e)
    }
    seen: set[tuple[str, ...]] = set()
    examples = []
    for ex in readme_examples(README.read_text(encoding="utf-8")):
        key = (*ex.argv, str(ex.stdout_to))
        if _stateless(ex) and (tuple(ex.argv), frozenset(ex.codes)) in in_help:
            continue
        if key not in seen:  # the README repeats its main command: run it once
            seen.add(key)
            examples.append(ex)
    failures = _run_all(examples, tmp_path)
    assert not failures, "\n".join(failures)


# the examples that take seconds: `ipd calibrate` runs the whole fit, `ipd validate` every case
SLOW_HELP = {"calibrate", "validate"}


@pytest.mark.parametrize(
    ("command", "examples"),
    [pytest.param(c, e, marks=pytest.mark.slow) if c in SLOW_HELP else (c, e) for c, e in help_examples()],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_help_example_exits_as_documented(command, examples, in_tmp_path):
    tmp_path = in_tmp_path
    assert examples, f"{command}: an Example: that is not an ipd command"
    failures = _run_all(examples, tmp_path)
    assert not failures, "\n".join(failures)


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _printed(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {})
    return out.getvalue()


@pytest.mark.parametrize("code", _python_blocks(README.read_text(encoding="utf-8")))
def test_readme_python_runs_and_its_overrides_matter(code):
    printed = _printed(code)
    assert printed.strip()
    # before: the snippet set electricity under rental pricing, which does not read it
    without = re.sub(r"sets=\[[^\]]*\]", "sets=[]", code)
    if without != code:
        assert _printed(without) != printed, "the README's override changes nothing in what it prints"


def test_the_readme_calls_a_system_roadmap_only_where_the_catalog_does(catalog):
    # the README said "roadmap Rubin" while `ipd hardware list` marks vera-rubin-nvl72 shipping
    import re

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert catalog.system("vera-rubin").status == "shipping"
    assert catalog.system("rubin-ultra").status == "roadmap"
    assert not re.search(r"roadmap Rubin(?! Ultra)", text, re.IGNORECASE)
