"""What vulture reports as unused but is used where it cannot see (tests/unit/test_architecture.py runs it over
fara_desktop with this file). A name goes here with the reason it stays; anything else it reports is dead code."""

# ruff: noqa
# mypy: ignore-errors
_ = object()

# Called by name: the benchmark runs the sections the command line names (getattr(f"{name}_section")).
_.bandwidth_section, _.engine_section, _.app_section, _.memory_section
_.startup_section, _.turns_section, _.cold_section, _.resume_section, _.typeahead_section, _.retrieval_section
_.vision_section, _.api_section, _.kernels_section
_.loops_section, _.prefix_section, _.parallel_section, _.speculative_section

# Interfaces other code calls: llama.cpp's ctypes structs, sqlite3, lxml's parser target, urllib's handlers,
# uvicorn's server, Jinja's sandbox, QTextDocument's resource loader.
_.type_k, _.type_v, _.flash_attn_type, _.no_perf, _.progress_callback, _.lazy_mode, _.n_rs_seq, _.load_mtp, _.ctx_type
_.use_extra_bufts, _.ftype, _.nthread, _.n_seq_max, _.kv_unified
_.row_factory
attrib, _.comment
_.http_open, _.https_open
_.should_exit
tags, intercepted_binops
_.loadResource
_.HF_HUB_DISABLE_TELEMETRY, _.HF_HUB_DISABLE_UPDATE_CHECK
_.TextReceiveStream  # the MCP SDK reads servers through our bounded lines (tools/bounded_lines.py)
_.takeAt, _.expandingDirections  # QLayout's virtual methods, called by Qt (ui/widgets/flow_layout.py)

# Fields of records that are saved, exported as JSON or printed whole (asdict / to_json).
total_s, battery_percent, build_features, tensor_names, schema_version, predicted_pp_tok_per_s, _.dimensions
ended_early  # GenerationStats: saved with the reply (asdict), read back by the chat view
closed

# Kept alive by the attribute (a running background call; widgets found by tests and accessibility tools).
_._listing, _.paste_button, _.search_button

# Inspection used by tests only: small, read-only views of state the app keeps.
import_conversation  # one conversation through the import path (chats/export.py)
_.import_json  # an export's dict back into the store (round-trip tests)
split_reasoning  # a whole reply through the streaming splitter at once (the splitter's tests)
_.decodes, _.unsaved_count, _.integrity_ok, _.vector_count, _.replying, _.passages_embedded, _.threads_that_ran_the_model, _.queued, _.arch_value, _.streaming_message, _.code_blocks
_.in_sequences, _.restores_refused  # what the prefix-path and parallel-slot tests count (tests/integration/engine)
_.children_started  # the sandbox children an import started (tests/integration/pictures/test_pictures_carried.py)

# The user guide's settings table is written from the settings' descriptions; its test compares the two.
settings_table

# Pillow's own switches, set in the picture reader's child (pictures/decode.py).
_.LOAD_TRUNCATED_IMAGES, _.MAX_IMAGE_PIXELS
# ctypes structures' fields, read by llama.cpp's mtmd (engine/vision.py).
_.use_gpu, _.print_timings, _.warmup, _.text_len, _.parse_special, _.cb_eval

# What the tests ask of this process's kernel path (tests/integration/machine/test_kernel_check.py,
# tests/unit/machine/test_kernel_choice.py): the app applies the path and never needs to ask it back.
amx_permission_request_refused, path_in_use
