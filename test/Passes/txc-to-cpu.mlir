// The registered pipelines on the example decoder layer: 7 launches for the
// layer, 1 before it (embedding) and 3 after (gather, norm, lm_head).
// RUN: tx-opt %txc_src/examples/llama-decoder-layer.mlir --txc-to-cpu --verify-each | FileCheck %s --check-prefix=CPU
// RUN: tx-opt %txc_src/examples/llama-decoder-layer.mlir --txc-to-cuda='max-batch-tokens=8192 max-seqs=512' --verify-each | FileCheck %s --check-prefix=CUDA
// RUN: tx-opt %txc_src/examples/llama-decoder-layer.mlir --txc-to-cpu='tp=2' --verify-each | FileCheck %s --check-prefix=TP2
// CPU-LABEL: func.func @step
// CPU-SAME: txk.arena_size = {{[0-9]+}} : i64, txk.max_batch_tokens = 2048 : i64, txk.max_seqs = 256 : i64
// CPU: txk.embedding
// CPU-NEXT: tx.weight
// CPU-NEXT: txk.rms_norm
// CPU: txk.gemm_rope_append
// CPU-NEXT: txk.attention
// CPU: txk.gemm {{.*}}residual_add
// CPU-NEXT: txk.rms_norm
// CPU: txk.gemm {{.*}}swiglu
// CPU-NEXT: txk.gemm {{.*}}residual_add
// CPU-NEXT: txk.gather_last
// CUDA: txk.max_batch_tokens = 8192 : i64, txk.max_seqs = 512 : i64
// CUDA: algo = "cublaslt"
// TP2: module attributes {tx.tp = 2 : i64}
// TP2-COUNT-2: txk.all_reduce
