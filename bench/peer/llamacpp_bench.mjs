// llama.cpp's side of the peer benchmark, through node-llama-cpp (pinned by
// bench/peer/llamacpp.sh, installed in $PEER_DIR). Same token ids and figures as
// `troupe bench peer --model` (bench/peer/peer_bench.cpp): pp = one prefill of PP tokens,
// tg = TG decode steps after a 16-token prompt, batched = S sequences decoded together;
// best of REPEATS each. Prints one JSON line; "greedy" holds the prompt and the TG tokens
// it generated greedily, for troupe's teacher-forced check (an end-of-text token does
// not stop either engine: both feed it back like any other).
//   node llamacpp_bench.mjs MODEL.gguf THREADS PP TG "4,16" PARALLEL_STEPS REPEATS
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [model, threadsArg, ppArg, tgArg, parallelArg = "", stepsArg = "32", repeatsArg = "2"] =
  process.argv.slice(2);
const threads = Number(threadsArg), pp = Number(ppArg), tg = Number(tgArg);
const parallel = parallelArg.split(",").filter((s) => s).map(Number);
const steps = Number(stepsArg), repeats = Number(repeatsArg);
const lib = await import(pathToFileURL(join(process.env.PEER_DIR, "node_modules/node-llama-cpp/dist/index.js")));
const { getLlama, LlamaLogLevel } = lib;

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads });
const m = await llama.loadModel({ modelPath: model, gpuLayers: 0 });
const V = Number(m.fileInfo.metadata.llama.vocab_size);  // written by troupe bench peer --write
const tokens = (n, offset = 0) => Array.from({ length: n }, (_, i) => 3 + (((i + offset) * 7919) % (V - 3)));
const now = () => Number(process.hrtime.bigint()) / 1e9;
const contextOptions = (sequences, size) => ({
  contextSize: size, batchSize: 512, sequences, threads, flashAttention: false,
});

async function prefill() {
  const ctx = await m.createContext(contextOptions(1, 1024));
  let best = Infinity;
  for (let r = 0; r < repeats; ++r) {
    const seq = ctx.getSequence();
    const t0 = now();
    await seq.evaluateWithoutGeneratingNewTokens(tokens(pp));
    best = Math.min(best, now() - t0);
    seq.dispose();
  }
  await ctx.dispose();
  return pp / best;
}

// Greedy decode of TG tokens after a 16-token prompt, timing the TG single-token steps.
async function generate() {
  const ctx = await m.createContext(contextOptions(1, 1024));
  let best = Infinity, greedy = [];
  for (let r = 0; r < repeats; ++r) {
    const seq = ctx.getSequence();
    const prompt = tokens(16), out = [];
    let t0 = 0;
    for await (const t of seq.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
      if (out.length === 0) t0 = now();  // the first token comes from the prompt's logits
      out.push(t);
      if (out.length === tg + 1) break;
    }
    best = Math.min(best, now() - t0);
    if (out.length !== tg + 1) throw new Error(`generation stopped after ${out.length} tokens`);
    greedy = prompt.concat(out.slice(0, tg));
    seq.dispose();
  }
  await ctx.dispose();
  return { tok_s: tg / best, greedy };
}

async function batched(seqs) {
  let best = Infinity;
  for (let r = 0; r < repeats; ++r) {
    // A fresh context per repeat: disposed sequences are not handed out again at once.
    const ctx = await m.createContext(contextOptions(seqs, seqs * 128));
    const all = Array.from({ length: seqs }, () => ctx.getSequence());
    let t0 = 0, started = 0;
    await Promise.all(all.map(async (seq, i) => {
      let n = 0;
      for await (const _ of seq.evaluate(tokens(16, i), { temperature: 0, yieldEogToken: true })) {
        if (n === 0 && ++started === seqs) t0 = now();  // every prompt done: time the steps
        if (++n === steps + 1) break;
      }
    }));
    best = Math.min(best, now() - t0);
    await ctx.dispose();
  }
  return (seqs * steps) / best;
}

const pp_tok_s = await prefill();
const gen = await generate();
const par = [];
for (const s of parallel) par.push({ seqs: s, tok_s: await batched(s) });
console.log(JSON.stringify({
  engine: "llama.cpp (node-llama-cpp)", model, threads, pp, tg, pp_tok_s, tg_tok_s: gen.tok_s,
  parallel: par, greedy: gen.greedy, prompt_len: 16, build: llama.buildType, system_info: llama.systemInfo,
}));
await m.dispose();
await llama.dispose?.();
