"""Kernel source of the radix path of Sort/ArgSort (numba-cpu): long f32/i32 lines.

A least-significant-digit radix sort over 32-bit order keys, four passes of 8 bits; each
pass is a counting sort, which keeps equal keys in input order, so the result is stable as
the merge sort's. The key of an f32 ranks as the oracle does: -0.0 and +0.0 share one key
(so they keep input order), every NaN shares the largest key (last, in input order);
descending inverts the key (NaN first, ties still in input order). The values themselves
travel (their bits, not the keys), so -0.0 and NaN payloads come out unchanged. A pass is
split into one chunk per thread: chunk histograms in prange, offsets digit-major then
chunk, scatters in prange; a pass whose digit is the same for every element is skipped.
"""

RADIX_SOURCE = '''
@njit(**_NJ)
def _rkey(u, fkey, desc):
    # the order key in [0, 2^32) of the 32 bits u (an f32 when fkey, else an i32)
    b = np.int64(u)
    if fkey:
        m = b & 0x7FFFFFFF
        if m > 0x7F800000:
            k = 0xFFFFFFFF
        elif m == 0:
            k = 0x80000000
        elif b >= 0x80000000:
            k = 0xFFFFFFFF - b
        else:
            k = b + 0x80000000
    else:
        k = b ^ 0x80000000
    return 0xFFFFFFFF - k if desc else k


@njit(parallel=True, **_KJ)
def radix_line(bits, idx, tb, ti, fkey, desc, arg, nch):
    """Stable sort of the u32 ``bits`` (with ``idx`` when ``arg``); ``tb``/``ti`` are
    scratch. Returns the (bits, indices) arrays that hold the result."""
    n = bits.size
    step = (n + nch - 1) // nch
    cnt = np.zeros((nch, 256), np.int64)
    if arg:
        for k in prange(n):
            idx[k] = k
    sb, si, db, di = bits, idx, tb, ti
    for p in range(4):
        shift = 8 * p
        for c in prange(nch):
            for d in range(256):
                cnt[c, d] = 0
            for k in range(c * step, min(n, c * step + step)):
                cnt[c, (_rkey(sb[k], fkey, desc) >> shift) & 255] += 1
        same = False
        for d in range(256):
            s = 0
            for c in range(nch):
                s += cnt[c, d]
            same = same or s == n
        if same:
            continue
        tot = 0
        for d in range(256):
            for c in range(nch):
                v = cnt[c, d]
                cnt[c, d] = tot
                tot += v
        for c in prange(nch):
            for k in range(c * step, min(n, c * step + step)):
                d = (_rkey(sb[k], fkey, desc) >> shift) & 255
                pos = cnt[c, d]
                cnt[c, d] = pos + 1
                db[pos] = sb[k]
                if arg:
                    di[pos] = si[k]
        sb, si, db, di = db, di, sb, si
    return sb, si


@njit(**_KJ)
def sort_lines_radix(out, x, n, inner, desc, arg, nch, fkey):
    lines = x.size // n
    v = np.empty(n, x.dtype)
    idx = np.empty(n if arg else 1, np.int64)
    ti = np.empty(n if arg else 1, np.int64)
    tv = np.empty(n, x.dtype)
    for t in range(lines):
        o = t // inner
        base = o * n * inner + t % inner
        for k in range(n):
            v[k] = x[base + k * inner]
        sb, si = radix_line(v.view(np.uint32), idx, tv.view(np.uint32), ti, fkey, desc,
                            arg, nch)
        sv = sb.view(x.dtype)
        for k in range(n):
            if arg:
                out[base + k * inner] = si[k]
            else:
                out[base + k * inner] = sv[k]
'''
