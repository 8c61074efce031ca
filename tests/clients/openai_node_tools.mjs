// The tool-calling flow through OpenAI's official Node.js client against the local API: a forced call (not
// streamed, then streamed and put together from its deltas), the tool's result sent back, the answer.
// Prints one JSON object of results.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "not-needed-on-127.0.0.1", maxRetries: 0 });
const tools = [{
  type: "function",
  function: {
    name: "get_current_time", description: "Current time in an IANA timezone.",
    parameters: { type: "object", properties: { timezone: { type: "string", enum: ["Asia/Tokyo"] } },
                  required: ["timezone"] },
  },
}];
const question = [{ role: "user", content: "What time is it in Tokyo?" }];
const forced = { type: "function", function: { name: "get_current_time" } };
const options = { model: "any", messages: question, tools, tool_choice: forced, temperature: 0, max_tokens: 48 };

const whole = await client.chat.completions.create(options);
const call = whole.choices[0].message.tool_calls[0];
const pieces = {};
let finish = null;
for await (const chunk of await client.chat.completions.create({ ...options, stream: true })) {
  for (const part of chunk.choices[0]?.delta?.tool_calls ?? []) {
    const entry = (pieces[part.index] ??= { name: "", arguments: "" });
    entry.name += part.function?.name ?? "";
    entry.arguments += part.function?.arguments ?? "";
  }
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
const answer = await client.chat.completions.create({
  model: "any", tools, temperature: 0, max_tokens: 16,
  messages: [...question, whole.choices[0].message,
             { role: "tool", tool_call_id: call.id, content: '{"datetime": "2026-12-04T19:42:00+09:00"}' }],
});
console.log(JSON.stringify({
  finish: whole.choices[0].finish_reason, name: call.function.name, arguments: call.function.arguments,
  streamed: Object.values(pieces), streamed_finish: finish, answer_finish: answer.choices[0].finish_reason,
  answer_has_text: Boolean(answer.choices[0].message.content),
}));
