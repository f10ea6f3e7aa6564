"""Tokens of the CEL grammar, with literal values already decoded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from admission.core.cel.errors import Issue
from admission.core.cel.values import UInt

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n\f]+|//[^\n]*)
  | (?P<string>(?P<prefix>[rRbB]{0,2})(?P<body>\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''
        |"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*'))
  | (?P<double>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?))
  | (?P<hex>0[xX][0-9a-fA-F]+[uU]?)
  | (?P<int>\d+[uU]?)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}
_ESCAPE = re.compile(r"\\(?:([abfnrtv\\'\"`?])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
                     r"|([0-3][0-7]{2})|(.))", re.DOTALL)
_UINT64_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "int", "uint", "double", "string", "bytes", "ident", "punct", "eof"
    text: str
    pos: int
    value: object = None


class LexError(Exception):
    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def tokenize(source: str) -> Iterator[Token]:
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            raise LexError(Issue(pos, f"Syntax error: token recognition error at: '{source[pos]}'"))
        kind = match.lastgroup
        text = match.group()
        if kind == "body":  # the named inner group of a string literal
            kind = "string"
        if kind != "space":
            yield _token(kind or "", text, pos, match)
        pos = match.end()
    yield Token("eof", "", pos)


def _token(kind: str, text: str, pos: int, match: re.Match[str]) -> Token:
    if kind == "string":
        return _string_token(match.group("prefix").lower(), match.group("body"), pos)
    if kind == "double":
        return Token("double", text, pos, float(text))
    if kind in ("int", "hex"):
        unsigned = text[-1] in "uU"
        digits = text[:-1] if unsigned else text
        number = int(digits, 16) if kind == "hex" else int(digits)
        if unsigned:
            if number > _UINT64_MAX:
                raise LexError(Issue(pos, f"invalid uint literal: {text}"))
            return Token("uint", text, pos, UInt(number))
        return Token("int", text, pos, number)
    return Token(kind, text, pos)


def _string_token(prefix: str, body: str, pos: int) -> Token:
    if "r" in prefix and "b" in prefix:
        raw, is_bytes = True, True
    else:
        raw, is_bytes = prefix == "r", prefix == "b"
    quote = 3 if body[:3] in ('"""', "'''") else 1
    inner = body[quote:-quote]
    if raw:
        return Token("bytes" if is_bytes else "string", body, pos,
                     inner.encode() if is_bytes else inner)
    return Token("bytes" if is_bytes else "string", body, pos, _unescape(inner, is_bytes, pos))


def _unescape(inner: str, is_bytes: bool, pos: int) -> str | bytes:
    out = bytearray()
    last = 0
    for escape in _ESCAPE.finditer(inner):
        out += inner[last:escape.start()].encode()
        simple, hex2, hex4, hex8, octal, bad = escape.groups()
        if bad is not None:
            raise LexError(Issue(pos, f"Syntax error: invalid escape sequence '\\{bad}'"))
        if simple is not None:
            out += _SIMPLE_ESCAPES[simple].encode()
        elif hex2 is not None or octal is not None:
            code = int(hex2, 16) if hex2 is not None else int(octal, 8)
            out += bytes([code]) if is_bytes else chr(code).encode()
        else:
            if is_bytes:
                raise LexError(Issue(pos, "Syntax error: \\u and \\U escapes are not allowed in bytes"))
            code = int(hex4 or hex8, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise LexError(Issue(pos, f"Syntax error: invalid unicode code point {code:#x}"))
            out += chr(code).encode()
        last = escape.end()
    out += inner[last:].encode()
    if is_bytes:
        return bytes(out)
    try:
        return out.decode()
    except UnicodeDecodeError:
        raise LexError(Issue(pos, "Syntax error: string literal is not valid UTF-8")) from None
