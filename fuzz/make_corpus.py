#!/usr/bin/env python3
"""Writes the seed inputs of fuzz/corpus/<target>/ (docs/fuzzing.md). Deterministic:
rerunning it rewrites the same files. The seeds are small valid (and a few nearly valid)
inputs; libFuzzer mutates from there. Run from anywhere: python3 fuzz/make_corpus.py"""
import json
import struct
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
TINY = ROOT / "tests/data/v41-tiny-seed7"
MODEL = "v41-tiny-seed7"


def copy(target, name, src):
    write(target, name, Path(src).read_bytes())


def write(target, name, data):
    d = FUZZ / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def body(obj):
    return json.dumps(obj, ensure_ascii=False).encode()


COMPLETION = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 8,
              "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7,
              "stop": ["\n", "The end"], "stop_token_ids": [1], "n": 2, "logprobs": 2,
              "ignore_eos": False, "include_stop_str_in_output": True, "user": "u"}
CHAT = {"model": MODEL, "messages": [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "Tell me a story"},
                                     {"role": "assistant", "content": "Once"},
                                     {"role": "user", "content": [{"type": "text", "text": "more"}]}],
        "max_completion_tokens": 10, "stream": True, "stream_options": {"include_usage": True},
        "logprobs": True, "top_logprobs": 3, "add_generation_prompt": True,
        "return_token_ids": True, "skip_special_tokens": False}
TOKENIZE = {"model": MODEL, "prompt": "héllo wörld <｜end▁of▁sentence｜>",
            "add_special_tokens": True, "return_token_strs": True}
TOKENIZE_CHAT = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
DETOKENIZE = {"tokens": [0, 100, 200, 4095]}


def openai_body():
    seeds = {
        "completion": (0, COMPLETION),
        "completion-token-ids": (0, {"prompt": [0, 5, 9, 300], "max_tokens": 4, "echo": True}),
        "completion-minimal": (0, {"prompt": "a"}),
        "chat": (1, CHAT),
        "chat-minimal": (1, {"messages": [{"role": "user", "content": "hi"}]}),
        "tokenize": (2, TOKENIZE),
        "tokenize-chat": (2, TOKENIZE_CHAT),
        "detokenize": (3, DETOKENIZE),
    }
    for name, (ep, obj) in seeds.items():
        write("openai_body", name, bytes([ep]) + body(obj))
    write("openai_body", "completion-bad-types", b"\x00" + body(
        {"prompt": "x", "max_tokens": "8", "temperature": None, "stop": [1]}))


def http(method, target, payload=b"", headers=(), version="1.1"):
    lines = [f"{method} {target} HTTP/{version}", "Host: 127.0.0.1:8000",
             "Authorization: Bearer sk-fuzz", *headers]
    if payload:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def chunked(payload, size=16):
    out = b""
    for i in range(0, len(payload), size):
        part = payload[i:i + size]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


def http_request():
    write("http_request", "completion", http("POST", "/v1/completions", body(COMPLETION)))
    write("http_request", "chat", http("POST", "/v1/chat/completions", body(CHAT)))
    write("http_request", "tokenize", http("POST", "/tokenize?x=1", body(TOKENIZE)))
    write("http_request", "detokenize", http("POST", "/detokenize", body(DETOKENIZE)))
    write("http_request", "get-routes", http("GET", "/health") + http("GET", "/v1/models") +
          http("GET", "/metrics") + http("GET", "/nope") + http("DELETE", "/v1/models"))
    head = ("POST /v1/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer sk-fuzz\r\n"
            "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n").encode()
    write("http_request", "chunked", head + chunked(body({"prompt": "chunked", "max_tokens": 2})))
    write("http_request", "http10-close", http("POST", "/v1/completions",
                                              body({"prompt": "a"}), ["Connection: close"], "1.0"))
    write("http_request", "no-key", http("POST", "/v1/completions", body({"prompt": "a"}))
          .replace(b"Authorization: Bearer sk-fuzz\r\n", b""))


def msgpack(v):
    """The msgpack subset the TCP API uses (nil, bool, int, float64, str, array, map)."""
    if v is None:
        return b"\xc0"
    if v is True or v is False:
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack("b", v)
        return b"\xd3" + struct.pack(">q", v) if v < 0 else b"\xcf" + struct.pack(">Q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, (str, bytes)):
        s = v.encode() if isinstance(v, str) else v  # bytes: a str with raw (maybe bad) bytes
        return (bytes([0xa0 | len(s)]) if len(s) < 32 else b"\xd9" + bytes([len(s)])) + s
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(msgpack(e) for e in v)
    return bytes([0x80 | len(v)]) + b"".join(msgpack(k) + msgpack(e) for k, e in v.items())


def frame(v):
    p = msgpack(v)
    return struct.pack(">I", len(p)) + p


def tcp_frame():
    submit = {"type": "submit", "id": 1, "prompt": "Once upon a time", "max_tokens": 8,
              "temperature": 0.5, "top_p": 0.9, "top_k": 20, "min_p": 0.0, "seed": 3,
              "stop": ["\n"], "ignore_eos": True, "logprobs": 2}
    write("tcp_frame", "submit", frame(submit))
    write("tcp_frame", "submit-tokens", frame({"type": "submit", "id": "req-a",
                                               "tokens": [0, 17, 99], "max_tokens": 2}))
    write("tcp_frame", "submit-then-abort", frame(submit) + frame({"type": "abort", "id": 1}))
    write("tcp_frame", "bad-frames", frame({"type": "nope", "id": -5}) + frame([1, 2]) +
          frame({"type": "submit"}) + frame({"type": "submit", "id": 2, "prompt": 3}))
    write("tcp_frame", "api-key", frame({"type": "submit", "id": 9, "prompt": "x",
                                         "api_key": "k"}))


def serve_config():
    for example in sorted((ROOT / "config/examples").glob("*.yaml")):
        if not example.name.startswith(("cluster-", "pd-")):
            copy("serve_config", example.name, example)
    write("serve_config", "small.yaml", "port: 0\ntcp-port: 0\nmax-num-seqs: 8\n"
          "max-body-bytes: 1MiB\nrequest-timeout: 30s\nenable-prefix-caching: false\n")
    write("serve_config", "bad-value.yaml", "port: 70000\n")
    # runtime/faults/fault_plan.h's spec parser runs in validate(): reach it quickly
    write("serve_config", "faults.yaml",
          "inject-faults: \"step-throw@3,rank-exit@7,step-stall@2:250,tokenize-fail@1\"\n")
    write("serve_config", "nested.yaml", "port: [1, {a: b}]\n---\nx: &a y\nz: *a\n")
    # the JSON values parsed in validate(): --eplb-config and --speculative-config
    write("serve_config", "eplb.yaml",
          "enable-expert-parallel: true\nenable-eplb: true\neplb-config: "
          "'{\"window_size\": 10, \"step_interval\": 20, \"num_redundant_experts\": 2}'\n")
    write("serve_config", "speculative.yaml",
          "speculative-config: '{\"method\": \"dspark\", \"num_speculative_tokens\": 3}'\n")


def cluster_config():
    for pattern in ("cluster-*.yaml", "pd-*.yaml"):
        for example in sorted((ROOT / "config/examples").glob(pattern)):
            copy("cluster_config", example.name, example)
    write("cluster_config", "flow.yaml",
          "nodes: [{name: a, host: h1, port: 1}, {name: b, host: h2, port: 2, model: m}]\n"
          "router: {node: a, http-port: 0, tcp-port: 0}\n"
          "instances: [{name: i, ranks: [a, b], threads: 2, num-redundant-experts: 2}]\n"
          "cluster-secret: 0123456789abcdef\nserve: {max-num-seqs: 4, port: 1}\n")
    write("cluster_config", "bad.yaml",
          "nodes: [{name: a, host: h, port: 1}, {name: a, host: h, port: 1}]\n"
          "router: {node: z}\ninstances: [{name: i, role: prefill, ranks: [q]}]\n")
    write("cluster_config", "secret-file.yaml",
          "nodes: [{name: a, host: h, port: 1}]\nrouter: {node: a}\n"
          "instances: [{name: i, ranks: [a]}]\ncluster-secret-file: /dev/null\n")


def safetensors_file(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors():
    write("safetensors", "small", safetensors_file(
        [("a.weight", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
         ("b.bias", "BF16", [3], b"\x80\x3f" * 3),
         ("c", "I64", [1], struct.pack("<q", -1)),
         ("empty", "F16", [0, 4], b"")], {"format": "pt"}))
    write("safetensors", "all-dtypes", safetensors_file(
        [(d, d, [1, 2], b"\x01" * 2 * s) for d, s in
         [("F32", 4), ("BF16", 2), ("F16", 2), ("F8_E4M3", 1), ("F8_E8M0", 1), ("I8", 1),
          ("U8", 1), ("I32", 4), ("I64", 8)]]))
    write("safetensors", "overlap", safetensors_file(
        [("x", "U8", [2], b"ab")]).replace(b'[0,2]', b'[0,1]'))
    # The tiny model's real header and a few data bytes (the tensors then point past the
    # end: a truncated checkpoint).
    real = (TINY / "model.safetensors").open("rb")
    n = struct.unpack("<Q", real.read(8))[0]
    real.seek(0)
    write("safetensors", "tiny-model-header", real.read(8 + n + 16))


def tokenizer_json():
    copy("tokenizer_json", "tiny-model.json", TINY / "tokenizer.json")
    specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
    vocab = {"a": 2, "b": 3, "ab": 4, "Ġ": 5, "Ġa": 6}
    small = {"version": "1.0",
             "added_tokens": [{"id": i, "content": s, "special": True}
                              for i, s in enumerate(specials)],
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                               "use_regex": True},
             "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "Ġ a"],
                       "ignore_merges": False}}
    write("tokenizer_json", "small.json", json.dumps(small, ensure_ascii=False))
    small["model"]["merges"] = [["a", "b"], ["Ġ", "a"]]
    small["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    write("tokenizer_json", "small-pair-merges.json", json.dumps(small, ensure_ascii=False))
    write("tokenizer_json", "no-eos.json", json.dumps({"model": {"type": "BPE", "vocab": {
        "<｜begin▁of▁sentence｜>": 0}, "merges": []}}, ensure_ascii=False))


def expert_loads_json():
    readme = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
              [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]  # deepseek-ai/EPLB
    write("expert_loads_json", "eplb-readme.json", json.dumps(readme))
    zipf = [[int(1000 / (1 + (e * 7 + l) % 32)) for e in range(32)] for l in range(4)]
    write("expert_loads_json", "skewed-4x32.json", json.dumps(zipf, indent=1))
    write("expert_loads_json", "zeros.json", json.dumps([[0] * 8] * 3))
    write("expert_loads_json", "floats.json", "[[1.5, 2e3, 0.0, 3.25e-5], [1e30, 7, 8, 9]]")
    write("expert_loads_json", "one-expert.json", "[[5]]")
    write("expert_loads_json", "ragged.json", "[[1, 2, 3], [4, 5]]")
    write("expert_loads_json", "negative.json", "[[1, -2]]")
    write("expert_loads_json", "nested.json", "[[[1]], 2]")


# GGUF v3 (model/gguf.h): metadata values as (gguf type, python value) pairs.
GGUF_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    if t == 8:
        return gguf_str(v)
    if t == 9:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(GGUF_FMT[t], v)


def gguf_file(kvs, tensors, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne, ggml type, raw bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gguf_str(k) + struct.pack("<I", t) + gguf_value(t, v)
    offset, data = 0, b""
    for name, ne, t, raw in tensors:
        out += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", t, offset)
        data += raw + b"\0" * ((-len(raw)) % align)
        offset = len(data)
    return out + b"\0" * ((-len(out)) % align) + data


def gguf_llama(t, block_bytes, block, experts=0, arch="llama"):
    """A 1-layer LLaMA (D 32, F 32, 2 heads, vocab 8) with matrices of ggml type t; arch
    "qwen2" adds q/k/v biases, "qwen2moe" those and a shared expert (F 32) with its gate."""
    def mat(name, rows, cols, planes=0):
        ne = [cols, rows] + ([planes] if planes else [])
        n = rows * cols * max(planes, 1)
        raw = bytes((i * 37 + 11) % 251 & 0xFB if (i % block_bytes) == 1 else (i * 37) % 256
                    for i in range(n // block * block_bytes))
        return (name, ne, t, raw)
    f32 = lambda name, n: (name, [n], 0, struct.pack(f"<{n}f", *([1.0] * n)))
    a = arch
    kvs = [("general.architecture", 8, arch), (f"{a}.context_length", 4, 16),
           (f"{a}.embedding_length", 4, 32), (f"{a}.block_count", 4, 1),
           (f"{a}.feed_forward_length", 4, 32), (f"{a}.attention.head_count", 4, 2),
           (f"{a}.attention.head_count_kv", 4, 1), (f"{a}.rope.freq_base", 6, 10000.0),
           (f"{a}.attention.layer_norm_rms_epsilon", 6, 1e-5),
           ("tokenizer.ggml.tokens", 9, (8, [f"t{i}" for i in range(8)]))]
    ts = [mat("token_embd.weight", 8, 32), f32("output_norm.weight", 32),
          f32("blk.0.attn_norm.weight", 32), mat("blk.0.attn_q.weight", 32, 32),
          mat("blk.0.attn_k.weight", 16, 32), mat("blk.0.attn_v.weight", 16, 32),
          mat("blk.0.attn_output.weight", 32, 32), f32("blk.0.ffn_norm.weight", 32)]
    if arch != "llama":
        ts += [f32("blk.0.attn_q.bias", 32), f32("blk.0.attn_k.bias", 16), f32("blk.0.attn_v.bias", 16)]
    if arch == "qwen2moe":
        kvs += [(f"{a}.expert_feed_forward_length", 4, 32),
                (f"{a}.expert_shared_feed_forward_length", 4, 32)]
        ts += [f32("blk.0.ffn_gate_inp_shexp.weight", 32), mat("blk.0.ffn_gate_shexp.weight", 32, 32),
               mat("blk.0.ffn_up_shexp.weight", 32, 32), mat("blk.0.ffn_down_shexp.weight", 32, 32)]
    if experts:
        kvs += [(f"{a}.expert_count", 4, experts), (f"{a}.expert_used_count", 4, 2)]
        ts += [("blk.0.ffn_gate_inp.weight", [32, experts], 0, b"\0" * 128 * experts),
               mat("blk.0.ffn_gate_exps.weight", 32, 32, experts),
               mat("blk.0.ffn_up_exps.weight", 32, 32, experts),
               mat("blk.0.ffn_down_exps.weight", 32, 32, experts)]
    else:
        ts += [mat("blk.0.ffn_gate.weight", 32, 32), mat("blk.0.ffn_up.weight", 32, 32),
               mat("blk.0.ffn_down.weight", 32, 32)]
    return gguf_file(kvs, ts)


def gguf():
    write("gguf", "llama-f32", gguf_llama(0, 4, 1))
    write("gguf", "llama-f16", gguf_llama(1, 2, 1))
    write("gguf", "llama-q8_0", gguf_llama(8, 34, 32))
    write("gguf", "llama-q4_0-moe", gguf_llama(2, 18, 32, experts=2))
    write("gguf", "every-value-type", gguf_file(
        [("u8", 0, 7), ("i8", 1, -7), ("u16", 2, 700), ("i16", 3, -700), ("u32", 4, 7 << 20),
         ("i32", 5, -7 << 20), ("f32", 6, 0.5), ("bool", 7, True), ("str", 8, "s"),
         ("u64", 10, 7 << 40), ("i64", 11, -7 << 40), ("f64", 12, 0.25),
         ("general.alignment", 4, 64), ("strs", 9, (8, ["a", "bc"])), ("f32s", 9, (6, [1.0])),
         ("bools", 9, (7, [True, False]))],
        [("bf16", [4], 30, b"\x80\x3f" * 4), ("mxfp4", [32], 39, b"\x7f" + b"\x21" * 16)],
        align=64))
    write("gguf", "truncated", gguf_llama(8, 34, 32)[:700])
    write("gguf", "qwen2-q8_0", gguf_llama(8, 34, 32, arch="qwen2"))
    write("gguf", "qwen2moe-f32", gguf_llama(0, 4, 1, experts=4, arch="qwen2moe"))


def hf_config():
    """config.json of HF LLaMA-family folders (model/hf_llama_config.h)."""
    llama = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
             "vocab_size": 300, "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
             "rope_theta": 500000.0, "bos_token_id": 1, "eos_token_id": [2, 3],
             "rope_scaling": None, "tie_word_embeddings": False, "hidden_act": "silu"}
    write("hf_config", "llama.json", json.dumps(llama, indent=1))
    mixtral = dict(llama, architectures=["MixtralForCausalLM"], num_local_experts=8,
                   num_experts_per_tok=2, sliding_window=64)
    write("hf_config", "mixtral.json", json.dumps(mixtral))
    qwen2 = dict(llama, architectures=["Qwen2ForCausalLM"], use_sliding_window=False,
                 sliding_window=4096, tie_word_embeddings=True)
    write("hf_config", "qwen2.json", json.dumps(qwen2))
    moe = dict(qwen2, architectures=["Qwen2MoeForCausalLM"], num_experts=60, num_experts_per_tok=4,
               moe_intermediate_size=32, shared_expert_intermediate_size=128, norm_topk_prob=False,
               decoder_sparse_step=1, mlp_only_layers=[])
    write("hf_config", "qwen2moe.json", json.dumps(moe))
    write("hf_config", "gemma.json", json.dumps(dict(llama, architectures=["GemmaForCausalLM"])))
    write("hf_config", "scaled.json", json.dumps(dict(llama, rope_scaling={"rope_type": "llama3", "factor": 8.0})))


M64 = (1 << 64) - 1
P1, P2, P3, P4 = (0x9e3779b185ebca87, 0xc2b2ae3d27d4eb4f, 0x165667b19e3779f9,
                  0x85ebca77c2b2ae63)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def hash_bytes(seed, data):
    """runtime/kv_cache/block_hash.cpp hash_bytes, for block files with a good checksum."""
    def lane(acc, v):
        return (rotl((acc + v * P2) & M64, 31) * P1) & M64
    def merge(h, l):
        return ((h ^ lane(0, l)) * P1 + P4) & M64
    n, i = len(data), 0
    u64 = lambda j: struct.unpack_from("<Q", data, j)[0]
    if n >= 32:
        a, b, c, d = (seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64
        while i + 32 <= n:
            a, b = lane(a, u64(i)), lane(b, u64(i + 8))
            c, d = lane(c, u64(i + 16)), lane(d, u64(i + 24))
            i += 32
        h = (rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18)) & M64
        h = merge(merge(merge(merge(h, a), b), c), d)
    else:
        h = (seed + P3) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (rotl(h ^ lane(0, u64(i)), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        v = struct.unpack_from("<I", data, i)[0]
        h = (rotl(h ^ ((v * P1) & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (rotl(h ^ ((data[i] * P4) & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


def block_file(tag, tokens, payload, parent=0x9e3779b97f4a7c15, lie=0, snapshot=b""):
    """runtime/kv_cache/block_file.h: a disk tier block file (format version 2)."""
    toks = struct.pack("<%di" % len(tokens), *tokens)
    h = hash_bytes(parent, toks) ^ lie
    body = (b"TRPKVB\x00\x02"
            + struct.pack("<QQQQQQ", tag, len(tokens), len(payload), len(snapshot), h, parent)
            + toks + payload + snapshot)
    return body + struct.pack("<Q", hash_bytes(0x6b76626c6f636b31, body))


def kv_block_file():
    good = block_file(0x1234, [5, 6, 7, 8], bytes((i * 7 + 1) % 256 for i in range(37)))
    write("kv_block_file", "valid-4-tokens-37-bytes.kvb", good)
    write("kv_block_file", "valid-16-tokens.kvb", block_file(7, list(range(100, 116)), b"\xab" * 64))
    write("kv_block_file", "truncated.kvb", good[:-9])
    flipped = bytearray(good)
    flipped[60] ^= 0x40
    write("kv_block_file", "flipped-payload.kvb", bytes(flipped))
    write("kv_block_file", "lying-hash.kvb", block_file(0x1234, [5, 6, 7, 8], b"\x00" * 37, lie=1))
    write("kv_block_file", "magic-only.kvb", b"TRPKVB\x00\x02")
    write("kv_block_file", "huge-geometry.kvb",
          b"TRPKVB\x00\x02" + struct.pack("<QQQQQQ", 1, 1 << 62, 1 << 62, 1 << 62, 0, 0))
    snap = bytes((i * 3 + 2) % 256 for i in range(11))
    with_snapshot = block_file(0x1234, [5, 6, 7, 8], bytes((i * 7 + 1) % 256 for i in range(37)),
                               snapshot=snap)
    write("kv_block_file", "valid-with-11-byte-snapshot.kvb", with_snapshot)
    write("kv_block_file", "snapshot-cut.kvb", with_snapshot[:-12])
    flipped = bytearray(with_snapshot)
    flipped[-12] ^= 0x01  # in the snapshot section
    write("kv_block_file", "flipped-snapshot.kvb", bytes(flipped))
    version1 = bytearray(good)
    version1[7] = 1
    write("kv_block_file", "format-version-1.kvb", bytes(version1))


def peer_wire():
    """runtime/dep/peer_address.h and runtime/collectives/step_metadata_wire.h."""
    key = b"0f3c-boot/pid:[4026531836]"
    addr = (b"TRPA" + struct.pack("<II", 1, len(key)) + key + struct.pack("<qQI", 4242, 123456, 12)
            + bytes(range(12)))
    write("peer_wire", "peer-address.bin", addr)
    write("peer_wire", "peer-address-truncated.bin", addr[:-3])
    write("peer_wire", "peer-address-huge-key.bin", b"TRPA" + struct.pack("<II", 1, 1 << 31))
    head = (struct.pack("<iiqiqqI", 1, 0, 7, 0, 7, 7, 2) + struct.pack("<qq", 1, 2)
            + struct.pack("<BqBBq", 1, 0, 0, 1, 0))
    # draft_step: limit 3, 2 decodes, timed, 0.02 s, 4 running; side 4, cells (2, 1) x 1
    # and (3, 3) x 2 (the group's draft length, runtime/speculative/draft_step_summary.h)
    summary = struct.pack("<qqBdqII", 3, 2, 1, 0.02, 4, 4, 2) + struct.pack("<BBqBBq", 2, 1, 1, 3, 3, 2)
    msg = head + summary
    write("peer_wire", "dp-sync-message.bin", msg)
    write("peer_wire", "dp-sync-bad-flag.bin", head[:-10] + b"\x02" + head[-9:] + summary)
    write("peer_wire", "dp-sync-cells-out-of-order.bin",
          head + summary[:-20] + struct.pack("<BBqBBq", 3, 3, 2, 2, 1, 1))
    write("peer_wire", "dp-sync-many-ranks.bin", struct.pack("<iiqiqqI", 0, 1, 0, 0, 0, 0, 1 << 30))


def kv_pin_index():
    """runtime/kv_cache/pin_index.h: <kv-disk-dir>/kv-pins.json."""
    write("kv_pin_index", "two-pins.json",
          b'{"version": 1, "pins": [{"name": "conv-a", "tokens": [1, 2, 3]}, {"name": "b", "tokens": []}]}')
    write("kv_pin_index", "empty.json", b'{"version": 1, "pins": []}')
    write("kv_pin_index", "version-2.json", b'{"version": 2, "pins": []}')
    write("kv_pin_index", "twice.json",
          b'{"version": 1, "pins": [{"name": "a", "tokens": [1]}, {"name": "a", "tokens": [2]}]}')
    write("kv_pin_index", "negative-token.json", b'{"version": 1, "pins": [{"name": "a", "tokens": [-1]}]}')
    write("kv_pin_index", "huge-token.json", b'{"version": 1, "pins": [{"name": "a", "tokens": [4294967296]}]}')
    write("kv_pin_index", "truncated.json", b'{"version": 1, "pins": [{"name": "a", "tok')


def kv_handoff():
    """runtime/kv_transfer/kv_handoff_wire.h. prefill-17.bin, a real hand-off of the tiny
    model, is written by the test KvHandoffWire (TROUPE_WRITE_CORPUS=1); these derive
    nearly valid ones from it."""
    real = (FUZZ / "corpus/kv_handoff/prefill-17.bin").read_bytes()
    write("kv_handoff", "bad-magic.bin", b"TRKX" + real[4:])
    write("kv_handoff", "truncated.bin", real[:40])
    write("kv_handoff", "many-tokens.bin", b"TRKH" + struct.pack("<II", 1, (1 << 24) - 1))
    # Its last byte is the slot state's feature flag (0): 2 is malformed.
    write("kv_handoff", "bad-feature-flag.bin", real[:-8] + struct.pack("<Q", 2))


def cost_table():
    """runtime/speculative/cost_table_file.h: speculative-config "table_file"."""
    write("cost_table", "two-rows.json",
          '{"step_seconds": {"1": [0.0167, 0.0377, 0.0457, 0.0523], "8": [0.05, null, 0.09]}}\n')
    write("cost_table", "exact.json",
          '{"step_seconds": {"16": [0.33333333333333331, 1.2345678901234567e-05]}}')
    write("cost_table", "empty.json", '{"step_seconds": {}}')
    write("cost_table", "huge-batch.json", '{"step_seconds": {"99999999999999999999": [1]}}')
    write("cost_table", "long-row.json", '{"step_seconds": {"2": [1, 2, 3, 4, 5, 6, 7, 8]}}')
    write("cost_table", "zero.json", '{"step_seconds": {"1": [0]}}')
    write("cost_table", "truncated.json", '{"step_seconds": {"1": [0.01, ')


if __name__ == "__main__":
    for make in (openai_body, http_request, tcp_frame, serve_config, safetensors,
                 tokenizer_json, expert_loads_json, gguf, kv_block_file, cluster_config,
                 peer_wire, kv_pin_index, kv_handoff, hf_config, cost_table):
        make()
