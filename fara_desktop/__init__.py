"""Fara Desktop: offline chat with local GGUF language models, tuned for the CPU it runs on."""

__version__ = "0.1.0"
APP_NAME = "Fara Desktop"
APP_ID = "io.github.fara_desktop.FaraDesktop"
