"""Joins bench/peer/llamacpp.sh's JSON lines into the markdown table of docs/peer-bench.md.

tok/s per engine, troupe / llama.cpp, and each as a fraction of the limit measured in the
same run: prefill (pp) of the dot-product peak of its dtype (int8 vpdpbusd for q8_0/q4_0,
fp32 FMA for f16/f32) at 2 flops per multiply-add of the matrices; decode (tg, batched) of
DRAM read bandwidth at the weight bytes a step reads (the file's bytes: an engine that
reads more than the file, such as troupe's f32 copy of f16, shows it as a lower fraction).
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.loads(f.readline())


def load_best(path):
    """One engine's rounds of a file (a JSON line each): the first, with each figure the
    best over all the rounds (pp and tg tok/s, and each batched decode's)."""
    with open(path) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    best = dict(runs[0])
    for key in ("pp_tok_s", "tg_tok_s"):
        best[key] = max(r[key] for r in runs)
    best["parallel"] = [dict(p, tok_s=max(r["parallel"][i]["tok_s"] for r in runs))
                        for i, p in enumerate(runs[0]["parallel"])]
    return best


def main(out, files):
    with open(f"{out}/limits.json") as f:
        probes = [json.loads(line) for line in f if line.strip()]
    with open(f"{out}/load.txt") as f:
        loads = [line.strip() for line in f if line.strip()]
    for when, p, ld in zip(("start", "end"), probes, loads):
        print(f"machine limits at the {when} ({p['threads']} threads, load average {ld}): DRAM read "
              f"{p['dram_gbs']:.1f} GB/s, {p['int8_what']} {p['int8_gops']:.0f} GOP/s, "
              f"{p['fp32_what']} {p['fp32_gflops']:.0f} GFLOP/s")
    lim = dict(probes[0])
    for key in ("dram_gbs", "int8_gops", "fp32_gflops"):
        lim[key] = max(p[key] for p in probes)
    print(f"judged against the higher of each: DRAM {lim['dram_gbs']:.1f} GB/s, int8 "
          f"{lim['int8_gops']:.0f} GOP/s, fp32 {lim['fp32_gflops']:.0f} GFLOP/s\n")
    print("| file | figure | troupe tok/s | llama.cpp tok/s | troupe / llama.cpp "
          "| troupe % of limit | llama.cpp % of limit | limit |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    sysinfo = None
    for f in files:
        t, l = load_best(f"{out}/{f}.troupe.json"), load_best(f"{out}/{f}.llama.json")
        sysinfo = l.get("system_info", sysinfo)
        int8 = "q8_0" in f or "q4_0" in f
        peak = lim["int8_gops"] if int8 else lim["fp32_gflops"]
        peak_name = "int8 dot" if int8 else "fp32 FMA"
        step_bytes = t["active_bytes_per_token"]
        rows = [("pp%d" % t["pp"], t["pp_tok_s"], l["pp_tok_s"], t["flops_per_token"] * 1e-9 / peak, peak_name),
                ("tg%d" % t["tg"], t["tg_tok_s"], l["tg_tok_s"], step_bytes * 1e-9 / lim["dram_gbs"], "DRAM")]
        for tp, lp in zip(t["parallel"], l["parallel"]):
            s = tp["seqs"]
            # One read of the single-sequence step's weights per batched step, for s tokens.
            rows.append((f"decode x{s}", tp["tok_s"], lp["tok_s"], step_bytes * 1e-9 / lim["dram_gbs"] / s, "DRAM*"))
        for name, ts, ls, per_tok, limit in rows:
            print(f"| {f} | {name} | {ts:.1f} | {ls:.1f} | {ts / ls:.2f}x | {100 * ts * per_tok:.0f}% "
                  f"| {100 * ls * per_tok:.0f}% | {limit} |")
    print("\nDRAM*: batched decode judged at the single-sequence step's bytes (dense: every weight "
          "once per step; MoE: an underestimate, more experts are read)")
    for f in files:
        try:
            c = load(f"{out}/{f}.check.json")
        except FileNotFoundError:
            continue
        print(f"\nteacher-forced greedy check on {f}: troupe's argmax equals llama.cpp's greedy token at "
              f"{c['same']} of {c['positions']} positions")
        for d in c["differ"]:
            print(f"  position {d['position']}: troupe {d['troupe']}, llama.cpp {d['llamacpp']}, "
                  f"gap {d['gap']:.3g} of the largest |logit| (a near-tie when small)")
    if sysinfo:
        print(f"\nllama.cpp system info: {sysinfo}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
