"""Synthetic protein backbones from secondary-structure programs (spec Sec. 7.1).

Backbones (N, CA, C) are built with NeRF (natural extension reference frame) from ideal bond
lengths and angles and per-residue dihedrals (phi, psi, omega). A *fold program* (the class label, the
book's stand-in for a CATH class) is a sequence of helices (H) and strands (E) joined by loops.
Generation is vectorised over proteins; the only Python loop runs over residues.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

#: ideal bond lengths in angstrom (Engh & Huber values used by the spec)
IDEAL_BONDS: dict[str, float] = {"N-CA": 1.458, "CA-C": 1.525, "C-N": 1.329}
#: ideal bond angles in degrees
IDEAL_ANGLES_DEG: dict[str, float] = {"N-CA-C": 111.2, "CA-C-N": 116.2, "C-N-CA": 121.7}

#: class name -> element list (H helix, E strand); the last three share a composition
FOLD_PROGRAMS: dict[str, list[str]] = {
    "HH": ["H", "H"], "HHH": ["H", "H", "H"], "EEEE": ["E", "E", "E", "E"],
    "EEHH": ["E", "E", "H", "H"], "HHEE": ["H", "H", "E", "E"], "HEEH": ["H", "E", "E", "H"],
}
CLASSES: tuple[str, ...] = tuple(FOLD_PROGRAMS)

HELIX = (-62.0, -41.0)
STRAND = (-120.0, 130.0)
PPII = (-75.0, 145.0)
HAIRPIN = [(60.0, 30.0), (90.0, 0.0)]                      # type I' turn between two strands
CONNECTION = [(-60.0, -30.0), (-90.0, 0.0), (-75.0, 145.0)]  # every other junction
HELIX_LEN = (9, 12)
STRAND_LEN = (5, 6)
SS_CODES = {"coil": 0, "helix": 1, "strand": 2}


def _check_xyz(name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim < 1 or t.shape[-1] != 3:
        raise ValueError(f"{name} must have a last dimension of size 3, got shape {tuple(t.shape)}")


def nerf_place(a: Tensor, b: Tensor, c: Tensor, bond: float, angle: float, torsion: Tensor) -> Tensor:
    """Place atom D from A, B, C (batched over leading dimensions).

    ``bond`` = |CD| in angstrom, ``angle`` = the bond angle B-C-D in radians, ``torsion`` = the
    dihedral A-B-C-D in radians. With ``bc = (C-B)/|C-B|`` and ``n = (B-A) x bc / |.|`` the frame is
    ``M = [bc, n x bc, n]`` and ``D = C + M (-b cos(theta), b sin(theta) cos(chi), b sin(theta) sin(chi))``.
    """
    for name, t in (("a", a), ("b", b), ("c", c)):
        _check_xyz(name, t)
    if not math.isfinite(bond) or bond <= 0:
        raise ValueError(f"bond must be a positive length, got {bond}")
    bc = torch.nn.functional.normalize(c - b, dim=-1)
    n = torch.nn.functional.normalize(torch.cross(b - a, bc, dim=-1), dim=-1)
    m = torch.stack([bc, torch.cross(n, bc, dim=-1), n], dim=-1)  # (..., 3, 3) columns
    d = torch.stack([-bond * torch.cos(torch.as_tensor(angle, dtype=c.dtype)).expand_as(torsion),
                     bond * math.sin(angle) * torch.cos(torsion),
                     bond * math.sin(angle) * torch.sin(torsion)], dim=-1)
    return c + (m @ d.unsqueeze(-1)).squeeze(-1)


def build_backbone(phi: Tensor, psi: Tensor, omega: Tensor | None = None) -> Tensor:
    """Dihedrals (B, L) in radians -> backbone (B, L, 3, 3): atoms N, CA, C in angstrom.

    Residue i's N is placed with torsion psi[i-1], its CA with omega[i-1] (default pi, trans), its C
    with phi[i]; phi[0] and psi[L-1] are unused.
    """
    if not isinstance(phi, Tensor) or not isinstance(psi, Tensor):
        raise TypeError("phi and psi must be torch.Tensors")
    if phi.ndim != 2 or phi.shape != psi.shape:
        raise ValueError(f"phi and psi must both have shape (B, L), got {tuple(phi.shape)} and {tuple(psi.shape)}")
    if phi.shape[1] < 1:
        raise ValueError("phi must hold at least one residue")
    if not (torch.isfinite(phi).all() and torch.isfinite(psi).all()):
        raise ValueError("phi and psi must be finite")
    if omega is not None and omega.shape != phi.shape:
        raise ValueError(f"omega must have shape {tuple(phi.shape)}, got {tuple(omega.shape)}")
    return _build_backbone(phi, psi, omega)


def _build_backbone(phi: Tensor, psi: Tensor, omega: Tensor | None = None) -> Tensor:
    """:func:`build_backbone` without its checks (no read of the angles: :func:`make_backbones` draws them
    finite itself)."""
    if omega is None:
        omega = torch.full_like(phi, math.pi)
    bsz, length = phi.shape
    dt = phi.dtype if phi.is_floating_point() else torch.float32
    rad = {k: math.radians(v) for k, v in IDEAL_ANGLES_DEG.items()}
    n0 = torch.zeros(bsz, 3, dtype=dt, device=phi.device)
    ca0 = n0.clone()
    ca0[:, 0] = IDEAL_BONDS["N-CA"]
    ang = math.pi - rad["N-CA-C"]
    c0 = ca0.clone()
    c0[:, 0] += IDEAL_BONDS["CA-C"] * math.cos(ang)
    c0[:, 1] += IDEAL_BONDS["CA-C"] * math.sin(ang)
    atoms = [torch.stack([n0, ca0, c0], dim=1)]
    n_prev, ca_prev, c_prev = n0, ca0, c0
    for i in range(1, length):  # loop over residues only; vectorised over proteins
        n_i = nerf_place(n_prev, ca_prev, c_prev, IDEAL_BONDS["C-N"], rad["CA-C-N"], psi[:, i - 1])
        ca_i = nerf_place(ca_prev, c_prev, n_i, IDEAL_BONDS["N-CA"], rad["C-N-CA"], omega[:, i - 1])
        c_i = nerf_place(c_prev, n_i, ca_i, IDEAL_BONDS["CA-C"], rad["N-CA-C"], phi[:, i])
        atoms.append(torch.stack([n_i, ca_i, c_i], dim=1))
        n_prev, ca_prev, c_prev = n_i, ca_i, c_i
    return torch.stack(atoms, dim=1)


def _segments(program: list[str]) -> list[tuple[str, int]]:
    """(kind, fixed length or -1 for sampled) of a program: elements joined by turns/connections."""
    out: list[tuple[str, int]] = []
    for j, el in enumerate(program):
        if j > 0:
            out.append(("turn", len(HAIRPIN)) if (program[j - 1] == "E" and el == "E")
                       else ("conn", len(CONNECTION)))
        out.append((el, -1))
    return out


def program_min_length(name: str) -> int:
    """Shortest chain a program fits in (all elements at their minimum length)."""
    return sum(n if n > 0 else (HELIX_LEN[0] if k == "H" else STRAND_LEN[0]) for k, n in _segments(FOLD_PROGRAMS[name]))


def _program_angles(name: str, lengths: Tensor, lmax: int, g: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """Ideal (phi, psi) in degrees and secondary-structure codes (n, lmax) for one program, vectorised.

    Element lengths are drawn uniformly from their ranges; a protein whose program would not fit in
    its length gets the minimum element lengths. The rest of the chain is PPII padding, split at
    random between the two termini.
    """
    n = lengths.shape[0]
    segs = _segments(FOLD_PROGRAMS[name])
    seg_len = []
    for kind, fixed in segs:
        if fixed > 0:
            seg_len.append(torch.full((n,), fixed))
        else:
            lo, hi = HELIX_LEN if kind == "H" else STRAND_LEN
            seg_len.append(torch.randint(lo, hi + 1, (n,), generator=g))
    seg_len = torch.stack(seg_len, 1)                                     # (n, S)
    mins = torch.tensor([f if f > 0 else (HELIX_LEN[0] if k == "H" else STRAND_LEN[0]) for k, f in segs])
    too_long = seg_len.sum(1) > lengths
    seg_len = torch.where(too_long[:, None], mins, seg_len)             # no boolean-mask write (a host read)
    spare = lengths - seg_len.sum(1)
    left = (torch.rand(n, generator=g) * (spare + 1).float()).floor().long().clamp(max=spare)
    seg_len = torch.cat([left[:, None], seg_len, (lmax - lengths + spare - left)[:, None]], 1)  # pads at both ends
    kinds = ["pad"] + [k for k, _ in segs] + ["pad"]
    ends = seg_len.cumsum(1)                                              # (n, S+2)
    pos = torch.arange(lmax).expand(n, lmax).contiguous()
    sid = torch.searchsorted(ends, pos, right=True).clamp(max=len(kinds) - 1)
    offset = pos - (ends.gather(1, sid) - seg_len.gather(1, sid))
    table = {"pad": [PPII], "H": [HELIX], "E": [STRAND], "turn": HAIRPIN, "conn": CONNECTION}
    phi = torch.zeros(n, lmax)
    psi = torch.zeros(n, lmax)
    ss = torch.zeros(n, lmax, dtype=torch.long)
    for s, kind in enumerate(kinds):
        vals = torch.tensor(table[kind])                                  # (m, 2)
        here = sid == s
        o = offset.clamp(0, len(vals) - 1)
        phi = torch.where(here, vals[o, 0], phi)
        psi = torch.where(here, vals[o, 1], psi)
        code = SS_CODES["helix"] if kind == "H" else SS_CODES["strand"] if kind == "E" else SS_CODES["coil"]
        ss = torch.where(here, torch.full_like(ss, code), ss)
    return phi, psi, ss


def make_backbones(n: int, length: int | tuple[int, int], seed: int = 0, noise_deg: float = 6.0,
                   classes: Sequence[str] | None = None, full: bool = False) -> dict[str, Tensor]:
    """Sample ``n`` synthetic backbones: ``CA`` (n, Lmax, 3) angstrom (zero-padded), ``mask`` (n, Lmax),
    ``length`` (n,), ``label`` (n,) index into ``classes``, ``ss`` (n, Lmax) 0 coil / 1 helix / 2 strand.

    ``length`` is one length or an inclusive range ``(lo, hi)`` drawn uniformly per protein; labels
    cycle through ``classes`` (default all six programs) so the classes are balanced. Gaussian noise of
    ``noise_deg`` degrees is added to every phi and psi (omega stays trans, so CA-CA stays 3.80 A).
    ``full=True`` also returns the N, CA, C backbone as ``bb`` (n, Lmax, 3, 3).
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if isinstance(noise_deg, bool) or not isinstance(noise_deg, (int, float)) or not math.isfinite(noise_deg) \
            or noise_deg < 0:
        raise ValueError(f"noise_deg must be a finite number >= 0, got {noise_deg!r}")
    classes = tuple(CLASSES if classes is None else classes)
    if len(classes) == 0:
        raise ValueError("classes must name at least one fold program")
    for c in classes:
        if c not in FOLD_PROGRAMS:
            raise ValueError(f"classes: unknown fold class {c!r}; known: {list(FOLD_PROGRAMS)}")
    if isinstance(length, (tuple, list)):
        if len(length) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in length) \
                or length[0] > length[1]:
            raise ValueError(f"length must be an int or an (lo, hi) pair of ints with lo <= hi, got {length!r}")
        lo, hi = length
    elif isinstance(length, int) and not isinstance(length, bool):
        lo = hi = length
    else:
        raise ValueError(f"length must be an int or an (lo, hi) pair, got {length!r}")
    need = max(program_min_length(c) for c in classes)
    if lo < need:
        raise ValueError(f"length: {lo} is shorter than the shortest fit of the programs {classes} ({need} residues)")
    g = torch.Generator().manual_seed(int(seed))
    label = torch.arange(n) % len(classes)
    label = label[torch.randperm(n, generator=g)]
    lengths = torch.randint(lo, hi + 1, (n,), generator=g)
    phi = torch.zeros(n, hi)
    psi = torch.zeros(n, hi)
    ss = torch.zeros(n, hi, dtype=torch.long)
    # the proteins of each class, in increasing position (as nonzero gives them), without reading a tensor:
    # a stable sort groups them by label, and class ci has len(range(ci, n, C)) members whatever the shuffle
    by_class = torch.argsort(label, stable=True)
    start = 0
    for ci, name in enumerate(classes):  # a loop over the (six) programs, vectorised within each
        count = len(range(ci, n, len(classes)))
        if count:
            idx = by_class[start:start + count]
            p, s, q = _program_angles(name, lengths[idx], hi, g)
            phi[idx], psi[idx], ss[idx] = p, s, q
        start += count
    phi = phi + noise_deg * torch.randn(n, hi, generator=g)
    psi = psi + noise_deg * torch.randn(n, hi, generator=g)
    bb = _build_backbone(torch.deg2rad(phi), torch.deg2rad(psi))       # drawn finite: no value check
    mask = torch.arange(hi)[None] < lengths[:, None]
    ca = bb[:, :, 1] * mask[..., None]
    out = {"CA": ca, "mask": mask, "length": lengths, "label": label, "ss": ss * mask,
           "classes": list(classes)}
    if full:
        out["bb"] = bb * mask[..., None, None]
    return out


def length_groups(data: dict[str, Tensor]) -> list[tuple[int, Tensor]]:
    """(length, indices) of the proteins of each length: the book batches equal-length proteins, as the
    released code does (spec Sec. 11), so that no padding mask is needed inside the models."""
    lengths = data["length"]
    return [(int(v), (lengths == v).nonzero().flatten()) for v in torch.unique(lengths)]
