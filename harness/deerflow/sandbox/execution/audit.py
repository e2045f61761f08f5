"""Static audit of shell commands before they run.

:func:`audit_command` classifies a command line as ``block`` (never run; the
model gets the reason), ``warn`` (run, but the UI is told why it looks
risky) or ``pass``.  It is a pattern screen for well-known abuse — reverse
shells, credential scraping from ``/proc/*/environ``, ``LD_PRELOAD``
injection, persistence through shell rc files, fork bombs, piping downloads
or decoded payloads into a shell — and for destructive habits worth a human
glance.  It is defence in depth, *not* the boundary: an obfuscated command
can always slip through, which is why the sandbox provider, not this
module, decides what a command can touch.

Rules are data (:data:`BLOCK_RULES`, :data:`WARN_RULES`), checked against the
command with whitespace normalised; ``rm -rf`` targets are checked by
tokenising, since a regex cannot tell a workspace path from ``/``.

The command is the model's, so every check is linear in its length: the
rules compile on RE2 (:mod:`deerflow.text.safe_regex`), the fork-bomb rule
that needed a backreference is a pattern plus a name comparison, only the
``rm`` invocations are tokenised, and a command over :data:`MAX_COMMAND_CHARS`
is refused outright (``bash -c`` could not take it anyway: Linux caps one
argument at 128 KiB).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from deerflow.text.safe_regex import Regex, compile_rule

AuditLevel = Literal["block", "warn", "pass"]

MAX_COMMAND_CHARS = 100_000
"""Longest command audited (and so run); longer scripts go in a file."""

_RC_FILES = (
    r"(?:\.bashrc|\.bash_profile|\.bash_login|\.bash_logout|\.profile|\.zshrc|\.zshenv|"
    r"\.zprofile|\.zlogin|\.cshrc|\.tcshrc|\.kshrc|/etc/profile(?:\.d/\S*)?|/etc/bash\.bashrc|"
    r"/etc/zsh/\S+|/etc/environment)"
)
_SHELL = r"(?:sudo\s+)?(?:/\S*/)?(?:ba|z|da|k|c|tc|fi)?sh\b"


@dataclass(frozen=True)
class AuditRule:
    """One pattern and the reason reported when it matches."""

    pattern: Regex
    reason: str


def _rule(pattern: str, reason: str) -> AuditRule:
    return AuditRule(compile_rule(pattern, ignore_case=True), reason)


BLOCK_RULES: tuple[AuditRule, ...] = (
    _rule(
        r"/dev/(?:tcp|udp)/",
        "opens a raw network connection through /dev/tcp (reverse shell pattern)",
    ),
    _rule(
        r"\b(?:nc|ncat|netcat)\b[^;&|]*\s-[a-z]*[ec]\b",
        "netcat with -e/-c hands a shell to a remote host",
    ),
    _rule(
        r"\bmkfifo\b.*\b(?:nc|ncat|netcat|telnet|openssl\s+s_client)\b",
        "named pipe wired to a network client (reverse shell pattern)",
    ),
    _rule(r"\bsocat\b.*\b(?:exec|system):", "socat EXEC/SYSTEM exposes a process over the network"),
    _rule(
        r"\b(?:python[0-9.]*|perl|ruby|php|node)\b.*\bsocket\b.*(?:\bpty\b|dup2|subprocess|/bin/(?:ba)?sh|\bexec\b|\bspawn\b)",
        "scripting one-liner combining a socket with a shell (reverse shell pattern)",
    ),
    _rule(r"/proc/[^/\s]+/environ\b", "reads a process environment (where credentials live)"),
    _rule(
        r"\bLD_PRELOAD\s*=|\bexport\s+LD_PRELOAD\b|/etc/ld\.so\.preload",
        "LD_PRELOAD injection of a shared library",
    ),
    _rule(
        rf"(?:>>?|\btee\b(?:\s+-\S+)*)\s*[\"']?[^\s;&|]*{_RC_FILES}",
        "writes a shell startup file (persistence)",
    ),
    _rule(
        rf"\b(?:cp|mv|ln|install|sed\s+-i\S*|dd)\b[^;&|]*{_RC_FILES}",
        "modifies a shell startup file (persistence)",
    ),
    _rule(r"\bwhile\b[^;]*\b(?:true|1)\b.*\bfork\s*\(", "unbounded fork loop"),
    _rule(
        rf"\b(?:curl|wget|fetch)\b[^|;&]*\|\s*{_SHELL}", "pipes a download straight into a shell"
    ),
    _rule(
        r"\b(?:curl|wget)\b[^|;&]*\|\s*(?:sudo\s+)?(?:python[0-9.]*|perl|ruby|node)\b",
        "pipes a download straight into an interpreter",
    ),
    _rule(
        rf"{_SHELL}\s+(?:-c\s+)?[\"']?\s*[<$]\(\s*(?:curl|wget)\b",
        "runs a downloaded script in a shell",
    ),
    _rule(
        rf"\bbase64\s+(?:-d|--decode)\b[^;&]*\|\s*{_SHELL}", "pipes a decoded payload into a shell"
    ),
)

WARN_RULES: tuple[AuditRule, ...] = (
    _rule(r"(?:^|[;&|]\s*|\s)sudo\b", "uses sudo"),
    _rule(r"(?:^|[;&|]\s*)su(?:\s|$)", "switches user with su"),
    _rule(r"\bchmod\b[^;&|]*(?:\b0?777\b|a\+rwx|o\+w)", "makes files world-writable (chmod 777)"),
    _rule(r"\bmkfs(?:\.\w+)?\b|\bdd\b[^;&|]*\bof=/dev/", "writes a raw device"),
    _rule(
        r"\bcrontab\b|\bsystemctl\s+(?:enable|start)\b",
        "schedules or installs a service (persistence)",
    ),
    _rule(
        r"\b(?:shutdown|reboot|halt|poweroff)\b|\bkill\s+-9\s+-1\b",
        "stops the machine or every process",
    ),
)

_SAFE_RM_PREFIXES = ("/mnt/user-data/workspace/",)
_RISKY_RM_TARGETS = ("/", "/*", "~", "~/", "$HOME", "${HOME}", "*", ".", "..", "./", "../")


@dataclass(frozen=True)
class AuditVerdict:
    """The audit's decision on one command.

    Attributes:
        level: ``block`` (refused), ``warn`` (runs, flagged) or ``pass``.
        reasons: Human-readable reasons, one per matched rule.
    """

    level: AuditLevel
    reasons: tuple[str, ...] = ()

    @property
    def blocked(self) -> bool:
        return self.level == "block"


_FUNCTION_CALLED_AFTER = compile_rule(r"(\w+|:)\s*\(\s*\)\s*\{([^}]*)\}\s*;?\s*(\w+|:)")
_RM_WORD = compile_rule(r"(?:^|[\s;&|()])(?:/usr)?(?:/bin/)?rm(?:\s|$)")


def _is_fork_bomb(command: str) -> bool:
    """``f(){ f|f& }; f``: a function piping itself into itself in the background, then called.

    The old single regex needed a backreference (``\\1``) and backtracked
    super-linearly; here RE2 finds each definition-then-call and Python
    compares the names.
    """
    for match in _FUNCTION_CALLED_AFTER.finditer(command):
        name, body, called = match.group(1), match.group(2), match.group(3)
        if name == called and f"{name}|{name}&" in "".join(body.split()):
            return True
    return False


def _rm_segments(command: str) -> list[list[str]]:
    """Token lists of every ``rm`` invocation in ``command``.

    ``shlex`` is pure Python, so it only runs when an ``rm`` is present.
    """
    if not _RM_WORD.search(command):
        return []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to a plain split
        tokens = command.split()
    segments: list[list[str]] = []
    current: list[str] | None = None
    for token in tokens:
        if set(token) <= set(";&|()"):
            current = None
        elif current is not None:
            current.append(token)
        elif token in ("rm", "/bin/rm", "/usr/bin/rm"):
            current = []
            segments.append(current)
    return segments


def _rm_verdict(args: list[str]) -> AuditVerdict:
    """Classify one ``rm``: recursive+force outside the workspace is suspicious."""
    flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    long_flags = {a for a in args if a.startswith("--")}
    recursive = "r" in flags.lower() or "--recursive" in long_flags
    force = "f" in flags or "--force" in long_flags
    targets = [a for a in args if not a.startswith("-")]
    if not (recursive and force):
        return AuditVerdict("pass")
    if any(t.rstrip("/") in ("", "/*") for t in targets):
        return AuditVerdict("block", ("rm -rf of the filesystem root",))
    outside = [
        t for t in targets
        if t in _RISKY_RM_TARGETS
        or (t.startswith(("/", "~", "$")) and not t.startswith(_SAFE_RM_PREFIXES))
        or ".." in t.split("/")
    ]  # fmt: skip
    if outside:
        return AuditVerdict("warn", (f"rm -rf outside the workspace: {' '.join(outside)}",))
    return AuditVerdict("pass")


def audit_command(command: str) -> AuditVerdict:
    """Classify a shell command before it runs.

    Args:
        command: The command line exactly as the model wrote it.

    Returns:
        ``block`` with every blocking reason if any block rule matches, else
        ``warn`` with every warning reason, else ``pass``.
    """
    if len(command) > MAX_COMMAND_CHARS:
        return AuditVerdict("block", (
            f"the command is {len(command):,} characters long (the limit is {MAX_COMMAND_CHARS:,}); "
            "write a long script to a file with write_file and run that file",
        ))
    normalised = " ".join(command.split())
    blocks = [r.reason for r in BLOCK_RULES if r.pattern.search(normalised)]
    if _is_fork_bomb(normalised):
        blocks.append("fork bomb")
    warns = [r.reason for r in WARN_RULES if r.pattern.search(normalised)]
    for segment in _rm_segments(command):
        verdict = _rm_verdict(segment)
        (blocks if verdict.blocked else warns).extend(verdict.reasons)
    if blocks:
        return AuditVerdict("block", tuple(dict.fromkeys(blocks)))
    if warns:
        return AuditVerdict("warn", tuple(dict.fromkeys(warns)))
    return AuditVerdict("pass")
