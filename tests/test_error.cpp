#include "core/error.hpp"

#include <gtest/gtest.h>

using burst::Error;
using burst::ErrorKind;

TEST(Error, ConfigAndInputErrorsExitWithTwo) {
  try {
    int heads = 12, kv = 5;
    BURST_CHECK_CONFIG(heads % kv == 0, "model.heads = ", heads, " must be divisible by model.kv_heads = ", kv);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_STREQ(e.what(), "model.heads = 12 must be divisible by model.kv_heads = 5");
  }
  EXPECT_THROW(BURST_CHECK_INPUT(false, "x"), Error);
  try {
    BURST_CHECK_INPUT(false, "token id ", 70000, " >= vocab ", 32000);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST(Error, InternalErrorsNameTheCheckAndLocation) {
  try {
    int got = 3;
    BURST_ASSERT(got == 4, "got ", got);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1);
    std::string w = e.what();
    EXPECT_NE(w.find("internal check 'got == 4' failed: got 3"), std::string::npos) << w;
    EXPECT_NE(w.find("test_error.cpp:"), std::string::npos) << w;
    EXPECT_EQ(e.message().find("test_error.cpp"), std::string::npos);
  }
}

TEST(Error, CheckEqNamesBothValues) {
  try {
    long rows = 7, expected = 8;
    BURST_CHECK_EQ(rows, expected, ErrorKind::Input, "tokens.h5 row count");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tokens.h5 row count: expected rows == expected, got rows = 7, expected = 8");
  }
  EXPECT_NO_THROW(BURST_CHECK_EQ(2, 2, ErrorKind::Input, "same"));
}

TEST(Error, NumericFaultsExitWithThreeAndCanBeCollective) {
  Error e(ErrorKind::Numeric, "step 3: non-finite gradient");
  EXPECT_EQ(e.exit_code(), 3);
  EXPECT_FALSE(e.collective());
  e.set_collective();
  EXPECT_TRUE(e.collective());
  EXPECT_TRUE(Error(ErrorKind::Config, "x").collective());  // bad input is always collective
  EXPECT_FALSE(Error(ErrorKind::Comm, "x").collective());
}
