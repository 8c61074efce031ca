"""Conversation files as ChatGPT, Open WebUI and LM Studio write them (their documented export formats), for the
import tests."""

from __future__ import annotations

import json

T0 = 1_700_000_000.0


def gpt_node(key, parent, children, role=None, text=None, when=None, kind="text", **extra):
    message = None
    if role is not None:
        content = {"content_type": kind, "parts": [text]} if kind in ("text", "multimodal_text") else {}
        content.update(extra.pop("content", {}))
        content["content_type"] = kind
        message = {
            "id": key, "author": {"role": role, "name": None, "metadata": {}}, "create_time": when,
            "update_time": None, "content": content, "status": "finished_successfully", "end_turn": True,
            "weight": 1.0, "metadata": extra.pop("metadata", {}), "recipient": "all",
        }  # fmt: skip
    return {"id": key, "message": message, "parent": parent, "children": children}


def chatgpt_conversation(title="Trip to Lisbon", current="a2"):
    mapping = {
        "root": gpt_node("root", None, ["sys"]),
        "sys": gpt_node("sys", "root", ["u1", "u1b"], "system", "", T0,
                         metadata={"is_visually_hidden_from_conversation": True}),
        "u1": gpt_node("u1", "sys", ["th"], "user", "Plan a day in Lisbon", T0 + 1),
        "th": gpt_node("th", "u1", ["a1"], "assistant", None, T0 + 2, kind="thoughts",
                        content={"thoughts": [{"summary": "Planning", "content": "Trams, then Belém."}]}),
        "a1": gpt_node("a1", "th", [], "assistant", "Take tram 28, then go to Belém.", T0 + 3,
                        metadata={"model_slug": "o3"}),
        "u1b": gpt_node("u1b", "sys", ["tool", "a2"], "user", "Plan a day in Porto", T0 + 10),
        "tool": gpt_node("tool", "u1b", [], "tool", "search results", T0 + 11),
        "a2": gpt_node("a2", "u1b", [], "assistant", "Walk along the Douro.", T0 + 12, kind="multimodal_text",
                        metadata={"model_slug": "gpt-4o"}),
    }  # fmt: skip
    mapping["a2"]["message"]["content"]["parts"] = ["Walk along ", {"asset_pointer": "file-service://x"}, "the Douro."]
    return {"title": title, "create_time": T0, "update_time": T0 + 12, "mapping": mapping, "current_node": current,
            "conversation_id": f"c-{title}", "id": f"c-{title}", "default_model_slug": "gpt-4o"}  # fmt: skip


WEBUI_REPLY = (
    '<details type="reasoning" done="true" duration="3">\n<summary>Thought for 3 seconds</summary>\n'
    "> Rayleigh scattering.\n> Shorter wavelengths scatter more.\n</details>\nBecause of **Rayleigh scattering**."
)


def open_webui_chat():
    messages = {
        "u": {"id": "u", "parentId": None, "childrenIds": ["a", "b"], "role": "user", "content": "Why is the sky blue?",
              "timestamp": int(T0), "models": ["qwen3:8b"]},
        "a": {"id": "a", "parentId": "u", "childrenIds": [], "role": "assistant", "model": "qwen3:8b",
              "modelName": "Qwen3 8B", "timestamp": int(T0) + 5, "done": True,
              "content": WEBUI_REPLY},
        "b": {"id": "b", "parentId": "u", "childrenIds": [], "role": "assistant", "model": "qwen3:8b",
              "timestamp": int(T0) + 9, "content": "Short answer: scattering."},
    }  # fmt: skip
    return {
        "id": "chat-1", "user_id": "me", "title": "Sky colour", "created_at": int(T0), "updated_at": int(T0) + 9,
        "chat": {"id": "", "title": "Sky colour", "models": ["qwen3:8b"], "timestamp": int(T0 * 1000),
                 "history": {"messages": messages, "currentId": "a"}, "messages": list(messages.values())},
        "archived": False, "pinned": False, "meta": {}, "folder_id": None,
    }  # fmt: skip


def lm_studio_conversation():
    def user(text):
        return {"type": "singleStep", "role": "user", "content": [{"type": "text", "text": text}]}

    def assistant(text, thinking=None):
        steps = []
        if thinking:
            style = {"type": "thinking", "ended": True, "title": "Thought for 2.10 seconds"}
            content = [{"type": "text", "text": thinking}]
            steps.append({"type": "contentBlock", "stepIdentifier": "t", "style": style, "content": content})
        steps.append({"type": "contentBlock", "stepIdentifier": "s", "content": [{"type": "text", "text": text}],
                      "genInfo": {"stats": {"tokensPerSecond": 12.5}}})  # fmt: skip
        return {"type": "multiStep", "role": "assistant", "steps": steps,
                "senderInfo": {"senderName": "lmstudio-community/Qwen3-8B-GGUF"}}  # fmt: skip

    return {
        "name": "Haiku practice", "pinned": False, "createdAt": int(T0 * 1000), "preset": "", "tokenCount": 80,
        "systemPrompt": "You are a poet.",
        "messages": [
            {"versions": [user("Write a haiku about rain")], "currentlySelected": 0},
            {"versions": [assistant("Rain taps the window", "Five, seven, five."), assistant("Grey sky, soft drum")],
             "currentlySelected": 1},
            {"versions": [user("Another one")], "currentlySelected": 0},
            {"versions": [assistant("Puddles hold the sky")], "currentlySelected": 0},
        ],
        "lastUsedModel": {"identifier": "qwen3-8b"}, "clientInput": "", "notes": [],
    }  # fmt: skip


def write_export(tmp_path, data, name="export.json"):
    """``data`` as a JSON file in ``tmp_path``, as an app would have exported it."""
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
