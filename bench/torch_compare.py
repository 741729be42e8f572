#!/usr/bin/env python3
"""PyTorch's side of `smelt bench`: the same workload in PyTorch eager and
torch.compile, on the same machine, threads and inputs, for a side-by-side
with smelt's eager and compiled rows.

    python3 bench/torch_compare.py --workload minilm|train-mlp [--device cpu|cuda]
        [--dtype float32|float16|bfloat16] [--threads N] [--iters N] [--json]
    python3 bench/torch_compare.py --workload ops|op-shapes [--threads 1,2] [--filter NAME]
    python3 bench/torch_compare.py --workload compiled [--device cpu|cuda] [--threads N]
        [--modes ...] [--workloads ...]
        [--smelt build/smelt] [--json]

Workloads:
  minilm  all-MiniLM-L6-v2 through sentence-transformers' own modules
          (Transformer, mean Pooling, Normalize) on a batch of 32 sequences of
          128 tokens: [CLS], random word-piece ids in [1000, vocab) drawn from
          torch.manual_seed(0), [SEP]; attention mask all ones; as
          `smelt bench minilm` (whose ids come from smelt's own generator: the
          values differ, the work does not). Reports ms per batch and
          sentences per second, eager and torch.compile (default mode).

  ops     single ops in eager mode (unary/binary pointwise, reductions over the
          last and the first dim, softmax, layer_norm, matmul, transpose +
          contiguous, cat, index_select, gather, embedding, where, dtype
          conversions, randn; float32, mostly 512x1024): PyTorch eager beside
          `smelt bench ops` (the smelt binary, --smelt) on identical inputs,
          at each thread count of --threads (a comma-separated list): one
          table of times and smelt/torch ratios (above 1: smelt is slower).
  op-shapes
          the same for `smelt bench op-shapes`: the same kinds of op at the
          shapes and dtypes that take other kernel paths (64x64, 256x256,
          65536x4 and 4x65536, middle dims of 32x128x64, 1-D 2^20, int64,
          bfloat16, 2048x1024 over dim 0, cumsum, tril, pad, bmm, stack).

  eager-cuda
          the GPU eager workloads of bench/bench_cuda.cpp (issue 8's targets)
          in PyTorch eager: elementwise ops on 2^26 float32, sum / amax over
          the last dim of 8192x8192 float32, softmax and layer_norm over
          16384x4096 bfloat16, the seed MLP forward at batch 256 (float32,
          bfloat16), 8192^3 matrix products and the host cost of small ops
          (add, a number operand, relu, sum and softmax of 16 elements);
          randn inputs (seed 0), 3 warm-up calls, CUDA-event device time,
          median of --iters (default 20). With --smelt-json FILE (the output
          of `smelt_benchmarks --benchmark_filter=Cuda --benchmark_format=json`
          run on the same machine) it prints both side by side: time, smelt /
          torch ratio, and GB/s or TFLOP/s.
  train-mlp
          one training step of the seed MLP (Linear(1024,1024), GELU,
          Linear(1024,512), GELU, Linear(512,10)) at batch 256: zero_grad,
          forward, cross_entropy, backward, SGD (lr 0.01), as
          `smelt bench train-mlp`: the same initial weights and input
          (shared/data/seed_mlp.safetensors, PyTorch's default init, seed 0),
          labels (7 i) % 10. Reports ms per step and the peak of
          torch.cuda.max_memory_allocated on CUDA; eager and torch.compile of
          the whole step (Dynamo compiles the forward and backward through
          AOTAutograd and the optimizer step separately). Agreement: both run
          three steps from the initial weights; their losses are compared
          with each other and the first with training.safetensors' reference.

  compiled
          compiled-cuda's table on --device: on the CPU (--device cpu, the
          default) PyTorch eager, torch.compile (Inductor) and smelt eager and
          compiled at `smelt bench`'s CPU sizes (pointwise 2^24, softmax
          4096x4096, layer_norm 8192x2048, sin + cos of one input 2^24 as
          `horizontal`, the seed MLP at batch 256, batchnorm-relu 8x64x56x56,
          a GPT-2 block over 1 x 128 tokens; float32), --threads threads on
          both sides (torch.set_num_threads, OMP_NUM_THREADS for smelt),
          median wall times, each row's GB/s also as a share of a plain
          copy's bandwidth measured in the same run at the same threads
          (y.copy_(x) of 64 MiB); --device cuda is compiled-cuda.
  compiled-cuda
          the compiled GPU workloads of `smelt bench --device cuda`:
          sigmoid(x * w + b) over 2^26 float32, the manual softmax
          exp(x - amax) / sum over 8192x8192 float32, layer_norm over
          16384x4096 bfloat16 with weight and bias, the seed MLP at batch 256
          in float32 and bfloat16, training-mode batch_norm + relu over
          64x256x56x56 float32 (running stats updated, momentum 0.1) and a
          GPT-2 block forward (C 768, 12 heads, causal, tanh-GELU MLP) over
          8 x 1024 tokens in bfloat16. PyTorch makes the inputs (seed 0) and
          the weights and hands them to smelt (`smelt bench --inputs`, a
          module's state_dict under the prefix the workload reads), so every
          implementation computes on identical inputs: PyTorch eager,
          torch.compile (default, reduce-overhead, max-autotune), smelt eager
          and smelt::compile (default, reduce-overhead, max-autotune through
          `smelt bench --mode`; each side's max-autotune-no-cudagraphs on
          request). One table, a row per implementation: time
          (mean of back-to-back calls between two CUDA events), achieved GB/s
          or TFLOP/s and its share of the H200's measured peak (4300 GB/s
          copy, 780 TFLOP/s bf16 dense), cold and warm compile time (cold:
          empty caches; warm: a new compile over the caches the cold one
          filled), the peak memory one call adds (torch.cuda.
          max_memory_allocated; smelt's peak_bytes_*) and the largest
          difference from PyTorch eager's result (batchnorm-relu: after two
          calls from the same running stats, which are compared too) with
          whether it is within tolerance (1e-4 float32, 5e-2 bfloat16, times
          1 + max |result|). --modes picks the implementations (a comma list
          of torch-eager, torch-default, torch-reduce-overhead,
          torch-max-autotune, torch-max-autotune-no-cudagraphs, smelt-eager,
          smelt-default, smelt-reduce-overhead, smelt-max-autotune,
          smelt-max-autotune-no-cudagraphs; default: torch-eager,
          torch-default, torch-reduce-overhead and the four smelt ones
          without no-cudagraphs: torch's max-autotune takes minutes); --workloads
          picks cases by name (e.g. gpt2-block,batchnorm-relu). --smelt names
          the smelt binary (default: build/smelt).

Threads: --threads, else $OMP_NUM_THREADS, else every core (torch.set_num_threads;
ops: smelt runs with OMP_NUM_THREADS set to it).
The model folder comes from tools/fetch_model.py (the same files smelt loads).

Needs torch and sentence-transformers, which are not dependencies of smelt's
build or tests; this script is for benchmarking by hand.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def model_dir():
    script = os.path.join(HERE, "..", "tools", "fetch_model.py")
    out = subprocess.run([sys.executable, script, "all-MiniLM-L6-v2"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def time_ms(fn, iters, sync):
    fn()
    sync()
    if iters <= 0:  # as smelt bench: enough runs for ~400 ms, 3 to 50
        t0 = time.perf_counter()
        fn()
        sync()
        one = max((time.perf_counter() - t0) * 1e3, 1e-3)
        iters = int(min(max(400.0 / one, 3), 50))
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bert_parameter_shapes(cfg):
    """Name -> shape of every tensor in a Hugging Face BertModel checkpoint of
    config `cfg` (the names all-MiniLM-L6-v2's model.safetensors holds)."""
    H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    shapes = {"embeddings.word_embeddings.weight": [cfg["vocab_size"], H],
              "embeddings.position_embeddings.weight": [cfg["max_position_embeddings"], H],
              "embeddings.token_type_embeddings.weight": [cfg["type_vocab_size"], H],
              "embeddings.LayerNorm.weight": [H], "embeddings.LayerNorm.bias": [H],
              "pooler.dense.weight": [H, H], "pooler.dense.bias": [H]}
    for i in range(L):
        p = f"encoder.layer.{i}."
        linears = {"attention.self.query": [H, H], "attention.self.key": [H, H],
                   "attention.self.value": [H, H], "attention.output.dense": [H, H],
                   "intermediate.dense": [I, H], "output.dense": [H, I]}
        for n, s in linears.items():
            shapes[p + n + ".weight"], shapes[p + n + ".bias"] = s, s[:1]
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + n + ".weight"], shapes[p + n + ".bias"] = [H], [H]
    return shapes


def write_random_weights(folder, torch):
    """model.safetensors of the architecture in folder/config.json, random (seed
    0; weights N(0, 0.02), biases 0, LayerNorm weights 1), written with torch
    alone: for hosts that cannot fetch the weights. Speed does not depend on
    them, and `smelt bench minilm --model folder` loads the same file."""
    cfg = json.load(open(os.path.join(folder, "config.json")))
    torch.manual_seed(0)
    tensors = {}
    for name, shape in bert_parameter_shapes(cfg).items():
        if name.endswith(".bias"):
            tensors[name] = torch.zeros(shape)
        elif "LayerNorm" in name:
            tensors[name] = torch.ones(shape)
        else:
            tensors[name] = torch.randn(shape) * 0.02
    # The published checkpoint also holds this buffer; the loaders expect it.
    tensors["embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"]).unsqueeze(0)
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors, torch)


def safetensors_dtypes(torch):
    """The safetensors format's dtype names and the torch dtypes they store."""
    return {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
            "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
            "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def write_safetensors(path, tensors, torch):
    """tensors (name -> tensor, any device) as a .safetensors file (an 8-byte
    little-endian header length, the JSON header, then each tensor's raw
    little-endian bytes), written with torch alone: the hosts this runs on
    need not have the safetensors package."""
    import ctypes
    import struct
    names = {v: k for k, v in safetensors_dtypes(torch).items()}
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        b = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def read_safetensors(path, torch):
    """The tensors of a .safetensors file (its JSON header, then raw
    little-endian data), read with torch alone."""
    import struct
    kinds = safetensors_dtypes(torch)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if end == b:
            out[name] = torch.empty(e["shape"], dtype=kinds[e["dtype"]])
            continue
        t = torch.frombuffer(data, dtype=kinds[e["dtype"]], count=(end - b) //
                             torch.empty((), dtype=kinds[e["dtype"]]).element_size(), offset=b)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def plain_minilm(torch, folder, device, dtype):
    """The BERT of folder/config.json written out in PyTorch (embeddings,
    layers of self-attention under the key-padding mask through
    scaled_dot_product_attention, erf GELU, LayerNorm eps 1e-12), then mean
    pooling over the mask and L2 normalization, as sentence-transformers
    computes them: for hosts without sentence-transformers. Returns
    forward(ids, mask, types) -> (last hidden state, embeddings)."""
    import torch.nn.functional as F
    cfg = json.load(open(os.path.join(folder, "config.json")))
    w = {k: v.to(device) for k, v in read_safetensors(
        os.path.join(folder, "model.safetensors"), torch).items()}
    w = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in w.items()}
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]

    def lin(x, p):
        return F.linear(x, w[p + ".weight"], w[p + ".bias"])

    def ln(x, p):
        return F.layer_norm(x, x.shape[-1:], w[p + ".weight"], w[p + ".bias"], eps)

    def forward(ids, mask, types):
        B, T = ids.shape
        pos = torch.arange(T, device=ids.device)
        h = (w["embeddings.word_embeddings.weight"][ids] +
             w["embeddings.position_embeddings.weight"][pos] +
             w["embeddings.token_type_embeddings.weight"][types])
        h = ln(h, "embeddings.LayerNorm")
        keep = mask.bool().view(B, 1, 1, T)
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            heads = [lin(h, p + "attention.self." + n).view(B, T, H, -1).transpose(1, 2)
                     for n in ("query", "key", "value")]
            a = F.scaled_dot_product_attention(*heads, attn_mask=keep)
            a = a.transpose(1, 2).reshape(B, T, -1)
            h = ln(lin(a, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
            m = F.gelu(lin(h, p + "intermediate.dense"))
            h = ln(lin(m, p + "output.dense") + h, p + "output.LayerNorm")
        fm = mask.to(h.dtype).unsqueeze(-1)
        pooled = (h * fm).sum(1) / fm.sum(1).clamp(min=1e-9)
        return h, F.normalize(pooled, p=2, dim=1)

    return forward


def bench_minilm(args, torch):
    B, T = 32, 128
    dtype = getattr(torch, args.dtype)
    folder = args.model or model_dir()
    if args.random_weights and not os.path.exists(os.path.join(folder, "model.safetensors")):
        write_random_weights(folder, torch)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        SentenceTransformer = None
    if SentenceTransformer is not None:
        model = SentenceTransformer(folder, device=args.device)
        model.eval()
        model.to(dtype)
        vocab = model.tokenizer.vocab_size
        cls_id, sep_id = model.tokenizer.cls_token_id, model.tokenizer.sep_token_id

        def forward(i, m, t):
            out = model({"input_ids": i, "attention_mask": m, "token_type_ids": t})
            return out["token_embeddings"], out["sentence_embedding"]
        runner = "sentence-transformers"
    else:
        forward = plain_minilm(torch, folder, args.device, dtype)
        vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
        tok = json.load(open(os.path.join(folder, "tokenizer.json")))["model"]["vocab"]
        cls_id, sep_id = tok["[CLS]"], tok["[SEP]"]
        runner = "plain PyTorch BERT (no sentence-transformers here)"
    torch.manual_seed(0)
    ids = torch.randint(1000, vocab, (B, T), device=args.device)
    ids[:, 0] = cls_id
    ids[:, -1] = sep_id
    mask = torch.ones(B, T, dtype=torch.int64, device=args.device)
    types = torch.zeros(B, T, dtype=torch.int64, device=args.device)

    compiled = torch.compile(forward)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    with torch.inference_mode():
        t0 = time.perf_counter()
        compiled(ids, mask, types)
        sync()
        compile_ms = (time.perf_counter() - t0) * 1e3
        eager_ms = time_ms(lambda: forward(ids, mask, types), args.iters, sync)
        comp_ms = time_ms(lambda: compiled(ids, mask, types), args.iters, sync)
        e_eager = forward(ids, mask, types)[1].float()
        e_comp = compiled(ids, mask, types)[1].float()
        extra = {}
        if args.device.startswith("cuda"):  # CUDA graphs: torch.compile's fastest mode on a GPU
            ro = torch.compile(forward, mode="reduce-overhead")
            t0 = time.perf_counter()
            ro(ids, mask, types)
            sync()
            extra["first_reduce_overhead_call_ms"] = (time.perf_counter() - t0) * 1e3
            extra["compiled_reduce_overhead_ms"] = time_ms(lambda: ro(ids, mask, types),
                                                           args.iters, sync)
            extra["items_per_s_reduce_overhead"] = B / extra["compiled_reduce_overhead_ms"] * 1e3
    return {
        "workload": "minilm",
        "description": f"all-MiniLM-L6-v2 sentence embeddings, batch {B} x {T} tokens ({runner})",
        "eager_ms": eager_ms,
        "compiled_ms": comp_ms,
        "speedup": eager_ms / comp_ms,
        "items_unit": "sentences",
        "items_per_s_eager": B / eager_ms * 1e3,
        "items_per_s_compiled": B / comp_ms * 1e3,
        "first_compiled_call_ms": compile_ms,
        "max_abs_err": (e_eager - e_comp).abs().max().item(),
        **extra,
    }


# ---- ops: single ops, PyTorch eager beside smelt eager ----------------------

def hashed(torch, shape, salt, positive=False):
    """The inputs of `smelt bench ops` (tools/smelt/bench_ops.cpp), bit for bit:
    u = ((i * 2654435761 + salt * 40503) mod 2^32) / 2^32 in double, then
    u * 8 - 4 (positive: u + 0.5) rounded once to float32."""
    n = 1
    for d in shape:
        n *= d
    i = torch.arange(n, dtype=torch.int64)
    u = ((i * 2654435761 + salt * 40503) % 2**32).double() / 2**32
    return (u + 0.5 if positive else u * 8 - 4).float().reshape(shape)


def hashed_indices(torch, shape, salt, bound):
    n = 1
    for d in shape:
        n *= d
    i = torch.arange(n, dtype=torch.int64)
    u = ((i * 2654435761 + salt * 40503) % 2**32).double() / 2**32
    return (u * bound).long().reshape(shape)


def op_cases(torch):
    """(name, shape, fn): the list of tools/smelt/bench_ops.cpp, in its order."""
    F = torch.nn.functional
    R, C = 512, 1024
    rc = f"{R}x{C}"
    x, y, xp = hashed(torch, (R, C), 1), hashed(torch, (R, C), 2), hashed(torch, (R, C), 3, True)
    row, g, b = hashed(torch, (C,), 4), hashed(torch, (C,), 5), hashed(torch, (C,), 6)
    mask = hashed(torch, (R, C), 7) > 0
    a, bm = hashed(torch, (R, C), 8), hashed(torch, (C, R), 9)
    sel, gidx = hashed_indices(torch, (R,), 10, R), hashed_indices(torch, (R, C), 11, C)
    emb, ids = hashed(torch, (30522, 384), 12), hashed_indices(torch, (32, 128), 13, 30522)
    x64 = x.double()
    return [
        ("add", rc, lambda: x + y),
        ("sub", rc, lambda: x - y),
        ("mul", rc, lambda: x * y),
        ("div", rc, lambda: x / y),
        ("add_bias_row", f"{rc} + {C}", lambda: x + row),
        ("mul_scalar", rc, lambda: x * 0.5),
        ("maximum", rc, lambda: torch.maximum(x, y)),
        ("abs", rc, lambda: torch.abs(x)),
        ("neg", rc, lambda: torch.neg(x)),
        ("exp", rc, lambda: torch.exp(x)),
        ("log", rc, lambda: torch.log(xp)),
        ("sqrt", rc, lambda: torch.sqrt(xp)),
        ("rsqrt", rc, lambda: torch.rsqrt(xp)),
        ("sin", rc, lambda: torch.sin(x)),
        ("cos", rc, lambda: torch.cos(x)),
        ("tanh", rc, lambda: torch.tanh(x)),
        ("sigmoid", rc, lambda: torch.sigmoid(x)),
        ("erf", rc, lambda: torch.erf(x)),
        ("relu", rc, lambda: torch.relu(x)),
        ("gelu", rc, lambda: F.gelu(x)),
        ("gelu_tanh", rc, lambda: F.gelu(x, approximate="tanh")),
        ("silu", rc, lambda: F.silu(x)),
        ("pow_scalar", rc, lambda: torch.pow(xp, 2.5)),
        ("clamp", rc, lambda: torch.clamp(x, -1.0, 1.0)),
        ("gt", rc, lambda: torch.gt(x, y)),
        ("where", rc, lambda: torch.where(mask, x, y)),
        ("sum_last", rc, lambda: x.sum(-1)),
        ("sum_first", rc, lambda: x.sum(0)),
        ("mean_last", rc, lambda: x.mean(-1)),
        ("mean_first", rc, lambda: x.mean(0)),
        ("amax_last", rc, lambda: x.amax(-1)),
        ("amax_first", rc, lambda: x.amax(0)),
        ("sum_all", rc, lambda: x.sum()),
        ("argmax_last", rc, lambda: x.argmax(-1)),
        ("var_last", rc, lambda: x.var(-1)),
        ("softmax", f"{rc} dim -1", lambda: torch.softmax(x, -1)),
        ("log_softmax", f"{rc} dim -1", lambda: torch.log_softmax(x, -1)),
        ("layer_norm", f"{rc} w,b", lambda: F.layer_norm(x, (C,), g, b, 1e-5)),
        ("matmul", f"{R}x{C} @ {C}x{R}", lambda: a @ bm),
        ("transpose_contig", f"{rc} .t()", lambda: x.t().contiguous()),
        ("cat_dim0", f"2 x {rc}", lambda: torch.cat([x, y], 0)),
        ("cat_dim1", f"2 x {rc}", lambda: torch.cat([x, y], 1)),
        ("index_select", f"{rc} dim 0", lambda: torch.index_select(x, 0, sel)),
        ("gather", f"{rc} dim 1", lambda: torch.gather(x, 1, gidx)),
        ("embedding", "30522x384 [32x128]", lambda: F.embedding(ids, emb)),
        ("to_float16", rc, lambda: x.to(torch.float16)),
        ("to_float64", rc, lambda: x.to(torch.float64)),
        ("to_float32", f"{rc} float64", lambda: x64.to(torch.float32)),
        ("randn", rc, lambda: torch.randn(R, C)),
    ]


def shape_cases(torch):
    """(name, shape, fn): the op-shapes list of tools/smelt/bench_ops.cpp, in its order."""
    F = torch.nn.functional
    s64, t64 = hashed(torch, (64, 64), 1), hashed(torch, (64, 64), 2)
    s256, t256 = hashed(torch, (256, 256), 1), hashed(torch, (256, 256), 2)
    tall, wide = hashed(torch, (65536, 4), 1), hashed(torch, (4, 65536), 2)
    x3, y3 = hashed(torch, (32, 128, 64), 3), hashed(torch, (128, 32, 64), 4)
    g64, b64 = hashed(torch, (64,), 5), hashed(torch, (64,), 6)
    big, col = hashed(torch, (2048, 1024), 7), hashed(torch, (2048, 1), 8)
    v = hashed(torch, (1 << 20,), 9)
    vi = (hashed(torch, (1 << 20,), 10) * 1000.0).to(torch.int64)
    vh = v.to(torch.bfloat16)
    sel1, sel_tall = hashed_indices(torch, (65536,), 11, 1 << 20), hashed_indices(torch, (65536,), 12, 65536)
    gi1 = hashed_indices(torch, (1 << 20,), 13, 1 << 20)
    qa, qb = hashed(torch, (16, 128, 64), 14), hashed(torch, (16, 64, 128), 15)
    return [
        ("add_64", "64x64", lambda: s64 + t64),
        ("add_256", "256x256", lambda: s256 + t256),
        ("exp_256", "256x256", lambda: torch.exp(s256)),
        ("sum_last_64", "64x64", lambda: s64.sum(-1)),
        ("softmax_256", "256x256 dim -1", lambda: torch.softmax(s256, -1)),
        ("add_column", "2048x1024 + 2048x1", lambda: big + col),
        ("add_transposed", "32x128x64 + .transpose(0,1)", lambda: x3 + y3.transpose(0, 1)),
        ("permute_102", "32x128x64", lambda: x3.permute(1, 0, 2).contiguous()),
        ("permute_021", "32x128x64", lambda: x3.permute(0, 2, 1).contiguous()),
        ("sum_dim0_tall", "65536x4 dim 0", lambda: tall.sum(0)),
        ("sum_dim1_tall", "65536x4 dim 1", lambda: tall.sum(1)),
        ("sum_dim0_wide", "4x65536 dim 0", lambda: wide.sum(0)),
        ("sum_dim1_wide", "4x65536 dim 1", lambda: wide.sum(1)),
        ("sum_mid", "32x128x64 dim 1", lambda: x3.sum(1)),
        ("sum_outer", "32x128x64 dims 0,2", lambda: x3.sum((0, 2))),
        ("amax_mid", "32x128x64 dim 1", lambda: x3.amax(1)),
        ("mean_outer", "32x128x64 dims 0,2", lambda: x3.mean((0, 2))),
        ("var_first", "2048x1024 dim 0", lambda: big.var(0)),
        ("argmax_first", "2048x1024 dim 0", lambda: big.argmax(0)),
        ("softmax_first", "2048x1024 dim 0", lambda: torch.softmax(big, 0)),
        ("softmax_64", "32x128x64 dim -1", lambda: torch.softmax(x3, -1)),
        ("layer_norm_64", "32x128x64 w,b", lambda: F.layer_norm(x3, (64,), g64, b64, 1e-5)),
        ("sum_1d", "2^20", lambda: v.sum()),
        ("sum_int64", "2^20 int64", lambda: vi.sum()),
        ("exp_1d", "2^20", lambda: torch.exp(v)),
        ("to_bfloat16", "2^20", lambda: v.to(torch.bfloat16)),
        ("bfloat16_to_float", "2^20 bfloat16", lambda: vh.to(torch.float32)),
        ("add_bfloat16", "2^20 bfloat16", lambda: vh + vh),
        ("index_select_1d", "2^20 [65536]", lambda: torch.index_select(v, 0, sel1)),
        ("index_select_tall", "65536x4 dim 0", lambda: torch.index_select(tall, 0, sel_tall)),
        ("gather_1d", "2^20", lambda: torch.gather(v, 0, gi1)),
        ("cat_small", "4 x 64x64 dim 0", lambda: torch.cat([s64, t64, s64, t64], 0)),
        ("stack", "4 x 256x256", lambda: torch.stack([s256, t256, s256, t256], 0)),
        ("tril", "2048x1024", lambda: torch.tril(big)),
        ("pad", "2048x1024 (1,1,1,1)", lambda: F.pad(big, (1, 1, 1, 1))),
        ("cumsum_first", "2048x1024 dim 0", lambda: torch.cumsum(big, 0)),
        ("cumsum_last", "2048x1024 dim 1", lambda: torch.cumsum(big, 1)),
        ("bmm", "16x128x64 @ 16x64x128", lambda: qa @ qb),
        ("where_scalar", "2048x1024", lambda: torch.where(big > 0, big, 0.0)),
    ]


def op_time_ms(fn, iters):
    """As `smelt bench ops`: one warm-up, then the median of `iters` calls
    (0: enough for ~300 ms, 5 to 200)."""
    fn()
    if iters <= 0:
        t0 = time.perf_counter()
        fn()
        one = max((time.perf_counter() - t0) * 1e3, 1e-3)
        iters = int(min(max(300.0 / one, 5), 200))
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def smelt_ops(args, threads):
    """{op: ms} from `smelt bench ops --json` run with OMP_NUM_THREADS=threads."""
    cmd = [args.smelt, "bench", args.workload, "--json", "--iters", str(args.iters)]
    if args.filter:
        cmd += ["--filter", args.filter]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["op"]: r["eager_ms"] for r in rows}


def run_ops(args, torch, thread_counts):
    if args.device != "cpu":
        sys.exit(f"torch_compare: --workload {args.workload} runs on the CPU only")
    listed = op_cases(torch) if args.workload == "ops" else shape_cases(torch)
    cases = [c for c in listed if args.filter in c[0]]
    rows = {name: {"op": name, "shape": shape} for name, shape, _ in cases}
    # --rounds alternating rounds of both sides, the fastest median of each
    # kept: a machine whose speed drifts (frequency, neighbours) between the
    # two sides' runs otherwise tilts every ratio of the table the same way.
    def keep_min(row, key, ms):
        row[key] = min(row.get(key, ms), ms)

    with torch.inference_mode():
        for t in thread_counts:
            torch.set_num_threads(t)
            for _ in range(max(1, args.rounds)):
                for name, _, fn in cases:
                    keep_min(rows[name], f"torch_ms_{t}", op_time_ms(fn, args.iters))
                for name, ms in smelt_ops(args, t).items():
                    if name in rows:
                        keep_min(rows[name], f"smelt_ms_{t}", ms)
    for r in rows.values():
        for t in thread_counts:
            if f"smelt_ms_{t}" in r:
                r[f"ratio_{t}"] = r[f"smelt_ms_{t}"] / r[f"torch_ms_{t}"]
    if args.json:
        for r in rows.values():
            print(json.dumps(dict(r, framework=f"torch {torch.__version__}")))
        return
    print(f"{args.workload}: eager ms (fastest median of {max(1, args.rounds)} alternating rounds), "
          f"PyTorch {torch.__version__} vs smelt ({args.smelt}); "
          f"ratio = smelt / torch (above 1: smelt is slower)")
    head = f"{'op':<18} {'shape (float32)':<28}"
    for t in thread_counts:
        head += f" {'torch@' + str(t):>10} {'smelt@' + str(t):>10} {'ratio':>6}"
    print(head)
    for r in rows.values():
        line = f"{r['op']:<18} {r['shape']:<28}"
        for t in thread_counts:
            sm = r.get(f"smelt_ms_{t}")
            line += f" {r[f'torch_ms_{t}']:10.4f} " + (f"{sm:10.4f} {r[f'ratio_{t}']:6.2f}"
                                                     if sm is not None else f"{'-':>10} {'-':>6}")
        print(line)
    for t in thread_counts:
        ratios = [r[f"ratio_{t}"] for r in rows.values() if f"ratio_{t}" in r]
        if ratios:
            slower = sum(1 for q in ratios if q > 1.0)
            geo = statistics.geometric_mean(ratios)
            print(f"{t} thread(s): geometric mean ratio {geo:.2f}, smelt slower on {slower} "
                  f"of {len(ratios)} ops")


def bench_eager_cuda(args, torch):
    """PyTorch eager on the GPU workloads of bench/bench_cuda.cpp (rows keyed by
    the Google Benchmark names there)."""
    import torch.nn.functional as F

    dev = "cuda"
    iters = args.iters or 20
    torch.manual_seed(0)

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    rows = []
    n = 1 << 26
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    for name, fn, nbytes in [
        ("BM_CudaUnary/exp", lambda: torch.exp(x), 8 * n),
        ("BM_CudaUnary/relu", lambda: torch.relu(x), 8 * n),
        ("BM_CudaUnary/sigmoid", lambda: torch.sigmoid(x), 8 * n),
        ("BM_CudaUnary/gelu", lambda: F.gelu(x), 8 * n),
        ("BM_CudaUnary/copy", lambda: x.clone(), 8 * n),
        ("BM_CudaBinary/add", lambda: x + y, 12 * n),
        ("BM_CudaBinary/mul", lambda: x * y, 12 * n),
    ]:
        rows.append({"name": name, "ms": timed(fn), "bytes": nbytes})
    del x, y
    m = torch.randn(8192, 8192, device=dev)
    rows.append({"name": "BM_CudaReduceLastDim/sum", "ms": timed(lambda: m.sum(-1)),
                 "bytes": 4 * m.numel()})
    rows.append({"name": "BM_CudaReduceLastDim/amax", "ms": timed(lambda: m.amax(-1)),
                 "bytes": 4 * m.numel()})
    del m
    h = torch.randn(16384, 4096, device=dev).to(torch.bfloat16)
    w = torch.randn(4096, device=dev).to(torch.bfloat16)
    bb = torch.randn(4096, device=dev).to(torch.bfloat16)
    rows.append({"name": "BM_CudaSoftmaxBf16", "ms": timed(lambda: torch.softmax(h, -1)),
                 "bytes": 4 * h.numel()})
    rows.append({"name": "BM_CudaLayerNormBf16",
                 "ms": timed(lambda: F.layer_norm(h, (4096,), w, bb, 1e-5)),
                 "bytes": 4 * h.numel()})
    del h
    for dt in ["float32", "bfloat16"]:
        net = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                                  torch.nn.Linear(1024, 512), torch.nn.GELU(),
                                  torch.nn.Linear(512, 10)).to(dev, getattr(torch, dt))
        inp = torch.randn(256, 1024, device=dev).to(getattr(torch, dt))
        with torch.inference_mode():
            rows.append({"name": f"BM_CudaSeedMlp/{dt}", "ms": timed(lambda: net(inp))})
    for dt in ["float32", "bfloat16"]:
        a = torch.randn(8192, 8192, device=dev).to(getattr(torch, dt))
        b = torch.randn(8192, 8192, device=dev).to(getattr(torch, dt))
        rows.append({"name": f"BM_CudaMatmul/{dt}", "ms": timed(lambda: a @ b),
                     "flops": 2 * 8192 ** 3})
        del a, b
    s1, s2 = torch.randn(16, device=dev), torch.randn(16, device=dev)
    for _ in range(2000):  # warm-up, as bench_cuda.cpp's kHostWarmup
        s1 + s2
    torch.cuda.synchronize()
    host = []
    for _ in range(iters):
        t0 = time.perf_counter()
        for _ in range(1000):
            s1 + s2
        host.append((time.perf_counter() - t0))
        torch.cuda.synchronize()
    rows.append({"name": "BM_CudaSmallOpHostCost", "ms": statistics.median(host)})
    for name, fn in [("mul_number", lambda: s1 * 2.0), ("relu", lambda: torch.relu(s1)),
                     ("sum", lambda: s1.sum(-1)), ("softmax", lambda: torch.softmax(s1, -1))]:
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        host = []
        for _ in range(iters):
            t0 = time.perf_counter()
            for _ in range(1000):
                fn()
            host.append((time.perf_counter() - t0))
            torch.cuda.synchronize()
        rows.append({"name": f"BM_CudaSmallOpHostCostOp/{name}", "ms": statistics.median(host)})
    return {"workload": "eager-cuda", "rows": rows}


def print_eager_cuda(row, smelt_json):
    smelt = {}
    if smelt_json:
        with open(smelt_json) as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("error_occurred"):
                    continue
                # "BM_X/arg/iterations:20/manual_time" -> "BM_X/arg"
                name = re.sub(r"(/iterations:\d+)?/manual_time.*$", "", b["name"])
                unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
                # The median of the timed calls (as this side's), else the mean.
                smelt[name] = b["median_ms"] if "median_ms" in b else b["real_time"] * unit
                if name.startswith(("BM_CudaSmallOpHostCost", "BM_CudaLaunchFloor")):
                    smelt[name] /= 1000  # 1000 launches per iteration
    print(f"{'workload':30} {'torch ms':>10} {'smelt ms':>10} {'smelt/torch':>11} "
          f"{'torch rate':>14} {'smelt rate':>14}")
    for r in row["rows"]:
        t, s_ms = r["ms"], smelt.get(r["name"])

        def rate(ms):
            if ms is None:
                return ""
            if "bytes" in r:
                return f"{r['bytes'] / ms / 1e6:9.0f} GB/s"
            if "flops" in r:
                return f"{r['flops'] / ms / 1e9:8.1f} TFLOP/s"
            return ""

        host = r["name"].startswith("BM_CudaSmallOpHostCost")
        scale = 1e3 if host else 1.0  # host cost: microseconds per op
        unit = " us/op" if host else ""
        s_txt = f"{s_ms * scale:10.3f}" if s_ms is not None else f"{'-':>10}"
        ratio = f"{s_ms / t:11.2f}" if s_ms is not None else f"{'-':>11}"
        print(f"{r['name']:30} {t * scale:10.3f} {s_txt} {ratio} {rate(t):>14} {rate(s_ms):>14}"
              f"{unit}")
    floor = smelt.get("BM_CudaLaunchFloor")
    if floor is not None:
        # What each side adds to the launch itself (the floor is the same
        # machine's cudaLaunchKernel of an empty kernel, measured by smelt_benchmarks).
        print(f"\nlaunch floor (cudaLaunchKernel of an empty kernel): {floor * 1e3:.2f} us/op; "
              "above it, torch / smelt:")
        for r in row["rows"]:
            if r["name"].startswith("BM_CudaSmallOpHostCost") and r["name"] in smelt:
                print(f"  {r['name']:36} {(r['ms'] - floor) * 1e3:6.2f} / "
                      f"{(smelt[r['name']] - floor) * 1e3:6.2f} us/op")


def bench_train_mlp(args, torch):
    data = os.path.join(args.shared, "data")
    weights = read_safetensors(os.path.join(data, "seed_mlp.safetensors"), torch)
    dtype = getattr(torch, args.dtype)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                                torch.nn.Linear(1024, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 10))
    init = {k: weights[k] for k in model.state_dict()}
    model.to(args.device, dtype)
    x = weights["input"].to(args.device, dtype)
    y = (torch.arange(x.shape[0]) * 7 % 10).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def reset():
        model.load_state_dict(init)
        opt.zero_grad(set_to_none=True)
        opt.state.clear()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = torch.compile(step)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def losses(fn):
        reset()
        return [fn(x, y).item() for _ in range(3)]

    t0 = time.perf_counter()
    got = losses(compiled)
    sync()
    compile_ms = (time.perf_counter() - t0) * 1e3
    want = losses(step)
    eager_ms = time_ms(lambda: step(x, y), args.iters, sync)
    comp_ms = time_ms(lambda: compiled(x, y), args.iters, sync)
    row = {
        "workload": "train-mlp",
        "description": "seed MLP training step (forward, cross_entropy, backward, SGD), batch 256",
        "eager_ms": eager_ms,
        "compiled_ms": comp_ms,
        "speedup": eager_ms / comp_ms,
        "first_compiled_call_ms": compile_ms,
        "losses_eager": want,
        "losses_compiled": got,
        "max_rel_err": max(abs(a - b) / abs(b) for a, b in zip(got, want)),
    }
    refs = os.path.join(data, "training.safetensors")
    if args.dtype == "float32" and os.path.exists(refs):
        ref = read_safetensors(refs, torch)["seed_mlp/f32/loss"].item()
        row["torch_first_loss_ref"] = ref
        row["first_loss_rel_err"] = abs(want[0] - ref) / abs(ref)
    if args.device.startswith("cuda"):
        for name, fn in (("eager", step), ("compiled", compiled)):
            sync()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn(x, y)
            sync()
            row[f"peak_bytes_{name}"] = torch.cuda.max_memory_allocated()
            # What one step adds at its highest point (activations, gradients
            # of a step after zero_grad(set_to_none)), as smelt's "peak memory
            # a call adds".
            row[f"step_peak_bytes_{name}"] = torch.cuda.max_memory_allocated() - before
    return row


# compiled-cuda: every implementation of each case, side by side ---------------------------------

# Peaks the share column is taken of (as `smelt bench --device cuda`), measured on the H200:
# a device copy moves 4.3 TB/s, bfloat16/float16 GEMMs reach 780 TFLOP/s dense.
H200_COPY_GBPS = 4300.0
H200_DENSE_HALF_TFLOPS = 780.0

# (workload, dtype) of the compiled cases, in order: on a GPU, and on the CPU
# (issue 11's float32 workloads, with sin + cos of one input as `horizontal`).
COMPILED_CUDA_CASES = [("pointwise", "float32"), ("softmax", "float32"),
                       ("layernorm", "bfloat16"), ("mlp", "float32"), ("mlp", "bfloat16"),
                       ("batchnorm-relu", "float32"), ("gpt2-block", "bfloat16")]
COMPILED_CPU_CASES = [("pointwise", "float32"), ("softmax", "float32"),
                      ("layernorm", "float32"), ("horizontal", "float32"), ("mlp", "float32"),
                      ("batchnorm-relu", "float32"), ("gpt2-block", "float32")]

# The implementations a row can show; --modes picks a subset. PyTorch eager always runs
# (the reference of the agreement column).
ALL_MODES = ["torch-eager", "torch-default", "torch-reduce-overhead", "torch-max-autotune",
             "torch-max-autotune-no-cudagraphs", "smelt-eager", "smelt-default",
             "smelt-reduce-overhead", "smelt-max-autotune", "smelt-max-autotune-no-cudagraphs"]
# torch's max-autotune takes minutes; the no-cudagraphs variants only on request.
DEFAULT_MODES = [m for m in ALL_MODES
                 if not m.startswith("torch-max-autotune") and not m.endswith("no-cudagraphs")]


def gpt2_block_flops(B, T, C):
    """As smelt's bench: the four linear layers (12 C^2 multiply-adds per token) and
    attention's q k^T and p v counted dense (T x T x C each per batch)."""
    return 2 * B * T * 12 * C * C + 4 * B * T * T * C


def make_gpt2_block(torch, C, n_head):
    """smelt's models::GPT2Block in PyTorch (shared/data/models.json's gpt2_block):
    x = x + c_proj(causal_sdpa(split(c_attn(ln_1(x))) into heads));
    x = x + mlp_proj(gelu_tanh(c_fc(ln_2(x)))). The same state_dict keys."""
    import torch.nn.functional as F

    class GPT2Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = torch.nn.LayerNorm(C)
            self.c_attn = torch.nn.Linear(C, 3 * C)
            self.c_proj = torch.nn.Linear(C, C)
            self.ln_2 = torch.nn.LayerNorm(C)
            self.c_fc = torch.nn.Linear(C, 4 * C)
            self.mlp_proj = torch.nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape

            def heads(t):
                return t.view(B, T, n_head, C // n_head).transpose(1, 2)

            q, k, v = self.c_attn(self.ln_1(x)).split(C, 2)
            y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            h = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return h + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(h)), approximate="tanh"))

    return GPT2Block()


def compiled_case(torch, name, dt, dev):
    """One case in PyTorch on `dev` (cuda or cpu), at `smelt bench`'s sizes there:
    its inputs drawn in the order smelt's workload draws them (t0, t1, ...; seed 0),
    the model weights to hand over (the prefix smelt's workload reads), the
    function, the state it updates in place and a way to put that state back, the
    checked number of calls, bytes and FLOPs per call."""
    import torch.nn.functional as F

    gpu = dev.startswith("cuda")
    dtype = getattr(torch, dt)
    torch.manual_seed(0)
    c = {"tensors": {}, "weights": {}, "state": lambda: [], "reset": lambda: None, "steps": 1,
         "bytes": None, "flops": None}

    def t(*shape):
        x = torch.randn(*shape, device=dev).to(dtype)
        c["tensors"][f"t{len(c['tensors'])}"] = x
        return x

    size = dtype.itemsize
    if name == "pointwise":
        n = 1 << (26 if gpu else 24)
        x, w, b = t(n), t(n), t(n)
        c["fn"], c["bytes"] = (lambda: torch.sigmoid(x * w + b)), 4 * n * size
    elif name == "horizontal":
        n = 1 << (26 if gpu else 24)
        x = t(n)
        c["fn"], c["bytes"] = (lambda: (torch.sin(x), torch.cos(x))), 3 * n * size
    elif name == "softmax":
        n = 8192 if gpu else 4096
        x = t(n, n)

        def fn():
            e = torch.exp(x - x.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)

        c["fn"], c["bytes"] = fn, 2 * x.numel() * size
    elif name == "layernorm":
        rows, cols = (16384, 4096) if gpu else (8192, 2048)
        x, g, b = t(rows, cols), t(cols), t(cols)
        c["fn"] = lambda: F.layer_norm(x, (cols,), g, b, 1e-5)
        c["bytes"] = 2 * x.numel() * size + 2 * cols * size
    elif name == "mlp":
        net = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                                  torch.nn.Linear(1024, 512), torch.nn.GELU(),
                                  torch.nn.Linear(512, 10)).to(dev, dtype)
        x = t(256, 1024)
        c["fn"] = lambda: net(x)
        c["weights"] = {f"mlp.{k}": v for k, v in net.state_dict().items()}
        c["flops"] = 2 * 256 * (1024 * 1024 + 1024 * 512 + 512 * 10)
    elif name == "batchnorm-relu":
        # Training mode: batch statistics, running stats updated (momentum 0.1). Weight
        # 1 + 0.1 randn, bias 0.1 randn (any values: smelt gets this state_dict).
        N, C = (64, 256) if gpu else (8, 64)
        bn = torch.nn.BatchNorm2d(C, momentum=0.1)
        with torch.no_grad():
            bn.weight.copy_(1 + 0.1 * torch.randn(C))
            bn.bias.copy_(0.1 * torch.randn(C))
        net = torch.nn.Sequential(bn, torch.nn.ReLU()).to(dev, dtype).train()
        x = t(N, C, 56, 56)
        init = {k: v.clone() for k, v in net.state_dict().items()}
        c["fn"], c["weights"] = (lambda: net(x)), {f"bn.{k}": v for k, v in init.items()}
        c["state"] = lambda: [bn.running_mean.clone(), bn.running_var.clone()]
        c["reset"] = lambda: net.load_state_dict(init)
        c["steps"] = 2  # as smelt's check: two calls from the initial stats
        c["bytes"] = 3 * x.numel() * size  # x read for the statistics, again to normalize; y
    elif name == "gpt2-block":
        B, T, C, H = (8, 1024, 768, 12) if gpu else (1, 128, 768, 12)
        net = make_gpt2_block(torch, C, H).to(dev, dtype)
        x = t(B, T, C)
        c["fn"] = lambda: net(x)
        c["weights"] = {f"gpt2.{k}": v for k, v in net.state_dict().items()}
        c["flops"] = gpt2_block_flops(B, T, C)
    else:
        raise ValueError(name)
    return c


def compiled_rows(args, torch, dev):
    """Every selected implementation of each case on identical inputs: PyTorch eager,
    torch.compile in each mode, smelt eager and compiled in each mode (`smelt bench
    --mode`). Times on a GPU are the mean of back-to-back calls between two CUDA events
    (on the CPU: the median of timed calls, as `smelt bench`'s, at --threads threads on
    both sides);
    compile times cold (an empty cache: a fresh TORCHINDUCTOR_CACHE_DIR and a
    dynamo reset for PyTorch, after one warm-up compile so that imports are not
    counted; a fresh kernel cache for smelt) and warm (a new compiled object
    whose code comes from the caches the cold compile filled: PyTorch's
    on-disk FX graph and Triton caches, smelt's plan and kernel cache); peak
    memory one call adds (torch.cuda.max_memory_allocated, smelt's
    peak_bytes_*); agreement with PyTorch eager after the case's checked calls
    (and the state they update)."""
    import tempfile

    smelt = args.smelt or os.path.join(HERE, "..", "build", "smelt")
    modes = [m.strip() for m in args.modes.split(",")] if args.modes else DEFAULT_MODES
    for m in modes:
        if m not in ALL_MODES:
            sys.exit(f"torch_compare: unknown mode '{m}' in --modes; use {', '.join(ALL_MODES)}")
    names = [w.strip() for w in args.workloads.split(",")] if args.workloads else []
    gpu = dev.startswith("cuda")
    all_cases = COMPILED_CUDA_CASES if gpu else COMPILED_CPU_CASES
    cases = [c for c in all_cases if not names or c[0] in names]
    if not cases:
        sys.exit(f"torch_compare: --workloads matches no case; the cases: "
                 f"{', '.join(sorted({c[0] for c in all_cases}))}")
    torch_modes = [m[6:] for m in modes if m.startswith("torch-") and m != "torch-eager"]
    smelt_modes = [m[6:] for m in modes if m.startswith("smelt-") and m != "smelt-eager"]
    if "smelt-eager" in modes and not smelt_modes:
        smelt_modes = ["default"]  # smelt eager is timed by every `smelt bench` run
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    def device_ms(fn, iters):
        if not gpu:  # as smelt bench on the CPU: warm-up, then the median of timed calls
            return time_ms(fn, iters, sync)
        # As smelt bench on a GPU: warm-up, then the mean of back-to-back calls.
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        if iters <= 0:
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            one = max((time.perf_counter() - t0) * 1e3, 1e-3)
            iters = int(min(max(300.0 / one, 5), 500))
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / iters

    def peak_bytes(fn):
        # What one call adds at its highest point, as smelt's peak_bytes_* (GPU only).
        if not gpu:
            return None
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before

    def checked(c, fn):
        # The case's checked calls from its initial state: the last result and the state.
        c["reset"]()
        for _ in range(c["steps"]):
            y = fn()
        ys = list(y) if isinstance(y, (tuple, list)) else [y]
        return [t.float().clone() for t in ys] + [s.float() for s in c["state"]()]

    def max_err(got, ref):
        return max((g.float() - r).abs().max().item() for g, r in zip(got, ref))

    def fresh_compile(fn, mode, cache_dir):
        # A compile with nothing in memory and Inductor's caches in cache_dir: the
        # time of the first call (trace, Inductor, Triton builds, autotuning).
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        torch._dynamo.reset()
        try:  # Inductor's in-memory modules (keyed by source hash) would skip builds
            torch._inductor.codecache.PyCodeCache.cache_clear()
        except (AttributeError, TypeError):
            pass
        compiled = torch.compile(fn, mode=mode)
        sync()
        t0 = time.perf_counter()
        compiled()
        sync()
        return compiled, (time.perf_counter() - t0) * 1e3

    rows = []
    saved_cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        if torch_modes:  # imports and the first compile's one-time costs, not counted
            w = torch.ones(16, device=dev)
            fresh_compile(lambda: torch.relu(w) * 2, None, os.path.join(tmp, "warmup"))
        for name, dt in cases:
            c = compiled_case(torch, name, dt, dev)
            fn = c["fn"]
            ref = checked(c, fn)
            # float32 with TF32 allowed: inputs rounded to 10 mantissa bits
            tol = (1e-4 if args.matmul_precision == "highest" else 2e-2) if dt == "float32" \
                else 5e-2
            bound = tol * (1 + max(r.abs().max().item() for r in ref))
            impls = [{"impl": "torch eager", "ms": device_ms(fn, args.iters),
                      "peak_bytes": peak_bytes(fn), "max_abs_err": 0.0, "agree": True}]
            for mode in torch_modes:
                key = None if mode == "default" else mode
                cache = os.path.join(tmp, f"inductor-{name}-{dt}-{mode}")
                try:
                    _, cold_ms = fresh_compile(fn, key, cache)
                    compiled, warm_ms = fresh_compile(fn, key, cache)
                    err = max_err(checked(c, compiled), ref)
                    impls.append({"impl": f"torch.compile {mode}",
                                  "ms": device_ms(compiled, args.iters),
                                  "compile_ms_cold": cold_ms, "compile_ms_warm": warm_ms,
                                  "peak_bytes": peak_bytes(compiled), "max_abs_err": err,
                                  "agree": err <= bound})
                    del compiled
                except Exception as e:  # one failing mode leaves the others' rows
                    impls.append({"impl": f"torch.compile {mode}",
                                  "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
                torch._dynamo.reset()
            if saved_cache is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved_cache
            inputs = os.path.join(tmp, "inputs.safetensors")
            outputs = os.path.join(tmp, "outputs.safetensors")
            c["reset"]()
            write_safetensors(inputs, {**c["tensors"], **c["weights"]}, torch)
            smelt_rows = []
            for i, mode in enumerate(smelt_modes):
                cmd = [smelt, "bench", name, "--device", dev, "--dtype", dt, "--json",
                       "--mode", mode, "--inputs", inputs, "--save-outputs", outputs,
                       "--matmul-precision", args.matmul_precision]
                if args.iters:
                    cmd += ["--iters", str(args.iters)]
                env = dict(os.environ)
                if not gpu:
                    env["OMP_NUM_THREADS"] = str(torch.get_num_threads())
                run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
                if run.returncode != 0:
                    err_line = (run.stderr.strip().splitlines() or ["(no message)"])[-1][:200]
                    smelt_rows.append({"impl": f"smelt {mode}",
                                       "error": f"exit {run.returncode}: {err_line}"})
                    continue
                sm = json.loads(run.stdout.strip().splitlines()[-1])
                got = {k: v.to(dev) for k, v in read_safetensors(outputs, torch).items()}
                n = len(ref)
                if i == 0 and "smelt-eager" in modes:
                    err = max_err([got[f"eager{k}"] for k in range(n)], ref)
                    smelt_rows.append({"impl": "smelt eager", "ms": sm["eager_ms"],
                                       "peak_bytes": sm["peak_bytes_eager"], "max_abs_err": err,
                                       "agree": err <= bound})
                if f"smelt-{mode}" in modes:
                    err = max_err([got[f"compiled{k}"] for k in range(n)], ref)
                    smelt_rows.append({"impl": f"smelt {mode}", "ms": sm["compiled_ms"],
                                       "compile_ms_cold": sm["compile_ms_cold"],
                                       "compile_ms_warm": sm["compile_ms_warm"],
                                       "peak_bytes": sm["peak_bytes_compiled"],
                                       "max_abs_err": err, "agree": err <= bound,
                                       "kernels": sm["kernel_names"]})
            impls += smelt_rows
            rows.append({"workload": name, "dtype": dt, "bytes": c["bytes"], "flops": c["flops"],
                         "checked_calls": c["steps"], "tolerance": bound, "impls": impls})
            del c, fn, ref
            if gpu:
                torch.cuda.empty_cache()
    return rows


def bench_compiled_cuda(args, torch):
    """PyTorch eager and torch.compile beside `smelt bench --device cuda` (eager
    and compiled) on identical inputs; see the module docstring."""
    return {"workload": "compiled-cuda", "rows": compiled_rows(args, torch, "cuda"),
            "peak_gbps": H200_COPY_GBPS, "peak_tflops_half": H200_DENSE_HALF_TFLOPS}


def bench_compiled(args, torch):
    """compiled-cuda's table on --device (cpu or cuda): on the CPU at smelt bench's
    CPU sizes and --threads threads on both sides, with no share of a peak."""
    if args.device.startswith("cuda"):
        return bench_compiled_cuda(args, torch)
    rows = compiled_rows(args, torch, args.device)
    return {"workload": "compiled", "rows": rows, "peak_gbps": cpu_copy_gbps(args, torch),
            "peak_tflops_half": None}


def cpu_copy_gbps(args, torch):
    """The bandwidth a plain copy reaches on this machine at --threads threads:
    y.copy_(x) of 2^24 float32 (64 MiB) into a tensor allocated (and faulted in)
    beforehand, 128 MiB moved per call (read + write), median of timed calls.
    The compiled table's share column is each row's GB/s over this."""
    n = 1 << 24
    x = torch.randn(n)
    y = torch.empty(n)
    y.copy_(x)
    ms = time_ms(lambda: y.copy_(x), args.iters, lambda: None)
    return 2 * n * 4 / ms / 1e6


def print_compiled_cuda(row):
    print(f"{'workload':23} {'implementation':29} {'us/call':>9} {'rate':>14} {'share':>6} "
          f"{'cold ms':>8} {'warm ms':>8} {'peak MiB':>9} {'max abs err':>11} {'agree':>5}")
    for r in row["rows"]:
        label = f"{r['workload']} {r['dtype']}"
        for im in r["impls"]:
            if "error" in im:
                print(f"{label:23} {im['impl']:29} FAILED: {im['error']}")
                label = ""
                continue
            ms = im["ms"]
            rate, share = "", ""
            if r["flops"]:
                tf = r["flops"] / ms / 1e9
                rate = f"{tf:8.1f} TFLOP/s"
                if r["dtype"] in ("bfloat16", "float16") and row["peak_tflops_half"]:
                    share = f"{100 * tf / row['peak_tflops_half']:5.1f}%"
            elif r["bytes"]:
                gb = r["bytes"] / ms / 1e6
                rate = f"{gb:9.0f} GB/s"
                share = f"{100 * gb / row['peak_gbps']:5.1f}%" if row["peak_gbps"] else ""
            cold = f"{im['compile_ms_cold']:8.0f}" if "compile_ms_cold" in im else f"{'-':>8}"
            warm = f"{im['compile_ms_warm']:8.1f}" if "compile_ms_warm" in im else f"{'-':>8}"
            peak = (f"{im['peak_bytes'] / 2 ** 20:9.1f}" if im.get("peak_bytes") is not None
                    else f"{'-':>9}")
            print(f"{label:23} {im['impl']:29} {ms * 1e3:9.1f} {rate:>14} {share:>6} {cold} {warm} "
                  f"{peak} {im['max_abs_err']:11.2e} {'yes' if im['agree'] else 'NO':>5}")
            label = ""
    if row["peak_gbps"] and not row["peak_tflops_half"]:  # the CPU: a copy measured here
        share = (f"share: of a plain copy's bandwidth at the same threads, measured in this run "
                 f"({row['peak_gbps']:.1f} GB/s: torch y.copy_(x), 64 MiB float32); ")
    else:
        share = (f"share: of the H200's measured peaks ({row['peak_gbps']:.0f} GB/s copy, "
                 f"{row['peak_tflops_half']:.0f} TFLOP/s bf16 dense); " if row["peak_gbps"] else "")
    print("rate: bytes each call must move / time (GB/s), or FLOPs / time where counted (mlp, "
          f"gpt2-block: attention counted dense); {share}"
          "cold: first compile with empty caches, warm: a new compile over the filled caches; "
          "peak MiB: memory one call adds at its highest point (GPU); max abs err: from PyTorch "
          "eager (batchnorm-relu: after two calls, its running stats too)")
    for r in row["rows"]:
        for im in r["impls"]:
            if "kernels" in im:
                print(f"  {r['workload']} {r['dtype']} {im['impl']}: {', '.join(im['kernels'])}")


WORKLOADS = {"minilm": bench_minilm, "eager-cuda": bench_eager_cuda, "train-mlp": bench_train_mlp,
             "compiled-cuda": bench_compiled_cuda, "compiled": bench_compiled, "ops": None,
             "op-shapes": None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--threads", default="",
                   help="thread count; ops: a comma-separated list, e.g. 1,2")
    p.add_argument("--iters", type=int, default=0, help="timed iterations (0 = automatic)")
    p.add_argument("--model", default="", help="minilm: a sentence-transformers folder "
                   "(default: all-MiniLM-L6-v2 through tools/fetch_model.py)")
    p.add_argument("--random-weights", action="store_true",
                   help="minilm: write random weights into --model's folder when it has none")
    p.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"),
                   help="train-mlp: the folder with data/seed_mlp.safetensors")
    p.add_argument("--json", action="store_true", help="print one JSON object (ops: one per op)")
    p.add_argument("--smelt-json", default="",
                   help="eager-cuda: smelt_benchmarks' JSON output to print beside PyTorch's")
    p.add_argument("--smelt", default=os.path.join(HERE, "..", "build", "smelt"),
                   help="ops, compiled-cuda: the smelt binary")
    p.add_argument("--filter", default="", help="ops: only the ops whose name contains this")
    p.add_argument("--rounds", type=int, default=3,
                   help="ops: alternating rounds of PyTorch and smelt; each op's fastest median "
                        "of the rounds is kept")
    p.add_argument("--modes", default="",
                   help="compiled-cuda: comma list of implementations (" + ", ".join(ALL_MODES)
                   + "); default: all but torch-max-autotune and the no-cudagraphs variants")
    p.add_argument("--workloads", default="",
                   help="compiled-cuda: comma list of case names (default: every case)")
    p.add_argument("--matmul-precision", default="highest", choices=["highest", "high", "medium"],
                   help="compiled-cuda, compiled or minilm --device cuda: float32 GEMMs on "
                        "both sides (torch.set_float32_matmul_precision, smelt bench "
                        "--matmul-precision): highest = exact float32, high / medium = TF32 "
                        "tensor cores allowed; refused elsewhere")
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("torch_compare: PyTorch is not installed (pip install torch sentence-transformers)")
    counts = [int(t) for t in args.threads.split(",") if t] or [
        int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count()]
    if args.workload in ("ops", "op-shapes"):
        run_ops(args, torch, counts)
        return
    threads = counts[0]
    torch.set_num_threads(threads)
    # Only where smelt runs the same GEMMs: its --matmul-precision reaches
    # compiled rows on a GPU (TF32). On the CPU smelt's float32 GEMMs stay
    # exact, while PyTorch's "medium" runs them in bfloat16 through oneDNN
    # (AMX / AVX512-BF16 CPUs: 0.26 max error on a 256x512 @ 512x256 product).
    on_gpu = args.workload == "compiled-cuda" or (args.workload in ("compiled", "minilm")
                                                  and args.device.startswith("cuda"))
    if args.matmul_precision != "highest" and not on_gpu:
        p.error("--matmul-precision high / medium applies to compiled-cuda, or compiled or "
                "minilm with --device cuda: elsewhere smelt's float32 GEMMs stay exact (PyTorch's CPU "
                "'medium' is bfloat16)")
    torch.set_float32_matmul_precision(args.matmul_precision)
    row = WORKLOADS[args.workload](args, torch)
    row.update({"framework": f"torch {torch.__version__}", "device": args.device,
                "dtype": args.dtype, "threads": threads})
    if args.json:
        print(json.dumps(row))
        return
    if args.workload == "eager-cuda":
        print(f"eager-cuda ({row['framework']}, {torch.cuda.get_device_name()})")
        print_eager_cuda(row, args.smelt_json)
        return
    if on_gpu:
        print(f"compiled-cuda ({row['framework']}, {torch.cuda.get_device_name()}, float32 "
              f"matmul precision {args.matmul_precision})")
        print_compiled_cuda(row)
        return
    if args.workload == "compiled":
        print(f"compiled ({row['framework']}, {args.device}, {threads} threads; smelt with "
              f"OMP_NUM_THREADS={threads}; float32 matmul precision {args.matmul_precision})")
        print_compiled_cuda(row)
        return
    print(f"{row['workload']} ({row['framework']}, {args.device}, {args.dtype}, {threads} threads)")
    if args.workload == "train-mlp":
        print(f"  eager            {row['eager_ms']:9.3f} ms per step")
        print(f"  torch.compile    {row['compiled_ms']:9.3f} ms per step  (first calls "
              f"{row['first_compiled_call_ms']:.0f} ms)")
        print(f"  losses of three steps from the same weights: eager {row['losses_eager']}, "
              f"compiled {row['losses_compiled']} (max relative difference "
              f"{row['max_rel_err']:.1e})")
        if "first_loss_rel_err" in row:
            print(f"  first loss vs training.safetensors' reference: relative difference "
                  f"{row['first_loss_rel_err']:.1e}")
        if "step_peak_bytes_eager" in row:
            print(f"  peak memory a step adds: eager "
                  f"{row['step_peak_bytes_eager'] / 2 ** 20:.1f} MiB, torch.compile "
                  f"{row['step_peak_bytes_compiled'] / 2 ** 20:.1f} MiB")
        return
    print(f"  eager            {row['eager_ms']:9.3f} ms  {row['items_per_s_eager']:8.1f} "
          f"{row['items_unit']}/s")
    print(f"  torch.compile    {row['compiled_ms']:9.3f} ms  {row['items_per_s_compiled']:8.1f} "
          f"{row['items_unit']}/s  (first call {row['first_compiled_call_ms']:.0f} ms)")
    print(f"  max |eager - compiled| of the embeddings: {row['max_abs_err']:.2e}")


if __name__ == "__main__":
    main()
