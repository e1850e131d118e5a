"""Dtypes (sizes, names, promotion, literal bytes) and shapes (broadcast, dynamic dims)."""
import numpy as np
import pytest

from rlx_ref import DType, Dyn, Shape, ShapeError
from rlx_ref.ir.dtype import scalar_constant_bytes
from rlx_ref.ir.shape import broadcast, broadcast_dims, normalize_axis

D = DType


def test_all_thirteen_dtypes_with_rlx_names_and_sizes():
    expect = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
              "u8": 1, "u32": 4, "bool": 1, "c64": 8, "c128": 16}
    assert {str(d): d.size_bytes for d in DType} == expect
    assert D.BOOL.value == "Bool" and D.BF16.value == "BF16"
    for d in DType:
        assert DType.parse(str(d)) is d and DType.parse(d.value) is d
        assert np.dtype(d.np).itemsize == d.size_bytes
    assert str(D.BF16.np) == "bfloat16"


@pytest.mark.parametrize("a,b,out", [
    (D.F32, D.F32, D.F32), (D.I8, D.I16, D.I16), (D.I32, D.I64, D.I64),
    (D.I32, D.F32, D.F32), (D.I64, D.F32, D.F64), (D.I8, D.F16, D.F32),
    (D.F16, D.BF16, D.F32), (D.BF16, D.F16, D.F32), (D.U8, D.F64, D.F64),
    (D.BOOL, D.I8, D.I8), (D.C64, D.C128, D.C128), (D.F64, D.C64, D.C64),
    (D.U32, D.I32, D.U32), (D.I32, D.U32, D.I32),
])
def test_promotion_table(a, b, out):
    assert a.promote(b) is out


def test_promotion_is_commutative_except_equal_rank_ties():
    for a in DType:
        for b in DType:
            if a.promotion_rank != b.promotion_rank or a.is_float != b.is_float:
                assert a.promote(b) is b.promote(a), (a, b)


def test_unknown_dtype_names_the_choices():
    with pytest.raises(ValueError, match="unknown dtype `f8`.*f32"):
        DType.parse("f8")


def test_scalar_constant_bytes():
    assert scalar_constant_bytes(2.5, D.F32) == np.float32(2.5).tobytes()
    assert scalar_constant_bytes(7, D.I32) == (7).to_bytes(4, "little")
    assert scalar_constant_bytes(True, D.BOOL) == b"\x01"
    for v, d in [(128, D.I8), (-1, D.U32), (2.5, D.I32), (float("inf"), D.I64)]:
        with pytest.raises(ValueError):
            scalar_constant_bytes(v, d)


def test_broadcast_numpy_rules_and_lhs_dtype():
    a, b = Shape([3, 1], D.F32), Shape([4], D.I32)
    assert broadcast(a, b) == Shape([3, 4], D.F32)
    assert broadcast_dims((), (2, 3)) == (2, 3)
    assert broadcast_dims((1,), ()) == (1,)
    with pytest.raises(ShapeError, match=r"cannot broadcast \[2, 3\] with \[4\]: dim 1 is 3 vs 4"):
        broadcast_dims((2, 3), (4,))


def test_dynamic_dims():
    s = Shape([Dyn(0), 8], D.F32)
    assert not s.is_static and s.numel is None and str(s) == "[?0, 8] f32"
    assert broadcast_dims((Dyn(0), 8), (1, 8)) == (Dyn(0), 8)
    assert broadcast_dims((Dyn(0),), (Dyn(0),)) == (Dyn(0),)
    assert broadcast_dims((Dyn(1),), (5,)) == (Dyn(1),)
    assert s.bind({0: 3}) == Shape([3, 8], D.F32)
    assert s.dynamic_symbols() == [0]


def test_shape_validation():
    with pytest.raises(ShapeError):
        Shape([-1], D.F32)
    with pytest.raises(ShapeError):
        Shape([1.5], D.F32)
    assert Shape([], D.F32).numel == 1 and Shape([0, 3], D.F32).numel == 0
    assert normalize_axis(-1, 3) == 2
    with pytest.raises(ShapeError, match="axis 3 is out of range for rank 3"):
        normalize_axis(3, 3)
