"""3D Gaussian splatting family: GaussianSplatRender, GaussianSplatPrepare,
GaussianSplatRasterize.

Render = Rasterize ∘ Prepare: splats are projected to screen ellipses, binned into tiles,
sorted nearest first per tile and alpha-composited front to back along each pixel's ray.
The oracle follows RLX's CPU splat reference line for line (``_splat_geom``,
``_splat_conic``, ``_splat_raster``, ``_splat_bin``); layouts are documented below.
GaussianSplatRenderBackward is not registered: see ``NOT_REGISTERED``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Shape
from . import _splat_bin as B
from . import _splat_raster as R
from ._splat_docs import NOTES, PREPARE_DOC, RASTER_DOC, RENDER_DOC, SCENE_CONSTRAINTS
from ._splat_samples import prepare_samples, rasterize_samples, render_samples
from .codec import F32, U32, attr
from .opdef import Caps, OpDef, register, want

META_LEN = 23
SCENE = ("positions", "scales", "rotations", "opacities", "colors", "sh_coeffs", "meta")
NOT_REGISTERED = {
    "GaussianSplatRenderBackward":
        "RLX's CPU backward is not the derivative of GaussianSplatRender: it differentiates a "
        "separate 'training' forward (linear output without the 2.2 gamma, background "
        "linearised before compositing, max_splat_steps honoured, tile ranges built from the "
        "unsorted keys), clips per-pixel and per-hit gradients at loss_grad_clip, writes the "
        "colour gradient into the SH DC slot without the C0 factor, takes the opacity "
        "gradient as max(raster term, dα·α(1-α)), and may reuse a process-wide cached forward "
        "instead of its inputs. Its result cannot match finite differences of Render. (This "
        "is the in-tree rlx-splat of RLX 0.2.2; at 01df7d9 the renderer lives out of tree "
        "and its backward cannot be read at all.)",
}


class _Rounded:
    """Rounds f32 payload fields on construction, as RLX stores them."""

    def __post_init__(self):
        for f in fields(self):
            if f.metadata.get("codec") is F32:
                object.__setattr__(self, f.name, F32.normalize(getattr(self, f.name)))


_CUT255 = float(np.float32(1.0 / 255.0))    # RLX default 1/255, as stored in f32
_W = dict(doc="framebuffer width in pixels (>= 1)")
_H = dict(doc="framebuffer height in pixels (>= 1)")
_TS = dict(doc="square tile edge in pixels (>= 1); tiles are row-major, ceil(W/ts) across")
_CUT = dict(doc="alpha below which a splat is culled (projection) or skipped (raster)")
_STEPS = dict(doc="carried but unused by RLX's CPU render and rasterize")
_TMIN = dict(doc="a pixel stops compositing once its transmittance drops below this")
_LIST = dict(doc="capacity of the tile list; entries beyond it are dropped")


@dataclass(frozen=True)
class SplatRenderAttrs(_Rounded):
    width: int = attr(U32, 64, **_W)
    height: int = attr(U32, 64, **_H)
    tile_size: int = attr(U32, 16, **_TS)
    radius_scale: float = attr(F32, 1.6, doc="multiplies every splat's sigma")
    alpha_cutoff: float = attr(F32, _CUT255, **_CUT)
    max_splat_steps: int = attr(U32, 32, **_STEPS)
    transmittance_threshold: float = attr(F32, 0.01, **_TMIN)
    max_list_entries: int = attr(U32, 576, **_LIST)


@dataclass(frozen=True)
class SplatRasterAttrs(_Rounded):
    width: int = attr(U32, 64, **_W)
    height: int = attr(U32, 64, **_H)
    tile_size: int = attr(U32, 16, **_TS)
    alpha_cutoff: float = attr(F32, _CUT255, **_CUT)
    max_splat_steps: int = attr(U32, 32, **_STEPS)
    transmittance_threshold: float = attr(F32, 0.01, **_TMIN)
    max_list_entries: int = attr(U32, 576, **_LIST)


def _numel(s: Shape):
    return s.numel if s.is_static else None


def _check_frame(a, kind):
    want(a.width >= 1 and a.height >= 1 and a.tile_size >= 1,
         f"(C3) {kind} needs width, height and tile_size >= 1, got {a.width}x{a.height} "
         f"tile {a.tile_size}")


def _check_scene(shapes, a, kind):
    want(all(s.dtype is DType.F32 for s in shapes),
         f"(C1) {kind} operands must all be f32 (RLX's executor reads f32 buffers), got "
         + ", ".join(str(s.dtype) for s in shapes))
    n3 = _numel(shapes[0])
    if n3 is not None:
        want(n3 > 0 and n3 % 3 == 0, f"(C2) positions must hold 3·N elements with N >= 1, "
                                     f"got {n3}")
        n = n3 // 3
        for s, name, per in zip(shapes[1:5], SCENE[1:5], (3, 4, 1, 3)):
            m = _numel(s)
            want(m is None or m == per * n, f"(C2) {name} must hold {per}·N = {per * n} "
                                            f"elements for N = {n} splats, got {m}")
        k = _numel(shapes[5])
        want(k is None or (k >= 3 * n and k % (3 * n) == 0),
             f"(C2) sh_coeffs must hold N·K·3 elements (K >= 1) for N = {n}, got {k}")
    m = _numel(shapes[6])
    want(m is None or m == META_LEN, f"(C2) meta must hold {META_LEN} floats, got {m}")
    _check_frame(a, kind)


def _check_raster(shapes, a, kind="GaussianSplatRasterize"):
    want(all(s.dtype is DType.F32 for s in shapes),
         f"(C1) {kind} operands must be f32, got " + ", ".join(str(s.dtype) for s in shapes))
    _check_frame(a, kind)
    m = _numel(shapes[1])
    want(m is None or m == META_LEN, f"(C2) meta must hold {META_LEN} floats, got {m}")
    size = _numel(shapes[0])
    if size is not None:
        n = _prep_count(size, a)
        base = R.prep_len(1, a.max_list_entries, a.width, a.height, a.tile_size)
        want(n is not None, f"(C4) prep holds {size} floats, which is no prepare-buffer length "
                            f"for these attributes ({base} + 15·(N - 1) expected)")


def _prep_count(size: int, a):
    """N from a prepare buffer's length, or None when no N >= 1 fits."""
    rest = size - R.prep_len(1, a.max_list_entries, a.width, a.height, a.tile_size)
    return None if rest < 0 or rest % 15 else 1 + rest // 15


def _infer_prep(shapes, a):
    """The prepare buffer's length; None (left to the checks) for a bad frame or dynamic N."""
    n3 = _numel(shapes[0])
    if n3 is None or a.tile_size < 1:
        return None
    size = R.prep_len(n3 // 3, a.max_list_entries, a.width, a.height, a.tile_size)
    return Shape((size,), shapes[0].dtype)


def _image(a):
    return lambda shapes, _a: Shape((a(_a),), shapes[0].dtype)


def _work(ctx, arrays):
    F = np.float64 if ctx.float64 else np.float32
    return F, [np.asarray(x, F).reshape(-1) for x in arrays]


def _ref_render(ctx, *arrays):
    F, xs = _work(ctx, arrays)
    return R.render(xs[:6], xs[6], ctx.attrs, F).astype(ctx.out_np)


def _ref_prepare(ctx, *arrays):
    F, xs = _work(ctx, arrays)
    p, vals, ranges, cam = R.prepare(xs[:6], xs[6], ctx.attrs, F)
    return B.pack(p, vals, ranges, cam, ctx.attrs, xs[6][12:15], F).astype(ctx.out_np)


def _ref_rasterize(ctx, prep, meta):
    F, (prep, meta) = _work(ctx, (prep, meta))
    a = ctx.attrs
    n = _prep_count(prep.size, a)
    want(n is not None, "(C4) prep length does not match the attributes")
    p, vals, ranges, tw = B.unpack(prep, n, a)
    cam = R.Camera(meta, a.width, a.height, F)
    return R.rasterize(p, vals, ranges, cam, a.tile_size, tw, meta[12:15], a.alpha_cutoff,
                       a.transmittance_threshold).astype(ctx.out_np)


_IMAGE_ACC = reduction(4, 64, "all", reason="a composite of ~64 rounded steps per pixel; "
                       "tile binning is discrete, so inputs keep away from its boundaries")

register(OpDef(
    kind="GaussianSplatRender", family="splat", attrs=SplatRenderAttrs, payload="struct",
    arity=7, caps=Caps.NONE, input_names=SCENE, dtypes=(DType.F32,),
    infer=_image(lambda a: a.width * a.height * 4),
    check=lambda s, a, o: _check_scene(s, a, "GaussianSplatRender"),
    reference=_ref_render, doc=RENDER_DOC, constraints=SCENE_CONSTRAINTS,
    samples=render_samples, accuracy=_IMAGE_ACC, notes=NOTES,
))

register(OpDef(
    kind="GaussianSplatPrepare", family="splat", attrs=SplatRenderAttrs, payload="struct",
    arity=7, caps=Caps.NONE, input_names=SCENE, dtypes=(DType.F32,),
    infer=_infer_prep,
    check=lambda s, a, o: _check_scene(s, a, "GaussianSplatPrepare"),
    reference=_ref_prepare, doc=PREPARE_DOC, constraints=SCENE_CONSTRAINTS,
    samples=prepare_samples, notes=NOTES,
    accuracy=reduction(4, 64, "all", reason="ids and ranges are exact integers; the conic "
                       "and colour fields come from short chains of rounded steps that "
                       "cancel near zero, so their error is judged against the buffer's "
                       "scale, not each element's"),
))

register(OpDef(
    kind="GaussianSplatRasterize", family="splat", attrs=SplatRasterAttrs, payload="struct",
    arity=2, caps=Caps.NONE, input_names=("prep", "meta"), dtypes=(DType.F32,),
    infer=_image(lambda a: a.width * a.height * 4), check=lambda s, a, o: _check_raster(s, a),
    reference=_ref_rasterize, doc=RASTER_DOC,
    constraints=SCENE_CONSTRAINTS[:1] + ("C2: meta holds 23 floats (as for Render).",
                                         SCENE_CONSTRAINTS[2],
                                         "C4: prep's length is a prepare-buffer length for "
                                         "N >= 1 under these attributes."),
    samples=rasterize_samples, accuracy=_IMAGE_ACC, notes=NOTES,
))
