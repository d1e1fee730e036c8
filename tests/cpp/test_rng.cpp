// Philox4x32-10 against the published known-answer vectors of Random123, and the distributions
// built on it.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "runtime/random.h"

using namespace loom;

BOOST_AUTO_TEST_SUITE(rng)

BOOST_AUTO_TEST_CASE(philox_known_answers) {
  // Random123 kat_vectors, philox4x32_10: counter[4], key[2] -> output[4].
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    Philox4x32 out = philox4x32_10(Philox4x32{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) BOOST_TEST(out.x[i] == k.out[i]);
  }
}

BOOST_AUTO_TEST_CASE(element_streams_depend_on_seed_offset_and_index) {
  PhiloxState s{42, 7};
  Philox4x32 a = random_block(s, 0), b = random_block(s, 1);
  Philox4x32 c = random_block({42, 8}, 0), d = random_block({43, 7}, 0);
  Philox4x32 again = random_block(s, 0);
  BOOST_TEST(a.x[0] == again.x[0]);
  BOOST_TEST(a.x[0] != b.x[0]);
  BOOST_TEST(a.x[0] != c.x[0]);
  BOOST_TEST(a.x[0] != d.x[0]);
}

BOOST_AUTO_TEST_CASE(unit_interval_is_exact_in_narrow_types) {
  // With `digits` bits the largest value is 1 - 2^-digits, which every type of that precision
  // represents exactly, so uniform floats never round up to 1.
  BOOST_TEST(random_unit(~uint64_t{0}, 11) == 1.0 - std::ldexp(1.0, -11));
  BOOST_TEST(random_unit(~uint64_t{0}, 24) == 1.0 - std::ldexp(1.0, -24));
  BOOST_TEST(random_unit(0, 53) == 0.0);
  BOOST_TEST(static_cast<float>(random_unit(~uint64_t{0}, 24)) < 1.0f);
}

BOOST_AUTO_TEST_CASE(distribution_moments) {
  const int n = 200000;
  PhiloxState s{1234, 0};
  double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0, nsum4 = 0;
  for (int i = 0; i < n; ++i) {
    Philox4x32 b = random_block(s, static_cast<uint64_t>(i));
    double u = random_unit(random_u64(b, 0), 53);
    BOOST_TEST_REQUIRE((u >= 0.0 && u < 1.0));
    sum += u;
    sum2 += u * u;
    double z = random_normal(b);
    BOOST_TEST_REQUIRE(std::isfinite(z));
    nsum += z;
    nsum2 += z * z;
    nsum4 += z * z * z * z;
  }
  double mean = sum / n, var = sum2 / n - mean * mean;
  // Standard errors: mean 0.29/sqrt(n) ~ 6.5e-4; allow 5 sigma.
  BOOST_TEST(std::abs(mean - 0.5) < 3.5e-3);
  BOOST_TEST(std::abs(var - 1.0 / 12.0) < 2e-3);
  double nmean = nsum / n, nvar = nsum2 / n - nmean * nmean;
  BOOST_TEST(std::abs(nmean) < 1.2e-2);
  BOOST_TEST(std::abs(nvar - 1.0) < 1.6e-2);
  BOOST_TEST(std::abs(nsum4 / n - 3.0) < 0.1);  // kurtosis of a normal
}

BOOST_AUTO_TEST_CASE(generator_draws_advance_offset) {
  Generator g(5);
  PhiloxState a = g.draw(), b = g.draw();
  BOOST_TEST(a.seed == 5u);
  BOOST_TEST(a.offset == 0u);
  BOOST_TEST(b.offset == 1u);
  g.manual_seed(9);
  BOOST_TEST(g.draw().offset == 0u);
  BOOST_TEST(g.seed() == 9u);
  BOOST_TEST(Generator().seed() == kDefaultSeed);
}

BOOST_AUTO_TEST_SUITE_END()
