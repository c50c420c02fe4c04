"""The one redactor: secrets never leave debug-stuck, and nothing harmless is blanked.

Reports, snapshots, watch events, the journal and everything copied or printed pass through here.
What counts as a secret:
- the value of an option or variable whose *name* says secret, read word by word (``--hf_token``,
  ``--api-key``, ``WANDB_API_KEY``, ``DB_PASSWORD``, ``--client_secret``), so that look-alikes stay
  (``TOKENIZERS_PARALLELISM``, ``--tokenizer_name``, ``--max_new_tokens``, ``--session_dir``,
  ``--token_budget``, ``--password_file``);
- the password in a URL's userinfo (``https://user:pass@host`` keeps ``user``);
- values shaped like known credentials wherever they appear (``hf_...``, ``ghp_...``, ``sk-...``,
  ``AKIA...``, ``xox.-...``, ``glpat-...``, JWTs, ``Bearer ...``).
A value that is a reference or a placeholder (``$HF_TOKEN``, ``${TOKEN}``, ``<token>``) is kept:
blanking it would break a printed command and hide nothing.
"""

from __future__ import annotations

import functools
import re
import shlex
from typing import Any, Dict, Iterable, List, Optional

REDACTED = "<redacted>"

# A name is secret when its last word says so (HF_TOKEN, --password, --client_secret), or its last
# two words do (WANDB_API_KEY, AWS_SECRET_ACCESS_KEY). Earlier words only qualify: --token_budget,
# TOKEN_FILE or --password_file name a count or a path, not a secret.
SECRET_WORDS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "pass",
        "pat",
        "secret",
        "credential",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "authtoken",
        "cookie",
    }
)
SECRET_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("auth", "key"), ("signing", "key")}
)

TOKEN_SHAPES = re.compile(
    r"\b("
    r"hf_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{8,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")"
)
BEARER = re.compile(r"(?i)\b(bearer|token)\s+([A-Za-z0-9._~+/=-]{16,})")
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s:@]+):([^/\s@]+)@")
# --name=value / --name value / NAME=value inside free text (a log line, a note, a command string)
INLINE_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)(=|[ \t]+)(\"[^\"]*\"|'[^']*'|[^\s\"']+)")
INLINE_ASSIGNMENT = re.compile(r"(?<![\w.$-])([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s\"']+)")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def name_words(name: str) -> List[str]:
    """--hf_token -> [hf, token]; WANDB_API_KEY -> [wandb, api, key]; apiKey -> [api, key]."""
    bare = name.lstrip("-")
    return [w for w in re.split(r"[-_.\s]+", _CAMEL.sub("_", bare).lower()) if w]


@functools.lru_cache(maxsize=4096)  # a report repeats its key names thousands of times
def is_secret_name(name: str) -> bool:
    words = name_words(name)
    if not words:
        return False
    return words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS


def is_placeholder(value: str) -> bool:
    """$VAR, ${VAR}, <value>, {value}, *** and our own marker: references, not secrets."""
    v = value.strip().strip("\"'")
    return (
        not v
        or v.startswith("$")
        or (v.startswith("<") and v.endswith(">"))
        or (v.startswith("{") and v.endswith("}"))
        or set(v) <= {"*", "."}
    )


def _secret_value(value: str) -> str:
    if is_placeholder(value):
        return value
    quote = value[0] if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """Free text (a log line, a note, a command string, a rendered report) with secrets replaced."""
    if not text:
        return text
    if len(text) <= 512:
        return _redact_short(text)
    return _redact_text(text)


@functools.lru_cache(maxsize=16384)  # frames and paths repeat across every rank and sample
def _redact_short(text: str) -> str:
    return _redact_text(text)


def _redact_text(text: str) -> str:
    text = URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{_secret_value(m.group(3))}@", text)
    text = TOKEN_SHAPES.sub(REDACTED, text)
    text = BEARER.sub(lambda m: f"{m.group(1)} {_secret_value(m.group(2))}", text)
    text = INLINE_OPTION.sub(
        lambda m: (
            m.group(0) if not is_secret_name(m.group(1)) else f"{m.group(1)}{m.group(2)}{_secret_value(m.group(3))}"
        ),
        text,
    )
    text = INLINE_ASSIGNMENT.sub(
        lambda m: m.group(0) if not is_secret_name(m.group(1)) else f"{m.group(1)}={_secret_value(m.group(2))}",
        text,
    )
    return text


def redact_argv(argv: Iterable[str]) -> List[str]:
    """A command line with secret values replaced: ``--hf_token X``, ``--api-key=X``, ``HF_TOKEN=X``
    (an env prefix), credentials in URLs and token-shaped values anywhere."""
    out: List[str] = []
    hide_next = False
    for raw in argv:
        arg = str(raw)
        if hide_next and not arg.startswith("-"):
            out.append(_secret_value(arg))
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-"):
            name, eq, value = arg.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"{name}={_secret_value(value)}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
            out.append(f"{name}={_redact_value(value)}" if eq else arg)
            continue
        name, eq, value = arg.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_name(name):
            out.append(f"{name}={_secret_value(value)}")
        else:
            out.append(_redact_value(arg))
    return out


def _redact_value(value: str) -> str:
    """One argument or value that is not itself named secret: only what its shape gives away."""
    value = URL_USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{_secret_value(m.group(3))}@", value)
    return TOKEN_SHAPES.sub(REDACTED, value)


def redact_command(command: str) -> str:
    """A shell command line (as text) with secrets replaced; quoting kept where it can be."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return redact_text(command)
    redacted = redact_argv(parts)
    if redacted == parts:
        return command
    return shlex.join(redacted)


def redact_env(env: Dict[str, str]) -> Dict[str, str]:
    """Variables named like secrets blanked; the others keep their value unless it shows one."""
    out = {}
    for key, value in env.items():
        text = "" if value is None else str(value)
        out[key] = _secret_value(text) if (is_secret_name(key) and text) else _redact_value(text)
    return out


ARGV_KEYS = frozenset({"cmdline", "argv", "command"})


def redact_obj(obj: Any, key: Optional[str] = None) -> Any:
    """A JSON-like structure (a report, a snapshot, an event) with every secret replaced: values of
    secret-named keys, command lines, environments, and every string's own secrets."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            k_text = str(k)
            if isinstance(v, str) and v and is_secret_name(k_text):
                out[k] = _secret_value(v)
            else:
                out[k] = redact_obj(v, k_text)
        return out
    if isinstance(obj, list):
        if key in ARGV_KEYS and all(isinstance(x, str) for x in obj):
            return redact_argv(obj)
        return [redact_obj(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(x) for x in obj)
    if isinstance(obj, str):
        return redact_command(obj) if key in ARGV_KEYS else redact_text(obj)
    return obj
