"""The inference engine: one worker thread that owns llama.cpp, fed by commands, answering with events."""
