"""Recursive-descent parser for CEL's grammar; macros are expanded into dedicated nodes."""

from __future__ import annotations

from admission.core.cel import ast
from admission.core.cel.errors import Issue
from admission.core.cel.lexer import LexError, Token, tokenize
from admission.core.cel.values import INT64_MAX, INT64_MIN

_RESERVED = frozenset({
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
    "package", "namespace", "return", "var", "void", "while", "in",
})
_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_", "in": "@in"}
_ADDITIVE = {"+": "_+_", "-": "_-_"}
_MULTIPLICATIVE = {"*": "_*_", "/": "_/_", "%": "_%_"}
_ONE_VAR_MACROS = {"all": 2, "exists": 2, "exists_one": 2, "existsOne": 2, "map": (2, 3), "filter": 2}
_TWO_VAR_MACROS = {"all", "exists", "exists_one", "existsOne", "transformList", "transformMap"}
MAX_NESTING = 64


class ParseError(Exception):
    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def parse(source: str) -> ast.Node:
    try:
        tokens = list(tokenize(source))
    except LexError as error:
        raise ParseError(error.issue) from None
    parser = _Parser(tokens)
    node = parser.expression()
    if parser.peek().kind != "eof":
        parser.fail(f"Syntax error: extraneous input '{parser.peek().text}'")
    return node


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    # -- token helpers ------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.index += 1
        return token

    def at(self, text: str) -> bool:
        token = self.peek()
        return (token.kind == "punct" and token.text == text) or (token.kind == "ident" and token.text == text)

    def expect(self, text: str) -> Token:
        if not self.at(text):
            token = self.peek()
            shown = "<EOF>" if token.kind == "eof" else token.text
            self.fail(f"Syntax error: mismatched input '{shown}' expecting '{text}'")
        return self.advance()

    def fail(self, message: str, pos: int | None = None) -> None:
        raise ParseError(Issue(self.peek().pos if pos is None else pos, message))

    # -- grammar ------------------------------------------------------------------------------------
    def expression(self) -> ast.Node:
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail("expression recursion limit exceeded")
        condition = self.or_expr()
        if self.at("?"):
            pos = self.advance().pos
            when_true = self.or_expr()
            self.expect(":")
            when_false = self.expression()
            condition = ast.Call(pos, "_?_:_", None, (condition, when_true, when_false))
        self.depth -= 1
        return condition

    def or_expr(self) -> ast.Node:
        node = self.and_expr()
        while self.at("||"):
            pos = self.advance().pos
            node = ast.Call(pos, "_||_", None, (node, self.and_expr()))
        return node

    def and_expr(self) -> ast.Node:
        node = self.relation()
        while self.at("&&"):
            pos = self.advance().pos
            node = ast.Call(pos, "_&&_", None, (node, self.relation()))
        return node

    def relation(self) -> ast.Node:
        node = self.addition()
        while self.peek().text in _RELATIONS and self.peek().kind in ("punct", "ident"):
            token = self.advance()
            node = ast.Call(token.pos, _RELATIONS[token.text], None, (node, self.addition()))
        return node

    def addition(self) -> ast.Node:
        node = self.multiplication()
        while self.peek().kind == "punct" and self.peek().text in _ADDITIVE:
            token = self.advance()
            node = ast.Call(token.pos, _ADDITIVE[token.text], None, (node, self.multiplication()))
        return node

    def multiplication(self) -> ast.Node:
        node = self.unary()
        while self.peek().kind == "punct" and self.peek().text in _MULTIPLICATIVE:
            token = self.advance()
            node = ast.Call(token.pos, _MULTIPLICATIVE[token.text], None, (node, self.unary()))
        return node

    def unary(self) -> ast.Node:
        """CEL's `Unary = Member | "!" {"!"} Member | "-" {"-"} Member`, as cel-go and cel-cpp parse it.

        A Member may start with a signed number literal (`-9223372036854775808` is a valid int), and
        a single `-` before a number is that literal's sign. A run of two or more `-` takes every `-`,
        so its Member is the unsigned literal, which must be in range on its own: `--9223372036854775808`
        and `---9223372036854775808` are invalid int literals, as is `-(9223372036854775808)`. A run of
        an even number of operators is dropped (`--x` is `x`, `!!x` is `x`), an odd one is one call.
        """
        token = self.peek()
        if token.kind != "punct" or token.text not in ("!", "-"):
            return self.member()
        if token.text == "-" and self._at_signed_number():
            return self.signed_member()
        operators = []
        while self.peek().kind == "punct" and self.peek().text == token.text:
            operators.append(self.advance())
        node = self.signed_member() if token.text == "!" else self.member()
        if len(operators) % 2 == 1:
            node = ast.Call(operators[0].pos, "!_" if token.text == "!" else "-_", None, (node,))
        return node

    def _at_signed_number(self) -> bool:
        """At `-` directly followed by an int or double literal (whitespace between them is allowed)."""
        return (self.peek().kind == "punct" and self.peek().text == "-"
                and self.peek(1).kind in ("int", "double"))

    def signed_member(self) -> ast.Node:
        """A Member that may start with a signed number literal: `-1`, `-9223372036854775808`, `-1.5`."""
        if not self._at_signed_number():
            return self.member()
        sign = self.advance()
        number = self.advance()
        value = -number.value  # type: ignore[operator]
        if number.kind == "int" and value < INT64_MIN:
            self.fail(f"invalid int literal: -{number.text}", sign.pos)
        return self.member_suffixes(ast.Literal(sign.pos, value))

    def member(self) -> ast.Node:
        return self.member_suffixes(self.primary())

    def member_suffixes(self, node: ast.Node) -> ast.Node:
        while True:
            if self.at("."):
                dot = self.advance()
                optional = False
                if self.at("?") and self.peek().pos == dot.pos + 1:
                    self.advance()
                    optional = True
                name = self.identifier()
                if self.at("(") and not optional:
                    open_pos = self.advance().pos
                    args = self.arguments(")")
                    node = self.member_call(open_pos, node, name.text, args)
                else:
                    node = ast.Select(dot.pos, node, name.text, optional=optional)
            elif self.at("["):
                open_pos = self.advance().pos
                optional = False
                if self.at("?"):
                    self.advance()
                    optional = True
                index = self.expression()
                self.expect("]")
                node = ast.Index(open_pos, node, index, optional)
            else:
                return node

    def identifier(self) -> Token:
        token = self.peek()
        if token.kind != "ident":
            shown = "<EOF>" if token.kind == "eof" else token.text
            self.fail(f"Syntax error: mismatched input '{shown}' expecting IDENTIFIER")
        if token.text in _RESERVED:
            self.fail(f"Syntax error: reserved identifier: {token.text}")
        return self.advance()

    def arguments(self, closing: str) -> tuple[ast.Node, ...]:
        args: list[ast.Node] = []
        while not self.at(closing):
            args.append(self.expression())
            if not self.at(closing):
                self.expect(",")
        self.expect(closing)
        return tuple(args)

    def primary(self) -> ast.Node:
        token = self.peek()
        if token.kind in ("int", "uint", "double", "string", "bytes"):
            self.advance()
            if token.kind == "int" and token.value > INT64_MAX:  # type: ignore[operator]
                self.fail(f"invalid int literal: {token.text}", token.pos)
            return ast.Literal(token.pos, token.value)
        if token.kind == "ident":
            if token.text in ("true", "false", "null"):
                self.advance()
                return ast.Literal(token.pos, {"true": True, "false": False, "null": None}[token.text])
            name = self.identifier()
            if self.at("("):
                open_pos = self.advance().pos
                return self.global_call(open_pos, name.text, self.arguments(")"))
            if self.at("{"):
                self.fail("Syntax error: message construction is not supported")
            return ast.Ident(name.pos, name.text)
        if self.at("."):
            self.advance()  # a leading dot names the root container; there is only one
            name = self.identifier()
            if self.at("("):
                open_pos = self.advance().pos
                return self.global_call(open_pos, name.text, self.arguments(")"))
            return ast.Ident(name.pos, name.text)
        if self.at("("):
            self.advance()
            node = self.expression()
            self.expect(")")
            return node
        if self.at("["):
            return self.list_literal()
        if self.at("{"):
            return self.map_literal()
        shown = "<EOF>" if token.kind == "eof" else token.text
        self.fail(f"Syntax error: mismatched input '{shown}' expecting expression")
        raise AssertionError("unreachable")

    def list_literal(self) -> ast.Node:
        pos = self.expect("[").pos
        elements: list[ast.Node] = []
        optional: set[int] = set()
        while not self.at("]"):
            if self.at("?"):
                self.advance()
                optional.add(len(elements))
            elements.append(self.expression())
            if not self.at("]"):
                self.expect(",")
        self.expect("]")
        return ast.ListLit(pos, tuple(elements), frozenset(optional))

    def map_literal(self) -> ast.Node:
        pos = self.expect("{").pos
        entries: list[ast.MapEntry] = []
        while not self.at("}"):
            optional = False
            if self.at("?"):
                self.advance()
                optional = True
            key = self.expression()
            self.expect(":")
            entries.append(ast.MapEntry(key, self.expression(), optional))
            if not self.at("}"):
                self.expect(",")
        self.expect("}")
        return ast.MapLit(pos, tuple(entries))

    # -- macros -------------------------------------------------------------------------------------
    def global_call(self, pos: int, name: str, args: tuple[ast.Node, ...]) -> ast.Node:
        if name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, ast.Select) or arg.optional:
                self.fail("invalid argument to has() macro", arg.pos)
            assert isinstance(arg, ast.Select)
            return ast.Select(arg.pos, arg.operand, arg.field, test_only=True)
        return ast.Call(pos, name, None, args)

    def member_call(self, pos: int, target: ast.Node, name: str, args: tuple[ast.Node, ...]) -> ast.Node:
        if name == "bind" and isinstance(target, ast.Ident) and target.name == "cel" and len(args) == 3:
            variable = args[0]
            if not isinstance(variable, ast.Ident):
                self.fail("cel.bind() variable name must be a simple identifier", variable.pos)
            assert isinstance(variable, ast.Ident)
            return ast.Bind(pos, variable.name, args[1], args[2])
        arity = _ONE_VAR_MACROS.get(name)
        if arity is not None and (len(args) == arity or (isinstance(arity, tuple) and len(args) in arity)):
            if name != "map" and len(args) == 3:
                pass  # two-variable form, handled below
            else:
                return ast.Comprehension(pos, name, target, (self.loop_variable(args[0]),), args[1:])
        if name in _TWO_VAR_MACROS and len(args) == 3:
            variables = (self.loop_variable(args[0]), self.loop_variable(args[1]))
            if variables[0] == variables[1]:
                self.fail(f"{name}() variables must be distinct", args[1].pos)
            return ast.Comprehension(pos, name, target, variables, args[2:])
        if name in ("transformList", "transformMap") and len(args) == 4:
            variables = (self.loop_variable(args[0]), self.loop_variable(args[1]))
            return ast.Comprehension(pos, name, target, variables, args[2:])
        return ast.Call(pos, name, target, args)

    def loop_variable(self, node: ast.Node) -> str:
        if not isinstance(node, ast.Ident):
            self.fail("argument must be a simple name", node.pos)
        assert isinstance(node, ast.Ident)
        return node.name
