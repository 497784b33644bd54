"""SQL92 message selectors (``MessageSelector.bySql``), with the reference broker's grammar and
its three-valued evaluation over a message's properties.

Grammar (keywords in any case): ``OR`` < ``AND`` < ``=``, ``<>``, ``IS [NOT] NULL`` <
``>``, ``>=``, ``<``, ``<=``, ``[NOT] BETWEEN a AND b``, ``[NOT] IN ('s', ...)`` < unary ``+``,
``-``, ``NOT`` < a literal, a property name or ``( ... )``. Literals: integers (``L`` suffix for
long), decimals with optional exponent, ``'strings'`` (``''`` is a quote), ``TRUE``, ``FALSE``,
``NULL``. Comments ``-- ...`` and ``/* ... */``. Unlike the reference, whose parser stops after a
complete expression and ignores the rest (``a LIKE 'x%'`` compiles there, as the property ``a``
alone, and matches nothing), anything after it is refused: a selector is never half read.

Evaluation, as the reference does it: a missing property is NULL; a comparison with NULL is NULL
(unknown), and so are ``<>`` and ``NOT IN`` of a missing property; ``IS NULL`` is true only for a
missing one. A property (always a string) compared with a number is converted to that number's
type, so ``a > 10`` cannot compare ``10.5`` (write ``10.0``): the conversion fails, and a failure
anywhere makes the whole selector not match. Only TRUE selects a message.

Size: parsing and evaluation recurse, so a selector may nest parentheses and unary operators at
most ``MAX_NESTING`` deep and hold at most ``MAX_OPERATORS`` operators (an ``IN`` list counts as
one): a client's selector is refused (SelectorError) rather than exhausting the stack on a pull.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from codec.errors import MessageError
from codec.message import decode_message

__all__ = ["SelectorError", "SqlFilter", "compile_selector"]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}
#: Parentheses and unary operators nested deeper than this are refused (parsing recurses per level).
MAX_NESTING = 64
#: Operators (AND, OR, NOT, comparisons, BETWEEN, IN, IS, unary signs) in one selector; evaluation
#: recurses once per operator on a chain, so this bounds its depth too.
MAX_OPERATORS = 200
_OPERATORS = {"NOT", "AND", "OR", "BETWEEN", "IN", "IS", "=", "<>", ">", ">=", "<", "<=", "+", "-"}
_TOKEN = re.compile(
    r"""(?P<space>\s+|--[^\n\r]*|/\*.*?\*/)
      | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
      | (?P<int>(?:0|[1-9][0-9]*)[lL]?)
      | (?P<string>'(?:[^']|'')*')
      | (?P<name>[a-zA-Z_$][a-zA-Z0-9_$]*)
      | (?P<op><>|>=|<=|[=<>(),+-])""",
    re.VERBOSE | re.DOTALL,
)


class SelectorError(ValueError):
    """The selector does not compile (the reference answers SUBSCRIPTION_PARSE_FAILED)."""


class _Failed(Exception):
    """Evaluation failed (a conversion Java would throw on): the message does not match."""


# --- values ----------------------------------------------------------------------------------
# A value is None (NULL / unknown), bool, str, or a number tagged with its Java type, since the
# conversion of a property depends on it: ("int" | "long" | "double", value).


class _Num(tuple):
    __slots__ = ()

    @property
    def kind(self) -> str:
        return self[0]

    @property
    def value(self) -> int | float:
        return self[1]


def _num(kind: str, value: int | float) -> _Num:
    return _Num((kind, value))


_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\s*")


def _convert(text: str, like: Any) -> Any:
    """Java's ``Integer/Long/Double/Boolean.valueOf`` of a property, to the other side's type."""
    if isinstance(like, bool):
        return text.lower() == "true"
    kind = like.kind
    if kind in ("int", "long"):
        if not _JAVA_INT.fullmatch(text):
            raise _Failed
        value = int(text)
        low, high = _INT32 if kind == "int" else _INT64
        if not low <= value <= high:
            raise _Failed
        return _num(kind, value)
    if not _JAVA_DOUBLE.fullmatch(text):
        raise _Failed
    return _num("double", float(text.strip().rstrip("fFdD")))


def _compare(left: Any, right: Any) -> int:
    """Java ``ComparisonExpression.__compare``: the sign of left - right after conversion; -1 for
    values of kinds that do not compare (e.g. a boolean and a number)."""
    if isinstance(left, str) and not isinstance(right, str):
        left = _convert(left, right)
    elif isinstance(right, str) and not isinstance(left, str):
        right = _convert(right, left)
    if isinstance(left, _Num) and isinstance(right, _Num):
        a, b = left.value, right.value
        return (a > b) - (a < b)
    if type(left) is type(right):  # str with str, bool with bool
        return (left > right) - (left < right)
    return -1


# --- expressions, compiled to closures over the property map ---------------------------------

Expr = Callable[[Mapping[str, str]], Any]


def _constant(value: Any) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        return value

    expr.constant = value  # type: ignore[attr-defined]
    return expr


def _property(name: str) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        return props.get(name)

    expr.property = name  # type: ignore[attr-defined]
    return expr


def _is_constant(expr: Expr) -> bool:
    return hasattr(expr, "constant")


def _boolean(expr: Expr) -> Expr:
    """What a boolean context makes of ``expr`` (Java ``asBooleanExpression``)."""
    if getattr(expr, "boolean", False):
        return expr
    if hasattr(expr, "property"):  # a bare property is TRUE only if it is a Boolean: never, for strings
        def cast(props: Mapping[str, str]) -> Any:
            return expr(props) is True

        cast.boolean = True  # type: ignore[attr-defined]
        return cast
    if _is_constant(expr) and isinstance(expr.constant, bool):  # type: ignore[attr-defined]
        expr.boolean = True  # type: ignore[attr-defined]
        return expr
    raise SelectorError("Expression will not result in a boolean value")


def _bool_expr(fn: Expr) -> Expr:
    fn.boolean = True  # type: ignore[attr-defined]
    return fn


def _and(left: Expr, right: Expr) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        lv = left(props)
        if lv is False:
            return False
        rv = right(props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return _bool_expr(expr)


def _or(left: Expr, right: Expr) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        lv = left(props)
        if lv is True:
            return True
        rv = right(props)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return _bool_expr(expr)


def _not(inner: Expr) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        value = inner(props)
        return None if value is None else not value

    return _bool_expr(expr)


def _equal(left: Expr, right: Expr) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        lv, rv = left(props), right(props)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        if lv == rv and type(lv) is type(rv):
            return True
        return _compare(lv, rv) == 0

    return _bool_expr(expr)


_ORDERING = {">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}


def _ordered(op: str, left: Expr, right: Expr) -> Expr:
    test = _ORDERING[op]

    def expr(props: Mapping[str, str]) -> Any:
        lv, rv = left(props), right(props)
        if lv is None or rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):  # two strings compare as doubles, or fail
            lv, rv = _convert(lv, _num("double", 0.0)), _convert(rv, _num("double", 0.0))
        return test(_compare(lv, rv))

    return _bool_expr(expr)


def _in(left: Expr, values: frozenset[str], negate: bool) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        value = left(props)
        if not isinstance(value, str):
            return None
        return (value in values) != negate

    return _bool_expr(expr)


def _is_null(inner: Expr, negate: bool) -> Expr:
    def expr(props: Mapping[str, str]) -> Any:
        return (inner(props) is None) != negate

    return _bool_expr(expr)


def _negate(inner: Expr) -> Expr:
    if _is_constant(inner) and isinstance(inner.constant, _Num):  # type: ignore[attr-defined]
        kind, value = inner.constant  # type: ignore[attr-defined]
        return _constant(_num(kind, -value))

    def expr(props: Mapping[str, str]) -> Any:
        value = inner(props)
        return _num(value.kind, -value.value) if isinstance(value, _Num) else None

    return expr


# --- parser ----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                raise SelectorError(f"unexpected character {text[pos]!r} at column {pos + 1}")
            kind = match.lastgroup or ""
            if kind != "space":
                word = match.group()
                if kind == "name" and word.upper() in _KEYWORDS:
                    kind, word = "keyword", word.upper()
                self.tokens.append((kind, word))
            pos = match.end()
        self.at = 0
        self.nesting = 0
        operators = sum(1 for kind, word in self.tokens if kind in ("keyword", "op") and word in _OPERATORS)
        if operators > MAX_OPERATORS:
            raise SelectorError(f"the expression has {operators} operators; at most {MAX_OPERATORS} are allowed")

    def peek(self, *words: str) -> bool:
        if self.at >= len(self.tokens):
            return False
        kind, word = self.tokens[self.at]
        return kind in ("keyword", "op") and word in words

    def take(self, *words: str) -> str | None:
        if self.peek(*words):
            self.at += 1
            return self.tokens[self.at - 1][1]
        return None

    def expect(self, word: str) -> None:
        if self.take(word) is None:
            raise SelectorError(f"expected {word} {self._where()}")

    def _where(self) -> str:
        return f"at {self.tokens[self.at][1]!r}" if self.at < len(self.tokens) else "at the end"

    def selector(self) -> Expr:
        if not self.tokens:
            raise SelectorError("empty expression")
        expr = _boolean(self.or_expr())
        if self.at < len(self.tokens):  # the reference's parser ignores them: "a LIKE 'x'" would match nothing
            raise SelectorError(f"unexpected {self.tokens[self.at][1]!r} after a complete expression")
        return expr

    def or_expr(self) -> Expr:
        left = self.and_expr()
        while self.take("OR"):
            left = _or(_boolean(left), _boolean(self.and_expr()))
        return left

    def and_expr(self) -> Expr:
        left = self.equality()
        while self.take("AND"):
            left = _and(_boolean(left), _boolean(self.equality()))
        return left

    def equality(self) -> Expr:
        left = self.comparison()
        while True:
            if self.take("="):
                left = self._checked_equal(left, self.comparison())
            elif self.take("<>"):
                left = _not(self._checked_equal(left, self.comparison()))
            elif self.take("IS"):
                negate = self.take("NOT") is not None
                self.expect("NULL")
                left = _is_null(left, negate)
            else:
                return left

    def _checked_equal(self, left: Expr, right: Expr) -> Expr:
        for side in (left, right):
            if _is_constant(side) and side.constant is None:  # type: ignore[attr-defined]
                raise SelectorError("'=' and '<>' cannot be used with null: use IS [NOT] NULL")
        if _is_constant(left) and _is_constant(right):
            lc, rc = left.constant, right.constant  # type: ignore[attr-defined]
            if isinstance(lc, bool) != isinstance(rc, bool):
                raise SelectorError(f"cannot compare {lc!r} with {rc!r}")
        return _equal(left, right)

    def comparison(self) -> Expr:
        left = self.unary()
        while True:
            op = self.take(">", ">=", "<", "<=")
            if op is not None:
                right = self.unary()
                self._check_ordered(left, right)
                left = _ordered(op, left, right)
                continue
            negate = False
            if self.peek("NOT") and self.at + 1 < len(self.tokens) and self.tokens[self.at + 1][1] in ("BETWEEN", "IN"):
                self.at += 1
                negate = True
            if self.take("BETWEEN"):
                low = self.unary()
                self.expect("AND")
                high = self.unary()
                left = self._between(left, low, high, negate)
            elif self.take("IN"):
                left = self._in_list(left, negate)
            else:
                return left

    def _check_ordered(self, left: Expr, right: Expr) -> None:
        for side in (left, right):
            if getattr(side, "boolean", False):
                raise SelectorError("a boolean expression cannot be compared with > >= < <=")
            if _is_constant(side) and not isinstance(side.constant, _Num):  # type: ignore[attr-defined]
                raise SelectorError(f"{side.constant!r} cannot be compared with > >= < <=")  # type: ignore[attr-defined]

    def _between(self, value: Expr, low: Expr, high: Expr, negate: bool) -> Expr:
        for bound in (low, high):
            if not _is_constant(bound) or not isinstance(bound.constant, _Num):  # type: ignore[attr-defined]
                raise SelectorError("Illegal values of between: its bounds must be numbers")
        if low.constant.value > high.constant.value:  # type: ignore[attr-defined]
            raise SelectorError("Illegal values of between: the low bound is above the high one")
        if negate:
            return _or(_ordered("<", value, low), _ordered(">", value, high))
        return _and(_ordered(">=", value, low), _ordered("<=", value, high))

    def _in_list(self, left: Expr, negate: bool) -> Expr:
        if not hasattr(left, "property"):
            raise SelectorError("IN needs a property on its left")
        self.expect("(")
        values = [self._string()]
        while self.take(","):
            values.append(self._string())
        self.expect(")")
        return _in(left, frozenset(values), negate)

    def _string(self) -> str:
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "string":
            self.at += 1
            return self.tokens[self.at - 1][1][1:-1].replace("''", "'")
        raise SelectorError(f"expected a string {self._where()}")

    def unary(self) -> Expr:
        sign = self.take("+", "-", "NOT")
        if sign is None:
            return self.primary()
        self._deeper()
        inner = self.unary()
        self.nesting -= 1
        return inner if sign == "+" else _negate(inner) if sign == "-" else _not(_boolean(inner))

    def _deeper(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise SelectorError(f"the expression nests deeper than {MAX_NESTING} levels")

    def primary(self) -> Expr:
        if self.at >= len(self.tokens):
            raise SelectorError("the expression ends too early")
        kind, word = self.tokens[self.at]
        self.at += 1
        if kind == "int":
            value = int(word.rstrip("lL"))
            if not _INT64[0] <= value <= _INT64[1]:
                raise SelectorError(f"{word} is out of the long range")
            return _constant(_num("int" if _INT32[0] <= value <= _INT32[1] else "long", value))
        if kind == "float":
            value = float(word)
            if value == 0.0:  # the reference's createFloat refuses values below Double.MIN_VALUE
                raise SelectorError(f"{word} is not a valid decimal literal")
            return _constant(_num("double", value))
        if kind == "string":
            return _constant(word[1:-1].replace("''", "'"))
        if kind == "name":
            return _property(word)
        if kind == "keyword" and word in ("TRUE", "FALSE"):
            return _constant(word == "TRUE")
        if kind == "keyword" and word == "NULL":
            return _constant(None)
        if word == "(":
            self._deeper()
            inner = self.or_expr()
            self.expect(")")
            self.nesting -= 1
            return inner
        self.at -= 1
        raise SelectorError(f"unexpected {word!r}")


def compile_selector(text: str) -> Expr:
    """The selector as a function of a property map (True, False or None); SelectorError if it
    does not compile. Cached, failures too: every consumer of a group subscribes with the same
    text, and a registered one that does not compile is met again on each of their pulls."""
    compiled = _compiled(text)
    if compiled.__class__ is str:
        raise SelectorError(compiled)
    return compiled  # type: ignore[return-value]


@functools.lru_cache(maxsize=256)
def _compiled(text: str) -> Expr | str:
    """The selector, or why it does not compile: the message, not the error, whose traceback
    would keep the parser alive and grow each time the cached error was raised again."""
    try:
        return _Parser(text).selector()
    except SelectorError as exc:
        return str(exc)


class SqlFilter:
    """A pull's filter for an SQL92 subscription: every consume-queue entry passes (the tag hash
    says nothing), then each record's properties are evaluated; held pulls evaluate arrivals."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.selector = compile_selector(text)

    def matches(self, properties: Mapping[str, str]) -> bool:
        try:
            return self.selector(properties) is True
        except _Failed:
            return False

    def matches_tags_code(self, tags_code: int) -> bool:
        return True

    def matches_record(self, record: bytes) -> bool:
        try:
            properties = decode_message(record)[0].properties
        except MessageError:  # a damaged record matches nothing (the tag path would serve it as is)
            return False
        return self.matches(properties)

    def matches_arrival(self, arrival: Any) -> bool:
        return self.matches(arrival.properties)
