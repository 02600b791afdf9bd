// Unit tests of operator parameters (afstream/core/params.h: typed getters whose errors name the parameter) and of
// the operator/source registry (afstream/core/registry.h: unknown names list the known ones).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "tests/error_message.h"

namespace afs {
namespace {

TEST(Params, GettersReturnValuesAndFallbacks) {
  const Params p{{"name", "zipf"}, {"phi", "0.25"}, {"width", "8000"}, {"offset", "-12"}, {"big", "1e6"}};
  EXPECT_EQ(p.get_string("name", "x"), "zipf");
  EXPECT_EQ(p.get_string("missing", "fallback"), "fallback");
  EXPECT_EQ(p.get_double("phi", 0), 0.25);
  EXPECT_EQ(p.get_double("width", 0), 8000);
  EXPECT_EQ(p.get_double("missing", 1.5), 1.5);
  EXPECT_EQ(p.get_int("width", 0), 8000);
  EXPECT_EQ(p.get_int("offset", 0), -12);
  EXPECT_EQ(p.get_int("big", 0), 1'000'000);  // integral values in scientific notation
  EXPECT_EQ(p.get_int("missing", -3), -3);
  EXPECT_EQ(p.get_uint("width", 0), 8000u);
  EXPECT_EQ(p.get_uint("big", 0), 1'000'000u);
  EXPECT_EQ(p.get_uint("missing", 42), 42u);
  EXPECT_TRUE(p.has("phi"));
  EXPECT_FALSE(p.has("missing"));
  EXPECT_EQ(p.values().size(), 5u);
  EXPECT_EQ((Params{{"max", "9223372036854775807"}}.get_int("max", 0)), INT64_MAX);
}

TEST(Params, SetStoresValuesThatReadBackExactly) {
  Params p;
  p.set("name", std::string("zipf")).set("width", 8000).set("seed", std::uint64_t{1} << 40).set("offset", -5);
  EXPECT_EQ(p.get_string("name", ""), "zipf");
  EXPECT_EQ(p.get_uint("width", 0), 8000u);
  EXPECT_EQ(p.get_uint("seed", 0), std::uint64_t{1} << 40);
  EXPECT_EQ(p.get_int("offset", 0), -5);
  // Unsigned values past 2^63 (a Count-Min seed derived from --seed 1e16) read back whole; negatives are refused.
  p.set("seed", UINT64_MAX);
  EXPECT_EQ(p.get_uint("seed", 0), UINT64_MAX);
  EXPECT_THROW(p.get_uint("offset", 0), ConfigError);
  p.set("width", 16);  // overwrites
  EXPECT_EQ(p.get_uint("width", 0), 16u);
  // Doubles must survive the round trip through text: phi = 1e-7 (a relative threshold), skew = 1/3.
  p.set("phi", 1e-7).set("skew", 1.0 / 3).set("theta", 2.5e12);
  EXPECT_EQ(p.get_double("phi", -1), 1e-7) << "stored as '" << p.get_string("phi", "") << "'";
  EXPECT_EQ(p.get_double("skew", -1), 1.0 / 3) << "stored as '" << p.get_string("skew", "") << "'";
  EXPECT_EQ(p.get_double("theta", -1), 2.5e12);
}

TEST(ExactText, IsTheShortestTextThatReadsBackAsTheSameNumber) {
  EXPECT_EQ(exact_text(0.1), "0.1");
  EXPECT_EQ(exact_text(4.0), "4");
  EXPECT_EQ(exact_text(2.5e12), "2.5e+12");
  EXPECT_EQ(exact_text(std::uint64_t{18446744073709551615u}), "18446744073709551615");
  EXPECT_EQ(exact_text(-7), "-7");
  for (const double v : {1.0 / 3, 1e-300, 6.02214076e23, -0.0}) {
    const std::string t = exact_text(v);
    EXPECT_EQ(std::stod(t), v) << t;
    EXPECT_EQ(std::signbit(std::stod(t)), std::signbit(v)) << t;
  }
}

TEST(Params, BadValuesThrowConfigErrorNamingTheParameter) {
  const Params p{{"phi", "abc"},   {"half", "1.5"}, {"trail", "12x"},
                 {"inf", "inf"},   {"nan", "nan"},  {"neg", "-3"},
                 {"huge", "1e19"}, {"empty", ""},   {"over", "9223372036854775808"}};
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_double("phi", 0); }),
            "parameter 'phi': expected a number, got 'abc'");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_double("trail", 0); }),
            "parameter 'trail': expected a number, got '12x'");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_double("inf", 0); }),
            "parameter 'inf': expected a number, got 'inf'");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_double("nan", 0); }),
            "parameter 'nan': expected a number, got 'nan'");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_double("empty", 0); }),
            "parameter 'empty': expected a number, got ''");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_int("half", 0); }),
            "parameter 'half': expected an integer, got '1.5'");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_int("huge", 0); }),
            "parameter 'huge': expected an integer, got '1e19'");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_int("over", 0); }),
            "parameter 'over': expected an integer, got '9223372036854775808'");
  for (const char* name : {"phi", "trail", "empty"}) {
    const std::string e = testing::error_message<ConfigError>([&] { p.get_int(name, 0); });
    EXPECT_NE(e.find(std::string("parameter '") + name + "'"), std::string::npos) << e;
  }
  EXPECT_EQ(testing::error_message<ConfigError>([&] { p.get_uint("neg", 0); }),
            "parameter 'neg': expected a non-negative integer, got -3");
  EXPECT_NE(testing::error_message<ConfigError>([&] { p.get_uint("half", 0); }).find("parameter 'half'"),
            std::string::npos);
  // A bad value is only an error when it is read.
  EXPECT_EQ(p.get_string("phi", ""), "abc");
  EXPECT_EQ(p.get_double("missing", 7), 7);
}

class FixedOperator final : public StatelessOperator {
 public:
  FixedOperator(std::int64_t tag, InstanceInfo at) : tag_(tag), at_(at) {}
  void process(const Item& item, Emitter& out) override { out.emit(item.key, tag_ + at_.index, item.time); }
  const InstanceInfo& at() const { return at_; }

 private:
  std::int64_t tag_;
  InstanceInfo at_;
};

class CountingSource final : public Source {
 public:
  explicit CountingSource(std::uint64_t n) : n_(n) {}
  std::uint64_t size() const override { return n_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override {
    std::size_t k = 0;
    for (; k < n && offset + k < n_; ++k) out[k] = Item{offset + k, 1, static_cast<std::int64_t>(offset + k), 0};
    return k;
  }

 private:
  std::uint64_t n_;
};

struct Last : Emitter {
  void emit(std::uint64_t k, std::int64_t v, std::int64_t t) override { got = {k, v, t, 0}; }
  Item got;
};

Registry make_registry() {
  Registry r;
  r.add_operator("fixed", "emits its tag plus the instance index", [](const Params& p, const InstanceInfo& at) {
    return std::make_unique<FixedOperator>(p.get_int("tag", 0), at);
  });
  r.add_operator("another", "second operator",
                 [](const Params&, const InstanceInfo& at) { return std::make_unique<FixedOperator>(-1, at); });
  r.add_source("count", "0, 1, 2, ...", [](const Params& p, const InstanceInfo&) {
    return std::make_unique<CountingSource>(p.get_uint("items", 10));
  });
  return r;
}

TEST(Registry, MakesRegisteredOperatorsAndSourcesWithTheirParams) {
  const Registry r = make_registry();
  EXPECT_TRUE(r.has_operator("fixed"));
  EXPECT_FALSE(r.has_operator("count"));
  EXPECT_TRUE(r.has_source("count"));
  auto op = r.make_operator("fixed", Params{{"tag", "100"}}, InstanceInfo{2, 4});
  ASSERT_NE(op, nullptr);
  const auto* fixed = dynamic_cast<const FixedOperator*>(op.get());
  ASSERT_NE(fixed, nullptr);
  EXPECT_EQ(fixed->at().index, 2);
  EXPECT_EQ(fixed->at().parallelism, 4);
  Last out;
  op->process(Item{7, 0, 9, 0}, out);
  EXPECT_EQ(out.got, (Item{7, 102, 9, 0}));
  auto src = r.make_source("count", Params{{"items", "3"}}, {});
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->size(), 3u);
  Item items[5];
  EXPECT_EQ(src->read(1, items, 5), 2u);
  EXPECT_EQ(items[0].key, 1u);
  EXPECT_EQ(items[1].key, 2u);
  // Bad parameters surface as the factory's ConfigError.
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              r.make_operator("fixed", Params{{"tag", "x"}}, {});
            }),
            "parameter 'tag': expected a number, got 'x'");
}

TEST(Registry, NamesAreListedSortedWithDescriptions) {
  const Registry r = make_registry();
  const std::vector<std::pair<std::string, std::string>> ops = {{"another", "second operator"},
                                                                {"fixed", "emits its tag plus the instance index"}};
  EXPECT_EQ(r.operator_names(), ops);
  EXPECT_EQ(r.source_names(), (std::vector<std::pair<std::string, std::string>>{{"count", "0, 1, 2, ..."}}));
}

TEST(Registry, UnknownNamesListTheKnownOnes) {
  const Registry r = make_registry();
  EXPECT_EQ(testing::error_message<ConfigError>([&] { r.make_operator("count-min", {}, {}); }),
            "unknown operator 'count-min' (known: another, fixed)");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { r.make_source("fixed", {}, {}); }),
            "unknown source 'fixed' (known: count)");
  const Registry empty;
  EXPECT_EQ(testing::error_message<ConfigError>([&] { empty.make_operator("x", {}, {}); }),
            "unknown operator 'x' (known: (none))");
  EXPECT_EQ(testing::error_message<ConfigError>([&] { empty.make_source("y", {}, {}); }),
            "unknown source 'y' (known: (none))");
}

// A parameter the factory never asks for (a misspelling in a job's Params, or one the kind does not have) is an
// error naming it and the names the kind asked for; a parameter asked for only with has() counts as read.
TEST(Registry, AParameterTheKindNeverReadsIsNamed) {
  const Registry r = make_registry();
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              r.make_operator("fixed", Params{{"tag", "1"}, {"tga", "2"}}, {});
            }),
            "operator 'fixed': unknown parameter 'tga' (it reads: tag)");
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              r.make_operator("another", Params{{"a", "1"}, {"b", "2"}}, {});
            }),
            "operator 'another': unknown parameters 'a', 'b' (it reads: none)");
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              r.make_source("count", Params{{"item", "3"}}, {});
            }),
            "source 'count': unknown parameter 'item' (it reads: items)");
  EXPECT_NE(r.make_operator("fixed", Params{{"tag", "1"}}, {}), nullptr);
  Registry has_only;
  has_only.add_operator("flag", "", [](const Params& p, const InstanceInfo& at) {
    return std::make_unique<FixedOperator>(p.has("on") ? 1 : 0, at);
  });
  EXPECT_NE(has_only.make_operator("flag", Params{{"on", ""}}, {}), nullptr);
  // The caller's Params are not changed by the tracking (a copy is), and untracked ones list every name as unread.
  const Params given{{"tag", "1"}, {"x", "2"}};
  EXPECT_THROW(r.make_operator("fixed", given, {}), ConfigError);
  EXPECT_EQ(given.unread(), (std::vector<std::string>{"tag", "x"}));
}

TEST(Registry, RegisteringANameTwiceIsAnError) {
  Registry r = make_registry();
  EXPECT_EQ(testing::error_message<ConfigError>(
                [&] { r.add_operator("fixed", "again", [](const Params&, const InstanceInfo&) { return nullptr; }); }),
            "operator 'fixed' registered twice");
  EXPECT_EQ(testing::error_message<ConfigError>(
                [&] { r.add_source("count", "again", [](const Params&, const InstanceInfo&) { return nullptr; }); }),
            "source 'count' registered twice");
  // The first registration is kept.
  EXPECT_EQ(r.operator_names()[1].second, "emits its tag plus the instance index");
  // The same name may be both an operator and a source.
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              r.add_source("fixed", "a source named like an operator",
                           [](const Params&, const InstanceInfo&) { return std::make_unique<CountingSource>(1); });
            }),
            "");
  EXPECT_TRUE(r.has_source("fixed"));
}

}  // namespace
}  // namespace afs
