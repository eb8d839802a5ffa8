#include <gtest/gtest.h>

#include <cstdlib>

#include "base/params.h"
#include "ringmaster/status.h"
#include "ringmaster/types.h"

namespace ringmaster {
namespace {

TEST(DataTypes, NcclTestsNamesAndSizes) {
  EXPECT_EQ(name_of(DataType::fp32), "float");
  EXPECT_EQ(name_of(DataType::fp16), "half");
  EXPECT_EQ(name_of(DataType::bf16), "bfloat16");
  EXPECT_EQ(name_of(DataType::fp64), "double");
  EXPECT_EQ(name_of(DataType::int8), "int8");
  EXPECT_EQ(size_of(DataType::int8), 1u);
  EXPECT_EQ(size_of(DataType::bf16), 2u);
  EXPECT_EQ(size_of(DataType::uint32), 4u);
  EXPECT_EQ(size_of(DataType::fp64), 8u);
  for (DataType t : kAllDataTypes)
    EXPECT_EQ(parse_data_type(name_of(t)), t) << name_of(t);
}

TEST(DataTypes, AcceptsAliasesCaseInsensitively) {
  EXPECT_EQ(parse_data_type("FLOAT"), DataType::fp32);
  EXPECT_EQ(parse_data_type("fp32"), DataType::fp32);
  EXPECT_EQ(parse_data_type("float16"), DataType::fp16);
  EXPECT_EQ(parse_data_type("bf16"), DataType::bf16);
  EXPECT_EQ(parse_data_type("int"), DataType::int32);
  EXPECT_EQ(parse_data_type("char"), DataType::int8);
  EXPECT_FALSE(parse_data_type("float8").has_value());
  EXPECT_FALSE(parse_data_type("").has_value());
  EXPECT_GE(data_type_names().size(), std::size(kAllDataTypes));
}

TEST(RedOps, ParseAndName) {
  for (RedOp op : kAllRedOps)
    EXPECT_EQ(parse_red_op(name_of(op)), op);
  EXPECT_EQ(parse_red_op("SUM"), RedOp::sum);
  EXPECT_FALSE(parse_red_op("mean").has_value());
  EXPECT_EQ(red_op_names().size(), 5u);
}

TEST(Status, CarriesCategoryAndMessage) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.to_string(), "ok");
  Status bad(ErrorCategory::timeout, "store did not answer within 30 s");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.to_string(), "timeout error: store did not answer within 30 s");
  try {
    throw Error(ErrorCategory::network, "connect refused");
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::network);
    EXPECT_STREQ(e.what(), "network error: connect refused");
  }
}

TEST(Params, RegistryHasEveryParameterOnce) {
  for (const auto& p : all_params()) {
    EXPECT_EQ(&param_info(p.id), &p);
    EXPECT_FALSE(p.help.empty()) << p.env;
    EXPECT_TRUE(p.env.starts_with("RINGMASTER_") || p.env.starts_with("NCCL_")) << p.env;
  }
}

TEST(Params, BadIntegerNamesTheVariable) {
  ::setenv("RINGMASTER_STREAMING_STORE_BYTES", "12abc", 1);
  try {
    param_int(Param::StreamingStoreBytes);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::config);
    EXPECT_NE(std::string(e.what()).find("RINGMASTER_STREAMING_STORE_BYTES=12abc"), std::string::npos) << e.what();
  }
  ::setenv("RINGMASTER_STREAMING_STORE_BYTES", "4096", 1);
  EXPECT_EQ(param_int(Param::StreamingStoreBytes), 4096);
  ::unsetenv("RINGMASTER_STREAMING_STORE_BYTES");
  EXPECT_EQ(param_int(Param::StreamingStoreBytes), 8 << 20);
}

}  // namespace
}  // namespace ringmaster
