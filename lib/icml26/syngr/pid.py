"""Partial information decomposition (spec Sec. 4a): Williams-Beer I_min on discrete tables.

For two sources X1, X2 and a target Y,  I(X1,X2;Y) = R + U1 + U2 + S  and  I(Xm;Y) = R + Um,
with the Williams-Beer redundancy  R = I_min = sum_y p(y) min_m I(Y=y; Xm)  and the specific
information  I(Y=y; Xm) = sum_x p(x|y) log p(y|x)/p(y).  Own numpy implementation; the tests
cross-check it against the ``dit`` library.
"""

from __future__ import annotations

import numpy as np

from ._checks import pos_int, real, table_bytes

_TOL = 1e-9


def _check_table(p, name: str = "p", ndim: int = 3) -> np.ndarray:
    if isinstance(p, (str, bytes)) or p is None:
        raise TypeError(f"{name} must be an array of probabilities, got {type(p).__name__}")
    p = np.asarray(p, dtype=float)
    if p.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D joint probability table, got shape {p.shape}")
    if p.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if np.any(p < 0):
        raise ValueError(f"{name} must be non-negative")
    if abs(p.sum() - 1.0) > _TOL:
        raise ValueError(f"{name} must sum to 1 (tolerance 1e-9), got {p.sum():.12g}")
    return p


def _plogp_ratio(pxy: np.ndarray, ratio: np.ndarray) -> float:
    m = pxy > 0
    return float(np.sum(pxy[m] * np.log2(ratio[m])))


def mutual_information(p_xy, base: float = 2) -> float:
    """I(X;Y) of a 2-D joint table ``p_xy[x, y]`` (bits for ``base=2``)."""
    p = _check_table(p_xy, "p_xy", 2)
    real(base, "base", lo=1.0, strict=True)
    px = p.sum(1, keepdims=True)
    py = p.sum(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        bits = _plogp_ratio(p, p / (px * py))
    return bits / np.log2(base)


def specific_information(p_xy: np.ndarray) -> np.ndarray:
    """I(Y=y; X) = sum_x p(x|y) log2 p(y|x)/p(y) for every y, from a table ``p_xy[x, y]``."""
    px = p_xy.sum(1, keepdims=True)
    py = p_xy.sum(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_x_given_y = np.where(py > 0, p_xy / py, 0.0)
        log_ratio = np.where(p_xy > 0, np.log2(p_xy / (px * py)), 0.0)
    return (p_x_given_y * log_ratio).sum(0)


def pid_williams_beer(p) -> dict[str, float]:
    """PID of a joint table ``p[x1, x2, y]`` with the Williams-Beer I_min redundancy (bits).

    Returns ``R, U1, U2, S`` and the mutual informations ``I1 = I(X1;Y)``, ``I2``, ``I12``.
    """
    p = _check_table(p, "p", 3)
    n1, n2, ny = p.shape
    p1 = p.sum(1)                                   # [x1, y]
    p2 = p.sum(0)                                   # [x2, y]
    p12 = p.reshape(n1 * n2, ny)                    # [(x1,x2), y]
    py = p.sum((0, 1))
    i1, i2, i12 = mutual_information(p1), mutual_information(p2), mutual_information(p12)
    s1, s2 = specific_information(p1), specific_information(p2)
    red = float(np.sum(py * np.minimum(s1, s2)))
    u1, u2 = i1 - red, i2 - red
    syn = i12 - red - u1 - u2
    clean = {k: (0.0 if abs(v) < 1e-12 else float(v)) for k, v in
             dict(R=red, U1=u1, U2=u2, S=syn, I1=i1, I2=i2, I12=i12).items()}
    return clean


def gate_table(name: str) -> np.ndarray:
    """Joint table ``p[x1, x2, y]`` of a gate on two fair independent bits.

    ``xor``: y = x1 ^ x2; ``and``: y = x1 & x2; ``copy``: y = (x1, x2) as 4 values;
    ``unique``: y = x1 (the second bit is ignored).
    """
    funcs = {"xor": lambda a, b: a ^ b, "and": lambda a, b: a & b,
             "copy": lambda a, b: 2 * a + b, "unique": lambda a, b: a}
    if name not in funcs:
        raise ValueError(f"name must be one of {sorted(funcs)}, got {name!r}")
    ny = 4 if name == "copy" else 2
    p = np.zeros((2, 2, ny))
    for a in (0, 1):
        for b in (0, 1):
            p[a, b, funcs[name](a, b)] += 0.25
    return p


def empirical_table(x1, x2, y) -> np.ndarray:
    """Plug-in joint table ``p[x1, x2, y]`` from non-negative integer samples of equal length.

    The table is dense, of shape ``(max x1 + 1, max x2 + 1, max y + 1)``; a table above
    ``syngr._checks.MAX_TABLE_BYTES`` (256 MiB of float64) raises ValueError naming the argument with the largest
    range instead of allocating it."""
    arrs = []
    for nm, a in (("x1", x1), ("x2", x2), ("y", y)):
        if a is None or isinstance(a, (str, bytes)):
            raise TypeError(f"{nm} must be an integer array, got {type(a).__name__}")
        a = np.asarray(a)
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"{nm} must be a non-empty 1-D integer array, got shape {a.shape}")
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{nm} must hold integers, got dtype {a.dtype}")
        if a.min() < 0:
            raise ValueError(f"{nm} must be non-negative")
        arrs.append(a)
    if not (len(arrs[0]) == len(arrs[1]) == len(arrs[2])):
        raise ValueError(f"x1, x2 and y must have equal lengths, got {[len(a) for a in arrs]}")
    shape = tuple(int(a.max()) + 1 for a in arrs)
    # the table is dense over 0..max of each argument: estimate its bytes before allocating, and
    # name the argument with the largest range (a label such as 10**9 would ask for 7.45 GiB)
    table_bytes(shape, ("x1", "x2", "y")[int(np.argmax(shape))], "joint table")
    p = np.zeros(shape)
    np.add.at(p, tuple(arrs), 1.0)
    return p / p.sum()


def syncat_style_table(n_styles: int) -> np.ndarray:
    """Exact table of SynCat's style: a_t, a_v uniform on {0..C-1}, sigma = (a_t + a_v) mod C."""
    c = pos_int(n_styles, "n_styles", 2)
    table_bytes((c, c, c), "n_styles", "style table")
    p = np.zeros((c, c, c))
    a = np.arange(c)
    p[a[:, None], a[None, :], (a[:, None] + a[None, :]) % c] = 1.0 / c**2
    return p
