"""`fara-desktop bench`'s results: the figures saved per machine and model (the next run compares with them), and
the table printed from them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fara_desktop.bench.kernels import kernel_rows
from fara_desktop.files.atomic import write_text_atomically
from fara_desktop.files.paths import AppPaths
from fara_desktop.files.regular import read_regular_text


def save_result(paths: AppPaths, out: dict[str, Any]) -> Path:
    """Keep the figures with the machine and model they belong to, so a later run can be compared."""
    folder = paths.data / "benchmarks"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = folder / f"{stamp}-{Path(out['model']).stem[:60]}.json"
    write_text_atomically(target, json.dumps(out, indent=2), 0o644)
    return target


def previous_result(paths: AppPaths, out: dict[str, Any]) -> dict[str, Any] | None:
    """The latest saved run on this machine with this model file (same path and size)."""
    folder = paths.data / "benchmarks"
    candidates = sorted(folder.glob("*.json"), reverse=True) if folder.is_dir() else []
    for file in candidates:
        try:
            data = json.loads(read_regular_text(file, 4 << 20))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and all(data.get(k) == out[k] for k in ("machine", "model", "model_bytes")):
            return data
    return None


COMPARED = (
    "read_bandwidth_gb_per_s",
    "app_vs_raw_gen_ratio",
    "tuned_vs_default_gen_ratio",
    "roofline_fraction",
    "estimate_vs_rss_ratio",
    "max_event_loop_stall_ms",
)


def row(what: str, figure: str) -> str:
    return f"{what:62} {figure}"


def table(out: dict[str, Any]) -> str:
    """The figures the sections measured, one per line (a section not run leaves its lines out)."""
    mib, gb = 1024 * 1024, 1e9
    rows = [
        f"Fara Desktop benchmark — {out['model_name']} ({out['quantization']}, {out['model_bytes'] / gb:.2f} GB) on "
        f"{out['cpu']} ({out['cores']['physical']} cores); medians, [spread]",
        "",
    ]
    if "bandwidth_runs_bytes_per_s" in out:
        runs = out["bandwidth_runs_bytes_per_s"]
        rows.append(row("memory read bandwidth, two probes (GB/s)", f"{runs[0] / gb:.1f} / {runs[1] / gb:.1f}"))
    if "sweep" in out:
        rows.append(row("settings (interleaved runs)", "prompt tok/s   generation tok/s"))
        for entry in out["sweep"]:
            pp, gen = entry["pp_tok_per_s"], entry["gen_tok_per_s"]
            rows.append(row(f"  {entry['label']}", f"{pp['median']:10.1f}   {gen['median']:10.2f}"))
        rows += [
            row(
                "tuned / llama-cpp-python defaults: generation, prompt",
                f"{out['tuned_vs_default_gen_ratio']:.3f}, {out['tuned_vs_default_pp_ratio']:.3f}",
            ),
            row(
                "tuned / best of the sweep: generation, prompt",
                f"{out['tuned_vs_best_sweep_gen_ratio']:.3f}, {out['tuned_vs_best_sweep_pp_ratio']:.3f}",
            ),
            row(
                "predicted generation tok/s (measured / predicted)",
                f"{out['predicted']['gen_tok_per_s']:.2f} ({out['predicted']['gen_measured_over_predicted']:.2f})",
            ),
            row(
                "predicted prompt tok/s (measured / predicted)",
                f"{out['predicted']['pp_tok_per_s']:.1f} ({out['predicted']['pp_measured_over_predicted']:.2f})",
            ),
            row(
                "generation roofline (tok/s) and fraction reached",
                f"{out['roofline_tok_per_s']:.1f} / {out['roofline_fraction']:.2f}",
            ),
        ]
    if "app" in out:
        app = out["app"]["gen_tok_per_s"]
        stalls = out["event_loop_stall_ms"]
        rows += [
            row("app path (window → queue → worker → Qt → chat view) tok/s", f"{app['median']:.2f} {app['runs']}"),
            row("app / raw engine with sampling (raw runs around it)", f"{out['app_vs_raw_gen_ratio']:.3f}"),
            row(
                f"longest event-loop stall: load / {out['long_prompt_tokens']}-token prompt / stream (ms)",
                f"{stalls['loading']:.0f} / {stalls['prompt']:.0f} / {stalls['streaming']:.0f}",
            ),
        ]
    for case in out.get("memory_cases", []):
        rows.append(
            row(
                f"memory at {case['n_ctx']:,} ctx, {case['kv_type']} KV: measured / estimate (MiB)",
                f"{case['increase'] / mib:.0f} / {case['estimate'] / mib:.0f} = {case['ratio']:.3f}",
            )
        )
    if "startup" in out:
        rows.append(
            row(
                "window shown / model ready after launch (s)",
                f"{out['window_shown_s']:.2f} / {out['model_ready_s']:.2f}",
            )
        )
    if "ttft_s" in out:
        rows += [
            row(
                "TTFT turns 1 / 4 / 8 with reuse (ms)",
                " / ".join(f"{out['ttft_s']['reuse'][t] * 1000:.0f}" for t in ("1", "4", "8")),
            ),
            row(
                "TTFT turns 1 / 4 / 8, fresh context each turn (ms)",
                " / ".join(f"{out['ttft_s']['fresh'][t] * 1000:.0f}" for t in ("1", "4", "8")),
            ),
            row(
                f"switch back to a {out['switch_back']['history_tokens']}-token chat: snapshot / re-read",
                f"{out['switch_back_ttft_ratio']:.3f}",
            ),
        ]
    if "cold_start" in out:
        cold = out["cold_start"]
        rows.append(
            row(
                "cold start to first token: " + " / ".join(cold["first_token_s"]) + " (s)",
                " / ".join(f"{v:.1f}" for v in cold["first_token_s"].values()) + f"  (default: {cold['default_mode']})",
            )
        )
    if "restart_tokens_reread" in out:
        rows += [
            row(
                f"restart: a {out['restart_history_tokens']:,}-token chat's tokens read again (goal 0)",
                f"{out['restart_tokens_reread']} (first word {out['restart_first_word_s']:.2f} s)",
            ),
            row(
                "right after a reply: Branch / Edit first word (s) [tokens read]",
                f"{out['branch_after_reply_first_word_s']:.2f} [{out['branch_after_reply_tokens_read']}] / "
                f"{out['edit_after_reply_first_word_s']:.2f} [{out['edit_after_reply_tokens_read']}]",
            ),
        ]
    for label in ("quiet", "loaded"):
        said = out.get(f"paste_forecast_over_measured_{label}")
        if said is not None:
            before = out[f"paste_forecast_at_reply_speed_over_measured_{label}"]
            rows.append(
                row(
                    f"long paste's wait said / first word, {label} (at the last reply's speed)",
                    f"{said:.2f} ({before:.2f})",
                )
            )
        typed = out.get(f"read_ahead_reused_fraction_{label}")
        if typed is not None:
            said_rounds = out[f"typed_paste_forecast_rounds_{label}"]
            name = f"a paste typed in, {label}: wait said / meant [rounds that said one]; part reused"
            rows.append(row(name, f"{said_rounds} {typed:.3f}"))
    if "read_ahead_followup_read_over_new" in out:
        ratio = out["read_ahead_followup_read_over_new"]
        rows.append(row("a message read ahead, then sent: tokens read / new (goal ≤ 1.2)", f"{ratio:.2f}"))
    if "api_followup_over_first" in out:
        rows += [
            row(
                f"local API: a {out['api_first_prompt_tokens']:,.0f}-token chat's follow-up / first request",
                f"{out['api_followup_over_first']:.3f} (read {out['api_followup_read_tokens']:,.0f} tokens)",
            ),
            row("local API: tokens another key reused", f"{out['api_cross_principal_reuse_tokens']}"),
        ]
    if "parallel_gen_tok_per_s_1" in out:
        speeds = " / ".join(f"{out[f'parallel_gen_tok_per_s_{n}']:.1f}" for n in (1, 2, 4, 8))
        rows += [
            row("several conversations at once: generation tok/s with 1 / 2 / 4 / 8", speeds),
            row("  4 sequences / 1 (goal ≥ 1.7)", f"{out['parallel_gain_4']:.2f}"),
            row(
                "  p95 first token, 8 together / one at a time (goal ≤ 0.5)",
                f"{out['parallel_first_token_p95_8_over_sequential']:.2f}",
            ),
        ]
    if "serving_ours_tok_per_s_1" in out:
        rows += [
            row(
                "through serve, clients as processes: tok/s with 1 / 4 clients",
                f"{out['serving_ours_tok_per_s_1']:.1f} / {out['serving_ours_tok_per_s_4']:.1f}",
            ),
            row("  4 clients / 1, prompts included", f"{out['serving_ours_gain_4']:.2f}"),
            row(
                "  writing, each client from its first token: tok/s with 1 / 4 clients",
                f"{out['serving_ours_writing_tok_per_s_1']:.1f} / {out['serving_ours_writing_tok_per_s_4']:.1f} "
                f"= {out['serving_ours_writing_gain_4']:.2f} (goal ≥ 1.7)",
            ),
            row(
                "  p95 first token of 8 clients, s: together / one at a time (goal ≤ 0.5×)",
                f"{out['serving_ours_first_token_p95_8_s']:.1f} / "
                f"{out['serving_first_token_p95_8_one_at_a_time_s']:.1f} "
                f"= {out['serving_first_token_p95_8_over_one_at_a_time']:.2f}",
            ),
        ]
    if "serving_ours_plain_writing_gain_4" in out:
        rows.append(
            row(
                "  without proposals from the text: writing tok/s with 1 / 4 clients",
                f"{out['serving_ours_plain_writing_tok_per_s_1']:.1f} / "
                f"{out['serving_ours_plain_writing_tok_per_s_4']:.1f} = {out['serving_ours_plain_writing_gain_4']:.2f}",
            )
        )
    if "window_first_token_beside_3_over_idle" in out:
        rows.append(
            row(
                "  the window's first token beside 3 streaming clients / idle (goal ≤ 2)",
                f"{out['window_first_token_beside_3_clients_s']:.2f} s / {out['window_first_token_idle_s']:.2f} s "
                f"= {out['window_first_token_beside_3_over_idle']:.2f}",
            )
        )
    if "serving_llama_cpp_tok_per_s_1" in out:
        rows += [
            row(
                "  llama.cpp's server -np 4: tok/s with 1 / 4 clients",
                f"{out['serving_llama_cpp_tok_per_s_1']:.1f} / {out['serving_llama_cpp_tok_per_s_4']:.1f}",
            ),
            row(
                "  llama.cpp's server: writing tok/s with 1 / 4 clients",
                f"{out['serving_llama_cpp_writing_tok_per_s_1']:.1f} / "
                f"{out['serving_llama_cpp_writing_tok_per_s_4']:.1f}",
            ),
            row(
                "  llama.cpp's server: p95 first token of 8 clients, s",
                f"{out['serving_llama_cpp_first_token_p95_8_s']:.1f}",
            ),
        ]
    if "speculative_same_replies" in out:
        rows += [
            row(
                "proposals from the reply's text, with ÷ without: worst copying task",
                f"{out['speculative_copying_worst_ratio']:.2f}",
            ),
            row("  worst free-writing task (goal ≥ 0.97)", f"{out['speculative_free_worst_ratio']:.2f}"),
            row(
                "  in the window's own context: worst copying / worst free-writing task",
                f"{out['speculative_window_copying_worst_ratio']:.2f} / "
                f"{out['speculative_window_free_worst_ratio']:.2f}",
            ),
            row(
                "  always right (the ceiling here) / always wrong (goal ≥ 0.95)",
                f"{out['speculative_ceiling_ratio']:.2f} / {out['speculative_never_right_ratio']:.2f}",
            ),
            *(
                row(f"  a draft model, {label}: with ÷ without", f"{out[key]:.2f}")
                for key, label in (
                    ("speculative_draft_same_model_ratio", "the same model (it always agrees)"),
                    ("speculative_draft_smaller_model_ratio", "the embedded SmolLM2-135M"),
                )
                if key in out
            ),
            row(
                "  the replies token for token as without (else: tokens shared, worst)",
                "yes" if out["speculative_same_replies"] else f"no ({out['speculative_text_shared_tokens_worst']})",
            ),
        ]
    if "speculative_mtp_same_replies" in out:
        rows += [
            row(
                "proposals from the model's MTP head, in the window: worst task / a head that always agrees",
                f"{out['speculative_mtp_worst_ratio']:.2f} / {out['speculative_mtp_ceiling_ratio']:.2f}",
            ),
            row(
                "  a proposal's cost on the head, in plain tokens; accepted of proposed",
                f"{out['speculative_mtp_proposal_cost']:.2f}; {out['speculative_mtp_accepted_of_proposed']}",
            ),
            row(
                "  the replies token for token as without (else: tokens shared, worst)",
                "yes" if out["speculative_mtp_same_replies"] else f"no ({out['speculative_mtp_shared_tokens_worst']})",
            ),
        ]
    rows += kernel_rows(out, row)
    rows += retrieval_rows(out.get("retrieval"))
    rows += vision_rows(out)
    return "\n".join(rows)


def vision_rows(out: dict[str, Any]) -> list[str]:
    """The vision section's lines: per projector, encoding vs forecast, reuse, resume and memory; hostile files."""
    if "vision" in out:
        return [row("pictures", out["vision"]["skipped"])]
    if "vision_encode_s" not in out:
        return []
    rows = [row("pictures (per projector)", "encode s (forecast)  2nd-turn encodes  resume ratio  estimate/RSS")]
    for name, v in out["vision_encode_s"].items():
        rows.append(
            row(
                f"  {name[:40]} ({v['picture_tokens']} tokens)",
                f"{v['encode_s']:.2f} ({v['forecast_s']:.2f})  {v['second_turn_encodes']}  "
                f"{v['resume_restore_ratio']:.3f}  {v['estimate_over_rss'] or 0:.3f}",
            )
        )
    for name, h in out["vision_hostile"].items():
        rows.append(row(f"  hostile: {name}", f"{h['outcome'][:60]} in {h['seconds']:.2f} s"))
    return rows


def retrieval_rows(figures: dict[str, Any] | None) -> list[str]:
    """The retrieval section's lines: quality per set and method, the fusion chosen, the embedder's speed."""
    if not figures or "quality" not in figures:
        return [row("document search", figures["skipped"])] if figures and "skipped" in figures else []
    rows = [row("document search (recall@5 / MRR@10)", "lexical       semantic      fused")]
    for name, quality in figures["quality"].items():
        for group in ("all", "direct", "paraphrased"):
            if group in quality:
                cells = "   ".join(
                    f"{quality[group][m]['recall_at_5']:.2f} / {quality[group][m]['mrr']:.2f}"
                    for m in ("lexical", "semantic", "fused")
                )
                rows.append(row(f"  {name}, {group} ({quality[group]['questions']} questions)", cells))
    best, speed, corpus = figures["fusion_best"], figures["throughput"]["passages_per_s"], figures["stdlib_corpus"]
    rows += [
        row(
            "best fusion on both sets: k, semantic weight (MRR)",
            f"{best['k']}, {best['semantic_weight']} ({best['mrr']:.3f})",
        ),
        row(
            "embedding passages/s: 1 thread / 2 threads / 2 without flash attention",
            f"{speed['threads_1']:.1f} / {speed['threads_2']:.1f} / {speed['threads_2_no_flash_attention']:.1f}",
        ),
        row(
            "query embedding ms: alone / during background indexing (p95)",
            f"{figures['query_ms_alone']:.1f} / {corpus['query_embed_ms_during_indexing'] or 0:.1f} "
            f"({corpus['query_embed_ms_during_indexing_p95'] or 0:.1f})",
        ),
        row(
            f"{corpus['corpus_mb']:.0f} MB made searchable: words / vectors (passages/s)",
            f"{corpus['text_index_s']:.0f} s / {corpus['passages'] / corpus['passages_per_s']:.0f} s "
            f"({corpus['passages_per_s']:.1f})",
        ),
    ]
    return rows
