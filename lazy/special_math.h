// The special functions behind loom's special-function ops (lazy/elementwise.h: I0e, I1e, K0e,
// K1e, Erfcx, Zeta), written once as templates over the value type like every kernel
// expression: with double they are the CPU kernels, with fusion's symbolic values the generators
// of fused CPU and CUDA source. So each is straight-line code: a fixed number of terms, every
// branch computed and one chosen by select(), no loop whose length depends on the data. Each
// works in double (D) whatever the op's dtype; the op converts its result back.
//
// The methods (chosen for that constraint, all with errors near double rounding over the whole
// range; tests/python/test_special_s33.py compares them with scipy and torch):
// - I0, I1: the power series (positive terms, no cancellation) below 20; above, the asymptotic
//   series e^x / sqrt(2 pi x) sum_k c_k / x^k, whose terms shrink until k ~ 2x (22 terms kept).
// - K0, K1: below 2, the series of K in terms of log(x/2), I and harmonic numbers; above 2, the
//   integral e^x K_nu(x) = int_0^inf cosh(nu t) exp(-2x sinh(t/2)^2) dt by the trapezoidal rule
//   with a step scaled to the integrand's width 1/sqrt(x) (the rule converges geometrically for
//   such integrands; 28 nodes reach double precision from x = 2 up).
// - erfcx: exp(x^2) erfc(x) below 3 (erfc keeps its relative precision there), above it the
//   continued fraction erfcx(x) = (1/sqrt(pi)) / (x + (1/2) / (x + 1 / (x + (3/2) / ...))),
//   40 levels evaluated from the bottom.
// - Hurwitz zeta(s, q) = sum_k (q + k)^-s: 20 terms summed, the rest by Euler-Maclaurin with 12
//   Bernoulli terms at w = q + 20. PyTorch's (Cephes') domain rules: s = 1 gives inf, s < 1 NaN;
//   q <= 0: inf at the integers, NaN unless s is an integer. Negative q is computed while
//   q + 20 stays above 9 (q > -11), where the correction is accurate; below that loom gives NaN
//   rather than a wrong value (Cephes walks as many terms as it takes).
#pragma once

#include <array>

#include "lazy/math.h"

namespace loom::math::special {

// 1/(k!)^2 and 1/(k!(k+1)!), k = 0..kN-1: the series of I0 and I1 in y = x^2/4. Computed in long
// double at compile time so each coefficient is the double nearest its value.
inline constexpr int kSeriesTerms = 40;
inline constexpr auto kI0Series = [] {
  std::array<double, kSeriesTerms> c{};
  long double f = 1;
  for (int k = 0; k < kSeriesTerms; ++k) {
    if (k > 0) f *= k;
    c[k] = static_cast<double>(1.0L / (f * f));
  }
  return c;
}();
inline constexpr auto kI1Series = [] {
  std::array<double, kSeriesTerms> c{};
  long double f = 1;
  for (int k = 0; k < kSeriesTerms; ++k) {
    if (k > 0) f *= k;
    c[k] = static_cast<double>(1.0L / (f * f * (k + 1)));
  }
  return c;
}();
// The asymptotic series of I_nu: e^-x sqrt(2 pi x) I_nu(x) ~ sum_k c_k x^-k with
// c_k = prod_{j<=k} -(4 nu^2 - (2j - 1)^2) / (8 j).
inline constexpr int kAsymptoticTerms = 22;
template <int Nu>
inline constexpr auto kIAsymptotic = [] {
  std::array<double, kAsymptoticTerms> c{};
  long double t = 1;
  for (int k = 0; k < kAsymptoticTerms; ++k) {
    if (k > 0) t *= -(4.0L * Nu * Nu - (2.0L * k - 1) * (2.0L * k - 1)) / (8.0L * k);
    c[k] = static_cast<double>(t);
  }
  return c;
}();
// The K series' harmonic parts: H_k / (k!)^2 (K0) and (H_k + H_{k+1}) / (k!(k+1)!) (K1), below 2.
inline constexpr int kKTerms = 16;
inline constexpr auto kK0Harmonic = [] {
  std::array<double, kKTerms> c{};
  long double f = 1, h = 0;
  for (int k = 0; k < kKTerms; ++k) {
    if (k > 0) f *= k, h += 1.0L / k;
    c[k] = static_cast<double>(h / (f * f));
  }
  return c;
}();
inline constexpr auto kK1Harmonic = [] {
  std::array<double, kKTerms> c{};
  long double f = 1, h = 0;
  for (int k = 0; k < kKTerms; ++k) {
    if (k > 0) f *= k, h += 1.0L / k;
    c[k] = static_cast<double>((2 * h + 1.0L / (k + 1)) / (f * f * (k + 1)));
  }
  return c;
}();

inline constexpr double kEulerGamma = 0.57721566490153286061;
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;
inline constexpr double kInvSqrtPi = 0.56418958354775628695;

// sum_k c[k] y^k by Horner's rule.
template <typename D, size_t N>
D horner(const std::array<double, N>& c, D y, size_t terms = N) {
  D s = D(c[terms - 1]);
  for (size_t k = terms - 1; k-- > 0;) s = s * y + D(c[k]);
  return s;
}

// e^-|x| I_nu(|x|) for nu = 0, 1 (the sign of I1 is the caller's).
template <int Nu, typename D>
D scaled_i(D x) {
  D a = abs(x);
  D y = a * a * D(0.25);
  D series;
  if constexpr (Nu == 0) series = horner(kI0Series, y);
  else series = a * D(0.5) * horner(kI1Series, y);
  D small = series * exp(-a);
  D large = horner(kIAsymptotic<Nu>, D(1) / a) * D(kInvSqrt2Pi) / sqrt(a);
  return select(a < D(20), small, large);
}

template <typename D> D i0e(D x) { return scaled_i<0>(x); }
template <typename D> D i1e(D x) { return copysign(scaled_i<1>(x), x); }

// e^x K_nu(x), nu = 0, 1: inf at 0, NaN below 0, 0 at inf (Cephes' values, as PyTorch's).
template <int Nu, typename D>
D scaled_k(D x) {
  // x <= 2: the series, with I's series at the same y.
  D y = x * x * D(0.25);
  D l = log(x * D(0.5));
  D series;
  if constexpr (Nu == 0) {
    series = horner(kK0Harmonic, y, kKTerms) - (l + D(kEulerGamma)) * horner(kI0Series, y, kKTerms);
  } else {
    D i1 = x * D(0.5) * horner(kI1Series, y, kKTerms);
    series = D(1) / x + l * i1 - x * D(0.25) * (horner(kK1Harmonic, y) - D(2 * kEulerGamma) * horner(kI1Series, y, kKTerms));
  }
  D small = series * exp(x);
  // x > 2: the trapezoidal rule in t = s / sqrt(x), nodes every 0.35 in s up to s = 9.8, where the
  // integrand has fallen below e^-48.
  constexpr int kNodes = 28;
  D h = D(0.35) / sqrt(x);
  D sum = D(0.5);
  for (int j = 1; j <= kNodes; ++j) {
    D t = h * D(double(j));
    D sh = sinh(t * D(0.5));
    D e = exp(D(-2) * x * sh * sh);
    if constexpr (Nu == 0) sum = sum + e;
    else sum = sum + cosh(t) * e;
  }
  D large = select(isinf(x), D(0), sum * h);
  D value = select(x > D(2), large, small);
  value = select(x == D(0), D(INFINITY), value);
  return select(x < D(0), D(NAN), value);
}

template <typename D> D k0e(D x) { return scaled_k<0>(x); }
template <typename D> D k1e(D x) { return scaled_k<1>(x); }

template <typename D>
D erfcx(D x) {
  D direct = exp(x * x) * erfc(x);
  D t = x;
  for (int k = 40; k >= 1; --k) t = x + D(0.5 * k) / t;
  D tail = D(kInvSqrtPi) / t;
  return select(x < D(3), direct, tail);
}

// B_2k / (2k)!, k = 1..12.
inline constexpr double kBernoulliOverFactorial[12] = {
    0.083333333333333329, -0.0013888888888888889, 3.3068783068783071e-05, -8.2671957671957675e-07,
    2.08767569878681e-08, -5.2841901386874932e-10, 1.3382536530684679e-11, -3.3896802963225827e-13,
    8.5860620562778452e-15, -2.1748686985580619e-16, 5.5090028283602295e-18, -1.3954464685812525e-19};

template <typename D>
D zeta(D s, D q) {
  constexpr int kDirect = 20;
  D sum = D(0);
  for (int i = 0; i < kDirect; ++i) sum = sum + pow(q + D(double(i)), -s);
  D w = q + D(double(kDirect));
  D b = pow(w, -s);
  // Euler-Maclaurin: w^(1-s)/(s-1) + w^-s/2 + sum_k B_2k/(2k)! s(s+1)...(s+2k-2) w^(-s-2k+1).
  D tail = w * b / (s - D(1)) + D(0.5) * b;
  D rising = s;        // s(s+1)...(s+2k-2)
  D power = b / w;     // w^(-s-2k+1)
  D w2 = w * w;
  for (int k = 0; k < 12; ++k) {
    tail = tail + D(kBernoulliOverFactorial[k]) * rising * power;
    rising = rising * (s + D(2.0 * k + 1)) * (s + D(2.0 * k + 2));
    power = power / w2;
  }
  // Once w^-s is below the sum's last digit the tail cannot change it (and for a large s its
  // rising factorial could overflow into inf * 0): leave it out, as Cephes stops there.
  D value = sum + select(b > sum * D(1e-17), tail, D(0));
  // The domain, as Cephes (and PyTorch) has it.
  value = select(q < D(-11), D(NAN), value);  // see the header's comment
  value = select(q <= D(0), select(q == floor(q), D(INFINITY), select(s == floor(s), value, D(NAN))), value);
  value = select(isinf(q) && q > D(0), D(NAN), value);  // Cephes' inf * 0 there; loom gives the same
  return select(s == D(1), D(INFINITY), select(s < D(1), D(NAN), value));
}

}  // namespace loom::math::special
