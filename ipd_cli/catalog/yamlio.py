"""Reading YAML safely: regular files of bounded size, UTF-8 only, no Python tags, no duplicate keys, bounded
nesting and alias expansion. Every failure is a one-line :class:`InputError` naming the file."""

from __future__ import annotations

import datetime
import functools
import re
import sys
from pathlib import Path
from typing import Any

from ipd_cli.errors import InputError

MAX_FILE_BYTES = 2_000_000
MAX_DEPTH = 64  # the catalog is about 6 levels deep
MAX_NODES = MAX_FILE_BYTES  # aliases may not expand a document beyond what 2 MB could spell out


_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
# YAML 1.1 (PyYAML) reads 0x10 as 16, 0b11 as 3, 017 as 15 (octal) and 1:30 as 90 (base 60);
# YAML 1.2 reads 0o17 as 15. A spec written so is a typo far more often than a choice, and 017 or
# 1:30 would be taken silently; such a plain scalar is refused, naming it (quoted, it is text)
_NOT_DECIMAL = re.compile(
    r"^[-+]?(?:0b[0-1_]+|0o[0-7_]+|0[0-7_]+|0x[0-9a-fA-F_]+"
    r"|[1-9][0-9_]*(?::[0-5]?[0-9])+|[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*)$"
)
_NOT_DECIMAL_TAG = "tag:ipd,2026:not-decimal"


class _NotDecimal(Exception):
    """A plain scalar that YAML reads as a number not written in decimal (:data:`_NOT_DECIMAL`)."""

    def __init__(self, text: str, line: int) -> None:
        super().__init__(text)
        self.text, self.line = text, line


def _not_decimal(text: str) -> str:
    """What a :data:`_NOT_DECIMAL` scalar spells, and the fix."""
    digits = text.replace("_", "").lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    bases = {
        "0x": (16, "a hexadecimal number to YAML"),
        "0b": (2, "a binary number to YAML 1.1"),
        "0o": (8, "an octal number to YAML 1.2"),
    }
    what, radix = "an octal number to YAML 1.1", 8  # 017
    if ":" in digits:
        what, radix = "a base-60 number to YAML 1.1", 60
    elif digits[:2] in bases:
        radix, what = bases[digits[:2]]
        digits = digits[2:]
    spelled = ""
    try:  # the value, of a short scalar (a review: 20,000 base-60 parts took 5 s)
        if len(text) <= 20 and radix == 60:
            *whole, last = digits.split(":")
            value: float = sum(int(p) * 60 ** (len(whole) - k) for k, p in enumerate(whole))
            spelled = f" ({sign * (value + (float(last) if '.' in last else int(last)))})"
        elif len(text) <= 20:
            spelled = f" ({sign * int(digits, radix)})"
    except ValueError:  # 0x_: no digits
        pass
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    return f"{shown} is {what}{spelled}; write numbers in decimal, or quote it if it is text"


@functools.cache
def _strict_loader() -> type:
    """A safe loader (libyaml's when available) that refuses duplicate keys.

    Built on first use so that commands served from the catalog cache never import yaml.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        if base is yaml.SafeLoader:  # without libyaml: PyYAML's composer recurses once per level,
            # and its scanner re-checks every open level on each token (5,000 levels took 1.4 s to
            # reach the RecursionError); stop composing a little past MAX_DEPTH, where
            # _check_shape's exact count would refuse the document anyway (libyaml stops at 1,000)
            _depth = 0

            def compose_node(self, parent: Any, index: Any) -> Any:
                self._depth += 1
                try:
                    if self._depth > MAX_DEPTH + 2:
                        raise RecursionError  # read by _parse as "nested deeper than MAX_DEPTH"
                    return super().compose_node(parent, index)
                finally:
                    self._depth -= 1

    def no_duplicates(loader: Any, node: Any, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            mark = key_node.start_mark
            try:
                first = seen.get(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a plain value, not a list or mapping", mark
                ) from None
            if first is not None:
                problem = f"duplicate key '{key}' (first at line {first.line + 1}); keep one"
                raise yaml.constructor.ConstructorError(None, None, problem, mark)
            seen[key] = mark
        return loader.construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, no_duplicates)
    # YAML 1.1 (PyYAML) reads 1e14 and 1.0e14 as strings; read them as the numbers they spell, as
    # YAML 1.2 does, so that number fields can refuse strings
    StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))
    for first in "-+0123456789":  # before YAML 1.1's int and float, which would take them
        StrictLoader.yaml_implicit_resolvers[first].insert(0, (_NOT_DECIMAL_TAG, _NOT_DECIMAL))

    def not_decimal(loader: Any, node: Any) -> Any:
        raise _NotDecimal(node.value, node.start_mark.line + 1)

    StrictLoader.add_constructor(_NOT_DECIMAL_TAG, not_decimal)
    return StrictLoader


def _too_large(name: str) -> InputError:
    return InputError(f"{name}: larger than {MAX_FILE_BYTES:,} bytes; refusing to read it")


def _read_bytes(p: Path, name: str) -> bytes:
    """A regular file of at most MAX_FILE_BYTES (a FIFO or a device such as /dev/zero is refused)."""
    from ipd_cli.files import read_bounded

    return read_bounded(p, MAX_FILE_BYTES, name, hint="give a YAML file")


def _check_shape(doc: Any, name: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH, recursive aliases, and alias bombs.

    The safe loader shares aliased nodes, so a 'billion laughs' file parses fast; but any walk
    over it (validation, the source check, JSON) pays for the expanded tree. The expanded size
    is counted here once per distinct node.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, height)
    active: set[int] = set()

    def walk(node: Any, level: int) -> tuple[int, int]:
        if not isinstance(node, dict | list):
            return 1, 0
        key = id(node)
        if key in active:
            raise InputError(f"{name}: an alias refers to itself (a recursive document); remove it")
        if key not in sizes:
            if level > MAX_DEPTH:
                raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels; refusing it")
            active.add(key)
            children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
            size, height = 1, 0
            for child in children:
                s, h = walk(child, level + 1)
                size, height = size + s, max(height, h + 1)
                if size > MAX_NODES:
                    raise InputError(f"{name}: aliases expand to over {MAX_NODES:,} values; refusing it")
            active.discard(key)
            sizes[key] = (size, height)
        size, height = sizes[key]
        if level + height > MAX_DEPTH:
            raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels; refusing it")
        return size, height

    walk(doc, 0)


def read_text(path: Path, name: str) -> str:
    """A YAML file's text (a regular file of bounded size, UTF-8), each failure one line naming it."""
    data = _read_bytes(path, name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name}: not UTF-8 text (byte {e.start}); save the file as UTF-8 YAML") from None


def read_yaml(path: Path | str, text: str | None = None, label: str | None = None, keep: bool = True) -> Any:
    """Parse one YAML document safely; every failure is a one-line InputError naming the file.

    Refused: anything but a regular file (FIFOs, devices), files over MAX_FILE_BYTES, non-UTF-8
    or binary content, Python tags (safe loader), duplicate keys, nesting deeper than MAX_DEPTH
    and alias expansion beyond MAX_NODES. ``keep``: the document is kept for the next read of the
    same text (see ``_PARSED``).
    """
    name = label or str(path)
    if text is None:
        text = read_text(Path(path), name)
    elif len(text) > MAX_FILE_BYTES:
        raise _too_large(name)
    else:
        try:  # stdin decoded with surrogateescape carries undecodable bytes as lone surrogates
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(f"{name}: not UTF-8 text (character {e.start}); give UTF-8 YAML") from None
    if "\x00" in text:
        raise InputError(f"{name}: binary content; expected UTF-8 YAML")
    doc = _PARSED.get(text)
    if doc is None:
        doc = _parse(text, name)
        if keep and len(text) <= _PARSED_TEXT_MAX:
            while len(_PARSED) >= _PARSED_MAX:
                del _PARSED[next(iter(_PARSED))]  # the oldest
            _PARSED[text] = doc
    return _copied(doc)  # the caller may change it (user files get their sources filled in)


def _copied(node: Any) -> Any:
    """A copy of a parsed document the caller may change: its dicts and lists copied, its scalars
    (str, numbers, bool, None, dates) shared, as they cannot change; anything else the safe loader
    builds (a !!set) deep-copied. copy.deepcopy of the catalog's files cost about 1 ms a file."""
    kind = type(node)
    if kind is dict:
        return {k: _copied(v) for k, v in node.items()}
    if kind is list:
        return [_copied(v) for v in node]
    if kind in _SCALARS:
        return node
    import copy

    return copy.deepcopy(node)


_SCALARS = frozenset({str, int, float, bool, type(None), bytes, datetime.date, datetime.datetime})

# Documents already parsed in this process, by their text: a process that loads the catalog again
# with other user directories (the API, tests) parses the built-in files once. Parsing is about ten
# times the cost of the copy each read returns. A --set value is not kept (keep=False): it parses
# in ~12 us, and calibrate's ~1,000 trial values pushed the files out, the validation cases among
# them (~180 ms to parse again, at each `ipd validate` or calibrate of a process after one).
_PARSED: dict[str, Any] = {}
_PARSED_MAX = 64
_PARSED_TEXT_MAX = 1_000_000  # the validation cases (about 460 kB) included


def _char_at(text: str, mark: Any) -> str:
    """The character at a YAML error's mark ('' past the end)."""
    lines = text.splitlines()
    line = lines[mark.line] if 0 <= mark.line < len(lines) else ""
    return line[mark.column] if 0 <= mark.column < len(line) else ""


def _parse(text: str, name: str) -> Any:
    import yaml

    try:
        doc = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a safe loader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = str(e.problem or e.context)
        if "tag:yaml.org,2002:merge" in problem:  # the strict loader takes no `<<:` merge keys
            problem = "a merge key (<<:) is not taken; write the keys out"
        elif "another document" in problem:
            one = "give one value" if name.startswith("`sets`") else "give one mapping per file"
            problem = f"a second document (---) is not taken; {one}"
        elif "'\\t'" in problem or (mark is not None and _char_at(text, mark) == "\t"):
            problem += "; a tab: YAML indents with spaces"  # PyYAML's words alone (a fresh-eyes review)
        raise InputError(f"{name}: invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{name}: invalid YAML: {e}") from None
    except _NotDecimal as e:  # 0x10, 017, 1:30 (the input review's leftovers: 0x10 read as 16)
        where = "" if name.startswith("`sets`") else f" line {e.line}:"
        raise InputError(f"{name}:{where} {_not_decimal(e.text)}") from None
    except RecursionError:  # the pure-Python parser recurses per level; libyaml stops at 1000
        raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels; refusing it") from None
    except ValueError as e:  # an integer of more digits than Python converts (an input review)
        if "digits" not in str(e):
            raise
        digits = sys.get_int_max_str_digits()
        raise InputError(
            f"{name}: a whole number of more than {digits:,} digits; give a float (1e300)"
        ) from None
    _check_shape(doc, name)
    return doc
