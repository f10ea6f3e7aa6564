"""CEL's string extensions (ext strings) and regex `find` / `findAll`."""

from __future__ import annotations

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.functions import define
from admission.core.cel.regex import compiled
from admission.core.cel.values import kind


def _check_index(text: str, index: int, what: str) -> None:
    if not 0 <= index <= len(text):
        raise CelRuntimeError(f"index out of range: {index}")
    del what


@define("charAt", "string, int", "string", member=True)
def _char_at(text: str, index: int) -> str:
    _check_index(text, index, "charAt")
    return text[index:index + 1]


@define("indexOf", "string, string", "int", member=True)
def _index_of(text: str, part: str) -> int:
    return text.find(part)


@define("indexOf", "string, string, int", "int", member=True)
def _index_of_from(text: str, part: str, offset: int) -> int:
    _check_index(text, offset, "indexOf")
    return text.find(part, offset)


@define("lastIndexOf", "string, string", "int", member=True)
def _last_index_of(text: str, part: str) -> int:
    return text.rfind(part)


@define("lastIndexOf", "string, string, int", "int", member=True)
def _last_index_of_from(text: str, part: str, offset: int) -> int:
    _check_index(text, offset, "lastIndexOf")
    return text.rfind(part, 0, offset + len(part))


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@define("lowerAscii", "string", "string", member=True)
def _lower_ascii(text: str) -> str:
    return text.translate(_LOWER)


@define("upperAscii", "string", "string", member=True)
def _upper_ascii(text: str) -> str:
    return text.translate(_UPPER)


# The longest string a single call may build: the cost limit is charged after a call returns, so
# a call that would multiply sizes (`replace('', long)`) is stopped before it allocates.
MAX_RESULT_LENGTH = 10_000_000


@define("replace", "string, string, string", "string", member=True)
def _replace(text: str, old: str, new: str) -> str:
    return _replace_n(text, old, new, -1)


@define("replace", "string, string, string, int", "string", member=True)
def _replace_n(text: str, old: str, new: str, count: int) -> str:
    occurrences = text.count(old)
    if count >= 0:
        occurrences = min(occurrences, count)
    if len(text) + occurrences * (len(new) - len(old)) > MAX_RESULT_LENGTH:
        raise CelRuntimeError("operation cancelled: actual cost limit exceeded (replace() result too large)")
    return text.replace(old, new, count if count >= 0 else -1)


@define("split", "string, string", "list(string)", member=True)
def _split(text: str, separator: str) -> tuple[str, ...]:
    return _split_n(text, separator, -1)


@define("split", "string, string, int", "list(string)", member=True)
def _split_n(text: str, separator: str, count: int) -> tuple[str, ...]:
    if count == 0:
        return ()
    if separator == "":
        chars = list(text)
        if 0 < count < len(chars):
            chars = [*chars[:count - 1], "".join(chars[count - 1:])]
        return tuple(chars)
    return tuple(text.split(separator, count - 1 if count > 0 else -1))


@define("substring", "string, int", "string", member=True)
def _substring(text: str, start: int) -> str:
    _check_index(text, start, "substring")
    return text[start:]


@define("substring", "string, int, int", "string", member=True)
def _substring_range(text: str, start: int, end: int) -> str:
    _check_index(text, start, "substring")
    _check_index(text, end, "substring")
    if end < start:
        raise CelRuntimeError(f"invalid substring range. start: {start}, end: {end}")
    return text[start:end]


@define("trim", "string", "string", member=True)
def _trim(text: str) -> str:
    return text.strip()


@define("reverse", "string", "string", member=True)
def _reverse(text: str) -> str:
    return text[::-1]


@define("join", "list(string)", "string", member=True)
def _join(items: tuple[object, ...]) -> str:
    return _join_with(items, "")


@define("join", "list(string), string", "string", member=True)
def _join_with(items: tuple[object, ...], separator: str) -> str:
    for item in items:
        if not isinstance(item, str):
            raise CelRuntimeError(f"join: list element of type {kind(item)} is not a string")
    return separator.join(items)  # type: ignore[arg-type]


@define("strings.quote", "string", "string")
def _quote(text: str) -> str:
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{escaped}"'


@define("find", "string, string", "string", member=True)
def _find(text: str, pattern: str) -> str:
    match = compiled(pattern).search(text)
    return match.group() if match else ""


@define("findAll", "string, string", "list(string)", member=True)
def _find_all(text: str, pattern: str) -> tuple[str, ...]:
    return _find_all_n(text, pattern, -1)


@define("findAll", "string, string, int", "list(string)", member=True)
def _find_all_n(text: str, pattern: str, limit: int) -> tuple[str, ...]:
    if limit == 0:
        return ()
    found = [m.group() for m in compiled(pattern).finditer(text)]
    return tuple(found if limit < 0 else found[:limit])
