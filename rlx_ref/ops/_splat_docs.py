"""Doc paragraphs, constraints and notes of the splat family (kept apart: they are long)."""

_SCENE = (
    "Inputs (flat f32, N splats): `positions [3N]` world xyz; `scales [3N]` log sigma per "
    "local axis; `rotations [4N]` quaternion **(w, x, y, z)**, used unnormalised; "
    "`opacities [N]` raw, clamped to [0, 1]; `colors [3N]` RGB in [0, 1]; "
    "`sh_coeffs [N·K·3]` (K >= 1 coefficients, channel fastest) of which bands 0 and 1 "
    "(K <= 4) are evaluated as `0.5 + C0·c0 - C1·y·c1 + C1·z·c2 - C1·x·c3` with (x, y, z) "
    "the unit direction splat → camera; when K < 16 and every splat's DC coefficient is 0 "
    "(|c| <= 1e-8) the DC coefficient is replaced by `(clamp(color, 0, 1) - 0.5)/C0`, so "
    "the splat shows `colors`. `meta [23]`: camera position (0-2), target (3-5), up (6-8), "
    "vertical fov in degrees (9), near (10, unused), far (11), background sRGB (12-14), then "
    "width, height, tile_size, radius_scale, alpha_cutoff, max_splat_steps, "
    "transmittance_threshold, max_list_entries as floats (15-22: ignored; the payload "
    "rules). Camera: look-at basis rows right = n(up × fwd), up' = fwd × right, fwd = "
    "n(target - position); focal f = 0.5·H / tan(fov/2) for x and y; principal point "
    "(W/2, H/2); screen x = f·X/Z + W/2, y = f·Y/Z + H/2 (y grows with world up'). ")

_PROJECT = (
    "Projection: a splat's raster frame is `inv_scale = 1/(exp(scale)·radius_scale·3)` per "
    "axis and `pos_local = quat_rotate(camera - position, q) · inv_scale`. A splat is valid "
    "when its clamped opacity o >= alpha_cutoff, the silhouette ellipse fits and it is in "
    "front (camera z > 1e-4) and overlaps the frame. The silhouette is the ellipsoid of "
    "sigma-radius k = sqrt(-2 ln(alpha_cutoff/o)) (opacity·gaussian = alpha_cutoff): five "
    "points of its tangent circle seen from the camera are projected and a conic fitted "
    "through them (f64); its centre, radius (larger semi-axis + 1 px) and conic (a, b, c) "
    "are kept; a camera inside the ellipsoid gets a full-screen circle. Binning: valid "
    "splats nearest first (stable sort on camera distance); each covers, per tile row (or "
    "column, along its longer axis), the tiles from the first to the last whose box meets "
    "the conic (min of the quadratic form over the box <= 1 + 1e-6); entries past "
    "max_list_entries are dropped. The list is stably sorted by tile id, so within a tile "
    "splats stay nearest first. ")

_RASTER = (
    "Raster: pixel (px, py) reads tile (py/ts)·ceil(W/ts) + px/ts. An empty tile gives the "
    "linearised background `max(bg, 0)^2.2` with alpha 1. Otherwise its ray (through the "
    "pixel centre) meets each listed valid splat with `alpha = o·exp(-rho²/2)`, rho the "
    "distance of the ray's closest approach in the splat's frame of sigma = "
    "exp(scale)·radius_scale (alpha 0 when that point is behind the camera); alphas "
    "below alpha_cutoff are skipped; colour accumulates "
    "front to back `C += T·alpha·rgb, T *= 1 - alpha`, stopping once T < "
    "transmittance_threshold. Output `[H·W·4]` row-major RGBA: rgb = max(C + T·bg, 0)^2.2 "
    "(the sRGB background composited, then the gamma), alpha = 1 - T. ")

RENDER_DOC = ("Gaussian-splat render in one op (project → bin → sort → raster); equals "
              "GaussianSplatRasterize(GaussianSplatPrepare(scene), meta). " + _SCENE
              + _PROJECT + _RASTER)

PREPARE_DOC = (
    "Stage 1 of the splat render: project, bin and sort, packed into one flat buffer of "
    "`15·N + L + 2·T + 3·P + 11` floats (L = max_list_entries, T = tile count, P = W·H), in "
    "this order: color_alpha `[N, 4]` (SH colour, raw opacity); valid `[N]` (0/1); "
    "pos_local `[N, 3]`; inv_scale `[N, 3]`; rotations `[N, 4]` as given; the sorted splat "
    "ids `[L]` (zero past the listed count); tile ranges `[T, 2]` = [start, end) into the "
    "list, an empty tile [2^32, 0] (u32::MAX in f32); unit pixel rays `[P, 3]` (row-major, "
    "through pixel centres); and W, H, ts, ceil(W/ts), alpha_cutoff, "
    "transmittance_threshold, the linearised background (3), 0, 0. " + _SCENE + _PROJECT)

RASTER_DOC = (
    "Stage 2 of the splat render: composite a GaussianSplatPrepare buffer (layout on that "
    "op; N follows from its length) under the camera and background of `meta [23]`. Only "
    "color_alpha, valid, pos_local, inv_scale, rotations, the sorted ids, the ranges and "
    "the stored tiles-across count are read; the rays and the other params are recomputed "
    "or taken from the payload and meta. " + _RASTER)

SCENE_CONSTRAINTS = (
    "C1: every operand is f32 (RLX's executor reads f32 buffers); the output is f32.",
    "C2: positions hold 3N floats (N >= 1), scales 3N, rotations 4N, opacities N, colors "
    "3N, sh_coeffs N·K·3 (K >= 1), meta 23.",
    "C3: width, height and tile_size are >= 1.",
)

NOTES = (
    "Semantics are RLX's CPU splat reference (rlx-splat: reference/{project,binning,raster,"
    "native_prep}.rs, prep_layout.rs, core/{camera,sh}.rs), which newer RLX keeps out of "
    "tree behind rlx-cpu/src/splat.rs; the buffer lengths, the 23-float meta and the op "
    "payloads are those of rlx-ir's ops/splat.rs at 01df7d9. RLX's op.rs comment "
    "contradicts its executor in three places, and the executor is followed: rotations are "
    "(w, x, y, z), not xyzw; opacities are used raw (clamped), not as logits; colours are "
    "used only through the SH DC override. max_splat_steps is ignored by render and "
    "rasterize (RLX's prepare stores 0 for it). RLX's rasterize thunk takes N from the "
    "producing Prepare node and assumes 1 otherwise; here N follows from the buffer "
    "length, which agrees whenever the prep comes from a Prepare. N = 0 is outside the "
    "contract (RLX's render returns zeros but its prepare packs a misaligned buffer). "
    "The f32 oracle rounds step by step like RLX's f32 code, but transcendental functions "
    "may differ from Rust's by an ulp.")
