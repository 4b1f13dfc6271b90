//===- TxDialectTest.cpp - building tx IR from C++ ----------------------------===//
//
// The frontend builds tx IR through the C++ API, not text; these tests pin
// the builders and verifiers that path relies on.
//
//===----------------------------------------------------------------------===//

#include "dialects/tx/TxOps.h"
#include "txc/InitAllTxc.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace txc;

namespace {

class TxDialectTest : public ::testing::Test {
protected:
  TxDialectTest() {
    DialectRegistry registry;
    registerAllTxcDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

TEST_F(TxDialectTest, RopeAttrKeepsEveryParameter) {
  auto rope = tx::RopeAttr::get(&context, APFloat(5.0e5), tx::RopeScaling::Llama3, APFloat(8.0),
                                APFloat(1.0), APFloat(4.0), 8192, APFloat(32.0), APFloat(1.0),
                                APFloat(0.0), 0);
  EXPECT_EQ(rope.getScaling(), tx::RopeScaling::Llama3);
  EXPECT_DOUBLE_EQ(rope.getTheta().convertToDouble(), 5.0e5);
  EXPECT_EQ(rope.getOriginalMaxPosition(), 8192);
  std::string text;
  llvm::raw_string_ostream os(text);
  Attribute(rope).print(os);
  EXPECT_EQ(text, "#tx.rope<theta = 5.000000e+05, scaling = llama3, factor = 8.000000e+00, "
                  "original_max_position = 8192>");
}

TEST_F(TxDialectTest, KvCacheTypeVerifierRejectsZeroPages) {
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto bf16 = BFloat16Type::get(&context);
  auto bad = tx::KvCacheType::getChecked([&] { return emitError(UnknownLoc::get(&context)); },
                                         &context, int64_t(2), int64_t(2), int64_t(8), int64_t(0), Type(bf16));
  EXPECT_FALSE(bad);
  EXPECT_NE(message.find("must be positive"), std::string::npos) << message;
  auto good = tx::KvCacheType::get(&context, int64_t(2), int64_t(2), int64_t(8), int64_t(16), Type(bf16));
  EXPECT_EQ(good.getPageSize(), 16);
}

TEST_F(TxDialectTest, BuiltLinearVerifiesAndCatchesShapeMismatch) {
  OpBuilder builder(&context);
  Location loc = builder.getUnknownLoc();
  auto module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module.getBody());
  auto bf16 = builder.getBF16Type();
  auto x = RankedTensorType::get({ShapedType::kDynamic, 64}, bf16);
  auto fn = func::FuncOp::create(builder, loc, "f", builder.getFunctionType({x}, {}));
  builder.setInsertionPointToEnd(fn.addEntryBlock());
  auto w = tx::WeightOp::create(builder, loc, RankedTensorType::get({32, 64}, bf16), "w");
  auto y = tx::LinearOp::create(builder, loc, RankedTensorType::get({ShapedType::kDynamic, 32}, bf16),
                                fn.getArgument(0), w, Value());
  func::ReturnOp::create(builder, loc);
  EXPECT_TRUE(succeeded(verify(module)));

  // A weight of the wrong input width must be caught, naming both operands.
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  builder.setInsertionPoint(y);
  auto bad = tx::WeightOp::create(builder, loc, RankedTensorType::get({32, 48}, bf16), "bad");
  y->setOperand(1, bad);
  EXPECT_TRUE(failed(verify(module)));
  EXPECT_NE(message.find("input dim 1 (64) does not match weight dim 1 (48)"), std::string::npos)
      << message;
  module->erase();
}

TEST_F(TxDialectTest, FoldsAllReduceOfOneRank) {
  const char *text = R"mlir(
    func.func @f(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
      %s = tx.all_reduce %x {group_size = 1 : i64} : tensor<?x8xbf16>
      return %s : tensor<?x8xbf16>
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  auto fn = cast<func::FuncOp>(module->getBody()->front());
  auto reduce = cast<tx::AllReduceOp>(fn.getBody().front().front());
  SmallVector<OpFoldResult> results;
  ASSERT_TRUE(succeeded(reduce->fold(results)));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(dyn_cast<Value>(results[0]), fn.getArgument(0));
}

} // namespace
