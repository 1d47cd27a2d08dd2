"""The shared input checks (icml26.core.checks) that the chapter modules import."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from icml26.core.checks import check_device, check_generator, check_preset


def test_check_device_accepts_cpu_and_names_the_argument_otherwise():
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu"), "dev") == torch.device("cpu")
    assert check_device(None, allow_none=True) is None
    with pytest.raises(TypeError, match="dev"):
        check_device(None, "dev")
    with pytest.raises(TypeError, match="dev"):
        check_device(3, "dev")
    with pytest.raises(ValueError, match="dev"):
        check_device("not-a-device", "dev")
    with pytest.raises(ValueError, match="dev"):
        check_device("meta", "dev")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="dev='cuda'"):
            check_device("cuda", "dev")


def test_check_generator_refuses_a_device_string():
    g = torch.Generator()
    assert check_generator(g) is g and check_generator(None) is None
    with pytest.raises(TypeError, match="gen"):
        check_generator("cuda", "gen")


@dataclass(frozen=True)
class Preset:
    steps: int = 10
    lr: float = 1e-3
    width: int | None = None
    ema: bool = True
    grid: tuple = (0.1, 0.2, "auto")

    def __post_init__(self):
        check_preset(self)


@pytest.mark.parametrize("field,bad", [("steps", -1), ("steps", 2.5), ("steps", True), ("lr", math.nan),
                                       ("lr", -1.0), ("width", -3), ("ema", 1), ("grid", [math.inf]),
                                       ("grid", "0.1")])
def test_check_preset_names_the_field(field, bad):
    with pytest.raises(ValueError, match=field):
        Preset(**{field: bad})


def test_check_preset_accepts_valid_fields():
    assert Preset(width=64, grid=[0.5]).width == 64
