"""``bench --section kernels``: each kernel path that is correct here, prompt and reply speed on the model, one
child process per path and sample, interleaved over rounds, medians; the path the app chooses from them, against
the fastest and against llama.cpp's default as it runs here (where the default itself fails the check — AMX on some
Xeons — its nearest correct form: the same kernels with AMX refused)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fara_desktop.machine.kernel_check import TURN_PROMPT_TOKENS, TURN_REPLY_TOKENS, measure_paths
from fara_desktop.machine.kernel_paths import DEFAULT, NO_AMX
from fara_desktop.machine.kernels import choice_with, ensure_kernel_path, known_verdicts, usable_paths


def kernel_speeds(model: Path, threads: int, rounds: int, prompt_tokens: int, reply_tokens: int) -> dict[str, Any]:
    ensure_kernel_path(None, threads)  # the check, as the app makes it (kept per build and CPU)
    verdicts = {key: verdict.as_json() for key, verdict in known_verdicts().items()}
    paths = usable_paths()
    if len(paths) < 2:
        return {"kernels": {"verdicts": verdicts, "skipped": "one usable kernel path here: nothing to choose"}}
    measurement = measure_paths(paths, model, threads, rounds, prompt_tokens=prompt_tokens, reply_tokens=reply_tokens)
    speeds = measurement.speeds
    choice = choice_with(speeds)
    if choice is None or choice.path.key not in speeds:
        return {"kernels": {"verdicts": verdicts, "skipped": "the paths could not be measured"}}
    chosen = speeds[choice.path.key]
    fastest = min(speeds.values(), key=lambda s: s.turn_seconds)
    reference_key = DEFAULT.key if DEFAULT.key in speeds else NO_AMX.key if NO_AMX.key in speeds else ""
    out: dict[str, Any] = {
        "kernels": {
            "verdicts": verdicts,
            "tok_per_s": {
                k: {"prompt": round(v.prompt, 2), "reply": round(v.reply, 2), "turn_s": round(v.turn_seconds, 2)}
                for k, v in speeds.items()
            },
            "chosen": choice.path.key,
            "reason": choice.reason,
            "reference": reference_key,
            "rounds": rounds,
            "prompt_tokens": prompt_tokens,
            "reply_tokens": reply_tokens,
            "busy": measurement.busy,
            "samples_taken_again": measurement.samples_discarded,
        },
        "kernel_chosen_over_fastest": fastest.turn_seconds / chosen.turn_seconds,
    }
    if reference_key:
        reference = speeds[reference_key]
        out["kernel_chosen_over_default_prompt"] = chosen.prompt / reference.prompt
        out["kernel_chosen_over_default_reply"] = chosen.reply / reference.reply
    return out


def kernel_rows(out: dict[str, Any], row: Any) -> list[str]:
    """The section's lines in the printed table."""
    kernels = out.get("kernels")
    if not isinstance(kernels, dict):
        return []
    rows = [
        row(f"kernel path {key}", ("correct" if v["usable"] else f"unusable: {v['reason']}"))
        for key, v in kernels.get("verdicts", {}).items()
    ]
    if "skipped" in kernels:
        return [*rows, row("kernel speeds", kernels["skipped"])]
    for key, figures in kernels["tok_per_s"].items():
        rows.append(
            row(
                f"kernel path {key}: prompt / reply tok/s ({TURN_PROMPT_TOKENS}+{TURN_REPLY_TOKENS}-token turn)",
                f"{figures['prompt']:.1f} / {figures['reply']:.1f} ({figures['turn_s']:.1f} s)",
            )
        )
    rows.append(
        row(
            "kernel path chosen, its turn / the fastest's",
            f"{kernels['chosen']}, {out['kernel_chosen_over_fastest']:.3f}",
        )
    )
    if "kernel_chosen_over_default_prompt" in out:
        rows.append(
            row(
                f"kernel path chosen / llama.cpp's default ({kernels['reference']}), prompt and reply",
                f"{out['kernel_chosen_over_default_prompt']:.2f} / {out['kernel_chosen_over_default_reply']:.2f}",
            )
        )
    return rows
