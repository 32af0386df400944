// Flash attention on a CPU core: the host version of kernels/attention.hpp's
// block kernel, with the same contract (inputs, outputs, masks, -inf rows,
// accumulate flags, the count of computed tiles), restructured so the
// compiler vectorises it:
//   - K and V tiles are stored transposed ([d][bc]) for the score rows
//     S = Q K^T and dP = dO V^T, so every inner loop runs over contiguous
//     keys; P V, dS K, P^T dO and dS^T Q run over contiguous head-dim entries;
//   - the mask is evaluated per element only on tiles it cuts
//     (tile_all_visible says which tiles it leaves whole);
//   - softmax exponentials in float use a branch-free polynomial exp
//     (softmax_exp below) that vectorises; double keeps std::exp;
//   - head dims 16, 32, 64 and 128 are compile-time constants, so the
//     per-row loops unroll into registers.
// One team of one thread per (query tile, head) in the forward and the dQ
// pass, per (key tile, kv head) in the dK/dV pass, as the portable kernel:
// no atomics, and the result does not depend on the thread count.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace burst::kernels::impl {

// exp(x) for softmax arguments (x <= 0 in use; -inf and anything below -87
// give ~1e-38 or 0, callers zero masked entries themselves). Float: Cephes'
// expf polynomial on x - n ln2, |x - n ln2| <= ln2 / 2, scaled by 2^n from
// the exponent bits: relative error < 2e-7 (measured against std::exp in
// tests/test_attention.cpp), no branches, no calls, so loops over it
// vectorise. Double: std::exp (the tests' reference precision).
inline float softmax_exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // n = round(x log2 e) by the 1.5 * 2^23 shift (exact for |x log2 e| < 2^22,
  // vectorises where floor would be a libm call without -ffast-math).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  union {
    std::int32_t i;
    float f;
  } two_n;
  two_n.i = (std::int32_t(n) + 127) << 23;
  return y * two_n.f;
}
inline double softmax_exp(double x) { return std::exp(x); }

// Head dim as a compile-time constant where one of the common sizes (DC > 0),
// else the runtime value.
template <int DC> struct HeadDim {
  static constexpr long get(long) { return DC; }
};
template <> struct HeadDim<0> {
  static long get(long d) { return d; }
};

template <class Acc> inline Acc* carve(Acc*& p, long n) {
  Acc* r = p;
  p += n;
  return r;
}

// Tiles are padded so the micro-kernels below run on whole register blocks:
// rows to a multiple of kRowBlock (zero rows), key columns of the transposed
// tiles to a multiple of one 64-byte vector (zero columns).
constexpr long kRowBlock = 4;
template <class Acc> constexpr long vec_width() { return long(64 / sizeof(Acc)); }
inline long round_up(long x, long m) { return (x + m - 1) / m * m; }

// S[r][c] = sum_e A[r][e] Bt[e][c] for r < rows (a multiple of kRowBlock),
// c < cols (a multiple of the vector width); Bt and S have row stride ld.
// Accumulates a 4-row x 1-vector block in registers.
template <class Acc, int DC>
inline void tile_scores(const Acc* A, const Acc* Bt, Acc* S, long rows, long cols, long ld, long dd) {
  const long d = HeadDim<DC>::get(dd);
  constexpr long W = vec_width<Acc>(), R = kRowBlock;
  for (long r0 = 0; r0 < rows; r0 += R)
    for (long c0 = 0; c0 < cols; c0 += W) {
      Acc acc[R][W] = {};
      for (long e = 0; e < d; ++e) {
        const Acc* bt = Bt + e * ld + c0;
        for (long rr = 0; rr < R; ++rr) {
          const Acc a = A[(r0 + rr) * d + e];
#pragma omp simd
          for (long w = 0; w < W; ++w) acc[rr][w] += a * bt[w];
        }
      }
      for (long rr = 0; rr < R; ++rr)
#pragma omp simd
        for (long w = 0; w < W; ++w) S[(r0 + rr) * ld + c0 + w] = acc[rr][w];
    }
}

// Register-block height for the d-wide accumulators: 8 vectors at most.
template <class Acc, int DC> constexpr long acc_rows() {
  return DC <= 0 ? 1 : (DC * long(sizeof(Acc)) <= 128 ? 4 : (DC * long(sizeof(Acc)) <= 256 ? 2 : 1));
}

// Y[i][e] += sum_{k < nk} A[i * si + k * sk] B[k][e] for i < ny (a multiple
// of kRowBlock; Y holds that many rows), B and Y [.][d]. With (si, sk) =
// (lda, 1) it is Y += A B (P V, dS K); with (1, lda) Y += A^T B (P^T dO,
// dS^T Q). Accumulates up to 4 rows of Y in registers.
template <class Acc, int DC>
inline void tile_accum(const Acc* A, long si, long sk, const Acc* B, Acc* Y, long ny, long nk, long dd) {
  if constexpr (DC > 0) {
    constexpr long R = acc_rows<Acc, DC>();
    for (long i0 = 0; i0 < ny; i0 += R) {
      Acc acc[R][DC];
      for (long ii = 0; ii < R; ++ii)
#pragma omp simd
        for (long e = 0; e < DC; ++e) acc[ii][e] = Y[(i0 + ii) * DC + e];
      for (long k = 0; k < nk; ++k) {
        const Acc* b = B + k * DC;
        for (long ii = 0; ii < R; ++ii) {
          const Acc a = A[(i0 + ii) * si + k * sk];
#pragma omp simd
          for (long e = 0; e < DC; ++e) acc[ii][e] += a * b[e];
        }
      }
      for (long ii = 0; ii < R; ++ii)
#pragma omp simd
        for (long e = 0; e < DC; ++e) Y[(i0 + ii) * DC + e] = acc[ii][e];
    }
  } else {
    const long d = dd;
    for (long i = 0; i < ny; ++i)
      for (long k = 0; k < nk; ++k) {
        const Acc a = A[i * si + k * sk];
#pragma omp simd
        for (long e = 0; e < d; ++e) Y[i * d + e] += a * B[k * d + e];
      }
  }
}

// Load rows [row0, row0 + rows) of head `head` of v ([s, heads, d]) into
// dst[r][e] (row-major, times `mul`, zero rows up to `pad_rows`) and/or
// dstT[e][c] (transposed, row stride ld, zero columns up to ld), converting
// to Acc.
template <class Acc, class V>
inline void load_rows(const V& v, long row0, long rows, long head, long d, Acc mul, Acc* dst, long pad_rows, Acc* dstT,
                      long ld) {
  for (long r = 0; r < rows; ++r)
    for (long e = 0; e < d; ++e) {
      const Acc x = Acc(v(row0 + r, head, e));
      if (dst) dst[r * d + e] = x * mul;
      if (dstT) dstT[e * ld + r] = x;
    }
  if (dst)
    for (long x = rows * d; x < pad_rows * d; ++x) dst[x] = 0;
  if (dstT)
    for (long e = 0; e < d; ++e)
      for (long c = rows; c < ld; ++c) dstT[e * ld + c] = 0;
}

// Padded tile extents: rows (queries) and the transposed tiles' row stride.
template <class Acc> struct HostTileDims {
  long brp, ldb;
  HostTileDims(long br, long bc) : brp(round_up(br, kRowBlock)), ldb(round_up(bc, vec_width<Acc>())) {}
};

// --------------------------------------------------------------- forward
template <class T, class Acc, class Exec, class Mem, int DC> struct HostFlashForward {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;
  Kokkos::View<const T***, Layout, Mem> q, k, v;
  Kokkos::View<Acc***, Layout, Mem> o;
  Kokkos::View<Acc**, Layout, Mem> lse;
  AttnMask<Mem> mask;
  Acc scale;
  long sq, sk, n, d, br, bc, group;

  static size_t scratch_elems(long br, long bc, long d) {
    const HostTileDims<Acc> t(br, bc);
    return 2 * t.brp * d + 2 * t.ldb * d + t.brp * t.ldb + 2 * t.brp;
  }
  static size_t scratch_bytes(long br, long bc, long d) { return scratch_elems(br, bc, d) * sizeof(Acc) + 64; }

  void operator()(const Member& t, long& computed) const {
    const long dd = HeadDim<DC>::get(d);
    const HostTileDims<Acc> td(br, bc);
    const long brp = td.brp, ldb = td.ldb;
    const long h = t.league_rank() % n, tile = t.league_rank() / n, hk = h / group;
    const long i0 = tile * br, i1 = (i0 + br < sq) ? i0 + br : sq, rows = i1 - i0, rowsp = round_up(rows, kRowBlock);
    Acc* p = static_cast<Acc*>(t.team_shmem().get_shmem(scratch_elems(br, bc, dd) * sizeof(Acc)));
    Acc *Q = carve(p, brp * dd), *O = carve(p, brp * dd), *Kt = carve(p, ldb * dd), *Vs = carve(p, ldb * dd),
        *S = carve(p, brp * ldb), *m = carve(p, brp), *l = carve(p, brp);
    const Acc ninf = neg_inf<Acc>();
    load_rows(q, i0, rows, h, dd, scale, Q, rowsp, static_cast<Acc*>(nullptr), 0);  // queries pre-scaled
    for (long x = 0; x < rowsp * dd; ++x) O[x] = 0;
    for (long r = 0; r < rows; ++r) m[r] = ninf, l[r] = 0;
    for (long j0 = 0; j0 < sk; j0 += bc) {
      const long j1 = (j0 + bc < sk) ? j0 + bc : sk, cols = j1 - j0;
      if (!mask.tile_visible(i0, i1, j0, j1)) continue;
      computed += 1;
      const bool whole = mask.tile_all_visible(i0, i1, j0, j1);
      const long colsp = round_up(cols, vec_width<Acc>());
      load_rows(k, j0, cols, hk, dd, Acc(1), static_cast<Acc*>(nullptr), 0, Kt, colsp);
      load_rows(v, j0, cols, hk, dd, Acc(1), Vs, cols, static_cast<Acc*>(nullptr), 0);
      tile_scores<Acc, DC>(Q, Kt, S, rowsp, colsp, colsp, dd);
      for (long r = 0; r < rows; ++r) {
        Acc* s = S + r * colsp;
        if (!whole)
          for (long c = 0; c < cols; ++c)
            if (!mask.visible(i0 + r, j0 + c)) s[c] = ninf;
        Acc mx = ninf;
#pragma omp simd reduction(max : mx)
        for (long c = 0; c < cols; ++c) mx = s[c] > mx ? s[c] : mx;
        if (mx == ninf) {  // nothing visible in this tile for this row: P = 0
          for (long c = 0; c < cols; ++c) s[c] = 0;
          continue;
        }
        const Acc mold = m[r], mnew = mold > mx ? mold : mx;
        const Acc alpha = std::exp(mold - mnew);  // 0 when mold = -inf
        Acc lsum = 0;
#pragma omp simd reduction(+ : lsum)
        for (long c = 0; c < cols; ++c) {
          const Acc e = softmax_exp(s[c] - mnew);
          const Acc pc = s[c] == ninf ? Acc(0) : e;
          s[c] = pc;
          lsum += pc;
        }
        l[r] = l[r] * alpha + lsum;
        m[r] = mnew;
        Acc* orow = O + r * dd;
#pragma omp simd
        for (long e = 0; e < dd; ++e) orow[e] *= alpha;
      }
      // O += P V over all (padded) rows: padded rows have zero queries, so
      // zero scores and P = S = 0 there.
      tile_accum<Acc, DC>(S, colsp, 1, Vs, O, rowsp, cols, dd);
    }
    for (long r = 0; r < rows; ++r) {
      const long i = i0 + r;
      const bool empty = l[r] == Acc(0);
      lse(i, h) = empty ? ninf : m[r] + std::log(l[r]);
      const Acc inv = empty ? Acc(0) : Acc(1) / l[r];
      for (long e = 0; e < dd; ++e) o(i, h, e) = O[r * dd + e] * inv;
    }
  }
};

// The backward's tiles P = exp(S - lse) (S from pre-scaled queries) and
// dS = P (dP - D), dP = dO V^T, over rowsp x colsp (row stride colsp), with
// masked entries, -inf rows (padding rows included) and padding columns zero.
template <class Acc, int DC, class MaskT>
inline void backward_tile(const MaskT& mask, bool whole, long i0, long j0, long rows, long rowsp, long cols,
                          long colsp, long d, const Acc* Q, const Acc* dO, const Acc* Kt, const Acc* Vt, const Acc* L,
                          const Acc* Dr, Acc* P, Acc* dS) {
  tile_scores<Acc, DC>(Q, Kt, P, rowsp, colsp, colsp, d);
  tile_scores<Acc, DC>(dO, Vt, dS, rowsp, colsp, colsp, d);
  const Acc ninf = neg_inf<Acc>();
  for (long r = 0; r < rowsp; ++r) {
    Acc *pr = P + r * colsp, *dr = dS + r * colsp;
    const Acc lr = L[r], Dv = Dr[r];
    if (lr == ninf) {  // the row saw no key anywhere, or is padding: no gradient
      for (long c = 0; c < colsp; ++c) pr[c] = 0, dr[c] = 0;
      continue;
    }
#pragma omp simd
    for (long c = 0; c < colsp; ++c) {
      const Acc pc = c < cols ? softmax_exp(pr[c] - lr) : Acc(0);
      pr[c] = pc;
      dr[c] = pc * (dr[c] - Dv);
    }
    if (!whole)
      for (long c = 0; c < cols; ++c)
        if (!mask.visible(i0 + r, j0 + c)) pr[c] = 0, dr[c] = 0;
  }
}

// The backward's query-side tile of head h, rows [i0, i0 + rows): Q
// (pre-scaled) and dO with zero padding rows up to rowsp, lse (-inf on
// padding rows, so backward_tile zeroes them) and D.
template <class Acc, class V3, class V2>
inline void load_query_tile(const V3& q, const V3& dout, const V2& lse, const V2& D, long i0, long rows, long rowsp, long h,
                            long d, Acc scale, Acc* Q, Acc* dO, Acc* L, Acc* Dr) {
  load_rows(q, i0, rows, h, d, scale, Q, rowsp, static_cast<Acc*>(nullptr), 0);
  load_rows(dout, i0, rows, h, d, Acc(1), dO, rowsp, static_cast<Acc*>(nullptr), 0);
  for (long r = 0; r < rowsp; ++r)
    L[r] = r < rows ? Acc(lse(i0 + r, h)) : neg_inf<Acc>(), Dr[r] = r < rows ? Acc(D(i0 + r, h)) : Acc(0);
}

// ---------------------------------------------------------- backward: dK, dV
template <class T, class Acc, class Exec, class Mem, int DC> struct HostFlashBackwardKV {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;
  Kokkos::View<const T***, Layout, Mem> q, k, v, dout;
  Kokkos::View<const Acc**, Layout, Mem> lse, D;
  Kokkos::View<Acc***, Layout, Mem> dk, dv;
  AttnMask<Mem> mask;
  Acc scale;
  long sq, sk, n, nkv, d, br, bc, group;
  bool accumulate;

  static size_t scratch_elems(long br, long bc, long d) {
    const HostTileDims<Acc> t(br, bc);
    return 4 * t.ldb * d + 2 * t.brp * d + 2 * t.brp * t.ldb + 2 * t.brp;
  }
  static size_t scratch_bytes(long br, long bc, long d) { return scratch_elems(br, bc, d) * sizeof(Acc) + 64; }

  void operator()(const Member& t, long& computed) const {
    const long dd = HeadDim<DC>::get(d);
    const HostTileDims<Acc> td(br, bc);
    const long brp = td.brp, ldb = td.ldb;
    const long hk = t.league_rank() % nkv, tile = t.league_rank() / nkv;
    const long j0 = tile * bc, j1 = (j0 + bc < sk) ? j0 + bc : sk, cols = j1 - j0;
    const long colsp = round_up(cols, vec_width<Acc>());
    Acc* p = static_cast<Acc*>(t.team_shmem().get_shmem(scratch_elems(br, bc, dd) * sizeof(Acc)));
    Acc *Kt = carve(p, ldb * dd), *Vt = carve(p, ldb * dd), *dK = carve(p, ldb * dd), *dV = carve(p, ldb * dd),
        *Q = carve(p, brp * dd), *dO = carve(p, brp * dd), *P = carve(p, brp * ldb), *dS = carve(p, brp * ldb),
        *L = carve(p, brp), *Dr = carve(p, brp);
    load_rows(k, j0, cols, hk, dd, Acc(1), static_cast<Acc*>(nullptr), 0, Kt, colsp);
    load_rows(v, j0, cols, hk, dd, Acc(1), static_cast<Acc*>(nullptr), 0, Vt, colsp);
    for (long x = 0; x < colsp * dd; ++x) dK[x] = 0, dV[x] = 0;
    for (long g = 0; g < group; ++g) {
      const long h = hk * group + g;
      for (long i0 = 0; i0 < sq; i0 += br) {
        const long i1 = (i0 + br < sq) ? i0 + br : sq, rows = i1 - i0, rowsp = round_up(rows, kRowBlock);
        if (!mask.tile_visible(i0, i1, j0, j1)) continue;
        computed += 1;
        const bool whole = mask.tile_all_visible(i0, i1, j0, j1);
        load_query_tile(q, dout, lse, D, i0, rows, rowsp, h, dd, scale, Q, dO, L, Dr);
        backward_tile<Acc, DC>(mask, whole, i0, j0, rows, rowsp, cols, colsp, dd, Q, dO, Kt, Vt, L, Dr, P, dS);
        // dV += P^T dO, dK += dS^T (scale Q): Q is stored pre-scaled.
        tile_accum<Acc, DC>(P, 1, colsp, dO, dV, round_up(cols, kRowBlock), rows, dd);
        tile_accum<Acc, DC>(dS, 1, colsp, Q, dK, round_up(cols, kRowBlock), rows, dd);
      }
    }
    for (long c = 0; c < cols; ++c)
      for (long e = 0; e < dd; ++e) {
        const long j = j0 + c;
        if (accumulate) {
          dk(j, hk, e) += dK[c * dd + e];
          dv(j, hk, e) += dV[c * dd + e];
        } else {
          dk(j, hk, e) = dK[c * dd + e];
          dv(j, hk, e) = dV[c * dd + e];
        }
      }
  }
};

// ------------------------------------------------------------- backward: dQ
template <class T, class Acc, class Exec, class Mem, int DC> struct HostFlashBackwardQ {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;
  Kokkos::View<const T***, Layout, Mem> q, k, v, dout;
  Kokkos::View<const Acc**, Layout, Mem> lse, D;
  Kokkos::View<Acc***, Layout, Mem> dq;
  AttnMask<Mem> mask;
  Acc scale;
  long sq, sk, n, d, br, bc, group;
  bool accumulate;

  static size_t scratch_elems(long br, long bc, long d) {
    const HostTileDims<Acc> t(br, bc);
    return 3 * t.brp * d + 3 * t.ldb * d + 2 * t.brp * t.ldb + 2 * t.brp;
  }
  static size_t scratch_bytes(long br, long bc, long d) { return scratch_elems(br, bc, d) * sizeof(Acc) + 64; }

  void operator()(const Member& t, long& computed) const {
    const long dd = HeadDim<DC>::get(d);
    const HostTileDims<Acc> td(br, bc);
    const long brp = td.brp, ldb = td.ldb;
    const long h = t.league_rank() % n, tile = t.league_rank() / n, hk = h / group;
    const long i0 = tile * br, i1 = (i0 + br < sq) ? i0 + br : sq, rows = i1 - i0, rowsp = round_up(rows, kRowBlock);
    Acc* p = static_cast<Acc*>(t.team_shmem().get_shmem(scratch_elems(br, bc, dd) * sizeof(Acc)));
    Acc *Q = carve(p, brp * dd), *dO = carve(p, brp * dd), *dQ = carve(p, brp * dd), *Kt = carve(p, ldb * dd),
        *Ks = carve(p, ldb * dd), *Vt = carve(p, ldb * dd), *P = carve(p, brp * ldb), *dS = carve(p, brp * ldb),
        *L = carve(p, brp), *Dr = carve(p, brp);
    load_query_tile(q, dout, lse, D, i0, rows, rowsp, h, dd, scale, Q, dO, L, Dr);
    for (long x = 0; x < rowsp * dd; ++x) dQ[x] = 0;
    for (long j0 = 0; j0 < sk; j0 += bc) {
      const long j1 = (j0 + bc < sk) ? j0 + bc : sk, cols = j1 - j0;
      if (!mask.tile_visible(i0, i1, j0, j1)) continue;
      computed += 1;
      const bool whole = mask.tile_all_visible(i0, i1, j0, j1);
      const long colsp = round_up(cols, vec_width<Acc>());
      load_rows(k, j0, cols, hk, dd, Acc(1), Ks, cols, Kt, colsp);
      load_rows(v, j0, cols, hk, dd, Acc(1), static_cast<Acc*>(nullptr), 0, Vt, colsp);
      backward_tile<Acc, DC>(mask, whole, i0, j0, rows, rowsp, cols, colsp, dd, Q, dO, Kt, Vt, L, Dr, P, dS);
      tile_accum<Acc, DC>(dS, colsp, 1, Ks, dQ, rowsp, cols, dd);  // dQ += dS K (times scale at the end)
    }
    for (long r = 0; r < rows; ++r)
      for (long e = 0; e < dd; ++e) {
        const Acc x = scale * dQ[r * dd + e];
        if (accumulate) dq(i0 + r, h, e) += x;
        else dq(i0 + r, h, e) = x;
      }
  }
};

// Launch a host functor for the head dim at hand.
template <template <class, class, class, class, int> class F, class T, class Acc, class Exec, class Mem, class Make>
long host_launch(const char* name, long d, long league, long br, long bc, Make make) {
  auto go = [&](auto dc) {
    using Fn = F<T, Acc, Exec, Mem, decltype(dc)::value>;
    Fn f = make(Fn{});
    const size_t bytes = Fn::scratch_bytes(br, bc, d);
    long computed = 0;
    Kokkos::parallel_reduce(name, Kokkos::TeamPolicy<Exec>(league, 1).set_scratch_size(0, Kokkos::PerTeam(bytes)), f,
                            computed);
    return computed;
  };
  switch (d) {
    case 16: return go(std::integral_constant<int, 16>{});
    case 32: return go(std::integral_constant<int, 32>{});
    case 64: return go(std::integral_constant<int, 64>{});
    case 128: return go(std::integral_constant<int, 128>{});
    default: return go(std::integral_constant<int, 0>{});
  }
}

}  // namespace burst::kernels::impl
