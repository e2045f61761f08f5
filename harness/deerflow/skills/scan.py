"""SkillScan: a deterministic review of a skill package before it becomes active.

Run by the installer on every package (archive, directory, or a skill the
agent wrote), after extraction and before the package is moved into place.
It reads every file once and applies fixed rules; nothing is executed and no
model is asked, so the same package always gets the same verdict.

Findings are ``critical`` (the install is refused) or ``warning`` (installed,
and the user is shown the finding).  Rules:

==================  ========  ==================================================
rule                severity  what it looks for
==================  ========  ==================================================
symlink             critical  any symbolic link in the package
special_file        critical  FIFOs, sockets, devices
too_deep            critical  folders nested deeper than the walk goes (``MAX_WALK_DEPTH``)
unreadable          critical  the package, or a file of it, cannot be read
nested_skill        critical  a ``SKILL.md`` below the package root
executable          critical  ELF, PE, Mach-O 32/64 (both byte orders), fat Mach-O
                              (32/64, and Java class), WebAssembly
pipe_to_shell       critical  ``curl``/``wget`` piped or substituted into a shell
reverse_shell       critical  ``/dev/tcp``, ``nc -e``, ``socat exec:``, pty/dup2 shells
cloud_metadata      critical  169.254.169.254, metadata.google.internal & co.
fork_bomb           critical  ``:(){ :|:& };:`` and ``while True: os.fork()``
secret              critical  private keys and well-known token formats
credential_access   critical  reading ``~/.ssh``, ``~/.aws/credentials``, ``/etc/shadow``
destructive         critical  ``rm`` recursive on ``/`` or the home directory (any
                              spelling of the options), or ``--no-preserve-root``
obfuscated_exec     critical  eval/exec of decoded, decompressed or downloaded data
dynamic_exec        warning   eval/exec/compile of strings, ``__import__``
possible_secret     warning   ``api_key = "..."``-style literals
path_traversal      warning   ``../../`` in a file's text
==================  ========  ==================================================

Every rule runs in linear time on the package's content (hostile input):
patterns use RE2 (no backtracking), and ``rm`` is read by a small tokenizer
(:mod:`deerflow.skills.shell_rules`) rather than a pattern.

This is defence in depth, not a security boundary: a determined author can
phrase anything in a way no pattern matches.  The sandbox that runs the
skill's code is the boundary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import re2

from deerflow.skills.manifest import MANIFEST
from deerflow.skills.shell_rules import destructive_rm
from deerflow.threadfs import MAX_WALK_DEPTH, SafeDir, UnsafePath

Severity = Literal["critical", "warning"]


@dataclass(frozen=True)
class Finding:
    """One reason for concern, located in the package (``line`` 0: the whole file)."""

    rule: str
    severity: Severity
    path: str
    line: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "path": self.path,
                "line": self.line, "message": self.message}

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"[{self.severity}] {self.rule} at {where}: {self.message}"


@dataclass(frozen=True)
class ScanReport:
    """The verdict on a package."""

    findings: tuple[Finding, ...] = ()
    files_scanned: int = 0

    @property
    def blocked(self) -> bool:
        return any(f.severity == "critical" for f in self.findings)

    @property
    def critical(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "critical"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def to_dict(self) -> dict[str, Any]:
        return {"blocked": self.blocked, "files_scanned": self.files_scanned,
                "findings": [f.to_dict() for f in self.findings]}

    def summary(self) -> str:
        """One line per finding, most severe first."""
        ordered = self.critical + self.warnings
        return "\n".join(str(f) for f in ordered) if ordered else "no findings"


@dataclass(frozen=True)
class _Rule:
    """A pattern (RE2: linear time, no backtracking) and its prefilter over the whole text.

    ``anywhere`` is the same pattern in multi-line mode: if it finds nothing in
    the file, no line can match and the per-line pass is skipped.
    """

    rule: str
    severity: Severity
    pattern: Any
    anywhere: Any
    message: str
    same_groups: bool = False


def _r(rule: str, severity: Severity, pattern: str, message: str, *, ignore_case: bool = True,
       same_groups: bool = False) -> _Rule:
    flags = "(?i)" if ignore_case else ""
    return _Rule(rule, severity, re2.compile(flags + pattern), re2.compile(f"(?m{flags[2:-1]})" + pattern),
                 message, same_groups)


_SHELL = r"(?:sudo\s+)?(?:env\s+)?(?:ba|z|k|da|fi|tc)?sh\b"
_STDIN_INTERPRETER = r"(?:sudo\s+)?(?:python[0-9.]*|perl|ruby|node)\s*-?\s*(?:$|[;&)])"
_NOT_AFTER_NAME = r"(?:^|[^\w.])"
_LINE_RULES: tuple[_Rule, ...] = (
    _r("pipe_to_shell", "critical", rf"\b(?:curl|wget)\b[^\n|]*\|\s*(?:{_SHELL}|{_STDIN_INTERPRETER})",
       "downloads code and pipes it straight into an interpreter"),
    _r("pipe_to_shell", "critical", r"(?:ba|z)?sh\s+(?:-c\s+)?[\"']?(?:<\(|\$\()\s*(?:curl|wget)\b",
       "runs a downloaded script through a shell"),
    _r("reverse_shell", "critical", r"/dev/(?:tcp|udp)/", "opens a raw network socket from a shell"),
    _r("reverse_shell", "critical", r"\bn(?:c|cat|etcat)\b[^\n]*\s-[a-z]*[ec]\s", "netcat with -e/-c (a remote shell)"),
    _r("reverse_shell", "critical", r"\bsocat\b[^\n]*\b(?:exec|system):", "socat connecting a process to a socket"),
    _r("reverse_shell", "critical", r"\bpty\.spawn\s*\(", "spawns an interactive pty (a remote shell pattern)"),
    _r("reverse_shell", "critical", r"os\.dup2\s*\([^)]*fileno\s*\(", "redirects a socket onto stdin/stdout"),
    _r("reverse_shell", "critical", r"\bmkfifo\b[^\n]*\bn(?:c|cat)\b", "a FIFO wired to netcat (a remote shell)"),
    _r("reverse_shell", "critical", r"Net\.Sockets\.TCPClient", "a PowerShell TCP client shell"),
    _r("cloud_metadata", "critical",
       r"169\.254\.169\.254|169\.254\.170\.2|metadata\.google\.internal|100\.100\.100\.200"
       r"|fd00:ec2::254|metadata\.azure\.com",
       "reaches a cloud metadata service (instance credentials)"),
    # RE2 has no backreferences: the four names are captured and compared in code.
    _r("fork_bomb", "critical", r"(\w+|:)\s*\(\)\s*\{\s*(\w+|:)\s*\|\s*(\w+|:)\s*&\s*\}\s*;\s*(\w+|:)",
       "a shell fork bomb", same_groups=True),
    _r("fork_bomb", "critical", r"\bfork\s+while\s+fork\b", "a Perl fork bomb"),
    _r("secret", "critical", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----", "contains a private key", ignore_case=False),
    _r("secret", "critical", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "contains an AWS access key id", ignore_case=False),
    _r("secret", "critical", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", "contains a GitHub token", ignore_case=False),
    _r("secret", "critical", r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}\b", "contains an API secret key",
       ignore_case=False),
    _r("secret", "critical", r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "contains a Slack token", ignore_case=False),
    _r("secret", "critical", r"\bAIza[0-9A-Za-z_-]{35}\b", "contains a Google API key", ignore_case=False),
    _r("credential_access", "critical",
       r"~/\.ssh/|\$HOME/\.ssh/|\.aws/credentials|/etc/shadow|\.config/gcloud/|\.kube/config",
       "reads credentials of the machine it runs on"),
    _r("obfuscated_exec", "critical",
       _NOT_AFTER_NAME + r"(?:eval|exec)\s*\([^\n]*(?:b64decode|a85decode|decompress|fromhex|urlopen|requests\.get"
       r"|codecs\.decode|\.decode\(\s*[\"']rot)",
       "executes decoded, decompressed or downloaded code"),
    _r("dynamic_exec", "warning", _NOT_AFTER_NAME + r"(?:eval|exec)\s*\(\s*[^)\s]",
       "runs code built from a string (eval/exec)", ignore_case=False),
    _r("dynamic_exec", "warning", _NOT_AFTER_NAME + r"compile\s*\([^\n]*[\"'](?:exec|eval|single)[\"']",
       "compiles a string into code", ignore_case=False),
    _r("dynamic_exec", "warning", r"\b__import__\s*\(", "imports a module by a computed name", ignore_case=False),
    _r("possible_secret", "warning",
       r"\b(?:api[_-]?key|secret|token|passw(?:or)?d)\b\s*[:=]\s*[\"'][^\"'\s$]{16,}[\"']",
       "a credential-like literal; use required-secrets and the environment instead"),
    _r("path_traversal", "warning", r"\.\./\.\./", "climbs out of its directory with ../../"),
)
_TEXT_RULES: tuple[_Rule, ...] = (
    _r("fork_bomb", "critical", r"while\s+(?:True|1)\s*:\s*\n?\s*os\.fork\s*\(\)", "a Python fork bomb",
       ignore_case=False),
)
_MACHO = frozenset({
    b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe",  # Mach-O 32-bit, big- and little-endian
    b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe",  # Mach-O 64-bit, big- and little-endian
    b"\xca\xfe\xba\xbe", b"\xbe\xba\xfe\xca",  # fat (universal) binary, or a Java class
    b"\xca\xfe\xba\xbf", b"\xbf\xba\xfe\xca",  # fat binary with 64-bit offsets
})
TEXT_PROBE = 8192
_SHOWN_PATH = 200


def executable_kind(head: bytes) -> str | None:
    """The executable format ``head`` (a file's first bytes) starts with, if any.

    Scripts with a ``#!`` line are text: they are read by the text rules, not refused.
    """
    if head.startswith(b"\x7fELF"):
        return "an ELF executable"
    if head[:4] in _MACHO:
        return "a Mach-O (or Java class) binary"
    if head.startswith(b"\x00asm"):
        return "a WebAssembly module"
    if head.startswith(b"MZ") and len(head) >= 64:
        offset = int.from_bytes(head[60:64], "little")
        if head[offset:offset + 4] == b"PE\x00\x00" or offset >= len(head):
            return "a Windows PE executable"
    return None


def scan_text(path: str, text: str) -> list[Finding]:
    """The content findings for one text file (linear time in its size)."""
    findings: list[Finding] = []
    lines: list[str] | None = None
    for rule in _LINE_RULES:
        if rule.anywhere.search(text) is None:
            continue  # the common case: one linear pass over the file, no per-line work
        lines = text.splitlines() if lines is None else lines
        for number, line in enumerate(lines, start=1):
            if _matches(rule, line):
                findings.append(Finding(rule.rule, rule.severity, path, number, rule.message))
    for number, message in destructive_rm(text):
        findings.append(Finding("destructive", "critical", path, number, message))
    for rule in _TEXT_RULES:
        for match in rule.pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            findings.append(Finding(rule.rule, rule.severity, path, line, rule.message))
    return _dedupe(sorted(findings, key=lambda f: f.line))


def _matches(rule: _Rule, line: str) -> bool:
    if not rule.same_groups:
        return rule.pattern.search(line) is not None
    return any(len(set(m.groups())) == 1 for m in rule.pattern.finditer(line))


def scan_file(path: str, data: bytes) -> list[Finding]:
    """Findings for one file's bytes: executable formats, then text rules."""
    kind = executable_kind(data[:4096])
    if kind:
        return [Finding("executable", "critical", path, 0, f"is {kind}")]
    if b"\x00" in data[:TEXT_PROBE]:
        return []  # other binary data (images, archives of data): nothing to read
    return scan_text(path, data.decode("utf-8", errors="replace"))


def scan_package(root: Path) -> ScanReport:
    """Scan every entry below ``root`` (links are reported, never followed).

    The walk goes through :class:`~deerflow.threadfs.SafeDir`: iterative, nothing followed, each
    file read through the one descriptor its check opened, and no deeper than
    :data:`~deerflow.threadfs.MAX_WALK_DEPTH` levels.  A package nested deeper (its author decides
    how deep) is refused with a ``too_deep`` finding instead of crashing the scan with a path
    past ``PATH_MAX`` or leaving its depths unread.
    """
    findings: list[Finding] = []
    too_deep: list[str] = []
    files = 0
    try:
        top = SafeDir.open(root)
    except UnsafePath as exc:
        return ScanReport((Finding("unreadable", "critical", ".", 0, f"the package folder cannot be read: {exc}"),))
    with top:
        for rel, info in top.walk(on_too_deep=too_deep.append):
            if info.kind == "file":
                files += 1
                findings.extend(_scan_entry(top, rel, info.name))
            elif info.kind != "dir":
                findings.append(_structure_finding(info.kind, rel))
    if too_deep:
        shown = too_deep[0] if len(too_deep[0]) <= _SHOWN_PATH else too_deep[0][:_SHOWN_PATH] + "..."
        findings.append(Finding("too_deep", "critical", shown, 0,
                                f"folders nest more than {MAX_WALK_DEPTH} levels deep; not scanned below"))
    return ScanReport(tuple(findings), files)


def _scan_entry(top: SafeDir, rel: str, name: str) -> list[Finding]:
    """The findings for regular file ``rel``, read through the descriptor that checked it."""
    findings = []
    if name.upper() == MANIFEST.upper() and "/" in rel:
        findings.append(Finding("nested_skill", "critical", rel, 0,
                                "a SKILL.md below the package root (one package, one skill)"))
    try:  # a package tree is not a thread's: a hard link here cannot reach out, only be read
        with os.fdopen(top.open_file(rel, hard_links_ok=True), "rb") as handle:
            data = handle.read()
    except UnsafePath as exc:  # replaced since it was listed: judge what is there now
        if exc.code == "not_found":
            return findings
        kind = {"symlink": "symlink", "not_regular": "other"}.get(exc.code)
        return [*findings, _structure_finding(kind, rel) if kind else
                Finding("unreadable", "critical", rel, 0, f"cannot be read: {exc}")]
    return findings + scan_file(rel, data)


def _structure_finding(kind: str, rel: str) -> Finding:
    if kind == "symlink":
        return Finding("symlink", "critical", rel, 0, "is a symbolic link; packages hold files only")
    return Finding("special_file", "critical", rel, 0, "is not a regular file")


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str, int]] = set()
    out = []
    for f in findings:
        key = (f.rule, f.path, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
