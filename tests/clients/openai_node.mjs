// The same conversation as the Python tests, through OpenAI's official Node.js client (npm "openai"):
// streaming, stop, a JSON schema and embeddings against the local API. Prints one JSON object of results.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "not-needed-on-127.0.0.1", maxRetries: 0 });
const question = [{ role: "user", content: "Count from 1 to 10, separated by commas." }];
const options = { model: "any", messages: question, temperature: 0, max_tokens: 48 };

const whole = await client.chat.completions.create(options);
const text = whole.choices[0].message.content;
const stop = text.split(/\s+/)[2];
const stopped = await client.chat.completions.create({ ...options, stop: [stop] });
let streamed = "";
for await (const chunk of await client.chat.completions.create({ ...options, stop: [stop], stream: true })) {
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
const schema = {
  type: "object", properties: { city: { type: "string", maxLength: 24 }, sunny: { type: "boolean" } },
  required: ["city", "sunny"], additionalProperties: false,
};
const json = await client.chat.completions.create({
  model: "any", temperature: 0, max_tokens: 64,
  messages: [{ role: "user", content: "Name a sunny city, as JSON." }],
  response_format: { type: "json_schema", json_schema: { name: "city", schema } },
});
const embeddings = await client.embeddings.create({ model: "any", input: ["the cat sat", "a dog"] });
console.log(JSON.stringify({
  text, stop, stopped: stopped.choices[0].message.content, finish: stopped.choices[0].finish_reason, streamed,
  json: json.choices[0].message.content, dimensions: embeddings.data.map((d) => d.embedding.length),
}));
