// A streaming chat completion through the official `openai` npm client, for
// tests/net/serve_clients_test.cpp:
//   node stream_chat.mjs BASE_URL [MODEL] [USER_MESSAGE] [MAX_TOKENS]
// BASE_URL is the server root (http://127.0.0.1:PORT); the text of the stream's deltas
// goes to stdout with nothing added, so the test can compare it byte for byte.
import OpenAI from "openai";

const [baseUrl, model = "v41-tiny-seed7", message = "Tell me a story", maxTokens = "10"] =
  process.argv.slice(2);
if (!baseUrl) {
  console.error("usage: node stream_chat.mjs BASE_URL [MODEL] [USER_MESSAGE] [MAX_TOKENS]");
  process.exit(2);
}

const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
const stream = await client.chat.completions.create({
  model,
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: message },
  ],
  max_tokens: Number(maxTokens),
  temperature: 0,
  ignore_eos: true, // vLLM's extra parameter: passed through in the body
  stream: true,
});

let text = "";
let finish = null;
for await (const chunk of stream) {
  const choice = chunk.choices[0];
  if (!choice) continue;
  text += choice.delta?.content ?? "";
  finish = choice.finish_reason ?? finish;
}
if (finish === null) {
  console.error("stream ended without a finish_reason");
  process.exit(1);
}
process.stdout.write(text);
