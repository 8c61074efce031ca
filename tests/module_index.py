"""Where the modules that no test imports by name are tested: through which test file, and a word that file uses
for them. With the mirrored tree (tests/unit/<package>/, tests/integration/<package>/), every module's tests can be
found from its name; tests/unit/test_architecture.py checks that each module is imported by a test or listed
here, and that each entry is true (the file exists and uses the word)."""

TESTED_THROUGH: dict[str, tuple[str, str]] = {
    # the core: its embedder service is the documents' and serve's
    # the benchmark's child processes and tables: run by the bench's own test
    "fara_desktop.bench.kernels": ("tests/integration/bench/test_bench.py", '"kernels"'),
    "fara_desktop.bench.cold_probe": ("tests/integration/bench/test_bench.py", "cold"),
    "fara_desktop.bench.speculative": ("tests/integration/bench/test_bench.py", '"speculative"'),
    "fara_desktop.bench.speculative_mtp": ("tests/integration/bench/test_bench.py", "MTP head"),
    "fara_desktop.bench.window_replies": ("tests/integration/bench/test_bench.py", '"speculative"'),
    "fara_desktop.bench.parallel": ("tests/integration/bench/test_bench.py", '"parallel"'),
    "fara_desktop.bench.parallel_serving": ("tests/integration/bench/test_bench.py", "through serve"),
    "fara_desktop.bench.stream_client": ("tests/integration/bench/test_bench.py", "each client a process"),
    "fara_desktop.bench.loops": ("tests/integration/bench/test_bench.py", "loop"),
    "fara_desktop.bench.restart": ("tests/integration/bench/test_bench.py", "restart_tokens_reread"),
    "fara_desktop.bench.results": ("tests/integration/bench/test_bench.py", "bench"),
    "fara_desktop.bench.vision": ("tests/integration/bench/test_bench.py", '"vision"'),
    # chat imports: read through the importer that recognises the format
    "fara_desktop.chats.imports.chatgpt": ("tests/unit/chats/test_imports.py", "ChatGPT"),
    "fara_desktop.chats.imports.common": ("tests/integration/chats/test_hostile_imports.py", "import"),
    "fara_desktop.chats.imports.lm_studio": ("tests/unit/chats/test_imports.py", "LM Studio"),
    "fara_desktop.chats.imports.open_webui": ("tests/unit/chats/test_imports.py", "Open WebUI"),
    "fara_desktop.chats.tree": ("tests/unit/chats/test_branches.py", "switch_version"),
    # the command line: run as a person runs it, in a child process
    "fara_desktop.cli.arguments": ("tests/integration/cli/test_commands.py", "--help"),
    "fara_desktop.cli.commands": ("tests/integration/cli/test_commands.py", '"export"'),
    "fara_desktop.cli.docs": ("tests/integration/cli/test_import_embedder.py", '"docs"'),
    "fara_desktop.cli.downloads": ("tests/integration/models/test_downloads.py", '"download"'),
    "fara_desktop.cli.reports": ("tests/integration/cli/test_commands.py", '"models"'),
    # documents: extraction runs in the sandbox child, the pipeline behind indexing
    "fara_desktop.documents.pipeline": ("tests/unit/ui/test_documents_ui.py", "index_folder"),
    # the llama.cpp adapter's parts: through the backend with the real library
    "fara_desktop.engine.thread_calibration": ("tests/integration/planning/test_calibration.py", "calibrate_threads"),
    "fara_desktop.machine.busy": ("tests/integration/planning/test_calibration.py", "busy"),
    "fara_desktop.ui.dialogs.inference_page": ("tests/unit/ui/test_settings_pages.py", "kernelPath"),
    "fara_desktop.engine.llama_prompt": ("tests/integration/pictures/test_mrope_pictures.py", "cells"),
    "fara_desktop.engine.llama_state": ("tests/integration/engine/test_kv_on_disk.py", "snapshot"),
    "fara_desktop.engine.llama_tokens": ("tests/integration/serving/test_local_api.py", "logprobs"),
    "fara_desktop.engine.parallel_replies": ("tests/integration/serving/test_parallel_api.py", "parallel"),
    "fara_desktop.engine.reply_channels": ("tests/integration/engine/test_llama_backend.py", "TokenText"),
    "fara_desktop.engine.sse": ("tests/integration/serving/test_api_tools.py", "stream=True"),
    "fara_desktop.engine.tool_grammar": ("tests/integration/engine/test_remote_backend.py", "tool_choice"),
    "fara_desktop.files.regular": ("tests/integration/documents/test_hostile_documents.py", "fifo"),
    "fara_desktop.models.architecture": ("tests/unit/models/test_architecture_facts.py", "recurrent_state_bytes"),
    "fara_desktop.serving.admission": ("tests/unit/serving/test_admission.py", "Host"),
    "fara_desktop.system.logs": ("tests/integration/ui/test_window_stays_live.py", "logs"),
    "fara_desktop.text.untrusted": ("tests/integration/ui/test_tool_calls_in_chat.py", "202e"),
    # the window's parts: through the real window, offscreen or on X11
    "fara_desktop.ui.after_paint": ("tests/unit/ui/test_window.py", "painted"),
    "fara_desktop.ui.controllers.catalog_advice": ("tests/unit/ui/test_window.py", "advice.downloadSuggested"),
    "fara_desktop.ui.controllers.chat_controller": ("tests/unit/ui/test_window.py", "win.chat."),
    "fara_desktop.ui.controllers.chat_drafts": ("tests/unit/ui/test_pictures_ui.py", "new_chat"),
    "fara_desktop.ui.controllers.model_loading": ("tests/unit/ui/test_window.py", "Still chatting with"),
    "fara_desktop.ui.controllers.read_ahead": ("tests/integration/ui/test_read_ahead.py", "read_ahead"),
    "fara_desktop.ui.controllers.startup_controller": ("tests/unit/ui/test_window.py", "start_auto"),
    "fara_desktop.ui.controllers.tools_menu": ("tests/integration/ui/test_tool_calls_in_chat.py", "tools_button"),
    "fara_desktop.ui.controllers.tool_flow": ("tests/integration/ui/test_tool_calls_in_chat.py", "tool_approval"),
    "fara_desktop.ui.window_layout": ("tests/unit/ui/test_window_widths.py", "panel_toggle"),
    "fara_desktop.ui.dialogs.folder_models": ("tests/unit/ui/test_window.py", "Added folder"),
    "fara_desktop.ui.dialogs.prompts_page": ("tests/integration/ui/test_read_ahead.py", "prompts_page"),
    "fara_desktop.ui.dialogs.servers_page": ("tests/unit/ui/test_servers_ui.py", "servers_page"),
    "fara_desktop.ui.dialogs.shortcuts_dialog": ("tests/unit/ui/test_keyboard.py", "show_shortcuts"),
    "fara_desktop.ui.dialogs.tools_page": ("tests/integration/ui/test_tool_calls_in_chat.py", "tools_page"),
    "fara_desktop.ui.engine_bridge": ("tests/integration/ui/test_real_model_window.py", ".bridge."),
    "fara_desktop.ui.qt_health": ("tests/unit/ui/test_qt_canary.py", "refcount"),
    "fara_desktop.ui.smoke": ("tests/integration/cli/test_commands.py", "smoke"),
    "fara_desktop.ui.widgets.composer": ("tests/unit/ui/test_keyboard.py", "composer"),
    "fara_desktop.ui.widgets.download_row": ("tests/integration/ui/test_models_dialog.py", "rows"),
    "fara_desktop.ui.widgets.file_dialogs": ("tests/unit/ui/test_window.py", "folders.start"),
    "fara_desktop.ui.widgets.flow_layout": ("tests/integration/ui/test_documents_chat.py", "citation"),
    "fara_desktop.ui.widgets.notice_bar": ("tests/unit/ui/test_notice_bar.py", "notice"),
    "fara_desktop.ui.widgets.plain_text": ("tests/unit/ui/test_hostile_text_rendering.py", "PlainText"),
    "fara_desktop.ui.widgets.setting_fields": ("tests/unit/ui/test_settings_pages.py", "accessibleDescription"),
    "fara_desktop.ui.widgets.short_list": ("tests/unit/ui/test_servers_ui.py", "servers_page"),
    "fara_desktop.ui.widgets.sidebar": ("tests/unit/ui/test_sidebar_updates.py", "sidebar"),
    "fara_desktop.ui.widgets.stay_open_menu": ("tests/unit/ui/test_documents_ui.py", "without_the_menu_closing"),
    "fara_desktop.ui.widgets.task_progress": ("tests/unit/ui/test_reasoning_and_branches.py", "task_progress"),
    "fara_desktop.ui.window_menus": ("tests/unit/ui/test_menu_names.py", "menuBar"),
    # pictures in the window: through the real window with the real library
    "fara_desktop.ui.controllers.pictures_controller": (
        "tests/integration/ui/test_pictures_in_chat.py", "win.pictures"
    ),
    "fara_desktop.ui.widgets.composer_controls": ("tests/integration/ui/test_pictures_in_chat.py", "attach_button"),
    "fara_desktop.ui.widgets.picture_thumbnails": ("tests/integration/ui/test_pictures_in_chat.py", "picture_tray"),
}
