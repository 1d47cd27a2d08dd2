"""The code the corpus is made of: small integer utilities written once, rendered in 4 languages.

Each unit has a short C-like body (rendered to JavaScript, Rust and Java by replacing the
``{let}`` token) and a Python body, a *buggy* variant and a *fixed* variant, test cases that
pass on both (``base``, ``extra``) and one that only the fix passes (``bug``). Feature units
have no buggy variant: a pull request adds them. Everything is plain integer arithmetic so that
the four languages compute the same values (no division except of even numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

Case = tuple[tuple[int, ...], int]


@dataclass(frozen=True)
class UnitSpec:
    name: str
    params: tuple[str, ...]
    doc: str                    # what it computes (feature issues describe this)
    c_fixed: str
    py_fixed: str
    c_buggy: str | None = None
    py_buggy: str | None = None
    base: Case | None = None    # passes before and after the fix
    extra: Case | None = None   # passes before and after (already-passing PRs)
    bug: Case | None = None     # fails before, passes after
    guard: tuple[str, int] | None = None  # (parameter, a negative value to reject)

    def run_py(self, args: tuple[int, ...], fixed: bool = True) -> int:
        """Evaluate the Python body (used to write "actual vs expected" into issue texts)."""
        body = self.py_fixed if fixed or self.py_buggy is None else self.py_buggy
        src = f"def {self.name}({', '.join(self.params)}):\n" + _indent(body, 4)
        scope: dict = {}
        exec(src, scope)  # noqa: S102 - our own template code
        return scope[self.name](*args)


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "".join(pad + line + "\n" if line.strip() else "\n" for line in text.strip("\n").splitlines())


BUG_UNITS: tuple[UnitSpec, ...] = (
    UnitSpec("clamp", ("x", "lo", "hi"), "limit x to the interval [lo, hi]",
             "if (x < lo) { return lo; }\nif (x > hi) { return hi; }\nreturn x;",
             "if x < lo:\n    return lo\nif x > hi:\n    return hi\nreturn x",
             "if (x < lo) { return lo; }\nif (x > hi) { return hi - 1; }\nreturn x;",
             "if x < lo:\n    return lo\nif x > hi:\n    return hi - 1\nreturn x",
             base=((5, 0, 10), 5), extra=((-4, 0, 10), 0), bug=((15, 0, 10), 10)),
    UnitSpec("sum_range", ("a", "b"), "sum the integers from a to b inclusive",
             "{let} s = 0;\n{let} i = a;\nwhile (i <= b) { s = s + i; i = i + 1; }\nreturn s;",
             "s = 0\ni = a\nwhile i <= b:\n    s = s + i\n    i = i + 1\nreturn s",
             "{let} s = 0;\n{let} i = a;\nwhile (i < b) { s = s + i; i = i + 1; }\nreturn s;",
             "s = 0\ni = a\nwhile i < b:\n    s = s + i\n    i = i + 1\nreturn s",
             base=((5, 2), 0), extra=((7, 1), 0), bug=((1, 4), 10), guard=None),
    UnitSpec("int_pow", ("base", "exp"), "raise base to a non-negative integer power exp",
             "{let} r = 1;\n{let} i = 0;\nwhile (i < exp) { r = r * base; i = i + 1; }\nreturn r;",
             "r = 1\ni = 0\nwhile i < exp:\n    r = r * base\n    i = i + 1\nreturn r",
             "{let} r = base;\n{let} i = 1;\nwhile (i < exp) { r = r * base; i = i + 1; }\nreturn r;",
             "r = base\ni = 1\nwhile i < exp:\n    r = r * base\n    i = i + 1\nreturn r",
             base=((2, 3), 8), extra=((3, 2), 9), bug=((5, 0), 1), guard=("exp", -2)),
    UnitSpec("triangle", ("n",), "the n-th triangular number 1 + 2 + ... + n",
             "{let} s = 0;\n{let} k = 1;\nwhile (k <= n) { s = s + k; k = k + 1; }\nreturn s;",
             "s = 0\nk = 1\nwhile k <= n:\n    s = s + k\n    k = k + 1\nreturn s",
             "{let} s = 0;\n{let} k = 0;\nwhile (k < n) { s = s + k; k = k + 1; }\nreturn s;",
             "s = 0\nk = 0\nwhile k < n:\n    s = s + k\n    k = k + 1\nreturn s",
             base=((0,), 0), extra=None, bug=((4,), 10), guard=("n", -3)),
    UnitSpec("count_divisors", ("n",), "count the positive divisors of n",
             "{let} c = 0;\n{let} d = 1;\nwhile (d <= n) { if (n % d == 0) { c = c + 1; } d = d + 1; }\nreturn c;",
             "c = 0\nd = 1\nwhile d <= n:\n    if n % d == 0:\n        c = c + 1\n    d = d + 1\nreturn c",
             "{let} c = 0;\n{let} d = 1;\nwhile (d < n) { if (n % d == 0) { c = c + 1; } d = d + 1; }\nreturn c;",
             "c = 0\nd = 1\nwhile d < n:\n    if n % d == 0:\n        c = c + 1\n    d = d + 1\nreturn c",
             base=((0,), 0), extra=None, bug=((6,), 4), guard=("n", -4)),
    UnitSpec("collatz_steps", ("n",), "count Collatz steps until n reaches 1",
             "{let} s = 0;\n{let} m = n;\nwhile (m > 1) { if (m % 2 == 0) { m = m / 2; } else { m = 3 * m + 1; } s = s + 1; }\nreturn s;",
             "s = 0\nm = n\nwhile m > 1:\n    if m % 2 == 0:\n        m = m // 2\n    else:\n        m = 3 * m + 1\n    s = s + 1\nreturn s",
             "{let} s = 0;\n{let} m = n;\nwhile (m > 2) { if (m % 2 == 0) { m = m / 2; } else { m = 3 * m + 1; } s = s + 1; }\nreturn s;",
             "s = 0\nm = n\nwhile m > 2:\n    if m % 2 == 0:\n        m = m // 2\n    else:\n        m = 3 * m + 1\n    s = s + 1\nreturn s",
             base=((1,), 0), extra=((0,), 0), bug=((6,), 8), guard=("n", -5)),
    UnitSpec("max3", ("a", "b", "c"), "the largest of three integers",
             "{let} m = a;\nif (b > m) { m = b; }\nif (c > m) { m = c; }\nreturn m;",
             "m = a\nif b > m:\n    m = b\nif c > m:\n    m = c\nreturn m",
             "{let} m = a;\nif (b > m) { m = b; }\nif (c > a) { m = c; }\nreturn m;",
             "m = a\nif b > m:\n    m = b\nif c > a:\n    m = c\nreturn m",
             base=((1, 2, 3), 3), extra=((9, 2, 1), 9), bug=((2, 5, 3), 5)),
    UnitSpec("min3", ("a", "b", "c"), "the smallest of three integers",
             "{let} m = a;\nif (b < m) { m = b; }\nif (c < m) { m = c; }\nreturn m;",
             "m = a\nif b < m:\n    m = b\nif c < m:\n    m = c\nreturn m",
             "{let} m = a;\nif (b < m) { m = b; }\nif (c < a) { m = c; }\nreturn m;",
             "m = a\nif b < m:\n    m = b\nif c < a:\n    m = c\nreturn m",
             base=((3, 2, 1), 1), extra=((1, 5, 9), 1), bug=((6, 1, 4), 1)),
    UnitSpec("abs_diff", ("a", "b"), "the absolute difference of two integers",
             "if (a > b) { return a - b; }\nreturn b - a;",
             "if a > b:\n    return a - b\nreturn b - a",
             "if (a > b) { return a - b; }\nreturn a - b;",
             "if a > b:\n    return a - b\nreturn a - b",
             base=((5, 3), 2), extra=((4, 4), 0), bug=((3, 5), 2)),
    UnitSpec("range_len", ("a", "b"), "how many integers lie in [a, b]",
             "if (b < a) { return 0; }\nreturn b - a + 1;",
             "if b < a:\n    return 0\nreturn b - a + 1",
             "if (b < a) { return 0; }\nreturn b - a;",
             "if b < a:\n    return 0\nreturn b - a",
             base=((5, 2), 0), extra=((9, 3), 0), bug=((1, 3), 3)),
)

FEATURE_UNITS: tuple[UnitSpec, ...] = (
    UnitSpec("sign", ("x",), "return 1 for a positive number, -1 for a negative one and 0 for zero",
             "if (x > 0) { return 1; }\nif (x < 0) { return -1; }\nreturn 0;",
             "if x > 0:\n    return 1\nif x < 0:\n    return -1\nreturn 0",
             base=((-7,), -1), bug=((12,), 1)),
    UnitSpec("digit_count", ("n",), "count the decimal digits of a non-negative integer",
             "{let} c = 1;\n{let} p = 10;\nwhile (p <= n) { p = p * 10; c = c + 1; }\nreturn c;",
             "c = 1\np = 10\nwhile p <= n:\n    p = p * 10\n    c = c + 1\nreturn c",
             base=((0,), 1), bug=((4096,), 4)),
    UnitSpec("cube", ("n",), "return n multiplied by itself three times",
             "return n * n * n;", "return n * n * n", base=((3,), 27), bug=((-2,), -8)),
    UnitSpec("fib", ("n",), "return the n-th Fibonacci number, starting 0, 1, 1, 2",
             "{let} a = 0;\n{let} b = 1;\n{let} i = 0;\nwhile (i < n) { {let} t = a + b; a = b; b = t; i = i + 1; }\nreturn a;",
             "a = 0\nb = 1\ni = 0\nwhile i < n:\n    t = a + b\n    a = b\n    b = t\n    i = i + 1\nreturn a",
             base=((0,), 0), bug=((10,), 55)),
    UnitSpec("square_sum", ("a", "b"), "return the sum of the squares of two integers",
             "return a * a + b * b;", "return a * a + b * b", base=((0, 0), 0), bug=((3, 4), 25)),
    UnitSpec("parity", ("n",), "return 0 for an even non-negative integer and 1 otherwise",
             "return n % 2;", "return n % 2", base=((4,), 0), bug=((7,), 1)),
)

UNITS = {u.name: u for u in BUG_UNITS + FEATURE_UNITS}


def camel(name: str, upper: bool = False) -> str:
    """``sum_range`` -> ``sumRange`` (or ``SumRange``)."""
    parts = name.split("_")
    out = parts[0] + "".join(p.capitalize() for p in parts[1:])
    return out[0].upper() + out[1:] if upper else out


def c_body(spec: UnitSpec, language: str, fixed: bool) -> str:
    """The C-like body rendered for ``javascript``, ``rust`` or ``java``."""
    body = spec.c_fixed if fixed or spec.c_buggy is None else spec.c_buggy
    let = {"javascript": "let", "rust": "let mut", "java": "long"}[language]
    return body.replace("{let}", let)


def py_body(spec: UnitSpec, fixed: bool) -> str:
    return spec.py_fixed if fixed or spec.py_buggy is None else spec.py_buggy


__all__ = ["BUG_UNITS", "FEATURE_UNITS", "UNITS", "UnitSpec", "c_body", "camel", "py_body", "_indent"]
