"""Serving the loaded model to other apps: an OpenAI-compatible HTTP API on this computer."""
