"""How the CLI's help reads in an 80-column terminal: a command's examples right under its summary, kept
as written (click would rewrap them into one paragraph), and each option's value named by what to give
(`--shape MxN`, `--out DIR`) instead of typer's type placeholders (`<str>`, `<list[str]>`)."""

from __future__ import annotations

from typing import Any

# parameter name -> what its value is; any other parameter taking a value shows its name in capitals
METAVARS = {
    "baseline": "RUN", "run": "RUN", "path": "RUN", "a": "RUN_A", "b": "RUN_B", "rerun": "RUN",
    "budget": "SECONDS", "cache_control": "all|none", "clock_control": "none|base", "roofs_file": "FILE",
    "chip": "CHIP", "distinct": "K", "dtype": "DTYPE", "expect": "FILE", "gpus": "all|0,1,..",
    "group_by": "GROUP", "kernel": "REGEX", "kernel_name": "REGEX", "launch_count": "N",
    "launch_skip": "N", "level": "LEVELS", "metrics": "SETS", "min_bytes": "RULE", "nvtx_include": "RANGE",
    "out": "PATH", "param": "KEY=V1,V2", "png": "FILE", "profile_from_start": "on|off", "set": "SET",
    "shape": "MxN", "shard": "I/N", "sweep": "FILE", "target_processes": "WHICH",
    "time_tolerance": "FRACTION", "top": "N", "fmt": "FORMAT", "variant_files": "FILE",
    "variants": "VARIANT", "command": "ARGS",
}
# command -> how its usage line starts: the program to run follows `--`
OPTIONS_METAVAR = {"profile": "[OPTIONS] -- CMD [ARGS]...", "ops": "[OPTIONS] -- CMD"}


def examples_first(doc: str) -> str:
    """A command's help text with its 'Examples:' block moved right under the first paragraph and marked
    (click's '\\b') so that its lines stay as written. Applying it twice changes nothing."""
    paragraphs = doc.strip().split("\n\n")
    examples = [p.lstrip("\b\n") for p in paragraphs if p.lstrip("\b\n ").startswith("Examples:")]
    rest = [p for p in paragraphs if not p.lstrip("\b\n ").startswith("Examples:")]
    return "\n\n".join(rest[:1] + ["\b\n" + p for p in examples] + rest[1:])


def tidy(group: Any) -> None:
    """Apply the module's rules to every command of the click group (each parameter once)."""
    for name, command in group.commands.items():
        if command.help:
            command.help = examples_first(command.help)
        command.options_metavar = OPTIONS_METAVAR.get(name, command.options_metavar)
        for param in command.params:
            if param.metavar is None and not getattr(param, "is_flag", False) and param.name:
                param.metavar = METAVARS.get(param.name, param.name.upper())
            if param.param_type_name == "argument":  # its name says what it is: no '<path>' beside it
                param.display_type_rich = lambda ctx: None
                if param.required and param.metavar is not None:  # 'RUN' as click writes it, not '{RUN}'
                    shown = param.metavar + ("..." if param.nargs != 1 else "")
                    param.get_usage_pieces = lambda ctx, shown=shown: [shown]
