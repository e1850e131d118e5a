"""Gaussian splat kinds: Render = Rasterize ∘ Prepare, the prepare layout, hand-computed
pixels, depth order, early exit and the verifier's rules."""
import math
from pathlib import Path

import numpy as np
import pytest

from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph
from rlx_ref.ir.shape import Shape
from rlx_ref.ops import _splat_samples as S
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import run_single, verify_single
from rlx_ref.ops.splat import SplatRasterAttrs, SplatRenderAttrs

F32 = np.float32
NAMES = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs", "meta")


def _raster_attrs(a):
    return SplatRasterAttrs(a.width, a.height, a.tile_size, a.alpha_cutoff, a.max_splat_steps,
                            a.transmittance_threshold, a.max_list_entries)


def _two_stage(inputs, a, float64=False):
    """(Render, Rasterize(Prepare)) from one graph holding both forms."""
    g = Graph("splat")
    ids = [g.input(n, list(x.shape)) for n, x in zip(NAMES, inputs)]
    render = g.op("GaussianSplatRender", ids, a)
    prep = g.op("GaussianSplatPrepare", ids, a)
    raster = g.op("GaussianSplatRasterize", [prep, ids[6]], _raster_attrs(a))
    g.set_outputs([render, raster])
    return interpret(g, dict(zip(NAMES, inputs)), float64=float64)


def _cases():
    return S._cases(np.random.default_rng(7))


@pytest.mark.parametrize("i", range(len(_cases())))
@pytest.mark.parametrize("float64", [False, True])
def test_render_is_rasterize_of_prepare(i, float64):
    x, a, tags, _ = _cases()[i]
    render, raster = _two_stage(x, a, float64)
    assert render.shape == (a.width * a.height * 4,)
    np.testing.assert_array_equal(render, raster)


def test_samples_draw_something_and_are_tame():
    """Every non-hand scene draws splats; the f32 oracle stays near the f64 one."""
    for x, a, tags, _ in _cases():
        if "hand" in tags:
            continue
        img = run_single("GaussianSplatRender", a, *x).reshape(a.height, a.width, 4)
        img64 = run_single("GaussianSplatRender", a, *x, float64=True)
        assert img[..., 3].max() > 0.5, tags
        assert np.abs(img.reshape(-1) - img64).max() < 1e-5, tags


def _one_splat(opacity=0.8, color=(0.9, 0.2, 0.1), bg=(0.1, 0.2, 0.3), size=5):
    ls = math.log(0.3)
    x = S.scene([(0.0, 0.0, 0.0)], [(ls, ls, ls)], [opacity], [color]) + (S.meta(bg=bg),)
    return x, SplatRenderAttrs(size, size, size, 1.0, 1 / 255, 32, 0.01, 64)


def test_centre_pixel_by_hand():
    """The centre ray of an odd frame passes through the splat's centre: alpha = opacity."""
    o, c, bg = 0.8, (0.9, 0.2, 0.1), (0.1, 0.2, 0.3)
    x, a = _one_splat(o, c, bg)
    img = run_single("GaussianSplatRender", a, *x).reshape(5, 5, 4)
    want = [(o * ci + (1 - o) * b) ** 2.2 for ci, b in zip(c, bg)] + [o]
    np.testing.assert_allclose(img[2, 2], want, rtol=1e-5)
    # symmetric scene, symmetric image
    np.testing.assert_allclose(img, img[::-1, ::-1], rtol=1e-5, atol=1e-7)
    assert np.all(img[..., 3] < o + 1e-6)


def test_sh_dc_overrides_colors():
    """A non-zero DC band is used instead of `colors`: rgb = 0.5 + C0·dc at the centre."""
    x, a = _one_splat(opacity=1.0, bg=(0.0, 0.0, 0.0))
    dc = np.array([0.4, -0.3, 0.9], F32)
    x = x[:5] + (dc,) + x[6:]
    img = run_single("GaussianSplatRender", a, *x).reshape(5, 5, 4)
    want = (0.5 + 0.28209479177387814 * dc) ** 2.2
    np.testing.assert_allclose(img[2, 2, :3], want, rtol=1e-5)


def test_input_order_does_not_matter():
    """Splats are sorted by camera distance, so permuting them leaves the image alone."""
    x, a, _, _ = _cases()[1]
    perm = [2, 0, 1]
    pos, scl, rot, opa, col, sh, m = x
    y = (pos.reshape(-1, 3)[perm].ravel(), scl.reshape(-1, 3)[perm].ravel(),
         rot.reshape(-1, 4)[perm].ravel(), opa[perm], col.reshape(-1, 3)[perm].ravel(),
         sh.reshape(-1, 3)[perm].ravel(), m)
    np.testing.assert_array_equal(run_single("GaussianSplatRender", a, *x),
                                  run_single("GaussianSplatRender", a, *y))


def test_early_exit_keeps_only_the_nearest_hit():
    """transmittance_threshold = 1 stops after the first composited splat."""
    x, a, _, _ = _cases()[1]
    first = run_single("GaussianSplatRender", a.__class__(**{**a.__dict__,
                                                             "transmittance_threshold": 1.0}),
                       *x).reshape(-1, 4)
    full = run_single("GaussianSplatRender", a.__class__(**{**a.__dict__,
                                                            "transmittance_threshold": 0.0}),
                      *x).reshape(-1, 4)
    hit = first[:, 3] > 0
    assert hit.any() and np.all(full[hit, 3] >= first[hit, 3] - 1e-7)
    assert np.any(full[hit, 3] > first[hit, 3] + 1e-3)


def test_prepare_layout():
    x, a, _, _ = _cases()[0]
    buf = run_single("GaussianSplatPrepare", a, *x)
    n, L = 3, a.max_list_entries
    tw, th = -(-a.width // a.tile_size), -(-a.height // a.tile_size)
    P = a.width * a.height
    assert buf.size == 15 * n + L + 2 * tw * th + 3 * P + 11
    ca, valid, pl, inv, quat, ids, ranges, rays, params = np.split(
        buf, np.cumsum([4 * n, n, 3 * n, 3 * n, 4 * n, L, 2 * tw * th, 3 * P]))
    np.testing.assert_array_equal(ca.reshape(n, 4)[:, 3], x[3])
    np.testing.assert_array_equal(valid, [1, 1, 1])
    np.testing.assert_array_equal(quat, x[2])
    np.testing.assert_allclose(inv.reshape(n, 3), 1 / (np.exp(x[1].reshape(n, 3)) * 3),
                               rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rays.reshape(P, 3), axis=1), 1, rtol=1e-6)
    bg = [max(b, 0) ** 2.2 for b in x[6][12:15]]
    np.testing.assert_allclose(params, [a.width, a.height, a.tile_size, tw, a.alpha_cutoff,
                                        a.transmittance_threshold, *bg, 0, 0], rtol=1e-6)
    # ranges tile the listed prefix in tile order; inside a tile, nearest splat first
    dist = np.linalg.norm(x[0].reshape(n, 3) - x[6][:3], axis=1)
    ends = 0
    for t in range(tw * th):
        s, e = ranges[2 * t:2 * t + 2]
        if s == 2.0 ** 32:
            assert e == 0
            continue
        assert s == ends and e > s
        ends = int(e)
        tile_ids = ids[int(s):int(e)].astype(int)
        assert list(dist[tile_ids]) == sorted(dist[tile_ids])
    assert ends > 0 and np.all(ids[ends:] == 0)


def test_list_overflow_keeps_the_first_entries():
    x, a, _, _ = _cases()[4]
    big = a.__class__(**{**a.__dict__, "max_list_entries": 64})
    small_img = run_single("GaussianSplatRender", a, *x)
    big_img = run_single("GaussianSplatRender", big, *x)
    assert not np.array_equal(small_img, big_img)


@pytest.mark.parametrize("edit, code", [
    (lambda x: (x[0][:-1],) + x[1:], "(C2)"),
    (lambda x: x[:6] + (x[6][:15],), "(C2)"),
    (lambda x: x[:5] + (np.zeros(4, F32),) + x[6:], "(C2)"),
    (lambda x: (x[0].astype(np.float64),) + x[1:], "(C1)"),
])
def test_scene_checks(edit, code):
    x, a, _, _ = _cases()[0]
    msgs = verify_single("GaussianSplatRender", a, edit(x))
    assert msgs and code in msgs[0]


def test_frame_and_prep_checks():
    x, a, _, _ = _cases()[0]
    bad = a.__class__(**{**a.__dict__, "tile_size": 0})
    assert "(C3)" in verify_single("GaussianSplatPrepare", bad, x, out=Shape((9,), DType.F32))[0]
    prep = run_single("GaussianSplatPrepare", a, *x)
    ra = _raster_attrs(a)
    assert verify_single("GaussianSplatRasterize", ra, (prep, x[6])) == []
    assert "(C4)" in verify_single("GaussianSplatRasterize", ra, (prep[:-1], x[6]))[0]


def test_backward_is_listed_not_registered():
    from rlx_ref.ops.splat import NOT_REGISTERED

    with pytest.raises(KeyError):
        get("GaussianSplatRenderBackward")
    assert "finite differences" in NOT_REGISTERED["GaussianSplatRenderBackward"]


# ── RLX's own outputs ──────────────────────────────────────────────────────
# tests/data/splat_rlx_cpu.npz holds, for the sample scenes and six random ones, the image
# of rlx-splat's `render_reference` and the buffer of `prepare_raster_from_slices` +
# `pack_prepared` (RLX's CPU splat reference built from its sources, f32 bit patterns).

VECTORS = Path(__file__).parent / "data" / "splat_rlx_cpu.npz"


def _vectors():
    z = np.load(VECTORS)
    for i in range(len({k.split("_")[0] for k in z.files})):
        x = tuple(z[f"{i}_{n}"] for n in NAMES)
        w, h, ts, rs, cut, steps, tmin, lst = z[f"{i}_attrs"]
        a = SplatRenderAttrs(int(w), int(h), int(ts), float(rs), float(cut), int(steps),
                             float(tmin), int(lst))
        yield i, x, a, z[f"{i}_image"], z[f"{i}_prep"]


@pytest.mark.parametrize("case", list(_vectors()), ids=lambda c: f"case{c[0]}")
def test_matches_rlx_cpu_reference(case):
    """Equal to RLX's f32 code up to transcendental-function ulps; lists and flags exact."""
    _, x, a, image, prep = case
    np.testing.assert_allclose(run_single("GaussianSplatRender", a, *x), image,
                               rtol=1e-5, atol=2e-6)
    got = run_single("GaussianSplatPrepare", a, *x)
    n = x[0].size // 3
    discrete = np.zeros(got.size, bool)
    discrete[4 * n:5 * n] = True                                   # valid flags
    lo = 15 * n
    tw, th = -(-a.width // a.tile_size), -(-a.height // a.tile_size)
    discrete[lo:lo + a.max_list_entries + 2 * tw * th] = True      # ids and ranges
    np.testing.assert_array_equal(got[discrete], prep[discrete])
    np.testing.assert_allclose(got[~discrete], prep[~discrete], rtol=1e-5, atol=2e-6)


# ── numba-cpu ──────────────────────────────────────────────────────────────

def _numba(kind, attrs, inputs):
    import rlx_ref
    from rlx_ref.ops.single import single_op_graph

    g = single_op_graph(kind, attrs, inputs)
    exe = rlx_ref.Session("numba-cpu").compile(g)
    return exe.run({f"x{i}": x for i, x in enumerate(inputs)})[0], exe


@pytest.mark.parametrize("case", list(_vectors())[::3], ids=lambda c: f"case{c[0]}")
def test_numba_rasterize_kernel(case):
    """The native kernel equals the f32 oracle (same steps) and RLX's image to ulps."""
    pytest.importorskip("numba")
    _, x, a, image, prep = case
    ra = _raster_attrs(a)
    got, _ = _numba("GaussianSplatRasterize", ra, (prep, x[6]))
    want = run_single("GaussianSplatRasterize", ra, prep, x[6])
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(got, image, rtol=1e-5, atol=2e-6)
    render, _ = _numba("GaussianSplatRender", a, x)
    np.testing.assert_allclose(render, image, rtol=1e-5, atol=2e-6)


def test_numba_claims():
    pytest.importorskip("numba")
    from rlx_ref.backends.numba_cpu.lowering import TABLE

    TABLE.load()
    paths = {k: TABLE.entries[k].path for k in
             ("GaussianSplatRasterize", "GaussianSplatPrepare", "GaussianSplatRender")}
    assert paths == {"GaussianSplatRasterize": "native", "GaussianSplatPrepare": "host",
                     "GaussianSplatRender": "host"}


def test_a_listed_id_past_n_is_refused():
    x, a, _, _ = _cases()[0]
    prep = run_single("GaussianSplatPrepare", a, *x).copy()
    prep[15 * 3] = 7.0                       # the first listed splat id; N is 3
    ra = _raster_attrs(a)
    with pytest.raises(Exception, match="C4"):
        run_single("GaussianSplatRasterize", ra, prep, x[6])
    pytest.importorskip("numba")
    with pytest.raises(Exception, match="splat id"):
        _numba("GaussianSplatRasterize", ra, (prep, x[6]))
