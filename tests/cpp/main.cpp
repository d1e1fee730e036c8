// The Boost.Test module of loom's C++ suites. Each test_*.cpp file is one suite.
#define BOOST_TEST_MODULE loom
#include <boost/test/unit_test.hpp>
